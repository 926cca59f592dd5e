"""Pair search at every store shape: prepared scoring gives the scorer's own results, small
blocks are compared once and then served from the pair cache, and the planted duplicates a run
finds match the exact all-pairs rule."""

from __future__ import annotations

import json
import os
import random
import sys
from itertools import combinations
from pathlib import Path
from typing import Any

import pytest
from rapidfuzz import fuzz

from memcli.consolidate import engine, merging, pairsearch, rules, similar
from memcli.store.store import Store
from tests import sweep
from tests.conftest import add, record_reads

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import generate  # noqa: E402
from bench import run as bench_run  # noqa: E402


def _texts(rng: random.Random, n: int) -> list[str]:
    words = ["deploy", "the", "a", "cache", "redis", "retry", "zz", "x1", "10", "2", "é", "queue"]
    out = []
    for _ in range(n):
        text = " ".join(rng.choice(words) for _ in range(rng.randint(0, 14)))
        out.append(rules.content_text({"summary": text}))
    return out


def test_prepared_scoring_gives_the_scorers_own_scores() -> None:
    rng = random.Random(5)
    texts = _texts(rng, 300)
    fn, prepare = similar.prepared("token_sort_ratio")
    for a, b in zip(texts, reversed(texts), strict=True):
        assert fn(prepare(a), prepare(b), processor=None) == fuzz.token_sort_ratio(a, b, processor=None)
    fn, prepare = similar.prepared("ratio")  # other scorers are left as they are
    assert prepare("b a") == "b a" and fn is rules.scorer_fn("ratio")


@pytest.mark.parametrize("focus", [None, [0, 3, 7], []])
def test_small_blocks_score_each_pair_once_as_all_pairs_would(focus: list[int] | None) -> None:
    rng = random.Random(9)
    base = _texts(rng, 6)
    texts = base + [t + " the" for t in base[:4]] + [base[1]]  # restatements and an equal text
    found = similar.similar_pairs(texts, "token_sort_ratio", 0.80, focus=focus, near=0.70)
    expected = {}
    for i, j in combinations(range(len(texts)), 2):
        if focus is not None and i not in focus and j not in focus:
            continue
        score = fuzz.token_sort_ratio(texts[i], texts[j], processor=None)
        if score >= 70:  # above the threshold, or in the band the second look takes
            expected[(i, j)] = score / 100
    assert found == pytest.approx(expected)
    assert (focus == []) == (found == {})


@pytest.mark.parametrize(("short", "long", "cutoff", "reachable"), [
    (7, 13, 70.0, True),    # ratio 100 * (1 - 6/20) = 70 exactly: at the cutoff
    (7, 14, 70.0, False),   # 66.7 at best
    (52, 98, 70.0, False),  # 69.3 at best
    (53, 98, 70.0, True),   # 70.2 at best
    (0, 0, 100.0, True),    # two empty texts score 100
    (0, 5, 0.0, True),      # any pair reaches a cutoff of 0
    (40, 41, 99.0, False),  # 98.8 at best
])
def test_ratio_pairs_whose_lengths_cannot_reach_the_cutoff_are_not_scored(
        short: int, long: int, cutoff: float, reachable: bool) -> None:
    """The length test before scoring is exact: it skips a pair only when rapidfuzz would
    give 0 at that cutoff (one text a prefix of the other scores the most two such lengths
    can); other scorers are always scored."""
    a, b = "x" * short, "x" * long
    assert similar._may_reach(fuzz.ratio, short, long, cutoff) is reachable
    assert similar._may_reach(fuzz.ratio, long, short, cutoff) is reachable
    score = fuzz.ratio(a, b, score_cutoff=cutoff)  # a prefix: the best these lengths allow
    assert score >= cutoff if reachable else score == 0
    assert similar._may_reach(fuzz.partial_ratio, short, long, cutoff)  # partial_ratio: "x" in "xx" is 100


def test_small_blocks_of_very_different_lengths_find_what_all_pairs_finds() -> None:
    rng = random.Random(4)
    base = _texts(rng, 8)
    # each text cut at many lengths: prefixes whose scores sit on either side of the cutoff
    texts = [t[:k] for t in base for k in range(len(t) // 2, len(t) + 1, max(1, len(t) // 12))][:40]
    for near in (0.70, None):
        found = similar.similar_pairs(texts, "token_sort_ratio", 0.80, near=near)
        cut = 70 if near else 80
        expected = {(i, j): score / 100 for i, j in combinations(range(len(texts)), 2)
                    if (score := fuzz.token_sort_ratio(texts[i], texts[j], processor=None)) >= cut
                    and (near or score > 80)}
        assert found == pytest.approx(expected) and expected


class _KeptTexts(list):  # type: ignore[type-arg]
    """Texts that keep their sorted-token strings, counting how often each is made."""

    def __init__(self, texts: list[str]) -> None:
        super().__init__(texts)
        self.asked: list[int] = []

    def sorted_at(self, n: int) -> str:
        self.asked.append(n)
        return " ".join(sorted(self[n].split()))


@pytest.mark.parametrize("size", [12, 60])  # all pairs; a large block (LSH)
def test_the_scorer_takes_the_sorted_strings_the_texts_keep(size: int) -> None:
    """A block's texts keep their sorted tokens (`pairsearch.BlockTexts.sorted_at`): the scorer
    asks them for each text once, instead of sorting again, with the same scores."""
    rng = random.Random(2)
    base = _texts(rng, size // 2)
    plain = base + [t + " again" for t in base]
    kept = _KeptTexts(plain)
    found = similar.similar_pairs(kept, "token_sort_ratio", 0.80, near=0.70)
    assert found == similar.similar_pairs(plain, "token_sort_ratio", 0.80, near=0.70) and found
    assert kept.asked and len(kept.asked) == len(set(kept.asked))
    assert similar.sorted_text(kept, 0) == similar.sorted_text(plain, 0)


def _small_store(root: Path, n: int = 600) -> list[tuple[str, str]]:
    planted = generate.generate(root, n, shape="small", dup_share=0.05)
    (root / "memcli.toml").write_text("[consolidation]\nindex_pause_ms = 0\nmax_per_run = 0\n")
    return planted


def test_a_block_whose_members_did_not_change_is_not_compared_again(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "s"
    _small_store(root)
    first = engine.consolidate(Store(root))
    assert any(a["type"] == "merge" for a in first.actions)
    compared: list[Any] = []
    real = similar.similar_pairs

    def spy(texts: Any, *args: Any, **kwargs: Any) -> Any:
        if texts.block[0].folder.scope == "agent":  # (a folder the run's promotions made is new)
            compared.append(len(texts))
        return real(texts, *args, **kwargs)

    for module in (merging, pairsearch):
        monkeypatch.setattr(module, "similar_pairs", spy)
    again = engine.consolidate(Store(root), dry_run=True)
    assert compared == [] and not [a for a in again.actions if a["type"] == "merge"]
    # one new memory: only its own block is compared, and only that memory against it
    new_ids, _ = generate.add_session(root, 2, folder="agent/agent0", seed=3)
    engine.consolidate(Store(root), dry_run=True)
    assert 1 <= len(compared) <= 2 and max(compared) <= 40
    monkeypatch.undo()
    for cache in root.glob("agent/*/_pairs.json"):  # without the cache: the same plan
        cache.unlink()
    compared.clear()
    cold = engine.consolidate(Store(root), dry_run=True)
    warm = engine.consolidate(Store(root), dry_run=True)
    assert [a for a in cold.actions] == [a for a in warm.actions]


def test_a_dry_run_of_small_blocks_does_not_import_numpy(tmp_path: Path, store: Path) -> None:
    """Blocks of up to ALL_PAIRS_MAX memories are scored pair by pair: no signature, so no
    numpy (its import is a fixed cost of every process, a session-end hook's included). A
    block above it signs its texts, and numpy comes in then."""
    import subprocess

    root = tmp_path / "s"
    _small_store(root, 200)
    probe = ("import sys\nfrom memcli.consolidate import engine\nfrom memcli.store.store import Store\n"
             f"out = engine.consolidate(Store.open({str(root)!r}), dry_run=True)\n"
             "print(sum(a['type'] == 'merge' for a in out.actions), 'numpy' in sys.modules)")
    env = {**os.environ, "MEMCLI_NOW": "2026-11-22T00:00:00Z"}
    merges, numpy = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env,
                                   check=True, cwd=ROOT).stdout.split()
    assert int(merges) > 0 and numpy == "False"
    for n in range(similar.ALL_PAIRS_MAX + 1):  # one block above ALL_PAIRS_MAX: signed
        add(store, summary=f"the worker {n} restarts the queue after deploy number {n}")
    probe = probe.replace(repr(str(root)), repr(str(store)))
    assert subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, check=True,
                          cwd=ROOT).stdout.split()[1] == "True"


@pytest.mark.slow
@pytest.mark.parametrize("shape", generate.SHAPES)
def test_recall_against_the_exact_all_pairs_rule_at_every_shape(tmp_path: Path, shape: str) -> None:
    """Every planted pair the exact rule merges (similarity above the threshold, second look
    included, no guard objecting) is merged by the run: at least 99% of them."""
    root = tmp_path / shape
    planted = generate.generate(root, sweep.scale(1000, 2500), shape=shape, dup_share=0.08)
    (root / "memcli.toml").write_text("[consolidation]\nindex_pause_ms = 0\nmax_per_run = 0\n")
    outcome = engine.consolidate(Store(root), dry_run=True)
    merges = [list(a["source_ids"]) for a in outcome.actions if a["type"] == "merge"]
    figures = bench_run.pair_figures(root, planted, merges)
    assert figures["unguarded"] >= 50, figures  # enough planted pairs to read a percentage
    assert figures["recall_unguarded"] >= 0.99, figures


# ------------------------------------------------------------ pairs the tag rule lets through


@pytest.mark.slow
@pytest.mark.parametrize("shape", generate.SHAPES)
def test_recall_with_the_lengths_the_index_caches_at_every_shape(tmp_path: Path, shape: str) -> None:
    """After `reindex` (index entries that know each text's sorted length, so that pair
    search drops pairs by length before reading their texts) the dry run plans exactly what
    it plans from the files alone: every planted pair the exact rule merges, at least 99%."""
    from memcli.store.memories import reindex

    root = tmp_path / shape
    planted = generate.generate(root, sweep.scale(600, 2000), shape=shape, dup_share=0.08)
    (root / "memcli.toml").write_text("[consolidation]\nindex_pause_ms = 0\nmax_per_run = 0\n")
    plain = engine.consolidate(Store(root), dry_run=True).actions
    reindex(Store(root))
    assert _entries_of(root) and all("sort_len" in e for e in _entries_of(root))
    indexed = engine.consolidate(Store(root), dry_run=True).actions
    assert [{k: v for k, v in a.items() if k != "run_id"} for a in indexed] == \
        [{k: v for k, v in a.items() if k != "run_id"} for a in plain]
    merges = [list(a["source_ids"]) for a in indexed if a["type"] == "merge"]
    figures = bench_run.pair_figures(root, planted, merges)
    assert figures["unguarded"] >= 30 and figures["recall_unguarded"] >= 0.99, figures


def _entries_of(root: Path) -> list[dict[str, Any]]:
    return [e for path in root.glob("*/*/_index.json") for e in json.loads(path.read_text())["entries"]]


def test_tag_filter_allows_exactly_the_pairs_whose_tag_overlap_passes() -> None:
    tags = [["a", "b"], ["b", "a"], ["a", "b", "c"], [], [],
            ["p", "q", "r", "s", "t"], ["p", "q", "r", "s", "t", "u"],  # 5/6 = 0.83: above 0.80
            ["k", "l", "m", "n"], ["k", "l", "m", "n", "o"]]  # 4/5 = 0.80: not above
    for threshold in (0.80, 0.5, 0.0, 0.99):
        allowed = similar.tag_filter(tags, threshold)
        assert allowed is not None
        expected = {(i, j) for i, j in combinations(range(len(tags)), 2)
                    if rules.tag_overlap(tags[i], tags[j]) > threshold}
        assert {(i, j) for i, j in combinations(range(len(tags)), 2) if allowed.allows(i, j)} == expected
        assert allowed.members() == sorted({n for pair in expected for n in pair})
        for i in range(len(tags)):
            assert [j for j in allowed.partners(i) if j != i] == [
                j for j in range(len(tags)) if j != i and (min(i, j), max(i, j)) in expected]
    assert similar.tag_filter([["x"]], 0.80).members() == []  # type: ignore[union-attr]
    assert similar.tag_filter(tags, 1.0).members() == []  # type: ignore[union-attr]


def test_tag_filter_gives_up_on_too_many_distinct_open_tag_sets(monkeypatch: pytest.MonkeyPatch) -> None:
    tags = [[f"t{n}", f"u{n}"] for n in range(12)]  # 2/3 > 0.5: every distinct set is open
    monkeypatch.setattr(similar, "_MAX_OPEN_SETS", 10)
    assert similar.tag_filter(tags, 0.5) is None
    assert similar.tag_filter(tags, 0.8) is not None  # 2/3 <= 0.8: none is open


@pytest.mark.parametrize("size", [12, 90])  # all-pairs, and candidates by LSH
@pytest.mark.parametrize("focus", [None, [0, 5, 7]])
def test_similar_pairs_with_a_filter_are_the_filtered_pairs_and_read_only_what_they_need(
        size: int, focus: list[int] | None) -> None:
    rng = random.Random(size)
    base = [rules.content_text({"summary": " ".join(f"w{rng.randint(0, 400)}" for _ in range(30))})
            for _ in range(size // 2)]
    texts = base + [t + " again" for t in base]  # every text has a near twin
    tags = [["x"] if n % 3 else ["y"] for n in range(len(texts))]
    tags[1] = ["lonely"]
    allowed = similar.tag_filter(tags, 0.80)
    assert allowed is not None
    touched: set[int] = set()

    class Texts(list[str]):
        def __getitem__(self, n: Any) -> Any:
            touched.add(n)
            return super().__getitem__(n)

    whole = similar.similar_pairs(texts, "token_sort_ratio", 0.80, focus=focus, near=0.70)
    assert whole  # the twins
    found = similar.similar_pairs(Texts(texts), "token_sort_ratio", 0.80, focus=focus, near=0.70,
                                  allowed=allowed)
    assert found == {pair: score for pair, score in whole.items() if allowed.allows(*pair)}
    assert 1 not in touched and touched <= set(allowed.members())


def test_a_dry_run_reads_no_memory_whose_tags_pair_with_none_of_its_block(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from memcli.store.memories import reindex

    root = tmp_path / "s"
    _small_store(root)
    store = Store(root)
    reindex(store)
    before = engine.consolidate(Store(root), dry_run=True).actions
    blocks: dict[tuple[str, str, str], list[Any]] = {}
    for scan in store.scan_all(load=True).folders:
        for mem in scan.memories.values():
            if rules.takes_part(mem):
                blocks.setdefault((scan.folder.rel, mem.type, mem.subtype), []).append(mem)
    alone = set()
    for block in blocks.values():
        allowed = similar.tag_filter([m.tags for m in block], 0.80)
        assert allowed is not None
        members = set(allowed.members())
        alone |= {m.name for n, m in enumerate(block) if n not in members}
    read: list[str] = []
    original = Store._read_record  # (how a memory planned from its index entry is read)

    def spy(self: Store, folder: Any, name: str, *size: Any) -> Any:
        read.append(name)
        return original(self, folder, name, *size)

    monkeypatch.setattr(Store, "_read_record", spy)
    after = engine.consolidate(Store(root), dry_run=True).actions
    assert after == before and any(a["type"] == "merge" for a in after)
    assert len(alone) > len(read) > 0 and not alone & set(read)


@pytest.mark.parametrize("groups", [1, 30])  # one tag group (every member signed), many small ones
@pytest.mark.parametrize("focus", [None, [0, 60]])  # (a text, a variant: few pairs to score)
@pytest.mark.parametrize("floor", [None, 0.60])  # the rule's threshold (with the second-look band), the LLM's band
def test_signing_only_what_a_block_needs_finds_the_pairs_signing_every_member_finds(
        groups: int, focus: list[int] | None, floor: float | None) -> None:
    """A dry run's large block with a tag filter signs its members only when that costs less
    than scoring every pair the tags allow; otherwise it scores those pairs and signs only the
    texts of the pairs that pass, keeping those LSH and the agreement filter would have let
    through: the same pairs either way, near misses of LSH included."""
    from memcli.consolidate import candidates

    rng = random.Random(groups)
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = ["".join(rng.choice(letters) for _ in range(rng.randint(3, 9))) for _ in range(300)]
    base = [[rng.choice(words) for _ in range(30)] for _ in range(45)]
    texts = []
    for n in range(120):  # each base text, a variant with 0-12 words changed (scores 0.6-1.0)
        text = list(base[n % 45]) if n < 90 else [rng.choice(words) for _ in range(30)]  # others
        if 45 <= n < 90:  # (some with a letter changed in words too: few shingles left in common)
            for at in rng.sample(range(30), rng.randint(0, 12)):
                text[at] = rng.choice(words)
            for at in rng.sample(range(30), rng.choice((0, 0, 8, 12))):
                text[at] = text[at][:2] + rng.choice(letters) + text[at][3:]
        texts.append(rules.content_text({"summary": " ".join(text)}))
    tags = [[f"t{n % 45 % groups}"] for n in range(120)]  # a text and its variant share their tags
    allowed = similar.tag_filter(tags, 0.80)
    assert allowed is not None and len(texts) > similar.ALL_PAIRS_MAX
    sigs = candidates.signatures(texts)
    lengths = [len(t) for t in texts]
    signed: list[int] = []

    def sign(at: list[int]) -> list[bytes]:
        signed.extend(at)
        return [sigs[n] for n in at]

    near = None if floor is not None else 0.70
    every = similar.similar_pairs(texts, "token_sort_ratio", 0.80, focus=focus, floor=floor, near=near,
                                  sigs=sigs, lengths=lengths, allowed=allowed)
    lazy = similar.similar_pairs(texts, "token_sort_ratio", 0.80, focus=focus, floor=floor, near=near,
                                 lengths=lengths, allowed=allowed, sign=sign)
    assert lazy == every and list(lazy) == sorted(lazy) and every
    if groups == 1 and focus is None:  # (with a focus, only its pairs: fewer to score)
        assert sorted(signed) == allowed.members()  # every member, once
    else:
        cutoff = (floor or 0.70) * 100
        passing = {(i, j) for i, j in combinations(range(len(texts)), 2) if allowed.allows(i, j)
                   and (focus is None or i in focus or j in focus)
                   and fuzz.token_sort_ratio(texts[i], texts[j], score_cutoff=cutoff)}
        assert sorted(signed) == sorted({n for pair in passing for n in pair})  # those only, once
        assert len(signed) < len(allowed.members())
        if focus is None:
            assert set(lazy) < passing  # some pairs pass the scorer that LSH would not propose


def _merges(root: Path, **kwargs: Any) -> list[list[str]]:
    outcome = engine.consolidate(Store(root), **kwargs)
    return sorted(sorted(a["source_ids"]) for a in outcome.actions if a["type"] == "merge")


def test_signatures_cached_by_an_older_kind_are_never_used(tmp_path: Path) -> None:
    """The signature cache's header names the kind of signature: a cache left by a memcli
    whose signatures hashed other shingles is not read (mixed with this kind's, it would lose
    pairs silently), and the next real run rewrites it whole."""
    from memcli.consolidate import candidates
    from memcli.store import sigcache

    root = tmp_path / "s"
    generate.generate(root, 1000, shape="huge", dup_share=0.08)
    (root / "memcli.toml").write_text("[consolidation]\nindex_pause_ms = 0\nmax_per_run = 0\n")
    cold = _merges(root, dry_run=True)
    assert cold
    store = Store(root)
    files = []
    for scan in store.scan_all(load=True).folders:
        # a signature of its own for each memory: no two share a band, no LSH candidates
        hashes = sorted({m.content_hash for m in scan.memories.values()})
        misleading = {h: bytes([k % 251 + 1, k // 251 + 1]) * candidates.DEFAULT_NUM_PERM
                      for k, h in enumerate(hashes)}
        sigcache.save_sigs(scan.folder.cache(create=True), misleading)
        files.append(scan.folder.cache() / sigcache.SIG_NAME)
    assert len(_merges(root, dry_run=True)) < len(cold)  # a cache of this kind is trusted
    for path in files:  # the same rows, under the header of the previous kind
        path.write_bytes(b"MCSG1" + path.read_bytes()[5:])
    assert _merges(root, dry_run=True) == cold
    engine.consolidate(Store(root))
    rewritten = [path for path in files if path.exists()]
    assert rewritten and all(path.read_bytes()[:5] == b"MCSG2" for path in rewritten)


@pytest.mark.parametrize("groups", [1, 30])
def test_a_block_signed_first_sorts_the_tokens_of_the_texts_it_scores_only(groups: int) -> None:
    """Signing does not sort a text's tokens: a large block that signs its members first sorts
    (`sorted_at`) only the texts of the pairs that share an LSH band, which it scores; one that
    scores first (many small tag groups) sorts every text of a pair the tags allow."""
    import numpy as np

    from memcli.consolidate import candidates

    rng = random.Random(7)
    words = [f"w{n}x" for n in range(500)]
    # (texts of 30 words, about 180 characters: sorting one costs clearly less than signing it)
    base = [[rng.choice(words) for _ in range(30)] for _ in range(50)]
    texts = [" ".join(b) for b in base] + [" ".join(b[:-3] + ["again"]) for b in base[:10]]
    tags = [[f"t{n % 50 % groups}"] for n in range(len(texts))]
    allowed = similar.tag_filter(tags, 0.80)
    assert allowed is not None and len(texts) > similar.ALL_PAIRS_MAX
    sigs = candidates.signatures(texts)
    kept, lengths = _KeptTexts(texts), [len(t) for t in texts]
    found = similar.similar_pairs(kept, "token_sort_ratio", 0.80, near=0.70, allowed=allowed,
                                  lengths=lengths, sign=lambda at: [sigs[n] for n in at])
    assert found == similar.similar_pairs(texts, "token_sort_ratio", 0.80, near=0.70, allowed=allowed)
    assert {(n, n + 50) for n in range(10)} <= set(found)
    pairs = candidates.candidate_pair_array(sigs)  # (LSH, and signatures that agree enough)
    pairs = pairs[similar._worth_scoring(candidates.signature_matrix(sigs), pairs, np.array(lengths))]
    banded = {n for pair in pairs.tolist() if allowed.allows(*pair) for n in pair}
    if groups == 1:  # signed first
        assert set(kept.asked) == banded and len(banded) < len(texts) // 2
    else:  # scored first
        assert set(kept.asked) == set(allowed.members())
    assert len(kept.asked) == len(set(kept.asked))  # each once


def test_scoring_first_is_chosen_when_scoring_the_pairs_costs_less_than_signing_their_texts() -> None:
    """The cost estimate behind `_allowed_lazy`'s choice (the pairs found are the same either
    way): sorting and scoring against signing, from the texts' lengths; a pair whose lengths
    cannot reach the cutoff costs no scoring."""
    ratio = fuzz.ratio
    ends = [0, 1]
    for length, first in ((100, True), (2000, False)):  # a pair of short texts / of long ones
        assert similar._scoring_first(ratio, 70.0, [(0, 1)], ends, {0: length, 1: length}) is first
    many = [(i, j) for i in range(60) for j in range(i + 1, 60)]  # 1,770 pairs of 60 texts
    sizes = {n: 300 for n in range(60)}
    assert not similar._scoring_first(ratio, 70.0, many, list(range(60)), sizes)
    # the same pairs, lengths too far apart to reach the cutoff: nothing to score but the sorting
    apart = {n: 200 * 3 ** (n % 2) for n in range(60)}
    odd_even = [(i, j) for i, j in many if (i + j) % 2]
    assert similar._may_reach(ratio, 200, 600, 70.0) is False
    assert similar._scoring_first(ratio, 70.0, odd_even, list(range(60)), apart)
    # other scorers have no length bound: every pair counts
    assert not similar._scoring_first(fuzz.partial_ratio, 70.0, odd_even, list(range(60)), apart)


# ---------------------------------------------------------------- lengths the index knows


def _length_block(root: Path, size: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """One block of `size` memories (all tags alike) of about 60 characters, two of them near
    duplicates, plus two whose lengths pair with none of the others (a word of 3 letters and
    a text of 4,000 characters). Returns (the pair, the loners)."""
    rng = random.Random(size)
    words = ["".join(rng.choice("abcdefghij") for _ in range(6)) for _ in range(400)]
    text = "the deploy job restarts the worker queue after each release on staging"
    pair = [add(root, summary=text), add(root, summary=text.replace("each", "every"))]
    for _ in range(size - 4):
        add(root, summary=" ".join(rng.choice(words) for _ in range(rng.randint(8, 11))))
    loners = [add(root, summary="ok!"), add(root, summary=" ".join(rng.choice(words) for _ in range(600)))]
    return pair, loners


def _merged(root: Path) -> list[set[str]]:
    outcome = engine.consolidate(Store(root), dry_run=True)
    return [set(a["source_ids"]) for a in outcome.actions if a["type"] == "merge"]


def _entries(root: Path) -> tuple[Path, dict[str, Any]]:
    path = root / "agent" / "coder" / "_index.json"
    return path, json.loads(path.read_text())


def test_index_entries_carry_the_length_of_the_string_the_scorer_compares(store: Path) -> None:
    from memcli.store.memories import reindex

    add(store, summary="Deploy:  the   worker, then (staging)!", details="  Twice -- at  most.  ")
    add(store, summary="", details="")
    add(store, summary="plain words only")
    reindex(Store(store))
    _, index = _entries(store)
    for entry in index["entries"]:
        text = rules.content_text(json.loads((store / "agent" / "coder" / entry["file"]).read_text())["content"])
        assert entry["sort_len"] == len(similar.sorted_tokens(text)) <= entry["text_len"] == len(text)
    assert sorted((e["sort_len"], e["text_len"]) for e in index["entries"]) == [(0, 0), (16, 16), (44, 58)]


@pytest.mark.parametrize("cached", [0, 5, 40, 41, -1, True, 5.0, "5", None])
def test_a_cached_sort_len_is_trusted_only_when_it_can_be_true(cached: Any) -> None:
    """From 0 to the cached text length (joining the tokens by single spaces never lengthens
    the text); anything else (another type, a bool, out of range) is not trusted."""
    from memcli.store.model import Memory

    facts = {"id": "mem_a", "file": "mem_a.json", "type": "semantic", "content_hash": "h", "size": 1,
             "mtime_ns": 1, "text_len": 40, "sort_len": cached}
    mem = Memory.planned([facts], Path("/nowhere"), lambda m: None)[0]
    expected = cached if type(cached) is int and 0 <= cached <= 40 else None
    assert mem.cached_sort_len() == expected
    read = Memory({"id": "mem_a", "type": "semantic", "content": {}}, None, "json")
    assert read.cached_sort_len() is None  # a memory read from its file: no entry to trust


@pytest.mark.parametrize("size", [12, 60])  # all pairs; a large block with a tag filter
def test_a_dry_run_reads_no_memory_whose_length_pairs_with_none_of_its_block(
        tmp_path: Path, size: int, monkeypatch: pytest.MonkeyPatch) -> None:
    from memcli.store.memories import reindex

    root = tmp_path / "s"
    root.mkdir()
    (root / "memcli.toml").write_text("[consolidation]\nindex_pause_ms = 0\n")
    pair, loners = _length_block(root, size)
    reindex(Store(root))
    read = record_reads(monkeypatch)
    found = _merged(root)
    assert found == [{m["id"] for m in pair}]
    assert not {f"{m['id']}.json" for m in loners} & set(read) and len(read) >= size - 2
    # an index without the lengths (written before them): the same plan, every text read
    path, index = _entries(root)
    for entry in index["entries"]:
        del entry["sort_len"]
    path.write_text(json.dumps(index))
    read.clear()
    assert _merged(root) == found and {f"{m['id']}.json" for m in loners} <= set(read)


@pytest.mark.parametrize("size", [12, 60])
@pytest.mark.parametrize("damage", ["stale", "above_text_len", "negative", "string", "float", "bool", "missing"])
def test_a_lying_or_stale_sort_len_never_hides_a_pair(tmp_path: Path, size: int, damage: str) -> None:
    """A length in the index that would keep a true pair apart is not trusted when its file
    changed since (size or mtime) or when it cannot be true: the file is read and the pair
    found."""
    from memcli.store.memories import reindex

    root = tmp_path / "s"
    root.mkdir()
    (root / "memcli.toml").write_text("[consolidation]\nindex_pause_ms = 0\n")
    pair, _ = _length_block(root, size)
    reindex(Store(root))
    assert _merged(root) == [{m["id"] for m in pair}]
    path, index = _entries(root)
    entry = next(e for e in index["entries"] if e["id"] == pair[1]["id"])
    lie = {"stale": 3000, "above_text_len": entry["text_len"] + 3000, "negative": -1,
           "string": str(entry["sort_len"] + 3000), "float": float(entry["sort_len"]) * 40,
           "bool": True, "missing": None}[damage]
    if lie is None:
        del entry["sort_len"]
    else:
        entry["sort_len"] = lie
    if damage == "stale":  # the text length too, as a stale entry would have it
        entry["text_len"] = 3000
        target = root / "agent" / "coder" / entry["file"]
        st = target.stat()
        os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    path.write_text(json.dumps(index))
    assert _merged(root) == [{m["id"] for m in pair}]


def test_every_entry_written_carries_its_sort_len(store: Path) -> None:
    """`add` and a real run (its rewrites, archive moves and new copies) write index entries
    with the right `sort_len`; doctor finds every index up to date."""
    from typer.testing import CliRunner

    from memcli.cli import app

    runner = CliRunner()
    text = "The deploy job, after each release: restarts  the worker queue (on staging)"
    result = runner.invoke(app, ["--store", str(store), "add", "--type", "semantic", "--scope", "agent",
                                 "--scope-id", "coder", "--summary", "something else -- entirely"])
    assert result.exit_code == 0, result.output
    first = _entries(store)[1]["entries"]
    assert len(first) == 1 and first[0]["sort_len"] == len("else entirely something")
    add(store, summary=text)  # (an agent's, as a person's memory needs consent to be merged)
    add(store, summary=text.replace("each", "every"))
    outcome = engine.consolidate(Store(store))
    assert any(a["type"] == "merge" for a in outcome.actions), outcome.actions
    indices = list(store.glob("agent/*/_index.json")) + [store / "archive" / "_index.json"]
    entries = [(path.parent, e) for path in indices for e in json.loads(path.read_text())["entries"]]
    assert len(entries) >= 3
    for folder, entry in entries:
        content = json.loads((folder / entry["file"]).read_text())["content"]
        assert entry["sort_len"] == len(similar.sorted_tokens(rules.content_text(content)))
    result = runner.invoke(app, ["--store", str(store), "--json", "doctor"])
    assert json.loads(result.stdout)["ok"] is True, result.stdout


def test_a_dry_run_keeps_no_record_of_a_file_it_reads_only_to_sign(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """A large block's dry run reads its members' files to sign their texts without the
    memories keeping the records (`BlockTexts.peeked`): only those of the pair it merges are
    kept (read again to guard and merge it), and the plan is the one found keeping them all."""
    from memcli.store import reading
    from memcli.store.memories import reindex

    root = tmp_path / "s"
    root.mkdir()
    (root / "memcli.toml").write_text("[consolidation]\nindex_pause_ms = 0\n")
    pair, _ = _length_block(root, 60)
    reindex(Store(root))
    kept: list[str] = []
    share = reading.share_facts

    def spy(record: dict[str, Any], mem: Any, folder: Any) -> None:  # a record kept by its memory
        kept.append(mem.id)
        share(record, mem, folder)

    monkeypatch.setattr(reading, "share_facts", spy)
    read = record_reads(monkeypatch)
    found = _merged(root)
    assert found == [{m["id"] for m in pair}]
    assert set(kept) == {m["id"] for m in pair} and len(read) >= 56 + len(kept)
    kept.clear()
    monkeypatch.setattr(pairsearch, "peeked_content", lambda mem: mem.content)  # every record kept
    assert _merged(root) == found and len(kept) >= 56
