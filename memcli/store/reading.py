"""A store's folders and their memory files as the store reads them: a `Folder`, a
`Problem` with one file, and `FileReading`, the reading of one memory file (never following
a link, never waiting on a FIFO, bad input reported by name), which `store.Store` builds on.
Listing and scanning whole folders, indices and writing stay in `store`."""

from __future__ import annotations

import errno
import os
import stat as statmod
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import orjson

from memcli.errors import BadRecordError, NotFoundError
from memcli.store import cache
from memcli.store.formats import MAX_DEPTH, decode
from memcli.store.model import Memory, content_usable, plainly_valid, sha256, validate

_NONE: list[str] = []  # a field left out (`is` tells it from any value read from a file)

MAX_FILE_BYTES = 10 * 1024 * 1024
_SYMLINK = "is a symlink; memcli never follows links"


@dataclass(frozen=True)
class Folder:
    scope: str  # agent, team, global or archive
    scope_id: str
    path: Path

    @cached_property
    def rel(self) -> str:
        return self.scope if self.scope in ("global", "archive") else f"{self.scope}/{self.scope_id}"

    def cache(self, create: bool = False) -> Path:
        """Where this folder's derived files live (`.cache/folders/<rel>`, SPEC 1): never
        beside its memories."""
        return cache.folder_cache(self.path, self.rel, create)


@dataclass
class Problem:
    """Something wrong with one file, reported by path; never fixed by guessing."""

    path: str
    reason: str
    code: str = "bad_file"
    severity: str = "error"

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


class FileReading:
    """Reading one memory file of a store (the methods `Store` has for it)."""

    root: Path

    def rel(self, path: Path) -> str:
        try:
            return str(path.relative_to(self.root))
        except ValueError:
            return str(path)

    def read_memory(self, path: Path, folder: Folder) -> Memory:
        """Read one memory file; raises BadRecordError naming the file and the reasons."""
        problems: list[Problem] = []
        if not os.path.lexists(path):
            raise NotFoundError(f"{self.rel(path)}: no such file")
        mem = self._read(path, folder, problems)
        if mem is None:
            raise BadRecordError(self.rel(path), [p.reason for p in problems])
        return mem

    def planned(self, folder: Folder, entries: list[dict[str, Any]],
                files: FolderFiles | None = None) -> list[Memory]:
        """Memories known from their index entries alone; each file is read when first needed
        (through `files` when given: the caller closes it when done with the folder)."""
        read_record = self._read_record  # (bound once: a cold pass loads thousands)

        def load(mem: Memory) -> dict[str, Any] | None:
            record = read_record(folder, mem.name, mem.size, files)  # (the size its entry and lstat agree on)
            if record is not None:
                share_facts(record, mem, folder)
            return record

        def peek(mem: Memory) -> dict[str, Any] | None:
            return read_record(folder, mem.name, mem.size, files)

        def confirm(mem: Memory, record: dict[str, Any]) -> dict[str, Any] | None:
            return self._whole_record(folder, mem.name, record)

        load.peek = peek  # type: ignore[attr-defined]  # (see `peeked_content`)
        return Memory.planned(entries, folder.path, load, confirm)

    def _read_record(self, folder: Folder, name: str, size: int | None = None,
                     files: FolderFiles | None = None) -> dict[str, Any] | None:
        """The record of a memory planned from its index entry, read when a rule first needs
        its text (a cold pass reads most of a folder this way): as `_read_in` would give it,
        without what the planned memory already has (its hash, size and mtime are the entry's)
        or does not keep (a Memory, its warnings), and checked only as far as its text is
        used (`model.content_usable`): every other field a rule reads is the entry's, and
        `_whole_record` checks them before the record is rewritten or archived. None when the
        file is gone or bad input. `size`: the file's size when it was listed (`_read_plain`);
        `files`: the folder's `FolderFiles`, which opens it.

        The usual file (JSON, live, the size it was listed with) is read and checked inline,
        `_read_plain` and `content_usable` in one frame: this runs once per memory of a cold
        pass, and their calls and the path's making cost as much as the read itself. Anything
        else, or any doubt, takes the way through them, which gives what it always gave."""
        if type(size) is int and 0 < size <= MAX_FILE_BYTES and name[-5:] == ".json" \
                and folder.scope != "archive":
            try:
                fd = os.open(f"{folder.path}/{name}", _PLAIN_OPEN) if files is None else files.open(name)
            except OSError:
                fd = -1  # (gone, a link: the way below says which)
            if fd >= 0:
                try:
                    raw = os.read(fd, size + 1)
                except OSError:
                    raw = b""  # (a folder: the way below)
                finally:
                    os.close(fd)
                # exactly the listed size (else changed since, or not a regular file), and
                # few enough brackets that no nesting walk is needed (else decode's walk)
                if len(raw) == size and raw.count(b"[") + raw.count(b"{") <= MAX_DEPTH:
                    try:
                        data = orjson.loads(raw)
                    except orjson.JSONDecodeError:
                        data = None
                    # content_usable(data, name[:-5]) inline
                    if type(data) is dict and data.get("id") == name[:-5]:
                        content = data.get("content")
                        if type(content) is dict and type(content.get("details", "")) is str \
                                and type(content.get("timeline", _NONE)) is list:
                            return data
        return self._read_record_slowly(folder, name, size)

    def _read_record_slowly(self, folder: Folder, name: str, size: int | None) -> dict[str, Any] | None:
        """`_read_record` of anything but the usual file: what it always did."""
        if name.endswith(".json") and folder.scope != "archive":  # (.md: the full read)
            raw = _read_plain(f"{folder.path}/{name}", size)
            if raw is not None and raw.count(b"[") + raw.count(b"{") <= MAX_DEPTH:  # (else: decode's walk)
                try:
                    data = orjson.loads(raw)
                except orjson.JSONDecodeError:
                    data = None
                if content_usable(data, name[:-5]):
                    return data  # type: ignore[no-any-return]
        read = self._read_in(folder, name, [])  # anything unusual: the full read says what it is
        return None if read is None else read.data

    def _whole_record(self, folder: Folder, name: str, record: dict[str, Any]) -> dict[str, Any] | None:
        """`record`, read by `_read_record`, when it is valid as a whole, as a full read would
        find it; else the full read of the file, which gives the record (a timestamp without a
        zone: valid, with a warning) or None (bad input: the memory is then planned as gone)."""
        dot = name.rfind(".")
        stem = name[:dot] if 0 < dot < len(name) - 1 else name
        file_id = stem.split("@")[0] if folder.scope == "archive" else stem
        if plainly_valid(record, file_id) and not _scope_mismatch(record, folder):
            return record
        read = self._read_in(folder, name, [])
        return None if read is None else read.data

    def read_quietly(self, path: Path, folder: Folder) -> Memory | None:
        """A memory file, or None when it is gone or bad input (a full scan reports those)."""
        return self._read(path, folder, [])

    def try_read(self, path: Path, folder: Folder, problems: list[Problem]) -> Memory | None:
        """A memory file, or None when it is gone or bad input (then reported in `problems`)."""
        return self._read(path, folder, problems)

    def _acceptable(self, path: Path, st: os.stat_result, problems: list[Problem]) -> bool:
        if statmod.S_ISLNK(st.st_mode):
            problems.append(Problem(self.rel(path), _SYMLINK, "symlink"))
            return False
        if not statmod.S_ISREG(st.st_mode):
            problems.append(Problem(self.rel(path), "is not a regular file", "bad_file"))
            return False
        if st.st_size > MAX_FILE_BYTES:
            problems.append(Problem(self.rel(path), f"is {st.st_size} bytes, over the 10 MB limit",
                                    "too_large"))
            return False
        return True

    def _read(self, path: Path, folder: Folder, problems: list[Problem]) -> Memory | None:
        """Open without following links and check the open file itself, so that a file swapped
        for a link between listing and reading is never followed."""
        return self._read_in(folder, path.name, problems, path)

    def _read_in(self, folder: Folder, name: str, problems: list[Problem],
                 path: Path | None = None) -> Memory | None:
        """`_read` of the file `name` of `folder`. Run for every memory of a cold pass: no path
        object is made unless a problem names the file (the memory makes its own when asked)."""
        where = f"{folder.path}/{name}" if path is None else path
        raw_st = self._open_read(where, problems)
        if raw_st is None:
            return None
        raw, st = raw_st
        # as fmt_of(path) or "json", and path.stem, from the name alone
        fmt = "md" if name.endswith(".md") and name[0] not in "._" else "json"
        try:
            data = decode(raw, fmt)
        except ValueError as exc:
            problems.append(Problem(self.rel(Path(where)), str(exc), "unreadable"))
            return None
        dot = name.rfind(".")
        stem = name[:dot] if 0 < dot < len(name) - 1 else name
        file_id = stem.split("@")[0] if folder.scope == "archive" else stem
        if plainly_valid(data, file_id) and not _scope_mismatch(data, folder):
            return Memory(data, path, fmt, sha256(raw), st.st_size, st.st_mtime_ns, [], folder=folder.path,
                          name=name)
        errors, warnings = validate(data, file_id=file_id)
        errors += _scope_mismatch(data, folder)
        if errors:
            problems.append(Problem(self.rel(Path(where)), "; ".join(errors), "invalid"))
            return None
        for warning in warnings:
            problems.append(Problem(self.rel(Path(where)), warning, "no_timezone", "warning"))
        return Memory(data, path, fmt, sha256(raw), st.st_size, st.st_mtime_ns, warnings, folder=folder.path,
                      name=name)

    def _open_read(self, path: Path | str, problems: list[Problem]) -> tuple[bytes, os.stat_result] | None:
        try:  # O_NONBLOCK: a FIFO is never waited on (fstat then refuses it), a device never held
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
        except OSError as exc:
            where = self.rel(Path(path))
            if exc.errno == errno.ELOOP:
                problems.append(Problem(where, _SYMLINK, "symlink"))
            elif exc.errno != errno.ENOENT:
                problems.append(Problem(where, f"cannot be read ({exc.strerror})", "unreadable"))
            return None
        try:
            st = os.fstat(fd)
            usual = statmod.S_ISREG(st.st_mode) and st.st_size <= MAX_FILE_BYTES
            if not usual and not self._acceptable(Path(path), st, problems):
                return None
            return _read_fd(fd, st.st_size), st
        except OSError as exc:
            problems.append(Problem(self.rel(Path(path)), f"cannot be read ({exc.strerror})", "unreadable"))
            return None
        finally:
            os.close(fd)


def peeked_content(mem: Memory) -> dict[str, Any]:
    """`mem.content`, of a memory planned from its index entry and not read yet, read without
    the memory keeping the record: for a text a dry run's pair search only signs (most of
    those it reads), the record would be kept, and its fields shared with the entry
    (`share_facts`), for nothing; a few texts the run then needs again (to guard or merge a
    pair) are read again, as `content` reads them. A file gone or gone bad is read the way
    `content` reads it, so that the memory settles as one that went bad, as it does there.
    Anything else (a memory read from its file, or already read) is `mem.content`."""
    peek = getattr(mem._load, "peek", None) if mem._data is None else None
    if peek is not None:
        record = peek(mem)
        if record is not None:
            content = record.get("content")
            return content if isinstance(content, dict) else {}
    return mem.content


# Record fields an index entry caches as they are (`index.entry_for`): equal in both, one object.
_CACHED_AS_IS = ("type", "subtype", "tags", "priority", "created_by", "created_at", "updated_at",
                 "last_accessed", "supersedes", "superseded_by")


def share_facts(record: dict[str, Any], mem: Memory, folder: Folder) -> None:
    """Let `record`, read for a memory planned from its index entry, hold the entry's own
    objects where their values are equal (and of the same type), and the folder's scope: a
    run holds both the entry and the record of nearly every memory of the folder it plans,
    and the copies were a third of the record (50 MB in a folder of 56,000 memories). The
    record's values are unchanged; rules copy a record before changing it (`rules`)."""
    facts = mem.facts
    for key in _CACHED_AS_IS:
        value = record.get(key)
        if value is not None:
            fact = facts.get(key)
            if type(fact) is type(value) and fact == value:
                record[key] = fact
    if record.get("id") == mem.id:
        record["id"] = mem.id
    if record.get("scope") == folder.scope:
        record["scope"] = folder.scope
    if record.get("scope_id") == folder.scope_id:
        record["scope_id"] = folder.scope_id


class FolderFiles:
    """Where the files of a folder's planned memories are opened from: the folder itself,
    opened once (on the first read), each file then relative to it, which looks up one name
    instead of every component of its path (a cold pass opens thousands of files; 10-20% of
    a read's system time). Reads after `close`, and where the folder cannot be opened, go
    by path. (The folder is opened following links, as a path's components are; the file
    itself never is: O_NOFOLLOW.)"""

    __slots__ = ("path", "_fd")

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None  # not opened yet; -1: by path

    def open(self, name: str) -> int:
        """The file `name` of the folder, opened as `_read_plain` opens it; raises OSError."""
        fd = self._fd
        if fd is None:
            fd = self._fd = _open_folder(self.path)
        if fd < 0:
            return os.open(f"{self.path}/{name}", _PLAIN_OPEN)
        return os.open(name, _PLAIN_OPEN, dir_fd=fd)

    def close(self) -> None:
        fd, self._fd = self._fd, -1
        if fd is not None and fd >= 0:
            os.close(fd)

    def __del__(self) -> None:  # (planning stopped by an error: its folder is not held open)
        self.close()


def _open_folder(path: Path) -> int:
    """A folder's descriptor for opening its files relative to it, or -1 (then by path)."""
    if os.open not in os.supports_dir_fd:
        return -1
    try:
        return os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return -1


_PLAIN_OPEN = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)


def _read_plain(path: str, size: int | None = None) -> bytes | None:
    """The bytes of a usual memory file (regular, within the size limit, read whole in one
    call), or None for anything else: gone, a link, unreadable, too large, or grown while
    read. `_open_read` in short, for the files a cold pass reads by the thousand; a None
    takes the full read, which says what is wrong, if anything.

    With `size` (the file's size when it was listed: a trusted index entry's, which its lstat
    matched), no fstat: one read of size + 1 bytes that gives exactly `size` bytes is the
    file. Anything else takes the way with the fstat: a file that changed size since, a FIFO
    (opened without waiting: it reads nothing), a device (it fills the buffer); a folder
    (a read error) and a link (never opened: O_NOFOLLOW) give None. (The fstat and its
    result cost more than the read: 20,000 files in 0.08 s without it, 0.13-0.20 s with.)"""
    try:
        fd = os.open(path, _PLAIN_OPEN)
    except OSError:
        return None
    if type(size) is int:
        try:
            raw = os.read(fd, size + 1) if 0 <= size <= MAX_FILE_BYTES else b""
        except OSError:
            return None
        finally:
            os.close(fd)
        if len(raw) == size and raw:
            return raw
        return _read_plain(path)  # (changed since listed, or not a regular file: the fstat way)
    try:
        st = os.fstat(fd)
        if not statmod.S_ISREG(st.st_mode) or st.st_size > MAX_FILE_BYTES:
            return None
        raw = os.read(fd, st.st_size + 1)
        return raw if len(raw) <= st.st_size else None
    except OSError:
        return None
    finally:
        os.close(fd)


def _read_fd(fd: int, size: int) -> bytes:
    """The whole file in one system call; a file that grew since fstat is read to its end."""
    data = os.read(fd, size + 1)
    if len(data) <= size:
        return data  # a regular file reads short only at its end
    parts = [data]
    while chunk := os.read(fd, 1 << 16):
        parts.append(chunk)
    return b"".join(parts)


def _scope_mismatch(data: dict[str, Any], folder: Folder) -> list[str]:
    if folder.scope == "archive":
        return []
    scope, scope_id = data.get("scope"), data.get("scope_id")
    if scope is not None and scope != folder.scope:
        return [f"scope {scope!r} does not match its folder {folder.rel}"]
    if scope_id is not None and folder.scope != "global" and scope_id != folder.scope_id:
        return [f"scope_id {scope_id!r} does not match its folder {folder.rel}"]
    return []
