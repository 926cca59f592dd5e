"""Connects the optional LLM (SPEC 9) to a run. Without it the rule-based path stands.

The LLM may write the summaries of rule 3.2 and judge grey-zone pairs of rule 3.1 (content
similarity in [0.60, 0.80] with the tag rule met, and pairs a guard rejected). Whatever it
answers, protection and the conflict cases of 3.1 still bind (see `engine.Planner`).

It is reached through the Messages API (`ANTHROPIC_API_KEY`) or, when `[llm] command` is set,
through that program (`llm_command`); either way the same client interface, the same masking,
the run's budget (`max_calls_per_run`) and the day's (`max_calls_per_day`, `llm_budget`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memcli.consolidate import llm_budget
from memcli.consolidate.summary import extractive_summary
from memcli.store import opsfiles
from memcli.store.model import now
from memcli.store.store import Store

BUDGET_REASON = "budget_exhausted"  # llm.LLMClient's reason for a call past its budget


def wanted(store: Store, flag: bool | None) -> bool:
    """`--llm`/`--no-llm` for one run, else `[llm] enabled`."""
    return store.settings.llm.enabled if flag is None else flag


@dataclass
class LlmRun:
    """One run's LLM: its client (API or command), the day's budget, and what to tell the
    user once the run is planned."""

    client: Any
    root: Path
    per_day: int
    day: str
    day_capped: bool = False  # what is left of the day is less than the run's own budget
    day_hit: bool = False  # a call was refused for the day's budget
    _read: bool = False

    def ready(self) -> None:
        """Before each use: read what is left of the day (once, under the store lock in a
        real run) and cap the client's budget at it."""
        if self._read:
            return
        self._read = True
        left = llm_budget.remaining(opsfiles.read_state(self.root), self.day, self.per_day)
        if left < self.client.max_calls:
            self.client.max_calls = left
            self.day_capped = True

    def saw(self, reason: str | None) -> None:
        if reason == BUDGET_REASON and self.day_capped:
            self.day_hit = True

    def notes(self) -> list[str]:
        """At most one notice for the day's budget and one for a failing command."""
        out: list[str] = []
        if self.day_hit:
            out.append(_day_notice(self.per_day, "the rest of this run is rule-based"))
        failures = getattr(self.client, "failures", None)
        if failures:
            first = failures[0].detail
            if self.client.disabled_reason is not None:
                out.append(f"LLM command failed: {first}; the rest of this run is rule-based")
            else:
                out.append(f"LLM command failed {len(failures)} time(s) ({first}); those calls "
                           "fell back to the rule-based path")
        return out

    def state_update(self, store: Store) -> dict[str, Any]:
        """The day's count after this run, for `ops/state.json` (read under the lock)."""
        if not self.client.calls_made:
            return {}
        return llm_budget.spent_update(opsfiles.read_state(store.root), self.day, self.client.calls_made)


def _day_notice(per_day: int, rest: str) -> str:
    return (f"LLM daily budget reached ([llm] max_calls_per_day = {per_day}); {rest} "
            "(extractive summaries, grey-zone pairs skipped)")


def attach(store: Store, opts: Any, flag: bool | None) -> list[str]:
    """Give the run an LLM summariser and judge when enabled and reachable (a key, or
    `[llm] command`) and the day's budget is not spent; returns notices."""
    if not wanted(store, flag):
        return []
    from memcli.consolidate import llm
    from memcli.consolidate.llm_command import NESTED_ENV, CommandClient
    from memcli.secrets import Masker, mask_new

    cfg = store.settings.llm
    client: Any
    if cfg.command:
        from memcli.consolidate import llm_trust

        if not llm_trust.is_trusted(store.root, cfg.command):
            return [llm_trust.untrusted_notice(cfg.command)]
        if os.environ.get(NESTED_ENV):
            return [f"memcli runs inside its own LLM command ({NESTED_ENV} is set): this run is "
                    "rule-based, so that a session the command starts cannot start another"]
        client = CommandClient(argv=cfg.command, max_calls=cfg.max_calls_per_run,
                               timeout_s=cfg.timeout_s, cwd=store.root)
    else:
        client, notice = llm.client_from_env(enabled=True, model=cfg.model,
                                             max_calls=cfg.max_calls_per_run, timeout_s=cfg.timeout_s)
        if client is None:
            return [notice] if notice else []
    day = llm_budget.local_day(now())
    if llm_budget.remaining(opsfiles.read_state(store.root), day, cfg.max_calls_per_day) == 0:
        # spent already (other runs only ever add to it): no LLM at all, not a SKIP per pair
        return [_day_notice(cfg.max_calls_per_day, "this run is rule-based")]
    run = LlmRun(client, store.root, cfg.max_calls_per_day, day)
    masker = Masker()  # one per run: the same secret gets the same placeholder throughout

    def summarize(details: str, max_chars: int) -> tuple[str, str]:
        run.ready()
        text = client.summarize(details, max_chars, masker)
        if text is None:
            run.saw(client.last_error)
            return extractive_summary(details, max_chars), "extractive"
        return mask_new(text, details), "llm"  # the memory's own secrets come back, no others

    opts.summarizer = summarize
    opts.judge = run
    opts.masker = masker
    return []


def judge(judge: Any, masker: Any, pairs: list[tuple[str, str, str, float, str | None]]) -> list[Any]:
    """Ask the LLM about (pair_id, older text, newer text, similarity, guard) tuples.
    `judge` is the run's `LlmRun` (or a bare client)."""
    from memcli.consolidate.llm import PairCandidate
    from memcli.secrets import mask, mask_new

    candidates = [PairCandidate(pid, a, b, score, guard) for pid, a, b, score, guard in pairs]
    if not candidates:
        return []
    if not isinstance(judge, LlmRun):
        decisions = list(judge.judge_pairs(candidates, masker))
    else:
        judge.ready()
        decisions = list(judge.client.judge_pairs(candidates, masker))
        for decision in decisions:
            judge.saw(decision.reason if decision.action == "SKIP" else None)
    # No LLM output reaches the log or a memory unmasked (SPEC 9): the reason goes to the log,
    # masked whatever it echoes; a merged summary goes into a memory, with the pair's own
    # secrets restored and any other secret-shaped text the model produced masked.
    for candidate, decision in zip(candidates, decisions, strict=False):
        decision.reason = mask(decision.reason)
        if decision.merged_summary:
            source = candidate.text_a + "\n" + candidate.text_b
            decision.merged_summary = mask_new(decision.merged_summary, source)
    return decisions


def run_notes(judge: Any) -> list[str]:
    """What the run's LLM has to say once planning is done (budget reached, command failing)."""
    return judge.notes() if isinstance(judge, LlmRun) else []


def state_update(store: Store, judge: Any) -> dict[str, Any]:
    """State entries the run records on commit (the day's LLM calls)."""
    return judge.state_update(store) if isinstance(judge, LlmRun) else {}
