"""The learned "similar" test of rule 3.1 (memcli.consolidate.learned): its edges, the
threshold it honours, the signals it reads, and the weights its fitting script reproduces."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from rapidfuzz import fuzz
from rapidfuzz.utils import default_process

from memcli.consolidate import learned, rules
from memcli.consolidate.learned import FLOOR_GAP, OFFSET, WEIGHTS, PairSignals
from memcli.consolidate.textfeatures import TextFeatures

SIGNALS = PairSignals(ratio=0.8, partial=0.9, length_ratio=0.9, jaccard=0.7)


def bonus(signals: PairSignals) -> float:
    """What the signals add to the similarity (the adjusted similarity minus it)."""
    return learned.adjusted_similarity(0.0, signals)


def signals_of(a: str, b: str) -> tuple[float, PairSignals]:
    left, right = default_process(a), default_process(b)
    score = rules.similarity(left, right, plain=(TextFeatures(a).plain, TextFeatures(b).plain))
    return score, learned.pair_signals(left, right, TextFeatures(a), TextFeatures(b))


def test_adjusted_similarity_is_the_similarity_plus_the_weighted_signals() -> None:
    expected = (0.85 + OFFSET + WEIGHTS["ratio"] * 0.8 + WEIGHTS["partial"] * 0.9
                + WEIGHTS["length_ratio"] * 0.9 + WEIGHTS["jaccard"] * 0.7)
    assert learned.adjusted_similarity(0.85, SIGNALS) == pytest.approx(expected)
    # in the similarity's unit: one more point of similarity is one more point adjusted
    assert learned.adjusted_similarity(0.86, SIGNALS) - learned.adjusted_similarity(0.85, SIGNALS) == pytest.approx(0.01)


def test_a_pair_just_above_the_boundary_is_similar_just_below_is_not() -> None:
    at = 0.80 - bonus(SIGNALS)  # the similarity whose adjusted similarity is exactly 0.80
    assert 0.80 - FLOOR_GAP < at < 1.0
    assert learned.similar_enough(at + 1e-6, SIGNALS, 0.80)
    assert not learned.similar_enough(at - 1e-6, SIGNALS, 0.80)
    assert not learned.similar_enough(at, SIGNALS, 0.80)  # "above", as the plain rule's ">"


def test_a_pair_above_the_threshold_may_not_be_similar() -> None:
    # One text is the other with words added: matched inside the longer one (partial high),
    # out of order and shorter (ratio, length ratio low). The plain rule took it at 0.84.
    weak = PairSignals(ratio=0.55, partial=1.0, length_ratio=0.6, jaccard=0.6)
    assert learned.adjusted_similarity(0.84, weak) < 0.80
    assert not learned.similar_enough(0.84, weak, 0.80)


def test_the_floor_holds_whatever_the_signals() -> None:
    strong = PairSignals(ratio=1.0, partial=0.5, length_ratio=1.0, jaccard=1.0)
    floor = 0.80 - FLOOR_GAP
    assert learned.adjusted_similarity(floor, strong) > 0.80
    assert not learned.similar_enough(floor, strong, 0.80)
    assert learned.similar_enough(floor + 1e-6, strong, 0.80)


def test_the_configured_threshold_is_honoured_in_the_same_unit() -> None:
    at = 0.80 - bonus(SIGNALS)
    score = at + 0.02  # adjusted 0.82
    assert learned.similar_enough(score, SIGNALS, 0.80)
    assert learned.similar_enough(score, SIGNALS, 0.8199)
    assert not learned.similar_enough(score, SIGNALS, 0.8201)  # a stricter threshold
    assert not learned.similar_enough(score, SIGNALS, 0.90)
    lower = at - 0.05  # not similar at 0.80, similar at a looser 0.70
    assert not learned.similar_enough(lower, SIGNALS, 0.80)
    assert learned.similar_enough(lower, SIGNALS, 0.70)


def test_equal_texts_are_similar_at_any_threshold_below_one() -> None:
    same = PairSignals(1.0, 1.0, 1.0, 1.0)
    assert learned.similar_enough(1.0, same, 0.99)
    assert not learned.similar_enough(1.0, same, 1.0)


def test_only_the_scorer_the_weights_were_fitted_for() -> None:
    assert learned.applies("token_sort_ratio")
    assert not learned.applies("ratio") and not learned.applies("WRatio")


def test_pair_signals_read_the_normalised_texts_and_the_content_words() -> None:
    a, b = "Deploy the API on Friday.", "Deploy the API on Friday after the freeze."
    left, right = default_process(a), default_process(b)
    signals = learned.pair_signals(left, right, TextFeatures(a), TextFeatures(b))
    assert signals.ratio == pytest.approx(fuzz.ratio(left, right) / 100)
    assert signals.partial == 1.0  # the shorter text is all inside the longer one
    assert signals.length_ratio == pytest.approx(5 / 8)
    # content words: deploy, api, friday / deploy, api, friday, freeze ("after", "the", "on" are function words)
    assert signals.jaccard == pytest.approx(3 / 4)
    assert learned.pair_signals(left, left, TextFeatures(a), TextFeatures(a)) == PairSignals(1.0, 1.0, 1.0, 1.0)


def test_memory_pairs_either_side_of_the_plain_threshold() -> None:
    # bench/pairs.jsonl s-trivial-20: a restatement at 0.78 the learned rule takes ...
    score, signals = signals_of("Add a down migration to every Alembic revision.",
                                "Add a downgrade step to every Alembic revision.")
    assert 0.77 < score < 0.80 and learned.similar_enough(score, signals, 0.80)
    # ... and s-reword-03, a restatement at 0.88 it does not (subject and object trade
    # places: the order-keeping ratio is low). The rule's cost on the memory pairs.
    score, signals = signals_of("Deployments are done with GitHub Actions.", "GitHub Actions does the deployments.")
    assert score > 0.80 and not learned.similar_enough(score, signals, 0.80)


BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.mark.slow
def test_the_fitting_script_reproduces_the_weights() -> None:
    sys.path.insert(0, str(BENCH))
    try:
        import fit_merge_rule as fitting
        import mrpc
        import pairs as memory_pairs
    finally:
        sys.path.remove(str(BENCH))
    if not (mrpc.DEFAULT_DATA / "msr_paraphrase_train.txt").exists():
        pytest.skip("MRPC data not present")
    train = mrpc.load_split(mrpc.DEFAULT_DATA, "train")
    mrpc_ex, plain_tp, _ = fitting.candidates([(p.label, p.text_a, p.text_b) for p in train], "mrpc")
    memory_ex, _, _ = fitting.candidates([(p.label, p.a, p.b) for p in memory_pairs.load_pairs()], "memory")
    examples = mrpc_ex + memory_ex
    weights, offset = fitting.rescaled(fitting.fit(examples), examples, plain_tp)
    assert [round(w, 4) for w in weights] == [WEIGHTS[name] for name in fitting.SIGNALS]
    assert round(offset, 4) == OFFSET


def test_the_decision_without_partial_where_it_cannot_matter_is_the_full_one(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """similar_pair skips partial_ratio when the bounds decide (helper guards6): the same
    answer as the full signals for every memory pair, at thresholds and similarities around
    the bounds, both orders."""
    import json

    pairs = [json.loads(line) for line in (Path(__file__).parents[2] / "bench" / "pairs.jsonl").open()]
    pairs += [{"a": "x", "b": "x"}, {"a": "The cache is warm.", "b": "The cache is warm."}]
    checked = skipped = 0
    calls = {"n": 0}
    original = learned._partial

    def counted(left: str, right: str) -> float:
        calls["n"] += 1
        return original(left, right)

    monkeypatch.setattr(learned, "_partial", counted)
    for pair in pairs:
        for a, b in ((pair["a"], pair["b"]), (pair["b"], pair["a"])):
            similarity, signals = signals_of(a, b)
            left, right = default_process(a), default_process(b)
            features = (TextFeatures(a), TextFeatures(b))
            for threshold in (0.5, 0.77, 0.8, 0.9, 1.0):
                for score in {similarity, threshold, threshold - FLOOR_GAP, threshold + 0.01, 1.0}:
                    before = calls["n"]
                    assert learned.similar_pair(score, left, right, *features, threshold) is \
                        learned.similar_enough(score, signals, threshold)
                    checked += 1
                    skipped += calls["n"] == before
    assert checked > 4000 and 0 < skipped < checked  # the bounds decide most, not all
