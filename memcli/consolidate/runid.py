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

import orjson

from memcli.store.model import Plan, new_ulid


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
    log entries). Ids are ULIDs: the provisional one occurs nowhere else by chance."""
    if run_id == plan.run_id:
        return plan
    raw = orjson.dumps(plan.to_json()).replace(plan.run_id.encode(), run_id.encode())
    return Plan.from_json(orjson.loads(raw))
