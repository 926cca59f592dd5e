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
matches any planned hash, and the action that expected a file there is skipped; an action
whose path leads through a symlinked or unwritable folder is skipped before anything starts.

A journal is read back from disk, so it is checked like any input (`journal_problem`): a run
id, memory-file paths inside the store's memory folders with no link on the way, folders of
the store. One that fails is left in place, reported, and never acted on.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from memcli.consolidate import review
from memcli.errors import MemcliError
from memcli.store import fsops, index, lastrun, log, opsfiles, paths, planned, staged
from memcli.store.model import sha256
from memcli.store.plans import Action, FileOp, Plan
from memcli.store.store import Store

JOURNAL_GLOB = "journal-*.json"


@dataclass
class Applied:
    actions: list[Action] = field(default_factory=list)
    skips: list[dict[str, Any]] = field(default_factory=list)
    manifest: list[dict[str, Any]] = field(default_factory=list)
    files: list[dict[str, Any]] = field(default_factory=list)  # what the run's journal lists


def run_dir(store: Store, run_id: str) -> Path:
    return store.archive / "runs" / run_id


def journal_path(store: Store, run_id: str) -> Path:
    return store.ops / f"journal-{run_id}.json"


def pending(store: Store) -> list[Path]:
    return sorted(store.ops.glob(JOURNAL_GLOB)) if store.real_dir(store.ops) else []


class RecordingFailed(MemcliError):
    """A run's memory changes are done and committed, but finishing it (indices, review
    queue, state, log) failed: the journal stays, and the next command finishes it."""

    def __init__(self, run_id: str, cause: BaseException) -> None:
        self.run_id = run_id
        self.cause = cause
        reason = cause.strerror if isinstance(cause, OSError) and cause.strerror else str(cause)
        super().__init__(f"run {run_id} made all its changes, but recording it failed ({reason}); "
                         "nothing is lost: the next memcli command (or `memcli doctor --fix`) "
                         "finishes recording it")


# ---------------------------------------------------------------- apply


def execute(store: Store, plan: Plan, progress: Callable[[str, int, int], None] | None = None) -> Applied:
    """Carry out the plan's actions in order, each only if its files are as planned;
    `progress("applying", files_done, files_total)` now and then."""
    if not paths.is_run_id(plan.run_id):
        raise MemcliError(f"bad run id {plan.run_id!r}; nothing was changed")
    if run_dir(store, plan.run_id).exists():
        raise MemcliError(f"run {plan.run_id} was already applied (archive/runs/{plan.run_id} exists)")
    unsafe = _unsafe_actions(store, plan)
    files = [{"path": op.path, "kind": op.kind, "expect": op.expect, "after": op.after}
             for n, action in enumerate(plan.actions) if n not in unsafe for op in action.ops]
    # the journal is the first file of the pre-images' batch: durable with them, at its two
    # barriers, before any memory is changed (rather than two fsyncs of its own before them)
    batch = staged.Staged(store.root)
    _write_journal(store, plan.run_id, {"run_id": plan.run_id, "phase": "applying", "files": files}, batch)
    try:
        applied = _execute_actions(store, plan, unsafe, batch, progress)
        applied.files = files
        return applied
    except Exception:
        # A real error (a full disk, a name taken behind our back): put the store back now
        # rather than leave it half-changed until the next command; if even that fails, the
        # journal stays and the next command (or `doctor --fix`) rolls back.
        batch.discard()  # (the journal's temporary file, when it came before any barrier)
        with contextlib.suppress(Exception):
            rollback(store, plan.run_id, files)
        raise


def _unsafe_actions(store: Store, plan: Plan) -> dict[int, str]:
    """Actions with a path memcli must not touch (SPEC 8: through a symlinked folder, outside
    the memory folders) or cannot (a folder it may not write): skipped whole, before the
    journal is written, so that one bad folder stops only what would change it."""
    found: dict[int, str] = {}
    folders: dict[str, str | None] = {}  # a folder's problem is the same for each of its files
    for n, action in enumerate(plan.actions):
        for op in action.ops:
            problem = paths.file_problem(op.path)
            if problem is None:
                parent = op.path.rpartition("/")[0]
                if parent not in folders:
                    folders[parent] = paths.link_problem(store.root, op.path) or _unwritable(store, op.path)
                problem = folders[parent]
            if problem:
                found[n] = problem
                break
    return found


def _unwritable(store: Store, rel: str) -> str | None:
    """A folder (the nearest that exists on the way to `rel`) memcli may not change."""
    folder = (store.root / rel).parent
    while not os.path.lexists(folder) and folder != store.root:
        folder = folder.parent
    if os.access(folder, os.W_OK | os.X_OK):
        return None
    return f"{store.rel(folder)} cannot be written (permission denied)"


def _execute_actions(store: Store, plan: Plan, unsafe: dict[int, str], batch: staged.Staged,
                     progress: Callable[[str, int, int], None] | None = None) -> Applied:
    """Which actions still find their files as planned (each sees the ones before it as done),
    then their pre-images made durable in one batch (`batch`, which holds the journal
    already), then their changes in another: no file is changed before the journal and every
    pre-image are safely on disk (see `staged.Staged`)."""
    applied = Applied()
    seen: dict[str, str | None] = {}  # path -> hash on disk now, once looked at (then as planned)
    before: dict[str, str | None] = {}  # path -> hash before the run's first change to it
    skipped_after: set[str] = set()  # hashes an action that was skipped would have written
    for n, action in enumerate(plan.actions):
        if n in unsafe:
            applied.skips.append(_unsafe_skip(action, unsafe[n]))
            skipped_after.update(op.after for op in action.ops if op.after)
            continue
        stale = _first_mismatch(store, action, seen)
        if stale is not None:
            applied.skips.append(_skip_entry(action, stale, skipped_after, seen.get(stale.path)))
            skipped_after.update(op.after for op in action.ops if op.after)
            continue
        for op in action.ops:
            before.setdefault(op.path, seen[op.path])
            seen[op.path] = op.after
        applied.actions.append(action)
    total = sum(len(action.ops) for action in applied.actions)  # files: an undo is one action of many
    done = 0
    try:
        keep = [rel for rel, digest in before.items() if digest is not None]
        runs = run_dir(store, plan.run_id)
        near: dict[Path, int] = {}  # a pre-image's folder -> the device of the nearest that exists
        links = [staged.Staged.linkable(store.root / rel, runs / rel, near) for rel in keep]
        if not all(links):
            # a pre-image copied is a temporary file written now: the journal goes first, so
            # that a crash from here on finds it (and its rollback removes that file)
            batch.commit()
        for rel, link in zip(keep, links, strict=True):
            _pre_image(store, runs, rel, batch, link)
        batch.commit()
        for action in applied.actions:
            for op in action.ops:
                _do(store, op, batch)
                done += 1
                if progress is not None and done % 32 == 0:
                    progress("applying", done, total)
        # the manifest, last of the changes' batch: durable at its barriers, with them, rather
        # than two fsyncs of its own after them (it is known before any change is made)
        applied.manifest = _manifest(store, plan.run_id, before, seen, batch)
        batch.commit()
    finally:
        batch.discard()
    if progress is not None:
        progress("applying", done, total)
    return applied


def _first_mismatch(store: Store, action: Action, seen: dict[str, str | None]) -> FileOp | None:
    for op in action.ops:
        if op.path not in seen:
            seen[op.path] = _hash_of(store.root / op.path)
        if seen[op.path] != op.expect:
            return op
    return None


def _skip_entry(action: Action, op: FileOp, skipped_after: set[str],
                now: str | None = None) -> dict[str, Any]:
    if now == UNREADABLE:
        reason = "unreadable"
    else:
        reason = "depends_on_skipped" if op.expect in skipped_after else "modified_during_run"
    mem_id = Path(op.path).stem.split("@")[0]
    return {"type": "skip", "memory_id": mem_id, "reason": reason, "action": action.type}


def _unsafe_skip(action: Action, problem: str) -> dict[str, Any]:
    mem_id = action.log.get("memory_id") or (action.touches[0] if action.touches else "")
    return {"type": "skip", "memory_id": mem_id, "reason": "unsafe_path", "action": action.type,
            "detail": problem}


def _do(store: Store, op: FileOp, batch: staged.Staged) -> None:
    path = store.root / op.path
    if op.kind == "write":
        batch.write_replace(path, op.data or b"")
    elif op.kind == "create":
        fsops.ensure_parent(path)
        batch.write_new(path, op.data or b"")
    elif op.kind == "remove":
        batch.unlink(path)  # its bytes are in the pre-image, durable before this batch


def _pre_image(store: Store, runs: Path, rel: str, batch: staged.Staged, link: bool) -> None:
    """Stage the pre-image of `rel` (`link`: whether `keep_copy` may link it). Nothing can be
    there yet: `execute` refuses a run whose folder under archive/runs exists, and holds the
    store's lock."""
    target = runs / rel
    batch.ensure_parent(target)
    batch.keep_copy(store.root / rel, target, link)  # a second link where safe: no bytes written


def _manifest(store: Store, run_id: str, before: dict[str, str | None],
              seen: dict[str, str | None], batch: staged.Staged) -> list[dict[str, Any]]:
    """Stage the run's manifest (what undo reads) in the changes' batch."""
    files = [{"path": rel, "sha256_before": before[rel], "sha256_after": seen[rel],
              "pre_image": f"archive/runs/{run_id}/{rel}" if before[rel] else None}
             for rel in before]
    if files:
        target = run_dir(store, run_id) / "manifest.json"
        batch.ensure_parent(target)
        batch.write_new(target, orjson.dumps({"run_id": run_id, "files": files},
                                             option=orjson.OPT_INDENT_2))
    return files


SYMLINK = "symlink"  # the "hash" of a path that is a symbolic link: never equals a real one
UNREADABLE = "unreadable"  # ... of a file memcli may not read (chmod 000), a FIFO, a folder


def hash_of(path: Path) -> str | None:
    """The sha256 of the file at `path`, None when nothing is there. A symlink is never
    followed: it hashes to SYMLINK, so an action expecting a file there is skipped; a file
    that cannot be read (or is no regular file) hashes to UNREADABLE, likewise."""
    if not fsops.NOFOLLOW and path.is_symlink():  # (else the open below refuses one: ELOOP)
        return SYMLINK
    try:
        return sha256(fsops.read_bytes(path))
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # a link: refused by O_NOFOLLOW (or swapped in since the check above)
            return SYMLINK
        return UNREADABLE


_hash_of = hash_of


# ---------------------------------------------------------------- finish (also after a crash)


def commit(store: Store, run_id: str, finish: dict[str, Any], files: list[dict[str, Any]] | None = None,
           known: dict[str, planned.Ticket] | None = None,
           keep_caches: Callable[[dict[str, set[str] | None]], None] | None = None,
           ) -> dict[str, set[str] | None]:
    """Mark the run's memory changes done and record what is left, then do it. Returns the
    content hashes now in each covered folder (for the signature cache). `keep_caches(hashes)`,
    when given, saves the run's caches with them, made durable in the same barrier as the
    indices (a failure there costs the next run time, no more: it is not raised).

    If marking the run committed fails (a full disk), the run is rolled back from its
    pre-images at once (`files`: what its journal lists) and the error raised: nothing
    happened. Once it is marked, the run has happened: a failure to finish it raises
    RecordingFailed, the journal stays, and the next command finishes it. `known`: the
    entries planning made of the files it read, per folder (see `memcli.store.planned`)."""
    data = {"run_id": run_id, "phase": "committed", **finish}
    try:
        fsops.write_replace(journal_path(store, run_id), orjson.dumps(data))
    except Exception:
        if files is not None:
            with contextlib.suppress(Exception):
                rollback(store, run_id, files)
        raise
    written: dict[str, set[str]] = {}
    for entry in files or []:
        rel, _, name = str(entry.get("path")).rpartition("/")
        written.setdefault(rel, set()).add(name)
    try:
        return complete(store, data, known, written, keep_caches)
    except Exception as exc:
        raise RecordingFailed(run_id, exc) from exc


def complete(store: Store, data: dict[str, Any], known: dict[str, planned.Ticket] | None = None,
             written: dict[str, set[str]] | None = None,
             keep_caches: Callable[[dict[str, set[str] | None]], None] | None = None,
             ) -> dict[str, set[str] | None]:
    """Indices, review queue, state and log for a committed run; idempotent. `known` (the
    run's own planning, never a recovery): entries of files it read, trusted while size and
    mtime match, so that a folder without an index is not read a second time; or that
    planning found the folder's index true of its files (`planned.trusted`), with `written`
    the names of the files the run may have changed, by folder."""
    known, written = known or {}, written or {}
    pause = store.settings.consolidation.index_pause_ms / 1000
    covered = set(data.get("covered", []))
    hashes: dict[str, set[str] | None] = {}
    refresh: dict[str, list[str]] = data.get("refresh") or {}
    # indices, snapshots and caches durable together, not two fsyncs each, and with them the
    # bytes of the review queue, state and log, renamed into place after that barrier and
    # their names made durable in one more: until the journal goes (below), a crash or a
    # power cut means this is all done again
    with fsops.one_barrier(store.root):
        # (a folder only read, not covered, is refreshed too: files gone or touched since)
        for position, rel in enumerate(sorted(set(data.get("folders", [])) | covered | set(refresh))):
            if position and pause:
                time.sleep(pause)  # spreads index rewrites out for readers on slow disks
            if rel in refresh and _update_folder(store, rel, refresh[rel], rel in covered):
                hashes[rel] = None  # not every hash was looked at: the signature cache only grows
                continue
            ticket = known.get(rel) if rel in covered else None
            if ticket is not None and ticket.index is not None:
                found = _reindex_trusted(store, rel, ticket, written.get(rel, set()))
                if found is not None:
                    hashes[rel] = found
                    continue
            hashes[rel] = _reindex_folder(store, rel, refresh_run_hash=rel in covered,
                                          known=planned.load(known.get(rel)) if rel in covered else None)
        quiet = data.get("quiet") is True  # changed nothing: recorded on this machine only (SPEC 13)
        with fsops.renamed_after_barrier():  # never torn (each file written once)
            if keep_caches is not None:  # (a recovery, which cannot redo them, never leaves them torn)
                with contextlib.suppress(OSError, ValueError):  # caches: a failure costs the next run time
                    keep_caches({rel: found for rel, found in hashes.items() if rel in covered})
            review.add_items(store.root, data.get("review", []))
            _update_state(store, data.get("state", {}), quiet)
            if data.get("log_entry"):
                log.append(store.root, data["log_entry"], quiet)
    journal = journal_path(store, data["run_id"])
    if journal.exists():
        fsops.unlink(journal)
    return {rel: found for rel, found in hashes.items() if rel in covered}


def _reindex_folder(store: Store, rel: str, refresh_run_hash: bool,
                    known: list[dict[str, Any]] | None = None) -> set[str]:
    """Bring a folder's index up to date; a folder the run covered also gets `run_hash`
    refreshed and its last-run snapshot (what session_end compares against) rewritten.
    `known`: entries of files read since the index was saved (`Store.scan`)."""
    folder = store.folder_by_rel(rel)
    if folder is None:
        return set()
    # keep=False: only the entries are needed, not every record read (a folder of 35,000
    # memories without an index held both: 140 MB)
    scan = store.scan(folder, load=False, compare=not refresh_run_hash, keep=False, known=known)
    if scan.unreadable:
        return set()  # a folder memcli may not read is left as it is (a scan reports it)
    if scan.index is None and not scan.entries and not (folder.path / "_index.json").exists():
        return set()  # an empty folder with no index (e.g. one a rolled-back run created) needs none
    if refresh_run_hash and scan.index is None:  # entries made by this scan, shared with nothing
        for entry in scan.entries:
            entry["run_hash"] = entry["content_hash"]
    elif refresh_run_hash:  # new dicts: a trusted scan hands over the saved index's own entries
        scan.entries = [{**entry, "run_hash": entry["content_hash"]} for entry in scan.entries]
    if (refresh_run_hash or scan.drift) and not index.same_entries(scan.index, scan.entries):
        store.save_index(folder, scan.entries)  # unchanged entries: not rewritten (a shared store tracks it)
    if refresh_run_hash and folder.scope != "archive":
        lastrun.save_lastrun(folder.cache(create=True), scan.entries)
    return {e["content_hash"] for e in scan.entries}


def _reindex_trusted(store: Store, rel: str, ticket: planned.Ticket, written: set[str]) -> set[str] | None:
    """`_reindex_folder` of a covered folder whose saved index planning found true of every
    file but `ticket.reread` (`planned.trusted`): when the index is still the same file, its
    entries are taken as they are, and only the files planning read, or the run may have
    written, are read again. The same index and snapshot as a scan would make when no other
    writer changed a file meanwhile (see `planned.trusted`). None when the index changed
    since: the caller scans the folder."""
    folder = store.folder_by_rel(rel)
    if folder is None or folder.scope == "archive":
        return None
    try:
        if planned.identity(os.lstat(folder.path / index.INDEX_NAME)) != ticket.index:
            return None
        # the very bytes planning parsed: its entries, when it kept them, else parsed again
        saved = {"entry_count": ticket.kept[0], "entries": ticket.kept[1]} if ticket.kept is not None \
            else index.load(folder.path)
    except (OSError, ValueError):
        return None
    if saved is None:
        return None
    entries: dict[str, dict[str, Any]] = {}
    for entry in saved["entries"]:
        name = entry.get("file")
        if not isinstance(name, str) or name in entries:
            return None  # not an index planning could trust whole
        entries[name] = entry
    changed = saved.get("entry_count") != len(entries)
    try:  # only files there are read (a run that archives thousands tried to open each)
        present = {n for n in os.listdir(folder.path) if n.endswith((".json", ".md")) and n[0] not in "._"}
    except OSError:
        return None
    for name in sorted(ticket.reread | written):
        old = entries.pop(name, None)
        mem = store.read_quietly(folder.path / name, folder) if name in present else None
        if mem is not None:
            entries[name] = new = index.entry_for(mem, old)
            new["run_hash"] = new["content_hash"]
            changed = changed or new != old
        else:
            changed = changed or old is not None
    fresh = list(entries.values())
    for entry in fresh:  # (the saved index's own dicts: it is not compared with them again)
        if entry.get("run_hash") != entry["content_hash"]:
            entry["run_hash"] = entry["content_hash"]
            changed = True
    if changed:  # unchanged entries: not rewritten (as `_reindex_folder`: a shared store tracks it)
        store.save_index(folder, fresh)
    lastrun.save_lastrun(folder.cache(create=True), fresh)
    return {e["content_hash"] for e in fresh}


def _update_folder(store: Store, rel: str, names: list[str], covered: bool) -> bool:
    """Update only the index entries (and snapshot rows) of `names`: the files a session_end
    run read or changed in the folder; every other file is as the last run left it. False when
    that cannot be done (no usable index or snapshot): the caller rebuilds from the files."""
    folder = store.folder_by_rel(rel)
    if folder is None:
        return False
    snap = lastrun.load_lastrun(folder.cache()) if folder.scope != "archive" else None
    if covered and folder.scope != "archive" and snap is None:
        return False
    fresh = store.splice_entries(folder, names, run_hash_now=covered)
    if fresh is None:
        return False
    if snap is not None and covered:
        lastrun.update_lastrun(folder.cache(create=True), snap, set(names), fresh)
    elif snap is not None:
        _update_uncovered_rows(folder.path, snap, names, fresh, folder.cache(create=True))
    return True


def _update_uncovered_rows(path: Path, snap: lastrun.Snapshot, names: list[str],
                           fresh: list[dict[str, Any]], cache: Path) -> None:
    """The snapshot of a folder a pass read but did not cover: the rows of files gone go,
    and those of files read again with their row's own content hash (touched, not changed)
    take their new size and mtime. A file read with another content hash keeps its row (its
    run hash: it is still changed since the last run), as does one that could not be read."""
    same = [e for e in fresh if (row := snap.row(e["file"])) is not None
            and snap.content_hash(row) == e["content_hash"]]
    read = {e["file"] for e in fresh}
    gone = {n for n in names if n not in read and snap.row(n) is not None and not os.path.lexists(path / n)}
    if same or gone:
        lastrun.update_lastrun(cache, snap, gone | {e["file"] for e in same}, same)


def _update_state(store: Store, update: dict[str, Any], quiet: bool = False) -> None:
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
    opsfiles.write_state(store.root, state, quiet)


def _write_journal(store: Store, run_id: str, data: dict[str, Any], batch: staged.Staged) -> None:
    batch.ensure_parent(journal_path(store, run_id))
    batch.write_new(journal_path(store, run_id), orjson.dumps(data))


# ---------------------------------------------------------------- recovery


def recover(store: Store) -> list[str]:
    """Finish or roll back every run a crash left half-done; returns what was done, for people.
    A journal that does not read as one of ours is left in place and named (doctor reports
    it); one that cannot be acted on (an ops file of the wrong shape, a full disk) stops the
    command before it starts, naming the journal and the cause."""
    messages: list[str] = []
    journals = pending(store)
    if journals:
        opsfiles.preflight(store.root)  # finishing a run writes these: refuse first, not half-way
    for path in journals:
        data, problem = read_journal(store, path)
        if data is None:
            messages.append(f"journal {store.rel(path)} left in place, never acted on: {problem}; "
                            "move it aside once you have looked at it (see `memcli doctor`)")
            continue
        run_id = str(data["run_id"])
        try:
            if data.get("phase") == "committed":
                complete(store, data)
                messages.append(f"finished interrupted run {run_id}")
            else:
                count = rollback(store, run_id, data.get("files", []))
                messages.append(f"rolled back interrupted run {run_id} ({count} file(s) restored)")
        except (MemcliError, OSError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror and not isinstance(
                exc, MemcliError) else str(exc)
            raise MemcliError(f"an interrupted run ({store.rel(path)}) could not be "
                              f"{'finished' if data.get('phase') == 'committed' else 'rolled back'}: "
                              f"{reason}. Nothing else was done; fix that and run the command again "
                              "(or `memcli doctor --fix`)") from exc
    # A crashed run may have left temporary files anywhere it wrote; otherwise only the journal's
    # own (in ops/) can be there, and walking a 100,000-file store on every command costs.
    removed = remove_tmp_files(store, whole_store=bool(messages))
    if removed:
        messages.append(f"removed {removed} temporary file(s) left by an interrupted write")
    return messages


def read_journal(store: Store, path: Path) -> tuple[dict[str, Any] | None, str]:
    """A journal's data when it reads as one memcli wrote (`journal_problem`), else (None, why)."""
    try:
        data = orjson.loads(fsops.read_bytes(path))
    except OSError as exc:
        return None, f"cannot be read ({exc.strerror or exc})"
    except ValueError as exc:
        return None, f"not valid JSON ({exc})"
    problem = journal_problem(store, path, data)
    return (None, problem) if problem else (data, "")


def journal_problem(store: Store, path: Path, data: Any) -> str | None:
    """Why `data` (read from `path`) is not a journal memcli acts on, or None. Every path in it
    must be a memory file inside the store's memory folders with no link on the way; every
    folder one of the store's; the run id a run id (it names folders under archive/runs)."""
    if not isinstance(data, dict):
        return "not a JSON object"
    run_id = data.get("run_id")
    if not paths.is_run_id(run_id):
        return f"bad run id {run_id!r}"
    if path.name != f"journal-{run_id}.json":
        return f"its name does not match its run id {run_id}"
    if paths.too_deep(data):
        return "nested deeper than any journal memcli writes"
    files = data.get("files", [])
    if not isinstance(files, list):
        return "'files' is not a list"
    for entry in files:
        if not isinstance(entry, dict) or entry.get("kind") not in ("write", "create", "remove") or any(
                not isinstance(entry.get(key), (str, type(None))) for key in ("expect", "after")):
            return f"a file entry memcli did not write: {entry!r:.100}"
        problem = paths.path_problem(store.root, entry.get("path"))
        if problem:
            return f"names a path memcli does not own: {problem}"
    phase = data.get("phase")
    if phase == "committed":
        return _committed_problem(data)
    return None if phase == "applying" else f"unknown phase {phase!r}"


def _committed_problem(data: dict[str, Any]) -> str | None:
    for key in ("folders", "covered"):
        value = data.get(key, [])
        if not isinstance(value, list) or any(paths.folder_problem(rel) for rel in value):
            return f"'{key}' names something that is not a memory folder of the store"
    refresh = data.get("refresh") or {}
    if not isinstance(refresh, dict) or any(
            paths.folder_problem(rel) or not paths.str_list(names)
            or any(paths.file_problem(f"{rel}/{name}") for name in names) for rel, names in refresh.items()):
        return "'refresh' names something that is not a memory file of the store"
    items = data.get("review", [])
    if not isinstance(items, list) or not all(isinstance(i, dict) and paths.str_list(i.get("memory_ids"))
                                              for i in items):
        return "'review' is not a list of review items"
    state = data.get("state", {})
    extra = state.get("extra", {}) if isinstance(state, dict) else None
    if not isinstance(extra, dict) or set(extra) & {"runs", "last_success", "flagged"} or not all(
            paths.str_list(pair) for pair in state.get("flagged_done", []) or []):
        return "'state' is not a state update memcli writes"
    entry = data.get("log_entry")
    if entry is not None and (not isinstance(entry, dict) or entry.get("run_id") != data["run_id"]):
        return "'log_entry' is not this run's log entry"
    return None


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
        data = fsops.read_bytes(pre)
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
