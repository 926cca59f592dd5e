"""`[llm] command` runs only once approved on this machine (`memcli llm trust`): memcli.toml
may come from a shared repository, and the command runs with the rights of whoever runs a pass."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from memcli.cli import app
from memcli.consolidate import llm_trust
from tests.consolidate.test_llm_command import SUMMARIZER, calls, configure, methods, program, run, verbose

runner = CliRunner()


def cli(store: Path, *args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, ["--store", str(store), *args])
    return result.exit_code, result.stdout, result.stderr


def unapproved(store: Path, tmp_path: Path) -> Path:
    script = program(tmp_path, SUMMARIZER)
    configure(store, [str(script)])
    llm_trust.untrust(store)  # as a teammate's memcli.toml arrives: nobody here approved it
    return script


def test_an_unapproved_command_never_runs_and_the_run_says_how_to_approve(store: Path, tmp_path: Path) -> None:
    unapproved(store, tmp_path)
    verbose(store)
    out = run(store)
    assert methods(out) == ["extractive"]
    assert calls(tmp_path) == []
    [note] = out.notes
    assert "not approved on this machine" in note and "memcli llm trust" in note


def test_trust_approves_the_command_as_it_reads_now(store: Path, tmp_path: Path) -> None:
    script = unapproved(store, tmp_path)
    code, out, _ = cli(store, "llm", "trust")
    assert code == 0 and str(script) in out
    verbose(store)
    assert methods(run(store)) == ["llm"]
    assert len(calls(tmp_path)) == 1
    assert json.loads((store / "ops" / "local" / "trusted-commands.json").read_bytes())["commands"][0]["argv"] == [str(script)]


def test_a_changed_command_needs_a_new_approval(store: Path, tmp_path: Path) -> None:
    script = program(tmp_path, SUMMARIZER)
    configure(store, [str(script), "--flag"])  # approved here as it read then
    toml = store / "memcli.toml"
    toml.write_text(toml.read_text().replace('"--flag"', '"--other-flag"'))  # a teammate's change
    verbose(store)
    out = run(store)
    assert methods(out) == ["extractive"] and "not approved" in out.notes[0]
    assert calls(tmp_path) == []


def test_trust_twice_and_untrust(store: Path, tmp_path: Path) -> None:
    unapproved(store, tmp_path)
    assert json.loads(cli(store, "--json", "llm", "trust")[1])["new"] is True
    assert json.loads(cli(store, "--json", "llm", "trust")[1])["new"] is False
    code, out, _ = cli(store, "--json", "llm", "untrust")
    assert code == 0 and json.loads(out) == {"withdrawn": 1}
    assert json.loads(cli(store, "--json", "llm", "untrust")[1]) == {"withdrawn": 0}


def test_trust_without_a_command_is_an_error_naming_the_file(store: Path) -> None:
    code, _, err = cli(store, "llm", "trust")
    assert code == 1 and "memcli.toml" in err and "no [llm] command" in err


def test_an_unreadable_approvals_file_trusts_nothing(store: Path, tmp_path: Path) -> None:
    script = unapproved(store, tmp_path)
    path = store / "ops" / "local" / "trusted-commands.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("{not json")
    assert not llm_trust.is_trusted(store, [str(script)])
    code, _, err = cli(store, "llm", "trust")
    assert code == 1 and "trusted-commands.json" in err
    assert path.read_text() == "{not json"  # never overwritten unread


def test_digest_covers_every_argument() -> None:
    assert llm_trust.command_digest(["a", "b"]) != llm_trust.command_digest(["a", "b "])
    assert llm_trust.command_digest(["a b"]) != llm_trust.command_digest(["a", "b"])
    assert llm_trust.command_digest(("x",)) == llm_trust.command_digest(["x"])
