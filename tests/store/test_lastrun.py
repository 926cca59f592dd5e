"""The last-run snapshot (`lastrun`): built by columns as by rows, updated in place as rebuilt,
damaged is none, its names as bytes, and the racy-timestamp rule."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from memcli.store import lastrun
from tests.store.test_index import entry


def test_snapshot_round_trip_and_update(tmp_path: Path) -> None:
    rows = [{**entry(f"mem_{c}", f"mem_{c}.json", n), "type": "episodic" if n % 2 else "semantic"}
            for n, c in enumerate("DBCA")]
    lastrun.save_lastrun(tmp_path, rows)
    snap = lastrun.load_lastrun(tmp_path)
    assert snap is not None and snap.names == ["mem_A.json", "mem_B.json", "mem_C.json", "mem_D.json"]
    assert (snap.sizes[0], snap.mtimes[0], snap.content_hash(0)) == (3, 21, f"{3:064x}")
    assert snap.blocks[snap.block_of[0]] == ("episodic", "fact")
    fresh = [entry("mem_AB", "mem_AB.json", 9), entry("mem_B", "mem_B.json", 8)]
    lastrun.update_lastrun(tmp_path, snap, {"mem_B.json", "mem_C.json"}, fresh)
    by_update = (tmp_path / lastrun.LASTRUN_NAME).read_bytes()
    lastrun.save_lastrun(tmp_path, [rows[0], rows[3], *fresh])
    assert by_update == (tmp_path / lastrun.LASTRUN_NAME).read_bytes()


def _rows_one_by_one(tmp_path: Path, entries: list[dict[str, Any]]) -> bytes:
    """The snapshot as it was first built: a row per entry, sorted, then the columns."""
    from array import array

    rows = sorted((e["file"], int(e["size"]), int(e["mtime_ns"]), bytes.fromhex(e["content_hash"]),
                   (str(e.get("type")), str(e.get("subtype") or ""))) for e in entries)
    blocks: dict[tuple[str, str], int] = {}
    block_of = array("H", [blocks.setdefault(row[4], len(blocks)) for row in rows])
    lastrun._write_columns(tmp_path, [r[0] for r in rows], array("q", [r[1] for r in rows]),
                           array("q", [r[2] for r in rows]), b"".join(r[3] for r in rows), block_of, list(blocks))
    return (tmp_path / lastrun.LASTRUN_NAME).read_bytes()


@pytest.mark.parametrize("odd_hash", [False, True])
def test_the_snapshot_built_by_columns_is_the_one_built_by_rows(tmp_path: Path, odd_hash: bool) -> None:
    entries = [{**entry(f"mem_{n:04d}", f"mem_{n:04d}.{'md' if n % 5 == 0 else 'json'}", n),
                "type": ("episodic", "semantic", "procedural")[n % 3], "subtype": None if n % 7 == 0 else f"s{n % 4}",
                "size": float(n + 3) if n == 11 else n + 3}  # an integral float size is written as the int
               for n in reversed(range(300))]
    if odd_hash:  # 62 hex digits (an index edited by hand): decoded row by row, as before
        entries[5]["content_hash"] = entries[5]["content_hash"][:62]
    lastrun.save_lastrun(tmp_path, entries)
    by_columns = (tmp_path / lastrun.LASTRUN_NAME).read_bytes()
    assert by_columns == _rows_one_by_one(tmp_path, entries)
    snap = lastrun.load_lastrun(tmp_path)
    assert (snap is None) == odd_hash  # a row of the wrong width: no snapshot, as before


@pytest.mark.parametrize("damage", [lambda b: b[:-1], lambda b: b"XXXXX" + b[5:], lambda b: b + b"\0",
                                    lambda b: b[:20], lambda b: b""])
def test_a_damaged_snapshot_is_no_snapshot(tmp_path: Path, damage: Any) -> None:
    lastrun.save_lastrun(tmp_path, [entry("mem_A", "mem_A.json", 1), entry("mem_B", "mem_B.json", 2)])
    path = tmp_path / lastrun.LASTRUN_NAME
    path.write_bytes(damage(path.read_bytes()))
    assert lastrun.load_lastrun(tmp_path) is None


def test_a_row_as_new_as_the_snapshot_is_not_trusted(tmp_path: Path) -> None:
    """Rewritten within the timestamp granularity after the snapshot: read again (git's racy case)."""
    lastrun.save_lastrun(tmp_path, [entry("mem_A", "mem_A.json", 1)])
    snap = lastrun.load_lastrun(tmp_path)
    assert snap is not None
    assert snap.trusted(0, 1, 7) and not snap.trusted(0, 2, 7) and not snap.trusted(0, 1, 8)
    snap.written_ns = 7
    assert not snap.trusted(0, 1, 7)


def test_a_snapshots_names_as_bytes_are_its_names(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    entries = [entry(f"mem_{n:02d}", f"mem_{n:02d}.{'md' if n % 2 else 'json'}", n) for n in range(4)]
    lastrun.save_lastrun(tmp_path, entries)
    snap = lastrun.load_lastrun(tmp_path)
    assert snap is not None and snap.name_bytes() == [n.encode() for n in snap.names]
    monkeypatch.setattr(lastrun.sys, "getfilesystemencoding", lambda: "ascii")
    assert snap.name_bytes() is None  # bytes paths only where they are the names' own encoding
    monkeypatch.undo()
    built = lastrun.Snapshot(list(snap.names), snap.sizes, snap.mtimes, snap.hashes, snap.block_of, snap.blocks, 0)
    assert built.name_bytes() is None  # not read from a file: the str names are used
    lastrun.save_lastrun(tmp_path, [])
    empty = lastrun.load_lastrun(tmp_path)
    assert empty is not None and empty.names == [] and empty.name_bytes() is None
