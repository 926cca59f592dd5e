"""Which pairs of a block are similar enough to look at: the scoring behind rule 3.1.

Small blocks are scored all-pairs in C (rapidfuzz `cdist`). Large blocks first find
candidate pairs (exact normalised-text hash plus MinHash/LSH, see `candidates`) and score only
those, so a 100,000-memory store is not compared quadratically.
"""

from __future__ import annotations

from rapidfuzz import process

from memcli.rules import scorer_fn

# Above this many texts in one block, candidates come from LSH: all-pairs scoring costs about
# 7 us a pair on memory-sized texts, so 40 texts (780 pairs) is about the break-even point.
ALL_PAIRS_MAX = 40


def similar_pairs(texts: list[str], scorer: str, threshold: float, *,
                  focus: list[int] | None = None, floor: float | None = None,
                  sigs: list[bytes] | None = None) -> dict[tuple[int, int], float]:
    """{(i, j): similarity} for i < j with similarity > threshold (or >= floor when given, for
    the LLM's discovery band). With `focus`, only pairs involving those indices."""
    cutoff = (floor if floor is not None else threshold) * 100
    if len(texts) < 2:
        return {}
    if len(texts) <= ALL_PAIRS_MAX:
        return _all_pairs(texts, scorer, cutoff, threshold if floor is None else None, focus)
    return _candidate_pairs(texts, scorer, cutoff, threshold if floor is None else None, focus, sigs)


def _keep(score: float, cutoff: float, strict: float | None) -> bool:
    return score / 100 > strict if strict is not None else score >= cutoff


def _all_pairs(texts: list[str], scorer: str, cutoff: float, strict: float | None,
               focus: list[int] | None) -> dict[tuple[int, int], float]:
    rows = focus if focus is not None else list(range(len(texts)))
    if not rows:
        return {}
    matrix = process.cdist([texts[i] for i in rows], texts, scorer=scorer_fn(scorer),
                           processor=None, score_cutoff=cutoff)
    found: dict[tuple[int, int], float] = {}
    for r, i in enumerate(rows):
        for j in matrix[r].nonzero()[0]:
            j = int(j)
            if i != j and _keep(float(matrix[r][j]), cutoff, strict):
                found[(min(i, j), max(i, j))] = float(matrix[r][j]) / 100
    return found


def _candidate_pairs(texts: list[str], scorer: str, cutoff: float, strict: float | None,
                     focus: list[int] | None, sigs: list[bytes] | None) -> dict[tuple[int, int], float]:
    from memcli import candidates

    sigs = sigs if sigs is not None else [candidates.signature(t) for t in texts]
    keys = [candidates.exact_key(t) for t in texts]
    if focus is not None:
        pairs = candidates.candidate_pairs_for(focus, sigs, keys)
    else:
        pairs = candidates.candidate_pairs(sigs, keys)
    fn = scorer_fn(scorer)
    found: dict[tuple[int, int], float] = {}
    for i, j in pairs:
        score = fn(texts[i], texts[j], processor=None, score_cutoff=cutoff)
        if score and _keep(score, cutoff, strict):
            found[(min(i, j), max(i, j))] = score / 100
    return found
