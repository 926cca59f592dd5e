"""`memcli hook session-end`: what an agent's SessionEnd hook runs (SPEC section 4).

Claude Code cancels a SessionEnd hook after about 1.5 s, so the hook only reads its input,
finds the store and starts one detached background process (`memcli hook run-background`)
that runs the `session_end` consolidation and then `tick`. It never fails the agent: every
problem becomes a timestamped line in `ops/hook.log` (and a note for stderr) and the exit
code stays 0. This module imports nothing heavy; the engine is imported only by the
background pass.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import select
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import orjson

from memcli.errors import MemcliError
from memcli.store import fsops
from memcli.store.model import format_ts, now
from memcli.store.store import find_upwards, is_store

MAX_INPUT = 1024 * 1024  # more than any real hook payload; the rest is never read
READ_TIMEOUT_S = 0.3  # stdin left open by the caller must not eat the 1.5 s budget
BACKGROUND_WAIT_S = 60.0  # nobody waits for the background pass: it may wait for the lock
LOG_NAME = "hook.log"
HOOK_FIELDS = ("session_id", "transcript_path", "cwd", "hook_event_name", "reason")
_MAX_FIELD = 4096

# The background processes this process started: keeping a reference stops Python from
# warning that a child is "still running" when the Popen object is collected.
_children: list[subprocess.Popen[bytes]] = []


@dataclass
class HookInput:
    """The fields of the hook's JSON that memcli uses; each is a short string or None."""

    session_id: str | None = None
    transcript_path: str | None = None
    cwd: str | None = None
    hook_event_name: str | None = None
    reason: str | None = None
    notes: list[str] = field(default_factory=list)  # what was wrong with the input


@dataclass
class HookReport:
    store: str | None
    started: bool
    pid: int | None = None
    foreground: bool = False
    ok: bool = True
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"store": self.store, "started": self.started, "pid": self.pid,
                "foreground": self.foreground, "ok": self.ok, "notes": self.notes}


# ---------------------------------------------------------------- input


def read_input(stream: IO[Any] | None, limit: int = MAX_INPUT,
               timeout: float = READ_TIMEOUT_S) -> tuple[bytes, bool]:
    """Up to `limit` bytes of the hook's stdin and whether there was more. A terminal is
    not read at all and an open pipe is read for at most `timeout` seconds."""
    if stream is None or _isatty(stream):
        return b"", False
    try:
        fd = stream.fileno()
    except (OSError, ValueError, AttributeError):  # an in-memory stream (tests, embedding)
        return _read_stream(stream, limit)
    if os.name == "nt":  # select() does not take pipes on Windows
        return _read_stream(stream, limit)
    return _read_fd(fd, limit, timeout)


def _isatty(stream: IO[Any]) -> bool:
    try:
        return bool(stream.isatty())
    except (OSError, ValueError, AttributeError):
        return True  # a closed or odd stream: do not touch it


def _read_stream(stream: IO[Any], limit: int) -> tuple[bytes, bool]:
    data = getattr(stream, "buffer", stream).read(limit + 1)
    raw = data.encode("utf-8", "replace") if isinstance(data, str) else bytes(data or b"")
    return raw[:limit], len(raw) > limit


def _read_fd(fd: int, limit: int, timeout: float) -> tuple[bytes, bool]:
    chunks: list[bytes] = []
    size = 0
    deadline = time.monotonic() + timeout
    while size <= limit:
        ready, _, _ = select.select([fd], [], [], max(deadline - time.monotonic(), 0))
        chunk = os.read(fd, 65536) if ready else b""
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    raw = b"".join(chunks)
    return raw[:limit], len(raw) > limit


def parse_input(raw: bytes, truncated: bool) -> HookInput:
    """The hook's JSON, taken only as far as it is a JSON object of short strings."""
    info = HookInput()
    if truncated:
        info.notes.append(f"hook input is over {MAX_INPUT} bytes; ignored it")
        return info
    if not raw.strip():
        return info
    try:
        data = orjson.loads(raw)  # bounded nesting depth: hostile input cannot recurse us away
    except orjson.JSONDecodeError as exc:
        info.notes.append(f"hook input is not JSON ({str(exc)[:120]}); ignored it")
        return info
    if not isinstance(data, dict):
        info.notes.append("hook input is not a JSON object; ignored it")
        return info
    for name in HOOK_FIELDS:
        _take_field(info, name, data.get(name))
    return info


def _take_field(info: HookInput, name: str, value: Any) -> None:
    if value is None:
        return
    if isinstance(value, str) and len(value) <= _MAX_FIELD and "\x00" not in value:
        setattr(info, name, value)
    else:
        info.notes.append(f"hook field {name!r} is not a short string; ignored it")


def clean(value: object, size: int = 120) -> str:
    """A value from the input made safe for a one-line log entry."""
    text = str(value)[:size]
    return "".join(c if c.isprintable() else "?" for c in text)


# ---------------------------------------------------------------- the store and the log


def find_store(explicit: str | None, hook_cwd: str | None) -> tuple[Path | None, str]:
    """The store a hook works on, and where it looked (for the message when there is none):
    `--store`, else `MEMCLI_STORE` (each must be a store itself); else the session's `cwd`,
    `CLAUDE_PROJECT_DIR` and the current directory, each with its parents (SPEC 1): a session
    that moved into a subfolder of its project still finds the project's store. A cwd that
    is not an absolute path to an existing folder is ignored."""
    named = explicit or os.environ.get("MEMCLI_STORE")
    if named:
        root = Path(named).expanduser()
        return (root if is_store(root) else None), str(root)
    tried: list[str] = []
    for start in (hook_cwd, os.environ.get("CLAUDE_PROJECT_DIR"), os.getcwd()):
        if not start or not os.path.isabs(start) or not os.path.isdir(start) or start in tried:
            continue
        tried.append(start)
        found = find_upwards(Path(start))
        if found is not None:
            return found, start
    return None, ", ".join(tried) or os.getcwd()


def log(root: Path, message: str) -> bool:
    """Append one timestamped line to `ops/hook.log`; never raises (returns False instead)."""
    try:
        path = _ensure_log(root)
        with os.fdopen(fsops.open_append(path), "ab") as handle:  # O_APPEND, never through a link
            handle.write(f"{_stamp()} {message}\n".encode("utf-8", "replace"))
        return True
    except (OSError, ValueError):
        return False


def _ensure_log(root: Path) -> Path:
    """The log file, created through fsops the first time (counted like any new file)."""
    path = root / "ops" / LOG_NAME
    fsops.confine(root)  # ops/ and the log are written without following a link (SPEC 8)
    if not os.path.lexists(path):
        fsops.ensure_parent(path)
        with contextlib.suppress(FileExistsError):
            fsops.write_new(path, b"")
    return path


def _stamp() -> str:
    try:
        return format_ts(now())
    except ValueError:  # a broken MEMCLI_NOW must not stop the log
        return format_ts(dt.datetime.now(dt.timezone.utc))


# ---------------------------------------------------------------- the hook


def session_end(explicit: str | None, stream: IO[Any] | None, foreground: bool = False,
                wait: float = BACKGROUND_WAIT_S, extra_args: list[str] | None = None) -> HookReport:
    """Read the hook input, find the store, start the pass; problems go to the report."""
    info = parse_input(*read_input(stream))
    notes = list(info.notes)
    if extra_args:
        notes.append(f"ignored unknown arguments: {clean(' '.join(extra_args))}")
    found, looked = find_store(explicit, info.cwd)
    if found is None:
        return HookReport(None, False, notes=[*notes, f"no memory store at {clean(looked, 300)} or its "
                                              "parents; nothing to do (run `memcli init` there)"])
    root = found.resolve()
    for note in notes:
        log(root, f"session-end: {note}")
    log(root, f"session-end: session {clean(info.session_id or '-')} "
              f"(reason {clean(info.reason or '-')}); starting the session_end pass")
    if foreground:
        return HookReport(str(root), True, os.getpid(), True, run_pass(root, wait), notes)
    return HookReport(str(root), True, spawn_background(root, wait), notes=notes)


def spawn_background(root: Path, wait: float) -> int:
    """Start `memcli hook run-background` detached: own session (the agent's exit or a
    Ctrl-C does not kill it), no terminal, stderr appended to the log, no inherited fds
    (Claude Code waits for the hook's output pipes to close)."""
    cmd = [sys.executable, "-m", "memcli", "--store", str(root), "--wait", f"{wait:g}",
           "hook", "run-background"]
    with os.fdopen(fsops.open_append(_ensure_log(root)), "ab") as err:
        child = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                 stderr=err, cwd=root, start_new_session=True, close_fds=True)
    _children.append(child)
    log(root, f"session-end: background pass started (pid {child.pid})")
    return child.pid


# ---------------------------------------------------------------- the background pass


def run_pass(root: Path, wait: float) -> bool:
    """The session_end consolidation, then tick. Runs with nobody watching, so every
    failure is caught and logged, and the tick runs even when the first pass failed."""
    first = _logged(root, "session_end pass", lambda: _session_end_run(root, wait))
    second = _logged(root, "tick", lambda: _tick(root, wait))
    log(root, f"run-background: done ({'ok' if first and second else 'with errors'})")
    return first and second


def _logged(root: Path, what: str, step: Any) -> bool:
    try:
        log(root, f"run-background: {what}: {step()}")
        return True
    except MemcliError as exc:  # expected failures (lock busy, bad settings): one line
        log(root, f"run-background: {what} failed: {exc}")
    except Exception as exc:  # anything else: the traceback is what a bug report needs
        log(root, f"run-background: {what} crashed: {exc!r}\n{traceback.format_exc()}")
    return False


def _session_end_run(root: Path, wait: float) -> str:
    from memcli.consolidate import engine
    from memcli.store.store import Store

    outcome = engine.consolidate(Store(root), trigger="session_end", wait=wait)
    return f"run {outcome.run_id}: {_stats_line(outcome.stats)}"


def _tick(root: Path, wait: float) -> str:
    from memcli.integrations import schedule
    from memcli.store.store import Store

    result = schedule.run_tick(Store(root), wait=wait)
    if not result.runs:
        return "nothing due"
    return "; ".join(f"{run.trigger} run {run.run_id}: {_stats_line(run.stats)}" for run in result.runs)


def _stats_line(stats: dict[str, Any]) -> str:
    shown = ("memories_merged", "memories_summarized", "memories_promoted", "memories_archived",
             "flagged", "skipped", "deferred")
    return ", ".join(f"{key.removeprefix('memories_')} {stats[key]}" for key in shown if key in stats)
