"""Measure how many facts the summaries of rule 3.2 keep, on memcli's own set of long memories.

    python bench/summaries.py [--folder bench/summaries] [--max-chars 1500] [--json] [--show ID]

``bench/summaries/*.md`` are long episodic memories (over 5,000 characters of details each),
written for this purpose as realistic agent session logs, incident write-ups and research
notes: some with their own sections (Markdown or bold headings, label lines, labelled
paragraphs), some plain narrative, some timestamped logs. The front matter of each lists the
facts its summary must keep (``facts``): each fact is a list of alternative phrasings, and a
phrasing may join several parts with `` & `` that must all appear. A fact is kept when the
summary holds any of its phrasings, ignoring case, backticks and runs of spaces.

The script summarises each memory with the extractive summary (``--llm`` is not offered:
the LLM path is measured by whoever runs it with a key) and prints the fact recall overall and
per memory, with the facts lost.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script from a checkout that is not installed
    sys.path.insert(0, str(ROOT))

import frontmatter  # noqa: E402

from memcli.consolidate.summary import HEADINGS, extractive_summary  # noqa: E402

DEFAULT_FOLDER = ROOT / "bench" / "summaries"
MIN_DETAILS = 5000  # rule 3.2 summarises details longer than summarize_min_chars (5000)


class Case(NamedTuple):
    """One long memory and the facts its summary must keep."""

    id: str
    details: str
    facts: list[list[str]]


def load_cases(folder: Path = DEFAULT_FOLDER) -> list[Case]:
    """Every ``*.md`` of the folder, in name order; a file without facts or with short
    details is an error naming it."""
    cases: list[Case] = []
    for path in sorted(folder.glob("*.md")):
        post = frontmatter.loads(path.read_text(encoding="utf-8"))
        facts = post.metadata.get("facts")
        if not isinstance(facts, list) or not facts or not all(isinstance(f, list) and f for f in facts):
            raise ValueError(f"{path}: front matter needs facts: a list of lists of phrasings")
        if len(post.content) <= MIN_DETAILS:
            raise ValueError(f"{path}: details are {len(post.content)} characters, need over {MIN_DETAILS}")
        phrasings = [[str(p) for p in fact] for fact in facts]
        cases.append(Case(str(post.metadata.get("id", path.stem)), post.content, phrasings))
    return cases


def _plain(text: str) -> str:
    return " ".join(text.replace("`", "").lower().split())


def kept(fact: Sequence[str], summary: str) -> bool:
    """True when the summary holds one of the fact's phrasings (all parts of it)."""
    plain = _plain(summary)
    return any(all(_plain(part) in plain for part in phrasing.split(" & ")) for phrasing in fact)


def measure(cases: Sequence[Case], max_chars: int = 1500) -> dict[str, Any]:
    """Fact recall overall and per memory, with the facts each summary lost."""
    per_case = []
    total = found = 0
    for case in cases:
        summary = extractive_summary(case.details, max_chars)
        lost = [fact for fact in case.facts if not kept(fact, summary)]
        total += len(case.facts)
        found += len(case.facts) - len(lost)
        per_case.append({"id": case.id, "details_chars": len(case.details), "summary_chars": len(summary),
                         "facts": len(case.facts), "kept": len(case.facts) - len(lost),
                         "lost": [fact[0] for fact in lost],
                         "headings_ok": all(f"## {h}" in summary for h in HEADINGS),
                         "stray_headings": len(re.findall(r"(?m)^#+ ", summary)) - len(HEADINGS)})
    return {"memories": len(cases), "facts": total, "kept": found,
            "recall": round(found / total, 4) if total else 0.0, "max_chars": max_chars, "cases": per_case}


def format_report(result: dict[str, Any]) -> str:
    lines = [f"{result['memories']} memories, {result['facts']} facts: {result['kept']} kept "
             f"({result['recall']:.1%}) in summaries under {result['max_chars']} characters"]
    for case in result["cases"]:
        lost = f"  lost: {', '.join(case['lost'])}" if case["lost"] else ""
        lines.append(f"  {case['id']:<32} {case['kept']}/{case['facts']}  "
                     f"{case['details_chars']:>5} -> {case['summary_chars']:>4} chars{lost}")
    return "\n".join(lines)


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--folder", type=Path, default=DEFAULT_FOLDER, help="folder of *.md memories")
    parser.add_argument("--max-chars", type=int, default=1500, help="summary_max_chars")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--show", metavar="ID", help="print the summary of one memory")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse_args(argv)
    try:
        cases = load_cases(args.folder)
    except (OSError, ValueError) as exc:
        print(f"cannot read the memories: {exc}", file=sys.stderr)
        return 1
    if args.show:
        case = next((c for c in cases if c.id == args.show), None)
        if case is None:
            print(f"no memory {args.show}", file=sys.stderr)
            return 1
        print(extractive_summary(case.details, args.max_chars))
        return 0
    result = measure(cases, args.max_chars)
    print(json.dumps(result, indent=2) if args.json else format_report(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
