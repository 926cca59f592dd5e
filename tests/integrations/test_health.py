"""`memcli status`: the health of what runs unattended (hooks, scheduled runs)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from memcli.cli import app
from memcli.integrations import health, hooks

runner = CliRunner()


def line(at: str, level: str, pid: int, text: str) -> str:
    return f"2026-11-22T10:{at}Z {level} [{pid}] {text}"


def write_log(store: Path, *lines: str, old: tuple[str, ...] = ()) -> None:
    (store / "ops" / "hook.log").write_text("".join(f"{x}\n" for x in lines))
    if old:
        (store / "ops" / "hook.log.1").write_text("".join(f"{x}\n" for x in old))


def of(store: Path, alive: bool = False) -> dict[str, Any]:
    return health.hook_health(health.read_lines(store), alive=lambda pid: alive)


START = "session-end: start (session s1, reason other, cwd /p)"


def test_a_pass_that_finished(store: Path) -> None:
    write_log(store, line("00:00", "info", 10, START),
              line("00:00", "info", 10, "session-end: background pass started (pid 11)"),
              line("00:01", "info", 11, "run-background: session_end pass: run run_x: merged 0"),
              line("00:01", "info", 11, "run-background: done (ok)"))
    found = of(store)
    assert found["last_start"] == {"at": "2026-11-22T10:00:00Z", "event": "session-end", "message": START}
    assert found["result"]["status"] == "ok" and found["result"]["at"] == "2026-11-22T10:00:01Z"
    assert found["last_error"] is None and found["warnings"] == 0


def test_errors_warnings_and_the_last_error(store: Path) -> None:
    write_log(store, line("00:00", "error", 3, "run-background: tick failed: old"),
              line("01:00", "info", 10, START),
              line("01:00", "warn", 10, "session-end: hook input is not JSON; ignored it"),
              line("01:00", "info", 10, "session-end: background pass started (pid 11)"),
              line("01:02", "error", 11, "run-background: session_end pass failed: lock busy"),
              "  a traceback line that is not in the log's format",
              line("01:02", "error", 11, "run-background: done (with errors)"))
    found = of(store)
    assert found["result"]["status"] == "errors" and found["warnings"] == 1
    assert found["last_error"]["message"] == "run-background: done (with errors)"


@pytest.mark.parametrize("alive, status", [(True, "running"), (False, "vanished")])
def test_a_pass_with_no_end_yet(store: Path, alive: bool, status: str) -> None:
    write_log(store, line("00:00", "info", 10, START),
              line("00:00", "info", 10, "session-end: background pass started (pid 11)"))
    assert of(store, alive)["result"]["status"] == status


def test_a_hook_cancelled_before_it_started_the_pass(store: Path) -> None:
    write_log(store, line("00:00", "info", 10, START))
    result = of(store)["result"]
    assert result["status"] == "no_result" and "cancelled or killed" in result["message"]


def test_a_pass_run_in_the_foreground(store: Path) -> None:
    write_log(store, line("00:00", "info", 10, START), line("00:03", "info", 10, "run-background: done (ok)"))
    assert of(store)["result"]["status"] == "ok"


def test_another_hooks_start_and_an_older_finish_are_told_apart(store: Path) -> None:
    write_log(store, line("00:00", "info", 10, START),
              line("00:00", "info", 10, "session-end: background pass started (pid 11)"),
              line("00:01", "info", 11, "run-background: done (ok)"),
              line("05:00", "info", 20, START),
              line("05:00", "info", 20, "session-end: background pass started (pid 21)"))
    found = of(store)
    assert found["last_start"]["at"] == "2026-11-22T10:05:00Z" and found["result"]["status"] == "vanished"
    write_log(store, line("00:00", "info", 30, "session-start: start (briefing)"))
    assert of(store)["result"]["status"] == "started"


def test_both_log_files_are_read_oldest_first(store: Path) -> None:
    write_log(store, line("09:00", "info", 5, "run-background: tick: nothing due"),
              old=(line("00:00", "error", 4, "run-background: tick failed: from the old file"),))
    lines = health.read_lines(store)
    assert [x.pid for x in lines] == [4, 5]
    assert of(store)["last_error"]["message"].endswith("from the old file")


def test_no_log_at_all(store: Path) -> None:
    assert of(store) == {"last_start": None, "result": None, "last_error": None, "warnings": 0}


def test_scheduled_runs(store: Path) -> None:
    assert health.scheduled_health(store, {}) == {"weekly": None, "cron_log": None}
    (store / "ops" / "cron.log").write_text("Error: no memory store at /x\n\n")
    os.utime(store / "ops" / "cron.log", (1_700_000_000, 1_700_000_000))
    state = {"runs": {"weekly": {"run_id": "run_w", "at": "2026-11-22T00:00:00Z"}}}
    assert health.scheduled_health(store, state) == {
        "weekly": {"run_id": "run_w", "at": "2026-11-22T00:00:00Z"},
        "cron_log": {"modified": "2023-11-14T22:13:20Z", "last_line": "Error: no memory store at /x"}}
    assert health.scheduled_health(store, {"runs": "garbage"})["weekly"] is None


def test_status_shows_the_health_lines(store: Path) -> None:
    write_log(store, line("00:00", "info", 10, START),
              line("00:00", "info", 10, "session-end: background pass started (pid 11)"),
              line("00:02", "error", 11, "run-background: tick failed: [bold]not markup[/bold]"),
              line("00:02", "error", 11, "run-background: done (with errors)"))
    result = runner.invoke(app, ["--store", str(store), "status"])
    assert result.exit_code == 0, result.stderr
    out = result.stdout
    assert f"Store: {store}" in out
    assert "Hooks: last start" in out and "(session-end): the pass finished with errors" in out
    assert "Last hook error:" in out and "run-background: done (with errors)" in out
    assert "Scheduled runs: no weekly pass yet" in out
    data = json.loads(runner.invoke(app, ["--store", str(store), "--json", "status"]).stdout)
    assert data["health"]["hooks"]["result"]["status"] == "errors"
    assert set(data["health"]) == {"hooks", "scheduled"}


def test_status_from_a_subfolder_of_the_store(store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`/memcli status` when the session moved into a subfolder of a project store (SPEC 1)."""
    sub = store / "src" / "deep"
    sub.mkdir(parents=True)
    monkeypatch.chdir(sub)
    result = runner.invoke(app, ["status"])
    assert result.exit_code == 0, result.stderr
    assert f"Store: {store.resolve()}" in result.stdout


def test_the_real_hook_shows_up_in_status(store: Path) -> None:
    hooks.session_end(str(store), None, foreground=True, wait=5)
    data = json.loads(runner.invoke(app, ["--store", str(store), "--json", "status"]).stdout)
    assert data["health"]["hooks"]["result"]["status"] == "ok"
