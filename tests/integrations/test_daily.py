"""Daily light passes (SPEC 6): when one is due, what tick runs, what the pass does, status."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
from typer.testing import CliRunner

from memcli.cli import app
from memcli.config import load_settings
from memcli.consolidate import llm_trust
from memcli.errors import ConfigError
from memcli.integrations import schedule
from tests import forked
from tests.conftest import TOML, add, all_files, days_ago, load
from tests.integrations.clock import at, set_tz, utc  # noqa: F401  (utc: autouse)

runner = CliRunner()
DAILY = ["0 10 * * *", "0 15 * * *"]


def run(*args: str, env: dict[str, str] | None = None, code: int = 0) -> Any:
    result = runner.invoke(app, list(args), env=env)
    assert result.exit_code == code, (result.stdout, result.stderr)
    return orjson.loads(result.stdout) if "--json" in args and code == 0 else result


def state(root: Path) -> dict[str, Any]:
    """The state as memcli reads it: the shared file with this machine's (ops/local/) over it."""
    from memcli.store import opsfiles

    return opsfiles.read_state(root)


def set_runs(root: Path, **runs: str) -> None:
    data = state(root)
    for trigger, stamp in runs.items():
        data.setdefault("runs", {})[trigger] = {"run_id": f"run_{trigger}", "at": stamp}
    (root / "ops" / "state.json").write_bytes(orjson.dumps(data))
    (root / "ops" / "local" / "state.json").unlink(missing_ok=True)  # as if those runs were the last


def log_triggers(root: Path) -> list[str]:
    from memcli.store import log

    return [entry["trigger"] for entry in log.read_entries(root)]


def daily_store(store: Path, daily: list[str] = DAILY, extra: str = "") -> Path:
    crons = ", ".join(f'"{c}"' for c in daily)
    (store / "memcli.toml").write_text(TOML + f"\n[schedule]\ndaily = [{crons}]\n" + extra)
    return store


# ---------------------------------------------------------------- due_daily (pure)


def test_no_daily_schedule_is_never_due() -> None:
    assert not schedule.due_daily([], None, at("2026-11-18T12:00:00Z"))
    assert schedule.last_scheduled_any([], at("2026-11-18T12:00:00Z")) is None
    assert schedule.next_scheduled_any([], at("2026-11-18T12:00:00Z")) is None


def test_never_run_is_due() -> None:
    assert schedule.due_daily(DAILY, None, at("2026-11-18T09:00:00Z"))


@pytest.mark.parametrize(("last", "moment", "due"), [
    ("2026-11-18T09:59:59Z", "2026-11-18T10:00:00Z", True),   # the 10:00 time itself counts
    ("2026-11-18T09:59:59Z", "2026-11-18T09:59:59Z", False),  # a second before: yesterday's 15:00 is covered
    ("2026-11-18T10:00:00Z", "2026-11-18T10:00:00Z", False),  # ran exactly at the time
    ("2026-11-18T10:00:00Z", "2026-11-18T14:59:59Z", False),
    ("2026-11-18T10:00:00Z", "2026-11-18T15:00:00Z", True),   # the second window opens
    ("2026-11-18T15:00:01Z", "2026-11-19T09:59:59Z", False),  # overnight: nothing scheduled
    ("2026-11-17T14:59:59Z", "2026-11-18T09:00:00Z", True),   # yesterday's 15:00 was missed
    ("2027-01-01T00:00:00Z", "2026-11-18T16:00:00Z", False),  # a last run in the future
])
def test_each_window_boundary(last: str, moment: str, due: bool) -> None:
    assert schedule.due_daily(DAILY, at(last), at(moment)) is due


def test_many_missed_times_are_one_window() -> None:
    # off from Monday 09:00 to Thursday 16:00: six times missed, the latest is Thursday 15:00
    last, thursday = at("2026-11-16T09:00:00Z"), at("2026-11-19T16:00:00Z")
    assert schedule.last_scheduled_any(DAILY, thursday) == at("2026-11-19T15:00:00Z")
    assert schedule.due_daily(DAILY, last, thursday)
    assert not schedule.due_daily(DAILY, thursday, thursday)  # one pass catches all of them up
    assert schedule.next_scheduled_any(DAILY, thursday) == at("2026-11-20T10:00:00Z")


def test_next_is_the_soonest_of_the_expressions() -> None:
    crons = ["0 15 * * *", "30 9 * * 1-5"]  # order in the list does not matter
    assert schedule.next_scheduled_any(crons, at("2026-11-20T12:00:00Z")) == at("2026-11-20T15:00:00Z")
    # Saturday morning: the weekday time is not next, 15:00 is
    assert schedule.next_scheduled_any(crons, at("2026-11-21T08:00:00Z")) == at("2026-11-21T15:00:00Z")
    assert schedule.last_scheduled_any(crons, at("2026-11-23T09:45:00Z")) == at("2026-11-23T09:30:00Z")


def test_local_time_zone_is_used() -> None:
    set_tz("Europe/Paris")  # UTC+1 in November: 10:00 local is 09:00 UTC
    assert schedule.last_scheduled_any(["0 10 * * *"], at("2026-11-18T09:30:00Z")) == at("2026-11-18T09:00:00Z")
    assert not schedule.due_daily(["0 10 * * *"], at("2026-11-18T08:59:00Z"), at("2026-11-18T08:59:59Z"))
    assert schedule.due_daily(["0 10 * * *"], at("2026-11-18T08:59:00Z"), at("2026-11-18T09:00:00Z"))


def test_a_time_the_clock_skips_runs_when_the_clock_jumps() -> None:
    set_tz("America/New_York")  # 2026-03-08: 02:00 EST jumps to 03:00 EDT (07:00 UTC)
    cron = ["30 2 * * *"]
    before = at("2026-03-07T07:30:00Z")  # yesterday's 02:30 EST run
    assert schedule.next_scheduled_any(cron, at("2026-03-08T06:45:00Z")) == at("2026-03-08T07:00:00Z")
    assert not schedule.due_daily(cron, before, at("2026-03-08T06:59:59Z"))
    assert schedule.due_daily(cron, before, at("2026-03-08T07:00:00Z"))
    assert not schedule.due_daily(cron, at("2026-03-08T07:00:00Z"), at("2026-03-08T12:00:00Z"))
    # the day after, 02:30 EDT again
    assert schedule.next_scheduled_any(cron, at("2026-03-08T07:00:00Z")) == at("2026-03-09T06:30:00Z")


def test_a_time_the_clock_repeats_runs_once() -> None:
    set_tz("America/New_York")  # 2026-11-01: 02:00 EDT falls back to 01:00 EST; 01:30 happens twice
    cron = ["30 1 * * *"]
    first = at("2026-11-01T05:30:00Z")  # 01:30 EDT
    assert schedule.next_scheduled_any(cron, at("2026-11-01T04:00:00Z")) == first
    assert not schedule.due_daily(cron, first, at("2026-11-01T06:30:00Z"))  # 01:30 EST: not again
    assert not schedule.due_daily(cron, first, at("2026-11-01T06:45:00Z"))
    assert schedule.next_scheduled_any(cron, at("2026-11-01T06:10:00Z")) == at("2026-11-02T06:30:00Z")


# ---------------------------------------------------------------- the weekly pass covers a daily one


def test_a_weekly_pass_covers_the_daily_one(store: Path) -> None:
    daily_store(store)
    set_runs(store, weekly="2026-11-22T00:00:00Z")
    data = state(store)
    assert schedule.last_light_at(data) == at("2026-11-22T00:00:00Z")
    set_runs(store, daily="2026-11-21T15:00:00Z")
    assert schedule.last_light_at(state(store)) == at("2026-11-22T00:00:00Z")  # the later one


def test_tick_with_both_due_runs_the_weekly_pass_only(store: Path) -> None:
    daily_store(store)
    set_runs(store, weekly="2026-11-08T00:00:00Z", daily="2026-11-16T15:00:00Z")
    dry = run("--store", str(store), "--json", "tick", "--dry-run", env={"MEMCLI_NOW": "2026-11-18T11:00:00Z"})
    assert dry["weekly_due"] and not dry["daily_due"]
    result = run("--store", str(store), "--json", "tick", env={"MEMCLI_NOW": "2026-11-18T11:00:00Z"})
    assert [r["trigger"] for r in result["runs"]] == ["weekly"] and not result["daily_due"]
    assert log_triggers(store) == ["weekly"]
    # the next daily time after the weekly pass brings a light pass
    later = run("--store", str(store), "--json", "tick", env={"MEMCLI_NOW": "2026-11-18T15:00:00Z"})
    assert [r["trigger"] for r in later["runs"]] == ["daily"]


def test_tick_catches_up_missed_daily_passes_once(store: Path) -> None:
    daily_store(store)
    set_runs(store, weekly="2026-11-15T00:00:00Z", daily="2026-11-16T10:00:00Z")
    thursday = {"MEMCLI_NOW": "2026-11-19T16:00:00Z"}
    assert run("--store", str(store), "--json", "tick", "--dry-run", env=thursday)["daily_due"]
    first = run("--store", str(store), "--json", "tick", env=thursday)
    assert [r["trigger"] for r in first["runs"]] == ["daily"] and first["runs"][0]["folders"] is None
    assert state(store)["runs"]["daily"]["at"] == "2026-11-19T16:00:00Z"
    assert state(store)["last_success"]["trigger"] == "daily"
    assert run("--store", str(store), "--json", "tick", env=thursday)["runs"] == []
    assert run("--store", str(store), "--json", "tick", env={"MEMCLI_NOW": "2026-11-20T09:59:59Z"})["runs"] == []
    assert [r["trigger"] for r in run("--store", str(store), "--json", "tick",
                                      env={"MEMCLI_NOW": "2026-11-20T10:00:00Z"})["runs"]] == ["daily"]
    assert log_triggers(store) == ["daily", "daily"]


def test_tick_without_daily_setting_runs_no_light_pass(store: Path) -> None:
    set_runs(store, weekly="2026-11-22T00:00:00Z")
    result = run("--store", str(store), "--json", "tick", env={"MEMCLI_NOW": "2026-11-25T16:00:00Z"})
    assert result["runs"] == [] and result["daily_due"] is False


def test_tick_dry_run_names_the_light_pass_and_writes_nothing(store: Path) -> None:
    daily_store(store)
    set_runs(store, weekly="2026-11-22T00:00:00Z")
    before = all_files(store)
    text = run("--store", str(store), "tick", "--dry-run", env={"MEMCLI_NOW": "2026-11-22T10:30:00Z"}).stdout
    assert text == "Due: daily light pass\n"
    assert all_files(store) == before


# ---------------------------------------------------------------- what a light pass does


def light_store(store: Path) -> dict[str, dict[str, Any]]:
    """One memory for each rule: a duplicate pair (3.1), a verbose episodic one (3.2), a
    much-used procedure (3.3) and a stale one (3.4)."""
    text = "Run the migrations before starting the web server in staging"
    return {
        "old": add(store, summary=text, created_at=days_ago(50)),
        "new": add(store, summary=text + ".", created_at=days_ago(40)),
        "verbose": add(store, type="episodic", created_at=days_ago(40), details="A long session. " * 400),
        "procedure": add(store, type="procedural", subtype="deploy", access_count=6),
        "stale": add(store, access_count=0, last_accessed=None),
    }


def test_a_light_pass_merges_and_promotes_only(store: Path) -> None:
    mems = light_store(store)
    out = run("--store", str(store), "--json", "consolidate", "--trigger", "daily")
    types = sorted(a["type"] for a in out["actions"])
    assert types == ["merge", "promote"], out["actions"]
    assert out["trigger"] == "daily"
    assert out["stats"]["memories_summarized"] == 0 and out["stats"]["memories_archived"] == 0
    assert (store / "agent" / "coder" / f"{mems['stale']['id']}.json").exists()
    assert "summarized" not in load(store / "agent" / "coder" / f"{mems['verbose']['id']}.json")["tags"]
    assert state(store)["runs"]["daily"]["run_id"] == out["run_id"]
    # the full pass afterwards does the rest
    full = run("--store", str(store), "--json", "consolidate")
    assert sorted(a["type"] for a in full["actions"]) == ["archive", "summarize"]


def test_a_light_pass_dry_run_matches_the_real_one(store: Path) -> None:
    light_store(store)
    before = all_files(store)
    dry = run("--store", str(store), "--json", "consolidate", "--trigger", "daily", "--dry-run")
    assert all_files(store) == before
    real = run("--store", str(store), "--json", "consolidate", "--trigger", "daily")
    assert dry["actions"] == real["actions"]


def test_a_light_pass_refuses_the_llm(store: Path) -> None:
    result = run("--store", str(store), "consolidate", "--trigger", "daily", "--llm", code=1)
    assert "never uses the LLM" in result.stderr
    assert log_triggers(store) == []


def fake_llm(tmp_path: Path) -> tuple[list[str], Path]:
    """A program that records each call; the LLM command of these tests."""
    calls = tmp_path / "calls.txt"
    script = tmp_path / "fake-llm"
    script.write_text(f"#!{sys.executable}\nimport sys\nsys.stdin.read()\n"
                      f"open({str(calls)!r}, 'a').write('call\\n')\nprint('no')\n")
    script.chmod(0o755)
    return [str(script)], calls


def test_a_light_pass_never_calls_the_llm_even_when_enabled(store: Path, tmp_path: Path) -> None:
    argv, calls = fake_llm(tmp_path)
    daily_store(store, extra=f"\n[llm]\nenabled = true\ncommand = {orjson.dumps(argv).decode()}\n")
    llm_trust.trust(store, argv, "2026-11-22T00:00:00Z")  # approved here (`memcli llm trust`)
    light_store(store)
    set_runs(store, weekly="2026-11-22T00:00:00Z")
    result = run("--store", str(store), "--json", "tick", env={"MEMCLI_NOW": "2026-11-22T10:00:00Z"})
    assert [r["trigger"] for r in result["runs"]] == ["daily"]
    assert not calls.exists()
    # a manual run with the same settings does call it (the fake answers nonsense: extractive)
    out = run("--store", str(store), "--json", "consolidate")
    assert calls.exists() and [a["method"] for a in out["actions"] if a["type"] == "summarize"] == ["extractive"]


# ---------------------------------------------------------------- status


def test_status_shows_the_next_light_pass(store: Path) -> None:
    daily_store(store)
    set_runs(store, weekly="2026-11-22T00:00:00Z", daily="2026-11-24T10:00:00Z")
    data = run("--store", str(store), "--json", "status", env={"MEMCLI_NOW": "2026-11-24T12:00:00Z"})
    assert data["daily"] == {"cron": DAILY, "last_run": "2026-11-24T10:00:00Z",
                             "last_covered": "2026-11-24T10:00:00Z",
                             "last_scheduled": "2026-11-24T10:00:00Z",
                             "next": "2026-11-24T15:00:00Z", "overdue": False, "never_run": False}
    assert data["runs"]["daily"]["run_id"] == "run_daily"
    late = run("--store", str(store), "--json", "status", env={"MEMCLI_NOW": "2026-11-24T15:30:00Z"})
    assert late["daily"]["overdue"] is True
    text = run("--store", str(store), "status", env={"MEMCLI_NOW": "2026-11-24T15:30:00Z",
                                                      "COLUMNS": "400"}).stdout  # (the hint names the store)
    for part in ("Daily light passes", "overdue", "2026-11-25 10:00"):
        assert part in text, text


def test_status_without_daily_passes(store: Path) -> None:
    data = run("--store", str(store), "--json", "status")
    assert data["daily"] == {"cron": [], "last_run": None, "last_covered": None, "last_scheduled": None,
                             "next": None, "overdue": False, "never_run": False}
    assert "Daily light passes: none" in run("--store", str(store), "status", env={"COLUMNS": "200"}).stdout


# ---------------------------------------------------------------- settings


def test_daily_setting_is_read(tmp_path: Path) -> None:
    assert load_settings(daily_store(tmp_path)).schedule.daily == tuple(DAILY)
    assert load_settings(tmp_path / "nowhere").schedule.daily == ()


@pytest.mark.parametrize(("value", "message"), [
    ('"0 10 * * *"', "schedule.daily must be a list of cron expressions"),
    ('["0 10 * * *", "0 25 * * *"]', "schedule.daily[1] is not a valid cron expression ('0 25 * * *'"),
    ('["0 10 * * *", 5]', "schedule.daily[1] must be a cron expression string, got 5"),
    ('["every day"]', "schedule.daily[0] is not a valid cron expression"),
    ('["0 10 * * * 30"]', "schedule.daily[0] is not a valid cron expression"),  # 6 fields: not cron
    ('["0 0 31 2 *"]', "schedule.daily[0] never fires"),
    ('[""]', "schedule.daily[0] is not a valid cron expression"),
])
def test_a_bad_daily_setting_names_the_key(tmp_path: Path, value: str, message: str) -> None:
    (tmp_path / "memcli.toml").write_text(f"[schedule]\ndaily = {value}\n")
    with pytest.raises(ConfigError) as caught:
        load_settings(tmp_path)
    assert message in str(caught.value)
    assert str(caught.value).startswith(f"{tmp_path / 'memcli.toml'}: ")


def test_a_bad_daily_setting_is_an_error_for_tick(store: Path) -> None:
    (store / "memcli.toml").write_text('[schedule]\ndaily = ["0 10 * * *", "soon"]\n')
    before = all_files(store)
    result = run("--store", str(store), "tick", code=1)
    assert "memcli.toml: schedule.daily[1] is not a valid cron expression" in result.stderr
    assert all_files(store) == before


def test_nicknames_are_accepted(tmp_path: Path) -> None:
    (tmp_path / "memcli.toml").write_text('[schedule]\ndaily = ["@daily"]\nweekly = "@weekly"\n')
    assert load_settings(tmp_path).schedule.daily == ("@daily",)


# ---------------------------------------------------------------- tick on the fast path


def _memcli(store: Path, *args: str, env: dict[str, str] | None = None) -> Any:
    return forked.run(["--store", str(store), *args], env={**os.environ, "TZ": "UTC", **(env or {})}, timeout=120)


def test_an_idle_tick_imports_nothing_heavy(store: Path) -> None:
    daily_store(store)
    set_runs(store, weekly="2026-11-22T00:00:00Z", daily="2026-11-22T00:00:00Z")
    proc = _memcli(store, "tick", env={"PYTHONPROFILEIMPORTTIME": "1"})
    assert proc.returncode == 0 and proc.stdout == "Nothing due.\n", proc.stderr
    modules = {line.split("|")[-1].strip() for line in proc.stderr.splitlines() if "|" in line}
    assert "memcli.integrations.schedule" in modules
    assert not {"typer", "rich", "numpy", "rapidfuzz", "memcli.consolidate.engine"} & modules


def test_tick_on_the_fast_path_runs_what_is_due_and_fails_like_typer(store: Path, tmp_path: Path) -> None:
    daily_store(store)
    set_runs(store, weekly="2026-11-22T00:00:00Z")
    due = _memcli(store, "--json", "tick", "--dry-run", env={"MEMCLI_NOW": "2026-11-22T10:00:00Z"})
    assert orjson.loads(due.stdout)["daily_due"] is True
    ran = _memcli(store, "tick", env={"MEMCLI_NOW": "2026-11-22T10:00:00Z"})
    assert ran.returncode == 0 and ran.stdout.startswith("daily: run_"), ran.stderr
    assert _memcli(store, "tick", "--bogus").returncode == 2
    missing = _memcli(tmp_path / "nowhere", "--json", "tick")
    assert missing.returncode == 1 and "no memory store" in orjson.loads(missing.stdout)["error"]
    (store / "memcli.toml").write_text('[schedule]\ndaily = ["0 10 * * *", "soon"]\n')
    bad = _memcli(store, "tick")
    assert bad.returncode == 1 and "schedule.daily[1] is not a valid cron expression" in bad.stderr
    assert "Traceback" not in bad.stderr
