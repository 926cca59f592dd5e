"""How well memcli/secrets.py masks: the labelled corpus (bench/secrets_corpus.py) for recall,
ordinary memory text for false positives, and its speed as a ratio to a floor measured in the
same run. Writes its own section of bench/RESULTS.md (between the `secrets` markers), leaving
the rest of the file as it is.

    .venv/bin/python bench/secrets_bench.py [--out bench/RESULTS.md] [--print]

Ordinary text: the corpus's sentences about secrets that hold none, every text of the demo
store (fixtures/demo-store), and memories made by the benchmark's generator (bench/generate.py,
whose vocabulary has `secret`, `token`, `rotate`, `vault`).
"""

from __future__ import annotations

import argparse
import random
import re
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import generate  # noqa: E402
from bench.secrets_corpus import ORDINARY, SAMPLES  # noqa: E402
from memcli.secrets import find_secret_spans, mask  # noqa: E402
from memcli.store.formats import decode  # noqa: E402

START, END = "<!-- secrets:start -->", "<!-- secrets:end -->"
GENERATED = 5_000


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def demo_texts() -> list[str]:
    """Each demo memory's text: every string of its record but ids and timestamps."""
    texts = []
    for path in sorted((ROOT / "fixtures" / "demo-store").rglob("mem_*")):
        if "runs" in path.parts or path.suffix not in (".json", ".md"):
            continue
        data = decode(path.read_bytes(), "md" if path.suffix == ".md" else "json")
        kept = {k: v for k, v in data.items() if k in ("content", "tags", "subtype")}
        texts.append(" ".join(_strings(kept)))
    return texts


def generated_texts(n: int = GENERATED) -> list[str]:
    rng = random.Random(7)
    return [generate._text(rng) for _ in range(n)]


def recall() -> tuple[int, dict[str, list[int]], list[str]]:
    by_family: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    missed = []
    for sample in SAMPLES:
        masked = mask(sample.text)
        ok = sample.secret not in masked and all(line not in masked for line in sample.secret.splitlines()
                                                 if len(line) >= 20 and "-----" not in line)
        family = by_family[sample.kind.split("-")[0]]
        family[0] += ok
        family[1] += 1
        if not ok:
            missed.append(sample.kind)
    return sum(v[0] for v in by_family.values()), dict(by_family), missed


def false_positives(texts: list[str]) -> tuple[int, int, int, list[str]]:
    """(texts with a span, spans, characters masked, a few examples)."""
    hit, spans, chars, examples = 0, 0, 0, []
    for text in texts:
        found = find_secret_spans(text)
        if found:
            hit += 1
            spans += len(found)
            chars += sum(b - a for a, b in found)
            examples += [text[a:b] for a, b in found][:2]
    return hit, spans, chars, examples[:5]


def speed(texts: list[str], rounds: int = 3) -> tuple[float, float, float]:
    """(seconds to mask, seconds of the floor, MB) over `texts` joined: the floor is one
    regex pass over the same text (`\\S+`), the least any scanner does."""
    blob = "\n".join(texts)
    floor_re = re.compile(r"\S+")
    floors, masks = [], []
    for _ in range(rounds):
        started = time.perf_counter()
        sum(1 for _ in floor_re.finditer(blob))
        floors.append(time.perf_counter() - started)
        started = time.perf_counter()
        mask(blob)
        masks.append(time.perf_counter() - started)
    return statistics.median(masks), statistics.median(floors), len(blob.encode()) / 1e6


def report() -> str:
    found, families, missed = recall()
    sets = {"corpus: sentences about secrets, holding none": ORDINARY, "demo store (fixtures/demo-store)":
            demo_texts(), f"generated memories (bench/generate.py, {GENERATED:,})": generated_texts()}
    lines = [START, "## Secret masking (memcli/secrets.py)", "",
             f"`python bench/secrets_bench.py`, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; "
             "the corpus is synthetic (bench/secrets_corpus.py: realistic shapes, no real key).", "",
             f"Recall on the labelled corpus: **{found} of {len(SAMPLES)}** secrets masked "
             f"({found / len(SAMPLES):.0%})" + (f"; missed: {', '.join(missed)}" if missed else "") + ".", "",
             "| family | masked |", "|---|---|"]
    lines += [f"| {family} | {ok}/{total} |" for family, (ok, total) in sorted(families.items())]
    lines += ["", "False positives on ordinary memory text (any span masked in a text that holds no secret):",
              "", "| text | texts | with a false positive | spans | characters masked |",
              "|---|---|---|---|---|"]
    for name, texts in sets.items():
        hit, spans, chars, examples = false_positives(texts)
        share = hit / max(len(texts), 1)
        lines.append(f"| {name} | {len(texts):,} | {hit} ({share:.1%}) | {spans} | {chars} |"
                     + (f" e.g. {', '.join(map(repr, examples))}" if examples else ""))
    seconds, floor, mb = speed(sets[f"generated memories (bench/generate.py, {GENERATED:,})"])
    lines += ["", "The corpus was written alongside the patterns (each format the issue found unmasked, and "
              "the common ones next to them), so its recall is what the masker is built for, not a held-out "
              "measure; the false positives are measured on text that was not looked at while writing them."]
    lines += ["", f"Speed: {mb:.1f} MB of generated memory text masked in {seconds:.2f} s "
              f"({mb / seconds:.1f} MB/s), {seconds / floor:.0f}x a floor of one `\\S+` regex pass over the "
              "same text measured in the same run (median of 3; the machine was shared and loaded).", END]
    return "\n".join(lines) + "\n"


def write_section(path: Path, section: str) -> None:
    text = path.read_text() if path.exists() else ""
    if START in text and END in text:
        head, rest = text.split(START, 1)
        text = head + section.rstrip("\n") + rest.split(END, 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n" + section
    path.write_text(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "RESULTS.md")
    parser.add_argument("--print", action="store_true", help="Print the section instead of writing it.")
    args = parser.parse_args(argv)
    section = report()
    if args.print:
        print(section)
    else:
        write_section(args.out, section)
        print(f"wrote the secrets section of {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
