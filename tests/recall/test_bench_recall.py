"""bench/recall.py's quality figures (the issue's floor: at least plain BM25's on the same
texts) and the RESULTS.md section it writes."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import recall, recall_set, sections  # noqa: E402


def test_the_set_is_what_it_says() -> None:
    assert len(recall_set.TARGETS) == 100 and len(recall_set.HOLDOUT) == len(recall_set.HOLDOUT_SHORT) == 60
    rows, held = recall.rows_of("v2")
    assert held == 60 and len(rows) >= 300
    queries = [q for *_, q in rows if q]
    assert len(set(queries)) == len(queries)
    for summary, _details, _tags, query in rows:  # queries are asked, not copied
        assert query is None or query.lower() not in summary.lower()


@pytest.mark.slow
def test_ranking_at_least_plain_bm25_on_every_part() -> None:
    for version in ("v1", "v2"):
        figures = recall.quality(version)
        for part, got in figures["parts"].items():
            ours, plain = got["memcli"], got["plain BM25"]
            assert ours[0] >= plain[0] and ours[1] >= plain[1], (version, part, ours, plain)


def test_sections_keep_each_other(tmp_path: Path) -> None:
    out = tmp_path / "RESULTS.md"
    out.write_text("# notes\n\nhand-written\n")
    sections.write(out, "recall", "## Recall\nfirst\n")
    sections.write(out, "schedule", "## Schedule\nS\n")
    sections.write(out, "recall", "## Recall\nsecond\n")
    text = out.read_text()
    assert "hand-written" in text and "## Schedule\nS" in text and "second" in text and "first" not in text
    assert text.count("<!-- recall:begin -->") == 1 and text.index("recall:begin") < text.index("schedule:begin")
