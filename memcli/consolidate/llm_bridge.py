"""Connects the optional LLM (SPEC 9) to a run. Without it the rule-based path stands.

The LLM may write the summaries of rule 3.2 and judge grey-zone pairs of rule 3.1 (content
similarity in [0.60, 0.80] with the tag rule met, and pairs a guard rejected). Whatever it
answers, protection and the conflict cases of 3.1 still bind (see `engine.Planner`).
"""

from __future__ import annotations

from typing import Any

from memcli.consolidate.summary import extractive_summary
from memcli.store.store import Store


def wanted(store: Store, flag: bool | None) -> bool:
    """`--llm`/`--no-llm` for one run, else `[llm] enabled`."""
    return store.settings.llm.enabled if flag is None else flag


def attach(store: Store, opts: Any, flag: bool | None) -> list[str]:
    """Give the run an LLM summariser and judge when enabled and a key is set; returns notices."""
    if not wanted(store, flag):
        return []
    from memcli.consolidate import llm
    from memcli.secrets import Masker, mask_new

    cfg = store.settings.llm
    client, notice = llm.client_from_env(enabled=True, model=cfg.model, max_calls=cfg.max_calls_per_run,
                                         timeout_s=cfg.timeout_s)
    if client is None:
        return [notice] if notice else []
    masker = Masker()  # one per run: the same secret gets the same placeholder throughout

    def summarize(details: str, max_chars: int) -> tuple[str, str]:
        text = client.summarize(details, max_chars, masker)
        if text is None:
            return extractive_summary(details, max_chars), "extractive"
        return mask_new(text, details), "llm"  # the memory's own secrets come back, no others

    opts.summarizer = summarize
    opts.judge = client
    opts.masker = masker
    return []


def judge(client: Any, masker: Any, pairs: list[tuple[str, str, str, float, str | None]]) -> list[Any]:
    """Ask the LLM about (pair_id, older text, newer text, similarity, guard) tuples."""
    from memcli.consolidate.llm import PairCandidate
    from memcli.secrets import mask, mask_new

    candidates = [PairCandidate(pid, a, b, score, guard) for pid, a, b, score, guard in pairs]
    decisions = client.judge_pairs(candidates, masker) if candidates else []
    # No LLM output reaches the log or a memory unmasked (SPEC 9): the reason goes to the log,
    # masked whatever it echoes; a merged summary goes into a memory, with the pair's own
    # secrets restored and any other secret-shaped text the model produced masked.
    for candidate, decision in zip(candidates, decisions, strict=False):
        decision.reason = mask(decision.reason)
        if decision.merged_summary:
            source = candidate.text_a + "\n" + candidate.text_b
            decision.merged_summary = mask_new(decision.merged_summary, source)
    return decisions
