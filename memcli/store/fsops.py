"""The one layer through which every file-system change goes (SPEC section 8).

Each change (create a temporary file, replace, rename, link, unlink, mkdir) is counted, so
that `MEMCLI_CRASH_AT=N` can end the process abruptly just before the Nth one: the crash
tests use it to prove that a run which dies anywhere is recovered by the next command.
Writes are atomic: temporary file in the same folder, flush, fsync, rename into place,
fsync of the folder. A new file never overwrites an existing name.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterator
from pathlib import Path

TMP_SUFFIX = ".tmp"
_changes = 0


def change_count() -> int:
    """How many file-system changes this process has made (for tests and benchmarks)."""
    return _changes


def _change() -> None:
    """Count one change; crash just before it when `MEMCLI_CRASH_AT` says so."""
    global _changes
    _changes += 1
    crash_at = os.environ.get("MEMCLI_CRASH_AT")
    if crash_at and crash_at.isdigit() and _changes == int(crash_at):
        os._exit(70)  # abrupt on purpose: no clean-up, no flush, like a power cut


def fsync_dir(folder: Path) -> None:
    """Make a rename or a new name in `folder` durable."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_tmp(folder: Path, name: str, data: bytes) -> Path:
    tmp = folder / f".{name}.{secrets.token_hex(4)}{TMP_SUFFIX}"
    _change()
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return tmp


def write_replace(path: Path, data: bytes) -> None:
    """Atomically write `path`, replacing it if it exists (rewrites of the same file)."""
    tmp = _write_tmp(path.parent, path.name, data)
    _change()
    os.replace(tmp, path)
    fsync_dir(path.parent)


def append(path: Path, data: bytes) -> None:
    """Add bytes at the end of an existing cache file, durably. Not atomic: only for caches
    whose reader drops a torn last record (see `index.load_sigs`)."""
    _change()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | getattr(os, "O_NOFOLLOW", 0))
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def write_new(path: Path, data: bytes) -> None:
    """Atomically create `path`; FileExistsError if the name is taken (never overwrites)."""
    tmp = _write_tmp(path.parent, path.name, data)
    try:
        _change()
        os.link(tmp, path)  # link() fails if the name exists: no window to overwrite
    finally:
        _change()
        os.unlink(tmp)
    fsync_dir(path.parent)


def move(src: Path, dst: Path) -> None:
    """Move a file to a new name that must not exist yet, durably."""
    _change()
    os.link(src, dst)
    fsync_dir(dst.parent)
    _change()
    os.unlink(src)
    fsync_dir(src.parent)


def unlink(path: Path) -> None:
    """Remove a file memcli owns (a journal, a temporary file); never a memory."""
    _change()
    os.unlink(path)
    fsync_dir(path.parent)


def mkdir(path: Path) -> None:
    """Create a folder and any missing parents, each counted as a change."""
    missing: list[Path] = []
    probe = path
    while not probe.exists():
        missing.append(probe)
        probe = probe.parent
    for folder in reversed(missing):
        _change()
        with contextlib.suppress(FileExistsError):
            os.mkdir(folder)
        fsync_dir(folder.parent)


def ensure_parent(path: Path) -> None:
    if not path.parent.exists():
        mkdir(path.parent)


def leftover_tmp_files(root: Path) -> Iterator[Path]:
    """Temporary files a crashed writer left behind (doctor reports and removes them)."""
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            if name.startswith(".") and name.endswith(TMP_SUFFIX):
                yield Path(dirpath) / name
