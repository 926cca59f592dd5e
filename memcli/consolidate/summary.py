"""The extractive summary of rule 3.2: deterministic, offline, under four headings.

Sentences are sorted into the headings by cue words; each heading keeps its first sentences
in their original order until the whole summary would reach `max_chars`. The same input
always gives the same summary.
"""

from __future__ import annotations

import re

HEADINGS = ("What happened", "Who was involved", "Outcome", "Key learnings")
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(\[])|\n{2,}|\n(?=\s*[-*] )")
_CUES = {
    "Who was involved": re.compile(
        r"\b(with|by|paired|reviewer|reviewed|team|agent|user|@\w+|asked|helped|owner|on-call|"
        r"engineer|[A-Z][a-z]+ (?:and|paired|said|suggested|noticed|found))\b"),
    "Outcome": re.compile(
        r"\b(result|outcome|fixed|resolved|succeeded|success|failed|failure|shipped|deployed|"
        r"merged|completed|finished|works|passing|green|rolled back|closed|now)\b", re.I),
    "Key learnings": re.compile(
        r"\b(learn\w*|lesson\w*|next time|should|must|always|never|remember|important|avoid|"
        r"takeaway|note that|turns out|root cause|because)\b", re.I),
}


def sentences(text: str) -> list[str]:
    parts = (re.sub(r"\s+", " ", p).strip(" -*") for p in _SENTENCE.split(text))
    return [p for p in parts if len(p) > 2]


def classify(sentence: str) -> str:
    """The heading a sentence belongs to; learnings first, as they are the rarest and most useful."""
    for heading in ("Key learnings", "Outcome", "Who was involved"):
        if _CUES[heading].search(sentence):
            return heading
    return "What happened"


def extractive_summary(details: str, max_chars: int) -> str:
    """A summary shorter than `max_chars` under the four headings, from the text's own sentences."""
    buckets: dict[str, list[str]] = {h: [] for h in HEADINGS}
    unique = list(dict.fromkeys(sentences(details)))  # session logs repeat themselves
    for position, sentence in enumerate(unique):
        # The opening sentences say what the session was about, whatever their cue words.
        buckets["What happened" if position < 2 else classify(sentence)].append(sentence)
    chosen: dict[str, list[str]] = {h: [] for h in HEADINGS}
    budget = max_chars - 1 - sum(len(_heading(h)) for h in HEADINGS) - len("(not recorded)") * 4
    # Round-robin over headings so that every heading gets its most important (first) sentences.
    for rank in range(max(len(b) for b in buckets.values()) if details else 0):
        for heading in HEADINGS:
            if rank < len(buckets[heading]):
                sentence = _clip(buckets[heading][rank], 300)
                if len(sentence) + 3 <= budget:
                    chosen[heading].append(sentence)
                    budget -= len(sentence) + 3
    text = "".join(_heading(h) + (" ".join(chosen[h]) or "(not recorded)") + "\n" for h in HEADINGS)
    return text.strip()[: max_chars - 1]


def _heading(name: str) -> str:
    return f"\n## {name}\n"


def _clip(sentence: str, limit: int) -> str:
    return sentence if len(sentence) <= limit else sentence[: limit - 1].rstrip() + "…"
