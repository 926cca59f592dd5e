"""The basics of the command line: --version, completion, bare `memcli`, help, usage errors
under --json, --quiet everywhere, and a start-up that imports only what a command uses."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from memcli.cli import app
from tests import forked
from tests.conftest import add, days_ago

runner = CliRunner()
ID = re.compile(r"^(mem|run|rev)_[0-9A-Za-z_-]+$")


def run(*args: str, env: dict[str, str] | None = None, input: str | None = None) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args), env=env, input=input, prog_name="memcli")
    return result.exit_code, result.stdout, result.stderr


def test_version_names_the_store_format() -> None:
    code, out, _ = run("--version")
    assert code == 0 and re.fullmatch(r"memcli \S+ \(store format 1\)\n", out)


def test_bare_memcli_prints_help_and_exits_0() -> None:
    code, out, _ = run()
    assert code == 0 and "Usage: memcli" in out and "consolidate" in out and "--version" in out


def test_completion_is_offered() -> None:
    code, out, _ = run("--help")
    assert code == 0 and "--install-completion" in out and "--show-completion" in out
    # as a user runs it, from a shell (typer finds the shell among the parent processes: with
    # the test process as the parent it found none, now and then, and printed "Shell  not
    # supported"); `; true` keeps bash from handing its process over to the command
    done = subprocess.run(["bash", "-c", f"{shlex.quote(sys.executable)} -m memcli --show-completion; true"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "_MEMCLI_COMPLETE" in done.stdout, (done.stdout, done.stderr)


def test_completion_completes_commands_in_a_real_shell_call(tmp_path: Path) -> None:
    """What bash runs on TAB: the completion variable set, the words so far."""
    env = {**os.environ, "_MEMCLI_COMPLETE": "complete_bash", "COMP_WORDS": "memcli cons",
           "COMP_CWORD": "1"}
    done = subprocess.run([sys.executable, "-m", "memcli"], capture_output=True, text=True, env=env,
                          timeout=60, cwd=tmp_path)
    assert done.returncode == 0 and "consolidate" in done.stdout.split()
    env.update(COMP_WORDS="memcli hook se", COMP_CWORD="2")  # a fast-path command completes too
    done = subprocess.run([sys.executable, "-m", "memcli"], capture_output=True, text=True, env=env,
                          timeout=60, cwd=tmp_path)
    assert {"session-end", "session-start"} <= set(done.stdout.split())


def _all_commands() -> list[list[str]]:
    root = typer.main.get_command(app)
    found: list[list[str]] = []

    def walk(cmd: object, path: list[str]) -> None:
        subs = getattr(cmd, "commands", None)
        if subs is None:
            found.append(path)
            return
        for name, sub in subs.items():
            walk(sub, path + [name])

    walk(root, [])
    return found


@pytest.mark.parametrize("path", _all_commands(), ids=lambda p: " ".join(p))
def test_every_command_help_lists_the_common_options_with_readable_metavars(path: list[str]) -> None:
    code, out, _ = run(*path, "--help")
    assert code == 0 and "Common options (before or after the command)" in out
    assert "--store PATH" in out and "--wait SECONDS" in out and "--json" in out and "--quiet" in out
    assert not re.search(r"<[a-z\[\], ]+>", out), out  # no <str>, <bool>, <list[str]>
    assert not re.search(r"\b(INTEGER|BOOLEAN|FLOAT)\b", out), out


def test_examples_in_help_are_kept_as_written() -> None:
    code, out, _ = run("log", "--help")
    assert code == 0 and "  Example: memcli log --last 5      memcli log --run run_01JD\n" in out


@pytest.mark.parametrize("argv", [["add", "--bogus"], ["nosuchcommand"], ["list", "--limit", "many"],
                                  ["show"]])
def test_usage_errors_are_json_under_json(store: Path, argv: list[str]) -> None:
    code, out, _ = run("--store", str(store), "--json", *argv)
    assert code == 2 and set(json.loads(out)) == {"error"} and json.loads(out)["error"]
    code, out, err = run("--store", str(store), *argv)
    assert code == 2 and out == "" and "Error" in err and "Usage" in err


def test_json_after_the_command_makes_usage_errors_json_too(store: Path) -> None:
    code, out, _ = run("--store", str(store), "add", "--bogus", "--json")
    assert code == 2 and "error" in json.loads(out)


def _quiet_store(store: Path) -> tuple[str, str]:
    keep = add(store, summary="Deploy to staging first and then promote the same build")["id"]
    add(store, summary="A note nobody ever read", last_accessed=None, access_count=0, created_at=days_ago(200))
    assert runner.invoke(app, ["--store", str(store), "reindex"]).exit_code == 0  # doctor: no index_missing
    return keep, keep[:12]


QUIET = [
    (["list"], "ids"), (["show", "{id}"], "record"), (["stats"], "nothing"), (["status"], "nothing"),
    (["log"], "ids"), (["review", "list"], "ids"), (["consolidate", "--dry-run"], "nothing"),
    (["consolidate"], "ids"), (["reindex"], "nothing"), (["doctor"], "nothing"), (["access", "{id}"], "nothing"),
    (["add", "--type", "semantic", "--scope", "agent", "--scope-id", "coder", "--summary", "quiet one"], "ids"),
    (["forget", "{prefix}"], "ids"),
]


@pytest.mark.parametrize(("argv", "shape"), QUIET, ids=lambda v: " ".join(v) if isinstance(v, list) else v)
def test_quiet_prints_only_what_a_script_needs(store: Path, argv: list[str], shape: str) -> None:
    """--quiet: ids (or the record `show` was asked for), never a table, title, hint or note."""
    keep, prefix = _quiet_store(store)
    args = [a.format(id=keep, prefix=prefix) for a in argv]
    code, out, err = run("--store", str(store), "--quiet", *args)
    assert code == 0, err
    assert "note:" not in err and "Undo with" not in out and "Apply with" not in out
    lines = out.splitlines()
    if shape == "ids":
        assert all(ID.match(line) for line in lines), out
    elif shape == "nothing":
        assert out == ""
    else:
        assert lines[0] == "---" and f"id: {keep}" in out


# ---------------------------------------------------------------- start-up

PROBE = """
import atexit, sys
heavy = ("rich", "numpy", "memcli.consolidate.engine", "typer.rich_utils", "typer", "pydantic")
atexit.register(lambda: sys.stderr.write("HEAVY=" + ",".join(m for m in heavy if m in sys.modules) + "\\n"))
sys.argv = ["memcli"] + sys.argv[1:]
from memcli.cli import main
main()
"""


def _heavy(*argv: str, cwd: Path) -> tuple[int, list[str]]:
    done = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, timeout=60,
                          cwd=cwd, env={**os.environ, "MEMCLI_NOW": "2026-11-22T00:00:00Z"})
    line = [x for x in done.stderr.splitlines() if x.startswith("HEAVY=")][-1]
    return done.returncode, [m for m in line.removeprefix("HEAVY=").split(",") if m]


def _demo(tmp_path: Path) -> Path:
    import shutil

    root = tmp_path / "demo"
    shutil.copytree(Path(__file__).resolve().parents[2] / "fixtures" / "demo-store", root)
    return root


@pytest.mark.parametrize("argv", [["log"], ["add", "--help"], ["list", "--help"]])
def test_lean_commands_import_no_rich_numpy_or_engine(tmp_path: Path, argv: list[str]) -> None:
    demo = _demo(tmp_path)
    code, heavy = _heavy("--store", str(demo), *argv, cwd=tmp_path)
    assert code == 0 and set(heavy) <= {"typer", "pydantic"}  # typer parses them; nothing heavier


@pytest.mark.parametrize("argv", [["--help"], ["--version"], ["list"], ["list", "--json"], ["list", "--sort=uses", "--limit", "3"],
                                  ["show", "mem_01M7THQH00DEF8SJMC11T3AZRQ"], ["show", "01M7THQH", "--json"]])
def test_list_show_and_version_start_without_typer(tmp_path: Path, argv: list[str]) -> None:
    """The fast path serves them: typer's option parsing alone imports pydantic."""
    demo = _demo(tmp_path)
    code, heavy = _heavy("--store", str(demo), *argv, cwd=tmp_path)
    assert code == 0 and heavy == []


@pytest.mark.slow
@pytest.mark.parametrize("argv", [["list"], ["list", "--json", "--since", "30d", "--sort", "created"],
                                  ["list", "--quiet", "--tag", "deploy"], ["list", "--archived"],
                                  ["show", "01M7THQH"], ["show", "mem_01M7THQH00DEF8SJMC11T3AZRQ", "--json"],
                                  ["show", "01M"], ["show", "nothing"], ["list", "--sort", "size"], ["--version"]])
def test_the_fast_path_prints_what_typer_prints(tmp_path: Path, argv: list[str]) -> None:
    demo = _demo(tmp_path)
    env = {**os.environ, "MEMCLI_NOW": "2026-11-22T00:00:00Z", "COLUMNS": "80"}
    # `python -m memcli`, forked (tests/forked.py): the same entry point and fast path, without an
    # interpreter start each; what the fast path imports is the start-up tests' above
    fast = forked.run(["--store", str(demo), *argv], env=env, cwd=tmp_path)
    slow = runner.invoke(app, ["--store", str(demo), *argv], env={"COLUMNS": "80"}, prog_name="memcli")
    assert (fast.returncode, fast.stdout, fast.stderr) == (slow.exit_code, slow.stdout, slow.stderr)


def test_the_fast_path_hands_usage_errors_to_typer(tmp_path: Path) -> None:
    demo = _demo(tmp_path)
    for argv in (["list", "--limit", "many"], ["list", "--bogus"], ["show"], ["show", "a", "b"]):
        done = forked.run(["--store", str(demo), *argv], cwd=tmp_path)  # `python -m memcli`, forked
        assert done.returncode == 2 and "Usage: memcli" in done.stderr, argv


def test_commands_that_draw_tables_or_run_still_work(tmp_path: Path) -> None:
    """The other side: `stats` draws a rich table; a dry run imports the engine (and only then)."""
    demo = _demo(tmp_path)
    code, heavy = _heavy("--store", str(demo), "stats", cwd=tmp_path)
    assert code == 0 and "rich" in heavy and "memcli.consolidate.engine" not in heavy
    code, heavy = _heavy("--store", str(demo), "consolidate", "--dry-run", cwd=tmp_path)
    assert code == 0 and "memcli.consolidate.engine" in heavy and "rich" not in heavy
