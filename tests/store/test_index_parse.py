"""Reading a large index a batch of entries at a time, and the planned memory's record sharing
its entry's values: each gives exactly what the whole parse and the full read give, for odd
and hostile indices too, and a damaged index is reported as before."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memcli.store import index, sigcache
from memcli.store.memories import reindex
from memcli.store.model import parse_ts
from memcli.store.store import Store
from tests import sweep
from tests.conftest import NOW, add

MOMENT = parse_ts(NOW)[0]


def entry(n: int, **extra: Any) -> dict[str, Any]:
    mem_id = f"mem_{n:05d}"
    return {"id": mem_id, "file": f"{mem_id}.json", "type": "semantic", "subtype": f"s{n % 3}",
            "tags": ["deploy", f"t{n % 4}"], "priority": "normal", "created_by": "agent:coder",
            "created_at": "2026-01-02T00:00:00Z", "updated_at": "2026-01-02T00:00:00Z" if n % 2 else None,
            "summary": f'{{"id":"mem_fake","file":"x"}} ,{{"id":"{n}"}} \u00e9 {n}', "size": n,
            "mtime_ns": n * 7, "content_hash": f"{n:064x}", **extra}


def saved(entries: list[dict[str, Any]]) -> bytes:
    return orjson.dumps(index.build("agent", "coder", entries, MOMENT), option=orjson.OPT_APPEND_NEWLINE)


@pytest.fixture
def small_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    """Batches of a few entries, from any size on: every cut and edge is exercised."""
    monkeypatch.setattr(index, "BATCH_FROM", 0)
    monkeypatch.setattr(index, "BATCH_BYTES", 700)


@pytest.mark.parametrize("count", [0, 1, 2, 3, 40])
def test_a_batched_parse_is_the_whole_parse(small_batches: None, count: int) -> None:
    raw = saved([entry(n) for n in range(count)])
    batched = index._by_batches([raw[:100], raw[100:]])
    assert batched is not None  # (the layout `save` writes: parsed by batches)
    assert batched == orjson.loads(raw) == index.parsed(raw)
    assert list(batched) == list(orjson.loads(raw))  # the header's keys in the same order


@pytest.mark.parametrize("batched", [True, False])
def test_repeated_values_are_one_object_and_equal(monkeypatch: pytest.MonkeyPatch, batched: bool) -> None:
    monkeypatch.setattr(index, "SHARE_VALUES_FROM", 0)
    monkeypatch.setattr(index, "BATCH_FROM", 0 if batched else 1 << 30)
    monkeypatch.setattr(index, "BATCH_BYTES", 700)
    entries = index.parsed(saved([entry(n) for n in range(30)]))["entries"]
    assert entries == orjson.loads(saved([entry(n) for n in range(30)]))["entries"]
    assert len({id(e["type"]) for e in entries}) == 1
    assert len({id(e["subtype"]) for e in entries}) == 3
    assert len({id(e["tags"][0]) for e in entries}) == 1
    assert all(e["updated_at"] is e["created_at"] for e in entries if e["updated_at"] is not None)
    assert len({id(e["tags"]) for e in entries}) == 30  # lists stay each entry's own


@pytest.mark.parametrize("batched", [True, False])
def test_a_smaller_index_keeps_each_entrys_own_values(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      batched: bool) -> None:
    """Below SHARE_VALUES_FROM bytes nothing is shared (a walk of every entry saved, a few MB at
    most held more); from it on, loaded from a file as parsed from bytes, the values are."""
    monkeypatch.setattr(index, "BATCH_FROM", 0 if batched else 1 << 30)
    monkeypatch.setattr(index, "BATCH_BYTES", 700)
    raw = saved([entry(n) for n in range(30)])
    (tmp_path / index.INDEX_NAME).write_bytes(raw)
    monkeypatch.setattr(index, "SHARE_VALUES_FROM", len(raw) + 1)
    for entries in (index.parsed(raw)["entries"], index.load(tmp_path)["entries"]):
        assert entries == orjson.loads(raw)["entries"]
        assert len({id(e["type"]) for e in entries}) == 30
    monkeypatch.setattr(index, "SHARE_VALUES_FROM", len(raw))
    for entries in (index.parsed(raw)["entries"], index.load(tmp_path)["entries"]):
        assert entries == orjson.loads(raw)["entries"]
        assert len({id(e["type"]) for e in entries}) == 1


# entries with objects nested in them that start as an entry does (`{"id":"`): a batch cut
# inside one makes a batch that does not parse, and the whole parse then gives the answer
nested = st.fixed_dictionaries({"id": st.text(max_size=3), "file": st.just("x")}) | st.integers(0, 9)


@settings(max_examples=sweep.scale(40, 200), deadline=None)
@given(extras=st.lists(st.lists(nested, max_size=3), max_size=12), cut=st.integers(1, 400))
def test_a_batched_parse_of_entries_holding_entry_like_objects_is_the_whole_parse(
        extras: list[list[Any]], cut: int) -> None:
    raw = saved([entry(n, odd=extra) for n, extra in enumerate(extras)])
    index.BATCH_FROM, index.BATCH_BYTES, was = 0, cut, (index.BATCH_FROM, index.BATCH_BYTES)
    try:
        assert index.parsed(raw) == orjson.loads(raw)
    finally:
        index.BATCH_FROM, index.BATCH_BYTES = was


@pytest.mark.parametrize("raw", [
    # a header with a key `entries` of its own: the last one wins, as in the whole parse
    b'{"entries":5,"version":1,"entry_count":1,"entries":[{"id":"mem_a","file":"mem_a.json"}]}\n',
    # an index in another layout (indented): parsed whole
    orjson.dumps({"version": 1, "entries": [{"id": "mem_a", "file": "mem_a.json"}]}, option=orjson.OPT_INDENT_2),
    # `,"entries":[` first met inside another key's object: no batches
    b'{"x":{"a":1,"entries":[1]},"entries":[{"id":"mem_a","file":"mem_a.json"},{"id":"mem_b","file":"b"}]}\n',
    # entries that are not objects
    b'{"version":1,"entries":[1,{"id":"mem_a"},[2]]}\n',
])
def test_odd_indices_parse_as_whole(small_batches: None, raw: bytes) -> None:
    assert index.parsed(raw) == orjson.loads(raw)


def damaged(raw: bytes) -> list[bytes]:
    middle = raw.index(b',{"id":"', len(raw) // 2)
    return [raw[:middle] + raw[middle:].replace(b'"file":', b'"file:', 1),  # a quote cut from an entry
            raw[:middle] + b",]" + raw[middle + 1:],  # a stray bracket between entries
            raw[:middle] + b"\xff" + raw[middle:],  # not UTF-8
            raw[:-3] + b"]\n",  # the end cut
            raw.replace(b'"entries":[', b'"entries":{', 1)]


def test_a_damaged_large_index_gives_the_whole_parses_error(small_batches: None, tmp_path: Path) -> None:
    for bad in damaged(saved([entry(n) for n in range(40)])):
        with pytest.raises(ValueError) as whole:
            orjson.loads(bad)
        (tmp_path / index.INDEX_NAME).write_bytes(bad)
        with pytest.raises(ValueError) as batched:
            index.load(tmp_path)
        assert str(batched.value) == str(whole.value)


def test_a_store_with_a_damaged_large_index_reports_it_and_rebuilds(store: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(index, "BATCH_FROM", 0)
    monkeypatch.setattr(index, "BATCH_BYTES", 200)
    for n in range(12):
        add(store, summary=f"Deploy note {n}: restart the worker {n} times after a config change")
    s = Store.open(str(store))
    reindex(s)
    folder = next(f for f in s.memory_folders() if f.rel == "agent/coder")
    good = index.load(folder.path)
    assert good is not None and good == orjson.loads((folder.path / index.INDEX_NAME).read_bytes())
    raw = (folder.path / index.INDEX_NAME).read_bytes()
    (folder.path / index.INDEX_NAME).write_bytes(damaged(raw)[0])
    scan = s.scan(folder, load=False)
    assert [p.code for p in scan.problems] == ["index_unreadable"]
    assert "unreadable index, rebuilt from the files" in scan.problems[0].reason
    assert sorted(e["id"] for e in scan.entries) == sorted(e["id"] for e in good["entries"])


def test_a_planned_records_shares_its_entrys_values_and_is_the_full_read(store: Path) -> None:
    for n in range(5):
        add(store, summary=f"Rotate the signing key of service {n} every ninety days", tags=["security", "keys"])
    add(store, summary="An old note", updated_at=None, tags=[])
    s = Store.open(str(store))
    reindex(s)
    for folder in s.memory_folders():
        scan = s.scan(folder, load=False)
        for mem in s.planned(folder, scan.entries):
            full = s.read_memory(folder.path / mem.name, folder).data
            assert mem.content == full["content"]  # read for its content only
            assert mem._data == full
            for key in ("type", "tags", "created_by", "created_at"):
                if full.get(key) is not None:
                    assert mem._data[key] is mem.facts[key]
            assert mem._data["scope_id"] is folder.scope_id
            assert mem.data == full  # the whole record, as a full read gives it


def test_save_sigs_writes_the_rows_sorted_in_one_width(tmp_path: Path) -> None:
    sigs = {f"{n * 7919 % 1500:064x}": bytes([n % 256]) * 16 for n in range(1500)}
    sigs[f"{1:064x}"] = b"\x01" * 8  # another width: not kept
    sigcache.save_sigs(tmp_path, sigs)
    rows = b"".join(bytes.fromhex(h) + s for h, s in sorted(sigs.items()) if len(s) == 16)
    assert (tmp_path / sigcache.SIG_NAME).read_bytes() == b"MCSG2" + (16).to_bytes(2, "little") + rows
    assert sigcache.load_sigs(tmp_path).loaded() == {h: s for h, s in sigs.items() if len(s) == 16}


@pytest.mark.parametrize("chunk", [1, 5, 12, 13, 64, 333, 100_000])
def test_loading_a_large_index_in_chunks_of_any_size_gives_the_whole_parse(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int) -> None:
    """Read a chunk at a time: cuts and the entries key straddle the chunks' edges."""
    monkeypatch.setattr(index, "BATCH_FROM", 0)
    monkeypatch.setattr(index, "BATCH_BYTES", chunk)
    raw = saved([entry(n, odd=[{"id": "x", "file": "y"}] * (n % 3)) for n in range(25)])
    (tmp_path / index.INDEX_NAME).write_bytes(raw)
    assert index.load(tmp_path) == orjson.loads(raw)


@pytest.mark.parametrize("count", [0, 1, 999, 1000, 1001, 2500])
def test_a_large_index_saved_in_pieces_is_the_whole_dump(tmp_path: Path, count: int) -> None:
    built = index.build("team", "t\u00e9am", [entry(n) for n in range(count)], MOMENT)
    index.save(tmp_path, built)
    assert (tmp_path / index.INDEX_NAME).read_bytes() == orjson.dumps(built) + b"\n"
    odd = {"entries": built["entries"], "version": 1}  # entries not last: written whole
    index.save(tmp_path, odd)
    assert (tmp_path / index.INDEX_NAME).read_bytes() == orjson.dumps(odd) + b"\n"
    alone = {"entries": built["entries"]}
    index.save(tmp_path, alone)
    assert (tmp_path / index.INDEX_NAME).read_bytes() == orjson.dumps(alone) + b"\n"


def test_entries_made_from_files_share_their_repeated_values(store: Path) -> None:
    for n in range(3):
        add(store, summary=f"Deploy with the blue-green switch, step {n}", tags=["deploy", "ops"])
    s = Store.open(str(store))
    folder = next(f for f in s.memory_folders() if f.rel == "agent/coder")
    mems = [s.read_memory(folder.path / name, folder) for name in s.memory_names(folder)]
    made = [index.entry_for(m) for m in mems]
    for key in ("type", "subtype", "priority", "created_by"):
        assert len({id(e[key]) for e in made}) == 1 and made[0][key] == mems[0].data[key]
    assert len({id(e["tags"][1]) for e in made}) == 1 and made[0]["tags"] == ["deploy", "ops"]
    archived = [index.entry_for(m, archive=True) for m in mems]
    assert [e["run_id"] for e in archived] == [m.data.get("archive_run_id") for m in mems]
