"""`memcli install claude`: connect a store to Claude Code (SPEC section 11).

What is installed, and where (a project install / a `--user` install):

- the SessionStart, UserPromptSubmit, PreCompact and SessionEnd hooks, each with a `timeout`, and the
  MCP tools allowed in `permissions.allow`: `.claude/settings.local.json` /
  `~/.claude/settings.json`;
- the `memcli mcp` server: `.mcp.json`, approved in `settings.local.json`
  (`enabledMcpjsonServers`), with `MEMCLI_BIN` (and `MEMCLI_STORE`) in its `env` /
  `~/.claude.json` (`mcpServers`);
- `/memcli` (and, only when asked for, `/memory`): `.claude/commands/` / `~/.claude/commands/`.

Everything calls memcli by the absolute path of the program that ran the install (Claude
Code does not activate a virtualenv). A project's machine-specific paths live in
`.claude/settings.local.json`, which Claude Code keeps out of git; `.mcp.json` names no path
(`sh -c 'exec "$MEMCLI_BIN" mcp'`, the variable set by that file's `env`: Claude Code expands
`${VAR}` in `.mcp.json` before it applies a settings file's `env`, measured with 2.1.330).
The command files do name the program: Claude Code's permission check refuses a Bash command
that holds a variable, so `allowed-tools` can only match a literal path.

Every file is the user's: it is merged, never overwritten; a file that is not a JSON object is
refused and left alone; a file whose content would not change is not written (so not
reformatted); installing twice changes nothing; `--uninstall` removes exactly what memcli
added (and a file or folder it leaves empty). All changes are planned first and then written
together: when one write fails, the files already written are put back.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import re
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memcli.errors import MemcliError
from memcli.integrations.install import memcli_executable, sq

# event -> (the `memcli hook` subcommand, timeout in seconds). Claude Code gives SessionEnd
# hooks a 1.5 s budget in all unless a hook declares a timeout; ours returns in ~0.05 s and
# the timeouts are only there so that a loaded machine never cancels it.
HOOKS: dict[str, tuple[str, int]] = {
    "SessionStart": ("session-start", 10),
    "UserPromptSubmit": ("prompt", 5),
    "PreCompact": ("pre-compact", 30),  # capture before history leaves the context (SPEC 12)
    "SessionEnd": ("session-end", 15),
}
SERVER = "memcli"
MCP_TOOLS = ("recall", "remember", "show", "forget")
ALLOWED = tuple(f"mcp__{SERVER}__{tool}" for tool in MCP_TOOLS)
ENV_KEYS = ("MEMCLI_BIN", "MEMCLI_STORE")
MCP_SHELL = 'exec "$MEMCLI_BIN" mcp'  # $VAR, not ${VAR}: Claude Code would expand that itself
_OUR_HOOK = re.compile(
    r"(^|[\s/'\"])memcli['\"]?\s(.*\s)?hook\s+(session-start|prompt|pre-compact|session-end)(\s|$)")
MARK_KEY = "memcli-install"  # front-matter key naming memcli's command files (never sent to the model)
_MARK = re.compile(rf"^{MARK_KEY}: ([0-9a-f]{{16}})$", re.MULTILINE)
_LEGACY_MARK = "<!-- Installed by `memcli install claude`; `--uninstall` removes it unless edited. -->"
MEMORY_WARNING = ("/memory now runs memcli: it hides Claude Code's built-in /memory (which opens "
                  "your CLAUDE.md memory files){where}. Remove it with `memcli install claude "
                  "--uninstall`, or by deleting {path}.")


# ---------------------------------------------------------------- where


@dataclass(frozen=True)
class ClaudeTarget:
    """The files an install touches."""

    settings: Path  # hooks, permissions (and for a project: env, MCP approval)
    mcp: Path  # where the MCP server is registered
    commands: Path  # slash commands
    project: Path | None  # None for --user
    shared_settings: Path | None = None  # a project's .claude/settings.json: only old hooks removed

    @property
    def user(self) -> bool:
        return self.project is None


def claude_target(project: Path | None, user: bool) -> ClaudeTarget:
    if user and project is not None:
        raise MemcliError("choose one of --project DIR and --user")
    if user:
        home = Path.home()
        return ClaudeTarget(home / ".claude" / "settings.json", home / ".claude.json",
                            home / ".claude" / "commands", None)
    folder = (project or Path.cwd()).expanduser()
    if not folder.is_dir():
        raise MemcliError(f"project folder {folder} does not exist")
    folder = folder.resolve()
    base = folder / ".claude"
    return ClaudeTarget(base / "settings.local.json", folder / ".mcp.json", base / "commands", folder,
                        base / "settings.json")


def program() -> str:
    """This memcli, as an absolute, quoted command: the program that is running (the
    console script of the environment it runs from; Claude Code does not activate a
    virtualenv and its PATH rarely holds one's bin folder)."""
    import sys

    argv0 = sys.argv[0] if sys.argv else ""
    if os.path.basename(argv0) == "memcli" and os.path.isfile(argv0) and os.access(argv0, os.X_OK):
        return sq(os.path.abspath(argv0))
    return memcli_executable()


def _store_arg(store_root: Path, target: ClaudeTarget) -> str:
    """`--store '<abs>' ` unless the store is the project folder itself (every command then
    finds it from the session's folder, subfolders included). A user install always names it."""
    if target.project is not None and store_root.resolve() == target.project:
        return ""
    return f"--store {sq(str(store_root.resolve()))} "


def hook_commands(store_root: Path, target: ClaudeTarget, prog: str) -> dict[str, str]:
    flag = _store_arg(store_root, target)
    return {event: f"{prog} {flag}hook {sub}" for event, (sub, _) in HOOKS.items()}


# ---------------------------------------------------------------- settings, pure


def is_our_hook(hook: Any) -> bool:
    return (isinstance(hook, dict) and isinstance(hook.get("command"), str)
            and bool(_OUR_HOOK.search(hook["command"])))


def _object(data: dict[str, Any], key: str, where: str, create: bool) -> dict[str, Any] | None:
    value = data.get(key)
    if value is None:
        if not create:
            return None
        value = data[key] = {}
    if not isinstance(value, dict):
        raise MemcliError(f"{where}: {key!r} is not an object; fix it by hand first")
    return value


def _list(data: dict[str, Any], key: str, where: str, create: bool) -> list[Any] | None:
    value = data.get(key)
    if value is None:
        if not create:
            return None
        value = data[key] = []
    if not isinstance(value, list):
        raise MemcliError(f"{where}: {key!r} is not a list; fix it by hand first")
    return value


def _group_hooks(group: Any) -> list[Any]:
    """A matcher group's hook list, or [] for a group memcli does not understand (kept)."""
    hooks = group.get("hooks") if isinstance(group, dict) else None
    return hooks if isinstance(hooks, list) else []


def merge_hooks(settings: dict[str, Any], commands: dict[str, str],
                where: str = "settings") -> dict[str, Any]:
    """Settings with exactly one memcli hook per event, each with its timeout; other hooks,
    groups and events are kept as they are, and an entry already right is left in place."""
    data = copy.deepcopy(settings)
    hooks = _object(data, "hooks", where, create=True)
    assert hooks is not None
    for event, command in commands.items():
        groups = _list(hooks, event, f"{where}: hooks", create=True)
        assert groups is not None
        wanted = {"type": "command", "command": command, "timeout": HOOKS[event][1]}
        ours = [h for g in groups for h in _group_hooks(g) if is_our_hook(h)]
        if ours:
            keep = ours[0]
            if keep != wanted:
                keep.clear()
                keep.update(wanted)
            _drop_hooks(hooks, event, keep=keep)
        else:
            groups.append({"hooks": [wanted]})
    return data


def remove_hooks(settings: dict[str, Any], where: str = "settings") -> dict[str, Any]:
    """Settings without any memcli hook; a group, event or `hooks` left empty goes too."""
    data = copy.deepcopy(settings)
    hooks = _object(data, "hooks", where, create=False)
    if hooks is None:
        return data
    for event in list(hooks):
        if isinstance(hooks[event], list):
            _drop_hooks(hooks, event, keep=None)
    if not hooks:
        del data["hooks"]
    return data


def _drop_hooks(hooks: dict[str, Any], event: str, keep: Any) -> None:
    groups = hooks[event]
    removed = 0
    for group in list(groups):
        members = _group_hooks(group)
        mine = [h for h in members if is_our_hook(h) and h is not keep]
        for hook in mine:
            members.remove(hook)
        removed += len(mine)
        if mine and not members:
            groups.remove(group)
    if removed and not groups:
        del hooks[event]


def merge_allowed(settings: dict[str, Any], where: str = "settings") -> dict[str, Any]:
    data = copy.deepcopy(settings)
    perms = _object(data, "permissions", where, create=True)
    assert perms is not None
    allow = _list(perms, "allow", f"{where}: permissions", create=True)
    assert allow is not None
    allow += [name for name in ALLOWED if name not in allow]
    return data


def remove_allowed(settings: dict[str, Any], where: str = "settings") -> dict[str, Any]:
    data = copy.deepcopy(settings)
    perms = _object(data, "permissions", where, create=False)
    allow = _list(perms, "allow", f"{where}: permissions", create=False) if perms is not None else None
    if perms is None or allow is None or not any(name in allow for name in ALLOWED):
        return data
    allow[:] = [name for name in allow if name not in ALLOWED]
    _drop_if_empty(perms, "allow")
    _drop_if_empty(data, "permissions")
    return data


def merge_env(settings: dict[str, Any], values: dict[str, str], where: str = "settings") -> dict[str, Any]:
    """`env` with our variables set (MEMCLI_STORE only when the store is named; an older
    MEMCLI_STORE of ours goes when the store became the project folder)."""
    data = copy.deepcopy(settings)
    env = _object(data, "env", where, create=True)
    assert env is not None
    for key in ENV_KEYS:
        if key in values:
            env[key] = values[key]
        else:
            env.pop(key, None)
    _drop_if_empty(data, "env")
    return data


def remove_env(settings: dict[str, Any], where: str = "settings") -> dict[str, Any]:
    data = copy.deepcopy(settings)
    env = _object(data, "env", where, create=False)
    if env is None or not any(key in env for key in ENV_KEYS):
        return data
    for key in ENV_KEYS:
        env.pop(key, None)
    _drop_if_empty(data, "env")
    return data


def merge_enabled(settings: dict[str, Any], where: str = "settings") -> dict[str, Any]:
    """Approve our `.mcp.json` server (a project server is not started until approved)."""
    data = copy.deepcopy(settings)
    enabled = _list(data, "enabledMcpjsonServers", where, create=True)
    assert enabled is not None
    if SERVER not in enabled:
        enabled.append(SERVER)
    return data


def remove_enabled(settings: dict[str, Any], where: str = "settings") -> dict[str, Any]:
    data = copy.deepcopy(settings)
    enabled = _list(data, "enabledMcpjsonServers", where, create=False)
    if enabled is None or SERVER not in enabled:
        return data
    enabled[:] = [name for name in enabled if name != SERVER]
    _drop_if_empty(data, "enabledMcpjsonServers")
    return data


def is_our_server(entry: Any) -> bool:
    """An MCP server entry that runs `memcli mcp` (ours, from this or an earlier install)."""
    if not isinstance(entry, dict) or not isinstance(entry.get("command"), str):
        return False
    args = entry.get("args")
    words = [entry["command"], *(a for a in (args if isinstance(args, list) else []) if isinstance(a, str))]
    text = " ".join(words)
    return bool(re.search(r"memcli['\"]?\s(.*\s)?mcp\b", text)) or MCP_SHELL in words


def server_entry(prog_argv: list[str]) -> dict[str, Any]:
    return {"type": "stdio", "command": prog_argv[0], "args": [*prog_argv[1:], "mcp"]}


def merge_server(config: dict[str, Any], entry: dict[str, Any], where: str) -> dict[str, Any]:
    data = copy.deepcopy(config)
    servers = _object(data, "mcpServers", where, create=True)
    assert servers is not None
    current = servers.get(SERVER)
    if current is not None and not is_our_server(current):
        raise MemcliError(f"{where}: an MCP server named {SERVER!r} is there already and does not "
                          "run `memcli mcp`; rename or remove it first")
    if current != entry:
        servers[SERVER] = entry
    return data


def remove_server(config: dict[str, Any], where: str) -> dict[str, Any]:
    data = copy.deepcopy(config)
    servers = _object(data, "mcpServers", where, create=False)
    if servers is None or not is_our_server(servers.get(SERVER)):
        return data
    del servers[SERVER]
    _drop_if_empty(data, "mcpServers")
    return data


def _drop_if_empty(data: dict[str, Any], key: str) -> None:
    if key in data and data[key] in ({}, []):
        del data[key]


# ---------------------------------------------------------------- JSON files on disk


@dataclass
class JsonFile:
    """A JSON object file as found: its data, its bytes, and how it was laid out."""

    path: Path
    data: dict[str, Any] | None  # None: no such file
    raw: bytes | None
    indent: int | str | None = 2
    newline: bool = True

    def render(self, data: dict[str, Any]) -> bytes:
        text = json.dumps(data, indent=self.indent, ensure_ascii=False)
        return (text + ("\n" if self.newline else "")).encode("utf-8")


def read_json_file(path: Path) -> JsonFile:
    """The file's object, or data None when it does not exist. Anything that is not a JSON
    object is an error: the file is the user's and memcli does not guess."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return JsonFile(path, None, None)
    except IsADirectoryError as exc:
        raise MemcliError(f"{path} is a folder, not a settings file; memcli will not touch it") from exc
    except OSError as exc:
        raise MemcliError(f"cannot read {path} ({exc.strerror or exc}); nothing was changed") from exc
    if not raw.strip():
        return JsonFile(path, {}, raw)
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise MemcliError(f"{path} is not valid JSON ({str(exc)[:200]}); fix it by hand, memcli will "
                          "not overwrite it (nothing was changed)") from exc
    if not isinstance(data, dict):
        raise MemcliError(f"{path} is not a JSON object; fix it by hand, memcli will not "
                          "overwrite it (nothing was changed)")
    return JsonFile(path, data, raw, *_layout(raw))


def _layout(raw: bytes) -> tuple[int | str | None, bool]:
    """The indentation a file uses (so that a rewrite keeps it) and its final newline."""
    text = raw.decode("utf-8", "replace")
    found = re.search(r"\n([ \t]+)\S", text)
    if found is None:
        indent: int | str | None = None if text.strip().count("\n") == 0 and len(text) > 2 else 2
    else:
        lead = found.group(1)
        indent = lead if "\t" in lead else len(lead)
    return indent, text.endswith("\n")


# ---------------------------------------------------------------- slash commands


_DESCRIPTIONS = {
    "memcli": "memcli memory store: status, consolidate [--dry-run], stats, log, review, undo",
    "memory": "memcli memory store (replaces Claude Code's built-in /memory): status, consolidate, "
              "stats, log, review, undo",
}
_HINT = "status | consolidate [--dry-run] | stats | log | review list | undo RUN_ID"


def render_command(name: str, prog: str, flag: str) -> str:
    """A slash command that runs memcli with its arguments (or `status` without any). It is
    not offered to the model as a skill, and its marker is front matter, never sent."""
    base = f"{prog} {flag}"
    body = f"""---
description: {json.dumps(_DESCRIPTIONS[name])}
argument-hint: {json.dumps(_HINT)}
allowed-tools: {json.dumps(f"Bash({prog}:*)")}
disable-model-invocation: true
{MARK_KEY}: {'0' * 16}
---
Run memcli for me with the Bash tool: one command, exactly as written below, nothing else.

Arguments given: "$ARGUMENTS"

- If the arguments above are empty, run: `{base}status`
- Otherwise run: `{base}$ARGUMENTS`

Then show me the command's output as it is (the report, table or error), followed by one or
two sentences on what changed and what needs my attention: flagged pairs, open review items,
deferred actions, skipped files, hook or schedule errors. Do not edit memory files yourself;
to reverse a run, suggest `/{name} undo RUN_ID`.
"""
    return _MARK.sub(f"{MARK_KEY}: {_digest(body)}", body)


def _digest(text: str) -> str:
    """The hash a command file carries of its own text (with the hash blanked)."""
    blank = _MARK.sub(f"{MARK_KEY}: {'0' * 16}", text)
    return hashlib.sha256(blank.encode("utf-8")).hexdigest()[:16]


def command_state(text: str | None) -> str:
    """"absent", "ours" (written by memcli, unedited), "edited" (written by memcli, then
    changed) or "foreign" (not memcli's)."""
    if text is None:
        return "absent"
    found = _MARK.search(text)
    if found is not None:
        return "ours" if found.group(1) == _digest(text) else "edited"
    if _LEGACY_MARK in text:  # an earlier memcli's file: ours while its run line is intact
        return "ours" if _legacy_unedited(text) else "edited"
    return "foreign"


def _legacy_unedited(text: str) -> bool:
    found = re.search(r"^    memcli (.*)\$ARGUMENTS$", text, re.MULTILINE)
    return found is not None and text.count("\n") < 30 and "Then show me the command's output" in text


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError):
        return "\0unreadable"


# ---------------------------------------------------------------- the plan and its writing


@dataclass
class Change:
    path: Path
    before: bytes | None  # None: the file does not exist
    after: bytes | None  # None: remove it
    what: str  # for people: "created", "updated", "removed"


@dataclass
class ClaudeReport:
    target: str  # the project folder, or "user"
    files: dict[str, str] = field(default_factory=dict)  # path -> what happened to it
    hooks: dict[str, str] = field(default_factory=dict)  # event -> command
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"target": self.target, "files": self.files, "hooks": self.hooks,
                "notes": self.notes, "warnings": self.warnings}


class _Plan:
    def __init__(self) -> None:
        self.changes: list[Change] = []
        self.report_files: dict[str, str] = {}

    def json(self, found: JsonFile, data: dict[str, Any], delete_if_empty: bool = True) -> None:
        """Write `data` to the file unless its content would not change (no reformatting);
        an object left empty by an uninstall removes a file memcli may delete."""
        if found.data == data or (found.data is None and not data):
            self.report_files.setdefault(str(found.path), "unchanged" if found.data is not None else "absent")
            return
        if not data and delete_if_empty:
            self.add(Change(found.path, found.raw, None, "removed (left empty)"))
            return
        self.add(Change(found.path, found.raw, found.render(data),
                        "created" if found.raw is None else "updated"))

    def add(self, change: Change) -> None:
        self.changes.append(change)
        self.report_files[str(change.path)] = change.what

    def note(self, path: Path, what: str) -> None:
        self.report_files[str(path)] = what


def write_all(changes: list[Change], cleanup: list[Path]) -> None:
    """Write every change; when one fails, put back those already made and raise. Then
    remove the folders in `cleanup` that the changes left empty."""
    done: list[Change] = []
    for change in changes:
        try:
            _apply(change)
        except OSError as exc:
            for earlier in reversed(done):
                try:
                    _apply(Change(earlier.path, earlier.after, earlier.before, "undo"))
                except OSError:
                    pass
            raise MemcliError(f"cannot write {change.path} ({exc.strerror or exc}); nothing was "
                              "changed (fix the permissions and run the command again)") from exc
        done.append(change)
    for folder in cleanup:
        try:
            folder.rmdir()  # only succeeds when empty
        except OSError:
            pass


def _apply(change: Change) -> None:
    path = change.path
    if change.after is None:
        if change.before is not None or path.exists():
            os.unlink(path)
        return
    target = path.resolve() if path.is_symlink() else path  # dotfiles in a repository stay links
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode = target.stat().st_mode & 0o777
    except FileNotFoundError:
        mode = 0o644
    tmp = target.parent / f".{target.name}.{secrets.token_hex(4)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(change.after)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)  # the umask may have narrowed it; ~/.claude.json stays private
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


# ---------------------------------------------------------------- install, uninstall


def install_claude(store_root: Path, target: ClaudeTarget, memory_command: bool = False,
                   prog: str | None = None) -> ClaudeReport:
    """Plan every change, then write them together (see the module docstring)."""
    prog = prog or program()
    plan = _Plan()
    report = ClaudeReport(str(target.project) if target.project else "user")
    commands = hook_commands(store_root, target, prog)
    report.hooks = commands
    settings = read_json_file(target.settings)  # first: a broken file stops everything
    mcp = read_json_file(target.mcp)
    shared = read_json_file(target.shared_settings) if target.shared_settings else None
    where = str(target.settings)
    data = merge_allowed(merge_hooks(settings.data or {}, commands, where), where)
    argv = _argv(prog)
    if target.user:
        plan.json(settings, data)
        plan.json(mcp, merge_server(mcp.data or {}, server_entry([*argv, *_store_words(store_root, target)]),
                                    str(target.mcp)), delete_if_empty=False)
    else:
        env = {"MEMCLI_BIN": _unquote(argv)}
        if _store_arg(store_root, target):
            env["MEMCLI_STORE"] = str(store_root.resolve())
        data = merge_enabled(merge_env(data, env, where), where)
        plan.json(settings, data)
        plan.json(mcp, merge_server(mcp.data or {}, {"type": "stdio", "command": "sh",
                                                      "args": ["-c", MCP_SHELL]}, str(target.mcp)))
        if shared is not None and shared.data is not None:  # an earlier memcli put hooks here
            plan.json(shared, remove_hooks(shared.data, str(shared.path)), delete_if_empty=False)
    _plan_commands(plan, report, target, prog, _store_arg(store_root, target), memory_command)
    write_all(plan.changes, [])
    report.files.update(plan.report_files)
    report.notes += _path_notes(prog)
    return report


def uninstall_claude(target: ClaudeTarget) -> ClaudeReport:
    """Remove exactly what memcli added; a file or folder that leaves empty goes too."""
    plan = _Plan()
    report = ClaudeReport(str(target.project) if target.project else "user")
    settings = read_json_file(target.settings)
    mcp = read_json_file(target.mcp)
    shared = read_json_file(target.shared_settings) if target.shared_settings else None
    if settings.data is not None:
        where = str(target.settings)
        data = remove_allowed(remove_hooks(settings.data, where), where)
        if not target.user:
            data = remove_enabled(remove_env(data, where), where)
        plan.json(settings, data)
    else:
        plan.note(target.settings, "absent")
    if mcp.data is not None:
        plan.json(mcp, remove_server(mcp.data, str(target.mcp)), delete_if_empty=not target.user)
    if shared is not None and shared.data is not None:
        plan.json(shared, remove_hooks(shared.data, str(shared.path)))
    for name in ("memcli", "memory"):
        path = target.commands / f"{name}.md"
        state = command_state(_read_text(path))
        if state == "ours":
            plan.add(Change(path, path.read_bytes(), None, "removed"))
        elif state != "absent":
            plan.note(path, "kept (edited, or not written by memcli)")
    cleanup = [target.commands, target.commands.parent]  # each only if left empty
    write_all(plan.changes, cleanup)
    report.files.update(plan.report_files)
    return report


def _plan_commands(plan: _Plan, report: ClaudeReport, target: ClaudeTarget, prog: str, flag: str,
                   memory_command: bool) -> None:
    """/memcli always; /memory only when asked for (an unedited one of ours goes otherwise:
    it hid Claude Code's built-in /memory)."""
    for name in ("memcli", "memory"):
        path = target.commands / f"{name}.md"
        current = _read_text(path)
        state = command_state(current)
        wanted = name == "memcli" or memory_command
        if not wanted:
            if state == "ours":
                plan.add(Change(path, path.read_bytes(), None, "removed (it hid the built-in /memory; "
                                                                "--memory-command brings it back)"))
            continue
        text = render_command(name, prog, flag)
        if state == "absent":
            plan.add(Change(path, None, text.encode("utf-8"), "created"))
        elif state == "ours":
            if current == text:
                plan.note(path, "unchanged")
            else:
                plan.add(Change(path, path.read_bytes(), text.encode("utf-8"), "updated"))
        else:
            plan.note(path, "kept (edited, or not written by memcli)")
            report.notes.append(f"{path} is not memcli's (or was edited): left as it is, so /{name} "
                                "does not run memcli")
        if name == "memory" and state in ("absent", "ours"):
            where = " in every project" if target.user else " in this project"
            report.warnings.append(MEMORY_WARNING.format(where=where, path=path))


def _argv(prog: str) -> list[str]:
    import shlex

    return shlex.split(prog)


def _unquote(argv: list[str]) -> str:
    """The program as one path for `$MEMCLI_BIN` (a `python -m memcli` fallback becomes a
    path only when it is one word)."""
    return argv[0] if len(argv) == 1 else " ".join(argv)


def _store_words(store_root: Path, target: ClaudeTarget) -> list[str]:
    flag = _store_arg(store_root, target)
    return ["--store", str(store_root.resolve())] if flag else []


def _path_notes(prog: str) -> list[str]:
    argv = _argv(prog)
    if len(argv) > 1:
        return ["no `memcli` program next to this Python; the hooks call `python -m memcli`, "
                "and .mcp.json needs MEMCLI_BIN to be one program: reinstall memcli with pip"]
    return []
