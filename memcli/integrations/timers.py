"""`memcli install systemd` and `memcli install launchd` (SPEC 6): a user timer or agent that
runs `memcli tick` for one store, so weekly and daily passes happen on a machine that sleeps
or is off at the scheduled time.

Both wake every `WAKE_MINUTES` minutes and run `tick`, which decides what is due from
`[schedule]` (the unit files never hold the schedule itself, so changing `memcli.toml` needs
no reinstall). systemd's `Persistent=true` and launchd's coalescing of calendar intervals
missed while asleep both give one run at the next wake or boot.

Like `install cron`, they merge and never clobber: a file at our path that memcli did not
write (no marker line) is refused, installing twice writes nothing the second time, and
uninstalling removes exactly memcli's files. The files for one store are written together
or not at all. `MEMCLI_SYSTEMCTL` and `MEMCLI_LAUNCHCTL` name other programs to run instead
of `systemctl` and `launchctl` (the tests use fakes).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import plistlib
import re
import shlex
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memcli.errors import MemcliError
from memcli.store import fsops

WAKE_MINUTES = 15  # how often the timer runs `tick`: a daily time at :00/:15/:30/:45 is on time
SYSTEMD_MARKER = "# Written by memcli (memcli install systemd)"
LAUNCHD_MARKER = "<!-- Written by memcli (memcli install launchd)"
LABEL_PREFIX = "dev.memcli.tick."
TIMEOUT_S = 30


@dataclass
class TimerReport:
    """What an install or uninstall did, for the CLI to render."""

    scheduler: str  # "systemd" or "launchd"
    name: str  # the timer unit or the agent's label
    files: dict[str, str] = field(default_factory=dict)  # path -> written/updated/unchanged/removed/absent
    ran: list[str] = field(default_factory=list)  # commands run (--apply)
    todo: list[str] = field(default_factory=list)  # commands for the user to run (no --apply)
    check: list[str] = field(default_factory=list)  # how to see it works
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"scheduler": self.scheduler, "name": self.name, "files": self.files, "ran": self.ran,
                "todo": self.todo, "check": self.check, "notes": self.notes}


# ---------------------------------------------------------------- names and commands


def store_slug(root: Path) -> str:
    """A name for the store's units: its folder name, made safe, and a hash of its path
    (two stores called `memory` get two timers)."""
    text = str(root)
    name = re.sub(r"[^a-z0-9]+", "-", root.name.lower()).strip("-")[:40] or "store"
    return f"{name}-{hashlib.sha256(text.encode('utf-8', 'surrogateescape')).hexdigest()[:8]}"


def tick_argv(root: Path, executable: list[str] | None = None) -> list[str]:
    """`memcli --store ROOT --quiet tick`, memcli by absolute path: a timer's PATH is minimal."""
    from memcli.integrations.install import memcli_executable

    program = executable if executable is not None else shlex.split(memcli_executable())
    return [*program, "--store", str(root), "--quiet", "tick"]


def _checked_root(root: Path) -> Path:
    resolved = root.resolve()
    if any(c in str(resolved) for c in "\n\r\0"):
        raise MemcliError("the store path holds a line break; it cannot go into a unit file")
    return resolved


def _program(variable: str, default: str) -> list[str]:
    return shlex.split(os.environ.get(variable) or default)


def _run(argv: list[str], check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run systemctl/launchctl; a missing program or a failure is a MemcliError."""
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT_S)
    except FileNotFoundError as exc:
        raise MemcliError(f"{argv[0]} not found; the files are in place, start the timer by hand "
                          "or run this on a machine that has it") from exc
    except subprocess.TimeoutExpired as exc:
        raise MemcliError(f"`{shlex.join(argv)}` did not answer within {TIMEOUT_S} s") from exc
    if check and proc.returncode != 0:
        raise MemcliError(f"`{shlex.join(argv)}` failed (exit {proc.returncode}): "
                          f"{(proc.stderr or proc.stdout).strip()[:500]}")
    return proc


# ---------------------------------------------------------------- files, merged never clobbered


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except (FileNotFoundError, NotADirectoryError):  # a file where a folder should be: written below
        return None
    except IsADirectoryError:
        return b""  # not ours: refused below
    except OSError as exc:
        raise MemcliError(f"cannot read {path}: {exc.strerror}") from exc


def _ours(data: bytes, marker: str) -> bool:
    return marker.encode() in data[:4096]


def write_files(wanted: dict[Path, str], marker: str) -> dict[str, str]:
    """Write each file (all or none): new ones, and ours that differ; a file there that
    memcli did not write stops everything before anything is written."""
    current = {path: _read(path) for path in wanted}
    for path, data in current.items():
        if data is not None and not _ours(data, marker):
            raise MemcliError(f"{path} exists and was not written by memcli; memcli will not overwrite "
                              "it. Move it aside (or remove it) and run this again")
    actions: dict[str, str] = {}
    done: list[tuple[Path, bytes | None]] = []
    try:
        for path, text in wanted.items():
            data, before = text.encode("utf-8"), current[path]
            if before == data:
                actions[str(path)] = "unchanged"
                continue
            fsops.ensure_parent(path)
            if before is None:
                fsops.write_new(path, data)
            else:
                fsops.write_replace(path, data)
            done.append((path, before))
            actions[str(path)] = "written" if before is None else "updated"
    except OSError as exc:
        _undo(done)
        where = exc.filename or next(iter(wanted)).parent
        raise MemcliError(f"cannot write {where}: {exc.strerror or exc}; nothing was changed") from exc
    return actions


def _undo(done: list[tuple[Path, bytes | None]]) -> None:
    """Put back what a half-finished install wrote (best effort: it is failing already)."""
    for path, before in reversed(done):
        with contextlib.suppress(OSError):
            if before is None:
                fsops.unlink(path)
            else:
                fsops.write_replace(path, before)


def remove_files(paths: list[Path], marker: str) -> tuple[dict[str, str], list[str]]:
    """Remove memcli's files among `paths`; a file memcli did not write is left alone."""
    actions: dict[str, str] = {}
    notes: list[str] = []
    for path in paths:
        data = _read(path)
        if data is None:
            actions[str(path)] = "absent"
        elif not _ours(data, marker):
            actions[str(path)] = "left alone"
            notes.append(f"{path} was not written by memcli: left as it is")
        else:
            try:
                fsops.unlink(path)
            except OSError as exc:
                raise MemcliError(f"cannot remove {path}: {exc.strerror or exc}") from exc
            actions[str(path)] = "removed"
    return actions, notes


# ---------------------------------------------------------------- systemd


def systemd_dir() -> Path:
    """`$XDG_CONFIG_HOME/systemd/user`, else `~/.config/systemd/user`."""
    base = os.environ.get("XDG_CONFIG_HOME", "").strip()
    config = Path(base) if base and Path(base).is_absolute() else Path.home() / ".config"
    return config / "systemd" / "user"


def systemd_unit_name(root: Path) -> str:
    return f"memcli-tick-{store_slug(root)}"


def _unit_arg(arg: str) -> str:
    """One argument of ExecStart=, quoted for systemd (which expands % and $ itself)."""
    escaped = arg.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%").replace("$", "$$")
    return f'"{escaped}"'


def systemd_units(root: Path, executable: list[str] | None = None) -> tuple[str, str]:
    """The .service and .timer texts for a store."""
    header = (f"{SYSTEMD_MARKER} for the memory store {root}.\n"
              f"# Remove with: memcli --store {shlex.quote(str(root))} install systemd --uninstall\n")
    described = str(root).replace("%", "%%")
    service = (f"{header}[Unit]\nDescription=memcli tick for the memory store {described}\n\n"
               "[Service]\nType=oneshot\n"
               f"ExecStart={' '.join(_unit_arg(a) for a in tick_argv(root, executable))}\n"
               "Nice=10\nIOSchedulingClass=idle\n")
    timer = (f"{header}[Unit]\nDescription=Run memcli tick every {WAKE_MINUTES} minutes for {described}\n\n"
             f"[Timer]\nOnCalendar=*:0/{WAKE_MINUTES}\n"
             "# A run missed while the machine was off or asleep happens at the next start.\n"
             "Persistent=true\nAccuracySec=1min\n\n"
             "[Install]\nWantedBy=timers.target\n")
    return service, timer


def install_systemd(store_root: Path, apply: bool, executable: list[str] | None = None) -> TimerReport:
    root = _checked_root(store_root)
    name = systemd_unit_name(root)
    folder = systemd_dir()
    service, timer = systemd_units(root, executable)
    report = TimerReport("systemd", f"{name}.timer")
    report.files = write_files({folder / f"{name}.service": service, folder / f"{name}.timer": timer},
                               SYSTEMD_MARKER)
    steps = [["--user", "daemon-reload"], ["--user", "enable", "--now", f"{name}.timer"]]
    _systemctl(report, steps, apply)
    report.check = [f"systemctl --user list-timers {name}.timer",
                    f"journalctl --user -u {name}.service",
                    f"memcli --store {shlex.quote(str(root))} status"]
    report.notes.append("a user timer runs while you are logged in; to run it without a session "
                        "as well: loginctl enable-linger $USER")
    return report


def uninstall_systemd(store_root: Path) -> TimerReport:
    """Stop and disable the timer (while systemd still knows it), remove memcli's two files,
    reload. The systemctl steps are best effort: the files go whatever they say."""
    root = _checked_root(store_root)
    name = systemd_unit_name(root)
    folder = systemd_dir()
    report = TimerReport("systemd", f"{name}.timer")
    paths = [folder / f"{name}.timer", folder / f"{name}.service"]
    ours = [p for p in paths if (data := _read(p)) is not None and _ours(data, SYSTEMD_MARKER)]
    systemctl = _program("MEMCLI_SYSTEMCTL", "systemctl")
    if ours:
        _best_effort(report, [*systemctl, "--user", "disable", "--now", f"{name}.timer"])
    report.files, notes = remove_files(paths, SYSTEMD_MARKER)
    report.notes += notes
    if ours:
        _best_effort(report, [*systemctl, "--user", "daemon-reload"])
    return report


def _best_effort(report: TimerReport, argv: list[str]) -> None:
    try:
        proc = _run(argv, check=False)
    except MemcliError:
        report.notes.append(f"{argv[0]} not found or not answering; skipped `{shlex.join(argv)}`")
        return
    report.ran.append(shlex.join(argv))
    if proc.returncode != 0:
        report.notes.append(f"`{shlex.join(argv)}` failed (exit {proc.returncode}): "
                            f"{(proc.stderr or proc.stdout).strip()[:200]}")


def _systemctl(report: TimerReport, steps: list[list[str]], apply: bool) -> None:
    systemctl = _program("MEMCLI_SYSTEMCTL", "systemctl")
    for step in steps:
        if apply:
            _run([*systemctl, *step])
            report.ran.append(shlex.join([*systemctl, *step]))
        else:
            report.todo.append(shlex.join(["systemctl", *step]))


# ---------------------------------------------------------------- launchd


def launchd_dir() -> Path:
    return Path.home() / "Library" / "LaunchAgents"


def launchd_label(root: Path) -> str:
    return f"{LABEL_PREFIX}{store_slug(root)}"


def launchd_plist(root: Path, executable: list[str] | None = None) -> str:
    """The agent's plist: `tick` at load (log-in) and every WAKE_MINUTES minutes; launchd runs
    a calendar interval missed while asleep once, on wake."""
    log = str(root / "ops" / "launchd.log")
    agent = {
        "Label": launchd_label(root),
        "ProgramArguments": tick_argv(root, executable),
        "RunAtLoad": True,
        "StartCalendarInterval": [{"Minute": m} for m in range(0, 60, WAKE_MINUTES)],
        "StandardOutPath": log,
        "StandardErrorPath": log,
        "ProcessType": "Background",
        "LowPriorityIO": True,
        "Nice": 10,
    }
    text = plistlib.dumps(agent).decode("utf-8")
    head, doctype, rest = text.partition("<!DOCTYPE")
    line_end = rest.index("\n") + 1
    marker = f"{LAUNCHD_MARKER}; its uninstall option removes it -->\n"  # no double hyphen in XML comments
    return head + doctype + rest[:line_end] + marker + rest[line_end:]


def install_launchd(store_root: Path, apply: bool, executable: list[str] | None = None) -> TimerReport:
    root = _checked_root(store_root)
    label = launchd_label(root)
    path = launchd_dir() / f"{label}.plist"
    report = TimerReport("launchd", label)
    report.files = write_files({path: launchd_plist(root, executable)}, LAUNCHD_MARKER)
    domain = f"gui/{os.getuid()}"
    launchctl = _program("MEMCLI_LAUNCHCTL", "launchctl")
    changed = report.files[str(path)] != "unchanged"
    if apply:
        loaded = _run([*launchctl, "print", f"{domain}/{label}"], check=False).returncode == 0
        if loaded and changed:  # reload the new definition
            _run([*launchctl, "bootout", f"{domain}/{label}"], check=False)
            report.ran.append(shlex.join([*launchctl, "bootout", f"{domain}/{label}"]))
        if changed or not loaded:
            _run([*launchctl, "bootstrap", domain, str(path)])
            report.ran.append(shlex.join([*launchctl, "bootstrap", domain, str(path)]))
    else:
        report.todo.append(shlex.join(["launchctl", "bootstrap", domain, str(path)]))
    report.check = [f"launchctl print {domain}/{label}",
                    f"tail {shlex.quote(str(root / 'ops' / 'launchd.log'))}",
                    f"memcli --store {shlex.quote(str(root))} status"]
    return report


def uninstall_launchd(store_root: Path) -> TimerReport:
    """Unload the agent (best effort: not loaded is fine) and remove memcli's plist."""
    root = _checked_root(store_root)
    label = launchd_label(root)
    path = launchd_dir() / f"{label}.plist"
    report = TimerReport("launchd", label)
    data = _read(path)
    if data is not None and _ours(data, LAUNCHD_MARKER):
        launchctl = _program("MEMCLI_LAUNCHCTL", "launchctl")
        _best_effort(report, [*launchctl, "bootout", f"gui/{os.getuid()}/{label}"])
    files, notes = remove_files([path], LAUNCHD_MARKER)
    report.files = files
    report.notes += notes
    return report
