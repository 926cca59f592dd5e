"""The one layer through which every file-system change goes (SPEC section 8).

Each change (create a temporary file, replace, rename, link, unlink, mkdir) is counted, so
that `MEMCLI_CRASH_AT=N` can end the process abruptly just before the Nth one: the crash
tests use it to prove that a run which dies anywhere is recovered by the next command.
Writes are atomic: temporary file in the same folder, flush, fsync, rename into place,
fsync of the folder. A new file never overwrites an existing name.

Nothing memcli writes, moves or unlinks resolves outside the store. A store registers its
root here (`confine`); a change inside one of its own folders (agent/, team/, global/,
archive/, ops/, .cache/) is made relative to a folder descriptor reached from the root one
component at a time with `O_NOFOLLOW | O_DIRECTORY`, so a symlink anywhere below the root
(or a folder swapped for one mid-run) is refused with `UnsafePathError` instead of being
followed. A path with a `..` component is refused everywhere. Where the platform has no
`*at()` calls, each component is checked with `lstat` before the change instead.

Reads of the store's files go through `read_bytes`: never through a link, never blocking on
a FIFO or a device, never anything but a regular file.
"""

from __future__ import annotations

import _thread
import contextlib
import errno
import os
import stat
from collections.abc import Iterable, Iterator
from pathlib import Path

from memcli.errors import UnsafePathError
from memcli.store import letgo

TMP_SUFFIX = ".tmp"
# The store's own folders: everything below them is reached without following a link.
STORE_FOLDERS = frozenset({"agent", "team", "global", "archive", "ops", ".cache"})
_changes = 0
_roots: set[str] = set()  # absolute store roots registered by `confine`
_unsynced: set[Path] | None = None  # while a Staged batch commits: folders whose fsync waits
# within `one_barrier`, per thread (in-process recoveries run side by side in tests): files
# replaced, made durable at its end
_deferred: dict[int, list[Path]] = {}
# within `one_barrier`, per thread: files written (path, temporary name) whose rename waits for
# its barrier (`renamed_after_barrier`); `_renaming` holds the list while writes go there
_late_names: dict[int, list[tuple[Path, str]]] = {}
_renaming: dict[int, list[tuple[Path, str]]] = {}

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
NOFOLLOW = bool(_NOFOLLOW)  # whether opening a name refuses a symlink (ELOOP)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
# Changes relative to a folder descriptor need openat, mkdirat, unlinkat, linkat, renameat.
_AT = bool(_NOFOLLOW and _DIRECTORY) and {os.open, os.mkdir, os.unlink, os.link,
                                             os.rename} <= os.supports_dir_fd


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


def confine(root: Path) -> None:
    """Register a store root: changes inside its own folders never follow a link."""
    _roots.add(os.path.abspath(root))


# ---------------------------------------------------------------- folders, safely


class _Dir:
    """An open folder: names of changes are relative to its descriptor (or, without `*at()`
    support, full paths checked component by component beforehand)."""

    def __init__(self, folder: Path) -> None:
        self.path = folder
        self.fd = _open_dir(folder)

    def at(self, name: str) -> str:
        return name if _AT else str(self.path / name)

    @property
    def dir_fd(self) -> int | None:
        return self.fd if _AT else None

    def sync(self) -> None:
        os.fsync(self.fd)

    def close(self) -> None:
        os.close(self.fd)


# While a Staged batch stages or commits: the folders it opened, each reached safely once (a
# run of thousands of actions opened the same few folders, component by component, 5 times
# an action). Every change still goes through a descriptor reached without following a link.
_held: dict[Path, _Dir] | None = None


@contextlib.contextmanager
def _folder(folder: Path) -> Iterator[_Dir]:
    if _held is not None:
        handle = _held.get(folder)
        if handle is None:
            handle = _held[folder] = _Dir(folder)
        yield handle
        return
    handle = _Dir(folder)
    try:
        yield handle
    finally:
        handle.close()


def _absolute(path: Path) -> str:
    if ".." in path.parts:
        raise UnsafePathError(f"{path}: a path with '..' in it; memcli never writes through one")
    return os.path.abspath(path)


def _store_part(path: str) -> tuple[str, list[str]] | None:
    """(root, components below it) when `path` lies in a registered store's own folders."""
    probe = path
    while True:
        parent = os.path.dirname(probe)
        if probe in _roots:
            parts = [p for p in path[len(probe):].split(os.sep) if p]
            return (probe, parts) if parts and parts[0] in STORE_FOLDERS else None
        if parent == probe:
            return None
        probe = parent


def _open_dir(folder: Path) -> int:
    """A descriptor on `folder`. Inside a store's own folders it is reached from the root
    without following any link; elsewhere (a folder the user named) links are followed."""
    path = _absolute(folder)
    inside = _store_part(path)
    if inside is None:
        return os.open(path, os.O_RDONLY | _DIRECTORY | _CLOEXEC)
    root, parts = inside
    if not _AT:
        _check_components(root, parts)
        return os.open(path, os.O_RDONLY | _DIRECTORY | _CLOEXEC)
    fd = os.open(root, os.O_RDONLY | _DIRECTORY | _CLOEXEC)
    for depth, part in enumerate(parts):
        try:
            child = os.open(part, os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC, dir_fd=fd)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
                raise _unsafe(root, parts[:depth + 1]) from None
            raise
        finally:
            os.close(fd)
        fd = child
    return fd


def _check_components(root: str, parts: list[str]) -> None:
    probe = root
    for depth, part in enumerate(parts):
        probe = os.path.join(probe, part)
        try:
            st = os.lstat(probe)
        except FileNotFoundError:
            return  # the change itself reports the missing folder
        if not stat.S_ISDIR(st.st_mode):
            raise _unsafe(root, parts[:depth + 1])


def _unsafe(root: str, parts: list[str]) -> UnsafePathError:
    rel = "/".join(parts)
    full = os.path.join(root, *parts)
    what = "a symlink" if os.path.islink(full) else "not a folder"
    return UnsafePathError(f"{rel} is {what} (in the store {root}); memcli never writes through "
                           "links or into anything but a real folder: move it aside and run again")


def fsync_dir(folder: Path) -> None:
    """Make a rename or a new name in `folder` durable."""
    with _folder(folder) as handle:
        handle.sync()


# ---------------------------------------------------------------- changes


class SpanChangedError(OSError):
    """The file a `Span` copies from ended before the span did: it changed meanwhile."""


class Span:
    """A piece of data to write that is a run of another open file's bytes (`length` bytes
    from `offset` of descriptor `fd`), copied file to file by the kernel where it can
    (`copy_file_range`): splicing a 5-6 MB index this way neither reads it into memory nor
    writes it back from there (the read alone took 1,300 page faults, 4-5 ms, a splice)."""

    __slots__ = ("fd", "offset", "length")

    def __init__(self, fd: int, offset: int, length: int) -> None:
        self.fd, self.offset, self.length = fd, offset, length

    def __len__(self) -> int:
        return self.length

    def copy_to(self, dst: int) -> None:
        """Append the span to `dst` at its position; SpanChangedError when the source ends
        first. Where the kernel cannot copy (another platform, a file system that refuses),
        the bytes go through memory a megabyte at a time."""
        global _copy_range
        offset, left = self.offset, self.length
        while left:
            done = 0
            if _copy_range:
                try:
                    done = os.copy_file_range(self.fd, dst, left, offset)
                except OSError as exc:
                    if exc.errno not in (errno.EXDEV, errno.ENOSYS, errno.EOPNOTSUPP, errno.EINVAL,
                                         errno.EPERM, errno.ETXTBSY):
                        raise
                    _copy_range = False
            if done <= 0:  # (0 from a file system that copies nothing: read and write instead)
                chunk = os.pread(self.fd, min(left, 1 << 20), offset)
                if not chunk:
                    raise SpanChangedError(errno.EIO, "the file copied from ended before its span")
                view, done = memoryview(chunk), 0
                while done < len(chunk):
                    done += os.write(dst, view[done:])
            offset += done
            left -= done


_copy_range = hasattr(os, "copy_file_range")  # until the kernel refuses it once
SPANS = hasattr(os, "pread")  # whether a Span can be written here (its fallback reads with pread)
Piece = bytes | memoryview | Span  # what a file is written from, piece by piece


def _mode_of(handle: _Dir, name: str) -> int | None:
    """The permission bits of an existing regular file, to keep them when it is rewritten."""
    try:
        st = os.stat(handle.at(name), dir_fd=handle.dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None
    return stat.S_IMODE(st.st_mode) if stat.S_ISREG(st.st_mode) else None


def _write_tmp(handle: _Dir, name: str, data: bytes | Iterable[Piece], mode: int | None = None,
               sync: bool = True) -> str:
    tmp = f".{name}.{os.urandom(4).hex()}{TMP_SUFFIX}"  # secrets.token_hex(4) (its import: 3-8 ms a hook)
    _change()
    fd = os.open(handle.at(tmp), os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, 0o644,
                 dir_fd=handle.dir_fd)
    try:
        if isinstance(data, bytes):  # (a memory: written as it is, no file object around it)
            try:
                if mode is not None:
                    os.fchmod(fd, mode)  # a rewrite keeps the file's mode (0600 stays 0600)
                view, done = memoryview(data), 0
                while done < len(data):
                    done += os.write(fd, view[done:])
                if sync:  # (a Staged batch makes its temporary files durable all at once)
                    os.fsync(fd)
            finally:
                os.close(fd)
        else:
            with os.fdopen(fd, "wb") as out:
                if mode is not None:
                    os.fchmod(out.fileno(), mode)
                for piece in data:  # pieces as they are made: a large scratch file is never whole in memory
                    if isinstance(piece, Span):
                        out.flush()  # (the span goes after the bytes written so far)
                        piece.copy_to(out.fileno())
                    else:
                        out.write(piece)
                out.flush()
                if sync:
                    os.fsync(out.fileno())
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(handle.at(tmp), dir_fd=handle.dir_fd)
        raise
    return tmp


def write_replace(path: Path, data: bytes | Iterable[Piece], durable: bool = True) -> None:
    """Atomically write `path`, replacing it if it exists (rewrites of the same file).
    The file keeps its permission bits. durable=False: no fsync (still atomic: a reader sees
    the old bytes or the new, whole), for a scratch file only its own process reads, which a
    crash may leave stale or lose (see `memcli.store.planned`)."""
    if durable and (staged := _renaming.get(_thread.get_ident())) is not None:
        with _folder(path.parent) as handle:  # the bytes only: renamed after the barrier
            tmp = _write_tmp(handle, path.name, data, _mode_of(handle, path.name), sync=False)
        staged.append((path, tmp))
        return
    later = _deferred.get(_thread.get_ident()) if durable else None
    with _folder(path.parent) as handle:
        tmp = _write_tmp(handle, path.name, data, _mode_of(handle, path.name), sync=durable and later is None)
        _rename_over(handle, tmp, path.name)
        if later is not None:
            later.append(path)
        elif durable:
            handle.sync()


def _rename_over(handle: _Dir, tmp: str, name: str) -> None:
    """Rename the temporary file `tmp` over `name` (one change). The file replaced is held
    open across the rename and let go by another thread (`letgo`): freeing a 5-6 MB index
    took milliseconds in the rename call, and held up the next file's freeing."""
    held = letgo.hold(handle.at(name), handle.dir_fd)
    _change()
    try:
        os.rename(handle.at(tmp), handle.at(name), src_dir_fd=handle.dir_fd, dst_dir_fd=handle.dir_fd)
    finally:
        if held is not None:
            letgo.release(held)


@contextlib.contextmanager
def one_barrier(root: Path) -> Iterator[None]:
    """Within: `write_replace` skips its two fsyncs, and the files it replaced are made
    durable together when the block ends without an error (one `syncfs`, or an fsync of
    each file, then of each folder: on a journalling file system the first commits them
    all). The same changes in the same order (the same crash points); only when they reach
    the disk differs. For files that may be lost or torn by a power cut until the block
    ends, because what comes after it depends on them and what comes before can redo them:
    a committed run's indices and snapshots, rewritten by `journal.complete` (idempotent)
    until its journal is removed, after this barrier. A reader meanwhile that finds one
    torn rebuilds it from the files (an index, a snapshot: caches of the files). `append`
    within defers its fsync the same way; files written within `renamed_after_barrier`
    have their bytes made durable by the barrier and are renamed after it."""
    ident = _thread.get_ident()
    outer, outer_late = _deferred.get(ident), _late_names.get(ident)
    mine: list[Path] = []
    late: list[tuple[Path, str]] = []
    _deferred[ident], _late_names[ident] = mine, late
    try:
        yield
        files = list(dict.fromkeys(mine))
    except BaseException:
        _discard_staged(late)
        raise
    finally:
        if outer is None:
            del _deferred[ident]
        else:
            _deferred[ident] = outer
        if outer_late is None:
            del _late_names[ident]
        else:
            _late_names[ident] = outer_late
    try:
        _barrier(root, files + [path.parent / tmp for path, tmp in late], set())
    except BaseException:
        _discard_staged(late)
        raise
    if late:
        _rename_staged(late)
        _barrier(root, [], {path.parent for path, _ in late})


@contextlib.contextmanager
def renamed_after_barrier() -> Iterator[None]:
    """Within, inside `one_barrier`: `write_replace` writes each file's bytes to its
    temporary file only; the barrier makes those bytes durable together with its other
    files, then renames each into place (in the order written) and makes the names durable
    in one more barrier. Never torn, as a plain `write_replace`, and the same changes (the
    same crash points), the renames later: files that must not be torn by a power cut yet
    may wait for the barrier, which what comes before redoes (a committed run's review
    queue, state and log, rewritten by `journal.complete` until its journal goes). A read
    of such a file within sees its previous bytes: each is to be written once."""
    ident = _thread.get_ident()
    late = _late_names.get(ident)
    if late is None:
        raise RuntimeError("renamed_after_barrier is only used inside one_barrier")
    outer = _renaming.get(ident)
    _renaming[ident] = late
    try:
        yield
    finally:
        if outer is None:
            del _renaming[ident]
        else:
            _renaming[ident] = outer


def _rename_staged(late: list[tuple[Path, str]]) -> None:
    for n, (path, tmp) in enumerate(late):
        try:
            with _folder(path.parent) as handle:
                _rename_over(handle, tmp, path.name)
        except BaseException:
            _discard_staged(late[n + 1:])
            raise


def _discard_staged(late: list[tuple[Path, str]]) -> None:
    """Remove the temporary files of writes never put in place (after an error)."""
    for path, tmp in late:
        with contextlib.suppress(OSError), _folder(path.parent) as handle:
            os.unlink(handle.at(tmp), dir_fd=handle.dir_fd)


def append(path: Path, data: bytes) -> None:
    """Add bytes at the end of an existing cache file, durably (within `one_barrier`, at its
    end). Not atomic: only for caches whose reader drops a torn last record (see
    `sigcache.load_sigs`)."""
    with _folder(path.parent) as handle:
        _change()
        fd = os.open(handle.at(path.name), os.O_WRONLY | os.O_APPEND | _NOFOLLOW | _CLOEXEC,
                     dir_fd=handle.dir_fd)
    later = _deferred.get(_thread.get_ident())
    try:
        os.write(fd, data)
        if later is None:
            os.fsync(fd)
        else:  # within `one_barrier`: durable with its files (a torn last record is dropped)
            later.append(path)
    finally:
        os.close(fd)


def open_append(path: Path) -> int:
    """A descriptor to append to an existing log file memcli owns (`ops/hook.log`), opened
    like every change: never through a link. Not counted: appending to a log is no change
    of the store's state."""
    with _folder(path.parent) as handle:
        return os.open(handle.at(path.name), os.O_WRONLY | os.O_APPEND | _NOFOLLOW | _CLOEXEC | _NONBLOCK,
                       dir_fd=handle.dir_fd)


def write_new(path: Path, data: bytes) -> None:
    """Atomically create `path`; FileExistsError if the name is taken (never overwrites)."""
    with _folder(path.parent) as handle:
        tmp = _write_tmp(handle, path.name, data)
        try:
            _change()
            # link() fails if the name exists: no window to overwrite
            os.link(handle.at(tmp), handle.at(path.name), src_dir_fd=handle.dir_fd,
                    dst_dir_fd=handle.dir_fd, follow_symlinks=False)
        finally:
            _change()
            os.unlink(handle.at(tmp), dir_fd=handle.dir_fd)
        handle.sync()


def move(src: Path, dst: Path) -> None:
    """Move a file to a new name that must not exist yet, durably."""
    with _folder(src.parent) as source, _folder(dst.parent) as target:
        _change()
        os.link(source.at(src.name), target.at(dst.name), src_dir_fd=source.dir_fd,
                dst_dir_fd=target.dir_fd, follow_symlinks=False)
        target.sync()
        _change()
        os.unlink(source.at(src.name), dir_fd=source.dir_fd)
        source.sync()


def unlink(path: Path, durable: bool = True) -> None:
    """Remove a file memcli owns (a journal, a temporary file); never a memory. Within
    `Staged.commit` the folder's fsync waits for the batch's last barrier; durable=False
    (a scratch file, see `write_replace`): no fsync at all."""
    with _folder(path.parent) as handle:
        _change()
        os.unlink(handle.at(path.name), dir_fd=handle.dir_fd)
        if not durable:
            return
        if _unsynced is None:
            handle.sync()
        else:
            _unsynced.add(handle.path)


def mkdir(path: Path) -> None:
    """Create a folder and any missing parents, each counted as a change."""
    missing: list[Path] = []
    probe = Path(_absolute(path))
    while not os.path.lexists(probe):
        missing.append(probe)
        probe = probe.parent
    for folder in reversed(missing):
        with _folder(folder.parent) as handle:
            _change()
            with contextlib.suppress(FileExistsError):
                os.mkdir(handle.at(folder.name), dir_fd=handle.dir_fd)
            handle.sync()


def ensure_parent(path: Path) -> None:
    if not os.path.lexists(path.parent):
        mkdir(path.parent)


# ---------------------------------------------------------------- durable together


SYNCFS_FROM = 64  # files in a barrier from which one syncfs costs less than their fsyncs


def _barrier(root: Path, files: list[Path], folders: set[Path]) -> None:
    """Make `files` and the names in `folders` durable."""
    if not files and not folders:
        return
    if len(files) + len(folders) >= SYNCFS_FROM and _syncfs(root):
        return
    fds: list[int] = []
    try:
        for path in files:
            with _folder(path.parent) as handle:
                fds.append(os.open(handle.at(path.name), os.O_RDONLY | _NOFOLLOW | _CLOEXEC,
                                   dir_fd=handle.dir_fd))
        for folder in sorted({p.parent for p in files} | folders):
            with _folder(folder) as handle:  # (a descriptor of its own: `_held` may close its)
                fds.append(os.dup(handle.fd))
        fsync_together(fds)
    finally:
        for fd in fds:
            os.close(fd)


FSYNC_THREADS = 8  # at most this many fsyncs in flight besides the caller's own


def fsync_together(fds: list[int]) -> None:
    """fsync every descriptor, all at once: durable, each of them, when this returns (the
    first error raised, after every fsync has finished). Nothing is changed meanwhile, so the
    order among them does not matter. One after the other, each fsync of a file with new
    blocks committed the file system's journal on its own (ext4's delayed allocation gives
    the next file's blocks only when its own fsync writes it): 3-5 ms each on this machine,
    more under load. Side by side (threads: fsync releases the GIL), the file system commits
    them together (jbd2's group commit)."""
    if len(fds) < 2:
        for fd in fds:
            os.fsync(fd)
        return
    todo = list(reversed(fds))
    errors: list[BaseException] = []

    def drain() -> None:
        while True:
            try:
                fd = todo.pop()  # (atomic under the GIL: each descriptor is taken once)
            except IndexError:
                return
            try:
                os.fsync(fd)
            except BaseException as exc:  # noqa: BLE001  (re-raised by the caller below)
                errors.append(exc)

    guard, finished = _thread.allocate_lock(), _thread.allocate_lock()
    finished.acquire()
    left = [0]

    def worker() -> None:
        try:
            drain()
        finally:
            with guard:
                left[0] -= 1
                if left[0] == 0:
                    finished.release()

    with guard:
        for _ in range(min(len(fds) - 1, FSYNC_THREADS)):
            try:
                _thread.start_new_thread(worker, ())
            except RuntimeError:  # no thread to be had: the caller's own loop does the rest
                break
            left[0] += 1
        started = left[0]
    drain()
    if started:
        finished.acquire()
    if errors:
        raise errors[0]


def _syncfs(root: Path) -> bool:
    """syncfs(2) on the file system holding `root`: every file and name written to it before
    the call is durable when it returns (Linux; errors reported since 5.8). False where the
    C library has no syncfs: the caller fsyncs file by file instead."""
    try:
        import ctypes

        call = ctypes.CDLL(None, use_errno=True).syncfs
    except (OSError, AttributeError, ImportError):
        return False
    fd = os.open(root, os.O_RDONLY | _DIRECTORY | _CLOEXEC)
    try:
        if call(fd) != 0:
            code = ctypes.get_errno()
            raise OSError(code, os.strerror(code), str(root))
    finally:
        os.close(fd)
    return True


def leftover_tmp_files(root: Path) -> Iterator[Path]:
    """Temporary files a crashed writer left behind (doctor reports and removes them)."""
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            if name.startswith(".") and name.endswith(TMP_SUFFIX):
                yield Path(dirpath) / name


# ---------------------------------------------------------------- reading, safely


class NotRegularFileError(OSError):
    """A name memcli reads is a FIFO, a device, a socket or a folder: never opened for real."""


def open_regular(path: Path) -> int:
    """A read-only descriptor on a regular file, opened as `read_bytes` opens it (no link, no
    waiting on a FIFO); for readers that also want the file's fstat."""
    fd = os.open(path, os.O_RDONLY | _NOFOLLOW | _NONBLOCK | _CLOEXEC)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise NotRegularFileError(errno.EINVAL, "not a regular file", str(path))
    return fd


def read_open(fd: int, size: int) -> bytes:
    """The rest of an open file, from its position, `size` a guess of how much is left."""
    parts = []
    while chunk := os.read(fd, max(size + 1, 1 << 16)):
        parts.append(chunk)
    return b"".join(parts)


def read_bytes(path: Path, limit: int | None = None, follow: bool = False) -> bytes:
    """The bytes of a regular file, read without following a link (ELOOP: an OSError; unless
    `follow`, for a file the user may keep elsewhere, like memcli.toml) and without blocking:
    a FIFO or a device is never waited on. Raises NotRegularFileError for anything but a
    regular file, and for one over `limit` bytes; FileNotFoundError as usual."""
    return read_bytes_stat(path, limit, follow)[0]


def read_bytes_stat(path: Path, limit: int | None = None,
                    follow: bool = False) -> tuple[bytes, os.stat_result]:
    """`read_bytes`, and the `fstat` of the very file read (its identity: see `indexmark`)."""
    fd = os.open(path, os.O_RDONLY | (0 if follow else _NOFOLLOW) | _NONBLOCK | _CLOEXEC)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotRegularFileError(errno.EINVAL, "not a regular file", str(path))
        if limit is not None and st.st_size > limit:
            raise NotRegularFileError(errno.EFBIG, f"over the {limit}-byte limit", str(path))
        return read_open(fd, st.st_size), st
    finally:
        os.close(fd)
