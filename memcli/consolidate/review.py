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


UNDO_REASONS = ("undone_merge", "undone_promote", "undone_archive")  # decisions (decisions.py)


def item_key(item: dict[str, Any]) -> str:
    """What makes an item new: its pair (a pair is queued once), or for an undo's decision
    its kind, its undo run and its memories (each undo records its own)."""
    ids = item.get("memory_ids", [])
    if item.get("reason") in UNDO_REASONS:
        return f"{item.get('reason')}@{item.get('undo_run')}:{pair_key(ids)}"
    return pair_key(ids)


def known_pairs(root: Path) -> set[str]:
    """Every pair ever queued, open or resolved: a pair is queued once (an undo's decisions
    are not questions, and do not count)."""
    return {pair_key(i.get("memory_ids", [])) for i in read_items(root)
            if i.get("reason") not in UNDO_REASONS}


def add_items(root: Path, new: list[dict[str, Any]]) -> int:
    """Queue items whose pair is not queued yet; returns how many were added."""
    if not new:
        return 0
    data = opsfiles.read_json(queue_path(root), {"items": []})
    items = data.setdefault("items", [])
    seen = {item_key(i) for i in items if isinstance(i, dict)}
    # the next number after the highest: a queue merged from two clones may have gaps
    top = max([int(str(i.get("id"))[4:]) for i in items if isinstance(i, dict)
               and str(i.get("id", "")).startswith("rev_") and str(i.get("id"))[4:].isdigit()], default=0)
    added = 0
    for item in new:
        key = item_key(item)
        if key not in seen:
            seen.add(key)
            top = max(top, len(items)) + 1
            items.append({"id": f"rev_{top:04d}", "status": "open", **item})
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
