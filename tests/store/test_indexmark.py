"""indexmark: a large index's entry count, trusted only while the index is the very file marked."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import orjson
import pytest

from memcli.store import filebytes, fsops, index, indexmark
from memcli.store.model import parse_ts
from tests.conftest import NOW

MOMENT = parse_ts(NOW)[0]


def _entry(n: int) -> dict[str, Any]:
    return {"id": f"mem_{n:05d}", "file": f"mem_{n:05d}.json", "type": "semantic", "subtype": "fact",
            "tags": [f"t{n}"], "size": n, "mtime_ns": n * 7, "content_hash": f"{n:064x}",
            "run_hash": f"{n:064x}"}


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A store's agent folder holding a 40-entry index, large enough to be marked."""
    monkeypatch.setattr(indexmark, "MARK_FROM", 1)
    folder = tmp_path / "store" / "agent" / "coder"
    folder.mkdir(parents=True)
    index.save(folder, index.build("agent", "coder", [_entry(n) for n in range(0, 80, 2)], MOMENT))
    return folder


def _mark(folder: Path) -> Path:
    return folder.parents[1] / ".cache" / "folders" / "agent" / "coder" / indexmark.MARK_NAME


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> list[int | None]:
    """The `known` count each `_Entries.of` call got (None: the entries were counted)."""
    calls: list[int | None] = []
    real = index._Entries.of

    def of(cls: type, raw: bytes, known: int | None = None) -> Any:
        calls.append(known)
        return real(raw, known)

    monkeypatch.setattr(index._Entries, "of", classmethod(of))
    return calls


def _splice_and_check(folder: Path, tmp_path: Path) -> None:
    """Splice a change, a new entry and a removal; the bytes must be a full rewrite's."""
    expected = {e["file"]: e for e in (_entry(n) for n in range(0, 80, 2))}
    expected["mem_00004.json"] = {**_entry(4), "size": 999}
    expected["mem_00005.json"] = _entry(5)
    del expected["mem_00010.json"]
    names = ["mem_00004.json", "mem_00005.json", "mem_00010.json"]
    assert index.splice(folder, "agent", "coder", MOMENT, lambda name, _old: expected.get(name), names)
    full = tmp_path / "full"
    full.mkdir(exist_ok=True)
    index.save(full, index.build("agent", "coder", list(expected.values()), MOMENT))
    assert (folder / index.INDEX_NAME).read_bytes() == (full / index.INDEX_NAME).read_bytes()


def test_a_saved_index_is_marked_and_a_splice_takes_its_count_from_the_mark(
        folder: Path, tmp_path: Path, counted: list[int | None]) -> None:
    st = os.lstat(folder / index.INDEX_NAME)
    mark = orjson.loads(_mark(folder).read_bytes())
    assert mark == {"index": [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns], "count": 40}
    _splice_and_check(folder, tmp_path)
    assert counted == [40]  # not counted: the mark's
    st = os.lstat(folder / index.INDEX_NAME)  # the spliced index is marked in turn
    assert orjson.loads(_mark(folder).read_bytes())["index"] == indexmark.identity(st)
    assert orjson.loads(_mark(folder).read_bytes())["count"] == 40  # (one in, one out)


def test_no_mark_a_damaged_one_or_one_of_another_file_and_the_entries_are_counted(
        folder: Path, tmp_path: Path, counted: list[int | None]) -> None:
    mark = _mark(folder)
    for damage in ("missing", "garbage", "not an object", "large", "bad count", "negative"):
        index.save(folder, index.build("agent", "coder", [_entry(n) for n in range(0, 80, 2)], MOMENT))
        ident = indexmark.identity(os.lstat(folder / index.INDEX_NAME))
        if damage == "missing":
            mark.unlink()
        else:
            mark.write_bytes({"garbage": b"\x00{not json", "not an object": b"[1, 2]", "large": b" " * 10_000,
                              "bad count": orjson.dumps({"index": ident, "count": "40"}),
                              "negative": orjson.dumps({"index": ident, "count": -1})}[damage])
        st = os.lstat(folder / index.INDEX_NAME)
        assert indexmark.known_count(folder, "agent", "coder", st) is None, damage
        counted.clear()
        _splice_and_check(folder, tmp_path)
        assert counted == [None], damage


def test_a_stale_mark_of_an_earlier_index_is_not_trusted(folder: Path, tmp_path: Path,
                                                          counted: list[int | None]) -> None:
    """The index replaced since (a new inode), or edited in place with its mtime put back
    (ctime moves): the mark names another file."""
    old_mark = _mark(folder).read_bytes()
    index.save(folder, index.build("agent", "coder", [_entry(n) for n in range(0, 80, 2)], MOMENT))
    _mark(folder).write_bytes(old_mark)
    _splice_and_check(folder, tmp_path)
    assert counted == [None]
    # in place: the same inode and size, the mtime put back; only the ctime tells
    counted.clear()
    index.save(folder, index.build("agent", "coder", [_entry(n) for n in range(0, 80, 2)], MOMENT))
    path = folder / index.INDEX_NAME
    before = os.lstat(path)
    with open(path, "r+b") as handle:  # the same bytes written over themselves
        handle.write(path.read_bytes())
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = os.lstat(path)
    assert (after.st_ino, after.st_size, after.st_mtime_ns) == (before.st_ino, before.st_size, before.st_mtime_ns)
    if after.st_ctime_ns != before.st_ctime_ns:  # (a file system whose ctime did not tick: nothing to see)
        assert indexmark.known_count(folder, "agent", "coder", after) is None
        _splice_and_check(folder, tmp_path)
        assert counted == [None]


def test_a_lying_mark_whose_count_is_not_the_headers_falls_back_to_counting(
        folder: Path, tmp_path: Path, counted: list[int | None]) -> None:
    st = os.lstat(folder / index.INDEX_NAME)
    _mark(folder).write_bytes(orjson.dumps({"index": indexmark.identity(st), "count": 41}))
    assert indexmark.known_count(folder, "agent", "coder", st) == 41  # the mark as it is ...
    _splice_and_check(folder, tmp_path)
    assert counted == [41, None]  # ... disagrees with the header: counted, and the splice is exact


def test_no_mark_for_a_small_index_or_a_folder_not_where_its_scope_says(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "store" / "agent" / "coder"
    folder.mkdir(parents=True)
    index.save(folder, index.build("agent", "coder", [_entry(1)], MOMENT))  # (MARK_FROM: 1 MB)
    assert not (tmp_path / "store" / ".cache").exists()
    monkeypatch.setattr(indexmark, "MARK_FROM", 1)
    elsewhere = tmp_path / "somewhere"
    elsewhere.mkdir()
    index.save(elsewhere, index.build("agent", "coder", [_entry(1)], MOMENT))
    assert indexmark.mark_path(elsewhere, "agent", "coder") is None
    assert not list(tmp_path.rglob(indexmark.MARK_NAME))
    archive = tmp_path / "store" / "archive"
    archive.mkdir()
    index.save(archive, index.build("archive", "archive", [_entry(1)], MOMENT))
    assert (tmp_path / "store" / ".cache" / "folders" / "archive" / indexmark.MARK_NAME).exists()


def test_session_end_passes_with_every_index_marked_leave_what_a_rebuild_gives(
        store: Path, monkeypatch: pytest.MonkeyPatch, counted: list[int | None]) -> None:
    """Through real runs: the full run marks the indices it saves, each session-end pass
    splices with the marks' counts and marks its own indices; every index stays what a
    rebuild from the files gives."""
    from memcli.consolidate import engine
    from memcli.store.store import Store
    from tests.conftest import add, assert_invariants, days_ago

    monkeypatch.setattr(indexmark, "MARK_FROM", 1)
    dup = "Restart the payments worker after every config change to the staging cluster"
    add(store, summary=dup, created_at=days_ago(40))
    for n in range(30):
        add(store, summary=f"fact number {n} about the {n * 7} servers in rack {n % 5}")
    add(store, summary="never used", access_count=0, tags=["old"])  # archived: archive/ gets an index
    engine.consolidate(Store(store))
    for rel in ("agent/coder", "archive"):
        st = os.lstat(store / rel / index.INDEX_NAME)
        assert indexmark.known_count(store / rel, *(rel.split("/") if "/" in rel else (rel, rel)), st) is not None
    for word in ("again", "today"):
        add(store, summary=f"{dup} {word}", created_at=days_ago(10))
        add(store, summary=f"a hand-written note that stays {word}", created_at=days_ago(9))
        counted.clear()
        out = engine.consolidate(Store(store), trigger="session_end")
        assert "merge" in [a["type"] for a in out.actions]  # (archive/ is spliced too)
        assert counted and None not in counted  # every splice took its count from a mark
        assert_invariants(store)
        for rel in ("agent/coder", "archive"):
            saved = orjson.loads((store / rel / index.INDEX_NAME).read_bytes())
            s = Store(store)
            folder = s.folder_by_rel(rel)
            assert folder is not None
            assert saved["entries"] == s.scan(folder, load=True).entries, rel
            assert saved["entry_count"] == len(saved["entries"])


def test_an_index_saved_in_pieces_is_marked_with_its_size_and_count(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, counted: list[int | None]) -> None:
    """An index past `index.SAVE_BATCH` entries is written a batch at a time: its mark still
    names the file written, with every entry counted, and a splice takes the count from it."""
    monkeypatch.setattr(indexmark, "MARK_FROM", 1)
    monkeypatch.setattr(index, "SAVE_BATCH", 7)
    folder = tmp_path / "store" / "agent" / "coder"
    folder.mkdir(parents=True)
    index.save(folder, index.build("agent", "coder", [_entry(n) for n in range(0, 80, 2)], MOMENT))
    st = os.lstat(folder / index.INDEX_NAME)
    assert orjson.loads(_mark(folder).read_bytes()) == {"index": indexmark.identity(st), "count": 40}
    _splice_and_check(folder, tmp_path)
    assert counted == [40]


@pytest.mark.parametrize("page", [7, 64, 1 << 14])
@pytest.mark.parametrize("kernel_copy", [True, False])
def test_a_marked_index_spliced_through_pages_and_copied_spans_is_a_full_rewrites_bytes(
        folder: Path, tmp_path: Path, counted: list[int | None], monkeypatch: pytest.MonkeyPatch,
        page: int, kernel_copy: bool) -> None:
    """Small pages make every search of the splice cross page edges; with the kernel's copy
    refused, the spans go through memory: the bytes are the same either way."""
    monkeypatch.setattr(filebytes, "PAGE", page)
    monkeypatch.setattr(fsops, "_copy_range", kernel_copy and hasattr(os, "copy_file_range"))
    _splice_and_check(folder, tmp_path)
    assert counted == [40]  # the paged path: the mark's count, no whole read


def test_an_index_written_in_place_while_it_is_spliced_is_left_to_the_hand_that_wrote_it(
        folder: Path, tmp_path: Path) -> None:
    """The spans copy from the file as it is: one edited in place meanwhile (not what memcli
    does; a hand may) fails the splice before anything is renamed (the caller rebuilds)."""
    path = folder / index.INDEX_NAME
    edited = path.read_bytes().replace(b'"t6"', b'"t66"')  # (its size tells, whatever the clock's grain)

    def update(name: str, old: dict[str, Any] | None) -> dict[str, Any] | None:
        with open(path, "r+b") as handle:  # in place
            handle.write(edited)
        return {**_entry(4), "size": 999}

    assert not index.splice(folder, "agent", "coder", MOMENT, update, ["mem_00004.json"])
    assert path.read_bytes() == edited
    assert sorted(p.name for p in folder.iterdir()) == [index.INDEX_NAME]


def test_an_index_that_cannot_be_read_is_not_spliced_and_left_as_it_is(
        folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A read error mid-search (an I/O error of the disk) is no splice: nothing is written
    and the caller rebuilds the index from the files, as for any index it cannot splice."""
    path = folder / index.INDEX_NAME
    before = path.read_bytes()

    def failing(fd: int, size: int, offset: int) -> bytes:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "pread", failing)
    assert not index.splice(folder, "agent", "coder", MOMENT, lambda name, old: {**_entry(4), "size": 1},
                            ["mem_00004.json"])
    assert path.read_bytes() == before
    assert sorted(p.name for p in folder.iterdir()) == [index.INDEX_NAME]
