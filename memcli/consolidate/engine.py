"""`consolidate`: plan every rule in order over a simulated store, then apply the plan.

The plan is data (see `plans.Plan`): each action carries its log entry, its reason and the
exact bytes it will write, each file with the hash it must have just before. A dry run renders
the plan; a real run hands it to `journal.execute`; the log records it; undo reverses it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from memcli.consolidate.pairsearch import BlockTexts
from memcli.consolidate.planner import Planner, plan
from memcli.consolidate.plantypes import (
    ALL_RULES,
    DISCOVERY_FLOOR,
    LIGHT_RULES,
    TRIGGERS,
    WHOLE_STORE,
    Live,
    Planning,
    Progress,
    RunOptions,
    Summarizer,
)
from memcli.consolidate.recording import apply, preview, write_plan_file
from memcli.errors import MemcliError
from memcli.store import journal, planned
from memcli.store.model import now
from memcli.store.plans import Outcome
from memcli.store.store import Folder, Store

__all__ = [
    "ALL_RULES", "DISCOVERY_FLOOR", "LIGHT_RULES", "TRIGGERS", "WHOLE_STORE", "BlockTexts", "Live",
    "Planner", "Planning", "Progress", "RunOptions", "Summarizer", "apply", "consolidate", "now",
    "plan", "preview", "write_plan_file",
]


# ---------------------------------------------------------------- entry points


def consolidate(store: Store, *, trigger: str = "manual", dry_run: bool = False,
                limit: int | None = None, consent: bool = False, llm: bool | None = None,
                folders: list[Folder] | None = None, wait: float = 10.0,
                progress: Progress | None = None, plan_out: Path | None = None,
                confirm: Callable[[Outcome], bool] | None = None) -> Outcome:
    """One consolidation run: plan, then (unless a dry run) apply under the store lock.
    `confirm(preview)`, when given, sees the plan before it is applied; False cancels the
    run (MemcliError, nothing written)."""
    opts = RunOptions(trigger, limit, consent, folders, progress=progress)
    notes = _attach_llm(store, opts, llm)
    if dry_run or plan_out is not None:
        opts.records = plan_out is not None  # a bare dry run shows no file's bytes
        planning = plan(store, opts, now())
        planning.plan.notes += notes + _llm_notes(opts) + _pending_note(store)
        if plan_out is not None:
            write_plan_file(plan_out, planning.plan)
        return preview(planning)
    opts.warm_caches = True
    with store.writing(wait) as recovered:
        planning = plan(store, opts, now())
        try:
            planning.plan.notes += notes + _llm_notes(opts) + recovered
            if opts.judge is not None:
                from memcli.consolidate import llm_bridge

                planning.state_extra.update(llm_bridge.state_update(store, opts.judge))
            if confirm is not None and not confirm(preview(planning)):
                raise MemcliError("cancelled: no memory, index or log was changed "
                                  "(derived caches under .cache/ may have been refreshed)")
            return apply(store, planning, progress)
        finally:
            planned.discard(planning.planned)  # the scratch files of its planning, used or not


def _attach_llm(store: Store, opts: RunOptions, llm: bool | None) -> list[str]:
    if opts.trigger in LIGHT_RULES:
        if llm:
            raise MemcliError(f"a {opts.trigger} pass is a light pass and never uses the LLM; "
                              "drop --llm, or run another trigger")
        return []
    from memcli.consolidate import llm_bridge  # the LLM path is optional and imported only when asked

    return llm_bridge.attach(store, opts, llm)


def _llm_notes(opts: RunOptions) -> list[str]:
    if opts.judge is None:
        return []
    from memcli.consolidate import llm_bridge

    return llm_bridge.run_notes(opts.judge)


def _pending_note(store: Store) -> list[str]:
    if journal.pending(store):
        return ["an interrupted run is waiting to be recovered; the next writing command "
                "(or `memcli doctor --fix`) will do it"]
    return []


