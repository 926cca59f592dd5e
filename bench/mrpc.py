"""Measure the duplicate rule and its guards on the Microsoft Research Paraphrase Corpus.

    python bench/mrpc.py [--data DIR] [--scorer NAME]... [--threshold 0.80] [--split train]
                         [--learned-rule] [--semantic] [--json]

MRPC pairs are news sentences labelled 1 (paraphrase) or 0 (related but not equivalent).
For each split and scorer this prints, at the merge threshold:

- false-merge rate: share of label-0 pairs the rule would merge (found similar and, with
  guards, no guard rejecting; similar is similarity > threshold, as the engine decides by
  default; with ``--learned-rule``, for ``token_sort_ratio``, the opt-in learned rule of
  :mod:`memcli.consolidate.learned` at the threshold, ``consolidation.learned_rule = true``);
- recall: share of label-1 pairs it would merge;
- per guard, how many above-threshold pairs of each label it rejects: first (the reason the
  engine would log, in GUARDS order) and alone (the guard on its own).

Similarity is the rule's (:func:`memcli.consolidate.rules.similarity`: the scorer on the
normalised texts; for a pair within 0.10 below the threshold, the second look, the higher of
that and the scorer on the texts without their articles and on their plain forms,
:func:`memcli.consolidate.restate.plain_form`). With
``--semantic`` (the ``memcli[semantic]`` extra installed) a pair also merges when its
embeddings' cosine is above :data:`memcli.consolidate.semantic.THRESHOLD` and no guard rejects
it; the figures are printed for the default scorer.

The data directory is ``$MEMCLI_MRPC_DATA``, else the first ``shared/data/mrpc`` found beside
the repository or one level up, and holds ``msr_paraphrase_train.txt`` and
``msr_paraphrase_test.txt`` (tab-separated, with a header: Quality, #1 ID, #2 ID, #1 String,
#2 String). Guards were tuned on train only.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from rapidfuzz import fuzz, process
from rapidfuzz.utils import default_process

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script from a checkout that is not installed
    sys.path.insert(0, str(ROOT))

from memcli.consolidate import learned, rules  # noqa: E402
from memcli.consolidate.guards import GUARDS, guard_function, guard_rejects  # noqa: E402
from memcli.consolidate.textfeatures import features  # noqa: E402


def _default_data() -> Path:
    """$MEMCLI_MRPC_DATA, else the first shared/data/mrpc next to the checkout or above it."""
    if os.environ.get("MEMCLI_MRPC_DATA"):
        return Path(os.environ["MEMCLI_MRPC_DATA"])
    candidates = [base / "shared" / "data" / "mrpc" for base in (ROOT.parent, ROOT.parent.parent)]
    return next((c for c in candidates if c.is_dir()), candidates[0])


DEFAULT_DATA = _default_data()
SPLITS = ("train", "test")
DEFAULT_SCORERS = ("token_sort_ratio", "ratio", "token_set_ratio", "partial_ratio", "WRatio")
DEFAULT_THRESHOLD = 0.80


class Pair(NamedTuple):
    """One labelled MRPC sentence pair."""

    label: int
    text_a: str
    text_b: str


def parse_pairs(lines: Iterable[str]) -> list[Pair]:
    """Parse MRPC rows (header line first).

    A row is ``label, id, id, text, text``. The published train file has one line where the
    newline between two rows is missing; the second row's label is then glued to the end of
    the first row's last text, and it is split back off here rather than dropped.
    """
    pairs: list[Pair] = []
    rows = iter(lines)
    next(rows, None)  # header
    for line in rows:
        fields = line.rstrip("\r\n").split("\t")
        while len(fields) >= 9 and fields[4][-1:] in ("0", "1"):
            pairs.append(Pair(int(fields[0]), fields[3], fields[4][:-1]))
            fields = [fields[4][-1], *fields[5:]]
        if len(fields) == 5 and fields[0] in ("0", "1"):
            pairs.append(Pair(int(fields[0]), fields[3], fields[4]))
    return pairs


def load_split(data_dir: Path, split: str) -> list[Pair]:
    """Read ``msr_paraphrase_<split>.txt`` from ``data_dir``."""
    path = data_dir / f"msr_paraphrase_{split}.txt"
    with path.open(encoding="utf-8-sig") as handle:  # the files start with a BOM
        return parse_pairs(handle)


def similarities(pairs: Sequence[Pair], scorer: str) -> list[float]:
    """Content similarity (0-1) of each pair, computed as the duplicate rule does."""
    left = [default_process(p.text_a) for p in pairs]
    right = [default_process(p.text_b) for p in pairs]
    scores = process.cpdist(left, right, scorer=getattr(fuzz, scorer), processor=None)
    out = [float(s) / 100.0 for s in scores]
    if scorer not in rules.SCORER_NAMES:
        return out
    # the rule's second look, for pairs just below the threshold: articles aside, and the
    # plain forms (attribution, spelling, number formats aside)
    near = DEFAULT_THRESHOLD - rules.SECOND_LOOK_BAND
    return [rules.similarity(a, b, scorer, plain=(features(p.text_a).plain, features(p.text_b).plain))
            if near <= s <= DEFAULT_THRESHOLD else s
            for p, a, b, s in zip(pairs, left, right, out, strict=True)]


def similar(pairs: Sequence[Pair], scores: Sequence[float], scorer: str, threshold: float,
            learned_rule: bool = False) -> list[bool]:
    """Whether the rule finds each pair similar, as the engine decides: the similarity above
    the threshold (SPEC 3.1, the default); with ``learned_rule`` and the scorer its weights were
    fitted for, :func:`memcli.consolidate.learned.similar_enough`."""
    if not learned_rule or not learned.applies(scorer):
        return [s > threshold for s in scores]
    return [s > threshold - learned.FLOOR_GAP and learned.similar_enough(s, learned.pair_signals(
        default_process(p.text_a), default_process(p.text_b), features(p.text_a), features(p.text_b)),
        threshold) for p, s in zip(pairs, scores, strict=True)]


def semantic_merges(pairs: Sequence[Pair], threshold: float, learned_rule: bool = False) -> dict[str, Any]:
    """With the semantic signal: the pairs the rule merges by text or by meaning (cosine,
    for a pair whose similarity is not above the threshold), guards deciding, as false-merge
    rate and recall."""
    from memcli.consolidate import semantic

    cos = (semantic.embed([p.text_a for p in pairs]) * semantic.embed([p.text_b for p in pairs])).sum(axis=1)
    scores = similarities(pairs, "token_sort_ratio")
    by_text = similar(pairs, scores, "token_sort_ratio", threshold, learned_rule)
    merged = [p for p, s, t, c in zip(pairs, scores, by_text, cos, strict=True)
              if (t or (s <= threshold and c > semantic.THRESHOLD))
              and guard_rejects(p.text_a, p.text_b) is None]
    totals = {lab: sum(1 for p in pairs if p.label == lab) for lab in (0, 1)}
    return {"cosine_threshold": semantic.THRESHOLD,
            "false_merge_rate": _rate(sum(p.label == 0 for p in merged), totals[0]),
            "recall": _rate(sum(p.label == 1 for p in merged), totals[1])}


def _rate(count: int, total: int) -> float:
    """count / total, 0.0 for an empty total."""
    return count / total if total else 0.0


def _guard_counts(above: Sequence[Pair]) -> dict[str, dict[str, dict[str, int]]]:
    """Per guard and label: pairs it rejects first (the logged reason) and on its own."""
    counts = {name: {"first": {"0": 0, "1": 0}, "alone": {"0": 0, "1": 0}} for name in GUARDS}
    for pair in above:
        label = str(pair.label)
        first = guard_rejects(pair.text_a, pair.text_b)
        if first is not None:
            counts[first]["first"][label] += 1
        for name in GUARDS:
            if guard_function(name)(pair.text_a, pair.text_b):
                counts[name]["alone"][label] += 1
    return counts


def measure_scorer(pairs: Sequence[Pair], scorer: str, threshold: float,
                   learned_rule: bool = False) -> dict[str, Any]:
    """False-merge rate and recall of one scorer, without and with guards."""
    found = similar(pairs, similarities(pairs, scorer), scorer, threshold, learned_rule)
    above = [p for p, f in zip(pairs, found, strict=True) if f]
    guarded = [p for p in above if guard_rejects(p.text_a, p.text_b) is None]
    totals = {lab: sum(1 for p in pairs if p.label == lab) for lab in (0, 1)}

    def count(selected: Sequence[Pair], label: int) -> int:
        return sum(1 for p in selected if p.label == label)

    return {
        "false_merge_rate": _rate(count(above, 0), totals[0]),
        "recall": _rate(count(above, 1), totals[1]),
        "false_merge_rate_guarded": _rate(count(guarded, 0), totals[0]),
        "recall_guarded": _rate(count(guarded, 1), totals[1]),
        "merged": {"0": count(above, 0), "1": count(above, 1)},
        "merged_guarded": {"0": count(guarded, 0), "1": count(guarded, 1)},
        "guards": _guard_counts(above),
    }


def measure(
    pairs: Sequence[Pair],
    scorers: Sequence[str] = DEFAULT_SCORERS,
    threshold: float = DEFAULT_THRESHOLD,
    semantic: bool = False,
    learned_rule: bool = False,
) -> dict[str, Any]:
    """All figures for one split: pair counts and, per scorer, :func:`measure_scorer`; with
    ``semantic``, :func:`semantic_merges` too; with ``learned_rule``, the opt-in learned rule
    decides which pairs are similar (``token_sort_ratio`` only)."""
    result = {
        "pairs": {"0": sum(1 for p in pairs if p.label == 0), "1": sum(p.label for p in pairs)},
        "threshold": threshold,
        "rule": "learned" if learned_rule else "plain",
        "scorers": {name: measure_scorer(pairs, name, threshold, learned_rule) for name in scorers},
    }
    if semantic:
        result["semantic"] = semantic_merges(pairs, threshold, learned_rule)
    return result


def format_report(split: str, result: dict[str, Any]) -> str:
    """Plain-text table of one split's figures."""
    pairs = result["pairs"]
    lines = [
        f"{split}: {pairs['0']} label-0 pairs, {pairs['1']} label-1 pairs, "
        f"similarity > {result['threshold']:.2f}"
        + (" (--learned-rule: token_sort_ratio decides by the learned rule)"
           if result.get("rule") == "learned" else ""),
        f"  {'scorer':<18} {'false-merge':>11} {'+guards':>8} {'recall':>8} {'+guards':>8}",
    ]
    for name, fig in result["scorers"].items():
        lines.append(
            f"  {name:<18} {fig['false_merge_rate']:>11.1%} {fig['false_merge_rate_guarded']:>8.1%}"
            f" {fig['recall']:>8.1%} {fig['recall_guarded']:>8.1%}"
        )
    if "semantic" in result:
        fig = result["semantic"]
        lines.append(f"  {'+ semantic ' + str(fig['cosine_threshold']):<18} {'':>11} "
                     f"{fig['false_merge_rate']:>8.1%} {'':>8} {fig['recall']:>8.1%}")
    for name, fig in result["scorers"].items():
        lines.append(f"  rejections above threshold, {name} (label-0 / label-1):")
        for guard, counts in fig["guards"].items():
            first, alone = counts["first"], counts["alone"]
            lines.append(
                f"    {guard:<13} first {first['0']:>4} / {first['1']:<5}"
                f" alone {alone['0']:>4} / {alone['1']:<5}"
            )
    return "\n".join(lines)


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="MRPC folder")
    parser.add_argument(
        "--scorer", action="append", dest="scorers", help="rapidfuzz.fuzz scorer (repeatable)"
    )
    parser.add_argument("--threshold", type=float, default=DEFAULT_THRESHOLD)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--semantic", action="store_true", help="also merge by embedding cosine")
    parser.add_argument("--learned-rule", action="store_true",
                        help="token_sort_ratio: decide with the opt-in learned rule "
                             "(consolidation.learned_rule = true), not the similarity alone")
    parser.add_argument("--split", choices=SPLITS, action="append", dest="splits",
                        help="measure only this split (repeatable; default: every split); tune on train")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: measure every split found in the data folder."""
    args = _parse_args(argv)
    scorers = tuple(args.scorers or DEFAULT_SCORERS)
    unknown = [name for name in scorers if not callable(getattr(fuzz, name, None))]
    if unknown:
        print(f"unknown scorer: {', '.join(unknown)}", file=sys.stderr)
        return 2
    if args.semantic:
        from memcli.consolidate import semantic

        if not semantic.available():
            print("--semantic needs the semantic extra: pip install 'memcli[semantic]'", file=sys.stderr)
            return 2
    results: dict[str, Any] = {}
    for split in args.splits or SPLITS:
        try:
            pairs = load_split(args.data, split)
        except FileNotFoundError as exc:
            print(f"missing MRPC file: {exc.filename}", file=sys.stderr)
            return 1
        results[split] = measure(pairs, scorers, args.threshold, args.semantic, args.learned_rule)
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        print("\n\n".join(format_report(split, res) for split, res in results.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
