"""Rule 3.1 over the loaded memories: blocks, keepers and their older duplicates, the
guards, and the grey-zone pairs that go to the LLM."""

from __future__ import annotations

import os
import time
from collections.abc import Collection
from operator import attrgetter

from memcli.consolidate import ahead, rules
from memcli.consolidate.groups import MergeGroups
from memcli.consolidate.pairsearch import BlockTexts
from memcli.consolidate.plantypes import DISCOVERY_FLOOR, Live
from memcli.consolidate.similar import second_look, similar_pairs
from memcli.store.model import VANISHED, Action
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


class DuplicateMerging(MergeGroups):
    """Merges duplicates block by block."""

    _verdicts: Verdicts = {}  # the block being merged: guard verdicts found ahead

    # ------------------------------------------------------------ 3.1 merge duplicates

    def merge_duplicates(self) -> None:
        """Rule 3.1 over every (folder, type, subtype) block of the loaded memories."""
        blocks = self._blocks()
        keys = sorted(blocks)
        if self.opts.trigger != "session_end":
            ordered = self._ordered(blocks)
            ahead = self._search_ahead(ordered)
            self._helper_go(self._next_rel)  # the next folder's helper: this folder's search is done
        for position, key in enumerate(keys):
            self._progress("comparing", position, len(blocks))
            block = blocks[key]
            if self.opts.trigger == "session_end":
                if not any(i.changed for i in block):
                    continue
                self._merge_block(sorted(block, key=attrgetter("key"), reverse=True))
            else:
                self._merge_block(block, ahead.pop(position, None))
        if self.opts.judge is not None:
            self._judge_grey()

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

    def _merge_block(self, block: list[Live], ahead: Found | None = None) -> None:
        """Rule 3.1 over one block (sorted newest first). `ahead`: its pairs and guard verdicts,
        found beforehand (:meth:`_search_ahead`, perhaps by a worker process)."""
        texts = BlockTexts(block)
        focus = [n for n, i in enumerate(block) if i.changed] if self.opts.trigger == "session_end" else None
        self._verdicts = {}
        if ahead is not None:
            pairs, self._verdicts = self._adopt(block, ahead)
        elif focus is None:
            pairs = self._searched(block, texts)
        else:
            floor = DISCOVERY_FLOOR if self.opts.judge is not None else None
            sigs, lengths = self._large_block(block, texts)
            pairs = similar_pairs(texts, self.cfg.scorer, self.cfg.content_similarity, focus=focus,
                                  floor=floor, sigs=sigs, lengths=lengths, near=self._near())
            self._second_look(block, texts, pairs, floor)
        semantic = self._semantic_pairs(block, texts, pairs, focus)
        older: dict[int, list[int]] = {}  # keeper index -> older indices it resembles, newest first
        for i, j in sorted(pairs.keys() | semantic.keys()):
            older.setdefault(i, []).append(j)
        assigned: set[int] = set()
        for k in sorted(older):  # a keeper: the newest of its group, unless taken by a newer one
            if k in assigned:
                continue
            assigned.add(k)
            members = self._members(block, k, older[k], pairs, assigned, semantic, texts)
            if members:
                self._resolve_group(block[k], members)
        if self.opts.judge is not None:
            self._collect_grey(block, pairs)
        # The guards' text features serve this block's pairs only (a memory is in one block):
        # let them go now, not with the folder. A folder of 56,000 memories in four blocks
        # held those of all four at once (about 100 MB), with its records still loaded.
        self.features.clear()

    # ------------------------------------------------------------ pair search ahead, on every core

    def _search_ahead(self, blocks: list[list[Live]]) -> dict[int, Found]:
        """(A full run's folder.) The pairs and guard verdicts of the folder's blocks found
        before any is merged, shared out over the cores (:mod:`memcli.consolidate.parallel`)
        when the folder has work enough; {} (each block searched as it is merged) otherwise.
        Exact: a block's pairs and verdicts depend on its members' files alone, and the
        verdicts are used only while both memories are as they were found (:meth:`_known_guard`).
        A dry run only: a real run's pair search also fills the caches it leaves behind."""
        if self.opts.warm_caches or self.vectors is not None:
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
            self._load_folder(folder, self._twins, names.get(folder.rel))
            blocks = self._ordered(self._blocks())
            channel.send(("layout", k, ahead.layout(blocks)))
            jobs = self._jobs(blocks)
            costs = self._job_costs(blocks, jobs)
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
        first), then takes the helper's findings, provided its folder came out the same, and
        searches whatever is still missing. Exact whatever the helper did or did not do."""
        from memcli.consolidate import parallel

        jobs = self._jobs(blocks)
        costs = self._job_costs(blocks, jobs)
        mine = ahead.layout(blocks)
        found: dict[int, Found] = {}
        began = time.monotonic()
        for n in sorted(range(len(jobs)), key=lambda n: (costs[n], n)):
            helper.poll()
            if helper.layouts.get(k, mine) == mine and (
                    n in helper.found.get(k, {}) or (n in helper.started.get(k, ()) and not helper.over(k))):
                continue
            helper.claim(k, n)
            found[n] = self._search_job(blocks, jobs[n])
        missing = set(range(len(jobs))) - found.keys()
        if missing:
            waited = max(parallel.WAIT_MIN_S, parallel.WAIT_FACTOR * (time.monotonic() - began))
            helper.wait(k, missing, time.monotonic() + waited)
            if helper.layouts.get(k) == mine:
                for n, theirs in helper.found.get(k, {}).items():
                    found.setdefault(n, theirs)
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
        """A block's similar pairs (as :meth:`_searched`), the guards' verdicts on every pair
        the duplicate rule would then guard (a few more than it may: a member taken by a newer
        keeper is not guarded again), and the members whose files went bad when read."""
        texts = BlockTexts(block)
        pairs = self._searched(block, texts)
        verdicts: dict[tuple[int, int], tuple[str, str, str | None]] = {}
        if self.cfg.guards:
            for (k, m), score in sorted(pairs.items()):
                keeper, older = block[k], block[m]
                if rules.is_duplicate_pair(keeper.mem, older.mem, self._text_score(block, texts, k, m, score),
                                           self.cfg):
                    verdicts[(k, m)] = (keeper.mem.content_hash, older.mem.content_hash,
                                        self._guard(older, keeper))
        self.features.clear()
        return pairs, verdicts, [n for n, item in enumerate(block) if item.mem.content_hash == VANISHED]

    def _searched(self, block: list[Live], texts: BlockTexts) -> dict[tuple[int, int], float]:
        """A full run's similar pairs of a block, second looks taken."""
        floor = DISCOVERY_FLOOR if self.opts.judge is not None else None
        pairs = self._block_pairs(block, texts, floor)
        self._second_look(block, texts, pairs, floor)
        return pairs

    def _second_look(self, block: list[Live], texts: BlockTexts, pairs: dict[tuple[int, int], float],
                     floor: float | None) -> None:
        second_look(texts, pairs, self.cfg.scorer, self.cfg.content_similarity, floor,
                    plain=lambda n: self._features(block[n]).plain, keep_above=self._learned_floor())

    def _adopt(self, block: list[Live], found: Found) -> tuple[dict[tuple[int, int], float], Verdicts]:
        """A block's pairs and verdicts found ahead. A member whose file a worker found bad is
        read here too, so that it is planned as gone, as a serial run plans it."""
        pairs, verdicts, went_bad = found
        for n in went_bad:
            block[n].mem.content  # noqa: B018 (read: the memory settles as its file is now)
        return pairs, verdicts

    def _known_guard(self, older: Live, keeper: Live, k: int, m: int) -> str | None:
        """The guards' verdict on a pair: found ahead while both memories are as they were then,
        else found now."""
        known = self._verdicts.get((k, m))
        if known is not None and known[0] == keeper.mem.content_hash and known[1] == older.mem.content_hash:
            return known[2]
        return self._guard(older, keeper)

    def _members(self, block: list[Live], k: int, candidates: list[int], pairs: dict[tuple[int, int], float],
                 assigned: set[int], semantic: dict[tuple[int, int], float],
                 texts: BlockTexts) -> list[tuple[Live, float]]:
        """Older unassigned duplicates of keeper k: similar text (:meth:`_text_score`), or (with
        the semantic signal) similar meaning; guard-rejected pairs are kept apart."""
        keeper = block[k]
        members: list[tuple[Live, float]] = []
        for m in candidates:
            score = pairs.get((k, m), 0.0)
            meaning = (k, m) in semantic and score <= self.cfg.content_similarity
            # by meaning: the tag, type and link tests remain
            rule_score = 1.0 if meaning else self._text_score(block, texts, k, m, score)
            if m in assigned or not rules.is_duplicate_pair(keeper.mem, block[m].mem, rule_score, self.cfg):
                continue
            if meaning and (k, m) not in pairs:
                score = pairs[(k, m)] = rules.similarity(
                    rules.content_text(keeper.mem.content), rules.content_text(block[m].mem.content),
                    self.cfg.scorer)
            guard = self._known_guard(block[m], keeper, k, m) if self.cfg.guards else None
            if guard:
                self._keep_apart(block[m], keeper, guard, score)
                if self.opts.judge is not None:
                    self.grey.append((block[m], keeper, score, guard))
                continue
            assigned.add(m)
            if meaning:
                self._meaning[block[m].mem.id] = semantic[(k, m)]
            members.append((block[m], score))
        return members

    def _learned_floor(self) -> float | None:
        """The similarity above which the learned rule may find a pair similar; None (SPEC
        3.1's plain ``similarity > content_similarity``) unless ``learned_rule`` is set and the
        configured scorer is the one its weights were fitted for."""
        if not self.cfg.learned_rule:
            return None
        from memcli.consolidate import learned

        if not learned.applies(self.cfg.scorer):
            return None
        return self.cfg.content_similarity - learned.FLOOR_GAP

    def _text_score(self, block: list[Live], texts: BlockTexts, k: int, m: int, score: float) -> float:
        """The score the duplicate rule compares with ``content_similarity``: with
        ``learned_rule`` on (and the scorer its weights fit), 1.0 or 0.0 as
        :func:`memcli.consolidate.learned.similar_enough` decides; else the similarity itself."""
        floor = self._learned_floor()
        if floor is None:
            return score
        if score <= floor:
            return 0.0
        from memcli.consolidate import learned

        similar = learned.similar_pair(score, texts[k], texts[m], self._features(block[k]),
                                       self._features(block[m]), self.cfg.content_similarity)
        return 1.0 if similar else 0.0

    # ------------------------------------------------------------ SPEC 9: grey-zone pairs

    def _collect_grey(self, block: list[Live], pairs: dict[tuple[int, int], float]) -> None:
        """Pairs in the discovery band [0.60, 0.80] that meet the tag rule, for the LLM."""
        for (i, j), score in sorted(pairs.items()):
            newer, older = block[i], block[j]  # the block is sorted newest first
            if score > self.cfg.content_similarity or not self._both_live(older, newer):
                continue
            if rules.is_duplicate_pair(older.mem, newer.mem, 1.0, self.cfg):  # tags, type, links
                self.grey.append((older, newer, score, None))

    def _judge_grey(self) -> None:
        pairs = [(f"{o.mem.id}|{n.mem.id}", rules.raw_text(o.mem.content), rules.raw_text(n.mem.content),
                  score, guard) for o, n, score, guard in self.grey]
        from memcli.consolidate import llm_bridge

        decisions = llm_bridge.judge(self.opts.judge, self.opts.masker, pairs)
        grey, self.grey = self.grey, []  # judged once: the next folder starts afresh
        for (older, newer, score, _guard), decision in zip(grey, decisions, strict=True):
            ids = [older.mem.id, newer.mem.id]
            self.add(Action("judge", {"type": "judge", "memory_ids": ids, "decision": decision.action,
                                      "reason": decision.reason, "similarity": round(score, 4)},
                            f"LLM: {decision.action} ({score:.2f}): {decision.reason}"))
            if self._both_live(older, newer) and decision.action in ("MERGE", "REPLACE", "UPDATE"):
                self._apply_decision(older, newer, score, decision)
