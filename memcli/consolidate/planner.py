"""Planning a run: every rule in order over a simulated store, folder by folder."""

from __future__ import annotations

import contextlib
import datetime as dt
import gc
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

from memcli.consolidate import ahead, rules, runid
from memcli.consolidate.laterrules import LaterRules
from memcli.consolidate.plantypes import ALL_RULES, LIGHT_RULES, WHOLE_STORE, Planning, RunOptions
from memcli.store import journal, log, planned
from memcli.store.plans import Action
from memcli.store.store import Folder, Store


def plan(store: Store, opts: RunOptions, moment: dt.datetime) -> Planning:
    """Decide every action of a run at `moment`, in rule order, over a simulated store."""
    started = time.monotonic()
    planner = Planner(store, opts, moment)
    with _gc_paused():
        try:
            planner.run()
        except BaseException:
            planned.discard(planner.planned)  # no recording will read them
            planner._close_files()  # (the folder it stopped in is not held open)
            raise
    planner.apply_limit()
    taken = lambda rid: journal.run_dir(store, rid).exists() or log.run_taken(store.root, rid)  # noqa: E731
    planner.plan = runid.renamed(planner.plan, runid.settled_id(planner.plan, moment, taken))
    planner.plan.protected = dict(sorted(planner.protected_counts.items()))
    planner.plan.plan_ms = int((time.monotonic() - started) * 1000)
    return Planning(planner.plan, planner.problems, planner.sigs, planner.refresh,
                    planner.listings if opts.trigger == "session_end" else None, planner.pairs_found,
                    vectors=planner.vectors if opts.warm_caches else None, planned=planner.planned)


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """Planning makes a dictionary per index entry and an object per memory, hundreds of
    thousands, and no reference cycles: the cycle collector would walk them again and again
    (a fifth of a 100,000-memory plan). It runs again afterwards."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            _enable_keeping_old()


def _enable_keeping_old() -> None:
    """Enable the cycle collector after planning, with what planning made and still holds
    (the plan, bounded caches) put straight into the oldest generation: it lives to the end of
    the run, and the first collections after the pause would walk all of it only to move it
    there (76,000 objects after a cold plan of 20,000 memories: 0.04 s of its 1.5). The oldest
    generation's own collections still look at it. (Through `gc.freeze`, so only when nothing
    else is frozen: a process that froze objects of its own keeps them frozen.)"""
    if gc.get_freeze_count():
        gc.enable()
        return
    gc.freeze()  # every tracked object, young and old, set aside...
    gc.enable()
    gc.unfreeze()  # ...and back, into the oldest generation


# Plan order is rule order (SPEC 3): the pair decisions of 3.1, then 3.2, 3.3 and 3.4.
_RULE_RANK = {"summarize": 1, "promote": 2, "archive": 3}


class Planner(LaterRules):
    """Holds the simulated store while the rules run; each rule adds actions to the plan."""

    def run(self) -> None:
        """Every rule over the run's scope. A full run goes folder by folder: no rule looks
        across folders (duplicates are per folder; a promotion only adds a fresh copy), so each
        folder's memories are let go once its rules are done, which keeps memory flat however
        large the store; a whole-store dry run may share its folders with a second process
        (:mod:`memcli.consolidate.sharedplan`). The plan is then put in rule order (a
        stable sort keeps folder order)."""
        if self.opts.trigger == "session_end":
            self.load()
            self._apply_rules()
            self._count_protected()
            self._sign_rewritten()
        else:
            from memcli.consolidate import sharedplan

            folders = self._scope_folders()
            listings: dict[str, list[str]] = {}
            twins = self._twins = self.store.duplicate_ids(listings)
            order = sharedplan.split(self, folders, listings)  # (None: planned here alone)
            if order is not None:
                self._shared = True  # (each process plans its folders alone: no helper, no worker)
                sharedplan.plan_shared(self, folders, twins, listings, order)
            else:
                self._plan_folders(folders, twins, listings)
            self.plan.covered = [f.rel for f in folders]
            if self.opts.trigger in WHOLE_STORE and self.opts.folders is None:
                # a whole-store run also covers a folder its promotions create: it saw (wrote)
                # every memory there, which the next session_end need not look at again
                self.plan.covered += sorted({rel for a in self.plan.actions if a.type == "promote"
                                             for rel in a.folders} - set(self.plan.covered))
            self.plan.memory_count = self._count_live()
        self.plan.flagged_done = [p for p in self.flagged if all(i in self.seen for i in p)]
        self.plan.actions.sort(key=lambda action: _RULE_RANK.get(action.type, 0))

    def _plan_folders(self, folders: list[Folder], twins: dict[str, list[str]],
                      listings: dict[str, list[str]]) -> None:
        """The folders planned in order in this process, with the run's helper and worker
        where they are wanted."""
        helper = self._helper = self._start_helper(folders, listings)
        if self.opts.trigger in WHOLE_STORE and self.vectors is None:
            from memcli.consolidate.trustahead import TrustAhead

            helped = (helper.position, (helper.in_fd, helper.out_fd)) if helper is not None else ((), ())
            self._trust = TrustAhead.start(self.store, folders, listings, *helped)
        try:
            for position, folder in enumerate(folders):
                self._next_rel = folders[position + 1].rel if position + 1 < len(folders) else None
                if position == 0:
                    self._helper_go(folder.rel)
                self._load_folder(folder, twins, listings.pop(folder.rel, None))  # then let go
                self._apply_rules()
                if helper is not None and folder.rel in helper.position:
                    helper.forget(helper.position[folder.rel])  # (a folder with no block)
                self._release(folder)
                self._progress("planning", position + 1, len(folders))
        except BaseException:
            if helper is not None:
                helper.stop()
            raise
        finally:
            self._helper = None
            if self._trust is not None:
                self._trust.stop()
                self._trust = None
        if helper is not None:
            helper.finish(time.monotonic() + FINISH_S)

    def _start_helper(self, folders: list[Folder], listings: dict[str, list[str]]) -> ahead.Helper | None:
        """(A full dry run.) The helper process that searches folders' blocks beside the planner
        (:mod:`memcli.consolidate.ahead`), forked now, while the planner holds no folder: it
        copies few pages. None where the search stays serial (see
        `DuplicateMerging._search_ahead`) or no folder is the helper's: fewer than
        `ahead.AHEAD_MIN` memories or more than `ahead.AHEAD_MAX`, no index (a first run:
        the helper's load would read every file) or a pair cache there (a steady-state run:
        little to compare)."""
        from memcli.consolidate import parallel

        if self.opts.warm_caches or self.vectors is not None or not ahead.wanted():
            return None
        if not parallel.helper_now() or not parallel.may_fork():  # (an idle core now: see there)
            return None
        from memcli.store.index import INDEX_NAME
        from memcli.store.paircache import PAIRS_NAME

        # (a folder with no index: loading it reads every file, in the helper as well, which
        # then costs more than it saves)
        wanted = [f for f in folders if ahead.AHEAD_MIN <= len(listings.get(f.rel) or ()) <= ahead.AHEAD_MAX
                  and (f.path / INDEX_NAME).exists() and not (f.cache() / PAIRS_NAME).exists()]
        if not wanted:
            return None
        import memcli.consolidate.candidates  # noqa: F401  (numpy: imported once, before the fork)

        at = {f.rel: n for n, f in enumerate(folders)}
        # the helper goes on to its next folder by itself when that one comes next in the run,
        # else it waits for the planner's go (a folder between is searched by workers of its own)
        auto = [at[f.rel] == (at[wanted[k - 1].rel] + 1 if k else 0) for k, f in enumerate(wanted)]
        names = {f.rel: listings.get(f.rel) for f in wanted}
        return ahead.start([f.rel for f in wanted],
                           lambda channel: self._ahead_body(wanted, auto, names, channel))

    def _apply_rules(self) -> None:
        wanted = LIGHT_RULES.get(self.opts.trigger, ALL_RULES)
        self.merge_duplicates()  # every pass merges
        self._shortlist()
        if "summarize" in wanted:
            self.summarize_verbose()
        if "promote" in wanted:
            self.promote_patterns()
        if "archive" in wanted:
            self.archive_stale()

    def _count_protected(self) -> None:
        """How many memories of the run's scope are protected, by reason (for the report)."""
        whole = self.opts.trigger != "session_end"
        counts, known = self.protected_counts, self._protection
        # (every memory of the store: `protected` and `takes_part` inline, the reasons not yet
        # known found in one call; those found here are not kept, the folder's memories are
        # let go right after)
        mems = [item.mem for item in self._all_loaded
                if (whole or item.changed) and not (facts := item.mem.facts).get("superseded_by")
                and "archived_at" not in facts]
        unknown = [mem for mem in mems if mem.id not in known]
        reasons = [known[mem.id] for mem in mems if mem.id in known]
        reasons += rules.protection_reasons(unknown, self.now, self.cfg, self.opts.consent)
        for reason, count in Counter(reasons).items():  # (counted in C)
            if reason:
                counts[reason] = counts.get(reason, 0) + count

    def _release(self, folder: Folder) -> None:
        large = len(self._all_loaded) >= TRIM_FROM
        self._count_protected()
        self._sign_rewritten()
        self._cover_rewritten()
        self._park_caches(folder)
        self._close_files()
        self.features.clear()
        self.live.clear()
        self._all_loaded.clear()
        self._protection.clear()
        self._lists = {}
        if large:
            give_back_freed()


    # ------------------------------------------------------------ 3.5 limits

    def apply_limit(self) -> None:
        """Keep actions in plan order until they would touch more than the limit; the rest of
        the writing actions are deferred to a later run."""
        limit = self.cfg.max_per_run if self.opts.limit is None else self.opts.limit
        kept: list[Action] = []
        used = 0
        cut = False
        for action in self.plan.actions:
            if not action.touches:
                kept.append(action)
            elif cut or (limit and used + len(action.touches) > limit):
                cut = True
                self.plan.deferred.append(action)
            else:
                used += len(action.touches)
                kept.append(action)
        self.plan.actions = kept


FINISH_S = 0.2  # how long the run waits for its helper to end by itself (then stopped)
# A folder of this many memories leaves tens of MB of freed heap behind (see `give_back_freed`).
TRIM_FROM = 10_000
_trim: Any = None


def give_back_freed() -> None:
    """Return the heap a large folder's planning freed to the system. glibc's malloc keeps
    freed blocks for reuse (a folder's index entries and records are larger than pymalloc's
    blocks), so the memory the largest folder needed stayed resident through the rest of the
    run and its apply, which then peaked above it. Where there is no glibc, nothing happens."""
    global _trim
    if _trim is None:
        try:
            import ctypes

            _trim = ctypes.CDLL("libc.so.6").malloc_trim
        except (OSError, AttributeError):
            _trim = False
    if _trim:
        _trim(0)
