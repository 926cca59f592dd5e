"""The store on disk (SPEC section 1): discovery, folders, reading files, indices, the lock.

Reading never changes anything. Bad input (a file that does not parse, a record that breaks
the contract, a symlink, an oversized file, a duplicate id) becomes a `Problem` naming the
file and the reason; the file is left alone and everything else goes on.
"""

from __future__ import annotations

import errno
import os
import stat as statmod
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import orjson

from memcli.config import Settings, load_settings
from memcli.errors import BadRecordError, LockTimeoutError, NoStoreError, NotFoundError, UnsafePathError
from memcli.store import cache, fsops, index, locate
from memcli.store.entries import all_trusted as _all_trusted
from memcli.store.entries import differ_in_place as _differ_in_place
from memcli.store.entries import differ_with_new as _differ_with_new
from memcli.store.entries import run_hashes as _run_hashes
from memcli.store.entries import trusted as _trusted
from memcli.store.entries import trusted_names as _trusted_names
from memcli.store.index import Snapshot
from memcli.store.locate import OPS_MARKERS  # noqa: F401  (re-exported)
from memcli.store.model import (
    MAX_DEPTH,
    Memory,
    content_usable,
    decode,
    is_valid_id,
    now,
    plainly_valid,
    sha256,
    validate,
)

MAX_FILE_BYTES = 10 * 1024 * 1024
STAMP_AGE_NS = 1_000_000_000  # see Store._names_since: well over any file system's timestamp tick
Stamp = tuple[int, int]  # (a folder's mtime, its last-run snapshot's mtime): see Store._names_since
_SYMLINK = "is a symlink; memcli never follows links"
SCOPE_ROOTS = ("agent", "team", "global")
# The store's own top-level folders (SPEC 8): each must be a real folder when it exists, never
# a symlink or anything else, and the lock files in ops/ regular files.
TOP_FOLDERS = ("agent", "team", "global", "archive", "ops", ".cache")
LOCK_FILES = ("ops/.lock", "ops/.tick.lock")
_UNREADABLE_FOLDER = "folder cannot be read (permission denied); skipped, nothing in it is touched"
DEFAULT_TOML = """\
# memcli settings: every key is optional; these are the defaults (see README).
[consolidation]
max_per_run = 50
index_pause_ms = 100
min_age_days = 7
stale_after_days = 90

[teams]
default_team = "team"
# coder = "backend"        # agent id -> team id

[schedule]
weekly = "0 0 * * 0"       # Sunday 00:00, local time

[llm]
enabled = false            # also needs ANTHROPIC_API_KEY
"""


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


def is_store(path: Path) -> bool:
    """A store holds `memcli.toml`, or an `ops/` folder with memcli's own state or log in it;
    an `ops/` folder alone (a project's deploy scripts) is not one (SPEC 1)."""
    return locate.is_store_dir(str(path))


def find_upwards(start: Path) -> Path | None:
    """The first store at `start` or one of its parents, as git finds a repository."""
    found = locate.find_upwards_dir(str(start))
    return None if found is None else Path(found)


def discover(explicit: str | None) -> Path:
    """`--store`, else `MEMCLI_STORE` (each must be a store itself), else the current
    directory or the nearest parent that is a store."""
    named = explicit or os.environ.get("MEMCLI_STORE")
    if named:
        root = Path(named).expanduser()
        if not is_store(root):
            raise NoStoreError(root)
        return root.resolve()
    cwd = Path(os.getcwd())
    found = find_upwards(cwd)
    if found is None:
        raise NoStoreError(cwd)
    return found.resolve()


def init_store(root: Path) -> bool:
    """Create a store at `root`; returns False when one was already there (nothing changed).
    A folder that only has an unrelated `ops/` (a project's scripts) is not a store yet:
    init makes it one, keeping what is in `ops/`."""
    if is_store(root):
        return False
    fsops.confine(root)
    for sub in ("ops", "archive", "global"):
        if not (root / sub).is_dir():
            fsops.mkdir(root / sub)
    if not (root / "memcli.toml").exists():
        fsops.write_new(root / "memcli.toml", DEFAULT_TOML.encode())
    return True


class Store:
    """A store folder with its settings."""

    def __init__(self, root: Path, settings: Settings | None = None, check: bool = True) -> None:
        """`check` (the default) refuses a store whose top-level folders are not real
        folders (UnsafePathError), before anything is read; only `doctor` looks at one."""
        self.root = root
        self.ops = root / "ops"
        self.archive = root / "archive"
        fsops.confine(root)
        if check:
            self.require_safe_layout()
        self.settings = settings if settings is not None else load_settings(root)

    @classmethod
    def open(cls, explicit: str | None = None, check: bool = True) -> Store:
        return cls(discover(explicit), check=check)

    # ------------------------------------------------------------ layout (SPEC 8)

    def layout_problems(self) -> list[Problem]:
        """Top-level folders that exist but are not real folders (a symlink, a file, a FIFO),
        and lock files that are not regular files: memcli would read or write through them."""
        found = []
        for name in TOP_FOLDERS:
            kind = _kind(self.root / name)
            if kind not in (None, "a folder"):
                found.append(Problem(name, f"is {kind}, not a real folder: memcli refuses to read or write "
                                     "through it. Move it aside and put a real folder there (or copy "
                                     "its memories into one)", "unsafe_folder"))
        for rel in LOCK_FILES:
            kind = _kind(self.root / rel)
            if kind not in (None, "a file") and not any(p.path == "ops" for p in found):
                found.append(Problem(rel, f"is {kind}, not a regular file: memcli will not lock through "
                                     "it. Move it aside (memcli makes a new one)", "unsafe_folder"))
        return found

    def require_safe_layout(self) -> None:
        problems = self.layout_problems()
        if problems:
            raise UnsafePathError(f"refused: the store {self.root} is not laid out safely: "
                                  + "; ".join(str(p) for p in problems)
                                  + ". Nothing was read or written (`memcli doctor` lists every problem)")

    def real_dir(self, path: Path) -> bool:
        """Whether `path` is a folder itself, not a symlink to one (lstat)."""
        try:
            return statmod.S_ISDIR(os.lstat(path).st_mode)
        except OSError:
            return False

    # ------------------------------------------------------------ folders

    def folder(self, scope: str, scope_id: str) -> Folder:
        """The folder of a scope; scope ids become folder names, so they are checked."""
        if scope == "global":
            return Folder("global", "global", self.root / "global")
        if scope == "archive":
            return Folder("archive", "archive", self.archive)
        if scope not in ("agent", "team"):
            raise NotFoundError(f"unknown scope {scope!r} (expected agent, team or global)")
        if not is_valid_scope_id(scope_id):
            raise NotFoundError(f"bad scope id {scope_id!r} (letters, digits, '.', '_', '-')")
        return Folder(scope, scope_id, self.root / scope / scope_id)

    def folder_by_rel(self, rel: str) -> Folder | None:
        """The folder named by a store-relative path like `agent/coder`, if it exists."""
        parts = rel.split("/")
        if parts[0] in ("global", "archive") and len(parts) == 1:
            return self.folder(parts[0], parts[0])
        if len(parts) == 2 and parts[0] in ("agent", "team") and is_valid_scope_id(parts[1]) \
                and self.real_dir(self.root / parts[0]) and self.real_dir(self.root / rel):
            return self.folder(parts[0], parts[1])
        return None

    def archive_folder(self) -> Folder:
        return self.folder("archive", "archive")

    def memory_folders(self) -> list[Folder]:
        """Every existing live memory folder, in a stable order."""
        found: list[Folder] = []
        for scope in ("agent", "team"):
            base = self.root / scope
            if self.real_dir(base):
                try:
                    children = sorted(base.iterdir())
                except OSError:  # agent/ itself unreadable: doctor reports it (check_folders)
                    children = []
                for child in children:
                    if is_valid_scope_id(child.name) and self.real_dir(child):
                        found.append(Folder(scope, child.name, child))
        if self.real_dir(self.root / "global"):
            found.append(self.folder("global", "global"))
        return found

    def rel(self, path: Path) -> str:
        try:
            return str(path.relative_to(self.root))
        except ValueError:
            return str(path)

    # ------------------------------------------------------------ reading

    def scan(self, folder: Folder, load: bool = True, entries: bool = True,
             lastrun: index.Snapshot | None = None, compare: bool = True,
             names: list[str] | None = None, keep: bool = True,
             known: list[dict[str, Any]] | None = None) -> FolderScan:
        """Read a folder: its files (the truth) reconciled with its index (a cache).
        With load=False, files whose index entry matches size and mtime are not read; with
        entries=False (planning), no index entries are built for the files read, only their
        memories (with load=False, the entries still describing their files are kept), and the
        run hashes come from the last-run snapshot when given (a tenth of the index's bytes).
        keep=False (re-indexing): the memories read are not kept, only their entries.
        `known` (with load=False): entries made from the files since the index was saved (see
        `memcli.store.planned`), trusted as index entries are: while size and mtime match."""
        problems: list[Problem] = []
        if self._unreadable(folder, problems):
            return FolderScan(folder, [], {}, problems, None, False, unreadable=True)
        if not entries and lastrun is not None:
            return self._read_all(folder, lastrun, problems)
        saved = self._load_index(folder, problems)
        names = self.memory_names(folder) if names is None else names
        stats: list[os.stat_result | None] = (self._stat_all(folder, names, problems) if not load
                                              else [None] * len(names))
        listed = (saved or {}).get("entries", [])
        if not load and isinstance(listed, list) and _all_trusted(listed, names, stats):
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

    def _read_all(self, folder: Folder, lastrun: index.Snapshot, problems: list[Problem]) -> FolderScan:
        memories: dict[str, Memory] = {}
        for name in self.memory_names(folder):
            mem = self._read_in(folder, name, problems)
            if mem is not None:
                memories[mem.id] = mem
        return FolderScan(folder, [], memories, problems, None, False, lastrun.run_hashes(), len(memories))

    def scan_since(self, folder: Folder, snap: index.Snapshot, stamp: Stamp | None = None) -> FolderScan:
        """Like scan(load=False), but against the last-run snapshot instead of the index:
        a file whose size and mtime match its row is taken as the last run saw it, unread.
        Entries are made only for the files read again; the unchanged ones are the snapshot
        rows `kept`. A folder with no change returns only its file count (nothing to plan).
        `stamp` (see `_names_since`) may spare listing the folder; the scan's `stamp` is the
        one to keep for the next pass."""
        problems: list[Problem] = []
        if self._unreadable(folder, problems):
            return FolderScan(folder, [], {}, problems, None, False, file_count=0, unreadable=True)
        names, stamp = self._names_since(folder, snap, stamp)
        stats = self._stat_all(folder, names, problems)
        if names == snap.names:  # the common case: no file came or went
            differ = _differ_in_place(names, stats, snap)
        elif len(names) > len(snap.names):
            differ = _differ_with_new(names, stats, snap)
        else:
            differ = [n for n, st in zip(names, stats, strict=True)
                      if st is None or not _trusted(snap, n, st)]
        if not differ:
            return FolderScan(folder, [], {}, problems, None, False, {}, file_count=len(names), stamp=stamp)
        gone = {n for n, st in zip(names, stats, strict=True) if st is None}
        present = set(names) - gone - set(differ)
        kept = [i for i, n in enumerate(snap.names) if n in present]
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
        reread = sorted(set(differ) | (set(snap.names) - present))
        return FolderScan(folder, found, memories, problems, None, False, run_hashes, len(kept) + len(found),
                          reread, snap, kept, stamp)

    def _names_since(self, folder: Folder, snap: index.Snapshot,
                     stamp: Stamp | None) -> tuple[list[str], Stamp | None]:
        """`memory_names`, found by difference with the snapshot's (sorted) names: a folder
        where no file came or went costs two set operations, not a filter and a sort. And
        not even a listing when `stamp` still holds: (the folder's mtime, the snapshot's)
        recorded by an earlier pass that listed the folder and found exactly the snapshot's
        names. A file created, removed or renamed in a folder moves its mtime, so the names
        are the same while the mtime is. The stamp returned vouches for the names found, or
        is None; it is only made for a folder last changed a while before it was listed (a
        change after the listing then falls in a later timestamp tick)."""
        try:
            before = os.stat(folder.path).st_mtime_ns
            if stamp == (before, snap.written_ns):
                return snap.names, stamp
            started = time.time_ns()
            found = set(os.listdir(folder.path))
            after = os.stat(folder.path).st_mtime_ns
        except (FileNotFoundError, NotADirectoryError):
            return [], None
        if not found.issuperset(snap.names):
            return self.memory_names(folder), None
        extra = list(filter(_is_memory_name, found.difference(snap.names)))
        if extra:
            return sorted(snap.names + extra), None
        vouched = before == after and before < started - STAMP_AGE_NS
        return snap.names, (before, snap.written_ns) if vouched else None

    def _stat_all(self, folder: Folder, names: list[str],
                  problems: list[Problem]) -> list[os.stat_result | None]:
        """lstat of every name, relative to the folder (one path lookup a file, not seven)."""
        try:
            fd = os.open(folder.path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        except OSError:
            return [None] * len(names)
        try:
            lstat = os.lstat
            try:  # the common case in one comprehension: every file still there, all regular
                fast = [lstat(name, dir_fd=fd) for name in names]
                if all(map(statmod.S_ISREG, [st.st_mode for st in fast])) and (
                        not fast or max([st.st_size for st in fast]) <= MAX_FILE_BYTES):
                    return list(fast)
            except FileNotFoundError:
                pass
            out = list[os.stat_result | None]()
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

    def duplicate_ids(self, listings: dict[str, list[str]] | None = None) -> dict[str, list[str]]:
        """Ids whose file is in two live folders, from file names alone (a memory's id must
        match its file name): bad input, left out wherever they are. `listings`, when given,
        receives each folder's memory file names (a run then need not list them again)."""
        listings = {} if listings is None else listings
        stems: list[str] = []
        for folder in self.memory_folders():
            listings[folder.rel] = names = self.memory_names(folder)
            stems += [name.rsplit(".", 1)[0] for name in names]
        twice = {stem for stem, count in Counter(stems).items() if count > 1}
        where: dict[str, list[str]] = defaultdict(list)
        for rel, names in listings.items() if twice else ():
            for name in names:
                if name.rsplit(".", 1)[0] in twice:
                    where[name.rsplit(".", 1)[0]].append(f"{rel}/{name}")
        return dict(where)

    def scan_all(self, load: bool = True, archive: bool = False) -> StoreScan:
        """Scan every live folder (and the archive); a duplicate id is bad input everywhere."""
        archive = archive and self.real_dir(self.archive)  # never read through a linked archive/
        folders = self.memory_folders() + ([self.archive_folder()] if archive else [])
        result = StoreScan()
        for folder in folders:
            scan = self.scan(folder, load=load)
            result.folders.append(scan)
            result.problems.extend(scan.problems)
        self._drop_duplicate_ids([s for s in result.folders if s.folder.scope != "archive"], result)
        return result

    def read_memory(self, path: Path, folder: Folder) -> Memory:
        """Read one memory file; raises BadRecordError naming the file and the reasons."""
        problems: list[Problem] = []
        if not os.path.lexists(path):
            raise NotFoundError(f"{self.rel(path)}: no such file")
        mem = self._read(path, folder, problems)
        if mem is None:
            raise BadRecordError(self.rel(path), [p.reason for p in problems])
        return mem

    def planned(self, folder: Folder, entries: list[dict[str, Any]]) -> list[Memory]:
        """Memories known from their index entries alone; each file is read when first needed."""
        def load(mem: Memory) -> dict[str, Any] | None:
            return self._read_record(folder, mem.name)

        def confirm(mem: Memory, record: dict[str, Any]) -> dict[str, Any] | None:
            return self._whole_record(folder, mem.name, record)

        return [Memory.planned(e, folder.path, str(e["file"]), load, confirm) for e in entries]

    def _read_record(self, folder: Folder, name: str) -> dict[str, Any] | None:
        """The record of a memory planned from its index entry, read when a rule first needs
        its text (a cold pass reads most of a folder this way): as `_read_in` would give it,
        without what the planned memory already has (its hash, size and mtime are the entry's)
        or does not keep (a Memory, its warnings), and checked only as far as its text is
        used (`model.content_usable`): every other field a rule reads is the entry's, and
        `_whole_record` checks them before the record is rewritten or archived. None when the
        file is gone or bad input."""
        if name.endswith(".json") and folder.scope != "archive":  # (.md: the full read)
            raw = _read_plain(f"{folder.path}/{name}")
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

    def find(self, mem_id: str, archived: bool = True) -> tuple[Memory, Folder]:
        """A memory by id, live first, then (if asked) archived."""
        if not is_valid_id(mem_id):
            raise NotFoundError(f"bad memory id {mem_id!r} (expected mem_ and 1-64 of [0-9A-Za-z_-])")
        folders = self.memory_folders() + ([self.archive_folder()] if archived else [])
        for folder in folders:
            for path in _candidate_files(folder.path, mem_id, folder.scope == "archive"):
                return self.read_memory(path, folder), folder
        raise NotFoundError(f"no memory {mem_id} in this store (see `memcli list`)")

    def memory_names(self, folder: Folder) -> list[str]:
        """The folder's memory file names, sorted (no other file, no dotfile); none when it
        cannot be listed (a scan reports an unreadable folder)."""
        try:
            names = os.listdir(folder.path)
        except OSError:
            return []
        return sorted(filter(_is_memory_name, names))

    def _unreadable(self, folder: Folder, problems: list[Problem]) -> bool:
        """A folder that exists but may not be listed or entered (chmod 000): one problem for
        the folder, and it is left alone: nothing read, nothing written."""
        if os.access(folder.path, os.R_OK | os.X_OK) or not os.path.isdir(folder.path):
            return False
        problems.append(Problem(self.rel(folder.path), _UNREADABLE_FOLDER, "unreadable"))
        return True

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

    def _load_index(self, folder: Folder, problems: list[Problem]) -> dict[str, Any] | None:
        try:
            return index.load(folder.path)
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

    def _drop_duplicate_ids(self, scans: list[FolderScan], result: StoreScan) -> None:
        """An id found in two live files is bad input: each is reported and left out."""
        where: dict[str, list[FolderScan]] = defaultdict(list)
        for scan in scans:
            for mem_id in scan.memories:
                where[mem_id].append(scan)
        for mem_id, holders in where.items():
            if len(holders) < 2:
                continue
            paths = [self.rel(holder.memories[mem_id].path) for holder in holders]
            for holder, path in zip(holders, paths, strict=True):
                others = ", ".join(p for p in paths if p != path)
                result.problems.append(Problem(path, f"duplicate id {mem_id} (also in {others}); "
                                               "left out until one copy is renamed", "duplicate_id"))
                del holder.memories[mem_id]  # the index still lists the file: it is there

    # ------------------------------------------------------------ writing

    def save_index(self, folder: Folder, entries: list[dict[str, Any]]) -> None:
        """Rewrite a folder's index from the given entries (always complete for the folder).
        Never into a folder that is not a real one (fsops refuses a symlink on the way)."""
        if not folder.path.is_dir():
            fsops.mkdir(folder.path)
        index.save(folder.path, index.build(folder.scope, folder.scope_id, entries, now()))

    def refresh_index(self, folder: Folder) -> FolderScan:
        """Bring a folder's index in line with its files; writes only when they disagree."""
        scan = self.scan(folder, load=False)
        if scan.drift and not scan.unreadable:
            self.save_index(folder, scan.entries)
        return scan

    def splice_entries(self, folder: Folder, names: list[str],
                       run_hash_now: bool = False) -> list[dict[str, Any]] | None:
        """Update only the index entries of the files `names` (read again; a file gone loses
        its entry), for a writer that knows every other entry still matches its file: a few
        entries of a 10,000-entry index, not a scan of the folder. With `run_hash_now`, their
        run_hash becomes their content hash. Returns the new entries, or None (nothing
        written) when the index cannot be spliced: the caller then rebuilds it."""
        fresh: list[dict[str, Any]] = []

        def update(name: str, old: dict[str, Any] | None) -> dict[str, Any] | None:
            mem = self.read_quietly(folder.path / name, folder)
            if mem is None:
                return None
            entry = index.entry_for(mem, old, archive=folder.scope == "archive")
            if run_hash_now:
                entry["run_hash"] = entry["content_hash"]
            fresh.append(entry)
            return entry

        if not index.splice(folder.path, folder.scope, folder.scope_id, now(), update, names):
            return None
        return fresh

    @contextmanager
    def writing(self, wait: float) -> Iterator[list[str]]:
        """Hold the lock and first finish or roll back any run a crash left half-done, then
        fold the pending uses into the memory files (SPEC 10); yields what was done, for people."""
        from memcli.recall import uses
        from memcli.store import journal  # journal builds on the store

        with self.lock(wait):
            yield journal.recover(self) + self.migrate_caches() + uses.fold_safely(self)

    def migrate_caches(self) -> list[str]:
        """Move the caches an older memcli kept beside the memories to `.cache/` (SPEC 1);
        the caller holds the lock. Returns what was done, for people."""
        folders = [*self.memory_folders(), self.archive_folder()]
        found = [(f.path, f.rel) for f in folders if self.real_dir(f.path)]
        moved = cache.migrate_folder_caches(self.root, found)
        return [f"moved {moved} cache file(s) from the memory folders into .cache/"] if moved else []

    @contextmanager
    def lock(self, wait: float) -> Iterator[None]:
        """Hold `ops/.lock`, the one-writer-at-a-time lock. The OS drops it when the holder
        dies, so a lock file left by a killed process never blocks the next run."""
        from filelock import FileLock, Timeout

        self.require_safe_layout()  # ops/ (and its lock file) real: the lock never opens through a link
        if not self.ops.is_dir():
            fsops.mkdir(self.ops)
        lock = FileLock(str(self.ops / ".lock"), timeout=max(wait, 0))
        try:
            lock.acquire()
        except Timeout as exc:
            raise LockTimeoutError(self.rel(self.ops / ".lock"), wait) from exc
        try:
            yield
        finally:
            lock.release()


def is_valid_scope_id(name: str) -> bool:
    return bool(name) and len(name) <= 100 and name not in (".", "..") and all(
        c.isalnum() or c in "._-" for c in name) and not name.startswith(".")


def _is_memory_name(name: str) -> bool:
    """A memory file's name: `.json` or `.md`, not a dotfile, not one of memcli's `_` files."""
    return name.endswith((".json", ".md")) and name[0] not in "._"


_PLAIN_OPEN = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)


def _read_plain(path: str) -> bytes | None:
    """The bytes of a usual memory file (regular, within the size limit, read whole in one
    call), or None for anything else: gone, a link, unreadable, too large, or grown while
    read. `_open_read` in short, for the files a cold pass reads by the thousand; a None
    takes the full read, which says what is wrong, if anything."""
    try:
        fd = os.open(path, _PLAIN_OPEN)
    except OSError:
        return None
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


def _kind(path: Path) -> str | None:
    """What is at `path`, for messages: None (nothing), "a folder", "a file", or what else."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return None
    except OSError:
        return "unreadable"
    if statmod.S_ISLNK(mode):
        try:
            return f"a symlink (to {os.readlink(path)})"
        except OSError:
            return "a symlink"
    if statmod.S_ISDIR(mode):
        return "a folder"
    if statmod.S_ISREG(mode):
        return "a file"
    return "a FIFO" if statmod.S_ISFIFO(mode) else "a socket" if statmod.S_ISSOCK(mode) else "a device"


def _candidate_files(folder: Path, mem_id: str, archive: bool) -> Iterator[Path]:
    for ext in (".json", ".md"):
        path = folder / f"{mem_id}{ext}"
        if path.exists() or path.is_symlink():
            yield path
    if archive and folder.is_dir():
        yield from sorted(folder.glob(f"{mem_id}@*"))
