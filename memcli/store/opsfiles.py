"""The JSON files under `ops/`: the state file and the review queue (the log has its own
module). Each is read whole and rewritten atomically; a missing file reads as its default."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from memcli.errors import MemcliError
from memcli.store import fsops


def read_json(path: Path, default: dict[str, Any]) -> dict[str, Any]:
    """A JSON object file, or `default` when it does not exist. A broken file is an error:
    memcli never overwrites what it cannot read (doctor reports it)."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return default
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise MemcliError(f"{path}: not valid JSON ({exc}); fix or move the file aside") from exc
    if not isinstance(data, dict):
        raise MemcliError(f"{path}: expected a JSON object; fix or move the file aside")
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
