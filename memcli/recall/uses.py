"""Uses (SPEC 10): `access_count` + 1 and `last_accessed` = now, recorded at once and never lost.

Recording never waits for a consolidation (a run may hold the store lock for many seconds):
a use is one line appended to `ops/uses.jsonl` (`{"id", "at", "session"}`), under a lock of
its own (`ops/.uses.lock`) that is only ever held for an append or a rename. The next command
that holds the store lock folds the pending uses into the memory files (`fold`, called from
`Store.writing`), crash-safe in the journal's manner:

1. `ops/uses.jsonl` is renamed to `ops/uses-folding.jsonl` (new uses go to a new file);
2. the new bytes of every memory it touches are computed and written, with the hash each file
   must have before and will have after, to `ops/uses-fold.json` (the fold's journal);
3. each file is rewritten (through fsops), its index entry spliced, one line per file appended
   to `ops/uses-folded.jsonl` (the fold log: path, hashes before and after, uses, sessions);
4. the folding file, then the journal, are removed.

A fold that dies is rolled forward by the next one (a file already at its after-hash is left
alone), so no use is counted twice or lost. Until folded, a use is *pending*: `pending()`
gives them by id, and every reader of `access_count`/`last_accessed` (planning, `show`, `list`,
the hooks' briefing) adds them (`with_pending`).

A use of a memory that has since been merged counts for its keeper (followed through
`superseded_by` to the live memory); one of a memory archived for any other reason (stale,
forgotten) is folded into its archived record, so that `memcli restore` brings it back with its
uses. A use of an id found nowhere is written to the fold log (path null) and not applied.

Within one session a memory counts once: `used_in_session` looks at the pending uses and the
recent fold log. Folding is not an edit: a file whose `run_hash` matched before the fold gets
the new hash as its `run_hash`, and `memcli undo` of an earlier run follows the fold log to
see that a file's only change since is folded uses (`folded_since`), and keeps them.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import re
from functools import lru_cache
from pathlib import Path

from memcli.recall.rank import epoch
from memcli.store import fsops

TYPE_CHECKING = False  # recording a use is on every hook's path: no typing, orjson or model
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Any

    from memcli.store.model import Memory

PENDING = "uses.jsonl"
FOLDING = "uses-folding.jsonl"
FOLD_JOURNAL = "uses-fold.json"
FOLD_LOG = "uses-folded.jsonl"
LOCK = ".uses.lock"
SESSION_TAIL = 512 * 1024  # bytes of the fold log read back for a session's earlier uses
MAX_SESSION = 200
LOCK_WAIT_S = 5.0  # the uses lock is held for an append or a rename: microseconds


# memcli.store.model.ID_RE (a test keeps them equal): ids in the uses file are checked
# before they name anything.
_ID_RE = re.compile(r"^mem_[0-9A-Za-z_-]{1,64}$")


def is_valid_id(value: Any) -> bool:
    return isinstance(value, str) and bool(_ID_RE.match(value))


def now() -> dt.datetime:
    """`memcli.store.model.now` without importing the model (and yaml) when the clock is real."""
    if os.environ.get("MEMCLI_NOW"):
        from memcli.store.model import now as fixed

        return fixed()
    return dt.datetime.now(dt.timezone.utc).replace(microsecond=0)


def format_ts(moment: dt.datetime) -> str:
    """`memcli.store.model.format_ts`: `YYYY-MM-DDTHH:MM:SSZ` in UTC."""
    return moment.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _dumps(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def _sha256(data: bytes) -> str:
    import hashlib

    return hashlib.sha256(data).hexdigest()


class Pending:
    """Pending uses of one memory: how many, and the latest."""

    __slots__ = ("count", "last", "sessions")

    def __init__(self, count: int = 0, last: str | None = None, sessions: list[str] | None = None) -> None:
        self.count = count
        self.last = last
        self.sessions: list[str] = sessions if sessions is not None else []

    def add(self, at: str, session: str | None) -> None:
        self.count += 1
        if self.last is None or _later(at, self.last):
            self.last = at
        if session and session not in self.sessions and len(self.sessions) < 50:
            self.sessions.append(session)


# The moments of use times, remembered: a journal's lines share a few (one per second of a
# session's uses), and a hook reads them all (`pending`) on every prompt.
_moment_of = lru_cache(maxsize=4096)(epoch)


def _later(a: str, b: str) -> bool:
    ta, tb = _moment_of(a), _moment_of(b)
    return ta is not None and (tb is None or ta > tb)


def clean_session(session: object) -> str | None:
    """A session id fit to be written: a short printable string, else None."""
    if not isinstance(session, str) or not session.strip():
        return None
    text = "".join(c for c in session.strip()[:MAX_SESSION] if c.isprintable())
    return text or None


# ---------------------------------------------------------------- recording


@contextlib.contextmanager
def _uses_lock(ops: Path) -> Iterator[None]:
    """`ops/.uses.lock`, an flock as filelock takes it on POSIX (filelock itself costs a
    hook 40 ms of imports), held for an append or a rename. Never in the way of a use: when
    it cannot be had in LOCK_WAIT_S (never seen), the use is recorded all the same."""
    try:
        import fcntl
    except ImportError:  # not POSIX: filelock's own lock
        from filelock import FileLock, Timeout

        lock = FileLock(str(ops / LOCK), timeout=LOCK_WAIT_S)
        try:
            lock.acquire()
        except Timeout:
            yield
            return
        try:
            yield
        finally:
            lock.release()
        return
    import time

    try:
        fd = os.open(ops / LOCK, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o644)
    except OSError:
        yield
        return
    held = False
    try:
        deadline = time.monotonic() + LOCK_WAIT_S
        while not held:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                held = True
            except BlockingIOError:
                if time.monotonic() > deadline:
                    break
                time.sleep(0.001)
            except OSError:
                break
        yield
    finally:
        if held:
            fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def record(root: Path, ids: list[str], session: str | None, moment: dt.datetime) -> list[str]:
    """Record a use of each id, once per session (ids already used in `session` are left
    out); returns the ids recorded. Appends one line per use, durably, without the store lock."""
    session = clean_session(session)
    wanted = [i for i in dict.fromkeys(ids) if is_valid_id(i)]
    if session is not None:
        seen = used_in_session(root, session)
        wanted = [i for i in wanted if i not in seen]
    if not wanted:
        return []
    stamp = format_ts(moment)
    body = b"".join(_dumps({"id": i, "at": stamp, "session": session}) + b"\n" for i in wanted)
    ops = root / "ops"
    if not ops.is_dir():
        fsops.mkdir(ops)
    with _uses_lock(ops):
        path = ops / PENDING
        if not path.exists():
            with contextlib.suppress(FileExistsError):
                fsops.write_new(path, b"")
        fsops.append(path, body)
    return wanted


def used_in_session(root: Path, session: str) -> set[str]:
    """Ids already counted in this session: pending, being folded, or folded lately."""
    found: set[str] = set()
    for line in _lines(root / "ops" / PENDING) + _lines(root / "ops" / FOLDING):
        if line.get("session") == session:
            found.add(str(line["id"]))
    for line in _lines(root / "ops" / FOLD_LOG, tail=SESSION_TAIL):
        if session in (line.get("sessions") or []):
            found.update(str(i) for i in line.get("uses_of") or [line.get("id")])
    return found


# The lines of each journal as last parsed, with the file's inode, size, mtime and ctime: a hook
# reads the pending uses three times (the session's, the overlay, before recording), and the
# journals are only appended to or replaced, which changes those.
_PARSED: dict[tuple[str, int], tuple[tuple[int, int, int, int], list[dict[str, Any]]]] = {}


def _lines(path: Path, tail: int = 0) -> list[dict[str, Any]]:
    """The JSON objects of a JSON-lines file; a torn or foreign line is skipped."""
    try:
        with open(path, "rb") as handle:
            st = os.fstat(handle.fileno())
            sig = (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
            known = _PARSED.get((str(path), tail))
            if known is not None and known[0] == sig:
                return list(known[1])
            if tail and st.st_size > tail:
                handle.seek(st.st_size - tail)
                handle.readline()  # a partial first line
            raw = handle.read()
    except OSError:
        return []
    out: list[dict[str, Any]] = []
    for chunk in raw.split(b"\n"):
        if not chunk.strip():
            continue
        try:
            line = json.loads(chunk)
        except (ValueError, RecursionError):
            continue
        if isinstance(line, dict) and (is_valid_id(line.get("id")) or "uses_of" in line):
            out.append(line)
    _PARSED[(str(path), tail)] = (sig, out)
    return list(out)


# ---------------------------------------------------------------- reading: the overlay


def pending(root: Path) -> dict[str, Pending]:
    """Uses recorded and not yet folded into the memory files, by id."""
    out: dict[str, Pending] = {}
    done = _journal_done(root)
    lines = _lines(root / "ops" / FOLDING) if FOLD_JOURNAL not in done else [
        line for line in _lines(root / "ops" / FOLDING) if str(line.get("id")) not in done[FOLD_JOURNAL]]
    for line in lines + _lines(root / "ops" / PENDING):
        at = line.get("at")
        if isinstance(at, str) and _moment_of(at) is not None:
            out.setdefault(str(line["id"]), Pending()).add(at, clean_session(line.get("session")))
    return out


def _journal_done(root: Path) -> dict[str, set[str]]:
    """While a fold's journal exists: the ids whose files it has already written."""
    journal = _read_journal(root)
    if journal is None:
        return {}
    done: set[str] = set()
    for entry in journal.get("files", []):
        if _hash_of(root / str(entry.get("path"))) == entry.get("after"):
            done.update(str(i) for i in entry.get("uses_of") or [])
    return {FOLD_JOURNAL: done}


def applied(count: Any, last: Any, extra: Pending | None) -> tuple[int, Any]:
    """access_count and last_accessed with the pending uses added."""
    base = count if isinstance(count, int) and not isinstance(count, bool) and count >= 0 else 0
    if extra is None or not extra.count:
        return base, last
    newest = last if isinstance(last, str) and extra.last is not None and not _later(extra.last, last) \
        else extra.last
    return base + extra.count, newest


def with_pending(mem: Memory, extra: dict[str, Pending]) -> Memory:
    """The memory as rules see it: its facts with its pending uses added. Only `facts`
    changes (a copy): what a run writes comes from the file, so no use is counted twice."""
    found = extra.get(mem.id)
    if found is not None and found.count:
        count, last = applied(mem.facts.get("access_count"), mem.facts.get("last_accessed"), found)
        mem.facts = {**mem.facts, "access_count": count, "last_accessed": last}
    return mem


def record_view(data: dict[str, Any], extra: dict[str, Pending]) -> dict[str, Any]:
    """A record (or index entry) as people and agents see it: pending uses added."""
    found = extra.get(str(data.get("id")))
    if found is None or not found.count:
        return data
    count, last = applied(data.get("access_count"), data.get("last_accessed"), found)
    return {**data, "access_count": count, "last_accessed": last}


# ---------------------------------------------------------------- folding (holding the store lock)


def fold_safely(store: Any) -> list[str]:
    """`fold`, whose failure (a full disk, an unreadable file) never stops the command that
    holds the lock: the uses stay pending and the next command tries again."""
    from memcli.errors import MemcliError

    try:
        return fold(store)
    except (OSError, MemcliError, ValueError) as exc:
        return [f"could not fold the pending uses ({exc}); they stay pending for the next command"]


def fold(store: Any) -> list[str]:
    """Fold every pending use into the memory files; returns notes for people. The caller
    holds the store lock (`Store.writing`)."""
    root: Path = store.root
    ops = root / "ops"
    if not ops.is_dir():
        return []
    notes: list[str] = []
    if (ops / FOLD_JOURNAL).exists():
        notes += _roll_forward(store)
    if not (ops / FOLDING).exists():
        if not (ops / PENDING).exists() or (ops / PENDING).stat().st_size == 0:
            return notes
        with _uses_lock(ops):
            fsops.move(ops / PENDING, ops / FOLDING)
    lines = _lines(ops / FOLDING)
    if lines:
        entries = _plan(store, lines)
        fsops.write_new(ops / FOLD_JOURNAL, _dumps({"files": entries}))
        _finish(store, entries)
    fsops.unlink(ops / FOLDING)
    if (ops / FOLD_JOURNAL).exists():
        fsops.unlink(ops / FOLD_JOURNAL)
    return notes


def _plan(store: Any, lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One journal entry per memory file the uses go to (see the module's policy)."""
    by_id: dict[str, Pending] = {}
    for line in lines:
        at = line.get("at")
        if isinstance(at, str) and epoch(at) is not None:
            by_id.setdefault(str(line["id"]), Pending()).add(at, clean_session(line.get("session")))
    by_target: dict[str, tuple[Memory, Pending, list[str]]] = {}
    orphans: list[dict[str, Any]] = []
    for mem_id, use in by_id.items():
        target = _target(store, mem_id)
        if target is None:
            orphans.append({"path": None, "id": mem_id, "uses_of": [mem_id], "n": use.count,
                            "last": use.last, "sessions": use.sessions})
            continue
        rel = store.rel(target.path)
        mem, total, sources = by_target.get(rel, (target, Pending(), []))
        total.count += use.count
        if use.last is not None and (total.last is None or _later(use.last, total.last)):
            total.last = use.last
        total.sessions = list(dict.fromkeys(total.sessions + use.sessions))[:50]
        by_target[rel] = (mem, total, [*sources, mem_id])
    entries: list[dict[str, Any]] = []
    for rel, (mem, total, sources) in sorted(by_target.items()):
        count, last = applied(mem.data.get("access_count"), mem.data.get("last_accessed"), total)
        data = {**mem.data, "access_count": count, "last_accessed": last}
        from memcli.store.formats import encode

        raw = encode(data, mem.fmt)
        entries.append({"path": rel, "id": mem.id, "uses_of": sources, "n": total.count, "last": total.last,
                        "sessions": total.sessions, "before": mem.content_hash, "after": _sha256(raw),
                        "data": raw.decode()})
    return entries + orphans


def _target(store: Any, mem_id: str) -> Memory | None:
    """Where the uses of `mem_id` go: the live memory; for a merged one its keeper; for one
    archived otherwise, its latest archived record. None when it is nowhere."""
    from memcli.errors import MemcliError

    seen: set[str] = set()
    current = mem_id
    archived: Memory | None = None
    while current not in seen and len(seen) < 20:
        seen.add(current)
        try:
            mem, folder = store.find(current, archived=False)
            return mem  # type: ignore[no-any-return]
        except MemcliError:
            pass
        try:
            from memcli.consolidate.undo import latest_archived

            found = latest_archived(store, current)
        except MemcliError:
            return archived
        archived = archived or found
        keepers = found.data.get("superseded_by") or []
        if not keepers or not is_valid_id(keepers[0]):
            return archived
        current = str(keepers[0])
    return archived


def _finish(store: Any, entries: list[dict[str, Any]]) -> None:
    """Write each file that is as planned, splice its index entry, log the fold."""
    root: Path = store.root
    written: list[dict[str, Any]] = []
    repend: list[bytes] = []
    for entry in entries:
        if entry.get("path") is None:
            written.append(entry)
            continue
        path = root / entry["path"]
        now_hash = _hash_of(path)
        if now_hash == entry["before"]:
            fsops.write_replace(path, entry["data"].encode())
        elif now_hash != entry["after"]:  # a hand edit under our feet: the uses stay pending
            repend += [_dumps({"id": i, "at": entry["last"], "session": None}) + b"\n"
                       for i in entry["uses_of"]]
            continue
        written.append(entry)
    _reindex(store, [e for e in written if e.get("path")])
    log = root / "ops" / FOLD_LOG
    if not log.exists():
        with contextlib.suppress(FileExistsError):
            fsops.write_new(log, b"")
    stamp = _stamp()
    fsops.append(log, b"".join(_dumps({"at": stamp, **{k: v for k, v in e.items() if k != "data"}})
                               + b"\n" for e in written))
    if repend:
        with _uses_lock(root / "ops"):
            path = root / "ops" / PENDING
            if not path.exists():
                fsops.write_new(path, b"")
            fsops.append(path, b"".join(repend))


def _stamp() -> str:
    from memcli.store.model import now

    try:
        return format_ts(now())
    except ValueError:
        return format_ts(dt.datetime.now(dt.timezone.utc))


def _roll_forward(store: Any) -> list[str]:
    journal = _read_journal(store.root)
    if journal is not None:
        _finish(store, list(journal.get("files", [])))
    folding = store.root / "ops" / FOLDING
    if folding.exists():
        fsops.unlink(folding)
    fsops.unlink(store.root / "ops" / FOLD_JOURNAL)
    return ["finished folding uses that an interrupted command had started"]


def _read_journal(root: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((root / "ops" / FOLD_JOURNAL).read_bytes())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("files"), list):
        return None
    files = [f for f in data["files"] if isinstance(f, dict) and _safe_rel(f.get("path"))
             and isinstance(f.get("data"), str) and isinstance(f.get("uses_of"), list)]
    return {"files": files}


def _safe_rel(rel: object) -> bool:
    """A journal path memcli could have written: relative, inside a memory folder or archive/."""
    if rel is None:
        return True
    if not isinstance(rel, str):
        return False
    parts = Path(rel).parts
    return bool(parts) and not Path(rel).is_absolute() and ".." not in parts and \
        parts[0] in ("agent", "team", "global", "archive") and parts[:2] != ("archive", "runs") and \
        not any(p.is_symlink() for p in _prefixes(rel))


def _prefixes(rel: str) -> list[Path]:
    parts = Path(rel).parts
    return [Path(*parts[:n]) for n in range(1, len(parts) + 1)]


def _hash_of(path: Path) -> str | None:
    if path.is_symlink():
        return "symlink"
    try:
        return _sha256(path.read_bytes())
    except (FileNotFoundError, NotADirectoryError):
        return None


def _reindex(store: Any, entries: list[dict[str, Any]]) -> None:
    """Index entries (and last-run snapshot rows) of the rewritten files. A fold is not an
    edit: a file unchanged since the last run before it stays unchanged since the run."""
    by_folder: dict[str, list[dict[str, Any]]] = {}
    for entry in entries:
        parts = entry["path"].split("/")
        rel = parts[0] if parts[0] in ("global", "archive") else "/".join(parts[:2])
        by_folder.setdefault(rel, []).append(entry)
    for rel, group in by_folder.items():
        folder = store.folder_by_rel(rel)
        if folder is None:
            continue
        carried = {e["path"].rsplit("/", 1)[1]: (e["before"], e["after"]) for e in group}
        if not _splice(store, folder, carried):
            store.refresh_index(folder)
        _carry_snapshot(folder, carried)
    from memcli.recall import index as recall_index

    recall_index.written(store, {rel: [e["path"].rsplit("/", 1)[1] for e in group]
                                 for rel, group in by_folder.items()})


def _splice(store: Any, folder: Any, carried: dict[str, tuple[str, str]]) -> bool:
    from memcli.store import index

    def update(name: str, old: dict[str, Any] | None) -> dict[str, Any] | None:
        mem = store.read_quietly(folder.path / name, folder)
        if mem is None:
            return None
        entry = index.entry_for(mem, old, archive=folder.scope == "archive")
        before, after = carried[name]
        if old is not None and old.get("run_hash") == before and mem.content_hash == after:
            entry["run_hash"] = after
        return entry

    from memcli.store.model import now

    return index.splice(folder.path, folder.scope, folder.scope_id, now(), update, list(carried))


def _carry_snapshot(folder: Any, carried: dict[str, tuple[str, str]]) -> None:
    """The last-run snapshot's rows of folded files: new size and mtime, and the new hash
    where the row had the hash from before the fold (else the row keeps saying "changed")."""
    from memcli.store import lastrun

    if folder.scope == "archive":
        return
    snap = lastrun.load_lastrun(folder.cache())
    if snap is None:
        return
    fresh: list[dict[str, Any]] = []
    for name, (before, after) in carried.items():
        row = snap.row(name)
        try:
            st = os.stat(folder.path / name)
        except OSError:
            continue
        if row is None:
            continue
        old_hash = snap.content_hash(row)
        block = snap.blocks[snap.block_of[row]]
        fresh.append({"file": name, "size": st.st_size, "mtime_ns": st.st_mtime_ns,
                      "content_hash": after if old_hash == before else old_hash,
                      "type": block[0], "subtype": block[1]})
    if fresh:
        lastrun.update_lastrun(folder.cache(create=True), snap, {f["file"] for f in fresh}, fresh)


# ---------------------------------------------------------------- undo: folded uses since a run


def folded_since(root: Path, path: str, after: str | None, current: str | None) -> Pending | None:
    """When the file at `path` went from hash `after` to `current` by folded uses alone (a
    chain of fold-log lines), the uses folded on the way; else None."""
    if after is None or current is None or after == current:
        return None
    steps: dict[str, tuple[str, dict[str, Any]]] = {}
    for line in _lines(root / "ops" / FOLD_LOG):
        if line.get("path") == path and isinstance(line.get("before"), str) \
                and isinstance(line.get("after"), str):
            steps[line["before"]] = (line["after"], line)
    total = Pending()
    at, hops = after, 0
    while at != current and at in steps and hops < 10_000:
        at, line = steps[at]
        hops += 1
        total.count += int(line.get("n") or 0)
        last = line.get("last")
        if isinstance(last, str) and (total.last is None or _later(last, total.last)):
            total.last = last
    return total if at == current else None
