"""A whole-store dry run planned on two cores, each folder whole in one of two processes.

No rule looks across folders (duplicates are per folder; a promotion only adds a fresh copy
that the run does not plan again), so each folder's part of a plan (its actions, problems,
memories counted and protected, flagged ids seen) depends on that folder alone and on what the
run knew before its first folder. The names a folder's plan takes (archive names, promoted
copies' ids) come from its own memories' ids, which no other folder holds (an id in two
folders is left out of the run: `Store.duplicate_ids`). Where a second core is idle, the
planner forks one worker, and the two take the run's folders one at a time, largest first,
each the next folder left when it comes free (`_Claims`), and plan it whole: load, merges,
later rules. Each part is cut out of the process's state as it is made (`FolderPart`), and the
parts are put back in the run's folder order, as a serial run makes them: the same plan.

Beside the helper of a cold run (:mod:`memcli.consolidate.ahead`, which shares one folder's
pair search between two processes that both load that folder) and the worker of a steady one
(:mod:`memcli.consolidate.trustahead`, which checks entries ahead), this loads and plans each
folder in one process only: nothing is done twice. A folder at a time is coarser than the
helper's jobs, so a run where one folder holds most of the files keeps the helper.

A dry run only: a real run's planning also saves entries and caches that its apply reads
back (`planned`, the signature and pair caches), which stay the planner's to make.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections import Counter
from typing import TYPE_CHECKING, NamedTuple

from memcli.consolidate import parallel
from memcli.consolidate.plantypes import WHOLE_STORE
from memcli.store.plans import Action
from memcli.store.store import Folder, Problem

if TYPE_CHECKING:
    from memcli.consolidate.planner import Planner

MIN_FILES = 6_000  # memory files in the run: fewer, and the fork and the parts' transfer are a
# larger share of a short run (the helper's and the workers' threshold; not measured at its edge)
MAX_FILES = 20_000  # a folder with more: not shared (the two processes' peaks would add up,
# and the largest folder sets the run's peak: the mix at 100,000, 420 MB for 56,000 memories)
MAX_SHARE = 0.7  # one folder with more of the run's files: the helper shares it better (it
# shares that folder's search); the rest would leave the second core idle most of the run
MAX_FOLDERS = 8_192  # positions the claims' pipe holds before anyone reads it (64 KB)


class FolderPart(NamedTuple):
    """What planning one folder added to the planner's state."""

    actions: list[Action]
    problems: list[Problem]
    loaded: int  # memories loaded (the run's memory count)
    seen: list[str]  # ids of flagged pairs the folder held
    protected: dict[str, int]  # memories protected, by reason


def split(planner: Planner, folders: list[Folder], listings: dict[str, list[str]]) -> list[int] | None:
    """The order in which the run's folders are taken, largest first (positions), or None when
    the run is not shared out: not a whole-store dry run by the rules alone, too small, a
    folder too large, one folder most of the run, or no idle core or fork."""
    opts = planner.opts
    if opts.warm_caches or opts.trigger not in WHOLE_STORE or opts.folders is not None \
            or planner.vectors is not None or opts.judge is not None or not 2 <= len(folders) <= MAX_FOLDERS:
        return None
    counts = [len(listings.get(f.rel) or ()) for f in folders]
    total = sum(counts)
    if total < MIN_FILES or max(counts) > MAX_FILES or max(counts) > MAX_SHARE * total:
        return None
    if not parallel.helper_now() or not parallel.may_fork():
        return None
    return sorted(range(len(folders)), key=lambda p: (-counts[p], p))


def plan_shared(planner: Planner, folders: list[Folder], twins: dict[str, list[str]],
                listings: dict[str, list[str]], order: list[int]) -> None:
    """Plan every folder, this process and a forked worker each taking the next folder of
    `order` while there is one (`_Claims`), and put the parts into the planner in folder
    order. A folder the worker took and did not send back (it failed, died, or was stopped
    at `parallel.collect`'s deadline) is planned here: the plan never depends on the worker."""
    import memcli.consolidate.candidates  # noqa: F401  (numpy: imported once, before the fork)

    parts: dict[int, FolderPart] = {}

    def take(into: dict[int, FolderPart], progress: bool) -> dict[int, FolderPart]:
        while claims is not None and (p := claims.next()) is not None:
            into[p] = _plan_part(planner, folders[p], twins, listings.pop(folders[p].rel, None))
            if progress:
                planner._progress("planning", len(into), len(folders))
        return into

    def theirs() -> dict[int, FolderPart]:
        planner.opts.progress = None  # (the worker's copy: only this process reports)
        return take({}, False)

    claims = _Claims.make(order)
    worker = None
    began = time.monotonic()
    try:
        worker = parallel.start_worker(theirs) if claims is not None else None
        take(parts, True)
    except BaseException:
        if worker is not None:
            parallel.stop_child(*worker)
        raise
    finally:
        if claims is not None:
            claims.close()
    if worker is not None:  # (given as long as this process's share took, many times over)
        waited = max(parallel.WAIT_MIN_S, parallel.WAIT_FACTOR * (time.monotonic() - began))
        found = parallel.collect(*worker, time.monotonic() + waited)
        for p, part in (found or {}).items():
            if type(p) is int and 0 <= p < len(folders) and p not in parts and isinstance(part, FolderPart):
                parts[p] = part
    for p in range(len(folders)):  # (what the worker took and did not send; all, with no worker)
        if p not in parts:
            parts[p] = _plan_part(planner, folders[p], twins, listings.pop(folders[p].rel, None))
        else:
            listings.pop(folders[p].rel, None)
    planner._progress("planning", len(folders), len(folders))
    for p in range(len(folders)):
        part = parts.pop(p)
        planner.plan.actions += part.actions
        planner.problems += part.problems
        planner._loaded += part.loaded
        planner.seen.update(part.seen)
        for reason, count in part.protected.items():
            planner.protected_counts[reason] = planner.protected_counts.get(reason, 0) + count


class _Claims:
    """The folders still to plan, as 4-byte positions in a pipe that both processes read
    (a fork shares it): a read of 4 bytes takes one position whole, so each folder goes to
    exactly one process, the next free one taking the next folder, whatever each costs."""

    def __init__(self, read: int) -> None:
        self.read = read

    @classmethod
    def make(cls, order: list[int]) -> _Claims | None:
        """The claims of `order`, all written before the fork and the write end closed (an
        empty pipe is the end); None when no pipe is to be had or it does not hold them all
        (a user over the system's pipe quota gets pipes of one page): the run is then planned
        here alone."""
        try:
            read, write = os.pipe()
        except OSError:
            return None
        data = b"".join(p.to_bytes(4, "little") for p in order)
        try:
            os.set_blocking(write, False)
            written = os.write(write, data)
        except OSError:
            written = -1
        finally:
            os.close(write)
        if written != len(data):
            os.close(read)
            return None
        return cls(read)

    def next(self) -> int | None:
        """The next folder's position, or None when none is left (or the pipe is closed)."""
        try:
            raw = os.read(self.read, 4)
        except OSError:
            return None
        return int.from_bytes(raw, "little") if len(raw) == 4 else None

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.read)


def _plan_part(planner: Planner, folder: Folder, twins: dict[str, list[str]],
               names: list[str] | None) -> FolderPart:
    """One folder planned as a serial run plans it, and what that added to the planner's state
    taken out again (the parts are put back in folder order)."""
    actions, problems, loaded = len(planner.plan.actions), len(planner.problems), planner._loaded
    seen, protected = set(planner.seen), Counter(planner.protected_counts)
    planner._load_folder(folder, twins, names)
    planner._apply_rules()
    planner._release(folder)
    part = FolderPart(planner.plan.actions[actions:], planner.problems[problems:], planner._loaded - loaded,
                      sorted(planner.seen - seen), dict(Counter(planner.protected_counts) - protected))
    del planner.plan.actions[actions:]
    del planner.problems[problems:]
    planner._loaded, planner.seen, planner.protected_counts = loaded, seen, dict(protected)
    return part
