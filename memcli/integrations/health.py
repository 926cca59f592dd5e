"""The health of what runs unattended, for `memcli status`: the hooks (read back from
`ops/hook.log`) and the scheduled runs (`ops/state.json`, `ops/cron.log`).

Nothing here writes. Each hook.log line is `TIMESTAMP LEVEL [PID] EVENT: message`
(`hooks.log`); a hook's start line is written before it does anything else, so a hook that
Claude Code cancelled, or that died, still shows as started with no result.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memcli.integrations import hooks

_LINE = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ) (info|warn|error) \[(\d+)\] (.*)$")
_START = re.compile(r"^([\w-]+): start\b")
_SPAWNED = re.compile(r"background pass started \(pid (\d+)\)")
_DONE = re.compile(r"run-background: done \((ok|with errors)\)")
TAIL_BYTES = 512 * 1024  # more than both log files together ever hold (hooks.LOG_MAX_BYTES)


@dataclass
class Line:
    at: str
    level: str
    pid: int
    text: str


def read_lines(root: Path) -> list[Line]:
    """The log's lines, oldest first (hook.log.1, then hook.log); lines that are not in the
    log's format (a traceback's continuation, a child's raw stderr) are left out."""
    lines: list[Line] = []
    for name in (hooks.LOG_OLD_NAME, hooks.LOG_NAME):
        for raw in _tail(root / "ops" / name).splitlines():
            found = _LINE.match(raw)
            if found:
                lines.append(Line(found.group(1), found.group(2), int(found.group(3)), found.group(4)))
    return lines


def _tail(path: Path) -> str:
    try:
        with open(path, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            handle.seek(max(size - TAIL_BYTES, 0))
            return handle.read().decode("utf-8", "replace")
    except OSError:
        return ""


def hook_health(lines: list[Line], alive: Any = None) -> dict[str, Any]:
    """The last hook start and what became of it, and the last error."""
    is_alive = alive or _pid_alive
    last_error = next((line for line in reversed(lines) if line.level == "error"), None)
    warnings = sum(1 for line in lines if line.level == "warn")
    start_at = next((n for n in range(len(lines) - 1, -1, -1) if _START.match(lines[n].text)), None)
    health: dict[str, Any] = {"last_start": None, "result": None, "last_error": None, "warnings": warnings}
    if last_error is not None:
        health["last_error"] = {"at": last_error.at, "message": last_error.text}
    if start_at is None:
        return health
    start = lines[start_at]
    health["last_start"] = {"at": start.at, "event": _START.match(start.text).group(1),  # type: ignore[union-attr]
                            "message": start.text}
    health["result"] = _result(start, lines[start_at + 1:], is_alive)
    return health


def _result(start: Line, after: list[Line], is_alive: Any) -> dict[str, Any]:
    """What the hook that wrote `start` did next: started the background pass, which then
    finished ok or with errors (or is still running, or ended without a word)."""
    workers = {start.pid}
    spawned = None
    for line in after:
        if line.pid == start.pid:
            found = _SPAWNED.search(line.text)
            if found:
                spawned = int(found.group(1))
                workers.add(spawned)
    done = next((line for line in after if line.pid in workers and _DONE.search(line.text)), None)
    if done is not None:
        outcome = _DONE.search(done.text).group(1)  # type: ignore[union-attr]
        return {"status": "ok" if outcome == "ok" else "errors", "at": done.at,
                "message": f"the pass finished {outcome} at {done.at}"}
    if spawned is not None:
        if is_alive(spawned):
            return {"status": "running", "at": None, "message": f"the pass is running (pid {spawned})"}
        return {"status": "vanished", "at": None,
                "message": f"the pass (pid {spawned}) ended without finishing: see ops/{hooks.LOG_NAME}"}
    if start.text.startswith("session-end"):
        return {"status": "no_result", "at": None,
                "message": "no pass was started: the hook was cancelled or killed before it could"}
    return {"status": "started", "at": None, "message": "started (this hook writes no result line)"}


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True
    return True


def scheduled_health(root: Path, state: Mapping[str, Any]) -> dict[str, Any]:
    """The last weekly run (what cron starts) and what `ops/cron.log` says last."""
    runs = state.get("runs") if isinstance(state.get("runs"), dict) else {}
    weekly = runs.get("weekly") if isinstance(runs, dict) else None
    cron: dict[str, Any] | None = None
    path = root / "ops" / "cron.log"
    try:
        stat = path.stat()
    except OSError:
        stat = None
    if stat is not None:
        lines = [line for line in _tail(path).splitlines() if line.strip()]
        cron = {"modified": _utc(stat.st_mtime), "last_line": lines[-1][:300] if lines else None}
    return {"weekly": weekly if isinstance(weekly, dict) else None, "cron_log": cron}


def _utc(seconds: float) -> str:
    import time

    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def collect(root: Path, state: Mapping[str, Any]) -> dict[str, Any]:
    return {"hooks": hook_health(read_lines(root)), "scheduled": scheduled_health(root, state)}
