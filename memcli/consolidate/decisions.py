"""An undo is a decision (SPEC 3.6): what a person reversed, later runs do not redo.

Where the decisions live: in the review queue (`ops/review-queue.json`), one item per
decision, written by the undo run itself (through its journal, so a crash never leaves an
undo without its decisions or decisions without their undo):

- `undone_merge`, `memory_ids` [a, b]: a pair the undone run merged (every pair of a merged
  group; an LLM UPDATE's pair too) is kept apart;
- `undone_promote`, `memory_ids` [id], `to_scope`: a memory it promoted is not promoted again;
- `undone_archive`, `memory_ids` [id]: a memory it archived as stale counts as used at the
  time of the undo (`created_at`), so it is not stale again before `stale_after_days`.

Each item is created resolved (`resolution` "undo": the person decided by undoing) and names
its undo run (`undo_run`) and the run it reversed (`undone_run`). A decision holds while its
undo run is in force: undoing the undo (which redoes the run) lifts it, undoing that again
restores it. A person says otherwise with `memcli review resolve ID --merge` (merge the pair
now) or `--redo` (later runs may merge or promote again); `--keep-both` closes a pair's item
and keeps it apart for good.
"""

from __future__ import annotations

import datetime as dt
import itertools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memcli.consolidate import review
from memcli.store import log
from memcli.store.model import parse_ts

KEEP_APART = "undone_merge"
NO_PROMOTE = "undone_promote"
USED = "undone_archive"
REASONS = (KEEP_APART, NO_PROMOTE, USED)
HOLDING = ("undo", "keep_both")  # resolutions under which a decision holds


@dataclass
class Decisions:
    """The decisions in force, as the planner asks about them."""

    apart: set[str] = field(default_factory=set)  # review.pair_key of pairs kept apart
    no_promote: set[str] = field(default_factory=set)  # memory ids not to promote again
    used: dict[str, dt.datetime] = field(default_factory=dict)  # memory id -> used at (the undo)

    def keeps_apart(self, a: str, b: str) -> bool:
        return bool(self.apart) and review.pair_key([a, b]) in self.apart

    def blocks_promotion(self, mem_id: str) -> bool:
        return mem_id in self.no_promote

    def used_recently(self, mem_id: str, now: dt.datetime, stale_after_days: float) -> bool:
        at = self.used.get(mem_id)
        return at is not None and counts_as_used(at, now, stale_after_days)


def counts_as_used(used_at: dt.datetime, now: dt.datetime, stale_after_days: float) -> bool:
    """A use recorded at `used_at` keeps a memory from being stale until `stale_after_days`
    have passed (rule 3.4 with last_accessed = the undo's time)."""
    return now - used_at <= dt.timedelta(days=stale_after_days)


# ---------------------------------------------------------------- reading


def load(root: Path) -> Decisions:
    """The decisions of undo runs still in force. Costs one read of the review queue; the
    log is read only when there are undo decisions at all."""
    items = [i for i in review.read_items(root)
             if i.get("reason") in REASONS and i.get("resolution") in HOLDING]
    found = Decisions()
    if not items:
        return found
    entries = log.read_entries(root)
    in_force: dict[str, bool] = {}
    for item in items:
        undo_run = str(item.get("undo_run") or "")
        if undo_run not in in_force:
            in_force[undo_run] = undone_by(entries, undo_run) is None
        if in_force[undo_run]:
            _take(found, item)
    return found


def _take(found: Decisions, item: dict[str, Any]) -> None:
    ids = _ids(item.get("memory_ids"))
    reason = item.get("reason")
    if reason == KEEP_APART and len(ids) == 2:
        found.apart.add(review.pair_key(ids))
    elif reason == NO_PROMOTE and ids:
        found.no_promote.add(ids[0])
    elif reason == USED and ids and item.get("resolution") == "undo":
        try:
            at = parse_ts(str(item.get("created_at")))[0]
        except ValueError:
            return
        if ids[0] not in found.used or found.used[ids[0]] < at:
            found.used[ids[0]] = at


def undone_by(entries: list[dict[str, Any]], run_id: str) -> str | None:
    """The undo run that reversed `run_id` and was not itself undone since, or None."""
    for entry in reversed(entries):
        if entry.get("trigger") != "undo":
            continue
        actions = entry.get("actions")
        names = any(a.get("type") == "undo" and a.get("run_id") == run_id
                    for a in (actions if isinstance(actions, list) else []) if isinstance(a, dict))
        undo_id = str(entry.get("run_id"))
        if names and undo_id != run_id and undone_by(entries, undo_id) is None:
            return undo_id
    return None


# ---------------------------------------------------------------- making them (undo)


def from_undone(entry: dict[str, Any] | None, undo_run: str, stamp: str) -> list[dict[str, Any]]:
    """The review items an undo of the run logged as `entry` records (see the module
    docstring); none for a run that merged, promoted and archived nothing (an undo, a
    restore)."""
    if entry is None:
        return []
    base = {"undo_run": undo_run, "undone_run": entry.get("run_id"), "run_id": undo_run,
            "created_at": stamp, "status": "resolved", "resolution": "undo", "resolved_at": stamp,
            "resolved_by_run": undo_run}
    items: list[dict[str, Any]] = []
    seen: set[str] = set()

    def add(reason: str, ids: list[str], **extra: Any) -> None:
        key = f"{reason}:{review.pair_key(ids)}"
        if key not in seen:
            seen.add(key)
            items.append({"memory_ids": ids, "reason": reason, **extra, **base})

    for action in entry.get("actions", []):
        if not isinstance(action, dict):
            continue
        kind = action.get("type")
        if kind == "merge":
            group = _ids(action.get("source_ids"))
            for a, b in itertools.combinations(group, 2):
                add(KEEP_APART, [a, b])
        elif kind == "update":
            for other in _ids(action.get("source_ids")):
                add(KEEP_APART, [other, str(action.get("memory_id"))])
        elif kind == "promote" and isinstance(action.get("memory_id"), str):
            add(NO_PROMOTE, [action["memory_id"]], to_scope=action.get("to_scope"))
        elif kind == "archive" and action.get("reason") == "stale" \
                and isinstance(action.get("memory_id"), str):
            add(USED, [action["memory_id"]])
    return items


def _ids(value: Any) -> list[str]:
    return [str(v) for v in value if isinstance(v, str)] if isinstance(value, list) else []


def describe(item: dict[str, Any]) -> str:
    """One line for people: what later runs will not do."""
    ids = item.get("memory_ids") or []
    if item.get("reason") == KEEP_APART:
        return f"{' and '.join(ids)} are kept apart"
    if item.get("reason") == NO_PROMOTE:
        return f"{ids[0]} is not promoted to {item.get('to_scope') or 'team'} again"
    return f"{ids[0]} counts as used at the time of the undo (not stale again before stale_after_days)"
