"""Reading runs back: the log, stats, the review queue, and applying a saved plan."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from memcli.consolidate import review
from memcli.errors import MemcliError, NotFoundError, PlanMismatchError
from memcli.store import journal, log, paths
from memcli.store.model import format_ts, now, ts_or_none
from memcli.store.plans import Outcome, Plan
from memcli.store.store import Store

_BARS = "▁▂▃▄▅▆▇█"


def recent_runs(store: Store, last: int, run_id: str | None = None) -> list[dict[str, Any]]:
    """The `last` runs, newest first (0: all), or the run `run_id` names (a unique prefix is
    enough). Each entry carries `undone_by`: the run that undid it, or None."""
    entries = log.read_entries(store.root)
    undone = {str(a.get("run_id")): e.get("run_id") for e in entries for a in e.get("actions", [])
              if isinstance(a, dict) and a.get("type") == "undo"}
    if run_id:
        wanted = resolve_run_id(run_id, [str(e.get("run_id")) for e in entries])
        found = [e for e in entries if e.get("run_id") == wanted]
    else:
        found = list(reversed(entries[-last:] if last > 0 else entries))
    return [{**e, "undone_by": undone.get(str(e.get("run_id")))} for e in found]


def resolve_run_id(text: str, known: list[str], missing_ok: bool = False) -> str:
    """The run id that `text` names: itself, or a unique prefix of one (with or without
    `run_`); an ambiguous prefix is an error listing the candidates. Nothing matching:
    NotFoundError, or (`missing_ok`) the id as given, for a caller that explains better."""
    wanted = text if text.startswith("run_") else "run_" + text
    if wanted in known:
        return wanted
    found = sorted({r for r in known if r.startswith(wanted)})
    if len(found) == 1:
        return found[0]
    if not found:
        if missing_ok:
            return wanted
        raise NotFoundError(f"no run {text} in the log (see `memcli log`)")
    shown = "".join(f"\n  {r}" for r in found[:10]) + (f"\n  ... and {len(found) - 10} more"
                                                      if len(found) > 10 else "")
    raise MemcliError(f"{text!r} is ambiguous: {len(found)} runs start with it:{shown}")


def store_stats(store: Store) -> dict[str, Any]:
    """Memories by scope and type, runs, actions by type, memory count over time."""
    by_scope: dict[str, Counter[str]] = {}
    total = 0
    problems: list[str] = []  # bad files skipped, by path and reason
    for folder in store.memory_folders():
        scan = store.scan(folder, load=False)
        counts = by_scope.setdefault(folder.scope, Counter())
        counts.update(str(e.get("type")) for e in scan.entries)
        total += len(scan.entries)
        problems += [str(p) for p in scan.problems if p.severity == "error"]
    archive = store.scan(store.archive_folder(), load=False)
    archived = len(archive.entries)
    problems += [str(p) for p in archive.problems if p.severity == "error"]
    entries = [shown_entry(e) for e in log.read_entries(store.root)]
    actions = Counter(a["type"] for e in entries for a in e["actions"])
    series = [count if type(count := e["stats"].get("memory_count")) is int else 0 for e in entries]
    return {"memory_count": total, "archived_count": archived,
            "by_scope_type": {k: dict(v) for k, v in by_scope.items()},
            "runs": len(entries), "runs_by_trigger": dict(Counter(e["trigger"] for e in entries)),
            "actions_by_type": dict(actions), "memory_count_over_time": series,
            "chart": sparkline(series), "problems": problems}


def shown_entry(entry: dict[str, Any]) -> dict[str, Any]:
    """A log entry as the renderers read it: `run_id`, `timestamp` and `trigger` strings,
    `actions` a list of objects each with a `type`, `stats` an object, whatever the file
    holds (an entry written by hand may lack any of them: shown, never a crash)."""
    actions = entry.get("actions")
    stats = entry.get("stats")
    return {**entry,
            **{key: str(entry.get(key) or "?") for key in ("run_id", "timestamp", "trigger")},
            "actions": [{**a, "type": str(a.get("type") or "?")} for a in actions if isinstance(a, dict)]
            if isinstance(actions, list) else [],
            "stats": stats if isinstance(stats, dict) else {}}


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
    from memcli.consolidate import engine  # not for log, stats and review list

    planner = engine.Planner(store, engine.RunOptions(trigger="review", folders=[found[0][1]]), now())
    planner.load()
    pair = [planner.live[i] for i in ids if i in planner.live]
    if len(pair) != 2:
        raise MemcliError("one of the pair is no longer live; nothing to merge")
    from memcli.consolidate import rules

    newer, older = sorted(pair, key=lambda i: rules.newest_first_key(i.mem), reverse=True)
    planner._merge_group(newer, [older])
    return engine.apply(store, engine.Planning(planner.plan, planner.problems))


def apply_plan_file(store: Store, path: Path, wait: float,
                    progress: Callable[[str, int, int], None] | None = None) -> Outcome:
    """Apply exactly a saved plan: refused whole unless every file is as the plan saw it.
    The plan is input like any file: refused whole, before anything changes, unless it
    reads as a plan memcli writes (`plan_problem`): its paths memory files inside the store's
    memory folders, with no symlink on the way."""
    try:
        raw = orjson.loads(path.read_bytes())
    except FileNotFoundError as exc:
        raise MemcliError(f"{path}: no such plan file") from exc
    except OSError as exc:
        raise MemcliError(f"{path}: cannot be read ({exc.strerror or exc})") from exc
    except ValueError as exc:
        raise MemcliError(f"{path}: not a memcli plan (not valid JSON: {exc})") from exc
    problem = plan_problem(store, raw)
    if problem:
        raise MemcliError(f"{path}: refused, nothing was changed: {problem}")
    try:
        plan = Plan.from_json(raw)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise MemcliError(f"{path}: not a memcli plan ({exc})") from exc
    with store.writing(wait):
        changed = _changed_since_plan(store, plan)
        if changed:
            raise PlanMismatchError("the store changed since the plan was made; re-plan. Changed: "
                                    + ", ".join(changed[:20]))
        from memcli.consolidate import engine

        return engine.apply(store, engine.Planning(plan), progress)


_OP_KINDS = ("write", "create", "remove")


def plan_problem(store: Store, raw: Any) -> str | None:
    """Why `raw` is not a plan memcli would apply, or None (SPEC 8: paths from plan files are
    validated before use: relative, inside the memory folders, no symlinked component)."""
    if not isinstance(raw, dict):
        return "not a memcli plan (not a JSON object)"
    if paths.too_deep(raw):
        return "not a memcli plan (nested deeper than any plan memcli writes)"
    if not paths.is_run_id(raw.get("run_id")):
        return f"not a memcli plan (bad run id {raw.get('run_id')!r})"
    if not isinstance(raw.get("trigger"), str) or ts_or_none(raw.get("at")) is None:
        return "not a memcli plan (no trigger or no valid 'at' timestamp)"
    for key in ("actions", "deferred"):
        actions = raw.get(key, [])
        if not isinstance(actions, list):
            return f"not a memcli plan ('{key}' is not a list)"
        for action in actions:
            problem = _action_problem(store, action)
            if problem:
                return problem
    for key in ("covered", "flagged_done", "notes"):
        if not isinstance(raw.get(key, []), list):
            return f"not a memcli plan ('{key}' is not a list)"
    if any(paths.folder_problem(rel) for rel in raw.get("covered", [])):
        return "plan covers something that is not a memory folder of the store"
    if not all(paths.str_list(pair) for pair in raw.get("flagged_done", [])) or not paths.str_list(
            raw.get("notes", [])) or type(raw.get("memory_count", 0)) is not int:
        return "not a memcli plan (a field of the wrong type)"
    return None


def _action_problem(store: Store, action: Any) -> str | None:
    if not isinstance(action, dict) or not isinstance(action.get("type"), str) \
            or not isinstance(action.get("log"), dict) or not isinstance(action.get("ops", []), list):
        return "not a memcli plan (an action without a type, a log entry or a list of file changes)"
    if not paths.str_list(action.get("touches", [])) or not isinstance(action.get("why", ""), str):
        return "not a memcli plan (an action with fields of the wrong type)"
    folders = action.get("folders", [])
    if not isinstance(folders, list) or any(paths.folder_problem(rel) for rel in folders):
        return "plan names a folder that is not a memory folder of the store"
    review_item = action.get("review")
    if review_item is not None and not (isinstance(review_item, dict)
                                        and paths.str_list(review_item.get("memory_ids"))):
        return "not a memcli plan (a review item without its memory ids)"
    for op in action.get("ops", []):
        if not isinstance(op, dict) or op.get("kind") not in _OP_KINDS:
            return "not a memcli plan (a file change that is not write, create or remove)"
        if any(not isinstance(op.get(key), (str, type(None))) for key in ("expect", "data")):
            return "not a memcli plan (a file change with fields of the wrong type)"
        problem = paths.path_problem(store.root, op.get("path"))
        if problem:
            return f"plan names a path memcli does not own: {problem}"
    return None


def _changed_since_plan(store: Store, plan: Plan) -> list[str]:
    """Files whose content changed since the plan. A file that became bad input (a symlink,
    unreadable) is not a change of content: its action is skipped when applied, as bad input
    always is, and the rest of the plan goes on."""
    first: dict[str, str | None] = {}
    for action in plan.actions:
        for op in action.ops:
            first.setdefault(op.path, op.expect)
    bad_input = (journal.SYMLINK, journal.UNREADABLE)
    return [rel for rel, expect in first.items()
            if (now := journal.hash_of(store.root / rel)) != expect and now not in bad_input]
