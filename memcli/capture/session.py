"""A session digest, built one event at a time from a transcript (SPEC 12).

The transcript readers (`transcript.py`) turn each record of whatever format into a few
calls on `SessionBuilder`: a request from the user, a text from the agent, a tool call, a
tool result, a compaction. The builder keeps only what a memory of the session needs, in
bounded structures (every list and map has a cap), so that a transcript of hundreds of MB
is digested in flat memory:

- the requests (the first ones and the last ones), each with the agent's last answer;
- the commands run (one entry per distinct command line, with how often it ran and failed);
- the files written or edited;
- each error met (a command that failed), with the agent's first words after it, the
  files and commands that changed things next, and the run of the same command that
  passed afterwards (what fixed it);
- the sub-agents it delegated to, commits, pull requests, todos, compactions.

Nothing here is masked: the texts are raw and clipped. `render` masks what it
puts into the memory.
"""

from __future__ import annotations

import collections
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from memcli.capture import commands as cmds
from memcli.capture.learnings import ErrorEvent, ErrorTracker

# Caps. Each bounds memory, not quality: a memory shows far fewer than these.
MAX_TEXT = 4000  # a request or an answer, as kept (rendering clips far shorter)
MAX_COMMAND = 1000  # a command line, as kept
MAX_HEAD_REQUESTS = 40  # the first requests kept ...
MAX_TAIL_REQUESTS = 10  # ... and the last ones
MAX_COMMANDS = 400  # distinct commands
MAX_FILES = 400  # distinct files changed
MAX_PENDING = 2000  # tool calls waiting for their result
MAX_SUBAGENTS = 30
MAX_SMALL = 20  # commits, pull requests, web lookups, models, session ids...

# Tool names, across harnesses (Claude Code, Codex, generic function calling).
COMMAND_TOOLS = frozenset({"bash", "shell", "exec_command", "shell_command", "local_shell",
                           "container.exec", "run_command", "execute_command", "run_terminal_cmd",
                           "terminal", "run_shell_command"})
WRITE_TOOLS = {"write": "written", "create_file": "created", "write_file": "written",
               "edit": "edited", "multiedit": "edited", "notebookedit": "edited",
               "edit_file": "edited", "str_replace_editor": "edited", "str_replace_based_edit_tool": "edited",
               "replace": "edited", "apply_patch": "edited", "delete_file": "deleted"}
READ_TOOLS = frozenset({"read", "glob", "grep", "ls", "view", "read_file", "list_dir", "list_files",
                        "notebookread", "search", "file_search", "codebase_search", "grep_search", "find"})
TASK_TOOLS = frozenset({"task", "agent", "spawn_agent", "dispatch_agent"})
WEB_TOOLS = frozenset({"webfetch", "websearch", "web_search", "web_fetch", "fetch", "browse"})
TODO_TOOLS = frozenset({"todowrite", "update_plan", "todo_write"})
QUIET_FAILURE_TOOLS = WRITE_TOOLS.keys() | READ_TOOLS | TODO_TOOLS  # their errors are retries, not lessons


@dataclass
class Request:
    """Something the user asked (a prompt, a slash command, feedback on a refused tool)."""

    text: str
    at: str | None
    kind: str = "prompt"  # prompt, command, feedback, queued
    answer: str = ""  # the agent's last text in this request's turn, after its last tool call
    tools: int = 0  # tool calls made in the turn
    interrupted: bool = False


@dataclass
class Command:
    text: str
    key: str
    kind: str
    count: int = 0
    failures: int = 0
    last_ok: bool | None = None
    delegated: bool = False  # run by a sub-agent only
    by_user: bool = False  # typed by the person (Claude Code's `!` bash mode)
    refused: int = 0  # calls the person refused
    step: int = 0


@dataclass
class FileChange:
    path: str
    ops: list[str] = field(default_factory=list)  # created, written, edited, deleted (in order)
    count: int = 0
    delegated: bool = False
    step: int = 0


@dataclass
class SubAgent:
    kind: str
    description: str
    prompt: str = ""
    result: str = ""
    failed: bool = False


@dataclass
class Pending:
    """A tool call waiting for its result."""

    tool: str
    category: str  # command, write, read, task, web, todo, other
    target: str
    step: int
    delegated: bool
    changes: list[tuple[str, str]] = field(default_factory=list)  # (op, path) of a file tool


@dataclass
class Session:
    """What the digest holds once the transcript is read; `SessionBuilder` fills it."""

    kind: str = "jsonl"
    session_ids: list[str] = field(default_factory=list)
    started: str | None = None
    ended: str | None = None
    cwd: str | None = None
    branches: list[str] = field(default_factory=list)
    models: list[str] = field(default_factory=list)
    versions: list[str] = field(default_factory=list)
    messages: int = 0
    requests: list[Request] = field(default_factory=list)  # the first MAX_HEAD_REQUESTS
    tail_requests: collections.deque[Request] = field(
        default_factory=lambda: collections.deque(maxlen=MAX_TAIL_REQUESTS))
    request_count: int = 0
    commands: dict[str, Command] = field(default_factory=dict)
    command_runs: int = 0
    files: dict[str, FileChange] = field(default_factory=dict)
    reads: int = 0
    errors: list[ErrorEvent] = field(default_factory=list)
    error_count: int = 0
    quiet_failures: int = 0  # failed edits, reads, searches: retried, not lessons
    subagents: list[SubAgent] = field(default_factory=list)
    subagent_count: int = 0
    todos: list[tuple[str, str]] = field(default_factory=list)  # (status, text), the last list
    commits: list[str] = field(default_factory=list)
    pull_requests: list[str] = field(default_factory=list)
    pushes: int = 0
    web: list[str] = field(default_factory=list)
    mcp_servers: list[str] = field(default_factory=list)
    tool_counts: collections.Counter[str] = field(default_factory=collections.Counter)
    compactions: list[str | None] = field(default_factory=list)
    last_text: str = ""
    plan: str = ""  # a plan the user approved (Claude Code's plan mode)
    lines: int = 0
    skipped: collections.Counter[str] = field(default_factory=collections.Counter)
    end_reason: str | None = None

    @property
    def all_requests(self) -> list[Request]:
        """The requests kept: the first ones, then the last ones (a gap between when more)."""
        head = self.requests
        tail = [r for r in self.tail_requests if not any(r is h for h in head)]
        return head + tail

    @property
    def last_request(self) -> Request | None:
        if self.tail_requests:
            return self.tail_requests[-1]
        return self.requests[-1] if self.requests else None


def clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit]


def _add_small(items: list[str], value: str | None, cap: int = MAX_SMALL) -> None:
    if value and value not in items and len(items) < cap:
        items.append(value)


# Lines that may hold a secret in a form the masker recognises (`password=`, `AKIA…`, a
# PEM header, credentials in a URL...). Only these lines are shown to the masker while the
# transcript is read, so that it learns each secret where its context gives it away and
# masks it wherever it reappears bare in the memory; scanning every line with the masker's
# full set of patterns would cost seconds per 10 MB.
SECRET_HINT = re.compile(
    r"(?i)pass(?:wd|word)?\b|pwd|secret|token|api[_-]?key|access[_-]?key|private[_-]?key|credential|"
    r"auth|bearer|-----BEGIN|\b(?:AKIA|ASIA)[A-Z0-9]{16}|\bgh[pousr]_|github_pat_|\bsk-|\bxox[abprs]-|"
    r"\beyJ|://[^/\s:@]+:[^/\s@]+@")
# Cheap lowercase needles that every SECRET_HINT match contains: found with str.find (C
# speed) before any regex runs, since one regex with many alternatives scans at ~3 MB/s.
_NEEDLES = ("pass", "pwd", "secret", "token", "key", "credential", "auth", "bearer", "-----begin", "akia",
            "asia", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "sk-", "xox", "eyj", "://")
LEARN_WINDOW = 8192  # of each text's head and tail: where env dumps, configs and errors show
MAX_LEARNED = 20_000  # lines shown to the masker per capture, at most
Learn = Callable[[str], object]


class SecretLearner:
    """Shows the masker every line of the transcript's texts that may hold a secret."""

    def __init__(self, learn: Learn | None) -> None:
        self._learn = learn
        self._learned = 0
        self._seen: set[str] = set()  # lines already shown

    def __call__(self, text: str) -> None:
        """Show the masker the lines of `text` (its head and tail, if huge) that may hold a secret."""
        if self._learn is None or not text or self._learned >= MAX_LEARNED:
            return
        window = text if len(text) <= 2 * LEARN_WINDOW else f"{text[:LEARN_WINDOW]}\n{text[-LEARN_WINDOW:]}"
        low = window.lower()
        starts: set[int] = set()
        for needle in _NEEDLES:
            at = low.find(needle)
            while at >= 0 and len(starts) < 1000:
                start = low.rfind("\n", 0, at) + 1
                starts.add(start)
                end = low.find("\n", at)
                at = low.find(needle, end) if end >= 0 else -1
        for start in sorted(starts):
            end = window.find("\n", start)
            line = window[start: end if end >= 0 else len(window)][:4096]
            if line in self._seen or not SECRET_HINT.search(line):
                continue
            self._learn(line)
            self._learned += 1
            if len(self._seen) < MAX_LEARNED:
                self._seen.add(line)
            if self._learned >= MAX_LEARNED:
                return

    def args(self, args: dict[str, Any]) -> None:
        """The string values of a tool call's arguments (and of its lists of edits)."""
        for value in args.values():
            if isinstance(value, str):
                self(value)
            elif isinstance(value, list):
                for item in value[:50]:
                    if isinstance(item, str):
                        self(item)
                    elif isinstance(item, dict):
                        self.args(item)


class SessionBuilder:
    """Turns transcript events into a `Session`, in bounded memory. `learn`, when given, is
    shown every line of the transcript's texts that may hold a secret (see SECRET_HINT)."""

    def __init__(self, kind: str = "jsonl", learn: Learn | None = None) -> None:
        self.session = Session(kind=kind)
        self.learn = SecretLearner(learn)
        self.errors = ErrorTracker(self.session.errors)
        self.step = 0
        self._pending: dict[str, Pending] = {}
        self._turn: Request | None = None
        self._tasks: dict[str, SubAgent] = {}

    # ------------------------------------------------------------ context

    def meta(self, *, session_id: Any = None, at: Any = None, cwd: Any = None, branch: Any = None,
             model: Any = None, version: Any = None, sidechain: bool = False) -> None:
        """Facts a record carries about its session; any may be None."""
        s = self.session
        if isinstance(at, str) and at:
            s.started = s.started or at
            s.ended = at if (s.ended is None or at >= s.ended) else s.ended
        if sidechain:
            return
        if isinstance(session_id, str) and session_id:
            _add_small(s.session_ids, session_id)
        if isinstance(cwd, str) and cwd and s.cwd is None:
            s.cwd = cwd
        if isinstance(branch, str) and branch and branch != "HEAD":
            _add_small(s.branches, branch, 5)
        if isinstance(model, str) and model and not model.startswith("<"):
            _add_small(s.models, model, 5)
        if isinstance(version, str) and version:
            _add_small(s.versions, version, 3)

    def line(self) -> None:
        self.session.lines += 1

    def skip(self, reason: str) -> None:
        if len(self.session.skipped) < 50 or reason in self.session.skipped:
            self.session.skipped[reason] += 1

    def message(self, sidechain: bool = False) -> None:
        """One message of the conversation (the user's or the agent's); sub-agents' aside."""
        if not sidechain:
            self.session.messages += 1

    def compaction(self, at: str | None) -> None:
        if len(self.session.compactions) < MAX_SMALL:
            self.session.compactions.append(at)

    # ------------------------------------------------------------ the conversation

    def request(self, text: str, at: str | None, kind: str = "prompt") -> None:
        """A request from the user (never a sub-agent's prompt: those are delegated work)."""
        text = text.strip()
        if not text:
            return
        self.learn(text)
        self.step += 1
        s = self.session
        self.errors.new_turn()
        req = Request(clip(text, MAX_TEXT), at, kind)
        s.request_count += 1
        if len(s.requests) < MAX_HEAD_REQUESTS:
            s.requests.append(req)
        s.tail_requests.append(req)
        self._turn = req

    def interrupted(self) -> None:
        if self._turn is not None:
            self._turn.interrupted = True

    def text(self, text: str, sidechain: bool = False) -> None:
        """A text the agent wrote."""
        text = text.strip()
        if not text:
            return
        self.learn(text)
        self.step += 1
        self.errors.text(text, sidechain)
        if sidechain:
            return
        self.session.last_text = clip(text, MAX_TEXT)
        if self._turn is not None:
            self._turn.answer = self.session.last_text

    def plan(self, text: str) -> None:
        if text.strip():
            self.session.plan = clip(text.strip(), MAX_TEXT)

    # ------------------------------------------------------------ tools

    def tool_call(self, call_id: str | None, name: str, args: dict[str, Any],
                  sidechain: bool = False) -> None:
        """The agent called a tool. Its result (if any) comes later through `tool_result`."""
        self.learn.args(args)
        self.step += 1
        s = self.session
        tool = name.strip() or "tool"
        low = tool.lower()
        s.tool_counts[tool if len(s.tool_counts) < 100 or tool in s.tool_counts else "other"] += 1
        if self._turn is not None and not sidechain:
            self._turn.tools += 1
            self._turn.answer = ""  # a text before a tool call is not how the turn ended
        if low.startswith("mcp__"):
            _add_small(s.mcp_servers, low.split("__")[1] if low.count("__") >= 2 else low[5:], 10)
        pending = classify(tool, low, args, self.step, sidechain)
        if pending.category == "write":
            for op, path in pending.changes:
                self.file_changed(path, op, sidechain)
        elif pending.category == "read":
            s.reads += 1
        elif pending.category == "task":
            self._start_task(call_id, args)
        elif pending.category == "todo":
            self._todos(args)
        elif pending.category == "web":
            _add_small(s.web, clip(pending.target, 200), 10)
        elif pending.category == "plan":
            self.plan(str(args.get("plan") or ""))
        if call_id:
            if len(self._pending) >= MAX_PENDING:
                self._pending.pop(next(iter(self._pending)))
            self._pending[call_id] = pending
        elif pending.category == "command":
            self._command_done(pending, None, "")  # no result will come: count the run

    def has_pending(self, call_id: str) -> bool:
        return call_id in self._pending

    def tool_result(self, call_id: str | None, ok: bool | None, output: str,
                    extra: dict[str, Any] | None = None, refused: bool = False) -> None:
        """The result of an earlier call: ok True, False (an error), or None (unknown);
        `refused`: the person said no to the call (a decision, not an error)."""
        self.learn(output)
        pending = self._pending.pop(call_id, None) if call_id else None
        if pending is None:
            return
        self.step += 1
        if refused:
            self._refused(pending)
            return
        if pending.category == "command":
            self._command_done(pending, ok, output)
        elif pending.category == "task":
            self._end_task(call_id, ok, output)
        elif pending.category == "write" and extra and extra.get("type") == "create":
            change = self.session.files.get(pending.target)
            if change is not None and change.ops[-1:] == ["written"]:
                change.ops[-1] = "created"
        if ok is False and pending.category == "write":
            self._unchange(pending.changes)
        if ok is False and pending.category != "command":
            if pending.tool.lower() in QUIET_FAILURE_TOOLS or pending.category == "task":
                self.session.quiet_failures += 1
            else:
                target = pending.target or pending.tool
                self.errors.failed(pending.step, pending.tool, clip(target, MAX_COMMAND),
                                   f"{pending.tool}:{target}", output, pending.delegated)

    def _refused(self, pending: Pending) -> None:
        if pending.category == "write":
            self._unchange(pending.changes)
        if pending.category != "command":
            return
        text = clip(pending.target.strip(), MAX_COMMAND)
        entry = self.session.commands.get(text)
        if entry is None and text and len(self.session.commands) < MAX_COMMANDS:
            key = cmds.command_key(text)
            entry = self.session.commands[text] = Command(text, key, cmds.command_kind(key),
                                                          delegated=pending.delegated, step=pending.step)
        if entry is not None:
            entry.refused += 1

    def command(self, text: str, ok: bool | None, output: str, sidechain: bool = False,
                by_user: bool = False) -> None:
        """A command run with its result at once (a harness event, the user's own `!cmd`)."""
        self.learn(text)
        self.learn(output)
        self.step += 1
        pending = Pending("shell", "command", text, self.step, sidechain)
        self._command_done(pending, ok, output, by_user)

    def _command_done(self, pending: Pending, ok: bool | None, output: str, by_user: bool = False) -> None:
        s = self.session
        text = clip(pending.target.strip(), MAX_COMMAND)
        if not text:
            return
        s.command_runs += 1
        key = cmds.command_key(text)
        kind = cmds.command_kind(key)
        entry = s.commands.get(text)
        if entry is None and len(s.commands) < MAX_COMMANDS:
            entry = s.commands[text] = Command(text, key, kind, delegated=pending.delegated,
                                               by_user=by_user, step=pending.step)
        if entry is not None:
            entry.count += 1
            entry.delegated = entry.delegated and pending.delegated
            entry.step = pending.step
            if ok is not None:
                entry.last_ok = ok
                entry.failures += 0 if ok else 1
        if ok is False:
            if kind != "readonly":  # grep finding nothing, `test -f`: not errors
                self.errors.failed(pending.step, pending.tool, text, key, output, pending.delegated)
            return
        if ok is None:
            return
        if not pending.delegated:
            self._vcs(text, output)
        self.errors.passed(text, key, kind, pending.delegated)

    def _vcs(self, text: str, output: str) -> None:
        """Commits, pushes and pull requests a passing command made (anywhere in its line)."""
        s = self.session
        steps = cmds.vcs_steps(text)
        if "commit" in steps:
            _add_small(s.commits, cmds.commit_message(text, output))
        if "push" in steps:
            s.pushes += 1
        if "pr" in steps:
            _add_small(s.pull_requests, cmds.pull_request_url(output))

    def file_changed(self, path: str, op: str, sidechain: bool = False) -> None:
        path = path.strip()
        if not path:
            return
        s = self.session
        change = s.files.get(path)
        if change is None:
            if len(s.files) >= MAX_FILES:
                return
            change = s.files[path] = FileChange(path, delegated=sidechain, step=self.step)
        change.count += 1
        change.delegated = change.delegated and sidechain
        if op not in change.ops:
            change.ops.append(op)
        self.errors.file_changed(path, sidechain)

    def _unchange(self, changes: list[tuple[str, str]]) -> None:
        """A file tool call that failed changed nothing: take back what its call recorded."""
        for _op, path in changes:
            change = self.session.files.get(path.strip())
            if change is None:
                continue
            change.count -= 1
            if change.count <= 0:
                del self.session.files[change.path]
                self.errors.file_unchanged(change.path)

    # ------------------------------------------------------------ sub-agents, todos

    def _start_task(self, call_id: str | None, args: dict[str, Any]) -> None:
        s = self.session
        s.subagent_count += 1
        agent = SubAgent(str(args.get("subagent_type") or args.get("agent_type") or "sub-agent"),
                         clip(str(args.get("description") or ""), 500),
                         clip(str(args.get("prompt") or ""), MAX_TEXT))
        if len(s.subagents) < MAX_SUBAGENTS:
            s.subagents.append(agent)
            if call_id:
                self._tasks[call_id] = agent

    def _end_task(self, call_id: str | None, ok: bool | None, output: str) -> None:
        agent = self._tasks.pop(call_id, None) if call_id else None
        if agent is not None:
            agent.result = clip(output.strip(), MAX_TEXT)
            agent.failed = ok is False

    def _todos(self, args: dict[str, Any]) -> None:
        items = args.get("todos") if isinstance(args.get("todos"), list) else args.get("plan")
        if not isinstance(items, list):
            return
        todos: list[tuple[str, str]] = []
        for item in items[:50]:
            if isinstance(item, dict):
                text = item.get("content") or item.get("step") or item.get("title") or ""
                if isinstance(text, str) and text.strip():
                    todos.append((str(item.get("status") or "pending"), clip(text.strip(), 300)))
        self.session.todos = todos

    def finish(self, end_reason: str | None = None) -> Session:
        """The digest, once every record was read."""
        self.session.end_reason = end_reason
        self.session.error_count = self.errors.count
        return self.session


# ---------------------------------------------------------------- tool arguments


def classify(tool: str, low: str, args: dict[str, Any], step: int, sidechain: bool) -> Pending:
    """What a tool call is: a command, a file change, a read, a sub-agent, a todo list, ..."""
    if low in COMMAND_TOOLS or (low.endswith("shell") and "command" in args):
        return Pending(tool, "command", command_text(args), step, sidechain)
    if low in WRITE_TOOLS:
        changes = patch_ops(args) if low == "apply_patch" else [(WRITE_TOOLS[low], file_path(args))]
        changes = [(op, path) for op, path in changes if path]
        target = changes[0][1] if changes else ""
        return Pending(tool, "write" if changes else "other", target, step, sidechain, changes)
    if low in READ_TOOLS:
        return Pending(tool, "read", file_path(args), step, sidechain)
    if low in TASK_TOOLS:
        return Pending(tool, "task", str(args.get("description") or ""), step, sidechain)
    if low in TODO_TOOLS:
        return Pending(tool, "todo", "", step, sidechain)
    if low in WEB_TOOLS:
        target = args.get("url") or args.get("query") or args.get("q") or ""
        return Pending(tool, "web", str(target), step, sidechain)
    if low == "exitplanmode":
        return Pending(tool, "plan", "", step, sidechain)
    target = next((str(args[k]) for k in ("command", "path", "file_path", "url", "query", "name")
                   if isinstance(args.get(k), str)), "")
    return Pending(tool, "other", target, step, sidechain)


def command_text(args: dict[str, Any]) -> str:
    """The command line of a shell tool call, whatever its argument shape."""
    for key in ("command", "cmd", "script", "commandLine"):
        value = args.get(key)
        if isinstance(value, str):
            return value
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            words = list(value)
            shell = words[0].rsplit("/", 1)[-1] if words else ""
            if len(words) >= 3 and shell in ("bash", "sh", "zsh", "powershell", "pwsh") \
                    and words[1] in ("-lc", "-c", "-Command"):
                return words[2]
            return " ".join(words)
    action = args.get("action")
    if isinstance(action, dict):
        return command_text(action)
    return ""


def file_path(args: dict[str, Any]) -> str:
    for key in ("file_path", "notebook_path", "path", "filePath", "target_file", "filename", "file"):
        value = args.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return ""


_PATCH_OPS = {"Add": "created", "Update": "edited", "Delete": "deleted"}


def patch_ops(args: dict[str, Any] | str) -> list[tuple[str, str]]:
    """(op, path) for each file an apply_patch patch touches (`*** Update File: x`)."""
    text = args if isinstance(args, str) else (args.get("input") or args.get("patch") or "")
    if not isinstance(text, str):
        return []
    found: list[tuple[str, str]] = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("*** ") and " File: " in line:
            verb = line[4:].split(" ", 1)[0]
            path = line.split(" File: ", 1)[1].strip()
            if verb in _PATCH_OPS and path and len(found) < 60:
                found.append((_PATCH_OPS[verb], path))
        elif line.startswith("*** Move to: "):
            found.append(("created", line[len("*** Move to: "):].strip()))
    return found


def patch_paths(args: dict[str, Any] | str) -> list[str]:
    return [path for _, path in patch_ops(args)]


def texts_of(content: Any, kinds: Iterable[str] = ("text", "input_text", "output_text")) -> str:
    """The text of a message content: a string, or the text blocks of a list."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        wanted = set(kinds)
        parts = [b.get("text") for b in content if isinstance(b, dict) and b.get("type") in wanted]
        return "\n".join(p for p in parts if isinstance(p, str))
    return ""
