"""A loopback stand-in for the Anthropic Messages API that Claude Code can talk to.

`claude -p` is pointed at it with `ANTHROPIC_BASE_URL`. Every `POST /v1/messages` is
recorded (path and JSON body). Requests of the agent loop (those offering tools) are answered
from a script: each scripted reply is a list of content blocks (`text(...)`,
`tool_use(...)`), streamed as server-sent events the way the real API streams them; with the
script used up, or for Claude Code's side requests (titles, summaries: no tools), the reply
is a short text. `count_tokens` gets a small count.
"""

from __future__ import annotations

import itertools
import json
import threading
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Block = dict[str, Any]
_ids = itertools.count(1)


def text(value: str) -> Block:
    return {"type": "text", "text": value}


def tool_use(name: str, tool_input: dict[str, Any]) -> Block:
    return {"type": "tool_use", "id": f"toolu_{next(_ids):04d}", "name": name, "input": tool_input}


def bash(command: str) -> Block:
    return tool_use("Bash", {"command": command, "description": "run memcli"})


class MessagesMock:
    """The script and the record of requests, shared with the handler threads."""

    def __init__(self) -> None:
        self.script: deque[list[Block]] = deque()
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.url = ""

    def reply(self, *turns: list[Block]) -> None:
        """Queue replies for the next agent-loop requests, in order."""
        with self.lock:
            self.script.extend(turns)

    def reset(self) -> None:
        with self.lock:
            self.script.clear()
            self.requests.clear()

    def loop_requests(self) -> list[dict[str, Any]]:
        """The bodies of the agent-loop requests (those offering tools), in order."""
        with self.lock:
            return [r["body"] for r in self.requests if r["body"].get("tools")]

    def next_reply(self, body: dict[str, Any]) -> list[Block]:
        with self.lock:
            if body.get("tools") and self.script:
                return self.script.popleft()
        return [text("ok")]


def tool_results(body: dict[str, Any]) -> dict[str, str]:
    """tool_use id -> the text of its tool_result, from one request's messages."""
    found: dict[str, str] = {}
    for message in body.get("messages", []):
        content = message.get("content")
        for block in content if isinstance(content, list) else []:
            if block.get("type") != "tool_result":
                continue
            value = block.get("content")
            if isinstance(value, list):
                value = "".join(part.get("text", "") for part in value if isinstance(part, dict))
            found[str(block.get("tool_use_id"))] = str(value)
    return found


def user_text(body: dict[str, Any]) -> str:
    """Everything the user side of one request says (prompt, expanded commands, reminders)."""
    parts: list[str] = []
    for message in body.get("messages", []):
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            parts.append(content)
            continue
        for block in content if isinstance(content, list) else []:
            if block.get("type") == "text":
                parts.append(str(block.get("text", "")))
    return "\n".join(parts)


def _events(blocks: list[Block]) -> Iterator[dict[str, Any]]:
    yield {"type": "message_start", "message": {
        "id": "msg_mock", "type": "message", "role": "assistant", "model": "claude-mock",
        "content": [], "stop_reason": None, "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 1}}}
    stop = "end_turn"
    for index, block in enumerate(blocks):
        if block["type"] == "text":
            yield {"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}}
            yield {"type": "content_block_delta", "index": index,
                   "delta": {"type": "text_delta", "text": block["text"]}}
        else:
            stop = "tool_use"
            yield {"type": "content_block_start", "index": index, "content_block": {
                "type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}}
            yield {"type": "content_block_delta", "index": index,
                   "delta": {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}}
        yield {"type": "content_block_stop", "index": index}
    yield {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
           "usage": {"output_tokens": 5}}
    yield {"type": "message_stop"}


def _handler(mock: MessagesMock) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:  # quiet
            pass

        def _send(self, status: int, kind: str, data: bytes) -> None:
            self.send_response(status)
            self.send_header("content-type", kind)
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # noqa: N802
            with mock.lock:
                mock.requests.append({"method": "GET", "path": self.path, "body": {}})
            self._send(404, "application/json", b'{"type":"error","error":{"type":"not_found_error"}}')

        def do_POST(self) -> None:  # noqa: N802
            size = int(self.headers.get("content-length") or 0)
            try:
                body = json.loads(self.rfile.read(size) or b"{}")
            except ValueError:
                body = {}
            with mock.lock:
                mock.requests.append({"method": "POST", "path": self.path, "body": body})
            if "count_tokens" in self.path:
                self._send(200, "application/json", b'{"input_tokens": 10}')
                return
            blocks = mock.next_reply(body)
            if body.get("stream"):
                data = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in _events(blocks))
                self._send(200, "text/event-stream", data.encode())
                return
            message = {"id": "msg_mock", "type": "message", "role": "assistant", "model": "claude-mock",
                       "content": blocks, "stop_reason": "end_turn", "stop_sequence": None,
                       "usage": {"input_tokens": 10, "output_tokens": 5}}
            self._send(200, "application/json", json.dumps(message).encode())

    return Handler


@contextmanager
def messages_mock() -> Iterator[MessagesMock]:
    """Serve the mock on 127.0.0.1 (a free port) for the duration of the block."""
    mock = MessagesMock()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(mock))
    server.daemon_threads = True
    mock.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield mock
    finally:
        server.shutdown()
        server.server_close()
