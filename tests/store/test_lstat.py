"""The lstat of a folder's files in C (memcli/store/_lstat.c) against os.lstat: the same mode,
size and mtime for every kind of file and any time, the same errors, and the same scans with
it as without it."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memcli.consolidate import engine
from memcli.store import lastrun, scanning
from memcli.store.store import Store
from tests.conftest import add

_C: Any = scanning._lstat
needs_c = pytest.mark.skipif(_C is None, reason="the C extension was not built (no compiler at install)")


@pytest.fixture
def folder(tmp_path: Path) -> Iterator[tuple[Path, int]]:
    here = tmp_path / "f"
    here.mkdir()
    fd = os.open(here, os.O_RDONLY | os.O_DIRECTORY)
    try:
        yield here, fd
    finally:
        os.close(fd)


def _triple(st: Any) -> tuple[int, int, int]:
    return st.st_mode, st.st_size, st.st_mtime_ns


@needs_c
def test_every_kind_of_file_and_any_time_as_os_lstat_gives_it(folder: tuple[Path, int]) -> None:
    here, fd = folder
    (here / "plain.json").write_text("{}")
    (here / "empty.json").write_bytes(b"")
    (here / "sub").mkdir()
    os.symlink("plain.json", here / "link.json")  # the link itself, never what it names
    os.symlink("nowhere", here / "dangling.json")
    os.mkfifo(here / "fifo.json")
    with open(here / "sparse.json", "wb") as handle:  # over 4 GB: a size past 32 bits
        handle.truncate(5 * 1024**3)
    times = {"future.json": 32_503_680_000 * 10**9 + 123,  # year 3000: past int64 nanoseconds
             "past.json": -2_208_988_800 * 10**9 + 999_999_999,  # 1900, before the epoch
             "odd.json": 1_795_486_150_810_141_516}
    for name, ns in times.items():
        (here / name).write_text("x")
        os.utime(here / name, ns=(ns, ns))
    names = sorted(os.listdir(here))
    got = _C.lstat_all(fd, names)
    assert [_triple(st) for st in got] == [_triple(os.lstat(name, dir_fd=fd)) for name in names]
    assert {n: st.st_mtime_ns for n, st in zip(names, got, strict=True) if n in times} == times
    assert stat.S_ISLNK(got[names.index("link.json")].st_mode)
    assert got[names.index("sparse.json")].st_size == 5 * 1024**3
    assert _C.lstat_all(fd, []) == []


@needs_c
def test_bytes_and_str_names_the_way_os_fsencode_has_them(folder: tuple[Path, int]) -> None:
    here, fd = folder
    raw = b"mem_\xff.json"  # not UTF-8: the str form holds a lone surrogate
    with open(os.path.join(os.fsencode(here), raw), "w") as handle:
        handle.write("{}")
    (here / "mem_é.json").write_text("{}")
    names = [raw, os.fsdecode(raw), "mem_é.json", "mem_é.json".encode()]
    assert [_triple(st) for st in _C.lstat_all(fd, names)] == [_triple(os.lstat(n, dir_fd=fd)) for n in names]


@needs_c
def test_path_like_names_and_one_that_empties_the_list(folder: tuple[Path, int]) -> None:
    here, fd = folder
    (here / "a.json").write_text("{}")
    names: list[Any] = []

    class Emptying:  # (its __fspath__ empties the list being read: the copy is read)
        def __fspath__(self) -> str:
            names.clear()
            return "a.json"

    names += [Emptying(), Path("a.json"), "a.json"]
    got = _C.lstat_all(fd, names)
    assert [_triple(st) for st in got] == [_triple(os.lstat("a.json", dir_fd=fd))] * 3 and names == []


@needs_c
def test_the_errors_os_lstat_raises(folder: tuple[Path, int]) -> None:
    here, fd = folder
    (here / "a.json").write_text("{}")
    with pytest.raises(FileNotFoundError) as gone:
        _C.lstat_all(fd, ["a.json", "gone.json", "a.json"])
    assert gone.value.filename == "gone.json"
    with pytest.raises(NotADirectoryError):
        _C.lstat_all(fd, ["a.json/inside"])
    with pytest.raises(ValueError):
        _C.lstat_all(fd, ["a\0.json"])
    with pytest.raises(TypeError):
        _C.lstat_all(fd, [1])
    with pytest.raises(TypeError):
        _C.lstat_all(fd, ("a.json",))
    with pytest.raises(OSError):
        _C.lstat_all(-5, ["a.json"])  # (not an open folder)


def _scans(store: Path) -> list[Any]:
    s = Store(store)
    out: list[Any] = []
    for f in s.memory_folders():
        scan = s.scan(f, load=False, entries=False, compare=False)
        out.append((f.rel, sorted(e["id"] for e in scan.entries), sorted(scan.memories),
                    [p.code for p in scan.problems]))
        snap = lastrun.load_lastrun(f.cache())
        if snap is not None:
            since = s.scan_since(f, snap)
            out.append((sorted(e["id"] for e in since.entries), sorted(since.memories), since.reread,
                        since.kept, since.count, [p.code for p in since.problems]))
    return out


@pytest.mark.parametrize("change", ["none", "edited", "gone", "link", "added"])
def test_scans_are_the_same_with_the_c_loop_or_without(store: Path, change: str,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    for _ in range(6):
        add(store, scope_id="a0")
    engine.consolidate(Store(store))
    names = sorted(p.name for p in (store / "agent" / "a0").glob("mem_*"))
    target = store / "agent" / "a0" / names[2]
    if change == "edited":
        target.write_bytes(target.read_bytes().replace(b'"summary": "', b'"summary": "edited, '))
    elif change == "gone":
        target.unlink()
    elif change == "link":
        target.unlink()
        target.symlink_to(store / "agent" / "a0" / names[3])
    elif change == "added":
        add(store, scope_id="a0")
    with_c = _scans(store)
    assert any(since for since in with_c if len(since) == 6)  # (the snapshot's scans are in)
    monkeypatch.setattr(scanning, "_lstat", None)
    assert _scans(store) == with_c
