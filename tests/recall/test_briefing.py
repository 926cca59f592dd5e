"""The briefing from the folders' indices (no search index yet): the scanned fast path gives
exactly the order of a plain reading of every entry (`rank.briefing_key`)."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path
from typing import Any

import pytest

from memcli.recall import briefing, rank
from memcli.recall.uses import Pending
from memcli.store import memories
from memcli.store.store import Store
from tests.conftest import add


def reference(root: Path, rels: list[str], skip: set[str], extra: dict[str, Pending]) -> list[str]:
    """Every entry parsed, ordered by `rank.briefing_key`, ties in the folders' order; files
    without an entry read themselves; then the files checked, as the briefing does."""
    rows: list[tuple[tuple[int, int, float], str, str, str]] = []
    for rel in rels:
        folder = root / rel
        if not folder.is_dir():
            continue
        data = json.loads((folder / "_index.json").read_bytes()) if (folder / "_index.json").exists() else {}
        entries = {e["file"]: e for e in data.get("entries", [])}
        for name in sorted(n for n in os.listdir(folder) if n.endswith((".json", ".md")) and n[0] not in "._"):
            entry = entries.get(name) or briefing._read(str(folder), rel, name)
            if entry is None or entry["id"] in skip or "archived_at" in entry:
                continue
            found = extra.get(entry["id"])
            uses = max(entry.get("access_count") or 0, 0) + (found.count if found else 0)
            key = rank.briefing_key(rank.brief_rank(entry), uses, entry.get("updated_at") or entry.get("created_at"))
            rows.append((key, rel, name, entry["id"]))
    rows.sort(key=lambda r: r[0])
    out = []
    for _key, rel, name, mem_id in rows:
        record = briefing._read(str(root / rel), rel, name)
        if record is not None and record.get("id") == mem_id and "archived_at" not in record:
            out.append(mem_id)
    return out


def ours(root: Path, rels: list[str], skip: set[str], extra: dict[str, Pending]) -> list[str]:
    return [row["id"] for row in briefing._from_folder_indices(str(root), rels, skip, extra)]


def pending(count: int) -> Pending:
    p = Pending()
    p.count = count
    return p


@pytest.mark.parametrize(("seed", "disturb"), [(1, True), (2, True), (3, False), (4, False)])
def test_scanned_order_is_the_plain_order(store: Path, seed: int, disturb: bool) -> None:
    """`disturb`: files added, deleted and changed after the indices were written (each
    folder's files then differ from its index), else the indices list the files exactly."""
    rng = random.Random(seed)
    stamps = ["2026-10-01T10:00:00Z", "2026-10-01T10:00:00Z", "2026-10-30T08:00:00Z",  # day 30: not the usual form
              "2026-10-01T12:00:00+02:00", "2026-10-01T10:00:00.500Z", "2026-09-15T00:00:00Z"]
    made: list[dict[str, Any]] = []
    for n in range(60):
        fields: dict[str, Any] = {"summary": f"note {n}", "access_count": rng.choice([0, 0, 1, 2, 5]),
                                  "created_at": rng.choice(stamps[:2] + stamps[5:]),
                                  "updated_at": rng.choice([*stamps, None])}
        kind = rng.random()
        if kind < 0.08:
            fields["priority"] = "critical"
        elif kind < 0.16:
            fields["tags"] = ["deploy", rng.choice(["permanent", "protected"])]
        elif kind < 0.24:
            fields.update(type="semantic", subtype="decision")
        elif kind < 0.30:
            fields.update(created_by="USER", consent=rng.random() < 0.5)
        elif kind < 0.34:
            fields["summary"] = 'says "critical" and "decision" in its text'  # a mark only in prose
        made.append(add(store, scope_id=rng.choice(["coder", "coder", "writer"]), **fields))
    memories.reindex(Store(store))
    scan = briefing._Scan.of((store / "agent" / "coder" / "_index.json").read_bytes())
    assert scan is not None and 0 < len(scan.marked) < len(scan.files)  # the fast path, with marks
    if disturb:  # a file dropped in by hand, one deleted, one marked archived in place
        hand = add(store, summary="dropped in by hand", access_count=3)
        gone = next(m for m in made if m["scope_id"] == "coder")
        (store / "agent" / "coder" / f"{gone['id']}.json").unlink()
        arch = next(m for m in made if m["scope_id"] == "writer")
        path = store / "agent" / "writer" / f"{arch['id']}.json"
        path.write_text(json.dumps({**json.loads(path.read_text()), "archived_at": "2026-10-02T00:00:00Z"}))
    rels = ["agent/coder", "agent/writer", "global"]
    ids = [m["id"] for m in made]
    skip = set(rng.sample(ids, 5))
    extra = {mem_id: pending(rng.choice([1, 4])) for mem_id in rng.sample(ids, 6)}
    for s, e in ((set(), {}), (skip, {}), (set(), extra), (skip, extra)):
        assert ours(store, rels, s, e) == reference(store, rels, s, e)
    got = ours(store, rels, set(), {})
    assert len(got) == len(made) + (1 - 2 if disturb else 0)
    if disturb:
        assert hand["id"] in got and gone["id"] not in got and arch["id"] not in got


def test_an_index_in_another_layout_is_parsed_whole(store: Path) -> None:
    """Entries not in the store's layout (keys in another order, spaces): the same order."""
    for n in range(8):
        add(store, summary=f"note {n}", access_count=n % 3, priority="critical" if n == 5 else "normal")
    memories.reindex(Store(store))
    rels = ["agent/coder"]
    before = ours(store, rels, set(), {})
    index = store / "agent" / "coder" / "_index.json"
    data = json.loads(index.read_bytes())
    data["entries"] = [dict(reversed(list(e.items()))) for e in data["entries"]]
    index.write_text(json.dumps(data, indent=1))
    assert briefing._Scan.of(index.read_bytes()) is None
    assert ours(store, rels, set(), {}) == before == reference(store, rels, set(), {})
    assert before[0] == next(e["id"] for e in data["entries"] if e["priority"] == "critical")


def test_a_broken_index_falls_back_to_the_files(store: Path) -> None:
    """An index that is not JSON (one entry broken): neither scanned nor parsed; the files
    themselves decide."""
    a = add(store, summary="used a lot", access_count=9, priority="critical")
    b = add(store, summary="used less", access_count=1)
    memories.reindex(Store(store))
    index = store / "agent" / "coder" / "_index.json"
    raw = index.read_bytes()
    assert briefing._Scan.of(raw) is not None
    index.write_bytes(raw.replace(b'"priority":"critical"', b'"priority":"critical","x":[}'))
    assert briefing._Scan.of(index.read_bytes()) is None and briefing._entries_of(index.read_bytes()) == {}
    assert ours(store, ["agent/coder"], set(), {}) == [a["id"], b["id"]]


class _Columns:
    """The two timestamp columns of a `_Scan`, as the index's raw JSON values."""

    def __init__(self, updated: list[bytes], created: list[bytes]) -> None:
        self.updated, self.created = updated, created


@pytest.mark.parametrize("seed", range(5))
def test_recency_keys_at_once_equal_the_row_by_row_keys(seed: int) -> None:
    """The fast path (the usual quoted UTC form read off the bytes) gives what `_recency`
    gives for every form: days 29-31, zones, fractions, null, empty, non-ASCII digits,
    escapes, and rows known by a parsed entry."""
    rng = random.Random(seed)
    forms = [b'"2026-09-03T00:00:09Z"', b'"2026-02-28T23:59:59Z"', b'"2026-01-31T10:00:00Z"',
             b'"2024-02-29T12:00:00Z"', b'"2026-09-03T02:00:09+02:00"', b'"2026-09-03T00:00:09.5Z"',
             b'null', b'""', "\"2026-09-0\u0663T00:00:09Z\"".encode(), b'"2026-09-03T00:00:09\\u005a"',
             b'"2026-13-03T00:00:09Z"', b'"2026-09-03 00:00:09Z"', b'"2026-09-03T24:00:00Z"',
             b'"2026-02-30T10:00:00Z"', b'"2026-04-31T10:00:00Z"', b'"2026-04-30T10:00:00Z"',
             b'"2026-12-31T23:59:59Z"', b'"2025-02-29T10:00:00Z"', b'"0000-01-30T10:00:00Z"',
             b'"0000-01-03T10:00:00Z"', b'"9999-12-31T23:59:59Z"', b'"2026-09-03T00:00:09Z" ',
             b'"2026-09-\xff3T00:00:09Z"', b'"a"b"', b'7']
    updated = [rng.choice(forms) for _ in range(300)]
    created = [rng.choice(forms) for _ in range(300)]
    scan = _Columns(updated, created)
    group: list[Any] = []
    for at in range(300):
        if at % 17 == 0:  # a row whose entry was parsed (marked, pending uses)
            entry = {"updated_at": briefing._time_value(updated[at]),
                     "created_at": briefing._time_value(created[at])}
            group.append((0, None, "agent/coder", f"m{at}.json", 0, entry, 0))
        else:
            group.append((0, scan, "agent/coder", f"m{at}.json", at, None, 0))
    assert briefing._recency_keys(group) == [briefing._recency(row) for row in group]
    for raw in forms:  # a value decoded without json where it can be: as json decodes it
        try:
            assert briefing._time_value(raw) == json.loads(raw)
        except ValueError:
            assert briefing._time_value(raw) is None or b"\xff" in raw


@pytest.mark.parametrize(("old", "new", "scanned"), [
    (b'"priority":"critical"', b'"priority": "critical"', False),  # a mark's value not written plainly
    (b'"subtype":"decision"', b'"subtype":"d\\u0065cision"', False),  # a mark's value escaped
    (b'"tags":["deploy","permanent"]', b'"tags":["deploy","perm\\u0061nent"]', False),
    (b'"subtype":"howto"', b'"subtype":"how,to"', False),  # a comma in a value: the entry does not match
    (b'"updated_at":"2026-10-05T10:00:00Z"', b'"updated_at":"2026-10-05T10:00:00\\u005a"', True),
    (b'"updated_at":"2026-10-05T10:00:00Z"', b'"updated_at": "2026-10-05T10:00:00Z"', True),
    (b'"consent":false', b'"consent":"no"', True),
])
def test_values_written_otherwise_give_the_plain_order(store: Path, old: bytes, new: bytes, scanned: bool) -> None:
    """Each value is matched up to its comma and decoded as JSON where it is used: values
    written otherwise (spaces, escapes, another type) give the order of a plain reading,
    scanned when no mark could be misread, else parsed whole."""
    made = [add(store, summary="plain", access_count=2, subtype="howto", updated_at="2026-10-05T10:00:00Z"),
            add(store, summary="critical", priority="critical", access_count=0),
            add(store, summary="a decision", type="semantic", subtype="decision", access_count=0),
            add(store, summary="kept", tags=["deploy", "permanent"], access_count=0),
            add(store, summary="a person's", created_by="USER", consent=False, access_count=1),
            add(store, summary="newer", access_count=2, updated_at="2026-10-06T10:00:00Z")]
    memories.reindex(Store(store))
    index = store / "agent" / "coder" / "_index.json"
    raw = index.read_bytes()
    assert raw.count(old) >= 1
    index.write_bytes(raw.replace(old, new))
    assert (briefing._Scan.of(index.read_bytes()) is not None) is scanned
    rels = ["agent/coder"]
    got = ours(store, rels, set(), {})
    assert got == reference(store, rels, set(), {})
    assert sorted(got) == sorted(m["id"] for m in made)


@pytest.mark.parametrize(("names", "expected"), [
    ([], True), (["a.json", "b.md", "c.json"], True), (["b.json", "a.json"], False),
    (["_a.json", "b.json"], False), ([".a.json", "b.json"], False), (["a.json", "b.txt"], False),
    (["a.json.txt"], False), (["a.md", "a.mdx"], False), (["a.json", "a.json"], True),
])
def test_sorted_memory_names(names: list[str], expected: bool) -> None:
    assert briefing._sorted_memory_names(names) is expected
    assert expected is (names == sorted(names) and all(map(briefing._is_memory_name, names)))


@pytest.mark.parametrize("seed", range(3))
def test_recency_keys_of_the_usual_form_at_once(seed: int) -> None:
    """Every value in the usual form (or null, then the creation time's): the keys of the
    whole group are cut out at once, and equal the row-by-row keys; rows known by a parsed
    entry keep theirs. One value in another form sends the group row by row, same keys."""
    rng = random.Random(seed)
    usual = [f'"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}T{rng.randint(0, 23):02d}:'
             f'{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}Z"'.encode() for _ in range(50)]
    updated = [rng.choice([*usual, b"null"]) for _ in range(200)]
    created = [rng.choice(usual) for _ in range(200)]
    for odd in (None, b'"2026-09-03T00:00:09.5Z"', b'"2026-09-30T00:00:09Z"', b'"2026-09-03\nT00:00:09Z"'):
        if odd is not None:
            updated[rng.choice([at for at in range(200) if at % 13])] = odd
        scan = _Columns(updated, created)
        group: list[Any] = []
        for at in range(200):
            if at % 13 == 0:
                entry = {"updated_at": json.loads(updated[at]), "created_at": json.loads(created[at])}
                group.append((0, None, "agent/coder", f"m{at}.json", 0, entry, 0))
            else:
                group.append((0, scan, "agent/coder", f"m{at}.json", at, None, 0))
        keys = briefing._recency_keys(group)
        assert keys == [briefing._recency(row) for row in group]
        if odd is None:
            assert all(len(key) == 19 for key in keys)
