"""`memcli hook pre-compact`: capture a session before its history leaves the context
(Claude Code's PreCompact hook; SPEC 12).

Compaction does not shorten the transcript file, but it is the moment squidbot's design
summarises history, and a session that never ends cleanly (a killed terminal) still leaves
a memory. Like `hook session-end`, the hook only reads its input, finds the store and starts
one detached process (`memcli hook capture-background`) that captures the transcript; the
session's later capture (at SessionEnd) updates the same memory. It always exits 0;
problems go to `ops/hook.log`. Light on purpose: the capture itself is imported only by the
background process.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import IO, Any

from memcli.integrations import hooks

# Arguments of `hook capture-background` (and of `hook run-background`) naming the session.
FIELD_ARGS = {"--transcript": "transcript_path", "--session-id": "session_id", "--reason": "reason"}
_children: list[subprocess.Popen[bytes]] = []


def pre_compact(explicit: str | None, stream: IO[Any] | None, foreground: bool = False,
                wait: float = hooks.BACKGROUND_WAIT_S,
                extra_args: list[str] | None = None) -> hooks.HookReport:
    """Read the hook input, find the store, start the capture; problems go to the report."""
    info = hooks.parse_input(*hooks.read_input(stream))
    notes = list(info.notes)
    if extra_args:
        notes.append(f"ignored unknown arguments: {hooks.clean(' '.join(extra_args))}")
    found, looked = hooks.find_store(explicit, info.cwd)
    if found is None:
        missing = (f"no memory store at {hooks.clean(looked, 300)} or its parents; nothing to do "
                   "(run `memcli init` there)")
        return hooks.HookReport(None, False, notes=[*notes, missing])
    root = found.resolve()
    for note in notes:
        hooks.log(root, f"pre-compact: {note}")
    if not info.transcript_path:
        hooks.log(root, "pre-compact: the hook input names no transcript_path; nothing to capture")
        return hooks.HookReport(str(root), False, notes=notes)
    fields = {"transcript_path": info.transcript_path, "session_id": info.session_id}
    hooks.log(root, f"pre-compact: session {hooks.clean(info.session_id or '-')}; capturing the transcript")
    if foreground:
        line = capture_background(root, fields, wait, "pre-compact")
        ok = not line.startswith(("capture failed", "capture crashed"))
        return hooks.HookReport(str(root), True, os.getpid(), True, ok, notes)
    return hooks.HookReport(str(root), True, spawn_capture(root, wait, fields), notes=notes)


def field_args(fields: dict[str, str | None]) -> list[str]:
    """The hook fields as command-line arguments for a background process."""
    names = {v: k for k, v in FIELD_ARGS.items()}
    return [arg for name, value in fields.items() if value and name in names for arg in (names[name], value)]


def parse_field_args(args: list[str]) -> tuple[dict[str, str | None], list[str]]:
    """`--transcript X --session-id Y --reason Z` back into hook fields; the rest unknown."""
    fields: dict[str, str | None] = {}
    rest: list[str] = []
    i = 0
    while i < len(args):
        name, eq, value = args[i].partition("=")
        if name in FIELD_ARGS and (eq or i + 1 < len(args)):
            if not eq:
                value = args[i + 1]
                i += 1
            fields[FIELD_ARGS[name]] = value
        else:
            rest.append(args[i])
        i += 1
    return fields, rest


def spawn_capture(root: Path, wait: float, fields: dict[str, str | None]) -> int:
    """Start `memcli hook capture-background` detached (as `hooks.spawn_background` does)."""
    cmd = [sys.executable, "-m", "memcli", "--store", str(root), "--wait", f"{wait:g}",
           "hook", "capture-background", *field_args(fields)]
    hooks.log(root, "pre-compact: starting the capture in the background")
    with open(root / "ops" / hooks.LOG_NAME, "ab") as err:
        child = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                 stderr=err, cwd=root, start_new_session=True, close_fds=True)
    _children.append(child)
    return child.pid


def capture_background(root: Path, fields: dict[str, str | None], wait: float, event: str) -> str:
    """Capture what the fields name and log the one-line result; returns that line."""
    from memcli.capture.capture import capture_from_hook

    line = capture_from_hook(root, fields, wait)
    hooks.log(root, f"{event}: {line}")
    return line
