"""When a consolidation is due (SPEC section 6), `tick` which runs it, and `status`.

Cron expressions are read in the machine's local time zone, as cron itself reads them, and
`MEMCLI_NOW` is the clock. The decisions (`due_weekly`, `overflowing`) are pure functions of
their arguments so they can be tested without a store; `run_tick` applies them to a store.
croniter and the engine are imported inside functions: the session-end hook imports this
module and must start fast.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memcli.errors import LockTimeoutError
from memcli.store import fsops, index, journal, opsfiles
from memcli.store.model import fmt_of, format_ts, now, ts_or_none
from memcli.store.store import Folder, Store

TRIGGERS = ("manual", "session_end", "weekly", "index_overflow")
REVIEW_QUEUE = "review-queue.json"
TICK_LOCK = ".tick.lock"


# ---------------------------------------------------------------- cron in local time


def _to_local_naive(moment: dt.datetime) -> dt.datetime:
    """Cron fields mean wall-clock time here; a naive local datetime lets croniter step
    over DST changes the way cron does instead of keeping a fixed UTC offset."""
    return moment.astimezone().replace(tzinfo=None)


def _from_local_naive(moment: dt.datetime) -> dt.datetime:
    return moment.astimezone().astimezone(dt.timezone.utc)  # naive -> read as local time


def last_scheduled(cron: str, moment: dt.datetime) -> dt.datetime:
    """The most recent time `cron` fires at or before `moment` (UTC)."""
    from croniter import croniter

    # get_prev is strictly before its start: start one second later so `moment` itself counts.
    start = _to_local_naive(moment) + dt.timedelta(seconds=1)
    return _from_local_naive(croniter(cron, start).get_prev(dt.datetime))


def next_scheduled(cron: str, moment: dt.datetime) -> dt.datetime:
    """The first time `cron` fires strictly after `moment` (UTC)."""
    from croniter import croniter

    return _from_local_naive(croniter(cron, _to_local_naive(moment)).get_next(dt.datetime))


def due_weekly(cron: str, last_at: dt.datetime | None, moment: dt.datetime) -> bool:
    """Never run, or the last run is older than the last scheduled time (machine was off)."""
    return last_at is None or last_at < last_scheduled(cron, moment)


# ---------------------------------------------------------------- index overflow


def overflowing(counts: Mapping[str, int], state: Mapping[str, Any], threshold: int) -> list[str]:
    """Folders holding more than `threshold` memory files and more than after their last
    overflow run: one run per growth, not one per tick while a folder stays large."""
    seen = state.get("overflow")
    seen = seen if isinstance(seen, dict) else {}
    return [rel for rel, count in counts.items()
            if count > threshold and count > _as_int(seen.get(rel))]


def _as_int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def count_memory_files(folder: Path) -> int:
    """Memory files in a folder, indexed or not (no `_index.json`, dotfiles or links)."""
    try:
        with os.scandir(folder) as items:
            return sum(1 for item in items
                       if fmt_of(Path(item.name)) is not None and item.is_file(follow_symlinks=False))
    except OSError:  # gone, or unreadable (doctor reports it)
        return 0


def folder_counts(store: Store) -> dict[str, int]:
    return {folder.rel: count_memory_files(folder.path) for folder in store.memory_folders()}


# ---------------------------------------------------------------- reading ops/state.json


def last_run(state: Mapping[str, Any], trigger: str) -> dict[str, Any] | None:
    """`state["runs"][trigger]` as the engine records it, or None (also when malformed)."""
    runs = state.get("runs")
    entry = runs.get(trigger) if isinstance(runs, dict) else None
    return entry if isinstance(entry, dict) else None


def last_run_at(state: Mapping[str, Any], trigger: str) -> dt.datetime | None:
    entry = last_run(state, trigger)
    return ts_or_none(entry.get("at")) if entry else None


# ---------------------------------------------------------------- tick


@dataclass
class TickRun:
    trigger: str
    run_id: str
    folders: list[str] | None
    stats: dict[str, Any]


@dataclass
class TickResult:
    weekly_due: bool
    overflow_due: list[str]
    dry_run: bool = False
    runs: list[TickRun] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"weekly_due": self.weekly_due, "overflow_due": self.overflow_due,
                "dry_run": self.dry_run,
                "runs": [{"trigger": r.trigger, "run_id": r.run_id, "folders": r.folders,
                          "stats": r.stats} for r in self.runs]}


def plan_tick(store: Store, moment: dt.datetime) -> TickResult:
    """What is due at `moment`, without running anything."""
    state = opsfiles.read_state(store.root)
    weekly = due_weekly(store.settings.schedule.weekly, last_run_at(state, "weekly"), moment)
    threshold = store.settings.consolidation.index_overflow
    return TickResult(weekly, overflowing(folder_counts(store), state, threshold))


def run_tick(store: Store, wait: float = 10.0, dry_run: bool = False) -> TickResult:
    """Run whatever is due: the weekly pass once if missed, then one `index_overflow` pass
    over every folder that grew past the threshold. Ticks are serialised by their own lock
    so two session-end hooks finishing together cannot both run the missed weekly pass."""
    if dry_run:
        plan = plan_tick(store, now())
        plan.dry_run = True
        return plan
    with _tick_lock(store, wait):
        plan = plan_tick(store, now())
        if plan.weekly_due:
            plan.runs.append(_consolidate(store, "weekly", None, wait))
            # the weekly pass may have shrunk folders: decide on overflow afresh
            plan.overflow_due = plan_tick(store, now()).overflow_due
        if plan.overflow_due:
            plan.runs.append(_consolidate(store, "index_overflow", plan.overflow_due, wait))
            _record_overflow(store, plan.overflow_due, wait)
    return plan


def _consolidate(store: Store, trigger: str, rels: list[str] | None, wait: float) -> TickRun:
    from memcli.consolidate import engine  # heavy (rules, LLM client): only when a run is due

    folders = _folders(store, rels) if rels is not None else None
    outcome = engine.consolidate(store, trigger=trigger, folders=folders, wait=wait)
    return TickRun(trigger, outcome.run_id, rels, dict(outcome.stats))


def _folders(store: Store, rels: list[str]) -> list[Folder]:
    wanted = set(rels)
    return [folder for folder in store.memory_folders() if folder.rel in wanted]


def _record_overflow(store: Store, rels: list[str], wait: float) -> None:
    """Remember each folder's size after its overflow run: the next run waits for growth."""
    with store.lock(wait):
        state = opsfiles.read_state(store.root)
        counts = folder_counts(store)
        seen = state.get("overflow")
        seen = dict(seen) if isinstance(seen, dict) else {}
        seen.update({rel: counts.get(rel, 0) for rel in rels})
        state["overflow"] = seen
        opsfiles.write_state(store.root, state)


@contextmanager
def _tick_lock(store: Store, wait: float) -> Iterator[None]:
    from filelock import FileLock, Timeout

    if not store.ops.is_dir():
        fsops.mkdir(store.ops)
    lock = FileLock(str(store.ops / TICK_LOCK), timeout=max(wait, 0))
    try:
        lock.acquire()
    except Timeout as exc:
        raise LockTimeoutError(store.rel(store.ops / TICK_LOCK), wait) from exc
    try:
        yield
    finally:
        lock.release()


# ---------------------------------------------------------------- status


def collect_status(store: Store, moment: dt.datetime) -> dict[str, Any]:
    """Everything `memcli status` shows, as plain data. Reads only; writes nothing."""
    state = opsfiles.read_state(store.root)
    threshold = store.settings.consolidation.index_overflow
    counts = folder_counts(store)
    return {
        "store": str(store.root),
        "now": format_ts(moment),
        "runs": {trigger: last_run(state, trigger) for trigger in TRIGGERS},
        "last_success": state.get("last_success") if isinstance(state.get("last_success"), dict)
        else None,
        "weekly": _weekly_status(store.settings.schedule.weekly, state, moment),
        "index_overflow": threshold,
        "overflow_due": overflowing(counts, state, threshold),
        "indexes": _index_sizes(store, counts, threshold),
        "review_queue": review_queue_counts(store.root),
        "pending_runs": [store.rel(path) for path in journal.pending(store)],
    }


def _weekly_status(cron: str, state: Mapping[str, Any], moment: dt.datetime) -> dict[str, Any]:
    last_at = last_run_at(state, "weekly")
    return {"cron": cron, "last_run": format_ts(last_at) if last_at else None,
            "last_scheduled": format_ts(last_scheduled(cron, moment)),
            "next": format_ts(next_scheduled(cron, moment)),
            "overdue": due_weekly(cron, last_at, moment)}


def _index_sizes(store: Store, counts: Mapping[str, int], threshold: int) -> list[dict[str, Any]]:
    rows = []
    for folder in [*store.memory_folders(), store.archive_folder()]:
        files = counts.get(folder.rel, count_memory_files(folder.path))
        rows.append({"folder": folder.rel, "entries": _index_entries(folder.path), "files": files,
                     "over_threshold": folder.scope != "archive" and files > threshold})
    return rows


def _index_entries(folder: Path) -> int | None:
    """Entries in the folder's `_index.json`; None when it is missing or unreadable."""
    try:
        saved = index.load(folder)
    except (OSError, ValueError):
        return None
    return len(saved["entries"]) if saved else None


def review_queue_counts(root: Path) -> dict[str, int]:
    data = opsfiles.read_json(root / "ops" / REVIEW_QUEUE, {"items": []})
    items = data.get("items")
    items = [i for i in items if isinstance(i, dict)] if isinstance(items, list) else []
    open_items = sum(1 for item in items if item.get("status", "open") == "open")
    return {"open": open_items, "total": len(items)}
