"""Tests for memcli.consolidate.candidates: MinHash signatures, exact keys and LSH candidate pairs.

The recall test plants near-duplicates (reworded, words changed, inserted or deleted,
sentences reordered) among unrelated memory-like texts of 20-400 words, computes the exact
all-pairs rule (token_sort_ratio > 80 on normalised texts) with rapidfuzz's cdist, and checks
that the candidate pairs cover it.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import random
import subprocess
import sys
from functools import lru_cache

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rapidfuzz import fuzz, process
from rapidfuzz.utils import default_process

from memcli.consolidate import candidates as candidates_module
from memcli.consolidate.candidates import (
    DEFAULT_BANDS,
    DEFAULT_NUM_PERM,
    DEFAULT_ROWS,
    SIGNATURE_KIND,
    candidate_pairs,
    candidate_pairs_for,
    exact_key,
    signature,
    signature_matrix,
    signatures,
)
from memcli.consolidate.similar import sorted_tokens
from memcli.store import sigcache
from tests import sweep

THRESHOLD = 80.0  # the rule: token_sort_ratio > 80 (content_similarity 0.80)

# --------------------------------------------------------------------------------------------
# A deterministic generator of memory-like texts with planted near-duplicates.

_FUNCTION_WORDS = (
    "the a an of to and in is for on that with as it be by this are or from at not was have "
    "if but when then all can will should after before so we you they its into only also more "
    "than must do each any other which one two per via out up don't isn't it's there their"
).split()
_CONTENT_WORDS = (
    "deploy staging production service database migration cache token secret key rotate "
    "cluster pod container image build pipeline test suite flaky retry timeout latency error "
    "warning alert oncall incident rollback release branch merge review commit tag version "
    "config setting flag feature user customer request response endpoint api client server "
    "worker queue job schedule cron backup restore snapshot volume disk memory cpu limit quota "
    "region zone network firewall proxy certificate domain dns route gateway balancer log "
    "metric trace dashboard report script command shell terminal editor plugin package "
    "dependency library module function class method variable field column table index query "
    "schema record file folder path storage bucket upload download sync export import format "
    "json yaml markdown document note summary detail decision owner team agent session memory "
    "prompt model answer question preference style language python rust go typescript docker "
    "kubernetes terraform helm vault postgres redis kafka nginx github jenkins slack email "
    "meeting standup sprint ticket issue bug fix patch hotfix upgrade downgrade install remove "
    "enable disable check verify validate monitor measure compare update create delete write "
    "read open close start stop restart wait skip keep move copy rename split join sort filter "
    "slow fast stable broken healthy daily weekly monthly quickly carefully always never usually "
    "first last next previous new old large small long short main local remote internal "
    "external public private manual automatic default custom shared"
).split()
# Rewording: replace a word by a near-synonym or an inflected form.
_SYNONYMS = {
    "deploy": "ship",
    "check": "verify",
    "remove": "delete",
    "start": "launch",
    "fast": "quick",
    "slow": "sluggish",
    "broken": "failing",
    "error": "failure",
    "use": "employ",
    "needs": "requires",
    "large": "big",
    "small": "tiny",
    "usually": "normally",
    "quickly": "rapidly",
    "restart": "reboot",
    "create": "make",
}
_SUFFIXES = ("s", "ed", "ing", "er")


def _identifier(rng: random.Random) -> str:
    """A made-up name or identifier (project, host, person), to widen the vocabulary."""
    syllables = "ka lo mi ra ne tu si ve do pa ri zo be ga".split()
    word = "".join(rng.choice(syllables) for _ in range(rng.randint(2, 4)))
    return word + (str(rng.randint(1, 99)) if rng.random() < 0.2 else "")


class _Vocabulary:
    """Zipf-weighted content words, with per-topic preferences."""

    def __init__(self, rng: random.Random, topics: int) -> None:
        names = [_identifier(rng) for _ in range(3000)]
        self.words = _CONTENT_WORDS + names
        weights = [1.0 / (rank + 1) ** 0.9 for rank in range(len(self.words))]
        self.cumulative = list(itertools.accumulate(weights))
        self.topics = [rng.sample(self.words, 60) for _ in range(topics)]

    def sentence(self, rng: random.Random, topic: int) -> str:
        """One sentence of 5-18 words: function words, topic words, other words, numbers."""
        out = []
        for _ in range(rng.randint(5, 18)):
            draw = rng.random()
            if draw < 0.42:
                out.append(rng.choice(_FUNCTION_WORDS))
            elif draw < 0.65:
                out.append(rng.choice(self.topics[topic]))
            elif draw < 0.70:
                out.append(str(rng.randint(0, 5000)))
            else:
                out.append(rng.choices(self.words, cum_weights=self.cumulative)[0])
        return " ".join(out).capitalize() + "."


def _mutate_word(rng: random.Random, word: str, vocab: _Vocabulary, topic: int) -> list[str]:
    """One edit of one word: reword, inflect, replace, insert before, or delete."""
    draw = rng.random()
    if draw < 0.25:
        return [_SYNONYMS.get(word, word + rng.choice(_SUFFIXES))]
    if draw < 0.5:
        return [rng.choice(vocab.topics[topic])]
    if draw < 0.75:
        return [rng.choice(_FUNCTION_WORDS + vocab.topics[topic]), word]
    return []


def _near_duplicate(rng: random.Random, sentences: list[str], vocab: _Vocabulary, topic: int) -> str:
    """A restatement: up to a quarter of the words edited, sentences maybe reordered, a
    sentence maybe dropped or added."""
    words = [s.split() for s in sentences]
    total = sum(len(w) for w in words)
    for _ in range(max(1, int(total * rng.uniform(0.0, 0.25)))):
        sentence = rng.choice(words)
        if sentence:
            pos = rng.randrange(len(sentence))
            sentence[pos : pos + 1] = _mutate_word(rng, sentence[pos], vocab, topic)
    result = [" ".join(w) for w in words if w]
    if rng.random() < 0.5:
        rng.shuffle(result)
    if rng.random() < 0.2 and len(result) > 3:
        del result[rng.randrange(len(result))]
    if rng.random() < 0.2:
        result.append(vocab.sentence(rng, topic))
    return " ".join(result)


def make_corpus(n: int, seed: int = 0, *, dup_rate: float = 0.35, topics: int = 40) -> list[str]:
    """``n`` memory-like texts of 20-400 words (log-uniform), a ``dup_rate`` share of them
    followed by 1-3 planted near-duplicates, shuffled. Deterministic for a given seed."""
    rng = random.Random(seed)
    vocab = _Vocabulary(rng, topics)
    texts: list[str] = []
    while len(texts) < n:
        topic, target = rng.randrange(topics), int(20 * 20 ** rng.random())
        sentences: list[str] = []
        while sum(len(s.split()) for s in sentences) < target:
            sentences.append(vocab.sentence(rng, topic))
        texts.append(" ".join(sentences))
        if rng.random() < dup_rate:
            for _ in range(rng.choice((1, 1, 1, 2, 3))):
                texts.append(_near_duplicate(rng, sentences, vocab, topic))
    texts = texts[:n]
    rng.shuffle(texts)
    return texts


def exact_pairs(norm_texts: list[str]) -> set[tuple[int, int]]:
    """All pairs i < j with token_sort_ratio > THRESHOLD, by brute force.

    ``ratio`` on pre-sorted token strings is token_sort_ratio (checked below) without
    re-sorting every string for every pair, which makes cdist several times faster.
    """
    sorted_texts = [sorted_tokens(t) for t in norm_texts]
    scores = process.cdist(
        sorted_texts,
        sorted_texts,
        scorer=fuzz.ratio,
        processor=None,
        score_cutoff=THRESHOLD,
        workers=-1,
        dtype=np.float32,
    )
    rows, cols = np.nonzero(np.triu(scores > THRESHOLD, k=1))
    return set(zip(rows.tolist(), cols.tolist(), strict=True))


@lru_cache(maxsize=2)
def _measured(n: int, seed: int) -> tuple[list[str], set[tuple[int, int]], set[tuple[int, int]]]:
    """Normalised corpus, exact pairs and default candidate pairs (cached: cdist is slow)."""
    norm = [default_process(t) for t in make_corpus(n, seed)]
    sigs = [signature(t) for t in norm]
    keys = [exact_key(t) for t in norm]
    return norm, exact_pairs(norm), candidate_pairs(sigs, keys)


# --------------------------------------------------------------------------------------------
# The generator itself


def test_make_corpus_is_deterministic_and_realistic() -> None:
    first, second = make_corpus(300, seed=3), make_corpus(300, seed=3)
    assert first == second
    assert first != make_corpus(300, seed=4)
    lengths = [len(t.split()) for t in first]
    assert min(lengths) >= 15 and max(lengths) <= 450
    assert len(set(first)) > 250  # mostly distinct texts


# --------------------------------------------------------------------------------------------
# signature and exact_key


def test_signature_is_pinned() -> None:
    # Pins the hash functions: a change would silently invalidate stored signatures, so it
    # must come with a new SIGNATURE_KIND and a new version of the signature cache's header.
    sig = signature("deploy to staging before production")
    assert len(sig) == 2 * DEFAULT_NUM_PERM
    assert hashlib.sha256(sig).hexdigest()[:16] == "9a6c37fd567d3532"
    assert (SIGNATURE_KIND, sigcache._SIG_MAGIC) == ("oph5tok", b"MCSG2")


def test_signatures_in_bulk_are_pinned_across_text_boundaries() -> None:
    # Texts shorter than a shingle, empty ones and others side by side in one chunk: no
    # shingle may cross from one text into the next (pinned before the in-place hashing).
    texts = ["", "a", "ab c", "abcd", "abcde", "abcdef", "", "é ü 漢字 x", "x" * 7,
             "deploy the cache after the retry queue drains"] * 3
    assert hashlib.sha256(b"".join(signatures(texts))).hexdigest()[:16] == "7aea819abe8a2cf5"
    assert signatures(texts) == [signature(t) for t in texts]


def _bulk_corpus() -> list[str]:
    """Memory-like texts, long ones (40 of them joined by eight) and odd characters."""
    texts = [default_process(t) for t in make_corpus(300, seed=5)]
    return texts + [" ".join(texts[k:k + 8]) for k in range(0, 300, 8)] + [
        "\U0001F600 a\u3000b\x85 c\0", "x\0", "\0"]


def test_signatures_in_bulk_are_pinned_on_long_texts() -> None:
    # (shingles within tokens, SIGNATURE_KIND "oph5tok"): long texts, many chunks
    texts = _bulk_corpus()
    assert hashlib.sha256(b"".join(signatures(texts))).hexdigest()[:16] == "6971a12edcaff081"


@pytest.mark.parametrize(("chars", "rows"), [(1, 2048), (7, 3), (300, 1), (5000, 2048), (10**9, 50)])
def test_signatures_do_not_depend_on_the_chunking(monkeypatch: pytest.MonkeyPatch, chars: int,
                                                  rows: int) -> None:
    # Texts are hashed a chunk of characters at a time and densified a batch of rows at a time:
    # neither may change a value (a text alone in its chunk, a text spanning no boundary, ...).
    texts = _bulk_corpus()[::3]
    expected = [signature(t) for t in texts]
    monkeypatch.setattr(candidates_module, "_CHARS_PER_CHUNK", chars)
    monkeypatch.setattr(candidates_module, "_TEXTS_PER_CHUNK", rows)
    assert signatures(texts) == expected
    assert signatures(texts, num_perm=7) == [signature(t, num_perm=7) for t in texts]


def _fmix32(value: int) -> int:
    """MurmurHash3's 32-bit finaliser."""
    value = (value ^ (value >> 16)) * 0x85EBCA6B & 0xFFFFFFFF
    value = (value ^ (value >> 13)) * 0xC2B2AE35 & 0xFFFFFFFF
    return value ^ (value >> 16)


def _shingles(norm_text: str) -> set[str]:
    """The shingles the docstring of `_bin_minima` describes, one token at a time: the 5-grams
    of " token ", or " token " itself for a token of one or two characters."""
    out: set[str] = set()
    for token in norm_text.split(" "):
        padded = f" {token} "
        if not token:
            continue
        if len(token) <= 2:
            out.add(padded)
        else:
            out |= {padded[k:k + 5] for k in range(len(padded) - 4)}
    return out


def _reference_minima(norm_text: str, bins: int) -> list[int]:
    """`_bin_minima` of one text, written out in Python integers from its shingles: a shingle's
    hash is the polynomial of its code points mod 2**32 (a padded short token: 4 of them, " a "
    with a NUL), mixed by MurmurHash3's finaliser; it offers hash // bins to bin hash % bins."""
    base, mask = 0x01000193, 0xFFFFFFFF
    minima = [mask] * bins
    for shingle in _shingles(norm_text):
        value = 0
        for char in shingle.ljust(4, "\0"):
            value = (value * base + ord(char)) & mask
        value = _fmix32(value)
        minima[value % bins] = min(minima[value % bins], value // bins)
    return minima


@pytest.mark.parametrize("bins", [192, 7])
def test_the_shingles_are_the_5_grams_within_each_space_padded_token(bins: int) -> None:
    texts = ["", "a", "ab", "abc", "ab cd", "abc d", "deploy the cache", "x  yy   zzz  wwww",
             "é ü 漢字 x", "\U0001F600 smile", "a b c d e f", "the retry queue drains slowly"]
    texts += [default_process(t) for t in make_corpus(40, seed=6)]
    got = candidates_module._bin_minima(texts, bins)
    for row, text in zip(got.tolist(), texts, strict=True):
        assert row == _reference_minima(text, bins), text
    assert _shingles("ab cd") == {" ab ", " cd "} and _shingles("abc d") == {" abc ", " d "}
    assert _shingles("deploy") == {" depl", "deplo", "eploy", "ploy "}


@settings(max_examples=sweep.scale(20, 80), deadline=None)
@given(words=st.lists(st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters=" "),
                              min_size=1, max_size=9), max_size=20),
       order=st.randoms(use_true_random=False), gaps=st.lists(st.integers(1, 3), min_size=20, max_size=20))
def test_a_signature_does_not_depend_on_the_order_of_tokens_or_the_spaces_between(
        words: list[str], order: random.Random, gaps: list[int]) -> None:
    """No shingle crosses from one token into the next: the text, its tokens reordered and
    parted by runs of spaces, and the sorted-token string the scorer compares all have one
    signature (so a text is signed without sorting its tokens)."""
    text = " ".join(words)
    shuffled = list(words)
    order.shuffle(shuffled)
    spaced = "".join(w + " " * gap for w, gap in zip(shuffled, gaps, strict=False)).strip(" ")
    expected = signature(text)
    assert signatures([spaced, " ".join(sorted(words)), text]) == [expected] * 3
    assert (expected == signature("")) == (not words)


def test_signatures_take_1_to_65536_permutations() -> None:
    # A text with more shingles than bins: filling tens of thousands of empty bins of a
    # two-word text costs seconds and GBs (the engine signs with DEFAULT_NUM_PERM = 192).
    many = " ".join(f"w{i:05d}x" for i in range(20_000))
    assert len(signatures([many], num_perm=1 << 16)[0]) == 2 << 16
    assert len(signatures(["a b"], num_perm=1)[0]) == 2
    for wrong in (0, (1 << 16) + 1):
        with pytest.raises(ValueError):
            signatures(["a"], num_perm=wrong)


def test_short_texts_at_65536_permutations_sign_in_bounded_memory() -> None:
    # Texts of a few shingles leave nearly every one of 65,536 bins empty: a batch then holds
    # one text (not 512: GBs of bins), and the empty bins that no probe fills fall back to
    # their row's first non-empty bin without an array of waiting bins times bins (397 GiB
    # for 100 texts before). The values stay those of each text signed alone.
    import tracemalloc

    texts = ["deploy the cache", "a b", "", "deploy the cache"]
    alone = [signature(t, num_perm=1 << 16) for t in texts]
    tracemalloc.start()
    try:
        together = signatures(texts, num_perm=1 << 16)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert together == alone and together[0] == together[3] and together[0] != together[1]
    assert peak < 64 << 20, peak


def _densify_reference(minima: np.ndarray) -> np.ndarray:
    """`_densify` written out bin by bin: an empty bin takes the first non-empty bin of its
    probe order (else its row's first non-empty bin) salted by its own position, every value
    is mixed (SplitMix64) down to 16 bits, and _EMPTY is kept for a row without shingles."""
    rows, bins = minima.shape
    order = candidates_module._probe_order(bins)
    full, golden, out = 0xFFFFFFFF, 0x9E3779B97F4A7C15, np.empty((rows, bins), dtype=np.uint16)
    for r in range(rows):
        filled = [int(v) != full for v in minima[r]]
        for j in range(bins):
            if filled[j]:
                value = int(minima[r, j])
            else:
                source = next((int(k) for k in order[j] if filled[int(k)]),
                              filled.index(True) if any(filled) else 0)
                value = int(minima[r, source]) ^ ((j + 1) * golden & (2**64 - 1))
            z = value
            z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & (2**64 - 1)
            z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & (2**64 - 1)
            mixed = (z ^ (z >> 31)) & 0xFFFF
            out[r, j] = 0xFFFF if not any(filled) else min(mixed, 0xFFFE)
    return out


@pytest.mark.parametrize("bins", [7, 192])
def test_densify_matches_the_bin_by_bin_rule(bins: int) -> None:
    # Rows from full to empty: every probe round (one probe at a time, then all left at once)
    # and the fallback to the row's first non-empty bin.
    rng = np.random.default_rng(bins)
    minima = rng.integers(0, 1 << 25, size=(40, bins), dtype=np.uint32)
    for r in range(40):
        minima[r, rng.random(bins) < r / 39] = 0xFFFFFFFF
    minima[5, :] = 0xFFFFFFFF
    minima[6, :] = 0xFFFFFFFF
    minima[6, bins - 1] = 12345
    got = candidates_module._densify(minima)
    assert (got == _densify_reference(minima)).all()


def test_signature_same_in_another_process_with_other_hash_seed() -> None:
    text = "rotate the vault token every 90 days"
    code = f"from memcli.consolidate.candidates import signature; print(signature({text!r}).hex())"
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == signature(text).hex()


@pytest.mark.slow
def test_signature_shape_bulk_and_order_insensitivity() -> None:
    text = "the cache is cold so warm it first"
    assert len(signature(text, num_perm=16)) == 32
    texts = [text, "", "a", "warm the cache", text * 40] * 1000  # crosses a chunk boundary
    one_by_one = {t: signature(t) for t in set(texts)}  # signature() is a pure function of the text
    assert signatures(texts) == [one_by_one[t] for t in texts]
    # The shingles are the tokens' own, whatever their order, like token_sort_ratio's comparison.
    assert signature("warm it first so the cache is cold") == signature(text)
    assert signature(text) != signature("the cache is warm so cool it first")


def test_signature_of_empty_and_tiny_texts() -> None:
    empty = signature("")
    assert empty == b"\xff\xff" * DEFAULT_NUM_PERM
    assert signature("   ") == empty
    assert signature("a") != empty and signature("a") != signature("b")
    with pytest.raises(ValueError):
        signature("x", num_perm=0)


def test_sorted_tokens_matches_token_sort_ratio() -> None:
    assert sorted_tokens("b a  c") == "a b c"
    norm = [default_process(t) for t in make_corpus(200, seed=2)]
    rng = random.Random(0)
    for _ in range(300):
        a, b = rng.choice(norm), rng.choice(norm)
        expected = fuzz.token_sort_ratio(a, b, processor=None)
        assert fuzz.ratio(sorted_tokens(a), sorted_tokens(b)) == pytest.approx(expected)


def test_exact_key() -> None:
    assert exact_key("same text") == exact_key("same text")
    assert exact_key("same text") != exact_key("same  text")
    assert exact_key("x") == hashlib.sha256(b"x").hexdigest()


# --------------------------------------------------------------------------------------------
# candidate_pairs


def test_exact_duplicates_are_candidates_whatever_the_signatures() -> None:
    # Distinct made-up signatures: only the exact keys can pair the items.
    sigs = [bytes([i]) * (2 * DEFAULT_NUM_PERM) for i in range(4)]
    keys = ["k1", "k2", "k1", "k1"]
    assert candidate_pairs(sigs, keys) == {(0, 2), (0, 3), (2, 3)}


def test_similar_texts_pair_and_unrelated_texts_do_not() -> None:
    base = "run the database migrations before every deploy to production and check the logs"
    texts = [
        base,
        base.replace("check", "read"),
        "the user prefers short answers without emojis in code review comments",
        base + " afterwards",
    ]
    norm = [default_process(t) for t in texts]
    pairs = candidate_pairs([signature(t) for t in norm], [exact_key(t) for t in norm])
    assert {(0, 1), (0, 3), (1, 3)} <= pairs
    assert not any(2 in pair for pair in pairs)


def test_candidate_pairs_validates_input() -> None:
    sig = signature("some text")
    with pytest.raises(ValueError):
        candidate_pairs([sig, sig], ["k"])
    with pytest.raises(ValueError):
        candidate_pairs([sig, sig[:-2]], ["a", "b"])
    with pytest.raises(ValueError):
        candidate_pairs([sig, sig], ["a", "b"], bands=DEFAULT_NUM_PERM, rows=2)
    with pytest.raises(ValueError):
        candidate_pairs([sig, sig], ["a", "b"], bands=0, rows=4)
    assert candidate_pairs([], []) == set()
    assert candidate_pairs([sig], ["a"]) == set()


def test_signature_matrix_roundtrip() -> None:
    sigs = [signature(t, num_perm=8) for t in ("a b", "c d", "")]
    matrix = signature_matrix(sigs)
    assert matrix.shape == (3, 8)
    assert [row.astype("<u2").tobytes() for row in matrix] == sigs


@pytest.mark.slow
def test_recall_against_all_pairs_on_planted_near_duplicates() -> None:
    n = sweep.scale(800, 2000)  # all-pairs scoring grows as n squared: 4 s against 22 s of CPU
    norm, exact, candidates = _measured(n, 11)
    all_pairs = len(norm) * (len(norm) - 1) // 2
    assert len(exact) > n // 4  # the corpus does plant near-duplicates above the threshold
    recall = len(exact & candidates) / len(exact)
    assert recall >= 0.99, f"recall {recall:.4f}, missed {sorted(exact - candidates)[:10]}"
    assert len(candidates) < 0.02 * all_pairs  # far below all pairs
    assert all(i < j for i, j in candidates)


def test_candidate_pairs_are_deterministic() -> None:
    norm = [default_process(t) for t in make_corpus(300, seed=5)]
    first = candidate_pairs([signature(t) for t in norm], [exact_key(t) for t in norm])
    second = candidate_pairs([signature(t) for t in norm], [exact_key(t) for t in norm])
    assert first == second


# --------------------------------------------------------------------------------------------
# candidate_pairs_for (incremental)


def _restricted(pairs: set[tuple[int, int]], new: set[int]) -> set[tuple[int, int]]:
    return {(i, j) for i, j in pairs if i in new or j in new}


def test_incremental_equals_full_restricted_on_corpus() -> None:
    norm = [default_process(t) for t in make_corpus(600, seed=8)]
    sigs, keys = [signature(t) for t in norm], [exact_key(t) for t in norm]
    full = candidate_pairs(sigs, keys)
    rng = random.Random(1)
    for size in (1, 5, 40):
        new = set(rng.sample(range(len(norm)), size))
        assert candidate_pairs_for(new, sigs, keys) == _restricted(full, new)
    assert candidate_pairs_for(range(len(norm)), sigs, keys) == full
    assert candidate_pairs_for([], sigs, keys) == set()


def test_incremental_rejects_bad_indices() -> None:
    sigs = [signature("a"), signature("b")]
    with pytest.raises(IndexError):
        candidate_pairs_for([2], sigs, ["a", "b"])
    with pytest.raises(IndexError):
        candidate_pairs_for([-1], sigs, ["a", "b"])


_WORDS = st.sampled_from("deploy staging prod cache token the a to of 42 never run".split())
_TEXTS = st.lists(st.lists(_WORDS, max_size=12).map(" ".join), min_size=0, max_size=25)


@settings(max_examples=sweep.scale(15, 60), deadline=None)
@given(texts=_TEXTS, data=st.data())
def test_incremental_equals_full_restricted_property(texts: list[str], data: st.DataObject) -> None:
    sigs = [signature(t, num_perm=8) for t in texts]
    keys = [exact_key(t) for t in texts]
    new = set(data.draw(st.lists(st.integers(0, max(len(texts) - 1, 0)), max_size=5)))
    new = {i for i in new if i < len(texts)}
    full = candidate_pairs(sigs, keys, bands=4, rows=2)
    assert candidate_pairs_for(new, sigs, keys, bands=4, rows=2) == _restricted(full, new)
    for i, j in full:
        assert 0 <= i < j < len(texts)
    for i, j in itertools.combinations(range(len(texts)), 2):
        if texts[i] == texts[j]:
            assert (i, j) in full  # identical texts are always candidates


def test_defaults_are_consistent() -> None:
    assert DEFAULT_BANDS * DEFAULT_ROWS <= DEFAULT_NUM_PERM
