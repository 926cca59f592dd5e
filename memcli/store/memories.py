"""Everyday commands on single memories: add (with the on-save quick check), access, show,
list, reindex (SPEC section 4). Each is one function the CLI calls and renders."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from memcli.errors import BadRecordError, MemcliError, NotFoundError
from memcli.store import fsops, opsfiles
from memcli.store.formats import decode, encode
from memcli.store.model import (
    PRIORITIES,
    TYPES,
    Memory,
    format_ts,
    is_valid_id,
    new_memory_id,
    parse_ts,
    sha256,
    ts_or_none,
    validate,
)
from memcli.store.plans import Outcome
from memcli.store.store import Folder, FolderScan, Problem, Store, _scope_mismatch

# memcli.consolidate.rules (rapidfuzz) is imported where `add` needs it: `show` and `list`
# start lean.

UPDATE_AT = 0.95  # on-save: at or above, the existing memory is updated instead
FLAG_AT = 0.85  # on-save: from here to UPDATE_AT, written and flagged for the next run


@dataclass
class NewMemory:
    type: str
    subtype: str
    scope: str
    scope_id: str
    tags: list[str] = field(default_factory=list)
    priority: str = "normal"
    created_by: str = ""
    summary: str = ""
    details: str | None = None
    fmt: str = "json"


@dataclass
class AddResult:
    id: str
    path: str
    action: str  # "created" or "updated"
    similar_to: str | None = None
    similarity: float | None = None
    flag_reason: str | None = None
    problems: list[Problem] = field(default_factory=list)


def add_memory(store: Store, new: NewMemory, moment: dt.datetime) -> AddResult:
    """Write a memory, or update a near-identical one already there (the quick check).
    The search index takes the file in (see `memcli.recall.index.keeping_current`)."""
    from memcli.recall.index import keeping_current

    with keeping_current(store) as note:
        return _add(store, new, moment, note)


def _add(store: Store, new: NewMemory, moment: dt.datetime, note: Callable[[Folder, str], None]) -> AddResult:
    _check_new(new)
    folder = store.folder(new.scope, new.scope_id)
    record = _record(new, moment)
    draft = Memory(record, folder.path / f"{record['id']}.{new.fmt}", new.fmt)
    scan = store.scan(folder, load=False)
    match, score = _closest(store, folder, scan.entries, draft, scan.problems)
    if match is not None and score >= FLAG_AT:
        verdict = _quick_verdict(store, match, draft, score, moment)
        if verdict is None:
            note(folder, match.path.name)
            return _update_existing(store, folder, match, draft, score, moment, scan)
        note(folder, draft.path.name)
        _write_new(store, folder, draft, scan)
        _flag_pair(store, match.id, draft.id, score, verdict, moment)
        return AddResult(draft.id, store.rel(draft.path), "created", match.id, score, verdict,
                         scan.problems)
    note(folder, draft.path.name)
    _write_new(store, folder, draft, scan)
    return AddResult(draft.id, store.rel(draft.path), "created", problems=scan.problems)


def _check_new(new: NewMemory) -> None:
    if new.scope == "global" and new.scope_id not in ("", "global"):
        raise MemcliError(f"scope global takes no scope id (got {new.scope_id!r}); leave out --scope-id")
    if new.type not in TYPES:
        raise MemcliError(f"unknown type {new.type!r} (use one of {', '.join(TYPES)})")
    if new.priority not in PRIORITIES:
        raise MemcliError(f"unknown priority {new.priority!r} (use one of {', '.join(PRIORITIES)})")
    if new.fmt not in ("json", "md"):
        raise MemcliError(f"unknown format {new.fmt!r} (use json or md)")
    if not (new.summary or new.details):
        raise MemcliError("a memory needs --summary or --details")
    if any(not isinstance(t, str) or not t.strip() for t in new.tags):
        raise MemcliError("tags must be non-empty strings")


def _record(new: NewMemory, moment: dt.datetime) -> dict[str, Any]:
    content: dict[str, Any] = {"summary": new.summary}
    if new.details:
        content["details"] = new.details
    stamp = format_ts(moment)
    return {"id": new_memory_id(moment), "type": new.type, "subtype": new.subtype,
            "scope": new.scope, "scope_id": new.scope_id if new.scope != "global" else "global",
            "tags": list(dict.fromkeys(new.tags)), "priority": new.priority,
            "created_by": new.created_by, "consent": False, "created_at": stamp,
            "updated_at": stamp, "last_accessed": None, "access_count": 0, "content": content,
            "supersedes": [], "superseded_by": [], "promoted_to": None, "promoted_from": None}


def _closest(store: Store, folder: Folder, entries: list[dict[str, Any]], draft: Memory,
             problems: list[Problem]) -> tuple[Memory | None, float]:
    """The most similar memory of the same folder, type and subtype that meets the tag rule."""
    from memcli.consolidate import rules

    cfg = store.settings.consolidation
    text = rules.content_text(draft.content)
    best: tuple[Memory | None, float] = (None, 0.0)
    for entry in entries:
        if entry.get("type") != draft.type or (entry.get("subtype") or "") != draft.subtype:
            continue
        if rules.tag_overlap(entry.get("tags") or [], draft.tags) <= cfg.tag_overlap:
            continue
        path = folder.path / entry["file"]
        try:
            mem = store.read_memory(path, folder)
        except BadRecordError as exc:
            problems.append(Problem(store.rel(path), "; ".join(exc.reasons)))
            continue
        except MemcliError:
            continue  # gone since the folder was listed
        if not rules.takes_part(mem):
            continue
        score = rules.similarity(rules.content_text(mem.content), text, cfg.scorer)
        if score > best[1]:
            best = (mem, score)
    return best


def _quick_verdict(store: Store, old: Memory, draft: Memory, score: float,
                   moment: dt.datetime) -> str | None:
    """None when the existing memory may simply be updated; else why the pair is flagged."""
    from memcli.consolidate import rules

    if score < UPDATE_AT:
        return "similar_on_save"
    if old.created_by != draft.created_by:
        return "different_authors"
    cfg = replace(store.settings.consolidation, min_age_days=0)  # the age rule aside
    if rules.protection_reason(old, moment, cfg) or rules.protection_reason(draft, moment, cfg):
        return "protected"
    from memcli.consolidate.guards import guard_rejects

    guard = guard_rejects(rules.raw_text(old.content), rules.raw_text(draft.content))
    return f"guard:{guard}" if guard else None


def _update_existing(store: Store, folder: Folder, old: Memory, draft: Memory, score: float,
                     moment: dt.datetime, scan: FolderScan) -> AddResult:
    data = dict(old.data)
    data["tags"] = list(dict.fromkeys(old.tags + draft.tags))
    data["updated_at"] = format_ts(moment)
    fsops.write_replace(old.path, encode(data, old.fmt))
    _index_written(store, folder, old.path.name, scan)
    return AddResult(old.id, store.rel(old.path), "updated", old.id, score, problems=scan.problems)


def _write_new(store: Store, folder: Folder, draft: Memory, scan: FolderScan) -> None:
    if not folder.path.is_dir():
        fsops.mkdir(folder.path)
    fsops.write_new(draft.path, encode(draft.data, draft.fmt))
    _index_written(store, folder, draft.path.name, scan)


def _index_written(store: Store, folder: Folder, name: str, scan: FolderScan) -> None:
    """The index after writing one file: its entry spliced in when the index matched the
    folder before (the scan `add` made says so, with no problem), else brought in line."""
    if scan.drift or scan.problems or store.splice_entries(folder, [name]) is None:
        store.refresh_index(folder)


def _flag_pair(store: Store, old_id: str, new_id: str, score: float, reason: str,
               moment: dt.datetime) -> None:
    """Record the pair under `flagged` in ops/state.json for the next run to look at first."""
    state = opsfiles.read_state(store.root)
    state.setdefault("flagged", []).append(
        {"ids": [old_id, new_id], "similarity": round(score, 4), "reason": reason,
         "at": format_ts(moment)})
    opsfiles.write_state(store.root, state)


# ---------------------------------------------------------------- access, show, list


def access_memory(store: Store, mem_id: str, moment: dt.datetime,
                  session: str | None = None) -> dict[str, Any]:
    """Record a use (SPEC 10) the way every reader does: at once, without the store lock,
    folded into the file by the next command that holds it. Returns the memory's id,
    access_count and last_accessed with the use (and any other pending one) counted, and
    whether this use was recorded (not when `session` already counted it)."""
    from memcli.recall import uses

    mem, folder = store.find(mem_id, archived=True)
    if folder.scope == "archive":
        raise MemcliError(f"{mem_id} is archived; bring it back with `memcli restore {mem_id}`")
    recorded = uses.record(store.root, [mem.id], session, moment)
    view = uses.record_view(mem.data, uses.pending(store.root))
    return {"id": mem.id, "access_count": view.get("access_count", 0),
            "last_accessed": view.get("last_accessed"), "recorded": bool(recorded)}


def forget_memory(store: Store, mem_id: str, reason: str | None, wait: float) -> Outcome:
    """Archive a memory on purpose (SPEC 10 `forget`): a logged run (trigger `forget`) that
    `memcli undo` reverses and after which `memcli restore` brings the memory back. The
    archive reason is `forgotten`, or the one given."""
    from memcli.consolidate import undo

    return undo.forget(store, mem_id, _reason(reason), wait)


def _reason(reason: str | None) -> str:
    if reason is None:
        return "forgotten"
    text = " ".join(reason.split())[:200]
    if not text:
        raise MemcliError("--reason must not be empty (leave it out for 'forgotten')")
    return text


SORTS = ("folder", "created", "updated", "accessed", "uses")
_SORT_FIELD = {"created": "created_at", "updated": "updated_at", "accessed": "last_accessed",
               "uses": "access_count"}
# Index fields that are the cache's own business (file facts, content hashes, the run's
# marks), never part of what `list --json` reports about a memory.
CACHE_FIELDS = frozenset({"size", "mtime_ns", "content_hash", "details_len", "text_len", "sort_len",
                          "run_hash", "sig", "norm_key"})
SUMMARY_CUT = 80  # the index keeps this much of a summary (`memcli.store.index.entry_for`)


@dataclass
class ListFilter:
    scope: str | None = None
    scope_id: str | None = None
    type: str | None = None
    subtype: str | None = None
    tags: list[str] = field(default_factory=list)
    archived: bool = False
    since: dt.datetime | None = None  # created at or after
    sort: str = "folder"
    limit: int | None = None  # most entries to return (None or 0: all)


@dataclass
class Listing:
    entries: list[dict[str, Any]]
    matched: int  # before --limit
    problems: list[Problem]


def list_memories(store: Store, flt: ListFilter) -> tuple[list[dict[str, Any]], list[Problem]]:
    """Every entry that passes the filter (no limit), and the problems met: see `list_view`."""
    listing = list_view(store, replace(flt, limit=None))
    return listing.entries, listing.problems


def list_view(store: Store, flt: ListFilter,
              progress: Callable[[str, int, int], None] | None = None) -> Listing:
    """Index entries (refreshed from the files) that pass the filter, with their folder, in
    the order asked: `folder` (folders in order, newest first within each), else newest
    (most used) first. Cache fields are left out; a summary the index cut ends with "…".
    `progress(stage, files_done, files_total)` after each folder."""
    from memcli.recall import uses

    if flt.sort not in SORTS:
        raise MemcliError(f"unknown sort {flt.sort!r} (use one of {', '.join(SORTS)})")
    extra = uses.pending(store.root)  # a use counts from the moment it is recorded
    folders = [store.archive_folder()] if flt.archived else store.memory_folders()
    folders = [f for f in folders if flt.archived or _folder_matches(f, flt)]
    sizes = [len(store.memory_names(f)) for f in folders] if progress else []
    found: list[dict[str, Any]] = []
    problems: list[Problem] = []
    for n, folder in enumerate(folders):
        scan = store.scan(folder, load=False)
        problems += scan.problems
        found += [_listed({**uses.record_view(e, extra), "folder": folder.rel}) for e in scan.entries
                  if _entry_matches(e, flt)]
        if progress:
            progress("listing memories", sum(sizes[:n + 1]), sum(sizes))
    # Newest first within each folder (created_at, then id), folders in order: two stable sorts.
    found.sort(key=lambda e: (str(e.get("created_at") or ""), e["id"]), reverse=True)
    if flt.sort == "folder":
        found.sort(key=lambda e: e["folder"])
    else:
        key = _SORT_FIELD[flt.sort]
        found.sort(key=lambda e: (e.get(key) or 0) if key == "access_count" else str(e.get(key) or ""),
                   reverse=True)
    matched = len(found)
    return Listing(found[:flt.limit] if flt.limit else found, matched, problems)


def _listed(entry: dict[str, Any]) -> dict[str, Any]:
    shown = {k: v for k, v in entry.items() if k not in CACHE_FIELDS}
    summary = shown.get("summary")
    if isinstance(summary, str) and len(summary) >= SUMMARY_CUT:
        shown["summary"] = summary[:SUMMARY_CUT - 1].rstrip() + "…"
    return shown


def parse_since(text: str, moment: dt.datetime) -> dt.datetime:
    """`--since`: a date or time (2026-11-01, 2026-11-01T08:00:00Z) or an age (7d, 12h, 30m)."""
    value = text.strip()
    units = {"d": 86400, "h": 3600, "m": 60}
    if len(value) > 1 and value[-1] in units and value[:-1].isdigit():
        return moment - dt.timedelta(seconds=int(value[:-1]) * units[value[-1]])
    try:
        return parse_ts(value)[0]
    except ValueError:
        raise MemcliError(f"--since {text!r}: use a date (2026-11-01), a time (2026-11-01T08:00:00Z) "
                          "or an age (7d, 12h, 30m)") from None


def _folder_matches(folder: Folder, flt: ListFilter) -> bool:
    return (flt.scope in (None, folder.scope)) and (flt.scope_id in (None, folder.scope_id))


def _entry_matches(entry: dict[str, Any], flt: ListFilter) -> bool:
    if flt.since is not None:
        created = ts_or_none(entry.get("created_at"))
        if created is None or created < flt.since:
            return False
    return ((flt.type in (None, entry.get("type")))
            and (flt.subtype in (None, entry.get("subtype")))
            and all(t in (entry.get("tags") or []) for t in flt.tags))


def show_memory(store: Store, mem_id: str) -> tuple[Memory, Folder, dict[str, Any]]:
    """A memory, its folder, and its record as readers see it (pending uses counted). A
    person looking records no use."""
    from memcli.recall import uses

    mem, folder = store.find(mem_id, archived=True)
    return mem, folder, uses.record_view(mem.data, uses.pending(store.root))


@dataclass
class ReindexResult:
    folders: dict[str, int]  # every folder's entries, the archive's too
    problems: list[Problem]
    archive: str = "archive"  # the archive's key in `folders`

    @property
    def live(self) -> int:
        """Live memories indexed (the archive's are not memories in use)."""
        return sum(n for rel, n in self.folders.items() if rel != self.archive)

    @property
    def archived(self) -> int:
        return self.folders.get(self.archive, 0)


def reindex(store: Store, progress: Callable[[str, int, int], None] | None = None) -> ReindexResult:
    """Rebuild every index (and the archive's) from the files, one folder at a time so that
    memory stays flat however large the store. `progress(stage, files_done, files_total)`."""
    counts: dict[str, int] = {}
    problems: list[Problem] = []
    folders = [*store.memory_folders(), store.archive_folder()]
    sizes = [len(store.memory_names(f)) for f in folders] if progress else []
    for n, folder in enumerate(folders):
        if progress:
            progress("reindexing", sum(sizes[:n]), sum(sizes))
        scan = store.scan(folder, load=True)
        problems += scan.problems
        if scan.unreadable:  # reported; a folder memcli may not read keeps its index as it is
            continue
        store.save_index(folder, scan.entries)
        counts[folder.rel] = len(scan.entries)
    for mem_id, paths in store.duplicate_ids().items():
        problems += [Problem(path, f"duplicate id {mem_id} (in {', '.join(paths)}); rename one copy",
                             "duplicate_id") for path in paths]
    return ReindexResult(counts, problems, store.archive_folder().rel)


# ---------------------------------------------------------------- ids by prefix, edit

MIN_PREFIX = 4  # characters after `mem_`: shorter prefixes match too much to be meant


def resolve_id(store: Store, text: str, archived: bool = True, missing_ok: bool = False) -> str:
    """The full id of the memory that `text` names: the id itself, or a unique prefix of
    one (with or without `mem_`), as git takes a commit's. An ambiguous prefix is an error
    that lists the candidates; a file name (`mem_x.json`) is taken as its id. When nothing
    matches: NotFoundError, or (`missing_ok`) the id as given, for a caller whose own
    message says more."""
    wanted = text.strip()
    for ext in (".json", ".md"):
        wanted = wanted.removesuffix(ext)
    wanted = wanted if wanted.startswith("mem_") else "mem_" + wanted
    if not is_valid_id(wanted):
        raise NotFoundError(f"bad memory id {text!r} (expected mem_ and 1-64 of [0-9A-Za-z_-])")
    folders = store.memory_folders() + ([store.archive_folder()] if archived else [])
    found: dict[str, str] = {}
    for folder in folders:
        for name in store.memory_names(folder):
            mem_id = name.rsplit(".", 1)[0].split("@")[0]
            if mem_id == wanted:
                return mem_id
            if mem_id.startswith(wanted):
                found.setdefault(mem_id, folder.rel)
    if len(found) == 1:
        return next(iter(found))
    if not found:
        if missing_ok:
            return wanted
        raise NotFoundError(f"no memory {text} in this store (see `memcli list`)")
    if len(wanted) - 4 < MIN_PREFIX:
        raise MemcliError(f"{text!r} is too short a prefix ({len(found)} memories start with it); "
                          f"give at least {MIN_PREFIX} characters after mem_")
    shown = sorted(found.items())
    lines = "".join(f"\n  {mem_id}  {rel}" for mem_id, rel in shown[:10])
    more = f"\n  ... and {len(shown) - 10} more" if len(shown) > 10 else ""
    raise MemcliError(f"{text!r} is ambiguous: {len(found)} memories start with it:{lines}{more}")


@dataclass
class EditResult:
    id: str
    path: str
    changed: bool


def check_edit(store: Store, mem: Memory, folder: Folder, raw: bytes) -> dict[str, Any]:
    """The record an edit saved, or BadRecordError naming the file and every reason: it must
    parse, meet the contract, keep its id and belong to its folder."""
    try:
        data = decode(raw, mem.fmt)
    except ValueError as exc:
        raise BadRecordError(store.rel(mem.path), [str(exc)]) from None
    errors, _ = validate(data, file_id=mem.id)
    errors += _scope_mismatch(data, folder)
    if errors:
        raise BadRecordError(store.rel(mem.path), errors)
    return data


def save_edit(store: Store, mem_id: str, base_hash: str, raw: bytes, wait: float) -> EditResult:
    """Replace a memory's file with edited bytes (checked first, see `check_edit`), then
    bring its folder's index and the search index in line: a hand edit through memcli
    leaves nothing stale. `base_hash` is the content hash the edit started from: a file
    changed meanwhile is not overwritten. An archived memory is not edited (restore it first)."""
    from memcli.recall.index import keeping_current

    mem, folder = store.find(mem_id, archived=True)
    if folder.scope == "archive":
        raise MemcliError(f"{mem_id} is archived; bring it back with `memcli restore {mem_id}` to edit it")
    check_edit(store, mem, folder, raw)
    with store.writing(wait), keeping_current(store) as note:
        if mem.content_hash != base_hash or store.find(mem_id, archived=False)[0].content_hash != base_hash:
            raise MemcliError(f"{store.rel(mem.path)} changed while it was being edited; edit it again")
        if sha256(raw) == base_hash:
            return EditResult(mem_id, store.rel(mem.path), False)
        note(folder, mem.path.name)
        fsops.write_replace(mem.path, raw)
        if store.splice_entries(folder, [mem.path.name]) is None:
            store.refresh_index(folder)
    return EditResult(mem_id, store.rel(mem.path), True)
