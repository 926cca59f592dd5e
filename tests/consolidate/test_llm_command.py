"""`[llm] command`: the LLM through any program, with fake programs written by each test, and
the LLM's daily budget (`max_calls_per_day`) on both the command and the API path."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from typer.testing import CliRunner

from memcli.cli import app
from memcli.config import load_settings
from memcli.consolidate import engine, llm_budget, llm_trust
from memcli.consolidate.llm_command import NESTED_ENV, CommandFailed, run_command
from memcli.errors import ConfigError
from memcli.store.plans import Outcome
from memcli.store.store import Store
from tests.conftest import TOML, add, days_ago, load
from tests.llm_server import FakeAnthropic, fake_anthropic

SUMMARY = ("## What happened\nThe deploy failed, then worked.\n\n## Who was involved\nagent:coder and "
           "alice.\n\n## Outcome\nDeployed at 03:10.\n\n## Key learnings\nAdd the index first.")
SECRET = "sk-ant-api03-" + "A1b2C3d4" * 6
OLD = "Deploy the billing worker to staging before production and check the queue depth"
NEW = "Deploy billing worker on staging prior to prod, then watch queue depth"  # 0.72 (0.79 on a second look)


@pytest.fixture(autouse=True)
def _no_nesting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(NESTED_ENV, raising=False)


def program(tmp_path: Path, body: str, name: str = "fake-llm") -> Path:
    """A fake LLM program: Python `body` after `prompt = sys.stdin.read()`; it logs each
    call (its argv, cwd and prompt) to calls.jsonl next to it."""
    script = tmp_path / name
    log = tmp_path / "calls.jsonl"
    script.write_text(
        f"#!{sys.executable}\nimport json, os, sys, time\n"
        "prompt = sys.stdin.read()\n"
        f"with open({str(log)!r}, 'a') as f:\n"
        "    f.write(json.dumps({'argv': sys.argv, 'cwd': os.getcwd(), 'prompt': prompt,\n"
        f"                        'nested': os.environ.get({NESTED_ENV!r})}}) + '\\n')\n"
        + body + "\n")
    script.chmod(0o755)
    return script


def calls(tmp_path: Path) -> list[dict[str, Any]]:
    log = tmp_path / "calls.jsonl"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


SUMMARIZER = f"""
import re
placeholders = ' '.join(sorted(set(re.findall(r'\\[\\[MEMCLI_SECRET_\\d+\\]\\]', prompt))))
print({SUMMARY!r} + (' Keep ' + placeholders if placeholders else ''))
"""
JUDGE_MERGE = """
import re
ids = re.findall(r'"pair_id": "([^"]+)"', prompt)
print(json.dumps({"decisions": [{"pair_id": i, "action": "MERGE", "reason": "same thing"} for i in ids]}))
"""


def configure(store: Path, command: Any, **llm: Any) -> None:
    settings = {"enabled": True, "command": command, **llm}
    lines = ["[llm]"] + [f"{key} = {json.dumps(value)}" for key, value in settings.items()]
    (store / "memcli.toml").write_text(TOML + "\n" + "\n".join(lines) + "\n")
    approve(store)


def approve(store: Path) -> None:
    """What the user does once: `memcli llm trust` approves the configured command here."""
    argv = Store(store).settings.llm.command
    if argv:
        llm_trust.trust(store, argv, "2026-11-22T00:00:00Z")


def verbose(store: Path, n: int = 1, details: str = "A long session. ") -> list[dict[str, Any]]:
    """Memories rule 3.2 summarises; tags of their own keep them from pairing with each other."""
    return [add(store, type="episodic", created_at=days_ago(40), details=f"{details} {i} " * 400,
                tags=[f"{details[:12]}{i}"]) for i in range(n)]


def run(root: Path, **kw: Any) -> Outcome:
    return engine.consolidate(Store(root), **kw)


def methods(out: Outcome) -> list[str]:
    return [a["method"] for a in out.actions if a["type"] == "summarize"]


def state(root: Path) -> dict[str, Any]:
    """The state as memcli reads it: the shared file with this machine's (ops/local/) over it."""
    from memcli.store import opsfiles

    return opsfiles.read_state(root)


# ---------------------------------------------------------------- the happy path


def test_the_program_writes_the_summary(store: Path, tmp_path: Path) -> None:
    configure(store, [str(program(tmp_path, SUMMARIZER))])
    mem = verbose(store)[0]
    out = run(store)
    assert methods(out) == ["llm"] and out.notes == []
    details = load(store / "agent" / "coder" / f"{mem['id']}.json")["content"]["details"]
    assert details.startswith("## What happened\nThe deploy failed")
    [call] = calls(tmp_path)
    assert "## What happened" in call["prompt"]  # the instructions come with the memory
    assert "A long session." in call["prompt"] and call["nested"] == "1"
    assert call["cwd"] == str(store)


def test_arguments_are_passed_exactly_without_a_shell(store: Path, tmp_path: Path) -> None:
    script = program(tmp_path, SUMMARIZER, name="fake llm with spaces")
    args = ["--system", "it's \"quoted\"", "$HOME", "a;b|c", "*", ""]
    configure(store, [str(script), *args])
    verbose(store)
    assert methods(run(store)) == ["llm"]
    assert calls(tmp_path)[0]["argv"][1:] == args


def test_a_command_line_string_is_split_as_a_shell_would(store: Path, tmp_path: Path) -> None:
    script = program(tmp_path, SUMMARIZER, name="fake llm")
    configure(store, f"'{script}' -p --model \"big model\"")
    verbose(store)
    assert methods(run(store)) == ["llm"]
    assert calls(tmp_path)[0]["argv"][1:] == ["-p", "--model", "big model"]


def test_secrets_are_masked_before_the_program_sees_them(store: Path, tmp_path: Path) -> None:
    configure(store, [str(program(tmp_path, SUMMARIZER))])
    mem = verbose(store, details=f"We used the key {SECRET} to deploy.")[0]
    run(store)
    [call] = calls(tmp_path)
    assert SECRET not in call["prompt"] and "[[MEMCLI_SECRET_" in call["prompt"]
    details = load(store / "agent" / "coder" / f"{mem['id']}.json")["content"]["details"]
    assert SECRET in details and "MEMCLI_SECRET" not in details  # restored in what is written


def test_the_program_judges_grey_pairs(store: Path, tmp_path: Path) -> None:
    configure(store, [str(program(tmp_path, JUDGE_MERGE))])
    old = add(store, summary=OLD, created_at=days_ago(40), tags=["deploy"])
    new = add(store, summary=NEW, created_at=days_ago(20), tags=["deploy"])
    out = run(store)
    assert [a["decision"] for a in out.actions if a["type"] == "judge"] == ["MERGE"]
    merges = [{k: a[k] for k in ("type", "source_ids", "result_id")} for a in out.actions if a["type"] == "merge"]
    assert merges == [{"type": "merge", "source_ids": [old["id"], new["id"]], "result_id": new["id"]}]
    assert '"pair_id"' in calls(tmp_path)[0]["prompt"]


def test_an_unparsable_answer_falls_back_without_a_notice(store: Path, tmp_path: Path) -> None:
    configure(store, [str(program(tmp_path, "print('I would rather not.')"))])
    old = add(store, summary=OLD, created_at=days_ago(40), tags=["deploy"])
    add(store, summary=NEW, created_at=days_ago(20), tags=["deploy"])
    verbose(store)
    out = run(store)
    assert methods(out) == ["extractive"]
    judged = [a for a in out.actions if a["type"] == "judge"]
    assert [(a["decision"], a["reason"]) for a in judged] == [("SKIP", "unparsable")]
    assert not any(a["type"] == "merge" for a in out.actions) and old["id"]
    assert out.notes == []
    assert len(calls(tmp_path)) == 2  # an unreadable answer does not stop later calls


def test_a_program_that_answers_without_reading_its_input(store: Path, tmp_path: Path) -> None:
    script = tmp_path / "deaf-llm"
    script.write_text(f"#!{sys.executable}\nprint({SUMMARY!r})\n")  # never reads stdin
    script.chmod(0o755)
    configure(store, [str(script)])
    verbose(store, details="x" * 300 + " A very long session indeed. ")  # a prompt far over a pipe's buffer
    assert methods(run(store)) == ["llm"]


# ---------------------------------------------------------------- failures: one notice, rule-based


def test_a_missing_program_is_one_notice(store: Path, tmp_path: Path) -> None:
    configure(store, [str(tmp_path / "no-such-llm"), "-p"])
    verbose(store, 3)
    out = run(store)
    assert methods(out) == ["extractive"] * 3
    assert out.notes == [f"LLM command failed: `{tmp_path / 'no-such-llm'}` was not found (is it on PATH?); "
                         "the rest of this run is rule-based"]


def test_a_program_not_on_path(store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    configure(store, "memcli-test-no-such-program -p")
    verbose(store)
    out = run(store)
    assert methods(out) == ["extractive"] and "`memcli-test-no-such-program` was not found" in out.notes[0]


def test_a_program_that_is_not_executable(store: Path, tmp_path: Path) -> None:
    script = program(tmp_path, SUMMARIZER)
    script.chmod(0o644)
    configure(store, [str(script)])
    verbose(store, 2)
    out = run(store)
    assert methods(out) == ["extractive", "extractive"]
    assert len(out.notes) == 1 and "is not executable" in out.notes[0]


def test_a_folder_as_the_program(store: Path, tmp_path: Path) -> None:
    configure(store, [str(tmp_path)])
    verbose(store)
    out = run(store)
    assert methods(out) == ["extractive"] and len(out.notes) == 1 and "LLM command failed" in out.notes[0]


def test_a_failing_program_stops_llm_use_with_its_stderr_redacted(store: Path, tmp_path: Path) -> None:
    body = f"sys.stderr.write('warming up\\nerror: not logged in, token={SECRET}\\n'); sys.exit(3)"
    configure(store, [str(program(tmp_path, body))])
    verbose(store, 3)
    out = run(store)
    assert methods(out) == ["extractive"] * 3
    assert len(calls(tmp_path)) == 1  # the first failure ends LLM use for the run
    [note] = out.notes
    assert "failed (exit status 3): error: not logged in, token=[REDACTED]" in note
    assert SECRET not in note


def test_a_hanging_program_is_killed_with_what_it_started(store: Path, tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    body = ("import subprocess\n"
            "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
            f"open({str(pids)!r}, 'a').write(f'{{child.pid}}\\n')\n"
            "time.sleep(60)")
    configure(store, [str(program(tmp_path, body))], timeout_s=0.5)
    verbose(store, 3)
    started = time.monotonic()
    out = run(store)
    assert time.monotonic() - started < 10
    assert methods(out) == ["extractive"] * 3
    assert len(calls(tmp_path)) == 2  # two timeouts in a row end LLM use, as on the API path
    [note] = out.notes
    assert "gave no answer within 0.5 s" in note and "rest of this run is rule-based" in note
    for pid in pids.read_text().split():
        assert not _alive(int(pid)), "the program's child outlived the timeout"


def _alive(pid: int) -> bool:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        try:  # a zombie (killed, not yet reaped by init) counts as gone
            with open(f"/proc/{pid}/stat") as stat:
                if stat.read().split(")")[-1].split()[0] == "Z":
                    return False
        except OSError:
            return False
        time.sleep(0.05)
    return True


def test_one_timeout_skips_that_call_only(store: Path, tmp_path: Path) -> None:
    body = ("n = sum(1 for _ in open(os.path.join(os.path.dirname(sys.argv[0]), 'calls.jsonl')))\n"
            "if n == 1: time.sleep(60)\n" + SUMMARIZER)
    configure(store, [str(program(tmp_path, body))], timeout_s=1)
    verbose(store, 2)
    out = run(store)
    assert methods(out) == ["extractive", "llm"]
    assert out.notes == ["LLM command failed 1 time(s) (`" + str(tmp_path / "fake-llm")
                         + "` gave no answer within 1 s); those calls fell back to the rule-based path"]


def test_a_flooding_program_is_stopped(store: Path, tmp_path: Path) -> None:
    body = "chunk = 'y' * 65536\nwhile True:\n    sys.stdout.write(chunk)"
    configure(store, [str(program(tmp_path, body))])
    verbose(store, 2)
    started = time.monotonic()
    out = run(store)
    assert time.monotonic() - started < 20
    assert methods(out) == ["extractive", "extractive"] and len(calls(tmp_path)) == 1
    assert "wrote more than 1,000,000 bytes" in out.notes[0]


def test_run_command_directly(tmp_path: Path) -> None:
    echo = program(tmp_path, "sys.stdout.write(prompt.upper())")
    assert run_command([str(echo)], "héllo", 10) == "HÉLLO"
    with pytest.raises(CommandFailed) as caught:
        run_command([str(program(tmp_path, "print('x' * 200)", name="big"))], "", 10, max_output=100)
    assert caught.value.reason == "output_too_large"
    with pytest.raises(CommandFailed) as caught:
        run_command([str(program(tmp_path, "os.kill(os.getpid(), 9)", name="killed"))], "", 10)
    assert caught.value.reason == "command_signal_9"


def test_the_cli_prints_the_notice_and_exits_0(store: Path, tmp_path: Path) -> None:
    configure(store, [str(tmp_path / "no-such-llm")])
    verbose(store)
    result = CliRunner().invoke(app, ["--store", str(store), "consolidate"])
    assert result.exit_code == 0, result.stderr
    assert "note: LLM command failed" in result.stderr


def test_a_memcli_started_by_the_command_stays_rule_based(store: Path, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    configure(store, [str(program(tmp_path, SUMMARIZER))])
    verbose(store)
    monkeypatch.setenv(NESTED_ENV, "1")
    out = run(store)
    assert methods(out) == ["extractive"] and calls(tmp_path) == []
    assert "runs inside its own LLM command" in out.notes[0]


def test_llm_off_never_runs_the_program(store: Path, tmp_path: Path) -> None:
    configure(store, [str(program(tmp_path, SUMMARIZER))], enabled=False)
    verbose(store)
    assert methods(run(store, dry_run=True)) == ["extractive"] and calls(tmp_path) == []
    assert methods(run(store, llm=True, dry_run=True)) == ["llm"]  # --llm turns it on for one run


def test_no_api_key_is_needed(store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    configure(store, [str(program(tmp_path, SUMMARIZER))])
    verbose(store)
    out = run(store)
    assert methods(out) == ["llm"] and out.notes == []


# ---------------------------------------------------------------- budgets


def test_the_run_budget_binds_the_command(store: Path, tmp_path: Path) -> None:
    configure(store, [str(program(tmp_path, SUMMARIZER))], max_calls_per_run=1)
    verbose(store, 3)
    assert methods(run(store)) == ["llm", "extractive", "extractive"]
    assert len(calls(tmp_path)) == 1


def test_the_day_budget_is_counted_across_runs(store: Path, tmp_path: Path) -> None:
    configure(store, [str(program(tmp_path, SUMMARIZER))], max_calls_per_day=3)
    verbose(store, 2)
    first = run(store)
    assert methods(first) == ["llm", "llm"] and first.notes == []
    assert state(store)["llm_calls"] == {"day": "2026-11-22", "calls": 2}
    verbose(store, 2, details="Another long session. ")
    second = run(store)
    assert methods(second) == ["llm", "extractive"]
    assert second.notes == ["LLM daily budget reached ([llm] max_calls_per_day = 3); the rest of this run "
                            "is rule-based (extractive summaries, grey-zone pairs skipped)"]
    assert state(store)["llm_calls"] == {"day": "2026-11-22", "calls": 3}
    verbose(store, 1, details="A third long session. ")
    third = run(store)
    assert methods(third) == ["extractive"] and len(calls(tmp_path)) == 3
    assert third.notes == ["LLM daily budget reached ([llm] max_calls_per_day = 3); this run is rule-based "
                           "(extractive summaries, grey-zone pairs skipped)"]
    assert state(store)["llm_calls"] == {"day": "2026-11-22", "calls": 3}


def test_the_day_budget_starts_again_the_next_local_day(store: Path, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    configure(store, [str(program(tmp_path, SUMMARIZER))], max_calls_per_day=1)
    (store / "ops" / "state.json").write_bytes(orjson.dumps({"llm_calls": {"day": "2026-11-21", "calls": 1}}))
    verbose(store)
    assert methods(run(store)) == ["llm"]  # yesterday's call does not count today
    assert state(store)["llm_calls"] == {"day": "2026-11-22", "calls": 1}


def test_the_day_is_the_local_day() -> None:
    from memcli.store.model import parse_ts

    moment = parse_ts("2026-11-22T02:00:00Z")[0]
    old = os.environ.get("TZ")
    try:
        os.environ["TZ"] = "America/Los_Angeles"
        time.tzset()
        assert llm_budget.local_day(moment) == "2026-11-21"  # still Saturday evening there
        os.environ["TZ"] = "Asia/Tokyo"
        time.tzset()
        assert llm_budget.local_day(moment) == "2026-11-22"
    finally:
        if old is None:
            os.environ.pop("TZ", None)
        else:
            os.environ["TZ"] = old
        time.tzset()


@pytest.mark.parametrize("bad", [{"llm_calls": []}, {"llm_calls": {"day": "2026-11-22", "calls": "9"}},
                                 {"llm_calls": {"day": "2026-11-22", "calls": True}},
                                 {"llm_calls": {"day": "2026-11-22", "calls": -4}}])
def test_a_malformed_count_counts_as_nothing(store: Path, tmp_path: Path, bad: dict[str, Any]) -> None:
    configure(store, [str(program(tmp_path, SUMMARIZER))], max_calls_per_day=1)
    (store / "ops" / "state.json").write_bytes(orjson.dumps(bad))
    verbose(store)
    assert methods(run(store)) == ["llm"]
    assert state(store)["llm_calls"] == {"day": "2026-11-22", "calls": 1}


def test_a_zero_day_budget_means_no_calls(store: Path, tmp_path: Path) -> None:
    configure(store, [str(program(tmp_path, SUMMARIZER))], max_calls_per_day=0)
    verbose(store)
    out = run(store)
    assert methods(out) == ["extractive"] and calls(tmp_path) == [] and "daily budget" in out.notes[0]


def test_a_dry_run_respects_the_day_budget_but_records_nothing(store: Path, tmp_path: Path) -> None:
    configure(store, [str(program(tmp_path, SUMMARIZER))], max_calls_per_day=1)
    verbose(store, 2)
    out = run(store, dry_run=True)
    assert methods(out) == ["llm", "extractive"] and "daily budget" in out.notes[0]
    assert "llm_calls" not in state(store)


def test_a_run_without_calls_leaves_the_count_alone(store: Path, tmp_path: Path) -> None:
    configure(store, [str(program(tmp_path, SUMMARIZER))])
    add(store)
    run(store)
    assert "llm_calls" not in state(store) and calls(tmp_path) == []


def test_failed_calls_count_too(store: Path, tmp_path: Path) -> None:
    configure(store, [str(program(tmp_path, "sys.exit(1)"))])
    verbose(store, 2)
    run(store)
    assert state(store)["llm_calls"] == {"day": "2026-11-22", "calls": 1}


def test_status_shows_the_calls_of_the_day(store: Path) -> None:
    (store / "ops" / "state.json").write_bytes(orjson.dumps({"llm_calls": {"day": "2026-11-22", "calls": 7}}))
    result = CliRunner().invoke(app, ["--store", str(store), "--json", "status"])
    assert json.loads(result.stdout)["llm_calls_today"] == {"day": "2026-11-22", "calls": 7,
                                                             "max_calls_per_day": 200}


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeAnthropic]:
    with fake_anthropic() as fake:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key-not-secret")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.url)
        yield fake


def test_the_day_budget_binds_the_api_path_too(store: Path, server: FakeAnthropic) -> None:
    (store / "memcli.toml").write_text(TOML + "\n[llm]\nenabled = true\nmax_calls_per_day = 2\n")
    (store / "ops" / "state.json").write_bytes(orjson.dumps({"llm_calls": {"day": "2026-11-22", "calls": 1}}))
    verbose(store, 2)
    server.push_text(SUMMARY, SUMMARY)
    out = run(store)
    assert methods(out) == ["llm", "extractive"] and server.request_count == 1
    assert "daily budget reached" in out.notes[0]
    assert state(store)["llm_calls"] == {"day": "2026-11-22", "calls": 2}


# ---------------------------------------------------------------- settings


def test_command_and_budget_settings_are_read(tmp_path: Path) -> None:
    (tmp_path / "memcli.toml").write_text('[llm]\ncommand = "claude -p --model \'haiku 4\'"\n'
                                          "max_calls_per_day = 50\n")
    cfg = load_settings(tmp_path).llm
    assert cfg.command == ("claude", "-p", "--model", "haiku 4") and cfg.max_calls_per_day == 50
    (tmp_path / "memcli.toml").write_text('[llm]\ncommand = ["/opt/my llm", "--json", ""]\n')
    assert load_settings(tmp_path).llm.command == ("/opt/my llm", "--json", "")
    defaults = load_settings(tmp_path / "none").llm
    assert defaults.command == () and defaults.max_calls_per_day == 200


@pytest.mark.parametrize(("text", "message"), [
    ("command = 5", "llm.command must be a command line string or a list of strings, got 5"),
    ('command = ["claude", 5]', "llm.command must be a command line string or a list of strings"),
    ('command = ""', "llm.command must name a program"),
    ("command = []", "llm.command must name a program"),
    ('command = ["", "-p"]', "llm.command must name a program"),
    ('command = "claude -p \'unclosed"', "llm.command is not a valid command line"),
    ('command = ["claude", "a\\u0000b"]', "llm.command holds a NUL character"),
    ("max_calls_per_day = -1", "llm.max_calls_per_day must be in 0..1000000, got -1"),
    ('max_calls_per_day = "lots"', "llm.max_calls_per_day must be an integer"),
    ("max_calls_per_day = 2.5", "llm.max_calls_per_day must be an integer"),
])
def test_bad_llm_settings_name_the_key(tmp_path: Path, text: str, message: str) -> None:
    (tmp_path / "memcli.toml").write_text(f"[llm]\n{text}\n")
    with pytest.raises(ConfigError) as caught:
        load_settings(tmp_path)
    assert message in str(caught.value)


def test_a_session_end_run_records_its_calls_with_the_rest_of_its_state(store: Path, tmp_path: Path) -> None:
    configure(store, [str(program(tmp_path, SUMMARIZER))])
    add(store)
    run(store)  # a full run first: session_end then looks at what changed since
    verbose(store)
    out = run(store, trigger="session_end")
    assert methods(out) == ["llm"]
    data = state(store)
    assert data["llm_calls"] == {"day": "2026-11-22", "calls": 1}
    assert data["runs"]["session_end"]["run_id"] == out.run_id


def test_an_undone_run_keeps_its_calls_counted(store: Path, tmp_path: Path) -> None:
    configure(store, [str(program(tmp_path, SUMMARIZER))])
    verbose(store)
    out = run(store)
    result = CliRunner().invoke(app, ["--store", str(store), "undo", out.run_id])
    assert result.exit_code == 0, result.stderr
    assert state(store)["llm_calls"] == {"day": "2026-11-22", "calls": 1}  # spent is spent
