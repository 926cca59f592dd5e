"""Claude Code's transcript records, and the minimal generic shape, as session events.

Claude Code writes one JSON object a line. What capture reads:

- `user`: `message.content` is the person's prompt (a string or text blocks), or
  `tool_result` blocks answering the agent's tool calls (`is_error` marks a failure; the
  record also carries a top-level `toolUseResult`). Not requests: `isMeta` records,
  `isCompactSummary` records (the summary a compaction wrote), the harness's own tags
  (`<local-command-stdout>`, `<system-reminder>`, `<task-notification>`, ...), and
  "[Request interrupted by user]" (which marks the turn interrupted). A slash command
  (`<command-name>/review</command-name><command-args>…`) is a request; the feedback a
  person gives when refusing a tool call ("... the user said: ...") is one too.
- `assistant`: `message.content` blocks: `text`, `tool_use` (`id`, `name`, `input`:
  Bash `command`; Edit, MultiEdit, Write `file_path`; Task `subagent_type`, `description`,
  `prompt`; TodoWrite `todos`; ...), `thinking` (ignored). One API message may be split
  over several records sharing `message.id`: it counts as one message.
- `system` with subtype `compact_boundary`: a compaction; `attachment` of type
  `queued_command`: a prompt typed while the agent worked.
- `summary`, `file-history-snapshot`, `queue-operation`, `last-prompt`, `mode`,
  `permission-mode`, other `system` subtypes (`turn_duration`, ...): bookkeeping, read past.

Every record may carry `sessionId`, `timestamp`, `cwd`, `gitBranch`, `version`, `uuid`,
`parentUuid` and `isSidechain` (true: a sub-agent's record, folded in as delegated work).
"""

from __future__ import annotations

import re
from typing import Any

import orjson

from memcli.capture.session import SessionBuilder, texts_of

TYPES = frozenset({"user", "assistant", "system", "attachment", "summary", "file-history-snapshot",
                   "queue-operation", "last-prompt", "mode", "permission-mode", "progress",
                   "custom-title", "tag", "result"})
_HARNESS_TAGS = ("<local-command-stdout>", "<local-command-stderr>", "<local-command-caveat>",
                 "<bash-stdout>", "<bash-stderr>", "<system-reminder>", "<task-notification>",
                 "<user-prompt-submit-hook>", "<command-message>", "Caveat: The messages below")
_COMMAND_NAME = re.compile(r"<command-name>\s*(?P<name>[^<]*?)\s*</command-name>")
_COMMAND_ARGS = re.compile(r"<command-args>(?P<args>.*?)</command-args>", re.DOTALL)
_BASH_INPUT = re.compile(r"<bash-input>(?P<cmd>.*?)</bash-input>", re.DOTALL)
_REFUSED = ("The user doesn't want to proceed with this tool use",
            "The user doesn't want to take this action", "Permission to use")
_FEEDBACK = re.compile(r"the user said:\s*(?P<said>.+)", re.DOTALL | re.IGNORECASE)
# Claude Code's own commands: they manage the session, they are not work the person asked for.
_HOUSEKEEPING = frozenset({
    "/clear", "/compact", "/exit", "/quit", "/model", "/cost", "/help", "/status", "/config",
    "/login", "/logout", "/resume", "/context", "/memory", "/permissions", "/hooks", "/mcp",
    "/doctor", "/ide", "/vim", "/theme", "/terminal-setup", "/release-notes", "/add-dir",
    "/agents", "/bashes", "/export", "/upgrade", "/usage", "/statusline", "/output-style",
    "/privacy-settings", "/rewind", "/todos", "/plugin", "/feedback", "/bug",
})


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


class ClaudeReader:
    def __init__(self, builder: SessionBuilder) -> None:
        self.b = builder
        self._message_id: object = None

    def handle(self, kind: str, rec: dict[str, Any], forced_side: bool) -> None:
        side = forced_side or rec.get("isSidechain") is True
        self.b.meta(session_id=rec.get("sessionId"), at=rec.get("timestamp"), cwd=rec.get("cwd"),
                    branch=rec.get("gitBranch"), version=rec.get("version"), sidechain=side)
        if kind == "user":
            self._user(rec, side)
        elif kind == "assistant":
            self._assistant(rec, side)
        elif kind == "system" and rec.get("subtype") == "compact_boundary" and not side:
            self.b.compaction(_text(rec.get("timestamp")) or None)
        elif kind == "attachment" and not side:
            self._attachment(rec)

    # ------------------------------------------------------------ user records

    def _user(self, rec: dict[str, Any], side: bool) -> None:
        if rec.get("isMeta") is True or rec.get("isCompactSummary") is True:
            return
        message = rec.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        at = _text(rec.get("timestamp")) or None
        extra = rec.get("toolUseResult") if isinstance(rec.get("toolUseResult"), dict) else None
        if isinstance(content, list):
            results = [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"]
            for block in results:
                self._result(block, extra, at, side)
            if results:
                self.b.message(side)
            text = texts_of(content, ("text",))
        else:
            text = _text(content)
        if text.strip() and not side:  # a sub-agent's "user" text is the prompt it was given
            self._user_text(text, at)

    def _user_text(self, text: str, at: str | None) -> None:
        stripped = text.strip()
        if stripped.startswith("[Request interrupted by user"):
            self.b.interrupted()
            return
        command = _COMMAND_NAME.search(stripped)
        if command:
            name = command.group("name").strip()
            args = _COMMAND_ARGS.search(stripped)
            if name and name not in _HOUSEKEEPING:
                self.b.message()
                self.b.request(f"{name} {args.group('args').strip() if args else ''}".strip(), at, "command")
            return
        bash = _BASH_INPUT.search(stripped)
        if bash:
            self.b.command(bash.group("cmd").strip(), None, "", by_user=True)
            return
        if stripped.startswith(_HARNESS_TAGS):
            return
        self.b.message()
        self.b.request(stripped, at)

    def _result(self, block: dict[str, Any], extra: dict[str, Any] | None, at: str | None,
                side: bool) -> None:
        call_id = block.get("tool_use_id")
        failed = block.get("is_error") is True
        output = _result_text(block.get("content"), extra)
        refused = failed and output.lstrip().startswith(_REFUSED)
        self.b.tool_result(call_id if isinstance(call_id, str) else None, not failed, output, extra, refused)
        if refused and not side:
            said = _FEEDBACK.search(output)
            if said:
                self.b.request(said.group("said").strip(), at, "feedback")

    # ------------------------------------------------------------ assistant records

    def _assistant(self, rec: dict[str, Any], side: bool) -> None:
        message = rec.get("message")
        if not isinstance(message, dict):
            return
        if rec.get("isApiErrorMessage") is True:
            return  # the harness reporting an API failure, not the agent speaking
        self.b.meta(model=message.get("model"), sidechain=side)
        message_id = message.get("id") or rec.get("uuid")
        if message_id is None or message_id != self._message_id:
            self.b.message(side)
        self._message_id = message_id
        content = message.get("content")
        if isinstance(content, str):
            self.b.text(content, side)
            return
        if not isinstance(content, list):
            return
        for block in content:
            if not isinstance(block, dict):
                continue
            kind = block.get("type")
            if kind == "text":
                self.b.text(_text(block.get("text")), side)
            elif kind in ("tool_use", "server_tool_use"):
                args = block.get("input")
                call_id = block.get("id")
                self.b.tool_call(call_id if isinstance(call_id, str) else None, _text(block.get("name")),
                                 args if isinstance(args, dict) else {}, side)

    def _attachment(self, rec: dict[str, Any]) -> None:
        att: Any = rec.get("attachment")
        if not isinstance(att, dict) or att.get("type") != "queued_command":
            return
        origin = att.get("origin")
        human = not isinstance(origin, dict) or origin.get("kind") in (None, "human")
        if att.get("commandMode") in (None, "prompt") and human:
            prompt = texts_of(att.get("prompt"))
            if prompt.strip() and not prompt.lstrip().startswith(_HARNESS_TAGS):
                self.b.message()
                self.b.request(prompt, _text(rec.get("timestamp")) or None, "queued")

    # ------------------------------------------------------------ the generic shape

    def generic(self, rec: dict[str, Any], side: bool) -> None:
        """`{"role": ..., "content": ...}` lines: user and assistant messages with Claude-style
        content blocks, OpenAI-style `tool_calls`, and `role: "tool"` results."""
        side = side or rec.get("isSidechain") is True
        at = _text(rec.get("timestamp")) or None
        self.b.meta(session_id=rec.get("session_id") or rec.get("sessionId"), at=at, cwd=rec.get("cwd"),
                    branch=rec.get("git_branch") or rec.get("gitBranch"), model=rec.get("model"),
                    sidechain=side)
        role = rec.get("role")
        if role == "user":
            self._user({**rec, "message": {"content": rec.get("content")}}, side)
        elif role == "assistant":
            self._message_id = None
            content = rec.get("content")
            if content is not None:
                self._assistant({"message": {"content": content}}, side)  # counts the message
                self._message_id = None
            else:
                self.b.message(side)
            for call in rec.get("tool_calls") or []:
                if isinstance(call, dict):
                    self._openai_call(call, side)
        elif role == "tool":
            self.b.message(side)
            call_id = rec.get("tool_call_id") or rec.get("tool_use_id")
            output = texts_of(rec.get("content"))
            self.b.tool_result(call_id if isinstance(call_id, str) else None, rec.get("is_error") is not True,
                               output)

    def _openai_call(self, call: dict[str, Any], side: bool) -> None:
        inner = call.get("function")
        function: dict[str, Any] = inner if isinstance(inner, dict) else call
        args: Any = function.get("arguments")
        if isinstance(args, str):
            try:
                args = orjson.loads(args)
            except orjson.JSONDecodeError:
                args = {"input": args}
        call_id = call.get("id")
        self.b.tool_call(call_id if isinstance(call_id, str) else None, _text(function.get("name")),
                         args if isinstance(args, dict) else {}, side)


def _result_text(content: Any, extra: dict[str, Any] | None) -> str:
    """A tool result's text: its content, else what `toolUseResult` says (stdout, stderr)."""
    text = texts_of(content)
    if text:
        return text
    if extra:
        parts = [extra.get(k) for k in ("stdout", "stderr", "content", "error")]
        return "\n".join(p for p in parts if isinstance(p, str))
    return ""
