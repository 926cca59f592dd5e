"""A run's id from its decisions (SPEC 13): two clones of a shared store that make the same
decisions over the same files at the same moment write byte-identical results (archive
records name their run, archive names may carry it, pre-images live under it), so that git
merges them as one change instead of two conflicting ones.

A run is planned under a provisional id (the rules write it into records as they decide);
once the plan is complete its id is settled: the ULID time part is the run's moment, the
rest a digest of what it decides (each action's kind and memories, each file change's path,
kind and the hash it expects), and the provisional id is replaced throughout the plan.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Callable
from typing import Any

import orjson

from memcli.store.model import new_ulid
from memcli.store.plans import Action, Plan


def decision_digest(plan: Plan) -> str:
    """What the run decides, without its id: the same plan over the same files, the same digest."""
    parts = [plan.trigger, plan.at, *plan.covered]
    for action in plan.actions:
        parts.append(f"{action.type}|{','.join(action.touches)}")
        parts += [f"{op.kind}|{op.path.replace(plan.run_id, '~')}|{op.expect}" for op in action.ops]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def settled_id(plan: Plan, moment: dt.datetime, taken: Callable[[str], bool]) -> str:
    """The run id its decisions give; the next one when that id was used already (a run
    undone and decided again at the same moment)."""
    digest = decision_digest(plan)
    for attempt in range(100):
        candidate = "run_" + new_ulid(moment, f"{digest}#{attempt}")
        if not taken(candidate):
            return candidate
    return plan.run_id


def renamed(plan: Plan, run_id: str) -> Plan:
    """The plan with its provisional id replaced everywhere (paths, records, review items,
    log entries), in place. Ids are ULIDs: the provisional one occurs nowhere else by chance.

    Action by action, not the whole plan through JSON at once: that held three copies of
    every planned file's bytes together (the plan, its JSON, the plan parsed back: 558 ->
    697 MB for 38,190 actions at 100,000 memories). Each part ends as the JSON round trip
    would leave it (log entries and review items go through it, one action at a time)."""
    old = plan.run_id
    if run_id == old:
        return plan
    swap = _Swap(old, run_id)
    for action in (*plan.actions, *plan.deferred):
        swap.action(action)
    plan.run_id = run_id
    plan.trigger, plan.at = swap.text(plan.trigger), swap.text(plan.at)
    plan.covered = [swap.text(rel) for rel in plan.covered]
    plan.flagged_done = [[swap.text(i) for i in pair] for pair in plan.flagged_done]
    plan.notes = [swap.text(note) for note in plan.notes]
    return plan


class _Swap:
    """Replaces one id by another in each part of an action."""

    def __init__(self, old: str, new: str) -> None:
        self.old, self.new = old, new
        self.old_raw, self.new_raw = old.encode(), new.encode()

    def text(self, value: str) -> str:
        return value.replace(self.old, self.new)

    def json(self, value: Any) -> Any:
        """A log entry or review item as JSON gives it back, the id replaced."""
        return orjson.loads(orjson.dumps(value).replace(self.old_raw, self.new_raw))

    def action(self, action: Action) -> None:
        action.log = self.json(action.log)
        action.review = self.json(action.review)
        action.why = self.text(action.why)
        action.touches = [self.text(i) for i in action.touches]
        action.folders = [self.text(rel) for rel in action.folders]
        for op in action.ops:
            op.path = self.text(op.path)
            if op.expect is not None:
                op.expect = self.text(op.expect)
            if op.data is not None:  # bytes, replaced as bytes: a file's bytes are not copied twice
                op.data = op.data.replace(self.old_raw, self.new_raw)
