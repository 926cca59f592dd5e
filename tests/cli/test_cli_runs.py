"""consolidate, apply, log, stats and review through the CLI."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memcli.cli import app
from tests.conftest import add, assert_invariants, days_ago

runner = CliRunner()
DEMO = Path(__file__).resolve().parents[2] / "fixtures" / "demo-store"


def run(store: Path, *args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, ["--store", str(store), *args])
    return result.exit_code, result.stdout, result.stderr


def demo(tmp_path: Path) -> Path:
    target = tmp_path / "demo"
    shutil.copytree(DEMO, target)
    return target


def test_consolidate_json_report(store: Path) -> None:
    add(store, access_count=0)
    code, out, _ = run(store, "consolidate", "--json")
    report = json.loads(out)
    assert code == 0 and set(report) >= {"run_id", "trigger", "actions", "stats"}
    assert report["trigger"] == "manual" and report["actions"][0]["type"] == "archive"


def test_consolidate_table_report_and_hints(store: Path) -> None:
    add(store, access_count=0)
    code, out, _ = run(store, "consolidate", "--dry-run")
    # hints keep the --store the command was run with, so they work pasted as they are
    assert code == 0 and "Dry run: nothing was written" in out
    assert "Apply with:" in out and f"memcli --store {store} consolidate\n" in out
    code, out, _ = run(store, "consolidate")
    assert code == 0 and "archive" in out and "Undo with:" in out and f"memcli --store {store} undo run_" in out


def test_consolidate_bad_options(store: Path) -> None:
    assert run(store, "consolidate", "--trigger", "hourly")[0] == 1
    assert run(store, "consolidate", "--limit", "-1")[0] == 1
    assert run(store, "consolidate", "--nonsense")[0] == 2


def test_demo_store_run_then_second_run(tmp_path: Path) -> None:
    store = demo(tmp_path)
    code, out, _ = run(store, "consolidate", "--json")
    stats = json.loads(out)["stats"]
    assert code == 0
    assert (stats["memories_merged"], stats["memories_summarized"], stats["memories_promoted"],
            stats["memories_archived"], stats["memory_count"]) == (10, 3, 5, 8, 86)
    code, out, _ = run(store, "consolidate", "--json")
    assert {a["type"] for a in json.loads(out)["actions"]} <= {"keep_separate"}
    assert_invariants(store)


def test_plan_out_and_apply(store: Path, tmp_path: Path) -> None:
    add(store, access_count=0)
    plan = tmp_path / "plan.json"
    code, out, _ = run(store, "consolidate", "--plan-out", str(plan))
    assert code == 0 and plan.exists() and f"memcli --store {store} apply {plan}" in out
    code, out, _ = run(store, "apply", str(plan), "--json")
    assert code == 0 and json.loads(out)["actions"][0]["type"] == "archive"
    code, _, err = run(store, "apply", str(tmp_path / "missing.json"))
    assert code == 1 and "no such plan file" in err


def test_log_and_stats(store: Path) -> None:
    add(store, access_count=0)
    add(store, access_count=2)
    run(store, "consolidate")
    code, out, _ = run(store, "log", "--json")
    entries = json.loads(out)["entries"]
    assert code == 0 and len(entries) == 1
    code, out, _ = run(store, "log", "--run", entries[0]["run_id"])
    assert code == 0 and "archive" in out
    assert run(store, "log", "--run", "run_nope")[0] == 1
    code, out, _ = run(store, "stats", "--json")
    report = json.loads(out)
    assert report["memory_count"] == 1 and report["archived_count"] == 1
    assert report["actions_by_type"] == {"archive": 1} and report["memory_count_over_time"] == [1]
    code, out, _ = run(store, "stats")
    assert code == 0 and "Memory count over time" in out


def _contradiction(store: Path) -> tuple[str, str]:
    a = add(store, summary="The request timeout of the billing API is 30 seconds", created_at=days_ago(40))
    b = add(store, summary="The request timeout of the billing API is 60 seconds", created_at=days_ago(20))
    run(store, "consolidate")
    return a["id"], b["id"]


def test_review_keep_both(store: Path) -> None:
    _contradiction(store)
    code, out, _ = run(store, "review", "list", "--json")
    items = json.loads(out)["items"]
    assert code == 0 and len(items) == 1 and items[0]["guard"] == "numbers"
    code, out, _ = run(store, "review", "resolve", items[0]["id"], "--keep-both")
    assert code == 0 and "kept both" in out
    assert json.loads(run(store, "review", "list", "--json")[1])["items"] == []
    assert run(store, "review", "resolve", items[0]["id"], "--keep-both")[0] == 1  # already resolved


def test_review_merge_is_a_logged_run(store: Path) -> None:
    older, newer = _contradiction(store)
    item = json.loads(run(store, "review", "list", "--json")[1])["items"][0]
    code, out, _ = run(store, "review", "resolve", item["id"], "--merge", "--json")
    result = json.loads(out)
    merge = result["actions"][0]
    assert code == 0 and len(result["actions"]) == 1 and merge["type"] == "merge"
    assert merge["source_ids"] == [older, newer] and merge["result_id"] == newer
    assert 0.80 < merge["similarity"] < 1.0 and merge["similarities"] == {older: merge["similarity"]}
    from memcli.store import log as run_log  # shared log and this machine's quiet runs

    log = run_log.read_entries(store)
    assert log[-1]["trigger"] == "review" and log[-1]["run_id"] == result["run_id"]
    assert_invariants(store)


def test_review_resolve_needs_one_choice(store: Path) -> None:
    assert run(store, "review", "resolve", "rev_0001")[0] == 1
    assert run(store, "review", "resolve", "rev_0001", "--keep-both")[0] == 1  # no such item


def test_consolidate_subprocess(tmp_path: Path) -> None:
    store = demo(tmp_path)
    env = {**os.environ, "MEMCLI_NOW": "2026-11-22T00:00:00Z"}
    result = subprocess.run([sys.executable, "-m", "memcli", "--store", str(store), "consolidate",
                             "--dry-run", "--json"], capture_output=True, text=True, env=env)
    assert result.returncode == 0 and json.loads(result.stdout)["dry_run"] is True


def test_review_show_puts_both_texts_side_by_side(store: Path) -> None:
    older, newer = _contradiction(store)
    item = json.loads(run(store, "review", "list", "--json")[1])["items"][0]
    code, out, _ = run(store, "review", "show", item["id"], "--json")
    detail = json.loads(out)
    assert code == 0 and detail["id"] == item["id"] and detail["guard"] == "numbers"
    assert detail["guard_checks"].startswith("one text has a number")
    assert [m["id"] for m in detail["memories"]] == [older, newer]
    assert all(m["text"] and not m["archived"] for m in detail["memories"])
    assert detail["guards_now"][0] == "numbers" and 0.8 < detail["similarity_now"] <= 1.0
    code, out, _ = runner_wide(store, "review", "show", item["id"])
    assert code == 0 and "Guard: numbers" in out and older in out and newer in out
    assert "similarity" in out and f"memcli --store {store} review resolve {item['id']}" in out
    assert run(store, "review", "show", "rev_9999")[0] == 1


def test_dry_run_report_shows_a_line_of_each_merged_text(store: Path) -> None:
    text = "Deploy to staging before production and watch the dashboards for errors"
    add(store, summary=text + " closely", created_at=days_ago(40))
    add(store, summary=text, created_at=days_ago(20))
    code, out, _ = runner_wide(store, "consolidate", "--dry-run")
    assert code == 0 and "keeps" in out and "archives" in out and "(similarity 0.9" in out
    assert text in out


def runner_wide(store: Path, *args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, ["--store", str(store), *args], env={"COLUMNS": "200"})
    return result.exit_code, result.stdout, result.stderr


def test_the_shipped_demo_store_is_doctor_clean(tmp_path: Path) -> None:
    """A fresh copy (new mtimes, as a clone has) passes doctor, and the README's first run
    still reports what it always did."""
    store = demo(tmp_path)
    code, out, _ = run(store, "doctor")
    assert code == 0 and "No problem found." in out
    stats = json.loads(run(store, "consolidate", "--dry-run", "--json")[1])["stats"]
    assert (stats["memories_merged"], stats["memories_summarized"], stats["memories_promoted"],
            stats["memories_archived"], stats["memory_count"]) == (10, 3, 5, 8, 86)


@pytest.mark.slow
def test_make_demo_store_writes_the_indexes(tmp_path: Path) -> None:
    out = tmp_path / "fresh"
    done = subprocess.run([sys.executable, str(Path(__file__).resolve().parents[2] / "fixtures" /
                                               "make_demo_store.py"), "--out", str(out)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert sorted(p.parent.name for p in out.rglob("_index.json")) == sorted(
        ["coder", "researcher", "reviewer", "backend", "research", "global", "archive"])
    code, out_text, _ = run(out, "doctor")
    assert code == 0 and "No problem found." in out_text
