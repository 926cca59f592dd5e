"""Reversing a run (`undo`) and bringing one archived memory back (`restore`), SPEC 4 and 8.

Both are plans like a consolidation run's: actions carrying `FileOp`s, each with the hash its
file must have just before, executed by the same `engine.apply`. So an undo or a restore gets
its own journal, pre-images, manifest and log entry (trigger `undo` or `restore`): it is
crash-safe the same way, and can itself be undone.

Undo reads `archive/runs/<run_id>/manifest.json`. For each file the run changed:
- it existed before and after: rewrite it with its pre-image;
- it existed before only (a memory the run moved away): create it again from its pre-image;
- it exists after only, under archive/ (a copy the run archived): remove it (its bytes stay in
  the undo run's own pre-images);
- it exists after only, in a memory folder: when the same id left another place in that run
  (a move, e.g. a restore) remove it; otherwise it is a memory the run created (a promoted
  copy) and it moves to the archive with reason `undone`.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from memcli.consolidate import decisions, engine, rules
from memcli.consolidate.decisions import undone_by
from memcli.errors import MemcliError, NotFoundError, UndoRefusedError
from memcli.store import fsops, journal, log, paths
from memcli.store.formats import decode, encode, fmt_of
from memcli.store.model import ARCHIVE_FIELDS, Memory, is_valid_id, now, sha256
from memcli.store.plans import Action, FileOp, Outcome
from memcli.store.store import Folder, Store

RUN_ID_RE = paths.RUN_ID_RE


@dataclass
class Change:
    """One file of a run's manifest."""

    path: str
    before: str | None
    after: str | None

    @property
    def mem_id(self) -> str:
        return Path(self.path).stem.split("@")[0]

    @property
    def archived_copy(self) -> bool:
        return self.path.split("/", 1)[0] == "archive"


# ---------------------------------------------------------------- undo


def undo_run(store: Store, run_id: str, wait: float = 10.0,
             progress: engine.Progress | None = None) -> Outcome:
    """Reverse run `run_id` exactly, as a new logged run with trigger `undo`."""
    return _run(store, wait, lambda: plan_undo(store, run_id, now()), progress)


def _run(store: Store, wait: float, make_plan: Callable[[], engine.Planning],
         progress: engine.Progress | None = None) -> Outcome:
    """Plan and apply under the lock, after recovering any interrupted run."""
    with store.writing(wait) as recovered:
        outcome = engine.apply(store, make_plan(), progress)
    outcome.notes = recovered + outcome.notes
    return outcome


def plan_undo(store: Store, run_id: str, moment: dt.datetime) -> engine.Planning:
    """The plan that puts back every file `run_id` changed; refused (UndoRefusedError) when
    that cannot be done exactly."""
    check_undoable(store, run_id)
    changes = read_manifest(store, run_id)
    folded = refuse_changed(store, run_id, changes)
    planner = _planner(store, "undo", moment)
    moved = {c.mem_id for c in changes if c.before is not None and c.after is None}
    created = [c for c in changes if _is_created_memory(c, moved)]
    action = _undo_action(store, run_id, changes, [c for c in changes if c not in created])
    _keep_uses(action, folded)
    planner.add(action)
    for change in created:
        planner.add(_archive_created(store, planner, change, change.path in folded))
    for item in decisions.from_undone(log.find_run(store.root, run_id), planner.plan.run_id, planner.stamp):
        planner.add(_decision(item))
    planner.plan.memory_count = _live_count_after(store, planner.plan.actions)
    return engine.Planning(planner.plan)


def _decision(item: dict[str, Any]) -> Action:
    """A decision the undo records (SPEC 3.6): logged, and kept in the review queue."""
    kind = {decisions.KEEP_APART: "keep_apart", decisions.NO_PROMOTE: "no_promote",
            decisions.USED: "used"}[item["reason"]]
    return Action("decision", {"type": "decision", "decision": kind, "memory_ids": item["memory_ids"]},
                  f"later runs: {decisions.describe(item)}", review=item)


def refuse_changed(store: Store, run_id: str, changes: list[Change]) -> dict[str, tuple[str, Any]]:
    """Refuse, naming each file, when any file is no longer as the run left it. A file whose
    only change since is folded uses is not a change that blocks: returned (path -> (its
    hash now, the uses)) so that the undo keeps those uses."""
    from memcli.recall import uses

    changed: list[str] = []
    folded: dict[str, tuple[str, Any]] = {}
    for change in changes:
        now_hash = current_hash(store, change.path)
        if now_hash == change.after:
            continue
        since = uses.folded_since(store.root, change.path, change.after, now_hash)
        if since is not None and now_hash is not None:
            folded[change.path] = (now_hash, since)
        else:
            changed.append(describe_change(store, change))
    if changed:
        raise UndoRefusedError(
            f"cannot undo {run_id}: {len(changed)} file(s) changed since that run: "
            + "; ".join(changed) + ". Undo refused so that these changes are not lost: put the "
            "files back as the run left them, or undo the later runs first (newest first)")
    return folded


def _keep_uses(action: Action, folded: dict[str, tuple[str, Any]]) -> None:
    """The uses folded into files since the run stay counted: each op on such a file expects
    the file as it is now, and the memory the undo puts back live gets those uses."""
    from memcli.recall.uses import Pending, applied

    if not folded:
        return
    by_id: dict[str, Pending] = {}
    for path, (_, since) in folded.items():
        total = by_id.setdefault(Change(path, None, None).mem_id, Pending())
        total.count += since.count
        if since.last is not None and (total.last is None or since.last > total.last):
            total.last = since.last
    for op in action.ops:
        if op.path in folded:
            op.expect = folded[op.path][0]
        mem_id = Change(op.path, None, None).mem_id
        if op.kind in ("write", "create") and op.data is not None and mem_id in by_id \
                and op.path.split("/", 1)[0] != "archive":
            fmt = fmt_of(Path(op.path)) or "json"
            data = decode(op.data, fmt)
            count, last = applied(data.get("access_count"), data.get("last_accessed"), by_id[mem_id])
            op.data = encode({**data, "access_count": count, "last_accessed": last}, fmt)


def _undo_action(store: Store, run_id: str, changes: list[Change], restore: list[Change]) -> Action:
    """The logged `undo` action: every file back to its pre-image, or gone when the run made it."""
    ops = [_restore_op(store, run_id, c) for c in restore if (c.before, c.after) != (None, None)]
    return Action("undo", {"type": "undo", "run_id": run_id, "files_restored": len(changes)},
                  f"put back the {len(changes)} file(s) {run_id} changed",
                  touches=sorted({c.mem_id for c in changes}), ops=_ordered(ops),
                  folders=sorted({_index_folder(c.path) for c in changes}))


def check_undoable(store: Store, run_id: str) -> None:
    """Refuse a run that is not in the log, or was undone already (and not redone)."""
    if not RUN_ID_RE.match(run_id):
        raise NotFoundError(f"bad run id {run_id!r} (expected run_ followed by letters and digits)")
    entries = log.read_entries(store.root)
    if not any(e.get("run_id") == run_id for e in entries):
        raise UndoRefusedError(f"{run_id} is not in the log (see `memcli log`): a run that did not "
                               "finish was rolled back already, so there is nothing to undo")
    by = undone_by(entries, run_id)
    if by is not None:
        raise UndoRefusedError(f"{run_id} was already undone by {by} "
                               f"(to redo it: memcli undo {by})")


def read_manifest(store: Store, run_id: str) -> list[Change]:
    path = journal.run_dir(store, run_id) / "manifest.json"
    try:
        raw = orjson.loads(fsops.read_bytes(path))
    except FileNotFoundError as exc:
        raise UndoRefusedError(f"{run_id} changed no memory file (it has no manifest): "
                               "nothing to undo") from exc
    except (OSError, ValueError) as exc:
        raise UndoRefusedError(f"{store.rel(path)} is unreadable ({exc}); cannot undo {run_id}") from exc
    files = raw.get("files") if isinstance(raw, dict) else None
    hashes = ("sha256_before", "sha256_after")
    if not isinstance(files, list) or paths.too_deep(raw) or not all(
            isinstance(f, dict) and all(paths.is_hash(f.get(key)) for key in hashes) for f in files):
        raise UndoRefusedError(f"{store.rel(path)} is not a run manifest; cannot undo {run_id}")
    for f in files:
        problem = paths.path_problem(store.root, f.get("path"))
        if problem:
            raise UndoRefusedError(f"the manifest of {run_id} names a path memcli does not own: {problem}")
    return [Change(str(f["path"]), f.get("sha256_before"), f.get("sha256_after")) for f in files]


def current_hash(store: Store, rel: str) -> str | None:
    """The file's hash now (None: nothing there; a symlink or a file memcli may not read
    never matches a hash)."""
    return journal.hash_of(store.root / rel)


def describe_change(store: Store, change: Change) -> str:
    if change.after is None:
        return f"{change.path} (exists again)"
    now = current_hash(store, change.path)
    if now is None:
        return f"{change.path} (gone)"
    if now in (journal.SYMLINK, journal.UNREADABLE):
        return f"{change.path} ({'now a symlink' if now == journal.SYMLINK else 'cannot be read'})"
    return f"{change.path} (changed)"


def _is_created_memory(change: Change, moved: set[str]) -> bool:
    return (change.before is None and change.after is not None and not change.archived_copy
            and change.mem_id not in moved)


def _restore_op(store: Store, run_id: str, change: Change) -> FileOp:
    if change.before is None:
        return FileOp("remove", change.path, change.after)
    data = _pre_image(store, run_id, change)
    if change.after is None:
        return FileOp("create", change.path, None, data)
    return FileOp("write", change.path, change.after, data)


def _pre_image(store: Store, run_id: str, change: Change) -> bytes:
    path = journal.run_dir(store, run_id) / change.path
    try:
        data = fsops.read_bytes(path)
    except OSError as exc:
        raise UndoRefusedError(f"the pre-image {store.rel(path)} is missing; cannot undo {run_id}") from exc
    if sha256(data) != change.before:
        raise UndoRefusedError(f"the pre-image {store.rel(path)} does not match the manifest; "
                               f"cannot undo {run_id}")
    return data


def _ordered(ops: list[FileOp]) -> list[FileOp]:
    """Rewrites, then re-creations, then removals: a memory is never missing in between."""
    rank = {"write": 0, "create": 1, "remove": 2}
    return sorted(ops, key=lambda op: (rank[op.kind], op.path))


def _archive_created(store: Store, planner: engine.Planner, change: Change, folded: bool = False) -> Action:
    """A memory the undone run created moves to the archive (reason `undone`), with any uses
    folded into it since (`folded`)."""
    path = store.root / change.path
    fmt = fmt_of(path) or "json"
    try:
        raw = fsops.read_bytes(path)
    except OSError as exc:
        reason = exc.strerror or exc
        raise UndoRefusedError(f"{change.path} cannot be read ({reason}); cannot archive it") from exc
    expect = sha256(raw) if folded else (change.after or sha256(raw))  # as the run (and folds) left it
    try:
        mem = Memory(decode(raw, fmt), path, fmt, expect)
    except ValueError as exc:
        raise UndoRefusedError(f"{change.path} is unreadable ({exc}); cannot archive it") from exc
    folder = _memory_folder(store, change.path)
    item = engine.Live(mem, folder, change.path, None, False)
    planner.live[mem.id] = item
    data = rules.archived_record(mem.data, reason="undone", folder=folder.rel,
                                 run_id=planner.plan.run_id, stamp=planner.stamp)
    return Action("undo_archive", {"type": "archive", "memory_id": mem.id, "reason": "undone"},
                  f"{mem.id} was created by the undone run: moved to the archive",
                  touches=[mem.id], ops=planner.archive_ops(item, data),
                  folders=[folder.rel, "archive"])


# ---------------------------------------------------------------- restore


def restore_memory(store: Store, mem_id: str, wait: float = 10.0) -> Outcome:
    """Bring one archived memory back to the folder it left, as a logged run (`restore`)."""
    return _run(store, wait, lambda: plan_restore(store, mem_id, now()))


def plan_restore(store: Store, mem_id: str, moment: dt.datetime) -> engine.Planning:
    if not is_valid_id(mem_id):
        raise NotFoundError(f"bad memory id {mem_id!r} (expected mem_ and 1-64 of [0-9A-Za-z_-])")
    live = live_paths(store, mem_id)
    if live:
        raise MemcliError(f"{mem_id} is live already ({', '.join(live)}); nothing to restore")
    mem = latest_archived(store, mem_id)
    folder = origin_folder(store, mem)
    planner = _planner(store, "restore", moment)
    data = restored_record(mem.data, planner.stamp)
    dest = store.rel(folder.path / f"{mem_id}.{mem.fmt}")
    source = store.rel(mem.path)
    ops = [FileOp("create", dest, None, encode(data, mem.fmt)),
           FileOp("remove", source, mem.content_hash)]
    planner.add(Action("restore", {"type": "restore", "memory_id": mem_id, "from": source,
                                   "to": folder.rel},
                       f"restored {mem_id} from {source} to {folder.rel} (counted as a use)",
                       touches=[mem_id], ops=ops, folders=[folder.rel, "archive"]))
    planner.plan.memory_count = _live_count_after(store, planner.plan.actions)
    return engine.Planning(planner.plan)


def forget(store: Store, mem_id: str, reason: str, wait: float = 10.0) -> Outcome:
    """Archive one live memory on purpose (`memcli forget`, MCP `forget`), as a logged run
    (trigger `forget`) that `memcli undo` reverses; `memcli restore` brings the memory back."""
    return _run(store, wait, lambda: plan_forget(store, mem_id, reason, now()))


def plan_forget(store: Store, mem_id: str, reason: str, moment: dt.datetime) -> engine.Planning:
    if not is_valid_id(mem_id):
        raise NotFoundError(f"bad memory id {mem_id!r} (expected mem_ and 1-64 of [0-9A-Za-z_-])")
    mem, folder = store.find(mem_id, archived=True)
    if folder.scope == "archive":
        raise MemcliError(f"{mem_id} is archived already (see `memcli show {mem_id}`)")
    planner = _planner(store, "forget", moment)
    rel = store.rel(mem.path)
    item = engine.Live(mem, folder, rel, None, False)
    planner.live[mem.id] = item
    data = rules.archived_record(mem.data, reason=reason, folder=folder.rel, run_id=planner.plan.run_id,
                                 stamp=planner.stamp)
    planner.add(Action("forget", {"type": "archive", "memory_id": mem_id, "reason": reason},
                       f"forgot {mem_id} ({reason}): moved to the archive; `memcli restore {mem_id}` "
                       "brings it back", touches=[mem_id], ops=planner.archive_ops(item, data),
                       folders=[folder.rel, "archive"]))
    planner.plan.memory_count = _live_count_after(store, planner.plan.actions)
    return engine.Planning(planner.plan)


def restored_record(data: dict[str, Any], stamp: str) -> dict[str, Any]:
    """The record back in its folder: without the archive fields and `superseded_by` (it is
    a live memory on its own again), with the restore counted as a use."""
    out = {k: v for k, v in data.items() if k not in ARCHIVE_FIELDS}
    if "superseded_by" in out:
        out["superseded_by"] = []
    out["access_count"] = int(out.get("access_count") or 0) + 1
    out["last_accessed"] = stamp
    return out


def live_paths(store: Store, mem_id: str) -> list[str]:
    found = []
    for folder in store.memory_folders():
        for ext in ("json", "md"):
            path = folder.path / f"{mem_id}.{ext}"
            if path.exists() or path.is_symlink():
                found.append(store.rel(path))
    return found


def latest_archived(store: Store, mem_id: str) -> Memory:
    """The most recently archived version of a memory (by archived_at, then file name)."""
    archive = store.archive_folder()
    names = [f"{mem_id}.json", f"{mem_id}.md"]
    paths = [archive.path / n for n in names if (archive.path / n).exists()]
    paths += sorted(p for p in archive.path.glob(f"{mem_id}@*") if fmt_of(p))
    if not paths:
        raise NotFoundError(f"no archived memory {mem_id} (see `memcli list --archived`)")
    versions = [store.read_memory(p, archive) for p in paths]
    return max(versions, key=lambda m: (str(m.data.get("archived_at") or ""), m.path.name))


def origin_folder(store: Store, mem: Memory) -> Folder:
    """The folder an archived memory left (`archived_from`, else its scope)."""
    origin = mem.data.get("archived_from")
    if not isinstance(origin, str) or not origin:
        scope = str(mem.data.get("scope") or "")
        origin = "global" if scope == "global" else f"{scope}/{mem.data.get('scope_id')}"
    scope, _, scope_id = origin.partition("/")
    if scope not in ("agent", "team", "global") or (scope != "global" and not scope_id):
        raise MemcliError(f"{store.rel(mem.path)}: cannot tell which folder it left ({origin!r})")
    folder = store.folder(scope, scope_id or "global")
    if mem.data.get("scope") not in (None, folder.scope):
        raise MemcliError(f"{store.rel(mem.path)}: its scope {mem.data.get('scope')!r} does not "
                          f"match the folder it left ({folder.rel})")
    return folder


# ---------------------------------------------------------------- shared


def _planner(store: Store, trigger: str, moment: dt.datetime) -> engine.Planner:
    """A planner over no folder: gives the run id, the stamp and the archive naming."""
    return engine.Planner(store, engine.RunOptions(trigger=trigger, folders=[]), moment)


def _memory_folder(store: Store, rel: str) -> Folder:
    parts = rel.split("/")
    if parts[0] == "global":
        return store.folder("global", "global")
    return store.folder(parts[0], parts[1])


def _index_folder(rel: str) -> str:
    parts = rel.split("/")
    return parts[0] if parts[0] in ("global", "archive") else "/".join(parts[:2])


def _live_count_after(store: Store, actions: list[Action]) -> int:
    """How many memory files the live folders will hold once the actions are done."""
    count = sum(len(store.memory_names(f)) for f in store.memory_folders())
    for op in (op for action in actions for op in action.ops):
        if op.path.split("/", 1)[0] != "archive":
            count += {"create": 1, "remove": -1}.get(op.kind, 0)
    return count
