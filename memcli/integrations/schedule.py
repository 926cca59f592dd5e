"""When a consolidation is due (SPEC section 6), `tick` which runs it, and `status`.

Cron expressions are read in the machine's local time zone, as cron itself reads them, and
`MEMCLI_NOW` is the clock. The decisions (`due_weekly`, `due_daily`, `overflowing`) are pure
functions of their arguments so they can be tested without a store; `run_tick` applies them
to a store.
croniter and the engine are imported inside functions: the session-end hook imports this
module and must start fast.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memcli.errors import LockTimeoutError, MemcliError
from memcli.store import fsops, index, journal, opsfiles
from memcli.store.formats import fmt_of
from memcli.store.model import format_ts, now, ts_or_none
from memcli.store.store import Folder, Store

TRIGGERS = ("manual", "session_end", "weekly", "daily", "index_overflow")
# A weekly pass runs every rule over every folder, rules 3.1 and 3.3 among them, so it does
# all a daily light pass would: either one satisfies a due daily pass.
COVERS_DAILY = ("daily", "weekly")
REVIEW_QUEUE = "review-queue.json"
TICK_LOCK = ".tick.lock"


# ---------------------------------------------------------------- cron in local time


def _to_local_naive(moment: dt.datetime) -> dt.datetime:
    """Cron fields mean wall-clock time here; a naive local datetime lets croniter step
    over DST changes the way cron does instead of keeping a fixed UTC offset."""
    return moment.astimezone().replace(tzinfo=None)


def _from_local_naive(moment: dt.datetime) -> dt.datetime:
    return moment.astimezone().astimezone(dt.timezone.utc)  # naive -> read as local time


def _instant(wall: dt.datetime) -> dt.datetime:
    """The moment (UTC) the local clock reaches the wall-clock time `wall`. A time the clock
    skips when it springs forward is reached when the clock jumps over it, which is when cron
    runs such a job; a time that happens twice when it falls back counts the first time."""
    at = _from_local_naive(wall)
    if _to_local_naive(at) == wall:
        return at
    low, high = int(at.timestamp()) - 86_400, int(at.timestamp()) + 86_400
    while high - low > 1:  # the first second whose wall-clock time is not before `wall`
        middle = (low + high) // 2
        if _to_local_naive(dt.datetime.fromtimestamp(middle, dt.timezone.utc)) >= wall:
            high = middle
        else:
            low = middle
    return dt.datetime.fromtimestamp(high, dt.timezone.utc)


def last_scheduled(cron: str, moment: dt.datetime) -> dt.datetime:
    """The most recent time `cron` fires at or before `moment` (UTC)."""
    from croniter import croniter

    # get_prev is strictly before its start: start one second later so `moment` itself counts.
    start = _to_local_naive(moment) + dt.timedelta(seconds=1)
    return _instant(croniter(cron, start).get_prev(dt.datetime))


def next_scheduled(cron: str, moment: dt.datetime) -> dt.datetime:
    """The first time `cron` fires strictly after `moment` (UTC)."""
    from croniter import croniter

    times = croniter(cron, _to_local_naive(moment))
    found = _instant(times.get_next(dt.datetime))
    for _ in range(4):  # in the repeated hour of a fall-back, the first 01:30 is already past
        if found > moment:
            break
        found = _instant(times.get_next(dt.datetime))
    return found


def due_weekly(cron: str, last_at: dt.datetime | None, moment: dt.datetime) -> bool:
    """Never run, or the last run is older than the last scheduled time (machine was off)."""
    return last_at is None or last_at < last_scheduled(cron, moment)


def last_scheduled_any(crons: Sequence[str], moment: dt.datetime) -> dt.datetime | None:
    """The most recent time any of `crons` fires at or before `moment`; None without any."""
    return max((last_scheduled(cron, moment) for cron in crons), default=None)


def next_scheduled_any(crons: Sequence[str], moment: dt.datetime) -> dt.datetime | None:
    """The first time any of `crons` fires strictly after `moment`; None without any."""
    return min((next_scheduled(cron, moment) for cron in crons), default=None)


def due_daily(crons: Sequence[str], last_at: dt.datetime | None, moment: dt.datetime) -> bool:
    """A light pass is due when one of its times passed since the last pass that covered it
    (`last_at`: the latest daily or weekly run), or when none ever ran. However many of its
    times were missed (a laptop closed for three days), that is one pass, not one per time."""
    if not crons:
        return False
    latest = last_scheduled_any(crons, moment)
    return last_at is None or (latest is not None and last_at < latest)


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


def last_light_at(state: Mapping[str, Any]) -> dt.datetime | None:
    """When a pass that covers the daily light pass (a daily or a weekly one) last ran."""
    return max((at for at in (last_run_at(state, t) for t in COVERS_DAILY) if at is not None),
               default=None)


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
    daily_due: bool = False  # a light pass is due on its own (a due weekly pass covers it)
    sync: dict[str, Any] | None = None  # after a daily or weekly pass in a shared store (SPEC 13)

    def as_dict(self) -> dict[str, Any]:
        return {"weekly_due": self.weekly_due, "daily_due": self.daily_due,
                "overflow_due": self.overflow_due, "dry_run": self.dry_run, "sync": self.sync,
                "runs": [{"trigger": r.trigger, "run_id": r.run_id, "folders": r.folders,
                          "stats": r.stats} for r in self.runs]}


def plan_tick(store: Store, moment: dt.datetime) -> TickResult:
    """What is due at `moment`, without running anything."""
    state = opsfiles.read_state(store.root)
    weekly = due_weekly(store.settings.schedule.weekly, last_run_at(state, "weekly"), moment)
    daily = not weekly and due_daily(store.settings.schedule.daily, last_light_at(state), moment)
    threshold = store.settings.consolidation.index_overflow
    return TickResult(weekly, overflowing(folder_counts(store), state, threshold), daily_due=daily)


def run_tick(store: Store, wait: float = 10.0, dry_run: bool = False) -> TickResult:
    """Run whatever is due: the weekly pass once if missed, else the daily light pass once
    if one of its times was missed, then one `index_overflow` pass over every folder that
    grew past the threshold. Ticks are serialised by their own lock so two session-end hooks
    finishing together cannot both run the missed weekly pass."""
    if dry_run:
        plan = plan_tick(store, now())
        plan.dry_run = True
        return plan
    with _tick_lock(store, wait):
        plan = plan_tick(store, now())
        if plan.weekly_due:
            plan.runs.append(_consolidate(store, "weekly", None, wait))
            # the weekly pass covers a due light pass and may have shrunk folders: decide
            # afresh (a daily time that passed while it ran is still due)
            again = plan_tick(store, now())
            plan.daily_due, plan.overflow_due = again.daily_due, again.overflow_due
        if plan.daily_due:
            plan.runs.append(_consolidate(store, "daily", None, wait))
            plan.overflow_due = plan_tick(store, now()).overflow_due
        if plan.overflow_due:
            plan.runs.append(_consolidate(store, "index_overflow", plan.overflow_due, wait))
            _record_overflow(store, plan.overflow_due, wait)
        if any(run.trigger in COVERS_DAILY for run in plan.runs):
            plan.sync = sync_shared(store, wait)
    return plan


def sync_shared(store: Store, wait: float) -> dict[str, Any] | None:
    """`memcli sync` after the daily or weekly pass, when the store is a git repository with
    a remote (SPEC 13): the timer or cron line that runs the pass shares it too. None when the
    store is not shared; a refusal is reported, never raised (the pass itself is done)."""
    from memcli.sync import git  # only when a pass ran: a tick that finds nothing due pays nothing

    if not git.available() or git.toplevel(store.root) is None or not git.remotes(store.root):
        return None
    from memcli.sync import sync

    try:
        result = sync.sync(store, None, wait)
    except MemcliError as exc:
        return {"ok": False, "error": str(exc)}
    return {"ok": result.doctor_ok, "remote": result.remote, "pushed": result.pushed,
            "commits": len(result.commits), "problems": result.problems}


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
        "daily": _daily_status(store.settings.schedule.daily, state, moment),
        "llm_calls_today": _llm_calls(store, state, moment),
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
            # `overdue` is a scheduled time missed since a pass ran; a store whose pass never
            # ran (a new one) is not late, though `tick` runs its first pass at once
            "overdue": last_at is not None and due_weekly(cron, last_at, moment),
            "never_run": last_at is None}


def _daily_status(crons: Sequence[str], state: Mapping[str, Any], moment: dt.datetime) -> dict[str, Any]:
    last_at, covered = last_run_at(state, "daily"), last_light_at(state)
    latest, upcoming = last_scheduled_any(crons, moment), next_scheduled_any(crons, moment)
    return {"cron": list(crons), "last_run": format_ts(last_at) if last_at else None,
            "last_covered": format_ts(covered) if covered else None,
            "last_scheduled": format_ts(latest) if latest else None,
            "next": format_ts(upcoming) if upcoming else None,
            "overdue": covered is not None and due_daily(crons, covered, moment),
            "never_run": bool(crons) and covered is None}


def _llm_calls(store: Store, state: Mapping[str, Any], moment: dt.datetime) -> dict[str, Any]:
    from memcli.consolidate import llm_budget

    day = llm_budget.local_day(moment)
    return {"day": day, "calls": llm_budget.calls_on(state, day),
            "max_calls_per_day": store.settings.llm.max_calls_per_day}


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
