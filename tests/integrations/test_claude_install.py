"""`memcli install claude` (SPEC 11): what goes where, merges that keep everything else,
exact uninstall, command files, bad input. The real client is in tests/e2e/."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml
from typer.testing import CliRunner

from memcli.cli import app
from memcli.integrations import claude

runner = CliRunner()
PROG = claude.program()  # the venv's memcli, quoted: what the tests run from
BIN = PROG.strip("'")

SHARED: dict[str, Any] = {  # a team's committed .claude/settings.json
    "model": "sonnet",
    "permissions": {"allow": ["Bash(git:*)"], "deny": []},
    "hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "guard.sh"}]}]},
}
LOCAL: dict[str, Any] = {  # this person's .claude/settings.local.json
    "permissions": {"allow": ["Bash(npm test:*)"]},
    "env": {"FOO": "bar"},
    "hooks": {
        "SessionEnd": [
            {"matcher": "", "hooks": [{"type": "command", "command": "echo bye >> ~/bye.log"}]},
            {"hooks": [{"type": "command", "command": "notify-send done", "timeout": 5}]},
        ],
    },
    "enabledMcpjsonServers": ["github"],
    "unknown_future_key": [1, {"nested": True}],
}
MCP: dict[str, Any] = {"mcpServers": {"github": {"command": "npx", "args": ["-y", "gh-mcp"]}}}


def invoke(*args: str, code: int = 0, env: dict[str, str] | None = None) -> Any:
    result = runner.invoke(app, list(args), env=env)
    assert result.exit_code == code, (result.stdout, result.stderr, result.exception)
    return result


def install(store: Path, project: Path, *more: str, code: int = 0) -> Any:
    return invoke("--store", str(store), "install", "claude", "--project", str(project), *more, code=code)


def uninstall(project: Path, code: int = 0) -> Any:
    return invoke("install", "claude", "--project", str(project), "--uninstall", code=code)


def load(path: Path) -> Any:
    return orjson.loads(path.read_bytes())


def tree(project: Path) -> dict[str, bytes | None]:
    """Every file under .claude/ and .mcp.json, with its bytes (folders as None)."""
    found: dict[str, bytes | None] = {}
    for path in sorted([*project.joinpath(".claude").rglob("*"), project / ".mcp.json"]):
        if path.is_dir():
            found[str(path.relative_to(project))] = None
        elif path.exists():
            found[str(path.relative_to(project))] = path.read_bytes()
    return found


def commands_of(data: dict[str, Any], event: str) -> list[str]:
    return [h["command"] for g in data["hooks"][event] for h in g["hooks"]]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    folder = tmp_path / "webapp"
    (folder / ".claude").mkdir(parents=True)
    (folder / ".claude" / "settings.json").write_text(json.dumps(SHARED, indent=4) + "\n")
    (folder / ".claude" / "settings.local.json").write_text(json.dumps(LOCAL, indent=2) + "\n")
    (folder / ".mcp.json").write_text(json.dumps(MCP) + "\n")
    return folder


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "home"
    folder.mkdir()
    monkeypatch.setenv("HOME", str(folder))
    return folder


# ---------------------------------------------------------------- what goes where


def test_project_install_puts_machine_paths_in_settings_local(store: Path, project: Path) -> None:
    shared_before = (project / ".claude" / "settings.json").read_bytes()
    install(store, project)
    assert (project / ".claude" / "settings.json").read_bytes() == shared_before  # committed: untouched
    local = load(project / ".claude" / "settings.local.json")
    flag = f"--store '{store.resolve()}'"
    for event, (sub, timeout) in claude.HOOKS.items():
        ours = [h for g in local["hooks"][event] for h in g["hooks"] if "memcli" in h["command"]]
        assert ours == [{"type": "command", "command": f"{PROG} {flag} hook {sub}", "timeout": timeout}]
    assert commands_of(local, "SessionEnd")[:2] == ["echo bye >> ~/bye.log", "notify-send done"]
    assert local["permissions"]["allow"] == ["Bash(npm test:*)", *claude.ALLOWED]
    assert local["env"] == {"FOO": "bar", "MEMCLI_BIN": BIN, "MEMCLI_STORE": str(store.resolve())}
    assert local["enabledMcpjsonServers"] == ["github", "memcli"]
    assert local["unknown_future_key"] == LOCAL["unknown_future_key"]
    assert os.path.isabs(BIN) and os.access(BIN, os.X_OK)


def test_mcp_json_names_no_path_of_this_machine(store: Path, project: Path) -> None:
    install(store, project)
    data = load(project / ".mcp.json")
    assert data["mcpServers"]["github"] == MCP["mcpServers"]["github"]
    assert data["mcpServers"]["memcli"] == {"type": "stdio", "command": "sh", "args": ["-c", claude.MCP_SHELL]}
    text = (project / ".mcp.json").read_text()
    assert str(store.resolve()) not in text and BIN not in text


def test_the_mcp_entry_runs_memcli_mcp_through_the_env_variable(tmp_path: Path) -> None:
    """What Claude Code will run: sh -c with MEMCLI_BIN from settings.local.json's env."""
    fake = tmp_path / "fake-memcli"
    fake.write_text("#!/bin/sh\necho \"called with: $*\"\n")
    fake.chmod(0o755)
    entry = {"type": "stdio", "command": "sh", "args": ["-c", claude.MCP_SHELL]}
    proc = subprocess.run([entry["command"], *entry["args"]], capture_output=True, text=True,
                          env={**os.environ, "MEMCLI_BIN": str(fake)}, timeout=10)
    assert proc.stdout == "called with: mcp\n"


def test_store_in_the_project_folder_needs_no_store_anywhere(store: Path, cwd: Path) -> None:
    os.chdir(store)
    invoke("install", "claude")  # --project defaults to ., the store defaults to it too
    local = load(store / ".claude" / "settings.local.json")
    assert commands_of(local, "SessionEnd") == [f"{PROG} hook session-end"]
    assert local["env"] == {"MEMCLI_BIN": BIN}
    body = (store / ".claude" / "commands" / "memcli.md").read_text()
    assert "--store" not in body and f"`{PROG} $ARGUMENTS`" in body


def test_user_install_goes_to_home(store: Path, home: Path) -> None:
    claude_json = home / ".claude.json"
    claude_json.write_text(json.dumps({"numStartups": 3, "projects": {"/x": {"allowedTools": []}}}))
    claude_json.chmod(0o600)
    invoke("--store", str(store), "install", "claude", "--user")
    settings = load(home / ".claude" / "settings.json")
    flag = f"--store '{store.resolve()}'"
    assert commands_of(settings, "SessionStart") == [f"{PROG} {flag} hook session-start"]
    assert settings["permissions"]["allow"] == list(claude.ALLOWED)
    assert "env" not in settings and "enabledMcpjsonServers" not in settings
    config = load(claude_json)
    assert config["numStartups"] == 3 and config["projects"] == {"/x": {"allowedTools": []}}
    assert config["mcpServers"]["memcli"] == {"type": "stdio", "command": BIN,
                                              "args": ["--store", str(store.resolve()), "mcp"]}
    assert stat.S_IMODE(claude_json.stat().st_mode) == 0o600  # Claude Code's private file stays private
    assert (home / ".claude" / "commands" / "memcli.md").exists()
    invoke("install", "claude", "--user", "--uninstall")
    assert not (home / ".claude").exists()  # memcli made it; nothing else was in it
    assert load(claude_json) == {"numStartups": 3, "projects": {"/x": {"allowedTools": []}}}


def test_project_and_user_together_is_an_error(store: Path, project: Path) -> None:
    result = invoke("--store", str(store), "install", "claude", "--user", "--project", str(project), code=1)
    assert "choose one" in result.stderr


def test_install_needs_a_store(project: Path, cwd: Path) -> None:
    assert "no memory store" in invoke("install", "claude", "--project", str(project), code=1).stderr
    assert not (project / ".claude" / "commands").exists()


def test_a_missing_project_folder_is_an_error(store: Path, tmp_path: Path) -> None:
    result = install(store, tmp_path / "nope", code=1)
    assert "does not exist" in result.stderr


# ---------------------------------------------------------------- twice, moved, uninstall


def test_install_twice_is_install_once(store: Path, project: Path) -> None:
    install(store, project)
    before = tree(project)
    report = orjson.loads(install(store, project, "--json").stdout)
    assert tree(project) == before
    assert set(report["files"].values()) == {"unchanged"}


def test_uninstall_restores_every_file_byte_for_byte(store: Path, project: Path) -> None:
    before = tree(project)
    install(store, project)
    install(store, project, "--memory-command")
    assert tree(project) != before
    result = uninstall(project)
    assert tree(project) == before
    assert "removed" in result.stdout
    again = orjson.loads(invoke("--json", "install", "claude", "--project", str(project),
                                "--uninstall").stdout)
    assert set(again["files"].values()) <= {"unchanged", "absent"}
    assert tree(project) == before


def test_uninstall_of_a_bare_project_leaves_nothing_behind(store: Path, tmp_path: Path) -> None:
    bare = tmp_path / "bare"
    bare.mkdir()
    install(store, bare)
    assert (bare / ".claude" / "settings.local.json").exists() and (bare / ".mcp.json").exists()
    uninstall(bare)
    assert sorted(p.name for p in bare.iterdir()) == []  # no {} files, no empty .claude/commands/


def test_uninstall_keeps_a_folder_that_holds_other_things(store: Path, tmp_path: Path) -> None:
    bare = tmp_path / "bare"
    (bare / ".claude" / "commands").mkdir(parents=True)
    (bare / ".claude" / "commands" / "deploy.md").write_text("Deploy.\n")
    install(store, bare)
    uninstall(bare)
    assert [p.name for p in (bare / ".claude").rglob("*")] == ["commands", "deploy.md"]


def test_a_file_whose_content_does_not_change_is_not_rewritten(store: Path, project: Path) -> None:
    shared = project / ".claude" / "settings.json"
    shared.write_text('{"model":"sonnet",   "permissions":{"allow":["Bash(git:*)"]}}')
    mtime = shared.stat().st_mtime_ns
    install(store, project)
    uninstall(project)
    assert shared.read_text() == '{"model":"sonnet",   "permissions":{"allow":["Bash(git:*)"]}}'
    assert shared.stat().st_mtime_ns == mtime


def test_a_rewritten_file_keeps_its_indentation(store: Path, project: Path) -> None:
    local = project / ".claude" / "settings.local.json"
    local.write_text(json.dumps(LOCAL, indent="\t"))  # tabs, no final newline
    install(store, project)
    assert local.read_text().startswith('{\n\t"permissions"') and not local.read_text().endswith("\n")
    uninstall(project)
    assert local.read_text() == json.dumps(LOCAL, indent="\t")


def test_a_moved_store_updates_our_entries_in_place(store: Path, project: Path, tmp_path: Path) -> None:
    install(store, project)
    moved = tmp_path / "moved"
    store.rename(moved)
    report = orjson.loads(install(moved, project, "--json").stdout)
    local = load(project / ".claude" / "settings.local.json")
    assert report["files"][str(project / ".claude" / "settings.local.json")] == "updated"
    for event in claude.HOOKS:
        ours = [c for c in commands_of(local, event) if "memcli" in c]
        assert len(ours) == 1 and f"--store '{moved.resolve()}'" in ours[0]
    assert local["env"]["MEMCLI_STORE"] == str(moved.resolve())
    assert report["files"][str(project / ".claude" / "commands" / "memcli.md")] == "updated"


def test_an_earlier_install_is_migrated(store: Path, project: Path) -> None:
    """memcli before this version: a bare `memcli` hook in the committed settings.json and
    /memory installed by default, marked with an HTML comment."""
    shared = project / ".claude" / "settings.json"
    old = {**SHARED, "hooks": {**SHARED["hooks"], "SessionEnd": [{"hooks": [
        {"type": "command", "command": f"memcli hook session-end --store '{store}'"}]}]}}
    shared.write_text(json.dumps(old, indent=4) + "\n")
    commands = project / ".claude" / "commands"
    commands.mkdir()
    legacy = (f"---\ndescription: x\n---\n{claude._LEGACY_MARK}\n\nRun this with the Bash tool:\n\n"
              f"    memcli --store '{store}' $ARGUMENTS\n\nThen show me the command's output as it is.\n")
    (commands / "memory.md").write_text(legacy)
    (commands / "memcli.md").write_text(legacy)
    install(store, project)
    assert load(shared) == SHARED
    assert not (commands / "memory.md").exists()
    assert claude.command_state((commands / "memcli.md").read_text()) == "ours"


# ---------------------------------------------------------------- slash commands


def front_matter(path: Path) -> tuple[dict[str, Any], str]:
    _, front, body = path.read_text().split("---\n", 2)
    return yaml.safe_load(front), body


def test_the_command_file_is_not_a_skill_and_sends_no_marker(store: Path, project: Path) -> None:
    install(store, project)
    meta, body = front_matter(project / ".claude" / "commands" / "memcli.md")
    assert meta["disable-model-invocation"] is True
    assert meta["allowed-tools"] == f"Bash({PROG}:*)"
    assert len(str(meta[claude.MARK_KEY])) == 16
    assert "<!--" not in body and "memcli install" not in body  # only the body reaches the model
    assert meta["description"] and "status" in meta["argument-hint"]


def test_the_command_says_one_thing_with_or_without_arguments(store: Path, project: Path) -> None:
    """Claude Code replaces $ARGUMENTS everywhere; both readings must agree."""
    install(store, project)
    _, body = front_matter(project / ".claude" / "commands" / "memcli.md")
    base = f"{PROG} --store '{store.resolve()}' "
    empty = body.replace("$ARGUMENTS", "")
    assert 'Arguments given: ""' in empty and f"If the arguments above are empty, run: `{base}status`" in empty
    given = body.replace("$ARGUMENTS", "stats")
    assert 'Arguments given: "stats"' in given and f"Otherwise run: `{base}stats`" in given
    assert body.count("$ARGUMENTS") == 2


def test_no_memory_command_unless_asked(store: Path, project: Path) -> None:
    result = install(store, project)
    assert not (project / ".claude" / "commands" / "memory.md").exists()
    assert "built-in /memory" not in result.stderr
    asked = install(store, project, "--memory-command")
    assert (project / ".claude" / "commands" / "memory.md").exists()
    assert "warning: /memory now runs memcli: it hides Claude Code's built-in /memory" in asked.stderr
    assert "in this project" in asked.stderr
    install(store, project)  # asked no more: ours goes again
    assert not (project / ".claude" / "commands" / "memory.md").exists()


def test_user_memory_command_warns_for_every_project(store: Path, home: Path) -> None:
    result = invoke("--store", str(store), "install", "claude", "--user", "--memory-command")
    assert "in every project" in result.stderr


def test_files_memcli_did_not_write_are_never_touched(store: Path, project: Path) -> None:
    commands = project / ".claude" / "commands"
    commands.mkdir()
    (commands / "memory.md").write_text("My own /memory command.\n")
    result = install(store, project, "--json", "--memory-command")
    assert orjson.loads(result.stdout)["files"][str(commands / "memory.md")].startswith("kept")
    assert "not memcli's" in result.stderr
    assert (commands / "memory.md").read_text() == "My own /memory command.\n"
    (commands / "memcli.md").write_text((commands / "memcli.md").read_text() + "\nMy note.\n")
    assert claude.command_state((commands / "memcli.md").read_text()) == "edited"
    install(store, project)
    uninstall(project)
    assert (commands / "memory.md").read_text() == "My own /memory command.\n"
    assert (commands / "memcli.md").read_text().endswith("My note.\n")


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize("name", [".claude/settings.local.json", ".mcp.json", ".claude/settings.json"])
@pytest.mark.parametrize("content", ['{"hooks": {,}', "[1, 2]", "\xff\xfe", '"text"'])
def test_a_file_that_is_not_a_json_object_is_refused(store: Path, project: Path, name: str,
                                                     content: str) -> None:
    (project / name).write_text(content, encoding="latin-1")
    before = tree(project)
    result = install(store, project, code=1)
    assert str(project / name) in result.stderr and "will not overwrite" in result.stderr
    assert tree(project) == before  # nothing written anywhere, not even the command file
    uninstall(project, code=1)
    assert tree(project) == before


@pytest.mark.parametrize("bad", [
    {"hooks": []}, {"hooks": {"SessionEnd": {}}}, {"permissions": {"allow": "all"}},
    {"permissions": []}, {"env": ["x"]}, {"enabledMcpjsonServers": "memcli"},
])
def test_settings_of_an_unexpected_shape_are_refused(store: Path, project: Path, bad: Any) -> None:
    path = project / ".claude" / "settings.local.json"
    path.write_bytes(orjson.dumps(bad))
    before = tree(project)
    result = install(store, project, code=1)
    assert "fix it by hand first" in result.stderr
    assert tree(project) == before


def test_a_foreign_mcp_server_named_memcli_is_refused(store: Path, project: Path) -> None:
    (project / ".mcp.json").write_text(json.dumps({"mcpServers": {"memcli": {"command": "other-tool"}}}))
    before = tree(project)
    assert "does not run `memcli mcp`" in install(store, project, code=1).stderr
    assert tree(project) == before


def test_a_failed_write_puts_back_what_was_written(store: Path, project: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A read-only file system half-way (as root, chmod cannot make one): every file is as before."""
    before = tree(project)
    real = claude._apply

    def failing(change: claude.Change) -> None:
        if change.path.name == ".mcp.json" and change.what != "undo":
            raise PermissionError(13, "Permission denied")
        real(change)

    monkeypatch.setattr(claude, "_apply", failing)
    result = install(store, project, code=1)
    assert f"cannot write {project / '.mcp.json'} (Permission denied)" in result.stderr
    assert "nothing was changed" in result.stderr
    assert tree(project) == before


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root writes into read-only folders")
def test_a_read_only_claude_folder(store: Path, project: Path) -> None:
    claude_dir = project / ".claude"
    before = tree(project)
    claude_dir.chmod(0o555)
    try:
        result = install(store, project, code=1)
        assert "cannot write" in result.stderr and "Traceback" not in result.stderr
    finally:
        claude_dir.chmod(0o755)
    assert tree(project) == before


def test_a_settings_path_that_is_a_folder_is_refused(store: Path, project: Path) -> None:
    (project / ".claude" / "settings.local.json").unlink()
    (project / ".claude" / "settings.local.json").mkdir()
    assert "is a folder" in install(store, project, code=1).stderr


def test_a_symlinked_settings_file_stays_a_symlink(store: Path, project: Path, tmp_path: Path) -> None:
    real = tmp_path / "dotfiles" / "settings.local.json"
    real.parent.mkdir()
    link = project / ".claude" / "settings.local.json"
    real.write_bytes(link.read_bytes())
    link.unlink()
    link.symlink_to(real)
    install(store, project)
    assert link.is_symlink() and "hook session-end" in real.read_text()


# ---------------------------------------------------------------- pure parts


@pytest.mark.parametrize("original", [{}, LOCAL, SHARED, MCP, {"env": {"MEMCLI_STORE": "/mine"}}])
def test_merge_then_remove_gives_back_the_original(original: dict[str, Any]) -> None:
    commands = {event: f"{PROG} hook {sub}" for event, (sub, _) in claude.HOOKS.items()}
    merged = claude.merge_enabled(claude.merge_env(claude.merge_allowed(
        claude.merge_hooks(original, commands)), {"MEMCLI_BIN": BIN}))
    assert claude.merge_hooks(merged, commands) == merged
    back = claude.remove_enabled(claude.remove_env(claude.remove_allowed(claude.remove_hooks(merged))))
    # MEMCLI_STORE is memcli's variable: merging without a named store drops it, as does removing
    assert back == ({} if original.get("env") == {"MEMCLI_STORE": "/mine"} else original)


@pytest.mark.parametrize("command, ours", [
    ("memcli hook session-end", True),
    ("/home/u/.venv/bin/memcli hook session-start --store '/x'", True),
    ("'/opt/my tools/memcli' --quiet hook prompt", True),
    ("'/v/bin/memcli' --store '/s' hook session-end", True),
    ("echo memcli hook session-ending", False),
    ("othermemcli hook session-end", False),
    ("memcli hook run-background", False),
])
def test_which_hooks_are_ours(command: str, ours: bool) -> None:
    assert claude.is_our_hook({"type": "command", "command": command}) is ours


@pytest.mark.parametrize("entry, ours", [
    ({"command": "sh", "args": ["-c", claude.MCP_SHELL]}, True),
    ({"command": "/v/bin/memcli", "args": ["--store", "/s", "mcp"]}, True),
    ({"command": "memcli", "args": ["mcp"]}, True),
    ({"command": "other-tool"}, False),
    ({"command": "memcli", "args": ["recall", "x"]}, False),
    ("memcli", False),
])
def test_which_servers_are_ours(entry: Any, ours: bool) -> None:
    assert claude.is_our_server(entry) is ours


def test_program_is_the_console_script_that_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "argv", [BIN, "install", "claude"])
    assert claude.program() == f"'{BIN}'"


def test_install_claude_as_a_real_process(store: Path, project: Path) -> None:
    proc = subprocess.run([BIN, "install", "claude", "--project", str(project), "--store", str(store)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "/memcli" in proc.stdout
    local = load(project / ".claude" / "settings.local.json")
    assert commands_of(local, "SessionEnd")[-1].startswith(f"'{BIN}' ")
