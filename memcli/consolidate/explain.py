"""What a merge shows a person: the similarity of each archived memory to the one that stays,
for the log, and a line of each text for the report of a run.

A merge's log entry carries ``similarity`` (its weakest link: the lowest similarity of an
archived memory to the survivor), ``similarities`` (each archived id to its similarity) and,
where the semantic signal made a pair, ``semantic`` (each such id to its cosine). Its report
line (the action's ``why``) adds a line of the text kept and of each text archived.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from memcli.consolidate import rules
from memcli.consolidate.similar import content_similarity
from memcli.store.model import Memory

__all__ = ["excerpt", "merge_figures"]


class _Item(Protocol):
    """A memory as the planner holds it (engine.Live)."""

    @property
    def mem(self) -> Memory: ...


def merge_figures(survivor: _Item, archived: Sequence[_Item], keeper: _Item, scores: Mapping[str, float],
                  meaning: Mapping[str, float], scorer: str,
                  threshold: float = 0.80) -> tuple[dict[str, Any], str]:
    """(log fields, report lines) of a merge into ``survivor``. ``scores`` hold each group
    member's similarity to the group's ``keeper`` (who may be archived when a protected member
    survives); a similarity not known from them is computed."""
    sims: dict[str, float] = {}
    for item in archived:
        other = item if survivor is keeper else survivor if item is keeper else None
        known = scores.get(other.mem.id) if other is not None else None
        sims[item.mem.id] = round(known if known else content_similarity(
            survivor.mem.content, item.mem.content, scorer, threshold), 4)
    entry: dict[str, Any] = {"similarity": min(sims.values()), "similarities": sims}
    by_meaning = {i: meaning[i] for i in sims if i in meaning}
    if by_meaning:
        entry["semantic"] = by_meaning
    lines = [f"\n  keeps     {excerpt(survivor.mem.content)}"]
    for item in archived:
        how = f"{sims[item.mem.id]:.2f}" + (f", meaning {by_meaning[item.mem.id]:.2f}"
                                             if item.mem.id in by_meaning else "")
        lines.append(f"\n  archives  {excerpt(item.mem.content)}  (similarity {how})")
    return entry, "".join(lines)


def excerpt(content: dict[str, Any], limit: int = 90) -> str:
    """The first line of a memory's text, its runs of spaces made one, quoted and cut to
    ``limit`` characters."""
    text = rules.raw_text(content).strip()
    # The first line of the text's head, its words joined, starts the first line's (a word
    # cut at the head's end is a start of that word): it decides when it is longer than the
    # limit, or when the head holds a line break or the whole text. Else the whole text is
    # split: splitting a long text into lines and words cost more than the rest of a merge.
    head = text[: 4 * limit + 8]
    first = head.splitlines()[0] if head else ""
    line = " ".join(first.split())
    if len(line) <= limit and len(first) == len(head) < len(text):
        line = " ".join(text.splitlines()[0].split())
    return '"' + (line if len(line) <= limit else line[: limit - 1].rstrip() + "…") + '"'
