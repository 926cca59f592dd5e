"""The JSON files under `ops/`: the state file and the review queue (the log has its own
module). Each is read whole and rewritten atomically; a missing file reads as its default.

Each is also checked for its shape when read (`shape_problem`): a state file whose `runs` is a
string, a log whose `entries` is not a list, would otherwise break the first writer after it
has changed memories. `preflight` reads all three before a run changes anything, so that one
of the wrong shape stops the run before it starts, naming the file and the fix.
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass
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


@dataclass
class _Parsed:
    identity: tuple[int, int, int, int, int]
    data: dict[str, Any]
    checked: bool = False  # whether `file_problem` serialised it again
    problem: str | None = None  # ... and what it found


# Ops files this process parsed, by path: one run reads its log up to three times (the run
# id's check, `preflight`, the append), and a log holding a large run's actions (7,575: 1.1 MB)
# parses in about 7 ms.
_parsed: dict[str, _Parsed] = {}
# A parse is kept only for a file last changed (ctime) this long before it was read: a change
# after the read then moves the ctime past the kept one, even within one timestamp tick (the
# "racy" case). ctime, not mtime: no program can set it back. (As `store.STAMP_AGE_NS`.)
_SETTLED_NS = 1_000_000_000
_KEEP_FILES = 8


def _identity(st: os.stat_result) -> tuple[int, int, int, int, int]:
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns


def read_json_shared(path: Path, default: dict[str, Any]) -> dict[str, Any]:
    """`read_json`, for a caller that only reads what it gets: the object may be the one an
    earlier call in this process parsed, while the file is provably unchanged since (the same
    device, inode, size, mtime and ctime, and that ctime older than the earlier read by
    `_SETTLED_NS`). It must never be changed: copy what you change."""
    key = os.path.abspath(path)
    try:
        st = os.lstat(key)
    except FileNotFoundError:
        _parsed.pop(key, None)
        return default
    except OSError:
        st = None
    kept = _parsed.get(key)
    if st is not None and kept is not None and kept.identity == _identity(st):
        return kept.data
    reading = time.time_ns()
    data = read_json(path, default)
    try:
        after = os.lstat(key)
    except OSError:
        return data
    if st is not None and _identity(after) == _identity(st) and after.st_ctime_ns < reading - _SETTLED_NS:
        if len(_parsed) >= _KEEP_FILES:
            _parsed.clear()  # (a process working on many stores: tests) keeps a few parses at most
        _parsed[key] = _Parsed(_identity(after), data)
    else:
        _parsed.pop(key, None)
    return data


def write_json(path: Path, data: dict[str, Any]) -> None:
    fsops.ensure_parent(path)
    fsops.write_replace(path, orjson.dumps(data, option=orjson.OPT_INDENT_2) + b"\n")


def state_path(root: Path) -> Path:
    return root / "ops" / "state.json"


# ---------------------------------------------------------------- shared and machine-local state
# A store shared through git (SPEC 13) keeps in `ops/state.json` only what every clone should
# agree on; what describes one machine goes to `ops/local/state.json`, which git ignores: the
# listing stamps (mtimes), the day's LLM calls, the overflow counts, and the last-run records
# of runs that changed nothing (a quiet run must change no tracked file). Readers see one
# state: the two files overlaid, the later of two records of a trigger's last run winning.

LOCAL_DIR = "local"
LOCAL_KEYS = ("listings", "llm_calls", "overflow")
_RUN_KEYS = ("runs", "last_success")


def local_dir(root: Path) -> Path:
    return root / "ops" / LOCAL_DIR


def local_state_path(root: Path) -> Path:
    return local_dir(root) / "state.json"


def read_state(root: Path) -> dict[str, Any]:
    return overlay(read_json(state_path(root), {}), read_json(local_state_path(root), {}))


def overlay(shared: dict[str, Any], local: dict[str, Any]) -> dict[str, Any]:
    """The state as readers see it: shared, with the machine-local keys and any later run."""
    merged = dict(shared)
    for key, value in local.items():
        if key == "runs" and isinstance(value, dict) and isinstance(shared.get("runs"), dict):
            runs = dict(shared["runs"])
            for trigger, run in value.items():
                runs[trigger] = later_run(runs.get(trigger), run)
            merged["runs"] = runs
        elif key == "last_success":
            merged[key] = later_run(shared.get(key), value)
        else:
            merged[key] = value
    return merged


def later_run(a: Any, b: Any) -> Any:
    """Of two last-run records, the later (by `at`, then run id): the same whichever is first."""
    if not isinstance(a, dict):
        return b
    if not isinstance(b, dict):
        return a
    return max(a, b, key=lambda run: (str(run.get("at")), str(run.get("run_id"))))


def write_state(root: Path, state: dict[str, Any], quiet: bool = False) -> None:
    """Write a state read with `read_state` and changed: machine-local keys to the local
    file, the rest to the shared one. What the caller changed in `runs` and `last_success`
    goes to the local file for a `quiet` run (one that changed nothing shared), else to the
    shared one. A file whose content would not change is not rewritten."""
    shared = read_json(state_path(root), {})
    local = read_json(local_state_path(root), {})
    before = overlay(shared, local)
    new_shared, new_local = dict(shared), dict(local)
    for key, value in state.items():
        if key in LOCAL_KEYS:
            new_local[key] = value
            new_shared.pop(key, None)  # kept there by an older memcli: it moves
        elif key in _RUN_KEYS:
            target = new_local if quiet else new_shared
            if key == "runs" and isinstance(value, dict):
                known = before.get("runs")
                old: dict[str, Any] = known if isinstance(known, dict) else {}
                changed = {t: r for t, r in value.items() if old.get(t) != r}
                if changed:
                    runs = target.get("runs")
                    target["runs"] = {**(runs if isinstance(runs, dict) else {}), **changed}
            elif value != before.get(key):
                target[key] = value
        else:
            new_shared[key] = value
    for key in set(shared) - set(state) - set(_RUN_KEYS):
        del new_shared[key]  # a key the caller dropped
    if new_shared != shared:
        write_json(state_path(root), new_shared)
    if new_local != local:
        write_json(local_state_path(root), new_local)


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

    return [state_path(root), review.queue_path(root), log.log_path(root), local_state_path(root),
            log.local_log_path(root)]


def file_problem(path: Path) -> str | None:
    """Why memcli could not read `path` and write it back, or None (also when missing): it
    reads with its shape, and it serialises again (orjson writes 254 levels at most, reads
    1,024: a file nested in between reads but would fail at the write after a run)."""
    from memcli.store import log  # (log builds on this module)

    root = path.parent.parent
    if path == log.log_path(root) and log.as_written(root) is not None:
        return None  # the live log exactly as this machine's last append wrote it: no parse
    try:
        data = read_json_shared(path, {})
    except OpsFileError as exc:
        return str(exc)
    kept = _parsed.get(os.path.abspath(path))
    if kept is not None and kept.data is data and kept.checked:
        return kept.problem  # the same parse, checked already
    try:
        orjson.dumps(data)
        problem = None
    except TypeError as exc:  # orjson.JSONEncodeError
        problem = f"{path}: cannot be written back ({exc}); {_FIX}"
    if kept is not None and kept.data is data:
        kept.checked, kept.problem = True, problem
    return problem


def preflight(root: Path, files: list[Path] | None = None) -> None:
    """Refuse (OpsFileError) before a run changes anything when an ops file it will write
    cannot be read, is of the wrong shape, or could not be written back."""
    problems = [p for p in map(file_problem, files if files is not None else ops_files(root)) if p]
    if problems:
        raise OpsFileError("refused before any change: " + " | ".join(problems))
