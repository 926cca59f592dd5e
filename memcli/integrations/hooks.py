"""`memcli hook session-end`: what an agent's SessionEnd hook runs (SPEC section 4).

The hook only reads its input, finds the store and starts one detached background process
(`memcli hook run-background`) that runs the `session_end` consolidation and then `tick`. It
never fails the agent: every problem becomes a timestamped line in `ops/hook.log` (and a
note for stderr) and the exit code stays 0.

Start-up is the hook's whole cost, so this module imports the standard library's cheapest
parts and nothing of memcli but `memcli.store.locate` (no pathlib, typing, dataclasses,
subprocess, orjson, yaml or config): the whole `hook session-end` process stays within a few
times a bare interpreter start (bench/hook_bench.py). The engine is imported only by the
background pass.

`ops/hook.log` is bounded: past `LOG_MAX_BYTES` it is renamed to `ops/hook.log.1` (replacing
the older one) and a new log begins, so the two files never hold much more than twice that.
Each line is `TIMESTAMP LEVEL [PID] EVENT: message`; `memcli status` reads them back.
"""

from __future__ import annotations

import os
import sys
import time

from memcli.store.locate import find_upwards_dir, is_store_dir

TYPE_CHECKING = False  # `typing` and `pathlib` would cost every hook a few milliseconds
if TYPE_CHECKING:
    from pathlib import Path
    from typing import IO, Any

MAX_INPUT = 1024 * 1024  # more than any real hook payload; the rest is never read
READ_TIMEOUT_S = 0.3  # stdin left open by the caller must not eat the hook's budget
BACKGROUND_WAIT_S = 60.0  # nobody waits for the background pass: it may wait for the lock
LOG_NAME = "hook.log"
LOG_OLD_NAME = "hook.log.1"
LOG_MAX_BYTES = 256 * 1024  # about 400 sessions of lines; hook.log.1 keeps the 400 before
HOOK_FIELDS = ("session_id", "transcript_path", "cwd", "hook_event_name", "reason")
_MAX_FIELD = 4096
_MAX_DEPTH = 64  # no real hook payload nests deeper; deeper input is refused before parsing

# The background processes this process started: keeping a reference stops Python from
# warning that a child is "still running" when the Popen object is collected.
_children: list[Any] = []


class HookInput:
    """The fields of the hook's JSON that memcli uses; each is a short string or None."""

    __slots__ = ("session_id", "transcript_path", "cwd", "hook_event_name", "reason", "notes")

    def __init__(self) -> None:
        self.session_id: str | None = None
        self.transcript_path: str | None = None
        self.cwd: str | None = None
        self.hook_event_name: str | None = None
        self.reason: str | None = None
        self.notes: list[str] = []  # what was wrong with the input


class HookReport:
    """What the hook did, for stderr or `--json`."""

    __slots__ = ("store", "started", "pid", "foreground", "ok", "notes")

    def __init__(self, store: str | None, started: bool, pid: int | None = None,
                 foreground: bool = False, ok: bool = True, notes: list[str] | None = None) -> None:
        self.store = store
        self.started = started
        self.pid = pid
        self.foreground = foreground
        self.ok = ok
        self.notes = notes if notes is not None else []

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
    import select

    chunks: list[bytes] = []
    size = 0
    deadline = time.monotonic() + timeout
    while size <= limit:
        try:
            ready, _, _ = select.select([fd], [], [], max(deadline - time.monotonic(), 0))
            chunk = os.read(fd, 65536) if ready else b""
        except OSError:  # a closed or broken descriptor: what was read is all there is
            break
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
    data = _loads(raw, info)
    if data is None:
        return info
    if not isinstance(data, dict):
        info.notes.append("hook input is not a JSON object; ignored it")
        return info
    for name in HOOK_FIELDS:
        _take_field(info, name, data.get(name))
    return info


def _loads(raw: bytes, info: HookInput) -> Any:
    """The parsed JSON, or None with a note. The standard library's parser (orjson alone
    costs a hook 15 ms), behind a nesting check so that hostile input cannot recurse."""
    import json

    if _too_deep(raw):
        info.notes.append(f"hook input is not JSON we take (nested over {_MAX_DEPTH} levels); ignored it")
        return None
    try:
        return json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        info.notes.append(f"hook input is not JSON ({clean(exc, 120)}); ignored it")
        return None


def _too_deep(raw: bytes) -> bool:
    """Whether brackets outside strings nest deeper than _MAX_DEPTH (a cheap upper bound:
    a bracket inside a string only ever makes this say "deeper")."""
    if raw.count(b"[") + raw.count(b"{") <= _MAX_DEPTH:
        return False
    depth = 0
    in_string = escaped = False
    for byte in raw:
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:  # backslash
                escaped = True
            elif byte == 0x22:  # quote
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in (0x5B, 0x7B):
            depth += 1
            if depth > _MAX_DEPTH:
                return True
        elif byte in (0x5D, 0x7D):
            depth -= 1
    return False


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


# ---------------------------------------------------------------- the store


def find_store_dir(explicit: str | None, hook_cwd: str | None) -> tuple[str | None, str, list[str]]:
    """The store a hook works on (an absolute path), where it looked (for the message when
    there is none), and notes on what it could not use. `--store`, else `MEMCLI_STORE`
    (each must be a store itself); else the session's `cwd`, `CLAUDE_PROJECT_DIR` and the
    current directory, each with its parents (SPEC 1): a session that moved into a subfolder
    of its project still finds the project's store. A cwd that is not an absolute path to an
    existing folder is skipped, with a note."""
    notes: list[str] = []
    named = explicit or os.environ.get("MEMCLI_STORE")
    if named:
        root = os.path.abspath(os.path.expanduser(named))
        return (os.path.realpath(root) if is_store_dir(root) else None), root, notes
    tried: list[str] = []
    for label, start in (("the session's cwd", hook_cwd),
                         ("CLAUDE_PROJECT_DIR", os.environ.get("CLAUDE_PROJECT_DIR")),
                         ("the current folder", _getcwd())):
        if not start or start in tried:
            continue
        if not os.path.isabs(start) or not os.path.isdir(start):
            notes.append(f"{label} {clean(start, 300)!r} is not an existing folder; skipped it")
            continue
        tried.append(start)
        found = find_upwards_dir(start)
        if found is not None:
            return os.path.realpath(found), start, notes
    return None, ", ".join(tried) or "(nowhere usable)", notes


def find_store(explicit: str | None, hook_cwd: str | None) -> tuple[Path | None, str]:
    """`find_store_dir` with a `Path` (for callers that are not on the hot path)."""
    from pathlib import Path

    found, looked, _ = find_store_dir(explicit, hook_cwd)
    return (Path(found) if found else None), looked


def _getcwd() -> str | None:
    try:
        return os.getcwd()
    except OSError:  # the folder we were started in is gone
        return None


# ---------------------------------------------------------------- ops/hook.log


def log(root: str | os.PathLike[str], message: str, level: str = "info") -> bool:
    """Append timestamped lines to `ops/hook.log` (rotated past LOG_MAX_BYTES); never
    raises (returns False instead). `message` may hold several lines: each gets the prefix."""
    prefix = f"{_stamp()} {level} [{os.getpid()}] "
    text = "".join(prefix + line + "\n" for line in message.splitlines() or [""])
    try:
        fd = _open_log(os.fspath(root))
        try:
            os.write(fd, text.encode("utf-8", "replace"))
        finally:
            os.close(fd)
        return True
    except (OSError, ValueError):
        return False


def log_path(root: str | os.PathLike[str]) -> str:
    return os.path.join(os.fspath(root), "ops", LOG_NAME)


def _open_log(root: str) -> int:
    """The log open for appending (O_APPEND: concurrent hooks never overwrite each other),
    rotated first when it has grown past LOG_MAX_BYTES. Never follows a symlink."""
    ops = os.path.join(root, "ops")
    if not os.path.isdir(ops):
        os.mkdir(ops)  # only ever called for a store (SPEC 1), never for a stray folder
    path = os.path.join(ops, LOG_NAME)
    flags = (os.O_WRONLY | os.O_APPEND | os.O_CREAT
             | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
    fd = os.open(path, flags, 0o644)
    if os.fstat(fd).st_size <= LOG_MAX_BYTES:
        return fd
    try:
        rotated = _rotate(fd, path)
    except OSError:
        rotated = False  # cannot rotate (read-only ops/?): keep appending rather than lose lines
    if not rotated:
        return fd
    os.close(fd)
    return os.open(path, flags, 0o644)


def _rotate(fd: int, path: str) -> bool:
    """Rename the full log to hook.log.1. Two hooks may find it full at once: the lock on
    the file (released when the descriptor closes) lets one rename; the other then sees
    that the name points at a new file and leaves it alone."""
    try:
        import fcntl
    except ImportError:  # Windows: no lock, a rare double rotation loses an old generation
        fcntl = None  # type: ignore[assignment]
    if fcntl is not None:
        fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        here = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return True
    mine = os.fstat(fd)
    if (here.st_ino, here.st_dev) != (mine.st_ino, mine.st_dev):
        return True  # another hook rotated it already: open the new one
    if mine.st_size <= LOG_MAX_BYTES:
        return False
    os.replace(path, os.path.join(os.path.dirname(path), LOG_OLD_NAME))
    return True


def _stamp() -> str:
    """Now in UTC (`MEMCLI_NOW` when set and readable: a broken one must not stop the log)."""
    fixed = os.environ.get("MEMCLI_NOW")
    if fixed:
        import datetime as dt

        try:
            parsed = dt.datetime.fromisoformat(fixed.strip().replace("Z", "+00:00").replace("z", "+00:00"))
            if parsed.tzinfo is None:
                parsed = parsed.replace(tzinfo=dt.timezone.utc)
            return parsed.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        except ValueError:
            pass
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


# ---------------------------------------------------------------- the hook


def session_end(explicit: str | None, stream: IO[Any] | None, foreground: bool = False,
                wait: float = BACKGROUND_WAIT_S, extra_args: list[str] | None = None) -> HookReport:
    """Read the hook input, find the store, start the pass; problems go to the report."""
    info = parse_input(*read_input(stream))
    notes = list(info.notes)
    if extra_args:
        notes.append(f"ignored unknown arguments: {clean(' '.join(extra_args))}")
    found, looked, where_notes = find_store_dir(explicit, info.cwd)
    notes += where_notes
    if found is None:
        return HookReport(None, False, notes=[*notes, f"no memory store at {clean(looked, 300)} or its "
                                              "parents; nothing to do (run `memcli init` there)"])
    # The first line is written before anything else is tried, so that a hook that Claude
    # Code cancels (or that dies) still leaves a trace that `memcli status` can show.
    lines = [f"session-end: start (session {clean(info.session_id or '-')}, reason "
             f"{clean(info.reason or '-')}, cwd {clean(info.cwd or '-', 300)})"]
    log(found, "\n".join(lines))
    for note in notes:
        log(found, f"session-end: {note}", "warn")
    # SPEC 12: a session whose hook names its transcript is captured first (in the background).
    capture = {"transcript_path": info.transcript_path, "session_id": info.session_id,
               "reason": info.reason} if info.transcript_path else None
    if foreground:
        return HookReport(found, True, os.getpid(), True, run_pass(found, wait, capture), notes)
    pid = spawn_background(found, wait, capture) if capture else spawn_background(found, wait)
    return HookReport(found, True, pid, notes=notes)


def capture_args(capture: dict[str, str | None] | None) -> list[str]:
    """The session a capture names, as arguments of `hook run-background` (read back by
    `memcli.integrations.capture_hook.parse_field_args`)."""
    names = (("transcript_path", "--transcript"), ("session_id", "--session-id"), ("reason", "--reason"))
    return [arg for field, flag in names if capture and capture.get(field)
            for arg in (flag, str(capture[field]))]


def spawn_background(root: str, wait: float, capture: dict[str, str | None] | None = None) -> int:
    """Start `memcli hook run-background` detached: own session (the agent's exit or a
    Ctrl-C does not kill it), no terminal, stderr appended to the log, no inherited fds
    (Claude Code waits for the hook's output pipes to close)."""
    import subprocess

    cmd = [sys.executable, "-m", "memcli", "--store", root, "--wait", f"{wait:g}",
           "hook", "run-background"]
    cmd += capture_args(capture)
    err = _open_log(root)
    try:
        child = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                 stderr=err, cwd=root, start_new_session=True, close_fds=True)
    finally:
        os.close(err)
    _children.append(child)
    log(root, f"session-end: background pass started (pid {child.pid})")
    return int(child.pid)


# ---------------------------------------------------------------- the background pass


def run_pass(root: str, wait: float, capture: dict[str, str | None] | None = None) -> bool:
    """The session_end consolidation, then tick. Runs with nobody watching, so every
    failure is caught and logged, and the tick runs even when the first pass failed.
    When the hook named a transcript, the session is captured first (SPEC 12)."""
    if capture:
        from pathlib import Path

        from memcli.capture.capture import capture_from_hook  # never raises

        log(root, f"run-background: {capture_from_hook(Path(root), capture, wait)}")
    first = _logged(root, "session_end pass", lambda: _session_end_run(root, wait))
    second = _logged(root, "tick", lambda: _tick(root, wait))
    ok = first and second
    log(root, f"run-background: done ({'ok' if ok else 'with errors'})", "info" if ok else "error")
    return ok


def _logged(root: str, what: str, step: Any) -> bool:
    from memcli.errors import MemcliError

    try:
        log(root, f"run-background: {what}: {step()}")
        return True
    except MemcliError as exc:  # expected failures (lock busy, bad settings): one line
        log(root, f"run-background: {what} failed: {exc}", "error")
    except Exception as exc:  # anything else: the traceback is what a bug report needs
        import traceback

        log(root, f"run-background: {what} crashed: {exc!r}\n{traceback.format_exc()}", "error")
    return False


def _session_end_run(root: str, wait: float) -> str:
    from pathlib import Path

    from memcli.consolidate import engine
    from memcli.store.store import Store

    outcome = engine.consolidate(Store(Path(root)), trigger="session_end", wait=wait)
    return f"run {outcome.run_id}: {_stats_line(outcome.stats)}"


def _tick(root: str, wait: float) -> str:
    from pathlib import Path

    from memcli.integrations import schedule
    from memcli.store.store import Store

    result = schedule.run_tick(Store(Path(root)), wait=wait)
    if not result.runs:
        return "nothing due"
    return "; ".join(f"{run.trigger} run {run.run_id}: {_stats_line(run.stats)}" for run in result.runs)


def _stats_line(stats: dict[str, Any]) -> str:
    shown = ("memories_merged", "memories_summarized", "memories_promoted", "memories_archived",
             "flagged", "skipped", "deferred")
    return ", ".join(f"{key.removeprefix('memories_')} {stats[key]}" for key in shown if key in stats)
