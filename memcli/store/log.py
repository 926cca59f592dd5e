"""The audit log `ops/consolidation-log.json` (SPEC section 7): one object, one entry a run.

Entries hold ids, rule names, reasons and counts, never memory text."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from memcli.store import opsfiles


def log_path(root: Path) -> Path:
    return root / "ops" / "consolidation-log.json"


def read_entries(root: Path) -> list[dict[str, Any]]:
    entries = opsfiles.read_json(log_path(root), {"entries": []}).get("entries", [])
    return [e for e in entries if isinstance(e, dict)]


def append(root: Path, entry: dict[str, Any]) -> None:
    """Append one run's entry; a run already logged (a recovered run) is not logged twice."""
    data = opsfiles.read_json(log_path(root), {"entries": []})
    entries = data.setdefault("entries", [])
    if any(e.get("run_id") == entry["run_id"] for e in entries if isinstance(e, dict)):
        return
    entries.append(entry)
    opsfiles.write_json(log_path(root), data)


def find_run(root: Path, run_id: str) -> dict[str, Any] | None:
    return next((e for e in read_entries(root) if e.get("run_id") == run_id), None)
