"""Scanning one folder of the store: its files (the truth) reconciled with its index (a cache),
or with the last run's snapshot (the session-end pass). The methods `Store` has for it; the
store's folders together (`scan_all`, duplicate ids) are `Store`'s own.

Reading never changes anything: bad input becomes a `Problem` naming the file and the reason.
"""

from __future__ import annotations

import os
import stat as statmod
import time
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from memcli.store import index, lastrun
from memcli.store.entries import FileStat
from memcli.store.entries import all_trusted as _all_trusted
from memcli.store.entries import differ_in_place as _differ_in_place
from memcli.store.entries import differ_with_new as _differ_with_new
from memcli.store.entries import run_hashes as _run_hashes
from memcli.store.entries import trusted as _trusted
from memcli.store.entries import trusted_names as _trusted_names
from memcli.store.lastrun import Snapshot
from memcli.store.model import Memory
from memcli.store.reading import MAX_FILE_BYTES, FileReading, Folder, Problem

try:  # the lstat of many files in C, built by `pip install` where a compiler is at hand (optional)
    from memcli.store import _lstat  # type: ignore[attr-defined]
except ImportError:
    _lstat = None
if os.environ.get("MEMCLI_PURE"):  # (none of memcli's C loops: to compare the two ways)
    _lstat = None

CHUNK_BACK = 256  # rows of a worker's part `scan_since` stats at a time, from the last back
STAMP_AGE_NS = 1_000_000_000  # see _names_since: well over any file system's timestamp tick
Stamp = tuple[int, int]  # (a folder's mtime, its last-run snapshot's mtime): see _names_since
_UNREADABLE_FOLDER = "folder cannot be read (permission denied); skipped, nothing in it is touched"
_MEMORY_EXTS = (".json", ".md")


@dataclass
class FolderScan:
    folder: Folder
    entries: list[dict[str, Any]]
    memories: dict[str, Memory]
    problems: list[Problem]
    index: dict[str, Any] | None
    drift: bool  # the saved index disagrees with the files
    run_hashes: dict[str, Any] = field(default_factory=dict)  # id -> run_hash, from the saved index
    file_count: int = -1  # memory files seen, when entries were not built (-1: len(entries))
    reread: list[str] | None = None  # scan_since: the names read again or gone since the snapshot
    snap: Snapshot | None = None  # scan_since: the snapshot compared against
    kept: list[int] = field(default_factory=list)  # scan_since: its rows of files unchanged since
    stamp: Stamp | None = None  # scan_since: vouches for the snapshot's names (see _names_since)
    unreadable: bool = False  # the folder could not be listed: nothing in it may be written

    @property
    def count(self) -> int:
        return len(self.entries) if self.file_count < 0 else self.file_count


@dataclass
class StoreScan:
    folders: list[FolderScan] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)

    def memories(self) -> list[Memory]:
        return [m for scan in self.folders for m in scan.memories.values()]


class FolderScanning(FileReading):
    """Scanning one folder (the methods `Store` has for it)."""

    def scan(self, folder: Folder, load: bool = True, entries: bool = True,
             lastrun: lastrun.Snapshot | None = None, compare: bool = True,
             names: list[str] | None = None, keep: bool = True,
             known: list[dict[str, Any]] | None = None, vouched: list[int] | None = None) -> FolderScan:
        """Read a folder: its files (the truth) reconciled with its index (a cache).
        With load=False, files whose index entry matches size and mtime are not read; with
        entries=False (planning), no index entries are built for the files read, only their
        memories (with load=False, the entries still describing their files are kept), and the
        run hashes come from the last-run snapshot when given (a tenth of the index's bytes).
        keep=False (re-indexing): the memories read are not kept, only their entries.
        `known` (with load=False): entries made from the files since the index was saved (see
        `memcli.store.planned`), trusted as index entries are: while size and mtime match.
        `vouched` (with load=False, not `known`): the identity of the index file whose entries
        another process found to be the files `names` exactly (`vouch`, a moment before):
        while the index is still that file, its entries are taken without the `lstat` of each
        file, as they would be after it."""
        problems: list[Problem] = []
        if self._unreadable(folder, problems):
            return FolderScan(folder, [], {}, problems, None, False, unreadable=True)
        if not entries and lastrun is not None:
            return self._read_all(folder, lastrun, problems)
        identity: list[int] | None = [] if vouched and not load and not known else None
        saved = self._load_index(folder, problems, identity)
        names = self.memory_names(folder) if names is None else names
        listed = (saved or {}).get("entries", [])
        taken = bool(identity) and identity == vouched and not problems  # (the worker's word)
        stats: list[FileStat | None] = (
            [] if taken else self._stat_all(folder, names, problems) if not load else [None] * len(names))
        if not load and isinstance(listed, list) and (taken or _all_trusted(listed, names, stats)):
            drift = not compare or (saved or {}).get("entry_count") != len(listed)
            return FolderScan(folder, list(listed), {}, problems, saved, drift,
                              {str(e["id"]): e.get("run_hash") for e in listed})
        old = {e.get("file"): e for e in listed if isinstance(e, dict)}
        if known:
            old.update((e["file"], e) for e in known)
        found: list[dict[str, Any]] = []
        memories: dict[str, Memory] = {}
        archive = folder.scope == "archive"
        trusted = _trusted_names(old, names, stats) if not load else set()
        for name, st in zip(names, stats, strict=True):
            cached = old.get(name)
            if not load:  # an entry still describes its file (`_trusted_names`): not read
                if st is None:
                    continue
                if name in trusted:
                    found.append(cached)  # type: ignore[arg-type]
                    continue
            mem = self._read_in(folder, name, problems)
            if mem is not None:
                if keep:
                    memories[mem.id] = mem
                if entries:
                    found.append(index.entry_for(mem, cached, archive=archive))
        if not entries:  # (with load=False, `found` holds the entries trusted as they are)
            return FolderScan(folder, found, memories, problems, saved, False, _run_hashes(old))
        if compare:  # compare=False: the index is rewritten (or not looked at) anyway
            self._report_gone(folder, old, found, problems)
        drift = not compare or not index.same_entries(saved, found)
        return FolderScan(folder, found, memories, problems, saved, drift, _run_hashes(old))

    def _read_all(self, folder: Folder, lastrun: lastrun.Snapshot, problems: list[Problem]) -> FolderScan:
        memories: dict[str, Memory] = {}
        for name in self.memory_names(folder):
            mem = self._read_in(folder, name, problems)
            if mem is not None:
                memories[mem.id] = mem
        return FolderScan(folder, [], memories, problems, None, False, lastrun.run_hashes(), len(memories))

    def scan_since(self, folder: Folder, snap: lastrun.Snapshot, stamp: Stamp | None = None,
                   tail: tuple[int, Callable[[], tuple[int, list[int]] | None]] | None = None) -> FolderScan:
        """Like scan(load=False), but against the last-run snapshot instead of the index:
        a file whose size and mtime match its row is taken as the last run saw it, unread.
        Entries are made only for the files read again; the unchanged ones are the snapshot
        rows `kept`. A folder with no change returns only its file count (nothing to plan).
        `stamp` (see `_names_since`) may spare listing the folder; the scan's `stamp` is the
        one to keep for the next pass. `tail`: where another process stats the snapshot's
        last rows meanwhile (`memcli.consolidate.since.Worker`), (their first row, a call
        giving how far it has come: the end of the rows it stat'ed from the first, and those
        of them that differ from their file; or None, some doubt: a file gone, or not a plain
        file). Asked once this scan has listed the folder and stat'ed the rows before; then
        this scan stats the rest from the last back, a chunk at a time, until they meet."""
        problems: list[Problem] = []
        if self._unreadable(folder, problems):
            return FolderScan(folder, [], {}, problems, None, False, file_count=0, unreadable=True)
        names, stamp, added = self._names_since(folder, snap, stamp)
        if not added:
            return self._scan_since_listed(folder, snap, names, stamp)
        # files came, none went (a session wrote memories): the snapshot's names stat'ed as
        # they are (bytes, in row order), not merged with the new ones and sorted first
        raw = snap.name_bytes()
        count = len(snap.names)
        cut = count if tail is None else max(0, min(tail[0], count))
        stats = self._stat_all(folder, snap.names[:cut], problems, None if raw is None else raw[:cut])
        rows = differ_rows(snap, 0, stats) if not problems else []
        # the tail: the worker's from its first row on, this scan's from the last back, a chunk
        # at a time, until they meet (or all here once the worker reports a doubt)
        low, back = count, list[list[FileStat | None]]()
        while low > cut and not problems:
            done = tail[1]() if tail is not None else None
            if done is not None and done[0] >= low:
                rows += [r for r in done[1] if r < low]
                break
            start = max(cut, low - CHUNK_BACK) if done is not None else cut
            back.append(self._stat_all(folder, snap.names[start:low], problems,
                                       None if raw is None else raw[start:low]))
            rows += differ_rows(snap, start, back[-1])
            low = start
        mine = snap.names[:cut] + snap.names[low:]
        stats += [st for chunk in reversed(back) for st in chunk]
        stats += self._stat_all(folder, added, problems)
        if problems:  # (its problems in the order of the names, as one `_stat_all` gives them)
            return self._scan_since_listed(folder, snap, names, stamp)
        differ = sorted(added + [snap.names[r] for r in rows])
        return self._since_stats(folder, snap, mine + added, stats, differ, set(), problems, stamp)

    def stat_rows(self, folder: Folder, snap: lastrun.Snapshot, first: int, end: int) -> list[int] | None:
        """The snapshot rows `first` to `end` whose file differs from the row (`differ_rows`),
        or None when one is gone or not a plain file (left to a whole scan: its problems)."""
        raw = snap.name_bytes()
        problems: list[Problem] = []
        stats = self._stat_all(folder, snap.names[first:end], problems,
                               None if raw is None else raw[first:end])
        if problems or None in stats:
            return None
        return differ_rows(snap, first, stats)

    def _scan_since_listed(self, folder: Folder, snap: lastrun.Snapshot, names: list[str],
                           stamp: Stamp | None) -> FolderScan:
        """`scan_since` of the folder's memory files `names` (sorted)."""
        problems: list[Problem] = []
        stats = self._stat_all(folder, names, problems, snap.name_bytes() if names is snap.names else None)
        if names == snap.names:  # the common case: no file came or went
            differ = _differ_in_place(names, stats, snap)
        elif len(names) > len(snap.names):
            differ = _differ_with_new(names, stats, snap)
        else:
            differ = [n for n, st in zip(names, stats, strict=True)
                      if st is None or not _trusted(snap, n, st)]
        # a file removed by hand, with nothing else changed in the folder, is a difference too:
        # its index entry and snapshot row go (else the index lists a file that is gone, and
        # every later pass lists the folder again, its names never matching the snapshot's)
        missing = set() if names is snap.names else set(snap.names).difference(names)
        return self._since_stats(folder, snap, names, stats, differ, missing, problems, stamp)

    def _since_stats(self, folder: Folder, snap: lastrun.Snapshot, names: list[str],
                     stats: list[FileStat | None], differ: list[str], missing: set[str],
                     problems: list[Problem], stamp: Stamp | None) -> FolderScan:
        """The scan of the files `names` (their `stats` in the same order), of which `differ`
        (sorted) differ from their rows, and of the rows `missing` (no file)."""
        if not differ and not missing:
            return FolderScan(folder, [], {}, problems, None, False, {}, file_count=len(names), stamp=stamp)
        gone = {n for n, st in zip(names, stats, strict=True) if st is None} if None in stats else set()
        kept = _rows_but(snap, missing.union(differ))  # (a file gone is among those that differ)
        found: list[dict[str, Any]] = []
        memories: dict[str, Memory] = {}
        for name in differ:
            if name in gone:
                continue
            mem = self._read(folder.path / name, folder, problems)
            if mem is not None:
                memories[mem.id] = mem
                row = snap.row(name)
                old = {"run_hash": snap.content_hash(row)} if row is not None else None
                found.append(index.entry_for(mem, old))
        run_hashes = {e["id"]: e.get("run_hash") for e in found}
        reread = sorted(missing.union(differ))
        return FolderScan(folder, found, memories, problems, None, False, run_hashes, len(kept) + len(found),
                          reread, snap, kept, stamp)

    def _names_since(self, folder: Folder, snap: lastrun.Snapshot,
                     stamp: Stamp | None) -> tuple[list[str], Stamp | None, list[str]]:
        """`memory_names`, found by difference with the snapshot's (sorted) names: a folder
        where no file came or went costs two set operations, not a filter and a sort. And
        not even a listing when `stamp` still holds: (the folder's mtime, the snapshot's)
        recorded by an earlier pass that listed the folder and found exactly the snapshot's
        names. A file created, removed or renamed in a folder moves its mtime, so the names
        are the same while the mtime is. The stamp returned vouches for the names found, or
        is None; it is only made for a folder last changed a while before it was listed (a
        change after the listing then falls in a later timestamp tick). The third value: the
        names added, sorted, when every name of the snapshot is still there (else none)."""
        try:
            before = os.stat(folder.path).st_mtime_ns
            if stamp == (before, snap.written_ns):
                return snap.names, stamp, []
            started = time.time_ns()
            found = set(os.listdir(folder.path))
            after = os.stat(folder.path).st_mtime_ns
        except (FileNotFoundError, NotADirectoryError):
            return [], None, []
        others = found.difference(snap.names)
        if len(found) - len(others) != len(snap.names):  # (the names are unique: some are gone)
            return self.memory_names(folder), None, []
        extra = sorted(filter(_is_memory_name, others))
        if extra:
            return sorted(snap.names + extra), None, extra
        vouched = before == after and before < started - STAMP_AGE_NS
        return snap.names, (before, snap.written_ns) if vouched else None, []

    def _stat_all(self, folder: Folder, names: list[str], problems: list[Problem],
                  raw: list[bytes] | None = None) -> list[FileStat | None]:
        """lstat of every name, relative to the folder (one path lookup a file, not seven).
        `raw`: the same names as bytes (`Snapshot.name_bytes`), which lstat takes as they are.
        All at once by the C loop where the install built it (`_lstat`: half the time of
        os.lstat's, whose result object cost as much as the system call); a name not found, or
        not a plain file, then takes os.lstat's way name by name, as without it."""
        try:
            fd = os.open(folder.path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        except OSError:
            return [None] * len(names)
        try:
            lstat = os.lstat
            try:  # the common case in one call: every file still there, all regular
                fast: list[FileStat] = (
                    [lstat(name, dir_fd=fd) for name in (names if raw is None else raw)] if _lstat is None
                    else _lstat.lstat_all(fd, names if raw is None else raw))
                if all(map(statmod.S_ISREG, [st.st_mode for st in fast])) and (
                        not fast or max([st.st_size for st in fast]) <= MAX_FILE_BYTES):
                    return list(fast)
            except FileNotFoundError:
                pass
            out = list[FileStat | None]()
            for name in names:
                try:
                    st = lstat(name, dir_fd=fd)
                except FileNotFoundError:
                    out.append(None)
                    continue
                ok = statmod.S_ISREG(st.st_mode) and st.st_size <= MAX_FILE_BYTES
                out.append(st if ok or self._acceptable(folder.path / name, st, problems) else None)
            return out
        finally:
            os.close(fd)

    def memory_names(self, folder: Folder) -> list[str]:
        """The folder's memory file names, sorted (no other file, no dotfile); none when it
        cannot be listed (a scan reports an unreadable folder)."""
        try:
            names = os.listdir(folder.path)
        except OSError:
            return []
        # (`_is_memory_name` inline: a full pass lists every file of the store)
        return sorted([n for n in names if n.endswith(_MEMORY_EXTS) and n[0] not in "._"])

    def _unreadable(self, folder: Folder, problems: list[Problem]) -> bool:
        """A folder that exists but may not be listed or entered (chmod 000): one problem for
        the folder, and it is left alone: nothing read, nothing written."""
        if os.access(folder.path, os.R_OK | os.X_OK) or not os.path.isdir(folder.path):
            return False
        problems.append(Problem(self.rel(folder.path), _UNREADABLE_FOLDER, "unreadable"))
        return True

    def vouch(self, folder: Folder, names: list[str]) -> list[int] | None:
        """The identity of the folder's index file (`index.load`) when its entries are the
        files `names` exactly, each with its file's size and mtime and every field a run plans
        from (what `scan(load=False)` finds before it takes them all as they are); else None
        (anything else: the scan then looks at the files itself)."""
        if self._unreadable(folder, []):
            return None
        problems: list[Problem] = []
        identity: list[int] = []
        saved = self._load_index(folder, problems, identity)
        listed = (saved or {}).get("entries")
        if problems or not identity or not isinstance(listed, list):
            return None
        stats = self._stat_all(folder, names, problems)
        return identity if not problems and _all_trusted(listed, names, stats) else None

    def _load_index(self, folder: Folder, problems: list[Problem],
                    identity: list[int] | None = None) -> dict[str, Any] | None:
        try:
            return index.load(folder.path, identity)
        except (OSError, ValueError) as exc:
            problems.append(Problem(self.rel(folder.path / index.INDEX_NAME),
                                    f"unreadable index, rebuilt from the files ({exc})",
                                    "index_unreadable", "warning"))
            return None

    def _report_gone(self, folder: Folder, old: dict[Any, dict[str, Any]],
                     entries: list[dict[str, Any]], problems: list[Problem]) -> None:
        present = {e["file"] for e in entries}
        for name in sorted(str(n) for n in old if n not in present):
            if not (folder.path / name).exists():
                problems.append(Problem(self.rel(folder.path / name),
                                        "listed in the index but the file is gone; entry dropped",
                                        "index_gone", "warning"))


def differ_rows(snap: Snapshot, first: int, stats: list[FileStat | None]) -> list[int]:
    """The rows from `first` on (one a stat, in order) whose stat is not their row's: gone,
    or another size or mtime, or not older than the snapshot (`Snapshot.trusted`). Compared
    as arrays first (in C): rows nobody touched cost no per-file Python."""
    end = first + len(stats)
    if None not in stats:
        mtimes = [st.st_mtime_ns for st in stats]  # type: ignore[union-attr]
        try:
            same = (array(snap.sizes.typecode, [st.st_size for st in stats]) == snap.sizes[first:end]  # type: ignore[union-attr]
                    and array(snap.mtimes.typecode, mtimes) == snap.mtimes[first:end])
        except OverflowError:  # a value the snapshot's columns cannot hold: not the row's
            same = False
        if same and (not mtimes or max(mtimes) < snap.written_ns):
            return []
    return [first + n for n, st in enumerate(stats)
            if st is None or not snap.trusted(first + n, st.st_size, st.st_mtime_ns)]


def _rows_but(snap: Snapshot, names: set[str]) -> list[int]:
    """Every row number of the snapshot but those of `names` (rows of files read again or
    gone): ranges between them, not a test a row (a session changes a few files of thousands)."""
    skip = sorted({r for r in map(snap.row, names) if r is not None})
    rows: list[int] = []
    start = 0
    for r in skip:
        rows += range(start, r)
        start = r + 1
    rows += range(start, len(snap.names))
    return rows


def _is_memory_name(name: str) -> bool:
    """A memory file's name: `.json` or `.md`, not a dotfile, not one of memcli's `_` files."""
    return name.endswith(_MEMORY_EXTS) and name[0] not in "._"
