"""Rule 3.1 over the loaded memories: blocks, keepers and their older duplicates, the
guards, and the grey-zone pairs that go to the LLM."""

from __future__ import annotations

from operator import attrgetter

from memcli.consolidate import rules
from memcli.consolidate.pairsearch import BlockTexts
from memcli.consolidate.plantypes import DISCOVERY_FLOOR, Live
from memcli.consolidate.searchahead import Found, SearchAhead, Verdicts
from memcli.consolidate.similar import second_look, similar_pairs
from memcli.store.model import VANISHED
from memcli.store.plans import Action


class DuplicateMerging(SearchAhead):
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
            self._helper_go(self._next_rel)  # (the helper may start the next folder: this one is searched)
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
