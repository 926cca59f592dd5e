"""The LLM's daily call budget (`[llm] max_calls_per_day`), counted across runs.

The count lives under `llm_calls` in `ops/state.json` as `{"day": "2026-11-22", "calls": 7}`,
the day being the local date (as people count days) of the run's moment (`MEMCLI_NOW`). A run
reads it when it first wants the LLM (a real run holds the store lock by then, so no other run
spends at the same time), caps its own budget at what is left of the day, and records what it
spent when it commits, through the run journal with the rest of its state. A dry run's calls
are real calls, and are capped the same way, but a dry run writes nothing, so it does not
record them. A malformed entry counts as nothing spent.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

STATE_KEY = "llm_calls"


def local_day(moment: dt.datetime) -> str:
    """The local calendar date of `moment`, as `YYYY-MM-DD`."""
    return moment.astimezone().date().isoformat()


def calls_on(state: Mapping[str, Any], day: str) -> int:
    """LLM calls recorded for `day`; 0 for another day or anything malformed."""
    entry = state.get(STATE_KEY)
    if not isinstance(entry, dict) or entry.get("day") != day:
        return 0
    calls = entry.get("calls")
    if isinstance(calls, bool) or not isinstance(calls, int) or calls < 0:
        return 0
    return calls


def remaining(state: Mapping[str, Any], day: str, per_day: int) -> int:
    """Calls still allowed on `day`."""
    return max(0, per_day - calls_on(state, day))


def spent_update(state: Mapping[str, Any], day: str, spent: int) -> dict[str, Any]:
    """The state entry after a run that made `spent` calls on `day` (the state read under the
    store lock, just before the run commits)."""
    return {STATE_KEY: {"day": day, "calls": calls_on(state, day) + spent}}
