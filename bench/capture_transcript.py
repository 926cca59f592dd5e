"""A small writer of transcripts in Claude Code's JSONL format, for the capture samples.

It produces the records Claude Code 2.1 writes (see memcli/capture/claude_code.py):
`user` and `assistant` records chained by `uuid`/`parentUuid`, each with `sessionId`, `cwd`,
`gitBranch`, `version`, `timestamp` and `isSidechain`; tool calls as `tool_use` blocks and
their results as `tool_result` blocks with a top-level `toolUseResult`; one API message split
over several records sharing `message.id`; and the bookkeeping records around them
(`queue-operation`, `file-history-snapshot`, `system` `turn_duration`, `last-prompt`,
`permission-mode`, `summary`). Deterministic: the same script gives the same bytes.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import Callable
from typing import Any

NAMESPACE = uuid.UUID("6f1c8e2a-3b7d-4f4e-9a51-2d6c0b8e7f10")


class Transcript:
    def __init__(self, session_id: str, cwd: str, branch: str, start: str,
                 version: str = "2.1.197", model: str = "claude-sonnet-4-5-20250929") -> None:
        self.session_id = session_id
        self.cwd = cwd
        self.branch = branch
        self.version = version
        self.model = model
        self.now = dt.datetime.fromisoformat(start.replace("Z", "+00:00"))
        self.records: list[dict[str, Any]] = []
        self.parent: str | None = None
        self.side_parent: str | None = None
        self._n = 0
        self._tools = 0
        self._messages = 0
        self.raw({"type": "permission-mode", "permissionMode": "default", "sessionId": session_id})
        self.raw({"type": "queue-operation", "operation": "dequeue", "timestamp": self._stamp(),
                  "sessionId": session_id})

    # ------------------------------------------------------------ plumbing

    def _id(self) -> str:
        self._n += 1
        return str(uuid.uuid5(NAMESPACE, f"{self.session_id}:{self._n}"))

    def _stamp(self) -> str:
        return self.now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{self.now.microsecond // 1000:03d}Z"

    def tick(self, seconds: float) -> Transcript:
        self.now += dt.timedelta(seconds=seconds)
        return self

    def raw(self, record: dict[str, Any]) -> None:
        self.records.append(record)

    def _record(self, kind: str, side: bool = False, **fields: Any) -> dict[str, Any]:
        rid = self._id()
        parent = self.side_parent if side else self.parent
        record: dict[str, Any] = {"parentUuid": parent, "isSidechain": side, "userType": "external",
                                  "cwd": self.cwd, "sessionId": self.session_id, "version": self.version,
                                  "gitBranch": self.branch}
        if side:
            record["agentId"] = "a" + rid[:7]
        record.update({"type": kind, **fields, "uuid": rid, "timestamp": self._stamp()})
        self.records.append(record)
        if side:
            self.side_parent = rid
        else:
            self.parent = rid
        return record

    def _message_id(self) -> str:
        self._messages += 1
        return f"msg_01{uuid.uuid5(NAMESPACE, f'{self.session_id}:m{self._messages}').hex[:22]}"

    def _tool_id(self) -> str:
        self._tools += 1
        return f"toolu_01{uuid.uuid5(NAMESPACE, f'{self.session_id}:t{self._tools}').hex[:22]}"

    def _assistant(self, blocks: list[dict[str, Any]], side: bool = False) -> None:
        """One API message; Claude Code writes each content block as its own record."""
        mid = self._message_id()
        for block in blocks:
            self._record("assistant", side, message={
                "id": mid, "type": "message", "role": "assistant", "model": self.model,
                "content": [block], "stop_reason": None, "stop_sequence": None,
                "usage": {"input_tokens": 4, "cache_creation_input_tokens": 1200,
                          "cache_read_input_tokens": 15000, "output_tokens": 120}},
                requestId=f"req_{mid[6:20]}")
            self.tick(6)

    # ------------------------------------------------------------ the conversation

    def user(self, text: str) -> Transcript:
        self.raw({"type": "file-history-snapshot", "messageId": self._id(),
                  "snapshot": {"messageId": self._id(), "trackedFileBackups": {}, "timestamp": self._stamp()},
                  "isSnapshotUpdate": False})
        self._record("user", message={"role": "user", "content": text})
        self.tick(4)
        return self

    def command(self, name: str, args: str = "") -> Transcript:
        """A slash command as Claude Code records it."""
        self._record("user", message={"role": "user", "content":
                     f"<command-message>{name.lstrip('/')} is running…</command-message>\n"
                     f"<command-name>{name}</command-name>\n<command-args>{args}</command-args>"})
        self.tick(3)
        return self

    def interrupt(self) -> Transcript:
        self._record("user", message={"role": "user", "content": [
            {"type": "text", "text": "[Request interrupted by user for tool use]"}]})
        return self

    def queued(self, text: str) -> Transcript:
        self.raw({"type": "queue-operation", "operation": "enqueue", "timestamp": self._stamp(),
                  "sessionId": self.session_id, "content": text})
        self._record("attachment", attachment={"type": "queued_command", "prompt": text,
                                                "commandMode": "prompt"})
        return self

    def say(self, text: str, thinking: str | None = None, side: bool = False) -> Transcript:
        blocks: list[dict[str, Any]] = []
        if thinking:
            blocks.append({"type": "thinking", "thinking": thinking, "signature": "EqQBCkYIBxgCKkD"})
        blocks.append({"type": "text", "text": text})
        self._assistant(blocks, side)
        return self

    def end_turn(self, ms: int = 42_000) -> Transcript:
        self.raw({"parentUuid": self.parent, "isSidechain": False, "type": "system",
                  "subtype": "turn_duration", "durationMs": ms, "timestamp": self._stamp(),
                  "uuid": self._id(), "isMeta": False, "sessionId": self.session_id, "cwd": self.cwd})
        return self

    # ------------------------------------------------------------ tools

    def tool(self, name: str, args: dict[str, Any], output: str, *, error: bool = False,
             result: Any = None, text: str | None = None, side: bool = False) -> Transcript:
        """An assistant tool call (optionally after a text) and its result."""
        tid = self._tool_id()
        blocks: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
        blocks.append({"type": "tool_use", "id": tid, "name": name, "input": args})
        self._assistant(blocks, side)
        self.tick(9)
        block = {"tool_use_id": tid, "type": "tool_result", "content": output}
        if error:
            block["is_error"] = True
        self._record("user", side, message={"role": "user", "content": [block]},
                     toolUseResult=result if result is not None else
                     (f"Error: {output}" if error else output))
        self.tick(1)
        return self

    def bash(self, command: str, output: str, *, exit_code: int = 0, text: str | None = None,
             description: str = "", side: bool = False) -> Transcript:
        args = {"command": command, "description": description or command.split()[0]}
        if exit_code:
            return self.tool("Bash", args, f"Exit code {exit_code}\n{output}", error=True, text=text,
                             side=side)
        return self.tool("Bash", args, output, result={"stdout": output, "stderr": "", "interrupted": False,
                                                         "isImage": False}, text=text, side=side)

    def read(self, path: str, content: str, side: bool = False) -> Transcript:
        numbered = "\n".join(f"{n:>6}→{line}" for n, line in enumerate(content.splitlines(), 1))
        return self.tool("Read", {"file_path": path}, numbered, side=side, result={
            "type": "text", "file": {"filePath": path, "content": content,
                                     "numLines": content.count("\n") + 1, "startLine": 1,
                                     "totalLines": content.count("\n") + 1}})

    def grep(self, pattern: str, output: str, side: bool = False) -> Transcript:
        return self.tool("Grep", {"pattern": pattern, "output_mode": "content"}, output, side=side,
                         result={"mode": "content", "numFiles": 0, "filenames": [], "content": output})

    def edit(self, path: str, old: str, new: str, text: str | None = None, side: bool = False) -> Transcript:
        return self.tool("Edit", {"file_path": path, "old_string": old, "new_string": new},
                         f"The file {path} has been updated. Here's the result of running `cat -n` on a "
                         f"snippet of the edited file:\n     1→{new.splitlines()[0] if new else ''}",
                         text=text, side=side,
                         result={"filePath": path, "oldString": old, "newString": new, "originalFile": old,
                                 "structuredPatch": [], "userModified": False, "replaceAll": False})

    def failed_edit(self, path: str, old: str, new: str) -> Transcript:
        return self.tool("Edit", {"file_path": path, "old_string": old, "new_string": new},
                         "<tool_use_error>String to replace not found in file.\nString: " + old
                         + "</tool_use_error>", error=True)

    def write(self, path: str, content: str, text: str | None = None, create: bool = True,
              side: bool = False) -> Transcript:
        return self.tool("Write", {"file_path": path, "content": content},
                         f"File created successfully at: {path}" if create else
                         f"The file {path} has been updated.", text=text, side=side,
                         result={"type": "create" if create else "update", "filePath": path,
                                 "content": content, "structuredPatch": []})

    def todos(self, items: list[tuple[str, str]]) -> Transcript:
        todos = [{"content": c, "status": s, "activeForm": c} for s, c in items]
        return self.tool("TodoWrite", {"todos": todos}, "Todos have been modified successfully. Ensure that "
                         "you continue to use the todo list to track your progress.",
                         result={"oldTodos": [], "newTodos": todos})

    def refused(self, command: str, feedback: str) -> Transcript:
        """The person refuses a Bash call in the permission prompt and says why."""
        return self.tool("Bash", {"command": command, "description": command.split()[0]},
                         "The user doesn't want to proceed with this tool use. The tool use was rejected "
                         "(eg. if it was a file edit, the new_string was NOT written to the file). To tell "
                         f"you how to proceed, the user said:\n{feedback}", error=True,
                         result="Error: The user doesn't want to proceed with this tool use.")

    def task(self, subagent: str, description: str, prompt: str,
             work: Callable[[Transcript], None], report: str) -> Transcript:
        """A Task call: the sub-agent's records (isSidechain), then the Task's result."""
        tid = self._tool_id()
        self._assistant([{"type": "tool_use", "id": tid, "name": "Task", "input": {
            "description": description, "prompt": prompt, "subagent_type": subagent}}])
        self.side_parent = None
        self._record("user", True, message={"role": "user", "content": prompt})
        self.tick(2)
        work(self)
        self.say(report, side=True)
        self._record("user", message={"role": "user", "content": [
            {"tool_use_id": tid, "type": "tool_result", "content": [{"type": "text", "text": report}]}]},
            toolUseResult={"status": "completed", "prompt": prompt, "agentId": "a1b2c3d",
                           "content": [{"type": "text", "text": report}], "totalDurationMs": 48000,
                           "totalTokens": 31000, "totalToolUseCount": 6})
        self.tick(2)
        return self

    def compact(self, summary: str, trigger: str = "auto") -> Transcript:
        """A compaction: the boundary, then the summary Claude Code feeds back as a user record."""
        boundary = self._id()
        self.raw({"parentUuid": None, "logicalParentUuid": self.parent, "isSidechain": False,
                  "userType": "external", "cwd": self.cwd, "sessionId": self.session_id,
                  "version": self.version, "gitBranch": self.branch, "type": "system",
                  "subtype": "compact_boundary", "content": "Conversation compacted", "isMeta": False,
                  "timestamp": self._stamp(), "uuid": boundary, "level": "info",
                  "compactMetadata": {"trigger": trigger, "preTokens": 155_025}})
        self.parent = boundary
        self.tick(20)
        self._record("user", message={"role": "user", "content": "This session is being continued from a "
                     "previous conversation that ran out of context. The conversation is summarized below:\n"
                     + summary}, isCompactSummary=True, isVisibleInTranscriptOnly=True)
        return self

    def title(self, text: str) -> Transcript:
        self.raw({"type": "summary", "summary": text, "leafUuid": self.parent})
        return self

    def last_prompt(self, text: str) -> Transcript:
        self.raw({"type": "last-prompt", "lastPrompt": text, "sessionId": self.session_id})
        return self

    def jsonl(self) -> str:
        return "".join(json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n" for r in self.records)
