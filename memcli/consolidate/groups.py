"""What happens to a group of duplicates (rule 3.1): the conflict cases that keep both,
the merge into the newest or into the protected one, and the LLM's decisions (SPEC 9)."""

from __future__ import annotations

from typing import Any

from memcli.consolidate import review, rules
from memcli.consolidate.explain import merge_figures
from memcli.consolidate.pairsearch import PairSearch
from memcli.consolidate.plantypes import Live
from memcli.store.plans import Action, FileOp


class MergeGroups(PairSearch):
    """Resolves a keeper and its older duplicates into actions."""

    def _keep_apart(self, older: Live, newer: Live, guard: str, score: float) -> None:
        ids = [older.mem.id, newer.mem.id]
        item = None
        if review.pair_key(ids) not in self.queued:
            self.queued.add(review.pair_key(ids))
            item = self._review_item(ids, "possible_contradiction", score, guard=guard)
        self.add(Action("keep_separate", {"type": "keep_separate", "memory_ids": ids, "reason": guard},
                        f"alike ({score:.2f}) but the {guard} guard sees a disagreement: both kept, "
                        "queued for review", review=item))

    def _review_item(self, ids: list[str], reason: str, score: float, **extra: Any) -> dict[str, Any]:
        return {"memory_ids": ids, "reason": reason, "similarity": round(score, 4),
                "run_id": self.plan.run_id, "created_at": self.stamp, **extra}

    def _resolve_group(self, keeper: Live, members: list[tuple[Live, float]]) -> None:
        """Apply the conflict cases of 3.1 per keeper-member pair, then merge what is left."""
        eligible = [member for member, score in members if not self._conflict(member, keeper, score)]
        if eligible:
            self._merge_group(keeper, eligible, scores={m.mem.id: score for m, score in members})

    def _conflict(self, older: Live, newer: Live, score: float) -> bool:
        """The first two conflict cases of 3.1, which keep both memories whatever the
        similarity (or the LLM) says: different authors, or both edited since the last run."""
        ids = [older.mem.id, newer.mem.id]
        if self.decisions.keeps_apart(*ids):
            self.add(Action("keep_separate", {"type": "keep_separate", "memory_ids": ids,
                                              "reason": "undo_decision"},
                            "an undo reversed their merge: kept apart (memcli review list --all)"))
            return True
        if older.mem.created_by != newer.mem.created_by:
            self.add(Action("keep_separate", {"type": "keep_separate", "memory_ids": ids,
                                              "reason": "different_authors"},
                            "duplicates by different authors: both kept"))
            return True
        if self._both_changed(older, newer):
            self._flag_both_changed(ids, score)
            return True
        return False

    def _both_changed(self, a: Live, b: Live) -> bool:
        return (rules.edited_since_run(a.mem, a.run_hash, self.had_run)
                and rules.edited_since_run(b.mem, b.run_hash, self.had_run))

    def _flag_both_changed(self, ids: list[str], score: float) -> None:
        item = None
        if review.pair_key(ids) not in self.queued:
            self.queued.add(review.pair_key(ids))
            item = self._review_item(ids, "both_changed", score)
        self.add(Action("flag", {"type": "flag", "memory_ids": ids, "reason": "both_changed"},
                        "duplicates both edited since the last run: queued for review", review=item))

    def _merge_group(self, keeper: Live, members: list[Live], summary: str | None = None,
                     scores: dict[str, float] | None = None) -> None:
        """Merge members into the keeper, or into the protected one of the group (3.1);
        ``scores`` are each member's similarity to the keeper (computed where missing)."""
        scores = scores or {}
        group = [keeper, *members]
        guarded = {i.mem.id: self.protected(i) for i in group}
        if guarded[keeper.mem.id]:
            survivor = keeper
        else:
            survivor = next((m for m in members if guarded[m.mem.id]), keeper)
        if survivor is not keeper or guarded[keeper.mem.id]:
            absorbed = [i for i in group if not guarded[i.mem.id]]
            if absorbed:
                self._merge_into_protected(survivor, absorbed, group, scores)
            return
        self._merge_plain(keeper, members, summary, scores)

    def _merge_plain(self, keeper: Live, members: list[Live], summary: str | None = None,
                     scores: dict[str, float] | None = None) -> None:
        similar, lines = merge_figures(keeper, members, keeper, scores or {}, self._meaning, self.cfg.scorer)
        data = rules.merge_into_keeper(keeper.mem.data, [m.mem.data for m in members], self.stamp)
        if summary:  # the LLM may word the merged summary (SPEC 9)
            data["content"] = {**data["content"], "summary": summary}
        ops = [self.rewrite(keeper, data)]
        for member in members:
            ops += self.archive_as(member, "merged", keeper.mem.id)
        ids = [m.mem.id for m in reversed(members)] + [keeper.mem.id]
        self.add(Action("merge", {"type": "merge", "source_ids": ids, "result_id": keeper.mem.id, **similar},
                        f"the newest keeps; {len(members)} older duplicate(s) archived" + lines,
                        touches=ids, ops=ops, folders=[keeper.folder.rel, "archive"]))

    def _merge_into_protected(self, survivor: Live, absorbed: list[Live], group: list[Live],
                              scores: dict[str, float]) -> None:
        ops: list[FileOp] = []
        for item in absorbed:
            ops += self.archive_as(item, "merged", survivor.mem.id)
        ids = [i.mem.id for i in reversed(absorbed)] + [survivor.mem.id]
        similar, lines = merge_figures(survivor, absorbed, group[0], scores, self._meaning, self.cfg.scorer)
        log = {"type": "merge", "source_ids": ids, "result_id": survivor.mem.id, **similar}
        self.add(Action("merge", log,
                        f"the protected one stays as it is; {len(absorbed)} restatement(s) archived" + lines,
                        touches=[i.mem.id for i in group], ops=ops,
                        folders=[survivor.folder.rel, "archive"]))

    def _both_live(self, a: Live, b: Live) -> bool:
        return a.mem.id in self.live and b.mem.id in self.live

    def _apply_decision(self, older: Live, newer: Live, score: float, decision: Any) -> None:
        """MERGE, REPLACE or UPDATE, within the conflict cases of 3.1 and protection."""
        if self._conflict(older, newer, score):
            return
        if decision.action == "MERGE":
            self._merge_group(newer, [older], summary=decision.merged_summary)
        elif decision.action == "REPLACE":
            self._replace(older, newer)
        else:
            self._update(older, newer, decision.merged_summary)

    def _replace(self, older: Live, newer: Live) -> None:
        """The older is archived as superseded by the newer, whose content stays as it is."""
        if self.protected(older):
            return
        ops = self.archive_as(older, "replaced", newer.mem.id)
        ids = [older.mem.id, newer.mem.id]
        self.add(Action("merge", {"type": "merge", "source_ids": ids, "result_id": newer.mem.id,
                                  "method": "llm_replace"},
                        "the LLM says the newer replaces the older: archived the older",
                        touches=ids, ops=ops, folders=[older.folder.rel, "archive"]))

    def _update(self, older: Live, newer: Live, summary: str | None) -> None:
        """The newer takes the older's missing facts; both stay live."""
        if self.protected(newer):
            return
        data = rules.merge_into_keeper(newer.mem.data, [older.mem.data], self.stamp)
        data.update(access_count=newer.mem.data.get("access_count", 0),
                    last_accessed=newer.mem.data.get("last_accessed"),
                    supersedes=newer.mem.data.get("supersedes", []))
        if summary:
            data["content"] = {**data["content"], "summary": summary}
        self.add(Action("update", {"type": "update", "memory_id": newer.mem.id, "source_ids": [older.mem.id],
                                   "method": "llm"},
                        f"the LLM enriched {newer.mem.id} with facts from {older.mem.id}; both kept",
                        touches=[newer.mem.id], ops=[self.rewrite(newer, data)], folders=[newer.folder.rel]))
