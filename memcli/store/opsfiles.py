"""The JSON files under `ops/`: the state file and the review queue (the log has its own
module). Each is read whole and rewritten atomically; a missing file reads as its default.

Each is also checked for its shape when read (`shape_problem`): a state file whose `runs` is a
string, a log whose `entries` is not a list, would otherwise break the first writer after it
has changed memories. `preflight` reads all three before a run changes anything, so that one
of the wrong shape stops the run before it starts, naming the file and the fix.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import orjson

from memcli.errors import OpsFileError
from memcli.store import fsops

MAX_OPS_BYTES = 256 * 1024 * 1024  # far above any log memcli writes; refuses a runaway file
_FIX = "fix the file or move it aside (memcli starts a new one); nothing was changed"


def read_json(path: Path, default: dict[str, Any]) -> dict[str, Any]:
    """A JSON object file, or `default` when it does not exist. A broken file, or one of the
    wrong shape for its name, is an error: memcli never overwrites what it cannot read
    (doctor reports it)."""
    try:
        raw = fsops.read_bytes(path, limit=MAX_OPS_BYTES)  # no link, no FIFO
    except FileNotFoundError:
        return default
    except OSError as exc:
        raise OpsFileError(f"{path}: cannot be read ({exc.strerror or exc}); {_FIX}") from exc
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise OpsFileError(f"{path}: not valid JSON ({exc}); {_FIX}") from exc
    problem = shape_problem(path.name, data)
    if problem:
        raise OpsFileError(f"{path}: {problem}; {_FIX}")
    return data


def write_json(path: Path, data: dict[str, Any]) -> None:
    fsops.ensure_parent(path)
    fsops.write_replace(path, orjson.dumps(data, option=orjson.OPT_INDENT_2) + b"\n")


def state_path(root: Path) -> Path:
    return root / "ops" / "state.json"


def read_state(root: Path) -> dict[str, Any]:
    return read_json(state_path(root), {})


def write_state(root: Path, state: dict[str, Any]) -> None:
    write_json(state_path(root), state)


# ---------------------------------------------------------------- shapes


def shape_problem(name: str, data: Any) -> str | None:
    """Why `data`, read from the ops file `name`, is not what memcli reads and writes there."""
    if not isinstance(data, dict):
        return "expected a JSON object"
    check = _SHAPES.get(name)
    if check is None and _ROTATED_LOG.match(name):  # ops/log/<YYYY-MM>.json: the log's shape
        check = _log_problem
    return check(data) if check is not None else None


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "true/false", int: "a number",
            float: "a number", type(None): "null"}.get(type(value), type(value).__name__)


def _state_problem(data: dict[str, Any]) -> str | None:
    runs = data.get("runs", {})
    if not isinstance(runs, dict):
        return f"'runs' must be an object (trigger -> last run), found {_kind(runs)}"
    for trigger, run in runs.items():
        if run is not None and not isinstance(run, dict):
            return f"'runs.{trigger}' must be an object, found {_kind(run)}"
    if "last_success" in data and not isinstance(data["last_success"], (dict, type(None))):
        return f"'last_success' must be an object, found {_kind(data['last_success'])}"
    flagged = data.get("flagged", [])
    if not isinstance(flagged, list):
        return f"'flagged' must be a list, found {_kind(flagged)}"
    for item in flagged:
        if not isinstance(item, dict) or not _str_list(item.get("ids", [])):
            return "'flagged' must hold objects with 'ids', a list of memory ids"
    return None


def _queue_problem(data: dict[str, Any]) -> str | None:
    items = data.get("items", [])
    if not isinstance(items, list):
        return f"'items' must be a list, found {_kind(items)}"
    for item in items:
        if not isinstance(item, dict) or not _str_list(item.get("memory_ids", [])):
            return "'items' must hold objects with 'memory_ids', a list of memory ids"
    return None


def _log_problem(data: dict[str, Any]) -> str | None:
    entries = data.get("entries", [])
    if not isinstance(entries, list):
        return f"'entries' must be a list, found {_kind(entries)}"
    return None


def _str_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


_ROTATED_LOG = re.compile(r"^(\d{4}-\d{2}|undated)\.json$")
_SHAPES = {"state.json": _state_problem, "review-queue.json": _queue_problem,
           "consolidation-log.json": _log_problem}


# ---------------------------------------------------------------- before a run


def ops_files(root: Path) -> list[Path]:
    """The ops files a run reads and rewrites: state, review queue, log."""
    from memcli.consolidate import review  # review builds on this module
    from memcli.store import log

    return [state_path(root), review.queue_path(root), log.log_path(root)]


def file_problem(path: Path) -> str | None:
    """Why memcli could not read `path` and write it back, or None (also when missing): it
    reads with its shape, and it serialises again (orjson writes 254 levels at most, reads
    1,024: a file nested in between reads but would fail at the write after a run)."""
    try:
        data = read_json(path, {})
    except OpsFileError as exc:
        return str(exc)
    try:
        orjson.dumps(data)
    except TypeError as exc:  # orjson.JSONEncodeError
        return f"{path}: cannot be written back ({exc}); {_FIX}"
    return None


def preflight(root: Path, files: list[Path] | None = None) -> None:
    """Refuse (OpsFileError) before a run changes anything when an ops file it will write
    cannot be read, is of the wrong shape, or could not be written back."""
    problems = [p for p in map(file_problem, files if files is not None else ops_files(root)) if p]
    if problems:
        raise OpsFileError("refused before any change: " + " | ".join(problems))
