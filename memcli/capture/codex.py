"""The Codex CLI's session rollout (`~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl`) as
session events.

Each line is `{"timestamp", "type", "payload"}`:

- `session_meta`: `payload.id` (the session id), `cwd`, `git.branch`, `cli_version`;
- `turn_context`: `cwd`, `model`;
- `response_item`: `payload.type` `message` (`role` user or assistant, `content` blocks of
  `input_text`/`output_text`), `function_call` (`name` such as `shell` or `exec_command`,
  `arguments` as a JSON string, `call_id`), `function_call_output` (`call_id`, `output`:
  text that starts `Exit code: N`, or JSON with `metadata.exit_code`), `custom_tool_call`
  (`apply_patch` with the patch as `input`), `local_shell_call`, `web_search_call`,
  `reasoning` (ignored);
- `event_msg`: `user_message`, `agent_message`, `exec_command_end` (`exit_code`,
  `aggregated_output`), `patch_apply_end`, `task_complete`, `turn_aborted`, `token_count`;
- `compacted`: a compaction.

Codex writes a user's prompt (and the agent's message) both as a `response_item` and as an
`event_msg`: the second copy is dropped. Its injected context messages
(`<environment_context>`, `<user_instructions>`, AGENTS.md) are not requests.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

from memcli.capture.session import SessionBuilder, texts_of

TYPES = frozenset({"session_meta", "turn_context", "response_item", "event_msg", "compacted"})
_INJECTED = ("<environment_context>", "<user_instructions>", "<permissions", "# AGENTS.md",
             "<user_shell_command>", "<turn_aborted>", "<INSTRUCTIONS>")
_EXIT = re.compile(r"(?:Exit code:|exited with code|exit code)\s*(-?\d+)", re.IGNORECASE)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


class CodexReader:
    def __init__(self, builder: SessionBuilder) -> None:
        self.b = builder
        self._last_user = ""
        self._last_agent = ""

    def handle(self, kind: str, rec: dict[str, Any]) -> None:
        payload = rec.get("payload")
        if not isinstance(payload, dict):
            return
        at = _text(rec.get("timestamp")) or None
        self.b.meta(at=at)
        if kind == "session_meta":
            git: Any = payload.get("git")
            branch = git.get("branch") if isinstance(git, dict) else None
            self.b.meta(session_id=payload.get("id") or payload.get("session_id"),
                        at=payload.get("timestamp"), cwd=payload.get("cwd"),
                        branch=branch or payload.get("git_branch"), model=payload.get("model"),
                        version=payload.get("cli_version"))
        elif kind == "turn_context":
            self.b.meta(cwd=payload.get("cwd"), model=payload.get("model"))
        elif kind == "response_item":
            self._item(payload, at)
        elif kind == "event_msg":
            self._event(payload, at)
        elif kind == "compacted":
            self.b.compaction(at)

    # ------------------------------------------------------------ response items

    def _item(self, p: dict[str, Any], at: str | None) -> None:
        kind = p.get("type")
        if kind == "message":
            text = texts_of(p.get("content"))
            if p.get("role") == "user":
                self._user(text, at)
            elif p.get("role") == "assistant":
                self._agent(text)
        elif kind == "function_call":
            self.b.message()
            self.b.tool_call(_id(p), _text(p.get("name")), _arguments(p.get("arguments")))
        elif kind == "custom_tool_call":
            self.b.message()
            self.b.tool_call(_id(p), _text(p.get("name")), {"input": p.get("input")})
        elif kind == "local_shell_call":
            self.b.message()
            self.b.tool_call(_id(p), "local_shell", {"command": _field(p.get("action"), "command")})
        elif kind in ("function_call_output", "custom_tool_call_output"):
            self.b.message()
            output, ok = _output(p.get("output"))
            self.b.tool_result(_id(p), ok, output)
        elif kind == "web_search_call":
            self.b.tool_call(None, "web_search", {"query": _field(p.get("action"), "query")})

    def _user(self, text: str, at: str | None) -> None:
        text = text.strip()
        if not text or text.startswith(_INJECTED) or text == self._last_user:
            return
        self._last_user = text
        self.b.message()
        self.b.request(text, at)

    def _agent(self, text: str) -> None:
        text = text.strip()
        if not text or text == self._last_agent:
            return
        self._last_agent = text
        self.b.message()
        self.b.text(text)

    # ------------------------------------------------------------ events

    def _event(self, p: dict[str, Any], at: str | None) -> None:
        kind = p.get("type")
        if kind == "user_message":
            self._user(texts_of(p.get("message")), at)
        elif kind == "agent_message":
            self._agent(texts_of(p.get("message")))
        elif kind == "task_complete":
            self._agent(_text(p.get("last_agent_message")))
        elif kind == "turn_aborted":
            self.b.interrupted()
        elif kind == "exec_command_end":
            self._exec_end(p)
        elif kind == "patch_apply_end":
            self._patch_end(p)

    def _exec_end(self, p: dict[str, Any]) -> None:
        code = p.get("exit_code")
        ok = code == 0 if isinstance(code, int) else None
        output = "\n".join(t for t in (_text(p.get("aggregated_output")), _text(p.get("stdout")),
                                       _text(p.get("stderr"))) if t)
        call_id = _id(p)
        if call_id is not None and self.b.has_pending(call_id):
            self.b.tool_result(call_id, ok, output)
            return
        command = p.get("command")
        text = " ".join(command) if isinstance(command, list) and all(isinstance(c, str) for c in command) \
            else _text(command)
        if isinstance(command, list) and len(command) >= 3 and command[1] in ("-lc", "-c"):
            text = str(command[2])
        if text:
            self.b.command(text, ok, output)

    def _patch_end(self, p: dict[str, Any]) -> None:
        call_id = _id(p)
        ok = p.get("success") if isinstance(p.get("success"), bool) else None
        if call_id is not None and self.b.has_pending(call_id):
            self.b.tool_result(call_id, ok, _text(p.get("stderr")) or _text(p.get("stdout")))
            return
        changes = p.get("changes")
        if isinstance(changes, dict) and ok is not False:
            for path, change in list(changes.items())[:100]:
                op = "edited"
                if isinstance(change, dict):
                    op = "created" if "add" in change else "deleted" if "delete" in change else "edited"
                self.b.file_changed(str(path), op)


def _field(value: Any, name: str) -> Any:
    return value.get(name) if isinstance(value, dict) else None


def _id(p: dict[str, Any]) -> str | None:
    value = p.get("call_id") or p.get("id")
    return value if isinstance(value, str) else None


def _arguments(raw: Any) -> dict[str, Any]:
    """A function call's arguments: a JSON string of an object (else the text as `input`)."""
    if isinstance(raw, dict):
        return raw
    if not isinstance(raw, str):
        return {}
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return {"input": raw}
    return value if isinstance(value, dict) else {"input": raw}


def _output(raw: Any) -> tuple[str, bool | None]:
    """A function call's output and whether it succeeded (None when it does not say)."""
    meta: dict[str, Any] = {}
    text = ""
    if isinstance(raw, dict):
        text, meta = _text(raw.get("output")), raw.get("metadata") or {}
    elif isinstance(raw, str):
        text = raw
        if raw.startswith("{"):
            try:
                value = orjson.loads(raw)
            except orjson.JSONDecodeError:
                value = None
            if isinstance(value, dict) and "output" in value:
                text = _text(value.get("output"))
                found = value.get("metadata")
                meta = found if isinstance(found, dict) else {}
    elif isinstance(raw, list):
        text = texts_of(raw)
    code = meta.get("exit_code") if isinstance(meta, dict) else None
    if isinstance(code, int):
        return text, code == 0
    match = _EXIT.search(text[:400])
    if match:
        return text, int(match.group(1)) == 0
    return text, None
