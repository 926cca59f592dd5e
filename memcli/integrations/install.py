"""`memcli install claude` and `memcli install cron` (SPEC section 4).

Both edit files that belong to the user (`.claude/settings.json`, the crontab), so both
merge instead of writing: every existing setting, hook and crontab line is kept, installing
twice changes nothing the second time, and uninstalling removes only what memcli added.
A file memcli cannot parse is never overwritten.
"""

from __future__ import annotations

import copy
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memcli.errors import MemcliError
from memcli.store import fsops

HOOK_EVENT = "SessionEnd"
HOOK_BASE = "memcli hook session-end"
# Ours is any command hook that runs `memcli hook session-end`, whatever its flags or the
# path it calls memcli by, so a store that moved is updated in place, not added twice.
_OUR_HOOK = re.compile(r"(^|[\s/'\"])memcli['\"]?\s(.*\s)?hook\s+session-end(\s|$)")
COMMAND_NAMES = ("memcli", "memory")
CRON_MARKER = "# memcli-weekly"


def sq(text: str) -> str:
    """Single-quote for sh, always (shlex.quote leaves plain paths bare; cron lines and
    hook commands read better and compare more reliably when they are always quoted)."""
    return "'" + text.replace("'", "'\"'\"'") + "'"


# ---------------------------------------------------------------- Claude Code: where


@dataclass(frozen=True)
class ClaudeTarget:
    settings: Path  # .claude/settings.json
    commands: Path  # .claude/commands/
    project: Path | None  # None for --user


def claude_target(project: Path | None, user: bool) -> ClaudeTarget:
    if user and project is not None:
        raise MemcliError("choose one of --project DIR and --user")
    if user:
        base = Path.home() / ".claude"
        return ClaudeTarget(base / "settings.json", base / "commands", None)
    folder = (project or Path.cwd()).expanduser()
    if not folder.is_dir():
        raise MemcliError(f"project folder {folder} does not exist")
    folder = folder.resolve()
    return ClaudeTarget(folder / ".claude" / "settings.json", folder / ".claude" / "commands", folder)


def store_flag(store_root: Path, target: ClaudeTarget) -> str:
    """`--store '<abs>' ` unless the store is the project folder itself, where the hook's
    cwd already finds it. A user-wide install always names the store: it runs everywhere."""
    if target.project is not None and store_root.resolve() == target.project:
        return ""
    return f"--store {sq(str(store_root.resolve()))} "


def hook_command(store_root: Path, target: ClaudeTarget) -> str:
    flag = store_flag(store_root, target).strip()
    return f"{HOOK_BASE} {flag}".strip()


# ---------------------------------------------------------------- settings.json, pure


def is_our_hook(hook: Any) -> bool:
    return (isinstance(hook, dict) and isinstance(hook.get("command"), str)
            and bool(_OUR_HOOK.search(hook["command"])))


def _session_end_groups(settings: dict[str, Any], create: bool) -> list[Any] | None:
    """`settings["hooks"]["SessionEnd"]`, checked to be what Claude Code expects."""
    hooks = settings.get("hooks")
    if hooks is None and create:
        hooks = settings["hooks"] = {}
    if hooks is None:
        return None
    if not isinstance(hooks, dict):
        raise MemcliError("settings.json: 'hooks' is not an object; fix it by hand first")
    groups = hooks.get(HOOK_EVENT)
    if groups is None and create:
        groups = hooks[HOOK_EVENT] = []
    if groups is not None and not isinstance(groups, list):
        raise MemcliError(f"settings.json: 'hooks.{HOOK_EVENT}' is not a list; fix it by hand first")
    return groups


def _group_hooks(group: Any) -> list[Any]:
    """A matcher group's hook list, or [] for a group memcli does not understand (kept)."""
    hooks = group.get("hooks") if isinstance(group, dict) else None
    return hooks if isinstance(hooks, list) else []


def merge_hook(settings: dict[str, Any], command: str) -> tuple[dict[str, Any], str]:
    """Settings with our SessionEnd hook; returns them and "added", "updated" or "unchanged"."""
    data = copy.deepcopy(settings)
    groups = _session_end_groups(data, create=True)
    assert groups is not None  # create=True
    ours = [hook for group in groups for hook in _group_hooks(group) if is_our_hook(hook)]
    if not ours:
        groups.append({"hooks": [{"type": "command", "command": command}]})
        return data, "added"
    action = "unchanged" if ours[0].get("command") == command and len(ours) == 1 else "updated"
    ours[0]["command"] = command
    _drop_hooks(data, groups, keep=ours[0])
    return data, action


def remove_hook(settings: dict[str, Any]) -> tuple[dict[str, Any], int]:
    """Settings without our SessionEnd hook(s); returns them and how many were removed."""
    data = copy.deepcopy(settings)
    groups = _session_end_groups(data, create=False)
    if groups is None:
        return data, 0
    return data, _drop_hooks(data, groups, keep=None)


def _drop_hooks(data: dict[str, Any], groups: list[Any], keep: Any) -> int:
    """Remove our hooks except `keep`; a group or event left empty by that goes too, so
    an uninstall gives back the settings as they were before the install."""
    removed = 0
    for group in list(groups):
        hooks = _group_hooks(group)
        mine = [h for h in hooks if is_our_hook(h) and h is not keep]
        for hook in mine:
            hooks.remove(hook)
        removed += len(mine)
        if mine and not hooks:
            groups.remove(group)
    if removed and not groups:
        del data["hooks"][HOOK_EVENT]
        if not data["hooks"]:
            del data["hooks"]
    return removed


# ---------------------------------------------------------------- settings.json, on disk


def read_settings(path: Path) -> dict[str, Any] | None:
    """The settings object, or None when the file does not exist. Anything that is not a
    JSON object is an error: the file is the user's and memcli does not guess."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    if not raw.strip():
        return {}
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise MemcliError(f"{path} is not valid JSON ({exc}); fix it by hand, memcli will "
                          "not overwrite it") from exc
    if not isinstance(data, dict):
        raise MemcliError(f"{path} is not a JSON object; fix it by hand, memcli will not "
                          "overwrite it")
    return data


def write_text(path: Path, text: str) -> None:
    """Atomic write through fsops. A symlinked file (dotfiles kept in a repository) is
    written where the link points, so the link survives."""
    target = path.resolve() if path.is_symlink() else path
    fsops.ensure_parent(target)
    data = text.encode("utf-8")
    if target.exists():
        fsops.write_replace(target, data)
    else:
        fsops.write_new(target, data)


def dump_settings(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


# ---------------------------------------------------------------- slash commands


_COMMAND_DESCRIPTIONS = {
    "memcli": "Maintain the memcli memory store: consolidate, --dry-run, stats, status, review",
    "memory": "Maintain the memcli memory store (same as /memcli, which always works: "
              "Claude Code's built-in /memory may take this name)",
}
COMMAND_MARKER = "<!-- Installed by `memcli install claude`; `--uninstall` removes it unless edited. -->"


def render_command(name: str, flag: str) -> str:
    """A Claude Code slash command that passes its arguments to memcli."""
    run = f"memcli {flag}$ARGUMENTS"
    return f"""---
description: {json.dumps(_COMMAND_DESCRIPTIONS[name])}
argument-hint: "consolidate [--dry-run] | stats | status | log | review list | undo RUN_ID"
allowed-tools: Bash(memcli:*)
---
{COMMAND_MARKER}

Run this with the Bash tool, exactly as written (no other command):

    {run}

If no arguments were given, run `memcli {flag}status` instead.

Then show me the command's output as it is (the run report, table or error), followed by one
or two sentences on what changed and what needs my attention: flagged pairs, open review
items, deferred actions, skipped files. Do not edit memory files yourself; to reverse a run,
suggest `/memcli undo RUN_ID`.
"""


def command_files(target: ClaudeTarget, flag: str) -> dict[Path, str]:
    return {target.commands / f"{name}.md": render_command(name, flag) for name in COMMAND_NAMES}


def install_command(path: Path, text: str) -> str:
    """Write one command file; a file of the same name that memcli did not write is kept."""
    try:
        current = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        write_text(path, text)
        return "created"
    except (OSError, UnicodeDecodeError):
        return "kept (not written by memcli)"
    if current == text:
        return "unchanged"
    if COMMAND_MARKER not in current:
        return "kept (not written by memcli)"
    write_text(path, text)
    return "updated"


def uninstall_command(path: Path, name: str) -> str:
    """Remove one command file, only when it is exactly what memcli wrote (for whichever
    store it named), so uninstalling needs no store and never takes a user's edits."""
    try:
        current = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return "absent"
    except (OSError, UnicodeDecodeError):
        return "kept (not written by memcli)"
    found = _RUN_LINE.search(current)
    if found is None or current != render_command(name, found.group(1)):
        return "kept (edited or not written by memcli)"
    fsops.unlink(path)
    return "removed"


_RUN_LINE = re.compile(r"^    memcli (.*)\$ARGUMENTS$", re.MULTILINE)


# ---------------------------------------------------------------- install claude


@dataclass
class ClaudeReport:
    settings: str
    settings_action: str  # added, updated, unchanged, removed, absent
    command: str
    files: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"settings": self.settings, "settings_action": self.settings_action,
                "hook_command": self.command, "files": self.files, "notes": self.notes}


def install_claude(store_root: Path, target: ClaudeTarget) -> ClaudeReport:
    """Slash commands in `.claude/commands/`, the SessionEnd hook in settings.json."""
    command = hook_command(store_root, target)
    current = read_settings(target.settings)  # first: a broken file stops everything
    merged, action = merge_hook(current or {}, command)
    if action != "unchanged" or current is None:
        write_text(target.settings, dump_settings(merged))
    report = ClaudeReport(str(target.settings), action, command)
    for path, text in command_files(target, store_flag(store_root, target)).items():
        report.files[str(path)] = install_command(path, text)
    if shutil.which("memcli") is None:
        report.notes.append("`memcli` is not on PATH here; the hook and the slash commands "
                            "call it by name, so put it on the PATH Claude Code sees")
    return report


def uninstall_claude(target: ClaudeTarget) -> ClaudeReport:
    """Remove our hook (nothing else) and our command files if unchanged."""
    current = read_settings(target.settings)
    action = "absent"
    if current is not None:
        cleaned, removed = remove_hook(current)
        if removed:
            write_text(target.settings, dump_settings(cleaned))
            action = "removed"
    report = ClaudeReport(str(target.settings), action, "")
    for name in COMMAND_NAMES:
        path = target.commands / f"{name}.md"
        report.files[str(path)] = uninstall_command(path, name)
    return report


# ---------------------------------------------------------------- cron


def memcli_executable() -> str:
    """The memcli that is running now, as an absolute, quoted command: cron's PATH is
    minimal and rarely holds a virtualenv's bin folder."""
    sibling = Path(sys.executable).absolute().parent / "memcli"
    if sibling.is_file() and os.access(sibling, os.X_OK):
        return sq(str(sibling))
    found = shutil.which("memcli")
    if found:
        return sq(str(Path(found).absolute()))
    return f"{sq(str(Path(sys.executable).absolute()))} -m memcli"


def cron_line(store_root: Path, schedule: str, executable: str | None = None) -> str:
    """The weekly crontab line for a store, ending with our marker comment."""
    fields = schedule.split()
    if len(fields) != 5 and not (len(fields) == 1 and fields[0].startswith("@")):
        raise MemcliError(f"[schedule] weekly = {schedule!r} has {len(fields)} fields; a crontab "
                          "line needs 5 (minute hour day-of-month month day-of-week)")
    root = str(store_root.resolve())
    if "\n" in root or "\r" in root:
        raise MemcliError("the store path holds a line break; it cannot go into a crontab")
    log_path = sq(str(Path(root) / "ops" / "cron.log"))
    cmd = (f"cd {sq(root)} && {executable or memcli_executable()} --store {sq(root)} "
           f"consolidate --trigger weekly --quiet >> {log_path} 2>&1")
    return f"{' '.join(fields)} {cmd.replace('%', chr(92) + '%')} {CRON_MARKER}"  # cron: % is a newline


def is_our_cron_line(line: str, store_root: Path) -> bool:
    """Our marker and this store: each store keeps its own weekly line."""
    flag = f"--store {sq(str(store_root.resolve()))}".replace("%", "\\%")
    return line.rstrip().endswith(CRON_MARKER) and flag in line


def merge_cron(lines: list[str], line: str | None, store_root: Path) -> list[str]:
    """The table with our line for this store replaced (in place) or appended; `line`
    None removes it. Every other line is kept as it was."""
    result: list[str] = []
    placed = False
    for existing in lines:
        if not is_our_cron_line(existing, store_root):
            result.append(existing)
        elif line is not None and not placed:
            result.append(line)
            placed = True
    if line is not None and not placed:
        result.append(line)
    return result


def crontab_argv() -> list[str]:
    """`crontab`, or `$MEMCLI_CRONTAB` (tests point it at a fake that keeps a temp file)."""
    return shlex.split(os.environ.get("MEMCLI_CRONTAB") or "crontab")


def read_crontab() -> list[str]:
    proc = _run_crontab(["-l"], None)
    if proc.returncode != 0:
        if "no crontab" in proc.stderr.lower():
            return []
        raise MemcliError(f"`crontab -l` failed (exit {proc.returncode}): {proc.stderr.strip()}")
    return proc.stdout.splitlines()


def write_crontab(lines: list[str]) -> None:
    proc = _run_crontab(["-"], "".join(f"{line}\n" for line in lines))
    if proc.returncode != 0:
        raise MemcliError(f"`crontab -` failed (exit {proc.returncode}): {proc.stderr.strip()}")


def _run_crontab(args: list[str], text: str | None) -> subprocess.CompletedProcess[str]:
    argv = crontab_argv() + args
    try:
        return subprocess.run(argv, input=text, capture_output=True, text=True, timeout=30)
    except FileNotFoundError as exc:
        raise MemcliError(f"{argv[0]} not found: install cron, or add the line that "
                          "`memcli install cron` prints to your scheduler by hand") from exc
    except subprocess.TimeoutExpired as exc:
        raise MemcliError(f"{argv[0]} did not answer within 30 s") from exc


def apply_cron(store_root: Path, line: str, remove: bool = False) -> str:
    """Put our line into the user's crontab (or take it out); returns what happened."""
    before = read_crontab()
    after = merge_cron(before, None if remove else line, store_root)
    if after == before:
        return "absent" if remove else "unchanged"
    write_crontab(after)
    if remove:
        return "removed"
    return "replaced" if any(is_our_cron_line(x, store_root) for x in before) else "added"
