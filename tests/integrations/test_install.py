"""install claude (settings.json merge, slash commands) and install cron (crontab line)."""

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
from croniter import croniter
from typer.testing import CliRunner

from memcli.cli import app
from memcli.integrations import install

runner = CliRunner()

ORIGINAL: dict[str, Any] = {
    "model": "sonnet",
    "permissions": {"allow": ["Bash(git:*)"], "deny": []},
    "env": {"FOO": "bar"},
    "hooks": {
        "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "guard.sh"}]}],
        "SessionEnd": [
            {"matcher": "", "hooks": [{"type": "command", "command": "echo bye >> ~/bye.log"}]},
            {"hooks": [{"type": "command", "command": "notify-send done", "timeout": 5}]},
        ],
    },
    "unknown_future_key": [1, {"nested": True}],
}


def invoke(*args: str, code: int = 0, env: dict[str, str] | None = None) -> Any:
    result = runner.invoke(app, list(args), env=env)
    assert result.exit_code == code, (result.stdout, result.stderr, result.exception)
    return result


def settings_of(project: Path) -> dict[str, Any]:
    data: dict[str, Any] = orjson.loads((project / ".claude" / "settings.json").read_bytes())
    return data


def session_end_commands(data: dict[str, Any]) -> list[str]:
    return [h["command"] for g in data["hooks"]["SessionEnd"] for h in g["hooks"]]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    folder = tmp_path / "webapp"
    (folder / ".claude").mkdir(parents=True)
    (folder / ".claude" / "settings.json").write_text(
        json.dumps(ORIGINAL, indent=4) + "\n")
    return folder


# ---------------------------------------------------------------- install claude


def test_install_keeps_everything_and_adds_our_hook_once(store: Path, project: Path) -> None:
    invoke("--store", str(store), "install", "claude", "--project", str(project))
    data = settings_of(project)
    ours = f"memcli hook session-end --store '{store.resolve()}'"
    assert session_end_commands(data) == ["echo bye >> ~/bye.log", "notify-send done", ours]
    assert {k: v for k, v in data.items() if k != "hooks"} == {
        k: v for k, v in ORIGINAL.items() if k != "hooks"}
    assert data["hooks"]["PreToolUse"] == ORIGINAL["hooks"]["PreToolUse"]
    assert data["hooks"]["SessionEnd"][-1] == {"hooks": [{"type": "command", "command": ours}]}


def test_install_twice_is_install_once(store: Path, project: Path) -> None:
    invoke("--store", str(store), "install", "claude", "--project", str(project))
    before = {p: p.read_bytes() for p in (project / ".claude").rglob("*") if p.is_file()}
    second = invoke("--store", str(store), "--json", "install", "claude", "--project", str(project))
    after = {p: p.read_bytes() for p in (project / ".claude").rglob("*") if p.is_file()}
    assert after == before
    report = orjson.loads(second.stdout)
    assert report["settings_action"] == "unchanged"
    assert set(report["files"].values()) == {"unchanged"}


def test_uninstall_restores_the_original(store: Path, project: Path) -> None:
    invoke("--store", str(store), "install", "claude", "--project", str(project))
    invoke("--store", str(store), "install", "claude", "--project", str(project))
    result = invoke("install", "claude", "--project", str(project), "--uninstall")
    assert settings_of(project) == ORIGINAL
    assert not (project / ".claude" / "commands" / "memcli.md").exists()
    assert not (project / ".claude" / "commands" / "memory.md").exists()
    assert "SessionEnd hook removed" in result.stdout
    again = invoke("--json", "install", "claude", "--project", str(project), "--uninstall")
    assert orjson.loads(again.stdout)["settings_action"] == "absent"


def test_install_into_a_project_without_settings(store: Path, tmp_path: Path) -> None:
    bare = tmp_path / "bare"
    bare.mkdir()
    invoke("--store", str(store), "install", "claude", "--project", str(bare))
    assert settings_of(bare) == {"hooks": {"SessionEnd": [{"hooks": [
        {"type": "command", "command": f"memcli hook session-end --store '{store.resolve()}'"}]}]}}
    invoke("install", "claude", "--project", str(bare), "--uninstall")
    assert settings_of(bare) == {}


def test_store_in_the_project_folder_needs_no_store_flag(store: Path, cwd: Path) -> None:
    os.chdir(store)
    invoke("install", "claude")  # --project defaults to ., the store defaults to it too
    assert session_end_commands(settings_of(store)) == ["memcli hook session-end"]
    body = (store / ".claude" / "commands" / "memcli.md").read_text()
    assert "    memcli $ARGUMENTS\n" in body and "--store" not in body


def test_a_moved_store_updates_our_hook_in_place(store: Path, project: Path, tmp_path: Path) -> None:
    invoke("--store", str(store), "install", "claude", "--project", str(project))
    moved = tmp_path / "moved"
    store.rename(moved)
    result = invoke("--store", str(moved), "--json", "install", "claude", "--project", str(project))
    assert orjson.loads(result.stdout)["settings_action"] == "updated"
    commands = session_end_commands(settings_of(project))
    assert commands[-1] == f"memcli hook session-end --store '{moved.resolve()}'"
    assert len([c for c in commands if "memcli" in c]) == 1
    assert set(orjson.loads(result.stdout)["files"].values()) == {"updated"}


def test_invalid_settings_json_is_refused_and_left_alone(store: Path, project: Path) -> None:
    path = project / ".claude" / "settings.json"
    path.write_text('{"hooks": {,}')
    result = invoke("--store", str(store), "install", "claude", "--project", str(project), code=1)
    assert "is not valid JSON" in result.stderr and "will not overwrite" in result.stderr
    assert path.read_text() == '{"hooks": {,}'
    assert not (project / ".claude" / "commands").exists()
    invoke("install", "claude", "--project", str(project), "--uninstall", code=1)
    assert path.read_text() == '{"hooks": {,}'


@pytest.mark.parametrize("bad", [[1, 2], {"hooks": []}, {"hooks": {"SessionEnd": {}}}])
def test_settings_of_an_unexpected_shape_are_refused(store: Path, project: Path, bad: Any) -> None:
    path = project / ".claude" / "settings.json"
    path.write_bytes(orjson.dumps(bad))
    invoke("--store", str(store), "install", "claude", "--project", str(project), code=1)
    assert orjson.loads(path.read_bytes()) == bad


def test_user_install_goes_to_home_and_always_names_the_store(store: Path, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    invoke("--store", str(store), "install", "claude", "--user")
    data = orjson.loads((home / ".claude" / "settings.json").read_bytes())
    assert session_end_commands(data) == [f"memcli hook session-end --store '{store.resolve()}'"]
    assert (home / ".claude" / "commands" / "memcli.md").exists()
    invoke("install", "claude", "--user", "--uninstall")
    assert orjson.loads((home / ".claude" / "settings.json").read_bytes()) == {}


def test_project_and_user_together_is_an_error(store: Path, project: Path) -> None:
    result = invoke("--store", str(store), "install", "claude", "--user", "--project", str(project),
                    code=1)
    assert "choose one" in result.stderr


def test_install_needs_a_store(project: Path, cwd: Path) -> None:
    assert "no memory store" in invoke("install", "claude", "--project", str(project), code=1).stderr


def test_slash_commands_pass_arguments_to_memcli(store: Path, project: Path) -> None:
    invoke("--store", str(store), "install", "claude", "--project", str(project))
    for name in ("memcli", "memory"):
        text = (project / ".claude" / "commands" / f"{name}.md").read_text()
        _, front, body = text.split("---\n", 2)
        meta = yaml.safe_load(front)
        assert meta["allowed-tools"] == "Bash(memcli:*)"
        assert "consolidate" in meta["argument-hint"] and meta["description"]
        assert f"    memcli --store '{store.resolve()}' $ARGUMENTS\n" in body
        assert "show me the command's output" in body


def test_files_memcli_did_not_write_are_never_touched(store: Path, project: Path) -> None:
    commands = project / ".claude" / "commands"
    commands.mkdir()
    (commands / "memory.md").write_text("My own /memory command.\n")
    result = invoke("--store", str(store), "--json", "install", "claude", "--project", str(project))
    assert orjson.loads(result.stdout)["files"][str(commands / "memory.md")].startswith("kept")
    assert (commands / "memory.md").read_text() == "My own /memory command.\n"
    (commands / "memcli.md").write_text((commands / "memcli.md").read_text() + "\nMy note.\n")
    invoke("install", "claude", "--project", str(project), "--uninstall")
    assert (commands / "memory.md").read_text() == "My own /memory command.\n"
    assert (commands / "memcli.md").read_text().endswith("My note.\n")


def test_a_symlinked_settings_file_stays_a_symlink(store: Path, project: Path, tmp_path: Path) -> None:
    real = tmp_path / "dotfiles" / "settings.json"
    real.parent.mkdir()
    link = project / ".claude" / "settings.json"
    real.write_bytes(link.read_bytes())
    link.unlink()
    link.symlink_to(real)
    invoke("--store", str(store), "install", "claude", "--project", str(project))
    assert link.is_symlink() and "memcli hook session-end" in real.read_text()


def test_merge_and_remove_are_pure() -> None:
    merged, action = install.merge_hook(ORIGINAL, "memcli hook session-end")
    assert action == "added" and ORIGINAL["hooks"]["SessionEnd"][-1]["hooks"][0]["command"] != (
        "memcli hook session-end")
    assert install.merge_hook(merged, "memcli hook session-end")[1] == "unchanged"
    assert install.remove_hook(merged) == (ORIGINAL, 1)


@pytest.mark.parametrize("command, ours", [
    ("memcli hook session-end", True),
    ("/home/u/.venv/bin/memcli hook session-end --store '/x'", True),
    ("'/opt/my tools/memcli' --quiet hook session-end", True),
    ("echo memcli hook session-ending", False),
    ("othermemcli hook session-end", False),
])
def test_which_hooks_are_ours(command: str, ours: bool) -> None:
    assert install.is_our_hook({"type": "command", "command": command}) is ours


def test_install_claude_as_a_real_process(store: Path, project: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "memcli", "install", "claude", "--project", str(project),
                           "--store", str(store)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "/memcli consolidate" in proc.stdout
    assert session_end_commands(settings_of(project))[-1].startswith("memcli hook session-end")


# ---------------------------------------------------------------- install cron


@pytest.fixture
def fake_crontab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A `crontab` that keeps the table in a file and says "no crontab" until it has one."""
    table = tmp_path / "crontab.txt"
    script = tmp_path / "fake-crontab"
    script.write_text(f"""#!/bin/sh
if [ "$1" = "-l" ]; then
  if [ -f '{table}' ]; then cat '{table}'; exit 0; fi
  echo "no crontab for tester" >&2; exit 1
fi
if [ "$1" = "-" ]; then cat > '{table}'; exit 0; fi
exit 2
""")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("MEMCLI_CRONTAB", str(script))
    return table


def test_cron_line_is_raw_and_croniter_accepts_it(store: Path) -> None:
    result = invoke("--store", str(store), "install", "cron", env={"COLUMNS": "30"})
    line = result.stdout
    assert line.endswith(" # memcli-weekly\n") and line.count("\n") == 1
    fields = line.split()[:5]
    assert fields == ["0", "0", "*", "*", "0"] and croniter.is_valid(" ".join(fields))
    root = str(store.resolve())
    assert f"cd '{root}' && '" in line
    assert f"--store '{root}' consolidate --trigger weekly --quiet >> '{root}/ops/cron.log' 2>&1" in line
    assert "\x1b" not in line


def test_cron_line_follows_the_schedule_setting(store: Path) -> None:
    (store / "memcli.toml").write_text('[schedule]\nweekly = "30 3 * * 1"\n')
    line = invoke("--store", str(store), "install", "cron").stdout
    assert line.startswith("30 3 * * 1 cd ")


def test_cron_escapes_percent_signs(tmp_path: Path) -> None:
    root = tmp_path / "100%store"
    (root / "ops").mkdir(parents=True)
    line = install.cron_line(root, "0 0 * * 0", "'/bin/memcli'")
    assert "100\\%store" in line and "100%store" not in line
    assert install.is_our_cron_line(line, root)


def test_cron_apply_keeps_other_lines_and_is_idempotent(store: Path, tmp_path: Path,
                                                        fake_crontab: Path) -> None:
    other_store = "15 4 * * * cd '/elsewhere' && memcli --store '/elsewhere' tick # memcli-weekly"
    original = ["# my jobs", "MAILTO=me@example.com", "*/5 * * * * /usr/bin/backup --fast",
                other_store, "", "@reboot /usr/bin/start-things"]
    fake_crontab.write_text("\n".join(original) + "\n")
    first = invoke("--store", str(store), "install", "cron", "--apply")
    assert "added" in first.stderr
    table = fake_crontab.read_text().splitlines()
    assert table[:-1] == original and table[-1] == first.stdout.rstrip("\n")
    second = invoke("--store", str(store), "install", "cron", "--apply")
    assert "unchanged" in second.stderr and fake_crontab.read_text().splitlines() == table
    (store / "memcli.toml").write_text('[schedule]\nweekly = "0 6 * * 6"\n')
    invoke("--store", str(store), "install", "cron", "--apply")
    replaced = fake_crontab.read_text().splitlines()
    assert replaced[:-1] == original and replaced[-1].startswith("0 6 * * 6 ")
    invoke("--store", str(store), "install", "cron", "--uninstall")
    assert fake_crontab.read_text().splitlines() == original


def test_cron_apply_with_no_crontab_yet(store: Path, fake_crontab: Path) -> None:
    result = invoke("--store", str(store), "--json", "install", "cron", "--apply")
    data = orjson.loads(result.stdout)
    assert data["action"] == "added"
    assert fake_crontab.read_text() == data["line"] + "\n"


def test_a_failing_crontab_is_an_error(store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    broken = tmp_path / "broken-crontab"
    broken.write_text("#!/bin/sh\necho 'cron daemon says no' >&2\nexit 1\n")
    broken.chmod(0o755)
    monkeypatch.setenv("MEMCLI_CRONTAB", str(broken))
    result = invoke("--store", str(store), "install", "cron", "--apply", code=1)
    assert "cron daemon says no" in result.stderr
    monkeypatch.setenv("MEMCLI_CRONTAB", str(tmp_path / "missing"))
    assert "not found" in invoke("--store", str(store), "install", "cron", "--apply", code=1).stderr


def test_install_cron_as_a_real_process(store: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "memcli", "install", "cron", "--store", str(store)],
                          capture_output=True, text=True, env={**os.environ, "COLUMNS": "20"}, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.endswith("# memcli-weekly\n") and proc.stdout.count("\n") == 1
    assert croniter.is_valid(" ".join(proc.stdout.split()[:5]))
