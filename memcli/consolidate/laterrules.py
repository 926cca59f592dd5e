"""Rules 3.2 to 3.4 after the merges: summarise verbose episodic memories, promote
procedural ones used often, archive stale ones."""

from __future__ import annotations

import bisect
from collections.abc import Callable

from memcli.consolidate import rules
from memcli.consolidate.merging import DuplicateMerging
from memcli.consolidate.plantypes import Live
from memcli.consolidate.summary import extractive_summary
from memcli.store.formats import encode
from memcli.store.model import Memory, new_memory_id
from memcli.store.plans import Action, FileOp


class LaterRules(DuplicateMerging):
    """Summarise, promote and archive, each over its own shortlist."""

    # ------------------------------------------------------------ 3.2 summarise

    def summarize_verbose(self) -> None:
        for item in self._candidates("summarize",
                                     lambda mem: rules.needs_summary(mem, self.now, self.cfg)):
            details = str(item.mem.content["details"])
            text, method = self._summarize(details)
            data = rules.summarized_record(item.mem.data, text, self.stamp)
            self.add(Action("summarize", {"type": "summarize", "memory_id": item.mem.id, "method": method},
                            f"{len(details)} -> {len(text)} characters ({method})", touches=[item.mem.id],
                            ops=[self.rewrite(item, data)],
                            folders=[item.folder.rel]))

    def _summarize(self, details: str) -> tuple[str, str]:
        limit = self.cfg.summary_max_chars
        if self.opts.summarizer is not None:
            return self.opts.summarizer(details, limit)
        return extractive_summary(details, limit), "extractive"

    def _shortlist(self) -> None:
        """After the merges, one pass over the memories for rules 3.2-3.4: who each rule may
        pick, by its own test (a rule only ever shrinks a later rule's list: a summary makes a
        memory no staler, and promotion only ever looks at procedural memories, summaries at
        episodic ones). Each rule tests its list again when its turn comes."""
        order = sorted(self.live.values(), key=lambda i: (i.folder.rel, i.mem.id))
        summarize: list[Live] = []
        promote: list[Live] = []
        archive: list[Live] = []
        self._lists = {"summarize": summarize, "promote": promote, "archive": archive}
        now, cfg, is_stale = self.now, self.cfg, self._is_stale  # (every memory of the store)
        # rule 3.4 inline for the usual memory (used, a canonical last_accessed): the cutoff
        # compared as a string, as `rules.is_stale` does; anything else asks `_is_stale`
        cutoff, days, used = rules.cutoff_stamp(now, cfg.stale_after_days), cfg.stale_after_days, \
            self.decisions.used_recently
        for item in order:
            mem = item.mem
            kind = mem.type
            if kind == "episodic" and rules.needs_summary(mem, now, cfg):
                summarize.append(item)
            elif kind == "procedural" and rules.promotion_target(mem, cfg) is not None:
                promote.append(item)
            facts = mem.facts
            count, value = facts.get("access_count"), facts.get("last_accessed")
            if (count and type(count) is int and cutoff is not None and type(value) is str
                    and len(value) == 20 and value[10] == "T" and value[19] == "Z"):
                if value < cutoff and not used(mem.id, now, days):
                    archive.append(item)
            elif is_stale(mem):
                archive.append(item)

    def _candidates(self, rule: str, wanted: Callable[[Memory], bool]) -> list[Live]:
        """Unprotected memories in scope that `wanted` picks, in a stable order (folder, id),
        from the rule's shortlist. The rule's own test comes first: it is cheaper than the
        protection test."""
        live = self.live
        return [i for i in self._lists[rule]
                if i.mem.id in live and wanted(i.mem) and self.eligible(i) and not self.protected(i)]

    # ------------------------------------------------------------ 3.3 promote

    def promote_patterns(self) -> None:
        for item in self._candidates("promote", lambda mem: rules.promotion_target(mem, self.cfg) is not None
                                     and not self.decisions.blocks_promotion(mem.id)):
            self._promote(item, str(rules.promotion_target(item.mem, self.cfg)))

    def _promote(self, item: Live, target: str) -> None:
        scope_id = self.store.settings.team_for(item.folder.scope_id) if target == "team" else "global"
        folder = self.store.folder(target, scope_id)
        new_id = self._new_id(f"{item.mem.id}>{target}")
        copy = rules.promoted_copy(item.mem.data, new_id=new_id, scope=target, scope_id=scope_id,
                                   stamp=self.stamp)
        raw = encode(copy, item.mem.fmt)
        dest = self.store.rel(folder.path / f"{new_id}.{item.mem.fmt}")
        ops = [FileOp("create", dest, None, raw),
               self.rewrite(item, {**item.mem.data, "promoted_to": new_id})]
        self.add(Action("promote", {"type": "promote", "memory_id": item.mem.id, "result_id": new_id,
                                    "to_scope": target},
                        f"used {item.mem.data.get('access_count')} times: copied to {folder.rel}",
                        touches=[item.mem.id], ops=ops,
                        folders=[item.folder.rel, folder.rel]))

    def _new_id(self, seed: str) -> str:
        """A new id that a dry run and the real run at the same moment agree on."""
        for attempt in range(100):
            candidate = new_memory_id(self.now, f"{seed}#{attempt}")
            if candidate not in self.live and not self._id_known(candidate):
                self.taken_names.add(candidate)
                return candidate
        return new_memory_id(self.now)

    def _id_known(self, mem_id: str) -> bool:
        """Taken by this run, or the start of a name in archive/ (as `archive.glob(id*)`
        finds, from archive/'s listing made once: a glob would list it again each time)."""
        if mem_id in self.taken_names:
            return True
        names = self._archive_names()
        if names is None:  # not listable: as before
            return any(self.store.archive.glob(f"{mem_id}*"))
        at = bisect.bisect_left(names, mem_id)
        return at < len(names) and names[at].startswith(mem_id)

    # ------------------------------------------------------------ 3.4 archive stale

    def archive_stale(self) -> None:
        for item in self._candidates("archive", self._is_stale):
            ops = self.archive_as(item, "stale")
            self.add(Action("archive", {"type": "archive", "memory_id": item.mem.id, "reason": "stale"},
                            _stale_why(item.mem),
                            touches=[item.mem.id], ops=ops, folders=[item.folder.rel, "archive"]))

    def _is_stale(self, mem: Memory) -> bool:
        """Rule 3.4, where a memory an undo brought back from `stale` counts as used then."""
        return rules.is_stale(mem, self.now, self.cfg) and not self.decisions.used_recently(
            mem.id, self.now, self.cfg.stale_after_days)


def _stale_why(mem: Memory) -> str:
    if int(mem.facts.get("access_count") or 0) == 0:
        return "never used"
    return f"last used {str(mem.facts.get('last_accessed') or mem.facts.get('updated_at'))[:10]}"
