"""install systemd and install launchd: files merged never clobbered, systemctl/launchctl
replaced by fakes that record their arguments, and the unit's command really runs tick."""

from __future__ import annotations

import json
import os
import plistlib
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
from typer.testing import CliRunner

from memcli.cli import app
from memcli.integrations import timers
from memcli.store import fsops, opsfiles

runner = CliRunner()


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "home"
    folder.mkdir()
    monkeypatch.setenv("HOME", str(folder))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    return folder


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A systemctl/launchctl stand-in: logs its argv as a JSON line; exits 1 for a
    subcommand named in a `fail-<word>` file, and `print` succeeds only once `loaded` exists."""
    log = tmp_path / "ctl.jsonl"
    script = tmp_path / "fake-ctl"
    script.write_text(
        f"#!{sys.executable}\nimport json, os, sys\n"
        f"base = {str(tmp_path)!r}\n"
        "open(os.path.join(base, 'ctl.jsonl'), 'a').write(json.dumps(sys.argv[1:]) + '\\n')\n"
        "words = [a for a in sys.argv[1:] if not a.startswith('-')]\n"
        "if any(os.path.exists(os.path.join(base, 'fail-' + w)) for w in words):\n"
        "    sys.stderr.write('Failed to connect to bus: No medium found\\n'); sys.exit(1)\n"
        "if words[:1] == ['print'] and not os.path.exists(os.path.join(base, 'loaded')):\n"
        "    sys.stderr.write('Could not find service\\n'); sys.exit(113)\n")
    script.chmod(0o755)
    monkeypatch.setenv("MEMCLI_SYSTEMCTL", str(script))
    monkeypatch.setenv("MEMCLI_LAUNCHCTL", str(script))
    return log


def ctl_calls(log: Path) -> list[list[str]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def invoke(*args: str, code: int = 0) -> Any:
    result = runner.invoke(app, list(args))
    assert result.exit_code == code, (result.stdout, result.stderr)
    return result


def install_json(store: Path, kind: str, *flags: str) -> dict[str, Any]:
    return orjson.loads(invoke("--store", str(store), "--json", "install", kind, *flags).stdout)


def unit_paths(home: Path, store: Path) -> tuple[Path, Path]:
    name = timers.systemd_unit_name(store.resolve())
    folder = home / ".config" / "systemd" / "user"
    return folder / f"{name}.service", folder / f"{name}.timer"


def exec_start(service: str) -> list[str]:
    """ExecStart= read back as systemd reads it: double-quoted words, C escapes, %% and $$."""
    line = next(x for x in service.splitlines() if x.startswith("ExecStart="))
    words = re.findall(r'"((?:[^"\\]|\\.)*)"', line.removeprefix("ExecStart="))
    return [re.sub(r"\\(.)", r"\1", w).replace("%%", "%").replace("$$", "$") for w in words]


def everything(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


# ---------------------------------------------------------------- systemd: files


def test_systemd_writes_a_persistent_timer_and_a_tick_service(store: Path, home: Path, fake: Path) -> None:
    data = install_json(store, "systemd")
    service_path, timer_path = unit_paths(home, store)
    assert data["files"] == {str(service_path): "written", str(timer_path): "written"}
    assert data["ran"] == [] and ctl_calls(fake) == []  # nothing runs without --apply
    assert data["todo"] == ["systemctl --user daemon-reload",
                            f"systemctl --user enable --now {timer_path.name}"]
    assert f"journalctl --user -u {service_path.name}" in data["check"]
    assert f"systemctl --user list-timers {timer_path.name}" in data["check"]
    timer = timer_path.read_text()
    assert "\nPersistent=true\n" in timer and "\nOnCalendar=*:0/15\n" in timer
    assert "\nWantedBy=timers.target\n" in timer
    service = service_path.read_text()
    assert "\nType=oneshot\n" in service
    argv = exec_start(service)
    assert Path(argv[0]).is_absolute() and argv[1:] == ["--store", str(store.resolve()), "--quiet", "tick"]


def test_systemd_respects_xdg_config_home(store: Path, home: Path, fake: Path, tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    data = install_json(store, "systemd")
    assert all(path.startswith(str(tmp_path / "xdg" / "systemd" / "user") + "/") for path in data["files"])
    assert not (home / ".config").exists()
    monkeypatch.setenv("XDG_CONFIG_HOME", "relative/dir")  # not absolute: ignored, as the spec says
    assert all(p.startswith(str(home / ".config")) for p in install_json(store, "systemd")["files"])


def test_systemd_apply_reloads_and_enables(store: Path, home: Path, fake: Path) -> None:
    data = install_json(store, "systemd", "--apply")
    name = timers.systemd_unit_name(store.resolve())
    assert ctl_calls(fake) == [["--user", "daemon-reload"], ["--user", "enable", "--now", f"{name}.timer"]]
    assert data["todo"] == [] and len(data["ran"]) == 2


def test_systemd_installing_twice_changes_nothing(store: Path, home: Path, fake: Path) -> None:
    install_json(store, "systemd")
    before = everything(home)
    stamps = {p: p.stat().st_mtime_ns for p in unit_paths(home, store)}
    again = install_json(store, "systemd")
    assert set(again["files"].values()) == {"unchanged"}
    assert everything(home) == before and {p: p.stat().st_mtime_ns for p in stamps} == stamps


def test_systemd_updates_its_own_older_files(store: Path, home: Path, fake: Path) -> None:
    service_path, _ = unit_paths(home, store)
    install_json(store, "systemd")
    service_path.write_text(service_path.read_text().replace("Nice=10", "Nice=5"))  # an older memcli's
    data = install_json(store, "systemd")
    assert data["files"][str(service_path)] == "updated" and "Nice=10" in service_path.read_text()


def test_systemd_refuses_a_file_it_did_not_write(store: Path, home: Path, fake: Path) -> None:
    service_path, timer_path = unit_paths(home, store)
    timer_path.parent.mkdir(parents=True)
    timer_path.write_text("[Timer]\nOnCalendar=daily\n")
    result = invoke("--store", str(store), "install", "systemd", "--apply", code=1)
    assert f"{timer_path} exists and was not written by memcli" in result.stderr
    assert timer_path.read_text() == "[Timer]\nOnCalendar=daily\n"
    assert not service_path.exists()  # nothing half-written
    assert ctl_calls(fake) == []


def test_systemd_uninstall_removes_exactly_its_files(store: Path, home: Path, fake: Path) -> None:
    folder = home / ".config" / "systemd" / "user"
    folder.mkdir(parents=True)
    (folder / "other.service").write_text("[Service]\nExecStart=/bin/true\n")
    install_json(store, "systemd", "--apply")
    data = install_json(store, "systemd", "--uninstall")
    name = timers.systemd_unit_name(store.resolve())
    assert set(data["files"].values()) == {"removed"}
    assert ctl_calls(fake)[2:] == [["--user", "disable", "--now", f"{name}.timer"], ["--user", "daemon-reload"]]
    assert sorted(p.name for p in folder.iterdir()) == ["other.service"]
    again = install_json(store, "systemd", "--uninstall")
    assert set(again["files"].values()) == {"absent"} and len(ctl_calls(fake)) == 4  # nothing to stop


def test_systemd_uninstall_leaves_a_foreign_file_alone(store: Path, home: Path, fake: Path) -> None:
    service_path, timer_path = unit_paths(home, store)
    service_path.parent.mkdir(parents=True)
    service_path.write_text("[Service]\nExecStart=/bin/true\n")
    result = invoke("--store", str(store), "--json", "install", "systemd", "--uninstall")
    data = orjson.loads(result.stdout)
    assert data["files"] == {str(timer_path): "absent", str(service_path): "left alone"}
    assert service_path.read_text() == "[Service]\nExecStart=/bin/true\n"
    assert "was not written by memcli" in result.stderr and ctl_calls(fake) == []


def test_systemd_uninstall_goes_on_when_systemctl_fails(store: Path, home: Path, fake: Path) -> None:
    install_json(store, "systemd")
    (fake.parent / "fail-disable").touch()
    result = invoke("--store", str(store), "install", "systemd", "--uninstall")
    assert "failed (exit 1): Failed to connect to bus" in result.stderr
    assert not any(p.exists() for p in unit_paths(home, store))


def test_systemd_folder_that_cannot_be_written(store: Path, home: Path, fake: Path, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the config folder should be")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(blocker))
    result = invoke("--store", str(store), "install", "systemd", "--apply", code=1)
    assert result.stderr.startswith("Error: cannot write ") and "nothing was changed" in result.stderr
    assert "Traceback" not in result.stderr and ctl_calls(fake) == []
    assert blocker.read_text() == "a file where the config folder should be"


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_systemd_read_only_folder(store: Path, home: Path, fake: Path) -> None:
    folder = home / ".config" / "systemd" / "user"
    folder.mkdir(parents=True)
    folder.chmod(0o500)
    try:
        result = invoke("--store", str(store), "install", "systemd", code=1)
    finally:
        folder.chmod(0o700)
    assert "cannot write" in result.stderr and list(folder.iterdir()) == []


def test_a_failure_on_the_second_file_takes_back_the_first(store: Path, home: Path, fake: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    service_path, timer_path = unit_paths(home, store)
    real_new = fsops.write_new

    def failing(path: Path, data: bytes) -> None:
        if path.suffix == ".timer":
            raise OSError(28, "No space left on device", str(path))
        real_new(path, data)

    monkeypatch.setattr(fsops, "write_new", failing)
    result = invoke("--store", str(store), "install", "systemd", code=1)
    assert f"cannot write {timer_path}: No space left on device; nothing was changed" in result.stderr
    assert not service_path.exists() and not timer_path.exists()
    assert not [p for p in service_path.parent.iterdir()]  # no temporary file left either


def test_a_failed_update_puts_the_old_file_back(store: Path, home: Path, fake: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    service_path, timer_path = unit_paths(home, store)
    install_json(store, "systemd")
    old_service = service_path.read_text().replace("Nice=10", "Nice=5")
    service_path.write_text(old_service)
    timer_path.write_text(timer_path.read_text() + "# edited\n")
    real = fsops.write_replace

    def failing(path: Path, data: bytes) -> None:
        if path.suffix == ".timer" and b"edited" not in data:
            raise OSError(5, "Input/output error", str(path))
        real(path, data)

    monkeypatch.setattr(fsops, "write_replace", failing)
    invoke("--store", str(store), "install", "systemd", code=1)
    assert service_path.read_text() == old_service and timer_path.read_text().endswith("# edited\n")


def test_systemd_apply_failure_is_an_error_naming_the_command(store: Path, home: Path, fake: Path) -> None:
    (fake.parent / "fail-enable").touch()
    result = invoke("--store", str(store), "install", "systemd", "--apply", code=1)
    assert "enable --now" in result.stderr and "failed (exit 1): Failed to connect to bus" in result.stderr
    assert all(p.exists() for p in unit_paths(home, store))  # the files are fine; start it by hand


def test_systemd_missing_systemctl(store: Path, home: Path, tmp_path: Path,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMCLI_SYSTEMCTL", str(tmp_path / "no-systemctl"))
    result = invoke("--store", str(store), "install", "systemd", "--apply", code=1)
    assert "not found" in result.stderr


def test_awkward_store_paths_are_quoted_for_systemd(tmp_path: Path, home: Path, fake: Path) -> None:
    store = tmp_path / 'my "mem" store $HOME 100%\\x'
    invoke("init", str(store))
    service_path, _ = unit_paths(home, store)
    install_json(store, "systemd")
    assert exec_start(service_path.read_text())[1:3] == ["--store", str(store.resolve())]
    if shutil.which("systemd-analyze"):  # systemd's own parser, where there is one
        proc = subprocess.run(["systemd-analyze", "verify", str(service_path)], capture_output=True,
                              text=True, timeout=60)
        assert "not executable" not in proc.stderr and "Invalid" not in proc.stderr, proc.stderr


def test_two_stores_get_two_timers(tmp_path: Path, home: Path, fake: Path) -> None:
    first, second = tmp_path / "a" / "memory", tmp_path / "b" / "memory"
    for root in (first, second):
        invoke("init", str(root))
        install_json(root, "systemd")
    names = sorted(p.name for p in (home / ".config" / "systemd" / "user").iterdir())
    assert len(names) == 4 and all(n.startswith("memcli-tick-memory-") for n in names)


def test_the_service_command_runs_tick(store: Path, home: Path, fake: Path) -> None:
    service_path, _ = unit_paths(home, store)
    install_json(store, "systemd")
    argv = exec_start(service_path.read_text())
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "TZ": "UTC"}, cwd="/")
    assert proc.returncode == 0, proc.stderr
    state = opsfiles.read_state(store)
    assert state["runs"]["weekly"]["at"]  # never run before: tick ran the weekly pass


def test_install_systemd_outside_a_store_fails(tmp_path: Path, home: Path, fake: Path) -> None:
    result = invoke("--store", str(tmp_path), "install", "systemd", code=1)
    assert "no memory store" in result.stderr and not (home / ".config").exists()


def test_text_output_says_how_to_start_and_check(store: Path, home: Path, fake: Path) -> None:
    out = invoke("--store", str(store), "install", "systemd").stdout
    assert "To start it (or run this again with --apply):\n  systemctl --user daemon-reload\n" in out
    assert "Check that it works:\n  systemctl --user list-timers" in out
    assert f"memcli --store {store.resolve()} status" in out


# ---------------------------------------------------------------- launchd


def plist_path(home: Path, store: Path) -> Path:
    return home / "Library" / "LaunchAgents" / f"{timers.launchd_label(store.resolve())}.plist"


def test_launchd_writes_an_agent_that_runs_tick(store: Path, home: Path, fake: Path) -> None:
    data = install_json(store, "launchd")
    path = plist_path(home, store)
    assert data["files"] == {str(path): "written"} and ctl_calls(fake) == []
    agent = plistlib.loads(path.read_bytes())
    assert agent["Label"] == timers.launchd_label(store.resolve()) == data["name"]
    assert agent["RunAtLoad"] is True
    assert agent["StartCalendarInterval"] == [{"Minute": 0}, {"Minute": 15}, {"Minute": 30}, {"Minute": 45}]
    program = agent["ProgramArguments"]
    assert Path(program[0]).is_absolute() and program[1:] == ["--store", str(store.resolve()), "--quiet", "tick"]
    assert agent["StandardErrorPath"] == str(store.resolve() / "ops" / "launchd.log")
    assert data["todo"] == [f"launchctl bootstrap gui/{os.getuid()} {path}"]
    assert f"launchctl print gui/{os.getuid()}/{agent['Label']}" in data["check"]


def test_launchd_apply_loads_it_once(store: Path, home: Path, fake: Path) -> None:
    path, domain = plist_path(home, store), f"gui/{os.getuid()}"
    label = timers.launchd_label(store.resolve())
    install_json(store, "launchd", "--apply")
    assert ctl_calls(fake) == [["print", f"{domain}/{label}"], ["bootstrap", domain, str(path)]]
    (fake.parent / "loaded").touch()
    again = install_json(store, "launchd", "--apply")  # loaded and unchanged: nothing to do
    assert again["files"] == {str(path): "unchanged"} and again["ran"] == []
    assert ctl_calls(fake)[2:] == [["print", f"{domain}/{label}"]]
    path.write_text(path.read_text().replace("<integer>10</integer>", "<integer>5</integer>"))
    install_json(store, "launchd", "--apply")  # loaded but changed: reloaded
    assert ctl_calls(fake)[3:] == [["print", f"{domain}/{label}"], ["bootout", f"{domain}/{label}"],
                                   ["bootstrap", domain, str(path)]]


def test_launchd_installing_twice_changes_nothing(store: Path, home: Path, fake: Path) -> None:
    install_json(store, "launchd")
    before = everything(home)
    assert install_json(store, "launchd")["files"] == {str(plist_path(home, store)): "unchanged"}
    assert everything(home) == before


def test_launchd_refuses_a_file_it_did_not_write(store: Path, home: Path, fake: Path) -> None:
    path = plist_path(home, store)
    path.parent.mkdir(parents=True)
    foreign = plistlib.dumps({"Label": "someone.else"})
    path.write_bytes(foreign)
    result = invoke("--store", str(store), "install", "launchd", "--apply", code=1)
    assert "was not written by memcli" in result.stderr and path.read_bytes() == foreign
    assert ctl_calls(fake) == []
    assert invoke("--store", str(store), "install", "launchd", "--uninstall").stdout.strip().endswith(
        "left alone")
    assert path.read_bytes() == foreign


def test_launchd_uninstall(store: Path, home: Path, fake: Path) -> None:
    path = plist_path(home, store)
    (home / "Library" / "LaunchAgents").mkdir(parents=True)
    other = home / "Library" / "LaunchAgents" / "com.example.other.plist"
    other.write_bytes(plistlib.dumps({"Label": "com.example.other"}))
    install_json(store, "launchd")
    data = install_json(store, "launchd", "--uninstall")
    assert data["files"] == {str(path): "removed"}
    assert ctl_calls(fake) == [["bootout", f"gui/{os.getuid()}/{timers.launchd_label(store.resolve())}"]]
    assert not path.exists() and other.exists()
    assert install_json(store, "launchd", "--uninstall")["files"] == {str(path): "absent"}


def test_launchd_folder_that_cannot_be_written(store: Path, home: Path, fake: Path) -> None:
    (home / "Library").write_text("not a folder")
    result = invoke("--store", str(store), "install", "launchd", "--apply", code=1)
    assert "cannot write" in result.stderr and "nothing was changed" in result.stderr
    assert ctl_calls(fake) == []


def test_launchd_bootstrap_failure_is_an_error(store: Path, home: Path, fake: Path) -> None:
    (fake.parent / "fail-bootstrap").touch()
    result = invoke("--store", str(store), "install", "launchd", "--apply", code=1)
    assert "bootstrap" in result.stderr and "failed (exit 1)" in result.stderr


def test_the_agent_command_runs_tick(store: Path, home: Path, fake: Path) -> None:
    install_json(store, "launchd")
    argv = plistlib.loads(plist_path(home, store).read_bytes())["ProgramArguments"]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "TZ": "UTC"}, cwd="/")
    assert proc.returncode == 0, proc.stderr
    assert opsfiles.read_state(store)["runs"]["weekly"]


def test_install_help_lists_the_schedulers() -> None:
    out = invoke("install", "--help").stdout
    assert "systemd" in out and "launchd" in out
