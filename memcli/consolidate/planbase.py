"""The planner's state and the small helpers every rule uses (protection, rewrites, archive
moves). The rules build on this class, one module per concept (see `planner.Planner`)."""

from __future__ import annotations

import bisect
import datetime as dt
import os
from typing import Any

from memcli.config import Consolidation
from memcli.consolidate import decisions, review, rules
from memcli.consolidate.plantypes import Live, RunOptions
from memcli.store import opsfiles
from memcli.store.formats import encode
from memcli.store.model import Memory, format_ts, new_run_id, sha256
from memcli.store.planned import Ticket
from memcli.store.plans import Action, FileOp, Plan
from memcli.store.sigcache import SigCache, load_sigs
from memcli.store.store import Folder, Problem, Stamp, Store

ARCHIVE_STATS = 64  # archive names checked one stat each before archive/ is listed once


class PlannerBase:
    """The simulated store while the rules run; each rule adds actions to the plan."""

    def __init__(self, store: Store, opts: RunOptions, moment: dt.datetime) -> None:
        self.store = store
        self.cfg: Consolidation = store.settings.consolidation
        self.opts = opts
        self.now = moment
        self.stamp = format_ts(moment)
        self.plan = Plan(new_run_id(moment), opts.trigger, self.stamp)
        self.problems: list[Problem] = []
        self.live: dict[str, Live] = {}
        self.state = opsfiles.read_state(store.root)
        self.had_run = "last_success" in self.state
        self.queued = review.known_pairs(store.root)
        self.decisions = decisions.load(store.root)  # SPEC 3.6: what undos reversed stays reversed
        self.flagged = [list(f.get("ids", [])) for f in self.state.get("flagged", [])]
        self.taken_names: set[str] = set()
        self._archive_listing: list[str] | None = None  # archive/'s names (_archive_names)
        self._archive_listed = False
        self._archive_checks = 0
        self._all_loaded: list[Live] = []
        self.grey: list[tuple[Live, Live, float, str | None]] = []  # (older, newer, score, guard)
        self.sigs: dict[str, SigCache] = {}  # per folder: cached and new signatures
        self.refresh: dict[str, list[str]] = {}  # session_end: folder -> files read or gone
        self.listings: dict[str, Stamp] = {}  # session_end: stamps to keep (Store._names_since)
        self.planned: dict[str, Ticket] = {}  # a real full run: entries of the files read, per folder
        self.pair_caches: dict[str, Any] = {}  # folder -> paircache.PairCache loaded (or None)
        self.pairs_found: dict[str, tuple[str, Any]] = {}  # folder -> (params, paircache.PairCache) found
        self._protection: dict[str, str | None] = {}
        self._lists: dict[str, list[Live]] = {}  # rule -> who it may pick, once merged (_shortlist)
        # the ids of on-save flagged pairs this run loaded (all a run needs of what it saw:
        # `plan.flagged_done`); not every id, which a full run of a large store would hold to
        # the end, one string per memory scattered over every folder's freed memory
        self._flagged_ids = frozenset(i for pair in self.flagged for i in pair)
        self.seen: set[str] = set()
        self._loaded = 0
        from memcli.recall import uses

        self.uses = uses.pending(store.root)  # rules 3.3/3.4 see pending uses too (SPEC 10)
        self.features: dict[str, Any] = {}  # content hash -> guards.TextFeatures, of one block
        self.vectors = self._semantic_cache()  # semantic.VectorCache when the signal is on
        self._meaning: dict[str, float] = {}  # member id -> cosine, for members merged by meaning
        self.protected_counts: dict[str, int] = {}  # reason -> memories of the scope it protects

    def _semantic_cache(self) -> Any:
        if not self.cfg.semantic:
            return None
        from memcli.consolidate import semantic

        if not semantic.available():
            self.plan.notes.append(semantic.NOT_INSTALLED)
            return None
        return semantic.VectorCache(self.store.root)

    def _with_uses(self, mem: Memory) -> Memory:
        """The memory as the rules see it: pending uses added to its facts (not its file)."""
        if not self.uses:
            return mem
        from memcli.recall import uses

        return uses.with_pending(mem, self.uses)

    def _folder_sigs(self, folder: Folder) -> SigCache:
        if folder.rel not in self.sigs:
            self.sigs[folder.rel] = load_sigs(folder.cache())
        return self.sigs[folder.rel]

    def _park_caches(self, folder: Folder) -> None:
        """A full run is done with `folder`: its signature and pair caches leave memory now,
        saved first by a real run, so that a run's memory stays flat however many folders
        the store has (they were all held until the run ended: 514 MB at 183,000 memories).
        Saved before the run applies (a cache: should the run stop, it costs nothing), the
        signatures kept are those of the memories the run saw in the folder or wrote there,
        and every one it computed (a promotion from another folder may land here)."""
        sigs = self.sigs.pop(folder.rel, None)
        found = self.pairs_found.pop(folder.rel, None)
        self.pair_caches.pop(folder.rel, None)
        if not self.opts.warm_caches:
            return
        hashes = {i.mem.content_hash for i in self._all_loaded if i.folder.rel == folder.rel}
        hashes |= {i.mem.content_hash for i in self.live.values() if i.folder.rel == folder.rel}
        if sigs is not None:
            hashes |= sigs.added.keys()
        from memcli.store import caches

        caches.park_folder(self.store, folder, sigs, found, hashes)

    def _progress(self, stage: str, done: int, total: int) -> None:
        if self.opts.progress is not None:
            self.opts.progress(stage, done, total)

    # ------------------------------------------------------------ helpers

    def protected(self, item: Live) -> str | None:
        """Why the memory is protected (computed once; a rewrite computes it again)."""
        mem_id = item.mem.id
        if mem_id not in self._protection:
            self._protection[mem_id] = rules.protection_reason(item.mem, self.now, self.cfg,
                                                               self.opts.consent)
        return self._protection[mem_id]

    def eligible(self, item: Live) -> bool:
        """Takes part in the rules at all, and is in this run's scope."""
        in_scope = item.changed or self.opts.trigger != "session_end"
        return in_scope and rules.takes_part(item.mem) and item.mem.id in self.live

    def rewrite(self, item: Live, data: dict[str, Any]) -> FileOp:
        """Plan a rewrite of a live memory in its own format; the simulated store follows."""
        raw = encode(data, item.mem.fmt)
        op = FileOp("write", item.rel, item.mem.content_hash, raw)  # the hash it has at this point
        item.mem = self._with_uses(Memory(data, item.mem.path, item.mem.fmt, sha256(raw)))
        self._protection.pop(item.mem.id, None)
        return op

    def archive_ops(self, item: Live, data: dict[str, Any] | None) -> list[FileOp]:
        """Plan the move of a memory into archive/ (whole, with the archive fields). `data`
        None (a bare dry run, see `archive_as`): the same ops without the record's bytes."""
        raw = None if data is None else encode(data, item.mem.fmt)
        dest = self._archive_name(item.mem.id, item.mem.fmt)
        ops = [FileOp("create", dest, None, raw), FileOp("remove", item.rel, item.mem.content_hash)]
        del self.live[item.mem.id]
        return ops

    def _archive_name(self, mem_id: str, fmt: str) -> str:
        name = f"{mem_id}.{fmt}"
        if name in self.taken_names or self._in_archive(name):
            name = f"{mem_id}@{self.plan.run_id}.{fmt}"
        self.taken_names.add(name)
        return f"archive/{name}"

    def _in_archive(self, name: str) -> bool:
        """Whether archive/`name` exists (a link to nothing does not). A run that archives
        many memories lists archive/ once, after `ARCHIVE_STATS` single checks, instead of a
        stat each (7,000 stale memories of a 20,000-memory store: a tenth of the rule's time);
        a name in the listing is checked as before, so the answer is the same either way.
        A few archived need no listing of an archive that may hold a million files."""
        self._archive_checks += 1
        names = self._archive_names() if self._archive_checks > ARCHIVE_STATS else self._archive_listing
        if names is not None:
            at = bisect.bisect_left(names, name)
            if at == len(names) or names[at] != name:
                return False
        # (a string path: a run may archive thousands, and a Path each cost more than the stat)
        return os.path.exists(f"{self.store.archive}/{name}")

    def _archive_names(self) -> list[str] | None:
        """archive/'s names, sorted, listed once a run (planning writes nothing there); []
        when there is no archive/ yet, None when it cannot be listed (then each name is
        looked up on its own)."""
        if not self._archive_listed:
            self._archive_listed = True
            try:
                self._archive_listing = sorted(os.listdir(self.store.archive))
            except OSError:
                self._archive_listing = None if os.path.lexists(self.store.archive) else []
        return self._archive_listing

    def add(self, action: Action) -> None:
        self.plan.actions.append(action)

    def archive_as(self, item: Live, reason: str, superseded_by: str | None = None) -> list[FileOp]:
        """`archive_ops` with its archive record, made only when the plan carries bytes
        (`RunOptions.records`): a bare dry run of a store with thousands of stale memories
        would otherwise read each of them for a record it never shows. The ops' kinds, paths
        and expected hashes are the same either way, and so is the run id made from them."""
        if not self.opts.records:
            return self.archive_ops(item, None)
        return self.archive_ops(item, self._archived(item, reason, superseded_by))

    def _archived(self, item: Live, reason: str, superseded_by: str | None = None) -> dict[str, Any]:
        return rules.archived_record(item.mem.data, reason=reason, folder=item.folder.rel,
                                     run_id=self.plan.run_id, stamp=self.stamp,
                                     superseded_by=superseded_by)
