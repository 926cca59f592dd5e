"""memcli with the real Claude Code client (`claude -p`), against a loopback mock of the
Messages API (tests/e2e/messages_mock.py): HOME is a temporary folder, the API key a dummy,
non-essential traffic off, and PATH without memcli's virtualenv (the README's set-up never
activates it), so every check below goes through what `memcli install claude` wrote.

The client is the version pinned in .ci/claude-code/package.json, installed by `.ci/run`
(`npm ci --prefix .ci/claude-code`); this module installs it the same way when it is missing
and npm is there. Only without npm (or with MEMCLI_E2E_CLAUDE naming a program that is not
there) is it skipped, with a warning.

The SessionStart briefing and the MCP `recall` tool come with the recall work (issue 12):
the briefing reaches the first request of a store's first session (no search index yet), and
the MCP tools are listed in the first request (Claude Code lists a server's tools only when it
answered within about 1.5 s; `memcli mcp` answers discovery before its SDK has loaded).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memcli.integrations import claude as claude_install
from tests.conftest import add
from tests.e2e.messages_mock import MessagesMock, bash, messages_mock, text, tool_results, tool_use, user_text

REPO = Path(__file__).resolve().parents[2]
PIN_DIR = REPO / ".ci" / "claude-code"
MEMCLI = str(Path(sys.executable).absolute().parent / "memcli")
PROG = claude_install.sq(MEMCLI)
BRIEFING_TEXT = "Deploy to staging with make ship-staging before production"


def pinned_version() -> str:
    return str(json.loads((PIN_DIR / "package.json").read_text())["dependencies"]["@anthropic-ai/claude-code"])


def _claude_program() -> str:
    named = os.environ.get("MEMCLI_E2E_CLAUDE")
    if named:
        if not Path(named).is_file():
            _skip_loudly(f"MEMCLI_E2E_CLAUDE={named} is not a file")
        return named
    program = PIN_DIR / "node_modules" / ".bin" / "claude"
    if not program.exists():
        npm = shutil.which("npm")
        if npm is None:
            _skip_loudly("npm is not installed, so the pinned Claude Code cannot be installed "
                         "(CI has npm; install Node.js and npm to run this test)")
        proc = subprocess.run([npm, "ci", "--prefix", str(PIN_DIR), "--no-audit", "--no-fund",
                               "--loglevel=error"], capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, f"npm ci --prefix {PIN_DIR} failed:\n{proc.stderr}"
    return str(program)


def _skip_loudly(reason: str) -> None:
    message = f"END-TO-END TEST WITH THE REAL CLAUDE CODE SKIPPED: {reason}"
    warnings.warn(message, stacklevel=2)
    sys.stderr.write(f"\n*** {message} ***\n")
    pytest.skip(message)


@pytest.fixture(scope="module")
def claude_bin() -> str:
    program = _claude_program()
    version = subprocess.run([program, "--version"], capture_output=True, text=True, timeout=60)
    assert version.returncode == 0, version.stderr
    assert version.stdout.split()[0] == pinned_version(), (
        f"{program} is {version.stdout.strip()}, the pin is {pinned_version()}: run .ci/run")
    return program


@pytest.fixture(scope="module")
def api() -> Iterator[MessagesMock]:
    with messages_mock() as mock:
        yield mock


class Session:
    """A temporary HOME and the environment `claude -p` runs in."""

    def __init__(self, claude: str, api: MessagesMock, home: Path) -> None:
        self.claude = claude
        self.api = api
        self.home = home
        self.env = {
            "HOME": str(home), "PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8",
            "ANTHROPIC_BASE_URL": api.url, "ANTHROPIC_API_KEY": "sk-ant-dummy-for-tests",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1",
            "DISABLE_TELEMETRY": "1", "DISABLE_ERROR_REPORTING": "1",
            "MEMCLI_NOW": os.environ.get("MEMCLI_NOW", ""),
        }

    def run(self, cwd: Path, prompt: str, *turns: list[dict[str, Any]]) -> subprocess.CompletedProcess[str]:
        self.api.reset()
        self.api.reply(*turns, [text("done")])
        proc = subprocess.run([self.claude, "-p", prompt], cwd=cwd, env=self.env, stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=90)
        assert proc.returncode == 0, (proc.stdout, proc.stderr)
        return proc

    def results(self) -> dict[str, str]:
        """Every tool result the client sent back, by tool_use id."""
        found: dict[str, str] = {}
        for body in self.api.loop_requests():
            found.update(tool_results(body))
        return found


@pytest.fixture
def session(claude_bin: str, api: MessagesMock, tmp_path: Path) -> Session:
    home = tmp_path / "home"
    home.mkdir()
    return Session(claude_bin, api, home)


def tree(project: Path) -> dict[str, bytes | None]:
    found: dict[str, bytes | None] = {}
    for path in sorted([*project.joinpath(".claude").rglob("*"), project / ".mcp.json"]):
        if path.exists():
            found[str(path.relative_to(project))] = None if path.is_dir() else path.read_bytes()
    return found


def squeeze(value: str) -> str:
    """Text without whitespace: a table may wrap a long path anywhere."""
    return "".join(value.split())


def memcli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([MEMCLI, *args], capture_output=True, text=True, cwd=cwd, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc


def hook_log(store: Path) -> str:
    path = store / "ops" / "hook.log"
    return path.read_text() if path.exists() else ""


def wait_for(predicate: Any, seconds: float = 30.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return False


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A project with a team's committed settings and a command of its own."""
    folder = tmp_path / "webapp"
    (folder / ".claude" / "commands").mkdir(parents=True)
    (folder / ".claude" / "settings.json").write_text(json.dumps({"permissions": {"allow": ["Bash(make:*)"]}},
                                                                  indent=2) + "\n")
    (folder / ".claude" / "commands" / "deploy.md").write_text("Deploy the app.\n")
    return folder


# ---------------------------------------------------------------- the checks


@pytest.mark.slow
def test_session_end_status_no_memory_and_exact_uninstall(session: Session, store: Path,
                                                          project: Path) -> None:
    add(store, summary=BRIEFING_TEXT, type="procedural", subtype="deployment", priority="critical")
    before = tree(project)
    memcli("--store", str(store), "install", "claude", "--project", str(project))
    assert not (project / ".claude" / "commands" / "memory.md").exists()

    # /memcli status: the command expands, and the Bash call it asks for runs with no prompt
    call = bash(f"{PROG} --store '{store.resolve()}' status")
    session.run(project, "/memcli status", [call])
    first = session.api.loop_requests()[0]
    said = user_text(first)
    assert "<command-name>/memcli</command-name>" in said and 'Arguments given: "status"' in said
    assert "memcli-install" not in json.dumps(first)  # the marker is front matter, never sent
    result = session.results()[call["id"]]
    assert f"Store:{store.resolve()}" in squeeze(result) and "requires approval" not in result, result
    # not offered to the model as a skill; and no /memory of ours hiding the built-in one
    listing = json.dumps(first)
    assert "- memcli:" not in listing and "memcli memory store" not in listing

    # the SessionEnd hook ran (the session above ended) and its background pass is logged
    assert wait_for(lambda: "run-background: done (ok)" in hook_log(store)), hook_log(store)
    log = hook_log(store)
    assert "session-end: start (session " in log and "reason other" in log
    from memcli.store import log as run_log  # shared log and this machine's quiet runs

    entries = run_log.read_entries(store)
    assert "session_end" in [e["trigger"] for e in entries]

    memcli("install", "claude", "--project", str(project), "--uninstall")
    assert tree(project) == before


@pytest.mark.slow
def test_status_from_a_subfolder_of_a_project_store(session: Session, tmp_path: Path) -> None:
    """The store is the project folder; the session moves into a subfolder (SPEC 1)."""
    project = tmp_path / "proj"
    memcli("init", str(project))
    (project / "src" / "deep").mkdir(parents=True)
    memcli("install", "claude", cwd=project)
    move, status = bash(f"cd {project / 'src' / 'deep'}"), bash(f"{PROG} status")
    session.run(project, "/memcli", [move], [status])
    said = user_text(session.api.loop_requests()[0])
    assert 'Arguments given: ""' in said and f"run: `{PROG} status`" in said
    result = session.results()[status["id"]]
    assert f"Store:{project.resolve()}" in squeeze(result) and "no memory store" not in result, result
    assert wait_for(lambda: "run-background: done (ok)" in hook_log(project)), hook_log(project)
    assert f"cwd {project.resolve() / 'src' / 'deep'}" in hook_log(project)  # the session's cwd


@pytest.mark.slow
def test_session_start_briefing_reaches_the_request(session: Session, store: Path, project: Path) -> None:
    # global/: in the view of the session's agent (`claude`, SPEC 11); no search index yet.
    # The hook's own time budget is tested elsewhere; here it must not depend on the load (8 s: under the 10 s timeout install gives the hook).
    (store / "memcli.toml").write_text((store / "memcli.toml").read_text() + "\n[recall]\nhook_budget_ms = 8000\n")
    add(store, summary=BRIEFING_TEXT, type="procedural", subtype="deployment", priority="critical",
        scope="global", scope_id="global")
    memcli("--store", str(store), "install", "claude", "--project", str(project))
    session.run(project, "hello")
    first = session.api.loop_requests()[0]
    assert BRIEFING_TEXT in json.dumps(first)


@pytest.mark.slow
def test_mcp_recall_is_offered_and_answers(session: Session, store: Path, project: Path) -> None:
    add(store, summary=BRIEFING_TEXT, type="procedural", subtype="deployment")
    memcli("--store", str(store), "install", "claude", "--project", str(project))
    call = tool_use("mcp__memcli__recall", {"query": "deploy staging"})
    session.run(project, "how do we deploy?", [call])
    assert "mcp__memcli__recall" in json.dumps(session.api.loop_requests()[0])
    result = session.results()[call["id"]]
    assert BRIEFING_TEXT in result, result
