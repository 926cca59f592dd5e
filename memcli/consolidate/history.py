"""Reading runs back: the log, stats, the review queue, and applying a saved plan."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import orjson

from memcli.consolidate import engine, review
from memcli.errors import MemcliError, NotFoundError, PlanMismatchError
from memcli.store import log
from memcli.store.model import Outcome, Plan, format_ts, now, sha256
from memcli.store.store import Store

_BARS = "▁▂▃▄▅▆▇█"


def recent_runs(store: Store, last: int, run_id: str | None = None) -> list[dict[str, Any]]:
    entries = log.read_entries(store.root)
    if run_id:
        found = [e for e in entries if e.get("run_id") == run_id]
        if not found:
            raise NotFoundError(f"no run {run_id} in the log (see `memcli log`)")
        return found
    return entries[-last:] if last > 0 else entries


def store_stats(store: Store) -> dict[str, Any]:
    """Memories by scope and type, runs, actions by type, memory count over time."""
    by_scope: dict[str, Counter[str]] = {}
    total = 0
    for folder in store.memory_folders():
        scan = store.scan(folder, load=False)
        counts = by_scope.setdefault(folder.scope, Counter())
        counts.update(str(e.get("type")) for e in scan.entries)
        total += len(scan.entries)
    archived = len(store.scan(store.archive_folder(), load=False).entries)
    entries = log.read_entries(store.root)
    actions = Counter(a.get("type") for e in entries for a in e.get("actions", []))
    series = [int(e.get("stats", {}).get("memory_count", 0)) for e in entries]
    return {"memory_count": total, "archived_count": archived,
            "by_scope_type": {k: dict(v) for k, v in by_scope.items()},
            "runs": len(entries), "runs_by_trigger": dict(Counter(e.get("trigger") for e in entries)),
            "actions_by_type": dict(actions), "memory_count_over_time": series,
            "chart": sparkline(series)}


def sparkline(values: list[int], width: int = 60) -> str:
    """A one-line chart with min and max, the last `width` values."""
    if not values:
        return ""
    values = values[-width:]
    low, high = min(values), max(values)
    span = (high - low) or 1
    bars = "".join(_BARS[int((v - low) / span * (len(_BARS) - 1))] for v in values)
    return f"{bars}  min {low}, max {high}, now {values[-1]}"


def review_items(store: Store, include_resolved: bool) -> list[dict[str, Any]]:
    items = review.read_items(store.root)
    return items if include_resolved else [i for i in items if i.get("status") == "open"]


def review_detail(store: Store, item_id: str) -> dict[str, Any]:
    """One review item with what a person needs to decide it: both memories in full (live or
    archived), their similarity, the guard that spoke and what it checks, and which guards
    reject the pair as the texts stand now."""
    from memcli.consolidate import guards, rules
    from memcli.consolidate.similar import content_similarity

    item = review.get_item(store.root, item_id)
    memories: list[dict[str, Any]] = []
    contents: list[dict[str, Any]] = []
    for mem_id in [str(i) for i in item.get("memory_ids", [])]:
        try:
            mem, folder = store.find(mem_id, archived=True)
        except MemcliError as exc:
            memories.append({"id": mem_id, "missing": str(exc)})
            continue
        facts = mem.facts
        memories.append({"id": mem.id, "path": store.rel(mem.path), "archived": folder.scope == "archive",
                         "type": mem.type, "subtype": mem.subtype, "tags": mem.tags,
                         "created_by": mem.created_by, "created_at": facts.get("created_at"),
                         "updated_at": facts.get("updated_at"), "text": rules.raw_text(mem.content)})
        contents.append(mem.content)
    detail: dict[str, Any] = {**item, "memories": memories}
    guard = item.get("guard")
    if guard:
        detail["guard_checks"] = guards.DESCRIPTIONS.get(str(guard), "")
    if len(contents) == 2:
        cfg = store.settings.consolidation
        detail["similarity_now"] = round(content_similarity(contents[0], contents[1], cfg.scorer,
                                                            cfg.content_similarity), 4)
        detail["guards_now"] = guards.guards_rejecting(*(rules.raw_text(c) for c in contents))
    return detail


def resolve_review(store: Store, item_id: str, decision: str, wait: float) -> dict[str, Any]:
    """Keep both (mark resolved), merge the pair as a logged, undoable run, or (for an
    undo's decision, SPEC 3.6) `redo`: let later runs merge or promote again."""
    with store.writing(wait):
        item = review.get_item(store.root, item_id)
        undo_decision = item.get("reason") in review.UNDO_REASONS
        if item.get("status") != "open" and not (undo_decision and item.get("resolution") == "undo"):
            raise MemcliError(f"{item_id} is already resolved ({item.get('resolution')})")
        _check_decision(item_id, item, decision, undo_decision)
        stamp = format_ts(now())
        if decision in ("keep_both", "redo"):
            review.mark_resolved(store.root, item_id, decision, stamp)
            message = (f"{item_id}: kept both" if decision == "keep_both" else
                       f"{item_id}: the undo's decision is lifted; the next run may do it again")
            return {"id": item_id, "resolution": decision, "message": message}
        outcome = _merge_pair(store, [str(i) for i in item.get("memory_ids", [])])
        review.mark_resolved(store.root, item_id, "merge", stamp, outcome.run_id)
        return {"id": item_id, "resolution": "merge", "run_id": outcome.run_id,
                "actions": outcome.actions,
                "message": f"{item_id}: merged in run {outcome.run_id} (undo: memcli undo {outcome.run_id})"}


def _check_decision(item_id: str, item: dict[str, Any], decision: str, undo_decision: bool) -> None:
    if decision == "redo" and not undo_decision:
        raise MemcliError(f"{item_id} is not an undo's decision; --redo only lifts those "
                          "(use --keep-both or --merge)")
    if undo_decision and item.get("reason") != "undone_merge" and decision != "redo":
        raise MemcliError(f"{item_id} records a {item.get('reason')} decision of an undo, not a pair: "
                          "--redo lifts it (later runs may do it again)")


def _merge_pair(store: Store, ids: list[str]) -> Outcome:
    found = [store.find(i, archived=False) for i in ids]
    folders = {f.rel for _, f in found}
    if len(found) != 2 or len(folders) != 1:
        raise MemcliError("a review merge needs two live memories in the same folder")
    planner = engine.Planner(store, engine.RunOptions(trigger="review", folders=[found[0][1]]), now())
    planner.load()
    pair = [planner.live[i] for i in ids if i in planner.live]
    if len(pair) != 2:
        raise MemcliError("one of the pair is no longer live; nothing to merge")
    from memcli.consolidate import rules

    newer, older = sorted(pair, key=lambda i: rules.newest_first_key(i.mem), reverse=True)
    planner._merge_group(newer, [older])
    return engine.apply(store, engine.Planning(planner.plan, planner.problems))


def apply_plan_file(store: Store, path: Path, wait: float) -> Outcome:
    """Apply exactly a saved plan: refused whole unless every file is as the plan saw it."""
    try:
        plan = Plan.from_json(orjson.loads(path.read_bytes()))
    except FileNotFoundError as exc:
        raise MemcliError(f"{path}: no such plan file") from exc
    except (ValueError, KeyError, TypeError) as exc:
        raise MemcliError(f"{path}: not a memcli plan ({exc})") from exc
    with store.writing(wait):
        changed = _changed_since_plan(store, plan)
        if changed:
            raise PlanMismatchError("the store changed since the plan was made; re-plan. Changed: "
                                    + ", ".join(changed[:20]))
        return engine.apply(store, engine.Planning(plan))


def _changed_since_plan(store: Store, plan: Plan) -> list[str]:
    first: dict[str, str | None] = {}
    for action in plan.actions:
        for op in action.ops:
            first.setdefault(op.path, op.expect)
    changed = []
    for rel, expect in first.items():
        if ".." in Path(rel).parts or Path(rel).is_absolute():
            raise MemcliError(f"plan names a path outside the store: {rel}")
        path = store.root / rel
        current = sha256(path.read_bytes()) if path.exists() else None
        if current != expect:
            changed.append(rel)
    return changed
