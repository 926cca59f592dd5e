"""tick and status: when the weekly pass is due, overflowing indices, what ran when."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
from typer.testing import CliRunner

from memcli.cli import app
from memcli.integrations import schedule
from tests.conftest import TOML, add, all_files, days_ago
from tests.integrations.clock import at, set_tz, utc  # noqa: F401  (utc: autouse)

runner = CliRunner()


def run(*args: str, env: dict[str, str] | None = None) -> Any:
    result = runner.invoke(app, list(args), env=env)
    assert result.exit_code == 0, (result.stdout, result.stderr)
    return orjson.loads(result.stdout) if "--json" in args else result


def state(root: Path) -> dict[str, Any]:
    """The state as memcli reads it: the shared file with this machine's (ops/local/) over it."""
    from memcli.store import opsfiles

    return opsfiles.read_state(root)


def set_weekly(root: Path, stamp: str) -> None:
    data = state(root)
    data.setdefault("runs", {})["weekly"] = {"run_id": "run_earlier", "at": stamp}
    (root / "ops" / "state.json").write_bytes(orjson.dumps(data))
    (root / "ops" / "local" / "state.json").unlink(missing_ok=True)  # as if those runs were the last


def log_triggers(root: Path) -> list[str]:
    from memcli.store import log

    return [entry["trigger"] for entry in log.read_entries(root)]


def fresh(root: Path, n: int, scope_id: str = "coder") -> None:
    """Memories a day old: protected by min_age_days, so runs log them and change nothing."""
    for i in range(n):
        add(root, scope_id=scope_id, created_at=days_ago(1), summary=f"fact {scope_id} {i} " * 3,
            tags=[f"t{i}"])


# ---------------------------------------------------------------- due_weekly (pure)


SUNDAY = "0 0 * * 0"


def test_never_run_is_due() -> None:
    assert schedule.due_weekly(SUNDAY, None, at("2026-11-18T12:00:00Z"))


def test_missed_sunday_is_due_and_caught_up_once() -> None:
    wednesday = at("2026-11-18T12:00:00Z")
    assert schedule.due_weekly(SUNDAY, at("2026-11-08T00:00:10Z"), wednesday)  # off on the 15th
    assert not schedule.due_weekly(SUNDAY, at("2026-11-15T00:00:00Z"), wednesday)
    assert not schedule.due_weekly(SUNDAY, at("2026-11-18T12:00:00Z"), wednesday)  # caught up


def test_the_scheduled_moment_itself_counts() -> None:
    sunday = at("2026-11-22T00:00:00Z")
    assert schedule.last_scheduled(SUNDAY, sunday) == sunday
    assert schedule.due_weekly(SUNDAY, at("2026-11-21T23:59:59Z"), sunday)
    assert not schedule.due_weekly(SUNDAY, sunday, sunday)


def test_a_last_run_in_the_future_is_not_due() -> None:
    assert not schedule.due_weekly(SUNDAY, at("2027-01-01T00:00:00Z"), at("2026-11-18T00:00:00Z"))


def test_next_scheduled_is_strictly_later() -> None:
    assert schedule.next_scheduled(SUNDAY, at("2026-11-22T00:00:00Z")) == at("2026-11-29T00:00:00Z")
    assert schedule.next_scheduled("30 3 * * 1", at("2026-11-18T00:00:00Z")) == at("2026-11-23T03:30:00Z")


def test_cron_reads_local_time_across_dst() -> None:
    set_tz("America/New_York")
    # Sunday 00:00 EDT on 2026-11-01 (DST ends at 02:00 that day) is 04:00 UTC; a week
    # later it is 00:00 EST, 05:00 UTC. A fixed offset would get one of them wrong.
    assert schedule.last_scheduled(SUNDAY, at("2026-11-01T12:00:00Z")) == at("2026-11-01T04:00:00Z")
    assert schedule.last_scheduled(SUNDAY, at("2026-11-08T12:00:00Z")) == at("2026-11-08T05:00:00Z")
    assert not schedule.due_weekly(SUNDAY, at("2026-11-08T05:00:00Z"), at("2026-11-15T04:59:59Z"))
    assert schedule.due_weekly(SUNDAY, at("2026-11-08T05:00:00Z"), at("2026-11-15T05:00:00Z"))


# ---------------------------------------------------------------- overflow (pure)


def test_overflowing_needs_threshold_and_growth() -> None:
    counts = {"agent/a": 101, "agent/b": 100, "team/t": 150, "global": 300}
    seen = {"overflow": {"team/t": 150, "global": 250}}
    assert schedule.overflowing(counts, seen, 100) == ["agent/a", "global"]
    assert schedule.overflowing(counts, {}, 100) == ["agent/a", "team/t", "global"]


@pytest.mark.parametrize("bad", [{"overflow": []}, {"overflow": {"agent/a": "x"}},
                                 {"overflow": {"agent/a": True}}])
def test_overflowing_ignores_malformed_state(bad: dict[str, Any]) -> None:
    assert schedule.overflowing({"agent/a": 5}, bad, 3) == ["agent/a"]


def test_count_memory_files_counts_files_not_index_or_dotfiles(tmp_path: Path) -> None:
    for name in ("mem_a.json", "mem_b.md", "mem_c.json", "_index.json", ".mem_d.json.x1.tmp",
                 ".hidden.json", "notes.txt"):
        (tmp_path / name).write_text("{}")
    (tmp_path / "sub.json").mkdir()
    (tmp_path / "mem_link.json").symlink_to(tmp_path / "mem_a.json")
    assert schedule.count_memory_files(tmp_path) == 3
    assert schedule.count_memory_files(tmp_path / "missing") == 0


# ---------------------------------------------------------------- tick (runs the engine)


def test_tick_catches_up_a_missed_weekly_run_exactly_once(store: Path) -> None:
    fresh(store, 3)
    set_weekly(store, "2026-11-08T00:00:05Z")  # the machine was off on Sunday the 15th
    wednesday = {"MEMCLI_NOW": "2026-11-18T09:00:00Z"}
    first = run("--store", str(store), "--json", "tick", env=wednesday)
    assert [r["trigger"] for r in first["runs"]] == ["weekly"]
    assert state(store)["runs"]["weekly"]["at"] == "2026-11-18T09:00:00Z"
    second = run("--store", str(store), "--json", "tick", env=wednesday)
    assert second["runs"] == [] and not second["weekly_due"]
    assert run("--store", str(store), "--json", "tick", env={"MEMCLI_NOW": "2026-11-21T23:00:00Z"})[
        "runs"] == []
    assert log_triggers(store) == ["weekly"]
    sunday = run("--store", str(store), "--json", "tick")  # MEMCLI_NOW: Sunday 00:00
    assert [r["trigger"] for r in sunday["runs"]] == ["weekly"]
    assert log_triggers(store) == ["weekly", "weekly"]


def test_tick_runs_weekly_when_never_run(store: Path) -> None:
    result = run("--store", str(store), "--json", "tick")
    assert [r["trigger"] for r in result["runs"]] == ["weekly"]
    assert state(store)["last_success"]["trigger"] == "weekly"


def overflow_store(store: Path, threshold: int = 5) -> None:
    (store / "memcli.toml").write_text(TOML.replace("[consolidation]\n", f"[consolidation]\n"
                                                    f"index_overflow = {threshold}\n"))
    set_weekly(store, "2026-11-22T00:00:00Z")  # weekly is done: only overflow is in play


def test_tick_consolidates_an_overflowing_folder_once_per_growth(store: Path) -> None:
    overflow_store(store)
    fresh(store, 7, "coder")
    fresh(store, 3, "writer")
    first = run("--store", str(store), "--json", "tick")
    assert [(r["trigger"], r["folders"]) for r in first["runs"]] == [("index_overflow", ["agent/coder"])]
    assert state(store)["overflow"] == {"agent/coder": 7}
    assert run("--store", str(store), "--json", "tick")["runs"] == []
    fresh(store, 1, "coder")
    grown = run("--store", str(store), "--json", "tick")
    assert [r["folders"] for r in grown["runs"]] == [["agent/coder"]]
    assert state(store)["overflow"] == {"agent/coder": 8}
    assert run("--store", str(store), "--json", "tick")["runs"] == []
    assert log_triggers(store) == ["index_overflow", "index_overflow"]


def test_tick_counts_unindexed_files_and_ignores_the_index(store: Path) -> None:
    overflow_store(store, threshold=3)
    fresh(store, 4)
    (store / "agent" / "coder" / "_index.json").write_text('{"entries": []}')
    assert run("--store", str(store), "--json", "tick", "--dry-run")["overflow_due"] == ["agent/coder"]


def test_tick_dry_run_changes_nothing(store: Path) -> None:
    overflow_store(store)
    set_weekly(store, "2026-11-01T00:00:00Z")
    fresh(store, 7)
    before = all_files(store)
    result = run("--store", str(store), "--json", "tick", "--dry-run")
    assert result["weekly_due"] and result["overflow_due"] == ["agent/coder"] and result["runs"] == []
    assert all_files(store) == before
    assert "Due: weekly pass, index_overflow for agent/coder" in run(
        "--store", str(store), "tick", "--dry-run").stdout


def test_tick_outside_a_store_fails(tmp_path: Path) -> None:
    result = runner.invoke(app, ["--store", str(tmp_path), "tick"])
    assert result.exit_code == 1 and "no memory store" in result.stderr


def test_tick_as_a_real_process(store: Path) -> None:
    env = {**os.environ, "TZ": "UTC"}
    proc = subprocess.run([sys.executable, "-m", "memcli", "--store", str(store), "tick"],
                          capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("weekly: run_")
    again = subprocess.run([sys.executable, "-m", "memcli", "tick", "--store", str(store)],
                           capture_output=True, text=True, env=env, timeout=60)
    assert again.stdout == "Nothing due.\n"


# ---------------------------------------------------------------- status


def test_status_reports_runs_schedule_indexes_and_queue(store: Path) -> None:
    overflow_store(store, threshold=2)
    fresh(store, 3)
    run("--store", str(store), "reindex")
    queue = {"items": [{"status": "open"}, {"status": "resolved"}, {"status": "open"}]}
    (store / "ops" / "review-queue.json").write_bytes(orjson.dumps(queue))
    data = run("--store", str(store), "--json", "status", env={"MEMCLI_NOW": "2026-11-25T10:00:00Z"})
    assert data["runs"]["weekly"]["at"] == "2026-11-22T00:00:00Z"
    assert data["runs"]["manual"] is None
    assert data["weekly"] == {"cron": "0 0 * * 0", "last_run": "2026-11-22T00:00:00Z",
                              "last_scheduled": "2026-11-22T00:00:00Z",
                              "next": "2026-11-29T00:00:00Z", "overdue": False, "never_run": False}
    rows = {row["folder"]: row for row in data["indexes"]}
    assert rows["agent/coder"] == {"folder": "agent/coder", "entries": 3, "files": 3,
                                   "over_threshold": True}
    assert rows["archive"]["over_threshold"] is False
    assert data["overflow_due"] == ["agent/coder"]
    assert data["review_queue"] == {"open": 2, "total": 3}


def test_status_shows_an_overdue_weekly_pass(store: Path) -> None:
    set_weekly(store, "2026-11-01T00:00:00Z")
    assert run("--store", str(store), "--json", "status")["weekly"]["overdue"] is True
    text = run("--store", str(store), "status", env={"COLUMNS": "200"}).stdout
    assert "overdue" in text and "Review queue: 0 open" in text


def test_status_writes_nothing(store: Path) -> None:
    fresh(store, 2)
    before = all_files(store)
    run("--store", str(store), "status")
    assert all_files(store) == before


def test_status_as_a_real_process(store: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "memcli", "--json", "status", "--store", str(store)],
                          capture_output=True, text=True, env={**os.environ, "TZ": "UTC"}, timeout=60)
    assert proc.returncode == 0, proc.stderr
    weekly = orjson.loads(proc.stdout)["weekly"]
    assert weekly["never_run"] is True and weekly["overdue"] is False  # new, not late
