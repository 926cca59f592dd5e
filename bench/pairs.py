"""Measure the duplicate rule and its guards on memcli's own labelled memory pairs.

    python bench/pairs.py [--pairs bench/pairs.jsonl] [--learned-rule] [--semantic] [--json] [--misses]
                          [--store DIR]

``bench/pairs.jsonl`` holds pairs of agent memories written for this purpose, one JSON object
a line: ``id``, ``label`` (0: must not merge, they state different facts; 1: should merge, one
restates the other), ``class`` (what makes them differ or agree: numbers, roles, substitution,
qualifier, ..., reorder, passive, paraphrase, ...), ``kind`` (config, command, owners, ...) and
the two texts ``a`` and ``b``.

Each pair goes through the rule as the engine applies it to two memories of one block with
the same tags: content similarity (:func:`memcli.consolidate.rules.similarity` on the
normalised texts) above 0.80 (with ``--learned-rule``: found similar at 0.80 by the opt-in
learned rule, :func:`memcli.consolidate.learned.similar_enough`, as with
``consolidation.learned_rule = true``), and no guard rejecting the raw texts; with ``--semantic`` (the
``memcli[semantic]`` extra installed), also a pair whose embeddings' cosine is above
:data:`memcli.consolidate.semantic.THRESHOLD`, guards still deciding. It prints, per label and
class, how many pairs the rule merges, which guard stopped the others, and the guards' cost
per pair.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script from a checkout that is not installed
    sys.path.insert(0, str(ROOT))

from memcli.consolidate import learned, rules  # noqa: E402
from memcli.consolidate.guards import guard_rejects  # noqa: E402
from memcli.consolidate.textfeatures import TextFeatures, features  # noqa: E402

DEFAULT_PAIRS = ROOT / "bench" / "pairs.jsonl"
THRESHOLD = 0.80


class Pair(NamedTuple):
    """One labelled pair of memory texts."""

    id: str
    label: int
    cls: str
    kind: str
    a: str
    b: str


def load_pairs(path: Path = DEFAULT_PAIRS) -> list[Pair]:
    """Read the JSON-lines pair file; a malformed line is an error naming its number."""
    pairs: list[Pair] = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
            pairs.append(Pair(str(raw["id"]), int(raw["label"]), str(raw["class"]), str(raw["kind"]),
                              str(raw["a"]), str(raw["b"])))
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"{path}:{number}: not a pair ({exc})") from exc
    return pairs


def similarity(a: str, b: str) -> float:
    """The rule's content similarity of two raw texts, as the engine finds it: the scorer on
    the normalised texts and, for a pair within the second-look band below the threshold, the
    second look (articles aside, plain forms)."""
    left, right = rules.content_text({"summary": a}), rules.content_text({"summary": b})
    score = rules.similarity(left, right)
    if THRESHOLD - rules.SECOND_LOOK_BAND <= score <= THRESHOLD:
        score = rules.similarity(left, right, plain=(features(a).plain, features(b).plain))
    return score


def cosines(pairs: Sequence[Pair]) -> list[float]:
    """Cosine of each pair's embeddings (the semantic extra must be installed)."""
    from memcli.consolidate import semantic

    left, right = semantic.embed([p.a for p in pairs]), semantic.embed([p.b for p in pairs])
    return [float(x) for x in (left * right).sum(axis=1)]


def similar(a: str, b: str, score: float, learned_rule: bool = False) -> bool:
    """Whether the rule finds two raw texts similar: the similarity above the threshold (the
    engine's default, SPEC 3.1), or with ``learned_rule``
    :func:`memcli.consolidate.learned.similar_enough` (the opt-in)."""
    if not learned_rule:
        return score > THRESHOLD
    if score <= THRESHOLD - learned.FLOOR_GAP:
        return False
    left, right = rules.content_text({"summary": a}), rules.content_text({"summary": b})
    signals = learned.pair_signals(left, right, features(a), features(b))
    return learned.similar_enough(score, signals, THRESHOLD)


def decide(pairs: Sequence[Pair], use_semantic: bool = False,
           learned_rule: bool = False) -> list[dict[str, Any]]:
    """The rule's verdict on each pair: similarity, cosine, the guard that spoke, merged."""
    cos = cosines(pairs) if use_semantic else [0.0] * len(pairs)
    from memcli.consolidate import semantic

    out = []
    for pair, cosine in zip(pairs, cos, strict=True):
        score = similarity(pair.a, pair.b)
        by_text = similar(pair.a, pair.b, score, learned_rule)
        by_meaning = use_semantic and not by_text and score <= THRESHOLD and cosine > semantic.THRESHOLD
        guard = guard_rejects(pair.a, pair.b) if by_text or by_meaning else None
        out.append({"id": pair.id, "label": pair.label, "class": pair.cls, "similarity": round(score, 4),
                    "cosine": round(cosine, 4) if use_semantic else None, "guard": guard,
                    "merged": (by_text or by_meaning) and guard is None, "by_meaning": by_meaning})
    return out


def summarise(verdicts: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Merged share per label and per class, and the guards that spoke (first) per label."""
    result: dict[str, Any] = {}
    for label, name in ((0, "must_not_merge"), (1, "should_merge")):
        rows = [v for v in verdicts if v["label"] == label]
        classes = sorted({v["class"] for v in rows})
        result[name] = {
            "pairs": len(rows),
            "above_threshold": sum(v["similarity"] > THRESHOLD for v in rows),
            "merged": sum(v["merged"] for v in rows),
            "merged_by_meaning": sum(v["merged"] and v["by_meaning"] for v in rows),
            "rate": round(sum(v["merged"] for v in rows) / len(rows), 4) if rows else 0.0,
            "by_class": {c: {"pairs": sum(v["class"] == c for v in rows),
                             "merged": sum(v["merged"] for v in rows if v["class"] == c)} for c in classes},
            "guards": dict(Counter(v["guard"] for v in rows if v["guard"])),
        }
    return result


def guard_cost(texts: Sequence[tuple[str, str]], repeat: int = 5) -> dict[str, float]:
    """Microseconds: analysing one text for the guards, comparing one pair of analysed texts
    (what the engine pays per pair: every text is analysed once a run), comparing one pair
    from its raw texts with nothing kept between pairs (what a caller would pay that analysed
    both texts again for every pair), making one text's plain form (paid once a run by a
    text the second look compares), and the learned similar rule's signals and decision for
    one pair of analysed texts. Median of ``repeat`` rounds over all the pairs."""
    from memcli.consolidate.guards import GUARDS, guard_function

    def one_round() -> tuple[float, float]:
        features = [(TextFeatures(a), TextFeatures(b)) for a, b in texts]
        start = time.process_time()
        for fa, fb in features:  # every guard, not just the first that fires: the worst case
            for name in GUARDS:
                guard_function(name)(fa, fb)
        first = time.process_time() - start
        start = time.process_time()
        for fa, fb in features:
            for name in GUARDS:
                guard_function(name)(fa, fb)
        warm = time.process_time() - start
        return (first - warm) / (2 * len(texts)), warm / len(texts)

    def plain_round() -> float:
        fresh = [TextFeatures(t) for pair in texts for t in pair]
        start = time.process_time()
        for text in fresh:
            text.plain  # noqa: B018 (computed on first use)
        return (time.process_time() - start) / len(fresh)

    def unshared_round() -> float:
        start = time.process_time()
        for a, b in texts:
            fa, fb = TextFeatures(a), TextFeatures(b)
            for name in GUARDS:
                guard_function(name)(fa, fb)
        return (time.process_time() - start) / len(texts)

    def learned_round() -> float:
        # the learned "similar" rule's signals and decision, texts analysed before (as in a run)
        ready = [(rules.content_text({"summary": a}), rules.content_text({"summary": b}),
                  TextFeatures(a), TextFeatures(b)) for a, b in texts]
        for left, right, fa, fb in ready:
            learned.pair_signals(left, right, fa, fb)  # the per-text parts, once a run
        start = time.process_time()
        for left, right, fa, fb in ready:
            learned.similar_enough(0.8, learned.pair_signals(left, right, fa, fb), THRESHOLD)
        return (time.process_time() - start) / len(texts)

    rounds = sorted(one_round() for _ in range(repeat))
    per_text, per_pair = rounds[len(rounds) // 2]
    plain = sorted(plain_round() for _ in range(repeat))[repeat // 2]
    unshared = sorted(unshared_round() for _ in range(repeat))[repeat // 2]
    rule = sorted(learned_round() for _ in range(repeat))[repeat // 2]
    return {"per_text_us": round(per_text * 1e6, 1), "per_pair_us": round(per_pair * 1e6, 1),
            "per_pair_unshared_us": round(unshared * 1e6, 1),
            "plain_us": round(plain * 1e6, 1), "learned_rule_us": round(rule * 1e6, 1), "pairs": len(texts)}


def store_pairs(store: Path) -> list[tuple[str, str]]:
    """The raw texts of every pair the duplicate rule hands to the guards in a dry run of
    ``store`` (pairs above the threshold, as the engine finds them). A dry run writes no
    memory; it may write its caches under ``.cache/``."""
    from memcli.consolidate import engine, rules
    from memcli.consolidate.pairsearch import PairSearch
    from memcli.store.store import Store

    seen: list[tuple[str, str]] = []
    original = PairSearch._guard

    def recording(self: PairSearch, older: Any, newer: Any) -> str | None:
        seen.append((rules.raw_text(older.mem.content), rules.raw_text(newer.mem.content)))
        return original(self, older, newer)

    PairSearch._guard = recording  # type: ignore[method-assign]
    try:
        engine.consolidate(Store.open(str(store)), dry_run=True)
    finally:
        PairSearch._guard = original  # type: ignore[method-assign]
    return seen


def format_report(result: dict[str, Any], misses: Sequence[dict[str, Any]] = ()) -> str:
    lines = []
    for name in ("must_not_merge", "should_merge"):
        part = result[name]
        lines.append(f"{name}: {part['merged']} of {part['pairs']} merged ({part['rate']:.1%}); "
                     f"{part['above_threshold']} above the similarity threshold"
                     + (f"; {part['merged_by_meaning']} by meaning" if part["merged_by_meaning"] else ""))
        for cls, counts in part["by_class"].items():
            lines.append(f"  {cls:<14} {counts['merged']:>3} of {counts['pairs']:>3} merged")
        lines.append("  guards (first to reject): "
                     + (", ".join(f"{g} {n}" for g, n in sorted(part["guards"].items())) or "none"))
    for key in [k for k in result if k.startswith("cost")]:
        cost, where = result[key], key[len("cost"):].strip() or "these pairs"
        lines.append(f"guard cost ({where}): {cost['per_text_us']} us to analyse a text, "
                     f"{cost['per_pair_us']} us to compare a pair (all guards; "
                     f"{cost['per_pair_unshared_us']} us with both texts analysed again for the "
                     f"pair), over {cost['pairs']} pairs; the plain form for the second look: "
                     f"{cost['plain_us']} us a text; the learned similar rule: "
                     f"{cost['learned_rule_us']} us a pair")
    for verdict in misses:
        lines.append(f"  miss {verdict['id']}: similarity {verdict['similarity']}"
                     + (f", cosine {verdict['cosine']}" if verdict["cosine"] is not None else "")
                     + f", guard {verdict['guard']}")
    return "\n".join(lines)


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=Path, default=DEFAULT_PAIRS, help="JSON-lines pair file")
    parser.add_argument("--semantic", action="store_true", help="also merge by embedding cosine")
    parser.add_argument("--misses", action="store_true", help="list the pairs the rule gets wrong")
    parser.add_argument("--learned-rule", action="store_true",
                        help="decide with the opt-in learned rule (consolidation.learned_rule = true), "
                             "not the similarity alone")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--store", type=Path, action="append", default=[],
                        help="also measure the guards' cost on the pairs a dry run of this store "
                             "guards (repeatable; e.g. a store of bench/generate.py)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse_args(argv)
    try:
        pairs = load_pairs(args.pairs)
    except (OSError, ValueError) as exc:
        print(f"cannot read the pairs: {exc}", file=sys.stderr)
        return 1
    if args.semantic:
        from memcli.consolidate import semantic

        if not semantic.available():
            print("--semantic needs the semantic extra: pip install 'memcli[semantic]'", file=sys.stderr)
            return 2
    verdicts = decide(pairs, args.semantic, args.learned_rule)
    result = summarise(verdicts)
    result["cost"] = guard_cost([(p.a, p.b) for p in pairs])
    for store in args.store:
        found = store_pairs(store)
        if found:
            result[f"cost {store}"] = guard_cost(found)
    misses = [v for v in verdicts if v["merged"] != bool(v["label"])] if args.misses else []
    print(json.dumps(result, indent=2) if args.json else format_report(result, misses))
    return 0


if __name__ == "__main__":
    sys.exit(main())
