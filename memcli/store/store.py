"""The store on disk (SPEC section 1): discovery, layout, folders, indices, the lock (scanning
one folder: `memcli.store.scanning`; reading one memory file: `memcli.store.reading`).

Reading never changes anything. Bad input (a file that does not parse, a record that breaks
the contract, a symlink, an oversized file, a duplicate id) becomes a `Problem` naming the
file and the reason; the file is left alone and everything else goes on.
"""

from __future__ import annotations

import os
import stat as statmod
from collections import Counter, defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from memcli.config import Settings, load_settings
from memcli.errors import LockTimeoutError, NoStoreError, NotFoundError, UnsafePathError
from memcli.store import cache, fsops, index, locate
from memcli.store.locate import OPS_MARKERS  # noqa: F401  (re-exported)
from memcli.store.model import Memory, is_valid_id, now
from memcli.store.reading import (  # noqa: F401  (Folder, Problem, _scope_mismatch: re-exported)
    Folder,
    Problem,
    _scope_mismatch,
)
from memcli.store.scanning import (  # noqa: F401  (STAMP_AGE_NS, Stamp, FolderScan: re-exported)
    STAMP_AGE_NS,
    FolderScan,
    FolderScanning,
    Stamp,
    StoreScan,
)

SCOPE_ROOTS = ("agent", "team", "global")
# The store's own top-level folders (SPEC 8): each must be a real folder when it exists, never
# a symlink or anything else, and the lock files in ops/ regular files.
TOP_FOLDERS = ("agent", "team", "global", "archive", "ops", ".cache")
LOCK_FILES = ("ops/.lock", "ops/.tick.lock")
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


class Store(FolderScanning):
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

    # ------------------------------------------------------------ the store's folders together

    def duplicate_ids(self, listings: dict[str, list[str]] | None = None) -> dict[str, list[str]]:
        """Ids whose file is in two live folders, from file names alone (a memory's id must
        match its file name): bad input, left out wherever they are. `listings`, when given,
        receives each folder's memory file names (a run then need not list them again)."""
        listings = {} if listings is None else listings
        stems: list[str] = []
        for folder in self.memory_folders():
            listings[folder.rel] = names = self.memory_names(folder)
            stems += [name.rsplit(".", 1)[0] for name in names]
        # (every name of the store: a set tells whether any stem comes twice, in C; which ones
        # only then)
        twice = set() if len(set(stems)) == len(stems) else \
            {stem for stem, count in Counter(stems).items() if count > 1}
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

    def find(self, mem_id: str, archived: bool = True) -> tuple[Memory, Folder]:
        """A memory by id, live first, then (if asked) archived."""
        if not is_valid_id(mem_id):
            raise NotFoundError(f"bad memory id {mem_id!r} (expected mem_ and 1-64 of [0-9A-Za-z_-])")
        folders = self.memory_folders() + ([self.archive_folder()] if archived else [])
        for folder in folders:
            for path in _candidate_files(folder.path, mem_id, folder.scope == "archive"):
                return self.read_memory(path, folder), folder
        raise NotFoundError(f"no memory {mem_id} in this store (see `memcli list`)")

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
