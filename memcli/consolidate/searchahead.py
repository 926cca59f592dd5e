"""Rule 3.1's pair search done before a folder's blocks are merged: shared out over the
cores once the folder is loaded (:mod:`memcli.consolidate.parallel`), or beside the run's helper
process (:mod:`memcli.consolidate.ahead`), a large block in pieces (:mod:`memcli.consolidate.pieces`).
What is found is exactly what searching each block as it is merged finds."""

from __future__ import annotations

import os
import time
from collections.abc import Collection
from itertools import chain
from operator import attrgetter
from typing import Any

from memcli.consolidate import ahead
from memcli.consolidate.groups import MergeGroups
from memcli.consolidate.plantypes import Live
from memcli.store.store import Folder

Verdicts = dict[tuple[int, int], tuple[str, str, "str | None"]]  # (keeper, older) -> their hashes, verdict
Found = tuple[dict[tuple[int, int], float], Verdicts, list[int]]  # pairs, verdicts, members gone bad


def block_work(block: list[Live], covered: Collection[str] = ()) -> float:
    """An estimate of a block's pair search, for sharing blocks out: the lengths of the texts
    to compare (from the index entries; a guess for a memory read from its file) and a cost
    per member; none for the members the folder's pair cache `covered` already compared
    (a block all of whose members it covers is not compared at all)."""
    from memcli.consolidate.parallel import PER_MEMBER

    total = 0
    for item in block:
        if item.mem.content_hash not in covered:
            length = item.mem.cached_text_len()
            total += (1000 if length is None else length) + PER_MEMBER
    return float(total)


class SearchAhead(MergeGroups):
    """Finds a folder's pairs and guard verdicts before its blocks are merged."""

    def _blocks(self) -> dict[tuple[str, str, str], list[Live]]:
        """The loaded memories that take part, by (folder, type, subtype)."""
        blocks: dict[tuple[str, str, str], list[Live]] = {}
        for item in self.live.values():  # (every memory of the store: `takes_part`, `subtype` inline)
            mem = item.mem
            facts = mem.facts
            if not facts.get("superseded_by") and "archived_at" not in facts:
                subtype = facts.get("subtype") or ""
                key = (item.folder.rel, mem.type, subtype if type(subtype) is str else str(subtype))
                found = blocks.get(key)
                if found is None:
                    blocks[key] = [item]
                else:
                    found.append(item)
        return blocks

    @staticmethod
    def _ordered(blocks: dict[tuple[str, str, str], list[Live]]) -> list[list[Live]]:
        """A full run's blocks in key order, each sorted newest first (in place)."""
        newest_first = attrgetter("key")
        for block in blocks.values():
            block.sort(key=newest_first, reverse=True)
        return [blocks[key] for key in sorted(blocks)]

    # ------------------------------------------------------------ pair search ahead, on every core

    def _search_ahead(self, blocks: list[list[Live]]) -> dict[int, Found]:
        """(A full run's folder.) The pairs and guard verdicts of the folder's blocks found
        before any is merged: with the run's helper when the folder is one of its
        (:meth:`_search_beside`), else shared out over the cores
        (:mod:`memcli.consolidate.parallel`) when the folder has work enough; {} (each block
        searched as it is merged) otherwise.
        Exact: a block's pairs and verdicts depend on its members' files alone, and the
        verdicts are used only while both memories are as they were found (:meth:`_known_guard`).
        A dry run only: a real run's pair search also fills the caches it leaves behind."""
        if self.opts.warm_caches or self.vectors is not None or self._shared:
            return {}
        helper = self._helper
        k = helper.position.get(blocks[0][0].folder.rel) if helper is not None and blocks else None
        if helper is not None and k is not None:
            return self._search_beside(helper, k, blocks)
        if len(blocks) < 2:
            return {}
        from memcli.consolidate import parallel

        count = parallel.jobs()
        if count < 2:
            return {}
        cache = self._pair_cache_of(blocks[0][0].folder)  # (loaded before a fork: workers read it)
        covered = cache.covered if cache is not None else frozenset()
        costs = [block_work(block, covered) for block in blocks]
        if not any(costs) or sum(costs) < parallel.MIN_WORK or not parallel.may_fork():
            return {}
        self._folder_sigs(blocks[0][0].folder)
        split = parallel.shares(costs, min(count, len(blocks)))
        parent = os.getpid()

        def search(share: list[int]) -> dict[int, Found]:
            found: dict[int, Found] = {}
            for n in share:
                found[n] = self._search_block(blocks[n])
                if os.getpid() != parent:  # a worker: the records it read serve no one now
                    for item in blocks[n]:
                        item.mem.forget()
            return found

        return parallel.run_shares(search, split)

    # ------------------------------------------------------------ folders searched beside a helper

    _helper: ahead.Helper | None = None  # the run's helper (Planner._start_helper), if any
    _next_rel: str | None = None  # the folder planned after this one
    _twins: dict[str, list[str]] = {}  # ids in two folders (Store.duplicate_ids), for the helper's loads
    _in_helper = False  # (this process is the helper)
    _shared = False  # (the run's folders are shared out between two processes: `sharedplan`)

    def _helper_go(self, rel: str | None) -> None:
        """Let the helper start folder `rel` (when it is one of its): the planner has searched
        the folder before it, so the helper's work runs beside the planner's, not against it."""
        helper = self._helper
        if helper is not None and rel is not None and rel in helper.position:
            helper.go(helper.position[rel])

    def _ahead_body(self, folders: list[Folder], auto: list[bool], names: dict[str, list[str] | None],
                    channel: ahead.Channel) -> None:
        """(In the helper.) Each of `folders` in turn (folder k once the planner lets it start,
        unless `auto[k]`: it follows the one before in the run), loaded as the planner loads
        it, its jobs (:meth:`_jobs`) searched costliest first, each unless the planner claimed
        it first."""
        self._in_helper = True
        for k, folder in enumerate(folders):
            if not auto[k] and not channel.wait_go(k):
                return
            blind = self._load_ahead(folder, self._twins, names.get(folder.rel))
            blocks = self._ordered(self._blocks())
            jobs = self._jobs(blocks)
            costs = self._job_costs(blocks, jobs)
            channel.send(("layout", k, ahead.layout(blocks), blind, jobs, costs))
            for n in sorted(range(len(jobs)), key=lambda n: (-costs[n], n)):
                if channel.claimed(k, n):
                    continue
                channel.send(("start", k, n))
                found = self._search_job(blocks, jobs[n])
                channel.send(("found", k, n, found))
            channel.send(("done", k))
            # the folder let go, as the planner lets it go (its caches too: none is saved here)
            self._close_files()
            self.live, self._all_loaded, self.features = {}, [], {}
            self.sigs.pop(folder.rel, None)
            self.pair_caches.pop(folder.rel, None)

    def _jobs(self, blocks: list[list[Live]]) -> list[tuple[int, list[int] | None]]:
        """A folder's search as jobs the planner and its helper share: (block, the members of
        one of its pieces, or None: the whole block); a large block in pieces that are searched
        apart exactly (:mod:`memcli.consolidate.pieces`)."""
        from memcli.consolidate import pieces

        jobs: list[tuple[int, list[int] | None]] = []
        for n, block in enumerate(blocks):
            large = len(block) >= 2 * pieces.LEAST
            split = pieces.split(self._tag_filter(block), len(block)) if large else None
            jobs += [(n, None)] if split is None else [(n, piece) for piece in split]
        return jobs

    def _job_costs(self, blocks: list[list[Live]], jobs: list[tuple[int, list[int] | None]]) -> list[float]:
        cache = self._pair_cache_of(blocks[0][0].folder) if blocks else None
        covered = cache.covered if cache is not None else frozenset()
        return [block_work(blocks[n] if members is None else [blocks[n][i] for i in members], covered)
                for n, members in jobs]

    def _search_job(self, blocks: list[list[Live]], job: tuple[int, list[int] | None]) -> Found:
        """A job's pairs, verdicts and members gone bad, by their positions in its block; the
        records it read let go (the helper's: they serve no one now)."""
        n, members = job
        block = blocks[n] if members is None else [blocks[n][i] for i in members]
        pairs, verdicts, bad = self._search_block(block)
        if self._in_helper:
            for item in block:
                item.mem.forget()
        if members is None:
            return pairs, verdicts, bad
        return ({(members[i], members[j]): score for (i, j), score in pairs.items()},
                {(members[i], members[j]): verdict for (i, j), verdict in verdicts.items()},
                [members[i] for i in bad])

    def _search_beside(self, helper: ahead.Helper, k: int, blocks: list[list[Live]]) -> dict[int, Found]:
        """The pairs and verdicts of the helper's folder `k`: the planner takes its jobs
        (:meth:`_jobs`) cheapest first, skipping those the helper has begun (it goes costliest
        first), then takes the helper's findings, provided its folder came out the same
        (`Helper.agrees`) and its jobs are the planner's, and searches whatever is still
        missing. Exact whatever the helper did or did not do. The jobs are the helper's when its
        folder is already known to be the same (it made them from the same blocks: the planner
        need not make them again), else the planner's own."""
        from memcli.consolidate import parallel

        mine = ahead.layout(blocks)
        helper.poll()
        theirs = helper.jobs.get(k) if helper.agrees(k, mine, self._read_files) else None
        if theirs is not None and _cover(blocks, *theirs):  # the helper's: the same folder, the same jobs
            jobs, costs = theirs
        else:
            jobs = self._jobs(blocks)
            costs = self._job_costs(blocks, jobs)
        known: list[bool] = []  # (once the helper's layout is in: whether its findings serve)

        def agreed() -> bool | None:
            """Whether the helper's folder and jobs are the planner's (None: not known yet)."""
            if not known:
                agrees = helper.agrees(k, mine, self._read_files)
                if agrees is None:
                    return None
                known.append(agrees and helper.jobs.get(k) == (jobs, costs))
            return known[0]

        found: dict[int, Found] = {}
        began = time.monotonic()
        for n in sorted(range(len(jobs)), key=lambda n: (costs[n], n)):
            helper.poll()
            if agreed() is not False and (
                    n in helper.found.get(k, {}) or (n in helper.started.get(k, ()) and not helper.over(k))):
                continue
            helper.claim(k, n)
            found[n] = self._search_job(blocks, jobs[n])
        missing = set(range(len(jobs))) - found.keys()
        if missing:
            waited = max(parallel.WAIT_MIN_S, parallel.WAIT_FACTOR * (time.monotonic() - began))
            helper.wait(k, missing, time.monotonic() + waited)
            if agreed():
                for n, theirs_found in helper.found.get(k, {}).items():
                    found.setdefault(n, theirs_found)
            for n in sorted(missing - found.keys()):
                found[n] = self._search_job(blocks, jobs[n])
        helper.forget(k)
        by_block: dict[int, Found] = {}
        for n, (block_at, _) in enumerate(jobs):  # (a block's pieces, in order)
            pairs, verdicts, bad = found[n]
            if block_at not in by_block:
                by_block[block_at] = ({}, {}, [])
            into = by_block[block_at]
            into[0].update(pairs)
            into[1].update(verdicts)
            into[2].extend(bad)
        for _, _, bad in by_block.values():
            bad.sort()
        return by_block

    def _search_block(self, block: list[Live]) -> Found:
        """A block's pairs, verdicts and members gone bad (`DuplicateMerging`)."""
        raise NotImplementedError


def _cover(blocks: list[list[Live]], jobs: Any, costs: Any) -> bool:
    """Whether `jobs` (with their `costs`), as the helper sent them, are jobs of `blocks` as
    `SearchAhead._jobs` makes them: block after block, each whole or cut into pieces that hold
    each of its members once. (What the helper sent is used only when its folder came out as
    the planner's, and the same code then makes the same jobs; this spares the planner an
    error should a helper send something else.)"""
    if type(jobs) is not list or type(costs) is not list or len(jobs) != len(costs) \
            or not all([type(c) is float for c in costs]):
        return False
    parts: dict[int, list[Any]] = {}
    last = -1
    for job in jobs:
        if type(job) is not tuple or len(job) != 2 or type(job[0]) is not int \
                or not last <= job[0] < len(blocks):
            return False
        last = job[0]
        parts.setdefault(last, []).append(job[1])
    if len(parts) != len(blocks):  # (each block's jobs together, in block order: all there)
        return False
    for n, cut in parts.items():
        if cut == [None]:
            continue
        if not all([type(piece) is list and all([type(i) is int for i in piece]) for piece in cut]):
            return False
        if sorted(chain.from_iterable(cut)) != list(range(len(blocks[n]))):
            return False
    return True
