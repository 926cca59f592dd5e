"""The review queue `ops/review-queue.json`: pairs a human should look at (possible
contradictions a guard found, both-changed duplicates, LLM judgements to confirm)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from memcli.errors import NotFoundError
from memcli.store import opsfiles


def queue_path(root: Path) -> Path:
    return root / "ops" / "review-queue.json"


def pair_key(ids: list[str]) -> str:
    return "|".join(sorted(ids))


def read_items(root: Path) -> list[dict[str, Any]]:
    items = opsfiles.read_json(queue_path(root), {"items": []}).get("items", [])
    return [i for i in items if isinstance(i, dict)]


def known_pairs(root: Path) -> set[str]:
    """Every pair ever queued, open or resolved: a pair is queued once."""
    return {pair_key(i.get("memory_ids", [])) for i in read_items(root)}


def add_items(root: Path, new: list[dict[str, Any]]) -> int:
    """Queue items whose pair is not queued yet; returns how many were added."""
    if not new:
        return 0
    data = opsfiles.read_json(queue_path(root), {"items": []})
    items = data.setdefault("items", [])
    seen = {pair_key(i.get("memory_ids", [])) for i in items if isinstance(i, dict)}
    added = 0
    for item in new:
        key = pair_key(item["memory_ids"])
        if key not in seen:
            seen.add(key)
            items.append({"id": f"rev_{len(items) + 1:04d}", "status": "open", **item})
            added += 1
    if added:
        opsfiles.write_json(queue_path(root), data)
    return added


def get_item(root: Path, item_id: str) -> dict[str, Any]:
    for item in read_items(root):
        if item.get("id") == item_id:
            return item
    raise NotFoundError(f"no review item {item_id} (see `memcli review list`)")


def mark_resolved(root: Path, item_id: str, resolution: str, at: str, run_id: str | None = None) -> None:
    data = opsfiles.read_json(queue_path(root), {"items": []})
    for item in data.get("items", []):
        if item.get("id") == item_id:
            item.update(status="resolved", resolution=resolution, resolved_at=at)
            if run_id:
                item["resolved_by_run"] = run_id
    opsfiles.write_json(queue_path(root), data)
