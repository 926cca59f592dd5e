"""`scan_since` with the last rows of a snapshot stat'ed by another process (`tail`)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from memcli.consolidate import engine
from memcli.store import lastrun
from memcli.store.scanning import differ_rows
from memcli.store.store import FolderScan, Store
from tests.conftest import add


def _folder_after_a_run(store: Path, count: int = 8) -> tuple[Store, Any, lastrun.Snapshot]:
    for _ in range(count):
        add(store, scope_id="a0")
    engine.consolidate(Store(store))
    s = Store(store)
    folder = next(f for f in s.memory_folders() if f.rel == "agent/a0")
    snap = lastrun.load_lastrun(folder.cache())
    assert snap is not None and len(snap.names) == count
    return s, folder, snap


def _edit(path: Path) -> None:
    path.write_bytes(path.read_bytes().replace(b'"summary": "', b'"summary": "edited, '))


def _seen(scan: FolderScan) -> tuple[Any, ...]:
    return (sorted(e["id"] for e in scan.entries), sorted(scan.memories), scan.reread, scan.kept,
            scan.count, [p.code for p in scan.problems], scan.stamp)


def test_a_tail_stat_elsewhere_gives_the_scan_of_a_whole_one(store: Path) -> None:
    s, folder, snap = _folder_after_a_run(store)
    _edit(folder.path / snap.names[1])  # in the rows before the tail
    _edit(folder.path / snap.names[6])  # in the tail
    add(store, scope_id="a0")  # a file came: the listed scan
    whole = _seen(s.scan_since(folder, snap))
    assert len(whole[2]) == 3
    stats = [os.lstat(folder.path / n) for n in snap.names]
    found = differ_rows(snap, 4, stats[4:])  # what a worker finds of rows 4 on
    assert found == [6] and differ_rows(snap, 0, stats) == [1, 6]
    calls: list[int] = []

    def reports(*answers: tuple[int, list[int]] | None) -> Callable[[], tuple[int, list[int]] | None]:
        def call() -> tuple[int, list[int]] | None:
            calls.append(1)
            return answers[min(len(calls) - 1, len(answers) - 1)]
        return call

    cases = [
        reports((8, found)),  # all done there
        reports((4, [])),  # nothing reported: every row stat'ed here, from the last back
        reports((5, []), (6, []), (7, [6])),  # they meet (row 6 from the worker: it differs)
        reports((5, []), None),  # a doubt: the rest here
        reports(None),
    ]
    for tail in cases:
        calls.clear()
        assert _seen(s.scan_since(folder, snap, None, (4, tail))) == whole
        assert calls
    assert _seen(s.scan_since(folder, snap, None, (0, reports((8, [1, 6]))))) == whole
    assert _seen(s.scan_since(folder, snap, None, (8, reports(None)))) == whole  # (an empty part)


def test_a_file_gone_or_bad_in_a_tail_is_found_as_in_a_whole_scan(store: Path) -> None:
    s, folder, snap = _folder_after_a_run(store)
    add(store, scope_id="a0")
    (folder.path / snap.names[6]).write_bytes(b"{not json")
    whole = _seen(s.scan_since(folder, snap))
    assert _seen(s.scan_since(folder, snap, None, (4, lambda: None))) == whole
    assert _seen(s.scan_since(folder, snap, None, (4, lambda: (4, [])))) == whole
    assert s.stat_rows(folder, snap, 4, 8) == [6]
    os.unlink(folder.path / snap.names[7])  # gone: not the worker's to say (a doubt)
    assert s.stat_rows(folder, snap, 4, 8) is None and s.stat_rows(folder, snap, 0, 4) == []
