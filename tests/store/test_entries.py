"""Which snapshot rows still describe their files, compared as whole columns (entries.py)."""

from __future__ import annotations

import os
from array import array
from pathlib import Path

from memcli.store import lastrun
from memcli.store.entries import differ_in_place


def snapshot_of(folder: Path, names: list[str], written_ns: int) -> tuple[lastrun.Snapshot, list[os.stat_result]]:
    stats = [os.lstat(folder / n) for n in names]
    snap = lastrun.Snapshot(names, array("q", [st.st_size for st in stats]), array("q", [st.st_mtime_ns for st in stats]),
                            bytes(32 * len(names)), array("H", [0] * len(names)), [("semantic", "")], written_ns)
    return snap, stats


def files(folder: Path) -> list[str]:
    names = [f"mem_{n}.json" for n in range(3)]
    for n, name in enumerate(names):
        (folder / name).write_text("x" * (n + 1))
        os.utime(folder / name, ns=(1_000_000_000 * (n + 1), 1_000_000_000 * (n + 1)))
    return names


def test_files_as_the_snapshot_saw_them_differ_in_nothing(tmp_path: Path) -> None:
    names = files(tmp_path)
    snap, stats = snapshot_of(tmp_path, names, written_ns=10_000_000_000)
    assert differ_in_place(names, list(stats), snap) == []


def test_a_size_or_an_mtime_that_moved_is_read_again(tmp_path: Path) -> None:
    names = files(tmp_path)
    snap, _ = snapshot_of(tmp_path, names, written_ns=10_000_000_000)
    (tmp_path / names[0]).write_text("yy")  # one byte longer
    os.utime(tmp_path / names[0], ns=(1_000_000_000, 1_000_000_000))  # its mtime put back
    os.utime(tmp_path / names[2], ns=(3_000_000_001, 3_000_000_001))  # one nanosecond later
    stats = [os.lstat(tmp_path / n) for n in names]
    assert differ_in_place(names, list(stats), snap) == [names[0], names[2]]


def test_an_mtime_not_older_than_the_snapshot_is_read_again(tmp_path: Path) -> None:
    """The racy case: a file written in the snapshot's own timestamp tick may have changed."""
    names = files(tmp_path)
    snap, stats = snapshot_of(tmp_path, names, written_ns=3_000_000_000)  # == the last file's mtime
    assert differ_in_place(names, list(stats), snap) == [names[2]]
    snap, stats = snapshot_of(tmp_path, names, written_ns=3_000_000_001)
    assert differ_in_place(names, list(stats), snap) == []


def test_a_gone_file_and_a_value_no_column_holds(tmp_path: Path) -> None:
    names = files(tmp_path)
    snap, stats = snapshot_of(tmp_path, names, written_ns=10_000_000_000)
    assert differ_in_place(names, [stats[0], None, stats[2]], snap) == [names[1]]
    narrow = lastrun.Snapshot(names, array("b", [1, 2, 3]), snap.mtimes, snap.hashes, snap.block_of,
                              snap.blocks, snap.written_ns)
    (tmp_path / names[1]).write_text("z" * 300)  # 300 bytes: more than a signed byte holds
    os.utime(tmp_path / names[1], ns=(2_000_000_000, 2_000_000_000))
    stats = [os.lstat(tmp_path / n) for n in names]
    assert differ_in_place(names, list(stats), narrow) == [names[1]]
