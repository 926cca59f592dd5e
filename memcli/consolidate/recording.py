"""Applying a plan and recording the run: journal, log, state, caches; and the outcome a
dry run or a real run reports."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Any

from memcli.consolidate.plantypes import TRIGGERS, Planning, Progress
from memcli.store import caches, journal, opsfiles
from memcli.store.plans import Action, Outcome, Plan
from memcli.store.store import Problem, Store


def apply(store: Store, planning: Planning, progress: Progress | None = None) -> Outcome:
    """Execute a plan (the caller holds the lock), then log it and update the store's state."""
    started = time.monotonic()
    plan = planning.plan
    opsfiles.preflight(store.root)  # an ops file of the wrong shape stops the run before any change
    applied = journal.execute(store, plan, progress)
    outcome = _outcome(plan, applied.actions, applied.skips, started)
    outcome.notes += [_skip_note(skip) for skip in applied.skips if skip["reason"] in _SKIP_NOTES]
    try:
        _commit(store, planning, applied, outcome)
    except journal.RecordingFailed as exc:  # the run happened: say so, and how it gets finished
        outcome.notes += [f"warning: {exc}"] + _problem_notes(planning.problems)
        return outcome
    with contextlib.suppress(OSError, ValueError):  # caches: a failure costs the next run time, no more
        caches.save_pair_caches(store, planning.pairs)
        if planning.vectors is not None:
            planning.vectors.save(prune=plan.trigger in ("manual", "weekly"))
    outcome.notes += _problem_notes(planning.problems)
    from memcli.recall import index as recall_index  # the search index follows every write

    recall_index.after_run(store, sorted({f for a in applied.actions for f in a.folders} - {"archive"}))
    return outcome


def _commit(store: Store, planning: Planning, applied: journal.Applied,
            outcome: Outcome) -> dict[str, set[str] | None]:
    plan = planning.plan
    state = {"run_id": plan.run_id, "at": plan.at, "trigger": plan.trigger,
             "success": plan.trigger in TRIGGERS or plan.trigger == "review",
             "flagged_done": plan.flagged_done,
             **caches.listings_update(planning.listings, [*plan.covered, *(planning.refresh or {})])}
    if planning.state_extra:
        state["extra"] = {**state.get("extra", {}), **planning.state_extra}
    return journal.commit(store, plan.run_id, {
        "folders": sorted({f for a in applied.actions for f in a.folders}),
        "covered": plan.covered,
        "review": [a.review for a in applied.actions if a.review],
        "state": state,
        "quiet": not applied.actions and not applied.skips and not plan.flagged_done,  # SPEC 13: local
        "log_entry": {"run_id": plan.run_id, "timestamp": plan.at, "trigger": plan.trigger,
                      "actions": outcome.actions, "stats": outcome.stats},
        **caches.refresh_map(planning.refresh, plan, applied.actions),
    }, applied.files, planning.planned,
        # the signatures, durable with the indices (the hashes now in each covered folder)
        keep_caches=lambda hashes: caches.save_sig_caches(store, planning.sigs, hashes))


_SKIP_NOTES = {"unsafe_path": "{detail}", "unreadable": "its file cannot be read"}


def _skip_note(skip: dict[str, Any]) -> str:
    why = _SKIP_NOTES[skip["reason"]].format(detail=skip.get("detail", ""))
    return f"skipped {skip.get('action')} of {skip.get('memory_id')}: {why}"


def _problem_notes(problems: list[Problem]) -> list[str]:
    return [f"skipped {p}" if p.severity == "error" else f"warning: {p}" for p in problems]


def preview(planning: Planning) -> Outcome:
    """What a real run at the same moment would do; writes nothing."""
    outcome = _outcome(planning.plan, planning.plan.actions, [], None)
    outcome.dry_run = True
    outcome.notes += _problem_notes(planning.problems)
    return outcome


def _outcome(plan: Plan, actions: list[Action], skips: list[dict[str, Any]],
             started: float | None) -> Outcome:
    """The run's report. Durations: planning, applying (0 for a dry run, or when `started`
    is None) and both (`duration_ms`)."""
    logged = [a.log for a in actions] + skips
    merged = sum(len(a.log["source_ids"]) - 1 for a in actions if a.type == "merge")
    created = sum(1 for a in actions if a.type == "promote")
    archived = sum(1 for a in actions if a.type == "archive")
    stats = {"memories_merged": merged,
             "memories_summarized": sum(1 for a in actions if a.type == "summarize"),
             "memories_promoted": created, "memories_archived": archived,
             "flagged": sum(1 for a in actions if a.type == "flag"), "skipped": len(skips),
             "deferred": len(plan.deferred),
             "memory_count": plan.memory_count - merged - archived + created,
             "protected": sum(plan.protected.values())}
    apply_ms = 0 if started is None else int((time.monotonic() - started) * 1000)
    stats.update(plan_ms=plan.plan_ms, apply_ms=apply_ms, duration_ms=plan.plan_ms + apply_ms)
    return Outcome(plan.run_id, plan.trigger, plan.at, logged, stats,
                   deferred=[a.log for a in plan.deferred], notes=list(plan.notes),
                   whys=[a.why for a in actions], protected=dict(plan.protected))


def write_plan_file(path: Path, plan: Plan) -> None:
    """Save a reviewed plan for `memcli apply` (outside the store, so a plain write)."""
    import orjson

    path.write_bytes(orjson.dumps(plan.to_json(), option=orjson.OPT_INDENT_2))
