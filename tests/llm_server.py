"""A scriptable stand-in for the Anthropic Messages API, for tests without network.

The real ``anthropic`` client is pointed at it through ``base_url``. Each
``POST /v1/messages`` pops the next scripted ``Reply`` (status, JSON or raw body,
optional delay) and the request body is recorded, so tests can check what left the
"machine" and how many requests were made.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["FakeAnthropic", "Reply", "error_body", "fake_anthropic", "message_body"]


def message_body(text: str, *, model: str = "claude-haiku-4-5") -> dict[str, Any]:
    """A successful Messages API response carrying ``text`` as its only content block."""
    return {
        "id": "msg_test_0001",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 100, "output_tokens": 50},
    }


def error_body(kind: str, message: str = "scripted error") -> dict[str, Any]:
    """An API error response body, e.g. ``error_body("rate_limit_error")``."""
    return {"type": "error", "error": {"type": kind, "message": message}}


@dataclass
class Reply:
    """One scripted answer: a JSON ``body`` (dict) or raw text, after ``delay`` seconds."""

    status: int = 200
    body: dict[str, Any] | str = field(default_factory=dict)
    delay: float = 0.0


@dataclass
class Request:
    """One request the server received."""

    path: str
    headers: dict[str, str]
    raw: str
    json: Any


class FakeAnthropic:
    """The server's script and its record of requests (shared with handler threads)."""

    def __init__(self) -> None:
        self.replies: deque[Reply] = deque()
        self.requests: list[Request] = []
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.url = ""

    @property
    def request_count(self) -> int:
        """How many requests reached the server."""
        with self.lock:
            return len(self.requests)

    def push(self, *replies: Reply) -> None:
        """Queue replies, answered in order."""
        with self.lock:
            self.replies.extend(replies)

    def push_text(self, *texts: str, delay: float = 0.0) -> None:
        """Queue successful answers carrying these texts."""
        self.push(*(Reply(200, message_body(t), delay) for t in texts))

    def push_json(self, *payloads: Any) -> None:
        """Queue successful answers whose text is the JSON encoding of each payload."""
        self.push_text(*(json.dumps(p) for p in payloads))

    def next_reply(self, request: Request) -> Reply:
        """Record ``request`` and pop its scripted reply (a 599 if the script ran out)."""
        with self.lock:
            self.requests.append(request)
            if self.replies:
                return self.replies.popleft()
        return Reply(599, error_body("api_error", "no scripted reply left"))

    def received_strings(self) -> list[str]:
        """Every string value inside every JSON request body, decoded (no escapes)."""
        found: list[str] = []
        for request in self.requests:
            found.extend(_strings(request.json))
        return found


def _strings(value: Any) -> Iterator[str]:
    """Yield every string (keys and values) nested in a decoded JSON value."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _handler_for(state: FakeAnthropic) -> type[BaseHTTPRequestHandler]:
    """A request handler class bound to ``state``."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, like the real API

        def do_POST(self) -> None:  # noqa: N802 - name fixed by http.server
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode()
            reply = state.next_reply(_request(self.path, dict(self.headers), raw))
            # Interruptible wait, so stopping the server never waits for a slow reply.
            if reply.delay and state.stopping.wait(reply.delay):
                return
            self._send(reply)

        def _send(self, reply: Reply) -> None:
            is_json = isinstance(reply.body, dict)
            data = (json.dumps(reply.body) if is_json else str(reply.body)).encode()
            self.send_response(reply.status)
            self.send_header("Content-Type", "application/json" if is_json else "text/plain")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("request-id", "req_test")
            self.end_headers()
            try:
                self.wfile.write(data)
            except OSError:
                pass  # the client gave up (timeout test): nothing to answer to

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            """Silence per-request logging on stderr."""

    return Handler


def _request(path: str, headers: dict[str, str], raw: str) -> Request:
    """Build a ``Request``, decoding its JSON body when it is JSON."""
    try:
        decoded: Any = json.loads(raw)
    except ValueError:
        decoded = None
    return Request(path=path, headers=headers, raw=raw, json=decoded)


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True  # a handler still sleeping must not block shutdown

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Connections the client dropped on purpose are not test failures."""


@contextmanager
def fake_anthropic() -> Iterator[FakeAnthropic]:
    """Run a ``FakeAnthropic`` on 127.0.0.1 (free port) for the ``with`` block."""
    state = FakeAnthropic()
    server = _QuietServer(("127.0.0.1", 0), _handler_for(state))
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    # A short poll interval: shutdown() waits for the loop to notice, 0.5 s by default.
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    try:
        yield state
    finally:
        state.stopping.set()
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
