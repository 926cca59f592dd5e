"""Output that degrades well: non-UTF-8 streams, a reader that leaves early, 60 columns.
Encodings and pipes are tried in real processes, as a shell would run memcli."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memcli.cli import app
from tests import forked
from tests.conftest import add, days_ago

runner = CliRunner()
DEMO = Path(__file__).resolve().parents[2] / "fixtures" / "demo-store"
ENV = {"MEMCLI_NOW": "2026-11-22T00:00:00Z"}
UNICODE = "Café naïve résumé: deploy → staging “first” … 日本語 ✓"


def demo(tmp_path: Path) -> Path:
    root = tmp_path / "demo"
    shutil.copytree(DEMO, root)
    return root


def memcli(*args: str, env: dict[str, str] | None = None, stdout: int | None = subprocess.PIPE,
           cwd: Path | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "memcli", *args], stdout=stdout, stderr=subprocess.PIPE,
                          env={**os.environ, **ENV, **(env or {})}, timeout=120, cwd=cwd)


# ---------------------------------------------------------------- encodings


@pytest.fixture
def unicode_store(store: Path) -> tuple[Path, str]:
    mem = add(store, summary=UNICODE, details="Détails: “quoted” — and more …", tags=["ünïcode"])
    add(store, summary="plain ascii text about the deploy", access_count=0, last_accessed=None,
        created_at=days_ago(200))
    runner.invoke(app, ["--store", str(store), "reindex"])
    return store, mem["id"]


ENCODED = [("ascii", argv) for argv in (["stats"], ["list"], ["show", "{id}"], ["stats", "--json"],
                                         ["list", "--json"], ["show", "{id}", "--json"], ["log"], ["status"],
                                         ["consolidate", "--dry-run"], ["review", "list"], ["doctor"])]
ENCODED += [("latin-1", ["stats"]), ("latin-1", ["list"]), ("latin-1", ["show", "{id}", "--json"])]


@pytest.mark.slow
@pytest.mark.parametrize(("encoding", "argv"), ENCODED, ids=lambda a: " ".join(a) if isinstance(a, list) else a)
def test_a_stream_that_is_not_utf8_never_gets_a_traceback(unicode_store: tuple[Path, str], encoding: str,
                                                           argv: list[str]) -> None:
    store, mem_id = unicode_store
    # a process of its own whose interpreter started with that encoding (tests/forked.py)
    done = forked.run_bytes(["--store", str(store), *[a.format(id=mem_id) for a in argv]],
                            env={**os.environ, **ENV, "PYTHONIOENCODING": encoding})
    assert done.returncode == 0, done.stderr
    assert b"Traceback" not in done.stderr and b"UnicodeEncodeError" not in done.stderr
    text = done.stdout.decode(encoding)
    if "--json" in argv:
        data = json.loads(text)  # \u escapes: the exact text survives an ASCII stream
        assert done.stdout.isascii() and (UNICODE in json.dumps(data, ensure_ascii=False) or argv[0] == "stats")
    if encoding == "ascii":
        assert done.stdout.isascii()
    if argv == ["stats"]:
        assert "+--" in text or "|" in text  # rich draws its boxes in ASCII


def test_a_utf8_stream_keeps_the_text(unicode_store: tuple[Path, str]) -> None:
    store, mem_id = unicode_store
    result = runner.invoke(app, ["--store", str(store), "show", mem_id])
    assert result.exit_code == 0 and UNICODE in result.stdout


# ---------------------------------------------------------------- closed pipes

PIPED = [
    ["--help"], ["--version"], ["list"], ["list", "--json"], ["show", "{id}"], ["status"], ["stats"], ["log"],
    ["log", "--run", "{run}"], ["review", "list"], ["doctor"], ["consolidate", "--dry-run"],
    ["consolidate", "--dry-run", "--json"], ["consolidate"], ["reindex"], ["access", "{id}"],
    ["recall", "deploy staging"], ["tick", "--dry-run"], ["undo", "{run}"], ["install", "cron"],
]


@pytest.fixture(scope="module")
def run_demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    """The demo store after one real run, made once: (store, the run's id, a live memory's id)."""
    store = demo(tmp_path_factory.mktemp("piped"))
    with pytest.MonkeyPatch.context() as mp:  # module-scoped: runs before the autouse clock
        mp.setenv("MEMCLI_NOW", ENV["MEMCLI_NOW"])
        first = json.loads(runner.invoke(app, ["--store", str(store), "consolidate", "--json"]).stdout)
        listed = json.loads(runner.invoke(app, ["--store", str(store), "list", "--json"]).stdout)
    return store, first["run_id"], listed["memories"][0]["id"]


@pytest.mark.slow
@pytest.mark.parametrize("argv", PIPED, ids=lambda a: " ".join(a))
def test_a_closed_pipe_is_not_a_failure(tmp_path: Path, run_demo: tuple[Path, str, str], argv: list[str]) -> None:
    """`memcli ... | head -1` at its worst: the reader is gone before memcli writes a byte.
    What was done stays done (a real run is applied and logged) and memcli exits 0."""
    store = tmp_path / "demo"
    shutil.copytree(run_demo[0], store)
    args = [a.format(id=run_demo[2], run=run_demo[1]) for a in argv]
    # stdout a pipe nobody will ever read: every write is a broken pipe (tests/forked.py)
    done = forked.run_bytes(["--store", str(store), *args], env={**os.environ, **ENV}, closed_pipe=True)
    assert done.returncode == 0, done.stderr.decode()
    assert b"Traceback" not in done.stderr and b"BrokenPipe" not in done.stderr
    if args == ["consolidate"]:
        log = json.loads((store / "ops" / "consolidation-log.json").read_text())
        assert len(log["entries"]) == 2  # the run happened and was logged


@pytest.mark.slow
def test_head_1_through_a_shell(tmp_path: Path) -> None:
    store = demo(tmp_path)
    env = {**os.environ, **ENV}
    for command in ("list", "consolidate --dry-run --all", "show mem_01M7THQH", "status", "stats"):
        done = subprocess.run(f"{sys.executable} -m memcli --store {store} {command} | head -1; "
                              "exit ${PIPESTATUS[0]}", shell=True, executable="/bin/bash",
                              capture_output=True, text=True, env=env, timeout=120)
        assert done.returncode == 0 and len(done.stdout.splitlines()) == 1, (command, done.stderr)
        assert "Traceback" not in done.stderr


# ---------------------------------------------------------------- 60 columns

def narrow(store: Path, *args: str) -> str:
    result = runner.invoke(app, ["--store", str(store), *args], env={"COLUMNS": "60", "LINES": "40"})
    assert result.exit_code == 0, result.output
    return result.stdout


def check_narrow(text: str, ids: set[str]) -> None:
    """Every line fits 60 columns unless it holds a path too long for any line (a command
    to paste is never wrapped); every id shown is whole."""
    for line in text.splitlines():
        assert len(line) <= 60 or any(len(word) > 45 for word in line.split()), line
    missing = {i for i in ids if not re.search(rf"(?<![\w-]){re.escape(i)}(?![\w-])", text)}
    assert not missing, missing
    fragments = re.findall(r"\b(?:mem|run)_[0-9A-Za-z]{1,25}\b", text)
    assert not fragments, fragments  # an id cut across lines would leave a fragment


def test_sixty_columns_never_split_an_id(tmp_path: Path) -> None:
    store = demo(tmp_path)
    plan = json.loads(runner.invoke(app, ["--store", str(store), "consolidate", "--dry-run", "--json"]).stdout)
    ids = {i for a in plan["actions"] for i in a.get("source_ids", []) + a.get("memory_ids", [])
           + [a.get("memory_id"), a.get("result_id")] if i}
    check_narrow(narrow(store, "consolidate", "--dry-run", "--all"), ids)
    check_narrow(narrow(store, "consolidate", "--dry-run"), set())
    real = json.loads(runner.invoke(app, ["--store", str(store), "consolidate", "--json"]).stdout)
    check_narrow(narrow(store, "log"), {real["run_id"]})
    check_narrow(narrow(store, "log", "--run", real["run_id"], "--all"), ids)
    status = narrow(store, "status")
    check_narrow(status, {real["run_id"]})
    queue = json.loads(runner.invoke(app, ["--store", str(store), "review", "list", "--json"]).stdout)["items"]
    check_narrow(narrow(store, "review", "list"), {i["id"] for i in queue} | {m for i in queue
                                                                             for m in i["memory_ids"]})
    if queue:
        check_narrow(narrow(store, "review", "show", queue[0]["id"]), set(queue[0]["memory_ids"]))
    listed = json.loads(runner.invoke(app, ["--store", str(store), "list", "--json"]).stdout)["memories"]
    check_narrow(narrow(store, "list"), {m["id"] for m in listed})


def test_log_at_60_columns_reads_its_counts(tmp_path: Path) -> None:
    store = demo(tmp_path)
    runner.invoke(app, ["--store", str(store), "consolidate"])
    out = narrow(store, "log")
    assert "merged 10, summarised 3, promoted 5, archived 8" in out.replace("\n  ", " ")
    assert "mer…" not in out
