"""Which pairs of a block are similar enough to look at: the scoring behind rule 3.1.

Small blocks are scored all-pairs, each pair once (rapidfuzz, on texts prepared once each).
Large blocks first find candidate pairs (exact normalised-text hash plus MinHash/LSH, see
`candidates`) and score only those, so a 100,000-memory store is not compared quadratically.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from rapidfuzz import fuzz

from memcli.consolidate.rules import (
    SECOND_LOOK_BAND,
    content_text,
    raw_text,
    scorer_fn,
    similarity,
    tag_overlap,
)

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

# Above this many texts in one block, candidates come from LSH: all-pairs scoring costs about
# 5 us a pair on memory-sized texts (prepared once), a signature cost about 100 us a text when
# this was set, so for a block of 40 (20 pairs a text) the two cost about the same. (Signing
# now costs about 30 us a memory-sized text, its tokens unsorted, see `_SIGN_US`; the bound is
# left where it was: all pairs is exact, LSH finds nearly every pair.)
ALL_PAIRS_MAX = 40


def similar_pairs(texts: Sequence[str], scorer: str, threshold: float, *,
                  focus: list[int] | None = None, floor: float | None = None,
                  sigs: list[bytes] | None = None, lengths: Sequence[int] | None = None,
                  near: float | None = None, allowed: PairFilter | None = None,
                  sign: Callable[[list[int]], list[bytes]] | None = None) -> dict[tuple[int, int], float]:
    """{(i, j): similarity} for i < j with similarity > threshold (or >= floor when given, for
    the LLM's discovery band; or >= near, for the engine's second look at pairs just below
    the threshold: the candidates stay those of the threshold). With `focus`, only pairs
    involving those indices. With `sigs` (and the texts' `lengths`), a text is looked at only
    when one of its candidate pairs passes the signature filter: `texts` may make them on
    demand. With `allowed`, only the pairs it allows: exactly the pairs found without it that
    it allows, and a text none of them needs is never looked at (nor its signature, nor its
    length: for a large block those of the other texts may be left empty). With `allowed` and
    `sign` instead of `sigs` (the signatures of the texts at the given positions), a large block
    signs only the texts it must (see `_allowed_lazy`)."""
    cutoff = (floor if floor is not None else threshold) * 100
    strict = threshold if floor is None else None
    near_cut = near * 100 if near is not None and strict is not None and near < threshold else None
    if near_cut is not None:
        cutoff = near_cut
    if len(texts) < 2:
        return {}
    if len(texts) <= ALL_PAIRS_MAX:
        return _all_pairs(texts, scorer, cutoff, strict, focus, near_cut, allowed)
    if allowed is not None and sigs is None and sign is not None:
        return _allowed_lazy(texts, scorer, cutoff, strict, focus, sign, lengths, near_cut, allowed)
    if allowed is not None:
        return _allowed_candidates(texts, scorer, cutoff, strict, focus, sigs, lengths, near_cut, allowed)
    return _candidate_pairs(texts, scorer, cutoff, strict, focus, sigs, lengths, near_cut)


def _keep(score: float, cutoff: float, strict: float | None, near_cut: float | None = None) -> bool:
    if strict is None:
        return score >= cutoff
    return score / 100 > strict or (near_cut is not None and score >= near_cut)


def sorted_tokens(norm_text: str) -> str:
    """The string ``token_sort_ratio`` compares: the text's tokens sorted, joined by spaces.
    (Here, beside the scorer, not with the signatures: a block scored pair by pair needs no
    numpy.)"""
    return " ".join(sorted(norm_text.split()))


def prepared(scorer: str) -> tuple[Any, Callable[[str], str]]:
    """The scorer as a pair of (function, per-text preparation) giving the same scores:
    ``token_sort_ratio`` sorts both texts' tokens on every call, so a text compared with many
    others is sorted once here and the pairs are scored with plain ``ratio`` on the sorted
    strings (equal results on normalised texts, tested; four times less work a pair)."""
    if scorer == "token_sort_ratio":
        return fuzz.ratio, sorted_tokens
    return scorer_fn(scorer), _same


def _same(text: str) -> str:
    return text


def sorted_text(texts: Sequence[str], n: int) -> str:
    """Text ``n``'s sorted-token string (:func:`sorted_tokens`): the texts' own when
    they keep them (``sorted_at``, as a block's texts do: the scorer then sorts each text once
    whatever the pairs it is in), else made now."""
    keeps = getattr(texts, "sorted_at", None)
    if keeps is not None:
        return str(keeps(n))
    return sorted_tokens(texts[n])


class _Prepared:
    """Prepared texts of a block, each made once and only when a pair needs it; and their
    lengths, known without making them where the texts know them (`known`)."""

    def __init__(self, texts: Sequence[str], prepare: Callable[[str], str]) -> None:
        self.texts, self.prepare = texts, prepare
        keeps = getattr(texts, "sorted_at", None)  # (the texts keep them: see `sorted_text`)
        self.make: Callable[[int], str] = (keeps if prepare is sorted_tokens and keeps is not None
                                           else lambda n: prepare(texts[n]))
        self.made: dict[int, str] = {}
        self.sizes: dict[int, int] = {}
        # a block's texts know the sorted-token strings' lengths from the index (`sorted_len`)
        told = getattr(texts, "sorted_len", None) if prepare is sorted_tokens else None
        self.told: Callable[[int], int | None] | None = told

    def __getitem__(self, n: int) -> str:
        found = self.made.get(n)
        if found is None:
            found = self.made[n] = self.make(n)
        return found

    def known(self, n: int) -> int | None:
        """Prepared text ``n``'s length when known without reading its file, else None."""
        found = self.sizes.get(n)
        if found is None:
            made = self.made.get(n)
            found = len(made) if made is not None else self.told(n) if self.told is not None else None
            if found is not None:
                self.sizes[n] = found
        return found

    def length(self, n: int) -> int:
        """Prepared text ``n``'s length: known, or the text made now."""
        found = self.sizes.get(n)
        if found is None:
            found = self.known(n)
            if found is None:
                found = self.sizes[n] = len(self[n])
        return found


def _may_reach(fn: Any, first: int, second: int, cutoff: float) -> bool:
    """False when ``fn`` cannot score ``cutoff`` on two prepared texts of these lengths:
    ``ratio`` is 100 * (1 - indel distance / total length), and the distance is at least the
    difference of the lengths. rapidfuzz's own cutoff does not give up that early on long
    texts (a pair of 2,300 and 700 characters took 120 us at cutoff 70). The margin keeps the
    test exact whatever the floating-point rounding; other scorers are always scored."""
    return fn is not fuzz.ratio or 100 * abs(first - second) <= (100.0 - cutoff + 1e-6) * (first + second)


def _scored(fn: Any, ready: _Prepared, pairs: Iterable[tuple[int, int]], cutoff: float,
            strict: float | None, near_cut: float | None,
            reachable: bool = False) -> Iterator[tuple[tuple[int, int], float]]:
    """((i, j), score out of 100) for each pair that scores what the rule keeps (`reachable`:
    the pairs are known to pass `_may_reach`). A pair's lengths are tested before its texts
    are made: a text whose length the index knows is read only for a pair it may be in."""
    length = ready.length
    test = not reachable and fn is fuzz.ratio
    for i, j in pairs:
        if test and not _may_reach(fn, length(i), length(j), cutoff):
            continue
        score = fn(ready[i], ready[j], processor=None, score_cutoff=cutoff)
        if score and _keep(score, cutoff, strict, near_cut):
            yield (i, j), score


def _all_pairs(texts: Sequence[str], scorer: str, cutoff: float, strict: float | None,
               focus: list[int] | None, near_cut: float | None = None,
               allowed: PairFilter | None = None) -> dict[tuple[int, int], float]:
    """Every pair of a small block (with ``focus``, every pair involving one of those; with
    ``allowed``, every pair it allows), each scored once. The scorer's own cutoff gives up
    early on a pair whose lengths alone keep it below the cutoff."""
    rows = focus if focus is not None else list(range(len(texts)))
    if not rows:
        return {}
    fn, prepare = prepared(scorer)
    ready = _Prepared(texts, prepare)
    in_rows = set(rows) if focus is not None else None
    found: dict[tuple[int, int], float] = {}
    for i in rows:
        others = range(len(texts)) if allowed is None else allowed.partners(i)
        pairs = ((i, j) for j in others
                 if j != i and (j > i or (in_rows is not None and j not in in_rows)))
        # (each pair once: (i, j) with j < i was scored from row j)
        for (a, b), score in _scored(fn, ready, pairs, cutoff, strict, near_cut):
            found[(min(a, b), max(a, b))] = score / 100
    return found


def _candidate_pairs(texts: Sequence[str], scorer: str, cutoff: float, strict: float | None,
                     focus: list[int] | None, sigs: list[bytes] | None,
                     lengths: Sequence[int] | None,
                     near_cut: float | None = None) -> dict[tuple[int, int], float]:
    import numpy as np  # numpy only for large blocks: `memcli add` and small stores never load it

    from memcli.consolidate import candidates

    sigs = sigs if sigs is not None else candidates.signatures(list(texts))
    # Equal texts have equal signatures, which share every band: LSH finds them without the
    # exact-text keys, which would need every text.
    if focus is not None:
        near = np.array(sorted(candidates.candidate_pairs_for(focus, sigs, None)), dtype=np.int64)
        near = near.reshape(-1, 2)
    else:
        near = candidates.candidate_pair_array(sigs)
    lengths = lengths if lengths is not None else [len(t) for t in texts]
    # The discovery band of the LLM wants the weaker pairs too: no agreement filter there.
    pairs = _likely(near, sigs, lengths) if strict is not None else [(i, j) for i, j in near.tolist()]
    fn, prepare = prepared(scorer)
    ready = _Prepared(texts, prepare)
    return {(min(i, j), max(i, j)): score / 100
            for (i, j), score in _scored(fn, ready, pairs, cutoff, strict, near_cut)}


def _allowed_candidates(texts: Sequence[str], scorer: str, cutoff: float, strict: float | None,
                        focus: list[int] | None, sigs: list[bytes] | None, lengths: Sequence[int] | None,
                        near_cut: float | None, allowed: PairFilter) -> dict[tuple[int, int], float]:
    """`_candidate_pairs` over the texts that have a partner `allowed`, then only the pairs it
    allows. The same pairs as over the whole block, filtered: whether two texts are LSH
    candidates, and whether their signatures agree enough, depends on those two alone."""
    members = allowed.members()
    if len(members) < 2:
        return {}
    where = {n: k for k, n in enumerate(members)}
    sub_focus = None if focus is None else [where[n] for n in focus if n in where]
    if sub_focus == []:
        return {}
    sub_texts = Subset(texts, members)
    sub_sigs = None if sigs is None else [sigs[n] for n in members]
    sub_lengths = None if lengths is None else [lengths[n] for n in members]
    found = _candidate_pairs(sub_texts, scorer, cutoff, strict, sub_focus, sub_sigs, sub_lengths, near_cut)
    out: dict[tuple[int, int], float] = {}
    for (a, b), score in found.items():
        i, j = members[a], members[b]  # members are in order: a < b gives i < j
        if allowed.allows(i, j):
            out[(i, j)] = score
    return out


# What finding a large block's pairs costs (CPU, memory-like texts), measured on the texts of
# bench/run.py's stores, 1,200-3,000 at a time: hashing a signature about 14 us plus 0.007 us a
# character (30 us for 2,200 characters, 17 us for 400; the signature hashes the text as it is,
# its tokens unsorted; 20 us plus 0.005 before its work arrays were reused and its empty bins
# filled by flat positions, 2026-11-23, see candidates._densify); sorting a
# text's tokens for the scorer (`prepared`) about 1 us plus 0.034 us a character (76 us for
# 2,200 characters); scoring a pair of sorted texts about 1 us plus 3.5e-5 us per product of
# the two lengths (rapidfuzz's bit-parallel LCS: 8 us for two texts of 400 characters, 176 us
# for two of 2,200).
_SIGN_US = 14.0
_SIGN_US_PER_CHAR = 0.007
_SORT_US = 1.0
_SORT_US_PER_CHAR = 0.034
_PAIR_US = 1.0
_PAIR_US_PER_CHARS = 3.5e-5


def _allowed_lazy(texts: Sequence[str], scorer: str, cutoff: float, strict: float | None,
                  focus: list[int] | None, sign: Callable[[list[int]], list[bytes]],
                  lengths: Sequence[int] | None, near_cut: float | None,
                  allowed: PairFilter) -> dict[tuple[int, int], float]:
    """The pairs `_allowed_candidates` finds, found the cheaper way for this block, signing
    only the texts it must. Of the pairs the tags allow, the rule keeps those that score above
    the cutoff (which their lengths may rule out, `_may_reach`), share an LSH band and (but in
    the discovery band) whose signatures agree enough (both depend on the two signatures
    alone, see `_candidate_pairs`): three tests of a pair, in either order. When scoring the
    pairs costs less than signing their texts (a block of many small tag groups, short texts),
    each is scored and only the texts of the pairs that pass are signed; else their texts are
    signed and only the pairs that share a band and agree are scored, and only their texts'
    tokens sorted. The costs are estimated from `lengths` (the normalised texts' lengths, as
    the index keeps them: the sorted-token strings the scorer compares are no longer)."""
    members = allowed.members()
    if len(members) < 2:
        return {}
    fn, prepare = prepared(scorer)
    ready = _Prepared(texts, prepare)
    pairs = sorted(_allowed_pairs(focus if focus is not None else members, focus is not None, allowed))
    unknown = fn is fuzz.ratio
    if pairs and unknown:
        pairs, unknown = _reachable_known(pairs, ready, cutoff)
    if not pairs:
        return {}
    ends = sorted({n for pair in pairs for n in pair})
    size = {n: len(texts[n]) if lengths is None else lengths[n] for n in ends}
    if _scoring_first(fn, cutoff, pairs, ends, size):
        # every text is sorted anyway: their lengths first, then only the pairs they let reach
        # the cutoff (`_may_reach`, written out: a call a pair costs as much as the test)
        if unknown:
            exact = {n: ready.length(n) for n in ends}
            slack = 100.0 - cutoff + 1e-6
            pairs = [(i, j) for i, j in pairs
                     if 100 * abs(exact[i] - exact[j]) <= slack * (exact[i] + exact[j])]
        passed = list(_scored(fn, ready, pairs, cutoff, strict, near_cut, reachable=True))
        if not passed:
            return {}
        needed = sorted({n for pair, _ in passed for n in pair})
        keep = _banded(needed, [pair for pair, _ in passed], strict, sign, size)
        return {pair: score / 100 for (pair, score), kept in zip(passed, keep.tolist(), strict=True) if kept}
    keep = _banded(ends, pairs, strict, sign, size)
    likely = [pair for pair, kept in zip(pairs, keep.tolist(), strict=True) if kept]
    return {pair: score / 100 for pair, score in _scored(fn, ready, likely, cutoff, strict, near_cut)}


def _reachable_known(pairs: list[tuple[int, int]], ready: _Prepared,
                     cutoff: float) -> tuple[list[tuple[int, int]], bool]:
    """The pairs (scored by ``ratio`` on prepared texts) that may reach the cutoff
    (`_may_reach`, written out) as far as the lengths known without reading (`_Prepared.known`)
    tell: a pair is dropped only when both its lengths are known. Also whether some length was
    unknown (its pairs not yet tested). Dropping them before any text is read or signed
    changes no result: every pair scored is tested so anyway, and a text none of the others
    needs is then never read."""
    ends = {n for pair in pairs for n in pair}
    known = {n: ready.known(n) for n in ends}
    slack = 100.0 - cutoff + 1e-6
    if None not in known.values():
        size: dict[int, int] = known  # type: ignore[assignment]
        return [(i, j) for i, j in pairs
                if 100 * abs(size[i] - size[j]) <= slack * (size[i] + size[j])], False
    kept = [(i, j) for i, j in pairs
            if (a := known[i]) is None or (b := known[j]) is None or 100 * abs(a - b) <= slack * (a + b)]
    return kept, True


def _scoring_first(fn: Any, cutoff: float, pairs: list[tuple[int, int]], ends: list[int],
                   size: dict[int, int]) -> bool:
    """Whether scoring `pairs` (whose texts are `ends`, of about these lengths) costs less than
    signing their texts: scoring pays for sorting each text's tokens and for each pair whose
    lengths (estimated: `size`) let it reach the cutoff (`_may_reach`, written out: a call a
    pair costs as much as the test)."""
    signing = sum(_SIGN_US + _SIGN_US_PER_CHAR * size[n] for n in ends)
    scoring = sum(_SORT_US + _SORT_US_PER_CHAR * size[n] for n in ends)
    if scoring >= signing:
        return False
    slack = 100.0 - cutoff + 1e-6 if fn is fuzz.ratio else None
    for i, j in pairs:
        first, second = size[i], size[j]
        if slack is None or 100 * abs(first - second) <= slack * (first + second):
            scoring += _PAIR_US + _PAIR_US_PER_CHARS * first * second
            if scoring >= signing:
                return False
    return True


def _banded(texts_at: list[int], pairs: list[tuple[int, int]], strict: float | None,
            sign: Callable[[list[int]], list[bytes]], size: dict[int, int]) -> npt.NDArray[np.bool_]:
    """For each pair (of positions among `texts_at`), whether its texts share an LSH band and,
    in the rule's band (`strict`), are worth scoring (`_worth_scoring`: signatures that agree
    enough, or a short text, by its normalised length in `size`): what makes it an LSH
    candidate in `_candidate_pairs`."""
    import numpy as np

    from memcli.consolidate.candidates import banded_together, signature_matrix

    where = {n: k for k, n in enumerate(texts_at)}
    sigs = sign(texts_at)
    at = np.array([(where[i], where[j]) for i, j in pairs], dtype=np.int64).reshape(-1, 2)
    keep = banded_together(sigs, at)
    if strict is not None:  # as `_candidate_pairs`: the discovery band takes every candidate
        norm = np.array([size[n] for n in texts_at])
        keep &= _worth_scoring(signature_matrix(sigs), at, norm)
    return keep


def _allowed_pairs(rows: Sequence[int], focused: bool, allowed: PairFilter) -> Iterator[tuple[int, int]]:
    """(i, j), i < j, each once: every pair `allowed` allows with i or j in `rows` (`focused`),
    or among the members `rows` (not focused: they are all of them)."""
    in_rows = set(rows)
    for i in rows:
        for j in allowed.partners(i):
            if j == i or (j < i and j in in_rows):
                continue  # each pair once: (j, i) is made from row j
            if focused or j in in_rows:
                yield (i, j) if i < j else (j, i)


class Subset(Sequence[str]):
    """Some texts of a block, by their positions, each still made only when asked for."""

    def __init__(self, texts: Sequence[str], members: list[int]) -> None:
        self.texts, self.members = texts, members

    def __len__(self) -> int:
        return len(self.members)

    def __getitem__(self, n: int) -> str:  # type: ignore[override]
        return self.texts[self.members[n]]

    def sorted_at(self, n: int) -> str:
        """Text ``n``'s sorted-token string, kept by the whole block's texts when they keep them."""
        return sorted_text(self.texts, self.members[n])

    def sorted_len(self, n: int) -> int | None:
        """Its length when the whole block's texts know it without reading (else None)."""
        told = getattr(self.texts, "sorted_len", None)
        return None if told is None else told(self.members[n])  # type: ignore[no-any-return]


class PairFilter:
    """The pairs of a block that the rest of the duplicate rule could let through, known
    before any text is read: rule 3.1 asks for a tag overlap above ``tag_overlap`` whatever
    the texts' similarity, so a pair below it is never a duplicate, nor a grey-zone pair for
    the LLM (which asks the same of the tags). Members are labelled by their tag set; a pair
    passes when its labels may (equal sets, or distinct sets whose overlap is high enough)."""

    def __init__(self, labels: list[int], same: bool, linked: set[tuple[int, int]]) -> None:
        self.labels, self.same, self.linked = labels, same, linked
        by_label: dict[int, list[int]] = {}
        for n, label in enumerate(labels):
            by_label.setdefault(label, []).append(n)
        self._by_label = by_label
        self._near: dict[int, list[int]] = {}
        for a, b in linked:
            self._near.setdefault(a, []).append(b)
            self._near.setdefault(b, []).append(a)
        self._partners: dict[int, list[int]] = {}  # by label: members of one label share theirs

    def allows(self, i: int, j: int) -> bool:
        a, b = self.labels[i], self.labels[j]
        if a == b:
            return self.same
        return (a, b) in self.linked if a < b else (b, a) in self.linked

    def partners(self, i: int) -> list[int]:
        """The positions j (any, including i itself) that (i, j) may pair with, in order (a
        list shared by the members of i's tag set: not to be changed)."""
        label = self.labels[i]
        found = self._partners.get(label)
        if found is None:
            found = list(self._by_label[label]) if self.same else []
            for other in self._near.get(label, ()):
                found += self._by_label[other]
            found = self._partners[label] = sorted(found)
        return found

    def members(self) -> list[int]:
        """The positions with at least one allowed partner, in order."""
        counts = Counter(self.labels)
        joined = {label for pair in self.linked for label in pair}
        return [n for n, label in enumerate(self.labels)
                if (self.same and counts[label] > 1) or label in joined]


# Beyond this many distinct tag sets that could each pass the overlap with another distinct
# set, their pairs are not enumerated (a quadratic Python loop): no filter then.
_MAX_OPEN_SETS = 1000


def tag_filter(tags: Sequence[Sequence[str]], threshold: float) -> PairFilter | None:
    """The :class:`PairFilter` of a block whose members have these tags, for the rule's
    ``tag_overlap > threshold`` (:func:`rules.tag_overlap`); None when it would cost more to
    build than it spares."""
    sets: dict[frozenset[str], int] = {}
    labels = [sets.setdefault(frozenset(t), len(sets)) for t in tags]
    distinct = list(sets)
    # Two distinct sets overlap by at most m / (m + 1), m the smaller one's size (the smaller
    # within the larger plus one more tag). Computed in floating point like the rule's own
    # overlap, the bound stays a bound (division rounds monotonically).
    open_sets = [label for label, found in enumerate(distinct) if len(found) / (len(found) + 1) > threshold]
    if len(open_sets) > _MAX_OPEN_SETS:
        return None
    linked: set[tuple[int, int]] = set()
    for k, a in enumerate(open_sets):
        for b in open_sets[k + 1:]:
            if tag_overlap(distinct[a], distinct[b]) > threshold:
                linked.add((a, b))
    return PairFilter(labels, tag_overlap((), ()) > threshold, linked)


# Candidates whose signatures agree on fewer than this share of values are not scored: on
# planted near-duplicates (tests/consolidate/test_candidates.py, 2,000 texts, two seeds) the
# true pairs (similarity > 0.80) agree on 0.51 or more, while about 95% of the false
# candidates agree on less (with the shingles of sorted-token strings before 2026-11-23: 0.43
# or more, and 97%). Kept at 0.30, it also lets through every candidate that scores 0.70-0.80
# (3,000 texts), which the second look may still take. Short texts have noisy estimates and
# are cheap to score, so they are always scored.
MIN_AGREEMENT = 0.30
SHORT_TEXT = 100


def _likely(pairs: npt.NDArray[np.int64], sigs: list[bytes],
            text_lengths: Sequence[int]) -> list[tuple[int, int]]:
    """The candidate pairs (sorted (m, 2) array) worth scoring."""
    import numpy as np

    from memcli.consolidate.candidates import signature_matrix

    if not len(pairs):
        return []
    matrix = signature_matrix(sigs)
    lengths = np.array(text_lengths)
    kept: list[tuple[int, int]] = []
    # In chunks: the agreement of m pairs is an (m, 192) array, and long texts that share a
    # vocabulary make millions of candidates (a whole block at once peaked at 300 MB).
    for start in range(0, len(pairs), _PAIRS_PER_CHUNK):
        chunk = pairs[start:start + _PAIRS_PER_CHUNK]
        chosen = chunk[_worth_scoring(matrix, chunk, lengths)]
        kept += zip(chosen[:, 0].tolist(), chosen[:, 1].tolist(), strict=True)
    return kept


def _worth_scoring(matrix: npt.NDArray[np.uint16], pairs: npt.NDArray[np.int64],
                   lengths: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
    """Whether each pair (rows of `matrix`, texts of `lengths`) is worth scoring: signatures
    that agree enough, or a short text."""
    import numpy as np

    agreement = (matrix[pairs[:, 0]] == matrix[pairs[:, 1]]).mean(axis=1)
    short = np.minimum(lengths[pairs[:, 0]], lengths[pairs[:, 1]]) < SHORT_TEXT
    worth: npt.NDArray[np.bool_] = (agreement >= MIN_AGREEMENT) | short
    return worth


_PAIRS_PER_CHUNK = 65_536


def second_look(texts: Sequence[str], pairs: dict[tuple[int, int], float], scorer: str,
                threshold: float, floor: float | None,
                plain: Callable[[int], str] | None = None, keep_above: float | None = None) -> None:
    """Pairs found just below the threshold (``similar_pairs(..., near=...)``) are scored again
    as the rule defines similarity: articles aside (:func:`rules.similarity`) and, with
    ``plain`` (the plain form of text ``n``, :func:`memcli.consolidate.restate.plain_form`),
    on the two plain forms too: what carries no meaning (an attribution, spelling, number
    formats) set aside. Those that now pass (or score above ``keep_above``: the pairs the
    learned rule of :mod:`memcli.consolidate.learned` may still find similar) take the higher
    score; the rest leave ``pairs`` unless the LLM's discovery band (``floor``) wants them."""
    for (i, j), score in list(pairs.items()):
        if score > threshold:
            continue
        better = similarity(texts[i], texts[j], scorer,
                            plain=None if plain is None else (plain(i), plain(j)))
        if better > threshold or (keep_above is not None and better > keep_above):
            pairs[(i, j)] = better
        elif floor is None or score < floor:
            del pairs[(i, j)]


def content_similarity(content_a: dict[str, Any], content_b: dict[str, Any], scorer: str,
                       threshold: float) -> float:
    """The content similarity of two memories as a run finds it: the scorer on their normalised
    texts and, for a pair within :data:`rules.SECOND_LOOK_BAND` below the threshold, the
    second look (articles aside, plain forms). For figures shown to a person (a merge's log
    entry, ``review show``)."""
    left, right = content_text(content_a), content_text(content_b)
    score = similarity(left, right, scorer)
    if threshold - SECOND_LOOK_BAND <= score <= threshold:
        from memcli.consolidate.textfeatures import features

        plain = (features(raw_text(content_a)).plain, features(raw_text(content_b)).plain)
        score = similarity(left, right, scorer, plain=plain)
    return score
