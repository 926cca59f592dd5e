"""Applying a plan safely, and recovering a run that died (SPEC sections 3 and 8).

Before its first change a run writes `ops/journal-<run_id>.json`: every file it plans to
touch. Each file is copied to `archive/runs/<run_id>/<path>` (its pre-image) before the run
first changes it. When all memory changes are done the journal is marked committed, with
what is left to do (indices, review queue, state, log); the journal is removed last.
The next command that finds a journal finishes a committed run or rolls an uncommitted one
back from its pre-images (files it created move to `archive/runs/<run_id>/rolled-back/`),
so the store is never left half-changed and nothing is lost. Rolling back is idempotent, so a
recovery that itself dies is simply done again; a run that fails with an error (not a crash)
rolls itself back at once. Symlinks are never followed: a path that became one no longer
matches any planned hash, and the action that expected a file there is skipped.
"""

from __future__ import annotations

import contextlib
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from memcli.consolidate import review
from memcli.errors import MemcliError
from memcli.store import fsops, index, log, opsfiles
from memcli.store.model import Action, FileOp, Plan, sha256
from memcli.store.store import Store

JOURNAL_GLOB = "journal-*.json"


@dataclass
class Applied:
    actions: list[Action] = field(default_factory=list)
    skips: list[dict[str, Any]] = field(default_factory=list)
    manifest: list[dict[str, Any]] = field(default_factory=list)


def run_dir(store: Store, run_id: str) -> Path:
    return store.archive / "runs" / run_id


def journal_path(store: Store, run_id: str) -> Path:
    return store.ops / f"journal-{run_id}.json"


def pending(store: Store) -> list[Path]:
    return sorted(store.ops.glob(JOURNAL_GLOB)) if store.ops.is_dir() else []


# ---------------------------------------------------------------- apply


def execute(store: Store, plan: Plan) -> Applied:
    """Carry out the plan's actions in order, each only if its files are as planned."""
    if run_dir(store, plan.run_id).exists():
        raise MemcliError(f"run {plan.run_id} was already applied (archive/runs/{plan.run_id} exists)")
    paths = [{"path": op.path, "kind": op.kind, "expect": op.expect, "after": op.after}
             for action in plan.actions for op in action.ops]
    _write_journal(store, plan.run_id, {"run_id": plan.run_id, "phase": "applying", "files": paths})
    try:
        return _execute_actions(store, plan)
    except Exception:
        # A real error (a full disk, a name taken behind our back): put the store back now
        # rather than leave it half-changed until the next command; if even that fails, the
        # journal stays and the next command (or `doctor --fix`) rolls back.
        with contextlib.suppress(Exception):
            rollback(store, plan.run_id, paths)
        raise


def _execute_actions(store: Store, plan: Plan) -> Applied:
    applied = Applied()
    seen: dict[str, str | None] = {}  # path -> hash on disk now, once looked at
    before: dict[str, str | None] = {}
    skipped_after: set[str] = set()  # hashes an action that was skipped would have written
    for action in plan.actions:
        stale = _first_mismatch(store, action, seen)
        if stale is not None:
            applied.skips.append(_skip_entry(action, stale, skipped_after))
            skipped_after.update(op.after for op in action.ops if op.after)
            continue
        for op in action.ops:
            _do(store, plan.run_id, op, seen, before)
        applied.actions.append(action)
    applied.manifest = _manifest(store, plan.run_id, before, seen)
    return applied


def _first_mismatch(store: Store, action: Action, seen: dict[str, str | None]) -> FileOp | None:
    for op in action.ops:
        if op.path not in seen:
            seen[op.path] = _hash_of(store.root / op.path)
        if seen[op.path] != op.expect:
            return op
    return None


def _skip_entry(action: Action, op: FileOp, skipped_after: set[str]) -> dict[str, Any]:
    reason = "depends_on_skipped" if op.expect in skipped_after else "modified_during_run"
    mem_id = Path(op.path).stem.split("@")[0]
    return {"type": "skip", "memory_id": mem_id, "reason": reason, "action": action.type}


def _do(store: Store, run_id: str, op: FileOp, seen: dict[str, str | None],
        before: dict[str, str | None]) -> None:
    path = store.root / op.path
    if op.path not in before:
        before[op.path] = seen[op.path]
        if seen[op.path] is not None:
            _pre_image(store, run_id, op.path, path.read_bytes())
    if op.kind == "write":
        fsops.write_replace(path, op.data or b"")
    elif op.kind == "create":
        fsops.ensure_parent(path)
        fsops.write_new(path, op.data or b"")
    elif op.kind == "remove":
        fsops.unlink(path)  # its bytes are in the pre-image taken just above
    seen[op.path] = op.after


def _pre_image(store: Store, run_id: str, rel: str, data: bytes) -> None:
    target = run_dir(store, run_id) / rel
    if not target.exists():
        fsops.ensure_parent(target)
        fsops.write_new(target, data)


def _manifest(store: Store, run_id: str, before: dict[str, str | None],
              seen: dict[str, str | None]) -> list[dict[str, Any]]:
    files = [{"path": rel, "sha256_before": before[rel], "sha256_after": seen[rel],
              "pre_image": f"archive/runs/{run_id}/{rel}" if before[rel] else None}
             for rel in before]
    if files:
        target = run_dir(store, run_id) / "manifest.json"
        fsops.ensure_parent(target)
        fsops.write_new(target, orjson.dumps({"run_id": run_id, "files": files},
                                             option=orjson.OPT_INDENT_2))
    return files


SYMLINK = "symlink"  # the "hash" of a path that is a symbolic link: never equals a real one


def _hash_of(path: Path) -> str | None:
    """The sha256 of the file at `path`, None when nothing is there. A symlink is never
    followed: it hashes to SYMLINK, so an action expecting a file there is skipped."""
    if path.is_symlink():
        return SYMLINK
    try:
        return sha256(path.read_bytes())
    except FileNotFoundError:
        return None


# ---------------------------------------------------------------- finish (also after a crash)


def commit(store: Store, run_id: str, finish: dict[str, Any]) -> dict[str, set[str] | None]:
    """Mark the run's memory changes done and record what is left, then do it. Returns the
    content hashes now in each covered folder (for the signature cache)."""
    data = {"run_id": run_id, "phase": "committed", **finish}
    fsops.write_replace(journal_path(store, run_id), orjson.dumps(data))
    return complete(store, data)


def complete(store: Store, data: dict[str, Any]) -> dict[str, set[str] | None]:
    """Indices, review queue, state and log for a committed run; idempotent."""
    pause = store.settings.consolidation.index_pause_ms / 1000
    covered = set(data.get("covered", []))
    hashes: dict[str, set[str] | None] = {}
    refresh: dict[str, list[str]] = data.get("refresh") or {}
    for position, rel in enumerate(sorted(set(data.get("folders", [])) | covered)):
        if position and pause:
            time.sleep(pause)  # spreads index rewrites out for readers on slow disks
        if rel in refresh and _update_folder(store, rel, refresh[rel], rel in covered):
            hashes[rel] = None  # not every hash was looked at: the signature cache only grows
            continue
        hashes[rel] = _reindex_folder(store, rel, refresh_run_hash=rel in covered)
    review.add_items(store.root, data.get("review", []))
    _update_state(store, data.get("state", {}))
    if data.get("log_entry"):
        log.append(store.root, data["log_entry"])
    journal = journal_path(store, data["run_id"])
    if journal.exists():
        fsops.unlink(journal)
    return {rel: found for rel, found in hashes.items() if rel in covered}


def _reindex_folder(store: Store, rel: str, refresh_run_hash: bool) -> set[str]:
    """Bring a folder's index up to date; a folder the run covered also gets `run_hash`
    refreshed and its last-run snapshot (what session_end compares against) rewritten."""
    folder = store.folder_by_rel(rel)
    if folder is None:
        return set()
    scan = store.scan(folder, load=False, compare=not refresh_run_hash)
    if scan.index is None and not scan.entries and not (folder.path / "_index.json").exists():
        return set()  # an empty folder with no index (e.g. one a rolled-back run created) needs none
    if refresh_run_hash:
        for entry in scan.entries:
            entry["run_hash"] = entry["content_hash"]
    if refresh_run_hash or scan.drift:
        store.save_index(folder, scan.entries)
    if refresh_run_hash and folder.scope != "archive":
        index.save_lastrun(folder.path, scan.entries)
    return {e["content_hash"] for e in scan.entries}


def _update_folder(store: Store, rel: str, names: list[str], covered: bool) -> bool:
    """Update only the index entries (and snapshot rows) of `names`: the files a session_end
    run read or changed in the folder; every other file is as the last run left it. False when
    that cannot be done (no usable index or snapshot): the caller rebuilds from the files."""
    folder = store.folder_by_rel(rel)
    if folder is None:
        return False
    snap = index.load_lastrun(folder.path) if covered and folder.scope != "archive" else None
    if covered and folder.scope != "archive" and snap is None:
        return False
    fresh = store.splice_entries(folder, names, run_hash_now=covered)
    if fresh is None:
        return False
    if snap is not None:
        index.update_lastrun(folder.path, snap, set(names), fresh)
    return True


def _update_state(store: Store, update: dict[str, Any]) -> None:
    if not update:
        return
    state = opsfiles.read_state(store.root)
    trigger, stamp = update.get("trigger"), update.get("at")
    entry = {"run_id": update.get("run_id"), "at": stamp}
    state.setdefault("runs", {})[str(trigger)] = entry
    if update.get("success"):
        state["last_success"] = {**entry, "trigger": trigger}
    done = {review.pair_key(p) for p in update.get("flagged_done", [])}
    if done:
        state["flagged"] = [f for f in state.get("flagged", [])
                            if review.pair_key(f.get("ids", [])) not in done]
    for key, value in update.get("extra", {}).items():
        state[key] = value
    opsfiles.write_state(store.root, state)


def _write_journal(store: Store, run_id: str, data: dict[str, Any]) -> None:
    fsops.ensure_parent(journal_path(store, run_id))
    fsops.write_new(journal_path(store, run_id), orjson.dumps(data))


# ---------------------------------------------------------------- recovery


def recover(store: Store) -> list[str]:
    """Finish or roll back every run a crash left half-done; returns what was done, for people."""
    messages: list[str] = []
    for path in pending(store):
        try:
            data = orjson.loads(path.read_bytes())
            run_id = str(data["run_id"])
        except (OSError, ValueError, KeyError, TypeError):
            messages.append(f"unreadable journal {store.rel(path)} left in place; see `memcli doctor`")
            continue
        if data.get("phase") == "committed":
            complete(store, data)
            messages.append(f"finished interrupted run {run_id}")
        else:
            count = rollback(store, run_id, data.get("files", []))
            messages.append(f"rolled back interrupted run {run_id} ({count} file(s) restored)")
    # A crashed run may have left temporary files anywhere it wrote; otherwise only the journal's
    # own (in ops/) can be there, and walking a 100,000-file store on every command costs.
    removed = remove_tmp_files(store, whole_store=bool(messages))
    if removed:
        messages.append(f"removed {removed} temporary file(s) left by an interrupted write")
    return messages


def rollback(store: Store, run_id: str, files: list[dict[str, Any]]) -> int:
    """Put every file the run touched back to its pre-image; move files it created aside.
    Idempotent: a rollback that itself dies half-way is simply done again."""
    restored = 0
    folders: set[str] = set()
    created = {f["path"]: f.get("after") for f in files if f.get("kind") == "create"}
    for rel in dict.fromkeys(f["path"] for f in files):
        folders.add(str(Path(rel).parent))
        restored += _restore_one(store, run_id, rel, created)
    for rel in sorted(folders):
        _reindex_folder(store, rel, refresh_run_hash=False)  # the last-run snapshot stays as it was
    journal = journal_path(store, run_id)
    if journal.exists():
        fsops.unlink(journal)
    return restored


def _restore_one(store: Store, run_id: str, rel: str, created: dict[str, str | None]) -> int:
    pre = run_dir(store, run_id) / rel
    live = store.root / rel
    if pre.exists():
        data = pre.read_bytes()
        if _hash_of(live) == sha256(data):
            return 0
        if live.exists() or live.is_symlink():
            fsops.write_replace(live, data)
        else:
            fsops.ensure_parent(live)
            fsops.write_new(live, data)
        return 1
    if rel in created and _hash_of(live) == created[rel]:
        _move_aside(store, run_id, rel)
        return 1
    return 0


def _move_aside(store: Store, run_id: str, rel: str) -> None:
    """A file the run created (no pre-image, and exactly the bytes the run wrote) goes to
    archive/runs/<run_id>/rolled-back/<path>: out of the store's folders, never deleted."""
    live = store.root / rel
    aside = run_dir(store, run_id) / "rolled-back" / rel
    if aside.exists() and _hash_of(aside) == _hash_of(live):
        fsops.unlink(live)  # an earlier rollback died between the link and the unlink
        return
    if aside.exists():
        aside = aside.with_name(f"{aside.stem}@{secrets.token_hex(4)}{aside.suffix}")
    fsops.ensure_parent(aside)
    fsops.move(live, aside)


def remove_tmp_files(store: Store, whole_store: bool = True) -> int:
    """Remove temporary files of interrupted writes (never memories: only memcli's own names)."""
    count = 0
    for path in list(fsops.leftover_tmp_files(store.root if whole_store else store.ops)):
        fsops.unlink(path)
        count += 1
    return count
