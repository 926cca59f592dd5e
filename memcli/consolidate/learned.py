"""The "similar" test of rule 3.1, refined by a small learned rule over cheap pair signals.

Opt-in (``consolidation.learned_rule = true``): by default the engine keeps SPEC 3.1's
contract, ``similarity > content_similarity``, which this rule does not (it merges some pairs
at 0.77-0.80, exactly 0.80 included, and keeps apart some above 0.80).

The rule's similarity (``token_sort_ratio`` on the normalised texts, with the second look)
sorts the words first, so it cannot see that one text is the other with a phrase added, or
the same words put to another use. Four more signals of the same two normalised texts can:

- ``ratio``: the plain edit-distance ratio, which keeps word order;
- ``partial``: ``partial_ratio``, the best match of the shorter text inside the longer one (high
  when one text is the other plus something: a detail added), on the first
  :data:`PARTIAL_CHARS` characters of each;
- ``length_ratio``: the shorter text's word count over the longer one's;
- ``jaccard``: the overlap of the two texts' content words (first four letters of each).

:func:`adjusted_similarity` is the rule's similarity plus a weighted sum of these
(:data:`WEIGHTS`, :data:`OFFSET`): a logistic regression fitted on the MRPC train split and
memcli's own memory pairs (``bench/fit_merge_rule.py``, which reproduces the table), scaled
so that its unit is the similarity's. :func:`similar_enough` is the decision: the adjusted
similarity above the configured ``content_similarity`` and the similarity itself above
``content_similarity`` - :data:`FLOOR_GAP`. The guards keep their veto; this only decides
which pairs count as similar.

What a configured threshold means: the same number, compared with the adjusted similarity.
At the default 0.80 the rule merges on MRPC train about as many paraphrases as
``similarity > 0.80`` (837 of 2,485 with the rounded offset below, against 838) with fewer
different pairs; a higher threshold is stricter, a lower one
looser, in the same unit. The weights were fitted for ``token_sort_ratio``: with another
scorer the plain ``similarity > threshold`` decides (:func:`applies`).
"""

from __future__ import annotations

from typing import NamedTuple

from rapidfuzz import fuzz

from memcli.consolidate.textfeatures import STEM_LETTERS, TextFeatures

__all__ = [
    "FLOOR_GAP",
    "OFFSET",
    "PARTIAL_CHARS",
    "SCORER",
    "WEIGHTS",
    "PairSignals",
    "adjusted_similarity",
    "applies",
    "pair_signals",
    "similar_enough",
    "similar_pair",
]

# The scorer the weights were fitted for.
SCORER = "token_sort_ratio"
# Weights of the signals, in units of the similarity (its own weight is 1), and the offset:
# fitted by bench/fit_merge_rule.py (L2-regularised logistic regression, lambda 1, on the
# guard-surviving pairs scoring 0.70 or more of MRPC train and bench/pairs.jsonl; the offset
# puts the default threshold 0.80 at the train split's recall of the plain rule, 838 of 2,485).
WEIGHTS: dict[str, float] = {
    "ratio": 0.6297,
    "partial": -0.4928,
    "length_ratio": 0.1547,
    "jaccard": 0.1432,
}
OFFSET = -0.3091
# A pair whose similarity is this far below the threshold, or farther, never counts as
# similar, whatever the other signals say: below it, the rule would merge different pairs of
# the memory set whose words differ by one contrary prefix ("synchronous" / "asynchronous").
FLOOR_GAP = 0.03


# ``partial_ratio`` reads at most this many characters of each text. Its cost grows fast with
# length (about 50 us a pair at 128 characters, 0.4 ms at 256, 3.5 ms at 600, 48 ms at 2,200,
# measured on memories of bench/generate.py), and every text it was fitted on is shorter
# (MRPC train: at most 224 normalised characters; the memory pairs: 245), so the cap changes
# no fitted figure; on a longer memory it compares the beginnings (the summary, mostly).
PARTIAL_CHARS = 256


class PairSignals(NamedTuple):
    """The signals of a pair beside its similarity, each 0..1."""

    ratio: float
    partial: float
    length_ratio: float
    jaccard: float


def applies(scorer: str) -> bool:
    """True when the learned weights hold for this scorer (they were fitted for one)."""
    return scorer == SCORER


def _content_stems(text: TextFeatures) -> frozenset[str]:
    return frozenset([word[:STEM_LETTERS] for word in text.content])


def pair_signals(left: str, right: str, text_a: TextFeatures, text_b: TextFeatures) -> PairSignals:
    """The signals of two texts: ``left`` and ``right`` normalised as the similarity rule does
    (:func:`memcli.consolidate.rules.content_text`), ``text_a`` and ``text_b`` their raw
    texts' features (the content-word stems are kept in them, so a text compared with many
    others is analysed once)."""
    return _cheap_signals(left, right, text_a, text_b)._replace(partial=_partial(left, right))


def similar_pair(similarity: float, left: str, right: str, text_a: TextFeatures, text_b: TextFeatures,
                 threshold: float) -> bool:
    """``similar_enough(similarity, pair_signals(left, right, text_a, text_b), threshold)``,
    with ``partial`` (the costly signal: about 0.4 ms a pair of long texts) worked out only
    when the others leave the decision open.

    ``partial`` lies in [0, 1] and its weight is negative, so the adjusted similarity with
    ``partial`` = 1 is a lower bound and with ``partial`` = 0 an upper bound (floating-point
    products and sums keep that order): a lower bound above the threshold decides yes, an
    upper bound at or below it decides no, exactly as the full signals would.
    """
    if similarity <= threshold - FLOOR_GAP:
        return False
    cheap = _cheap_signals(left, right, text_a, text_b)
    if similarity >= 1.0 and cheap.ratio >= 1.0:
        return threshold < 1.0
    if adjusted_similarity(similarity, cheap._replace(partial=1.0)) > threshold:
        return True
    if adjusted_similarity(similarity, cheap._replace(partial=0.0)) <= threshold:
        return False
    return similar_enough(similarity, cheap._replace(partial=_partial(left, right)), threshold)


def _partial(left: str, right: str) -> float:
    return fuzz.partial_ratio(left[:PARTIAL_CHARS], right[:PARTIAL_CHARS], processor=None) / 100.0


def _cheap_signals(left: str, right: str, text_a: TextFeatures, text_b: TextFeatures) -> PairSignals:
    """:func:`pair_signals` but ``partial``, left at 0."""
    stems_a = text_a.once("content_stems", _content_stems)
    stems_b = text_b.once("content_stems", _content_stems)
    union = len(stems_a | stems_b)
    words_a, words_b = len(text_a.words), len(text_b.words)
    longer = max(words_a, words_b, 1)
    return PairSignals(
        ratio=fuzz.ratio(left, right, processor=None) / 100.0,
        partial=0.0,
        length_ratio=min(words_a, words_b) / longer,
        jaccard=len(stems_a & stems_b) / union if union else 0.0,
    )


def adjusted_similarity(similarity: float, signals: PairSignals) -> float:
    """The similarity corrected by the other signals (:data:`WEIGHTS`, :data:`OFFSET`), in
    the similarity's unit: what the configured threshold is compared with."""
    return (similarity + OFFSET
            + WEIGHTS["ratio"] * signals.ratio
            + WEIGHTS["partial"] * signals.partial
            + WEIGHTS["length_ratio"] * signals.length_ratio
            + WEIGHTS["jaccard"] * signals.jaccard)


def similar_enough(similarity: float, signals: PairSignals, threshold: float) -> bool:
    """Rule 3.1's "content similarity above the threshold", refined: the adjusted similarity
    (:func:`adjusted_similarity`) above ``threshold``, and the similarity itself above
    ``threshold`` - :data:`FLOOR_GAP`.

    Two texts that are equal count as similar at any threshold below 1. The guards are asked
    after this, and still veto.
    """
    if similarity >= 1.0 and signals.ratio >= 1.0:
        return threshold < 1.0
    return similarity > threshold - FLOOR_GAP and adjusted_similarity(similarity, signals) > threshold
