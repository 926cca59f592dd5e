"""`doctor`: check every invariant of a store and report each problem (SPEC 4 and 8).

Each problem has a stable code, the path it concerns, a severity and a message. Errors:
`index_missing`, `index_unreadable`, `index_count`, `index_stale` (an index that does not list
exactly its folder's valid memory files, or whose count or cached fields are wrong; `--fix`
rebuilds it), `journal_pending` (a run died half-way; `--fix` finishes or rolls it back),
`tmp_file` (left by an interrupted write; `--fix` removes it), `duplicate_id`, `dangling_link`
(`supersedes`, `superseded_by`, `promoted_to` or `promoted_from` naming no memory, live or
archived), `ops_unreadable` (log, state or review queue does not parse), and the store scan's
bad input: `unreadable`, `invalid`, `symlink`, `too_large`, `bad_file`. Warnings:
`no_timezone`, `archived_and_live` (an id live and archived at once), `archive_fields` (an
archived record lacking one of the four archive fields), `bad_folder` (something under agent/
or team/ that is not a memory folder, so memcli never looks inside), `stray_file` (a file in
a memory folder that is neither a memory nor `_index.json`; `--fix` moves an old cache to
`.cache/`). Only what needs no guessing is fixed.

Hostile input (SPEC 8) has its own errors: `unsafe_folder` (a top-level folder that is a
symlink or not a folder, or a lock file that is not a regular file: every other command
refuses the store until it is moved aside; doctor looks at nothing behind it),
`journal_invalid` (a journal that does not read as one memcli wrote: never acted on), and
`duplicate_id` also for one id stored as both `<id>.json` and `<id>.md` in one folder.

`ok` is false while any error remains; warnings are reported and do not fail. Without
`--fix` nothing is written and no lock is taken; a journal or temporary file that belongs to
a memcli process writing right now (the store lock is held) is only a warning.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memcli.errors import MemcliError
from memcli.store import cache, fsops, index, journal, log, opsfiles
from memcli.store.formats import fmt_of
from memcli.store.model import is_valid_id
from memcli.store.store import FolderScan, Store, StoreScan, is_valid_scope_id

_ARCHIVE_KEYS = {"archived_at": "archived_at", "archive_reason": "reason",  # record -> index
                 "archived_from": "from", "archive_run_id": "run_id"}
_LINK_FIELDS = ("supersedes", "superseded_by", "promoted_to", "promoted_from")
_SCAN_OWN_CODES = ("index_unreadable", "index_gone")  # the index checks below report these


@dataclass
class Finding:
    code: str
    path: str
    severity: str  # "error" or "warning"
    message: str
    fixed: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"code": self.code, "path": self.path, "severity": self.severity,
                "message": self.message, "fixed": self.fixed}

    @property
    def key(self) -> tuple[str, str]:
        return (self.code, self.path)


@dataclass
class Report:
    problems: list[Finding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what --fix did, for people

    @property
    def ok(self) -> bool:
        return not any(p.severity == "error" and not p.fixed for p in self.problems)

    def to_json(self) -> dict[str, Any]:
        return {"problems": [p.to_json() for p in self.problems], "ok": self.ok}


# ---------------------------------------------------------------- entry points


def diagnose(store: Store) -> Report:
    """Check everything; writes nothing, takes no lock."""
    return Report(check(store, writer_active=_writer_active(store)))


def repair(store: Store, wait: float = 10.0) -> Report:
    """Under the store lock: check, repair what needs no guessing, check again. Each problem
    of the first check is marked `fixed` when the second no longer finds it."""
    with store.lock(wait):
        before = check(store)
        notes = _recover(store)
        notes += rebuild_indices(store)
        after = check(store)
    return Report(_mark_fixed(before, after), notes)


def check(store: Store, writer_active: bool = False) -> list[Finding]:
    layout = [_from_problem(p) for p in store.layout_problems()]
    unsafe = {f.path for f in layout}
    if "ops" not in unsafe:  # nothing behind a linked ops/ is read
        layout += check_ops_files(store) + check_leftovers(store, writer_active)
    found = layout
    found += check_folders(store) + check_stray(store)
    scan = store.scan_all(load=True, archive=True)  # (never behind an unsafe top-level folder)
    found += [_from_problem(p) for p in scan.problems if p.code not in _SCAN_OWN_CODES]
    found += check_twins(store, scan)
    dups = duplicate_ids(scan)
    for folder_scan in scan.folders:
        found += check_index(store, folder_scan, dups)
    found += check_ids(store, scan) + check_links(store, scan) + check_archive_fields(store, scan)
    return found


def _mark_fixed(before: list[Finding], after: list[Finding]) -> list[Finding]:
    remaining = {f.key for f in after}
    out = [Finding(f.code, f.path, f.severity, f.message, f.key not in remaining) for f in before]
    seen = {f.key for f in before}
    return out + [f for f in after if f.key not in seen]


def _recover(store: Store) -> list[str]:
    try:
        notes = journal.recover(store)
    except MemcliError as exc:  # e.g. an unreadable log stops a committed run from finishing
        return [f"could not recover an interrupted run: {exc}"]
    from memcli.recall import uses

    notes += store.migrate_caches()
    notes += uses.fold_safely(store)  # pending uses, as every command holding the lock does
    removed = journal.remove_tmp_files(store)  # the whole store: doctor looks everywhere
    return notes + ([f"removed {removed} temporary file(s) left by an interrupted write"] if removed else [])


# ---------------------------------------------------------------- ops files and leftovers


def check_ops_files(store: Store) -> list[Finding]:
    """The log, state file and review queue read, have their shape, and can be written back
    (a run refuses to start otherwise)."""
    found = []
    for path in [*opsfiles.ops_files(store.root), *log.month_files(store.root)]:
        reason = opsfiles.file_problem(path)
        if reason:
            reason = reason.removeprefix(f"{path}: ")
            found.append(Finding("ops_unreadable", store.rel(path), "error",
                                 f"{reason}; memcli will not overwrite it, and runs refuse to start "
                                 "until it is fixed or moved aside"))
    return found


def check_leftovers(store: Store, writer_active: bool) -> list[Finding]:
    severity = "warning" if writer_active else "error"
    busy = " (a memcli process holds the store lock: it may be writing right now)" if writer_active else ""
    found = [_journal_finding(store, p, severity, busy) for p in journal.pending(store)]
    found += [Finding("tmp_file", store.rel(p), severity,
                      "temporary file left by an interrupted write; --fix removes it" + busy)
              for p in fsops.leftover_tmp_files(store.root)]
    return found


def _journal_finding(store: Store, path: Path, severity: str, busy: str) -> Finding:
    data, problem = journal.read_journal(store, path)
    if data is None:
        return Finding("journal_invalid", store.rel(path), "error",
                       f"not a journal memcli acts on ({problem}); it is left alone: move it aside "
                       "once you have looked at it")
    return Finding("journal_pending", store.rel(path), severity, _journal_message(data) + busy)


def _journal_message(data: dict[str, Any]) -> str:
    phase = data.get("phase")
    if phase == "committed":
        return f"run {data.get('run_id')} died after its changes were done; --fix finishes it"
    return f"run {data.get('run_id')} died half-way; --fix rolls it back from its pre-images"


def _writer_active(store: Store) -> bool:
    """Whether another process holds the store lock now (probed without waiting or writing)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not on POSIX: assume nobody writes
        return False
    if not store.real_dir(store.ops):
        return False  # nothing behind a linked ops/ is opened
    try:
        fd = os.open(store.ops / ".lock", os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)  # closing drops the probe's shared lock at once
    return False


def check_folders(store: Store) -> list[Finding]:
    """Anything under agent/ or team/ that is not a memory folder: memcli never looks inside."""
    found = []
    for scope in ("agent", "team"):
        base = store.root / scope
        try:
            children = sorted(base.iterdir()) if store.real_dir(base) else []
        except OSError as exc:
            found.append(Finding("unreadable", scope, "error", f"folder cannot be read ({exc.strerror}); "
                                 "nothing in it is looked at or touched"))
            continue
        for child in children:
            if not (child.is_dir() and not child.is_symlink() and is_valid_scope_id(child.name)):
                found.append(Finding("bad_folder", store.rel(child), "warning",
                                     f"not a {scope} folder (a plain folder named with letters, digits, "
                                     "'.', '_', '-'): memcli ignores it and any memory in it"))
    return found


def check_stray(store: Store) -> list[Finding]:
    """Files in a memory folder (or archive/) that are neither a memory nor `_index.json`:
    a folder holds only those (SPEC 1), so that it diffs and merges as its memories alone.
    A cache an older memcli kept there is moved to `.cache/` by `--fix` (and by the next
    writing command); anything else is left for a person to move."""
    found = []
    for folder in [*store.memory_folders(), store.archive_folder()]:
        try:
            names = sorted(os.listdir(folder.path)) if store.real_dir(folder.path) else []
        except OSError:
            continue  # an unreadable folder is reported by the scan
        for name in names:
            if name == index.INDEX_NAME or _memory_name(name, folder.scope == "archive") or (
                    name.startswith(".") and name.endswith(fsops.TMP_SUFFIX)):  # tmp: check_leftovers
                continue
            if folder.scope == "archive" and name == "runs" and store.real_dir(folder.path / name):
                continue
            rel = store.rel(folder.path / name)
            if name in cache.LEGACY_NAMES:
                found.append(Finding("stray_file", rel, "warning", "a cache an older memcli kept beside the "
                                     "memories; --fix (or the next writing command) moves it into .cache/"))
            else:
                found.append(Finding("stray_file", rel, "warning", "not a memory file: a memory folder holds "
                                     "only memories and _index.json; memcli ignores it, move it elsewhere"))
    return found


def _memory_name(name: str, archive: bool) -> bool:
    stem, dot, ext = name.rpartition(".")
    if not dot or ext not in ("json", "md"):
        return False
    if archive:
        stem = stem.split("@", 1)[0]
    return is_valid_id(stem)


# ---------------------------------------------------------------- files and indices


def check_twins(store: Store, scan: StoreScan) -> list[Finding]:
    """One id stored twice in one folder (`<id>.json` and `<id>.md`): the scan keeps one of
    them as the memory, so it is found from the file names. (Twins in two folders the scan
    reports itself.)"""
    found = []
    for mem_id, places in store.duplicate_ids().items():
        folders = {p.rsplit("/", 1)[0] for p in places}
        if len(folders) == len(places):
            continue  # each in its own folder: reported by the scan
        for place in places:
            others = ", ".join(p for p in places if p != place)
            found.append(Finding("duplicate_id", place, "error", f"duplicate id {mem_id} (also in {others}); "
                                 "left out of every run until one copy is renamed or moved aside"))
    return found


def duplicate_ids(scan: StoreScan) -> set[str]:
    """Ids the scan found live in two files (it leaves them out of the folders' entries)."""
    return {Path(p.path).stem for p in scan.problems if p.code == "duplicate_id"}


def _from_problem(problem: Any) -> Finding:
    return Finding(problem.code, problem.path, problem.severity, problem.reason)


def check_index(store: Store, scan: FolderScan, dups: set[str]) -> list[Finding]:
    """The index lists exactly the folder's valid memory files (duplicate ids aside, which are
    reported on their own), with `entry_count` right and cached fields up to date."""
    rel = store.rel(scan.folder.path / index.INDEX_NAME)
    fresh = {e["file"]: e for e in scan.entries if e["id"] not in dups}
    if scan.index is None:
        return _no_index(store, scan, rel, len(fresh))
    saved = [e for e in scan.index.get("entries", []) if isinstance(e, dict)]
    found = []
    if scan.index.get("entry_count") != len(saved):
        found.append(Finding("index_count", rel, "error", f"entry_count is {scan.index.get('entry_count')!r} "
                             f"but it holds {len(saved)} entries; --fix rebuilds it"))
    listed = {str(e.get("file")): e for e in saved if e.get("id") not in dups}
    message = _stale_message(listed, fresh)
    if message:
        found.append(Finding("index_stale", rel, "error", message + "; --fix rebuilds it from the files"))
    return found


def _no_index(store: Store, scan: FolderScan, rel: str, files: int) -> list[Finding]:
    if (scan.folder.path / index.INDEX_NAME).exists():
        return [Finding("index_unreadable", rel, "error", "the index does not parse; --fix rebuilds it")]
    if files:
        return [Finding("index_missing", rel, "error",
                        f"no index for {files} memory file(s); --fix builds it")]
    return []


def _stale_message(listed: dict[str, dict[str, Any]], fresh: dict[str, dict[str, Any]]) -> str | None:
    gone = sorted(set(listed) - set(fresh))
    new = sorted(set(fresh) - set(listed))
    if gone or new:
        parts = ([f"lists {len(gone)} file(s) that are not valid memory files there ({_few(gone)})"]
                 if gone else []) + ([f"misses {len(new)} file(s) ({_few(new)})"] if new else [])
        return "; ".join(parts)
    outdated = sorted(name for name, entry in fresh.items()
                      if _cached(listed[name]) != _cached(entry, listed[name]))
    return f"out of date for {len(outdated)} file(s) ({_few(outdated)})" if outdated else None


# Cached fields an index written before them lacks, which is no fault: what reads them reads
# the file instead (`sort_len`: pair search reads the text to learn its length).
_OPTIONAL = ("sort_len",)


def _cached(entry: dict[str, Any], saved: dict[str, Any] | None = None) -> dict[str, Any]:
    """What an entry says about its file; size and mtime only tell whether the cache may be
    trusted without reading the file (a copied store has new mtimes): not a problem. With
    `saved` (the index's entry, `entry` the one the file gives), an optional field the saved
    entry lacks is left out; one it holds must be right."""
    return {k: v for k, v in entry.items() if k not in ("size", "mtime_ns")
            and (saved is None or k not in _OPTIONAL or k in saved)}


def _few(names: list[str]) -> str:
    return ", ".join(names[:5]) + (f", and {len(names) - 5} more" if len(names) > 5 else "")


def rebuild_indices(store: Store) -> list[str]:
    """Rewrite every index the checks find wrong, from the files."""
    scan = store.scan_all(load=True, archive=True)
    dups = duplicate_ids(scan)
    rebuilt, failed = [], []
    for folder_scan in scan.folders:
        if not folder_scan.unreadable and check_index(store, folder_scan, dups):
            try:
                store.save_index(folder_scan.folder, folder_scan.entries)
                rebuilt.append(folder_scan.folder.rel)
            except OSError as exc:  # one folder memcli may not write: the others are still fixed
                reason = exc.strerror or exc
                failed.append(f"could not rebuild the index of {folder_scan.folder.rel} ({reason})")
    return ([f"rebuilt the index of {', '.join(rebuilt)}"] if rebuilt else []) + failed


# ---------------------------------------------------------------- ids and links


def check_ids(store: Store, scan: StoreScan) -> list[Finding]:
    """An id live and archived at once (a warning: nothing is lost, but one should go)."""
    archived = {e["id"]: e["file"] for s in scan.folders if s.folder.scope == "archive" for e in s.entries}
    found = []
    for folder_scan in scan.folders:
        if folder_scan.folder.scope == "archive":
            continue
        for entry in folder_scan.entries:
            if entry["id"] in archived:
                path = store.rel(folder_scan.folder.path / entry["file"])
                found.append(Finding("archived_and_live", path, "warning",
                                     f"{entry['id']} is live here and archived as "
                                     f"archive/{archived[entry['id']]}"))
    return found


def check_links(store: Store, scan: StoreScan) -> list[Finding]:
    """Every link names a memory that exists, live or archived (a bad file counts as existing:
    it is reported on its own)."""
    known = set(_all_file_ids(store))
    found = []
    for folder_scan in scan.folders:
        for entry in folder_scan.entries:
            missing = [f"{name} -> {target}" for name, target in _links(entry) if target not in known]
            if missing:
                found.append(Finding("dangling_link", store.rel(folder_scan.folder.path / entry["file"]),
                                     "error", "links to no memory, live or archived: " + ", ".join(missing)))
    return found


def _links(entry: dict[str, Any]) -> Iterator[tuple[str, str]]:
    for name in _LINK_FIELDS:
        value = entry.get(name)
        targets = value if isinstance(value, list) else [value]
        for target in targets:
            if isinstance(target, str) and target:
                yield name, target


def _all_file_ids(store: Store) -> Iterator[str]:
    folders = [f.path for f in store.memory_folders()]
    folders += [store.archive] if store.real_dir(store.archive) else []
    for folder in folders:
        with contextlib.suppress(OSError):
            for path in folder.iterdir():
                if fmt_of(path) is not None:
                    yield path.stem.split("@")[0]


def check_archive_fields(store: Store, scan: StoreScan) -> list[Finding]:
    found = []
    for folder_scan in scan.folders:
        if folder_scan.folder.scope != "archive":
            continue
        for entry in folder_scan.entries:
            lacking = [name for name, key in _ARCHIVE_KEYS.items() if not entry.get(key)]
            if lacking:
                found.append(Finding("archive_fields", store.rel(folder_scan.folder.path / entry["file"]),
                                     "warning", "archived record lacks " + ", ".join(lacking)))
    return found
