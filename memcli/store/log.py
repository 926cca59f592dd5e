"""The audit log `ops/consolidation-log.json` (SPEC section 7): one object, one entry a run.

Entries hold ids, rule names, reasons and counts, never memory text."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from memcli.store import opsfiles


def log_path(root: Path) -> Path:
    return root / "ops" / "consolidation-log.json"


def local_log_path(root: Path) -> Path:
    """Runs that changed nothing: logged on this machine only (`ops/local/`, git-ignored), so
    that a quiet run changes no file a shared store tracks (SPEC 13)."""
    return opsfiles.local_dir(root) / "consolidation-log.json"


def read_entries(root: Path) -> list[dict[str, Any]]:
    """Every run, the shared log's and this machine's quiet ones, in time order."""
    entries = opsfiles.read_json(log_path(root), {"entries": []}).get("entries", [])
    shared = [e for e in entries if isinstance(e, dict)]
    if not local_log_path(root).exists():
        return shared
    quiet = opsfiles.read_json(local_log_path(root), {"entries": []}).get("entries", [])
    known = {e.get("run_id") for e in shared}
    extra = [e for e in quiet if isinstance(e, dict) and e.get("run_id") not in known]
    merged = list(shared)  # the shared order stays; a quiet run goes before the first later one
    for entry in extra:
        stamp = str(entry.get("timestamp", ""))
        at = next((i for i, e in enumerate(merged) if str(e.get("timestamp", "")) > stamp), len(merged))
        merged.insert(at, entry)
    return merged


def append(root: Path, entry: dict[str, Any], quiet: bool = False) -> None:
    """Append one run's entry (a `quiet` run's to this machine's log); a run already logged
    (a recovered run) is not logged twice."""
    path = local_log_path(root) if quiet else log_path(root)
    data = opsfiles.read_json(path, {"entries": []})
    entries = data.setdefault("entries", [])
    if any(e.get("run_id") == entry["run_id"] for e in entries if isinstance(e, dict)):
        return
    entries.append(entry)
    opsfiles.write_json(path, data)


def find_run(root: Path, run_id: str) -> dict[str, Any] | None:
    return next((e for e in read_entries(root) if e.get("run_id") == run_id), None)
