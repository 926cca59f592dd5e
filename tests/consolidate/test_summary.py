"""The extractive summary of rule 3.2: the original's own sections, facts kept, no stray
headings, within the limit; and the fact-recall benchmark on bench/summaries."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

from memcli.consolidate.summary import HEADINGS, extractive_summary, heading_of, sections, sentences

ROOT = Path(__file__).resolve().parents[2]
DEMO_INCIDENT = ROOT / "fixtures" / "demo-store" / "agent" / "coder" / "mem_01M46GD7K0ZXZEA9X8XM4K99TW.json"

FILLER = ("The team spent the afternoon going through the dashboards and the logs of every service that "
          "might have been involved, one at a time, without finding anything unusual at first. ")

LOG_WITH_SECTIONS = f"""Session log for the ledger-api release of 2026-10-05.

## Setup
We shipped version 2026.10.2 with migration 0091. {FILLER * 6}

**Timeline**
At 14:15 the migration took an ACCESS EXCLUSIVE lock and waited behind the nightly export. {FILLER * 6}

Who was involved: agent:coder ran the release; Tomas Berg was on call; Maya Okafor approved the rollback.

Outcome: the migration was cancelled with pg_cancel_backend and deployed again at 16:40 with lock_timeout.

## Lessons learned
- Set lock_timeout on every migration that touches a hot table.
- Check pg_stat_activity for long transactions before deploying a migration.
- Make the readiness probe run a cheap query, so that stuck pods leave the rotation.
"""


def test_sections_are_found_by_every_kind_of_label() -> None:
    found = [(s.label, heading_of(s.label)) for s in sections(LOG_WITH_SECTIONS)]
    assert found == [(None, None), ("Setup", "What happened"), ("Timeline", "What happened"),
                     ("Who was involved", "Who was involved"), ("Outcome", "Outcome"),
                     ("Lessons learned", "Key learnings")]
    labelled = sections("Key learnings. First, always retry.\n\nThe fix was two lines. It worked.")
    assert [s.label for s in labelled] == ["Key learnings"]  # "The fix was two lines." is no label
    assert labelled[0].text.endswith("The fix was two lines. It worked.")


def test_summary_keeps_the_original_sections_and_no_stray_heading() -> None:
    summary = extractive_summary(LOG_WITH_SECTIONS, 1500)
    assert len(summary) < 1500
    assert re.findall(r"(?m)^## .*$", summary) == [f"## {h}" for h in HEADINGS]
    assert "Setup" not in summary and "**" not in summary
    parts = dict(zip(HEADINGS, re.split(r"(?m)^## .*\n", summary)[1:], strict=True))
    assert "Tomas Berg" in parts["Who was involved"]
    assert "pg_cancel_backend" in parts["Outcome"]
    for learning in ("lock_timeout", "pg_stat_activity", "readiness probe"):
        assert learning in parts["Key learnings"]


def test_demo_migration_incident_keeps_its_four_learnings() -> None:
    details = json.loads(DEMO_INCIDENT.read_text())["content"]["details"]
    learnings = extractive_summary(details, 1500).split("## Key learnings")[1]
    assert "lock_timeout" in learnings
    assert "pg_stat_activity" in learnings
    assert "health check" in learnings
    assert "Cancelling the DDL" in learnings


def test_quotations_stay_whole_and_list_items_are_sentences() -> None:
    assert sentences('He added a line: "Does it lock? Then retry." Then he left.') == [
        'He added a line: "Does it lock? Then retry."', "Then he left."]
    assert sentences("Steps:\n- build the image\n- push it") == ["Steps:", "build the image", "push it"]


@pytest.mark.parametrize("limit", [200, 600, 1500])
def test_summary_is_shorter_than_the_limit_and_deterministic(limit: int) -> None:
    text = LOG_WITH_SECTIONS * 3
    summary = extractive_summary(text, limit)
    assert len(summary) < limit and summary == extractive_summary(text, limit)
    assert summary.startswith("## What happened")


def test_huge_and_run_on_texts_are_summarised() -> None:
    run_on = "; ".join(f"step {n} touched config_{n}.yaml" for n in range(3000)) + "."
    huge = (FILLER * 2 + "The root cause was a missing index on tenant_id. ") * 400 + run_on
    summary = extractive_summary(huge, 1500)
    assert len(summary) < 1500 and "missing index on tenant_id" in summary


def test_empty_and_unlabelled_texts() -> None:
    assert extractive_summary("", 1500).count("(not recorded)") == 4
    plain = extractive_summary(FILLER * 40 + "The root cause was a missing index on tenant_id.", 1500)
    assert "missing index on tenant_id" in plain


# --------------------------------------------------------------------------------------------
# bench/summaries.py


def _load_bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_summaries", ROOT / "bench" / "summaries.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("bench_summaries", module)
    spec.loader.exec_module(module)
    return module


bench = _load_bench()


def test_fact_matching() -> None:
    assert bench.kept(["lock_timeout"], "Set `lock_timeout`  to 5s.")
    assert bench.kept(["9 minutes", "nine minutes"], "degraded for nine   minutes")
    assert bench.kept(["lock_timeout & retry"], "set lock_timeout and retry") is True
    assert not bench.kept(["lock_timeout & retry"], "set lock_timeout")


def test_bad_memory_files_are_named(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("---\nid: a\n---\nshort\n")
    with pytest.raises(ValueError, match="a.md"):
        bench.load_cases(tmp_path)
    (tmp_path / "a.md").write_text("---\nid: a\nfacts:\n  - [x]\n---\nshort\n")
    with pytest.raises(ValueError, match="over 5000"):
        bench.load_cases(tmp_path)
    assert bench.main(["--folder", str(tmp_path)]) == 1


def test_summary_set_target() -> None:
    cases = bench.load_cases()
    assert len(cases) >= 20 and all(len(c.details) > 5000 for c in cases)
    result = bench.measure(cases)
    assert result["recall"] >= 0.85
    assert all(c["headings_ok"] and c["stray_headings"] == 0 for c in result["cases"])
