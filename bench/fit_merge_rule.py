"""Fit the learned "similar" rule of :mod:`memcli.consolidate.learned` and cross-validate it.

    python bench/fit_merge_rule.py [--data DIR] [--pairs bench/pairs.jsonl] [--folds 5] [--repeats 10]

Uses MRPC *train* and the memory pairs only (never the test split). The pairs it learns from
are those the rule could merge: similarity within the second-look band or above
(>= 0.70, the candidates a run finds) and no guard rejecting them. For each such pair it
computes the similarity (as the engine does) and :func:`memcli.consolidate.learned.pair_signals`,
fits an L2-regularised logistic regression (numpy, Newton steps; lambda 1 on standardised
signals; MRPC and memory pairs weighted alike), rescales it to the similarity's unit, and sets
the offset so that at the threshold 0.80 it merges as many train paraphrases as the plain rule
``similarity > 0.80`` does (with the floor ``similarity > 0.80 - FLOOR_GAP``).

It prints (1) the k-fold cross-validated frontier on train: false merges and paraphrases
merged by the plain rule and by the learned rule, its operating point chosen within the
training folds at the plain rule's recall; the memory pairs' held-out figures beside them;
(2) the weights and offset of the fit on all of it, the literal table
``memcli/consolidate/learned.py`` holds.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
from rapidfuzz import fuzz
from rapidfuzz.utils import default_process

ROOT = Path(__file__).resolve().parents[1]
for where in (ROOT, ROOT / "bench"):
    if str(where) not in sys.path:  # run as a script from a checkout that is not installed
        sys.path.insert(0, str(where))

import mrpc  # noqa: E402
import pairs as memory_pairs  # noqa: E402

from memcli.consolidate import learned, rules  # noqa: E402
from memcli.consolidate.guards import guard_rejects  # noqa: E402
from memcli.consolidate.textfeatures import TextFeatures  # noqa: E402

THRESHOLD = 0.80
SIGNALS = ("ratio", "partial", "length_ratio", "jaccard")
LAMBDA = 1.0


class Example(NamedTuple):
    """One candidate pair: where it comes from, its label, similarity and signals."""

    source: str  # "mrpc" or "memory"
    label: int
    similarity: float
    signals: tuple[float, ...]


def candidates(texts: Sequence[tuple[int, str, str]], source: str) -> tuple[list[Example], int, int]:
    """The pairs the rule could merge, and how many paraphrases and different pairs of all
    ``texts`` (label, a, b) the plain rule ``similarity > 0.80`` merges (guards on)."""
    out: list[Example] = []
    plain_tp = plain_fm = 0
    for label, a, b in texts:
        left, right = default_process(a), default_process(b)
        raw = fuzz.token_sort_ratio(left, right, processor=None) / 100.0
        if raw < round(THRESHOLD - rules.SECOND_LOOK_BAND, 4):  # as the engine's band
            continue
        fa, fb = TextFeatures(a), TextFeatures(b)
        score = raw if raw > THRESHOLD else rules.similarity(left, right, plain=(fa.plain, fb.plain))
        if guard_rejects(fa, fb) is not None:
            continue
        if score > THRESHOLD:
            plain_tp += label
            plain_fm += 1 - label
        out.append(Example(source, label, score, tuple(learned.pair_signals(left, right, fa, fb))))
    return out, plain_tp, plain_fm


def _matrix(examples: Sequence[Example]) -> np.ndarray[Any, Any]:
    return np.array([[e.similarity, *e.signals] for e in examples], dtype=float)


def fit(examples: Sequence[Example], lam: float = LAMBDA) -> np.ndarray[Any, Any]:
    """Logistic regression on [similarity, signals...]: weights in the raw features' units,
    then the bias (last). Standardised for the fit; the penalty spares the bias."""
    x = _matrix(examples)
    y = np.array([e.label for e in examples], dtype=float)
    mean, scale = x.mean(axis=0), x.std(axis=0) + 1e-12
    z = np.hstack([(x - mean) / scale, np.ones((len(x), 1))])
    beta = np.zeros(z.shape[1])
    penalty = lam * np.eye(z.shape[1])
    penalty[-1, -1] = 0.0
    for _ in range(100):
        p = 1.0 / (1.0 + np.exp(-z @ beta))
        gradient = z.T @ (p - y) + penalty @ beta
        hessian = z.T @ (z * (p * (1 - p))[:, None]) + penalty
        step = np.linalg.solve(hessian, gradient)
        beta -= step
        if np.abs(step).max() < 1e-10:
            break
    weights = beta[:-1] / scale
    return np.append(weights, beta[-1] - (weights * mean).sum())


def rescaled(beta: np.ndarray[Any, Any], train: Sequence[Example],
             target_tp: int) -> tuple[list[float], float]:
    """Weights of the signals in the similarity's unit and the offset that puts THRESHOLD at
    ``target_tp`` paraphrases merged among the MRPC examples of ``train`` (floor applied)."""
    weights = beta[1:-1] / beta[0]
    adjusted = _adjusted(train, list(weights), 0.0)
    allowed = [a for a, e in zip(adjusted, train, strict=True)
               if e.source == "mrpc" and e.label == 1 and e.similarity > THRESHOLD - learned.FLOOR_GAP]
    allowed.sort(reverse=True)
    cut = allowed[min(target_tp, len(allowed)) - 1]
    # merge when adjusted > THRESHOLD: the pair at the cut must pass, so set it a hair above
    return list(weights), THRESHOLD - cut + 1e-9


def _adjusted(examples: Sequence[Example], weights: Sequence[float], offset: float) -> list[float]:
    return [e.similarity + offset + sum(w * s for w, s in zip(weights, e.signals, strict=True))
            for e in examples]


def merged(examples: Sequence[Example], weights: Sequence[float], offset: float) -> tuple[int, int]:
    """(different pairs, paraphrases) the learned rule merges among ``examples``."""
    fm = tp = 0
    for e, value in zip(examples, _adjusted(examples, weights, offset), strict=True):
        if e.similarity > THRESHOLD - learned.FLOOR_GAP and value > THRESHOLD:
            fm += 1 - e.label
            tp += e.label
    return fm, tp


def cross_validate(mrpc_ex: list[Example], memory_ex: list[Example], plain_tp: int, folds: int,
                   repeats: int, seed: int = 0) -> dict[str, float]:
    """Mean held-out figures over ``repeats`` k-fold splits of both sets: the learned rule fitted
    on the other folds, its offset set there at the plain rule's train recall (scaled to the
    folds' size), against the plain rule on the same held-out pairs."""
    rng = np.random.default_rng(seed)
    sums = np.zeros(6)
    for _ in range(repeats):
        parts_m = np.array_split(rng.permutation(len(mrpc_ex)), folds)
        parts_e = np.array_split(rng.permutation(len(memory_ex)), folds)
        for k in range(folds):
            train = [mrpc_ex[i] for j in range(folds) if j != k for i in parts_m[j]]
            train += [memory_ex[i] for j in range(folds) if j != k for i in parts_e[j]]
            n_train = sum(e.source == "mrpc" for e in train)
            weights, offset = rescaled(fit(train), train, round(plain_tp * n_train / len(mrpc_ex)))
            held_m = [mrpc_ex[i] for i in parts_m[k]]
            held_e = [memory_ex[i] for i in parts_e[k]]
            fm, tp = merged(held_m, weights, offset)
            mfm, mtp = merged(held_e, weights, offset)
            base_fm = sum(e.similarity > THRESHOLD and not e.label for e in held_m)
            base_tp = sum(e.similarity > THRESHOLD and e.label for e in held_m)
            sums += (fm, tp, mfm, mtp, base_fm, base_tp)
    mean = sums / repeats
    return dict(zip(("learned_fm", "learned_tp", "memory_fm", "memory_tp", "plain_fm", "plain_tp"),
                    (round(float(v), 1) for v in mean), strict=True))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=mrpc.DEFAULT_DATA, help="MRPC folder")
    parser.add_argument("--pairs", type=Path, default=memory_pairs.DEFAULT_PAIRS, help="memory pairs")
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args(argv)
    train = mrpc.load_split(args.data, "train")  # never the test split
    mrpc_ex, plain_tp, plain_fm = candidates([(p.label, p.text_a, p.text_b) for p in train], "mrpc")
    mem = memory_pairs.load_pairs(args.pairs)
    memory_ex, mem_tp, mem_fm = candidates([(p.label, p.a, p.b) for p in mem], "memory")
    print(f"MRPC train: {len(train)} pairs, {len(mrpc_ex)} candidates; plain rule merges "
          f"{plain_fm} different pairs, {plain_tp} paraphrases")
    print(f"memory pairs: {len(mem)} pairs, {len(memory_ex)} candidates; plain rule merges "
          f"{mem_fm} must-not-merge, {mem_tp} should-merge")
    cv = cross_validate(mrpc_ex, memory_ex, plain_tp, args.folds, args.repeats)
    print(f"{args.folds}-fold CV x {args.repeats} (held-out sums, mean over repeats): plain rule "
          f"{cv['plain_fm']} false merges / {cv['plain_tp']} paraphrases; learned "
          f"{cv['learned_fm']} / {cv['learned_tp']}; memory pairs held out: "
          f"{cv['memory_fm']} must-not-merge / {cv['memory_tp']} should-merge merged")
    examples = mrpc_ex + memory_ex
    weights, offset = rescaled(fit(examples), examples, plain_tp)
    fm, tp = merged(mrpc_ex, weights, offset)
    mfm, mtp = merged(memory_ex, weights, offset)
    print(f"fit on all: MRPC train {fm} / {tp}; memory pairs {mfm} / {mtp}")
    print("WEIGHTS = {" + ", ".join(f'"{n}": {w:.4f}' for n, w in zip(SIGNALS, weights, strict=True)) + "}")
    print(f"OFFSET = {offset:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
