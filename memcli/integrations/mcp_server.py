"""`memcli mcp`: the Model Context Protocol on stdio (SPEC 10), on the official `mcp` SDK.

Tools: `recall(query, agent?, limit?)`, `remember(summary, type, subtype, scope, scope_id?,
tags?, details?, priority?)`, `show(id)`, `forget(id, reason?)`. Each call opens the store
afresh (settings edited meanwhile apply). Bad arguments and every memcli error are tool
errors with memcli's message: the server goes on serving. One connection (one server
process on stdio) is one session of the use rule: a memory that `recall` or `show` returns
counts once for the whole connection.

**Start-up.** Importing the SDK takes a second on an idle machine and several on a busy one
(pydantic models), while Claude Code lists a server's tools in a session's first request
only if the server has answered within about 1.5 s of its own start. So the process answers
the discovery requests (`server/discover`, `initialize`, `tools/list`, `prompts/list`,
`resources/list`) at once with what this SDK answers to them (`mcp_replies.py`, captured from
the SDK by `python -m memcli.integrations.mcp_server --write-replies`; a test keeps it equal
to what the installed SDK says), while the SDK loads. Every message still goes to the SDK,
in order, once it is loaded; its replies to the requests already answered are dropped, all
others are passed on. With another SDK version than the one captured, nothing is answered
early.
"""

from __future__ import annotations

import functools
import json
import os
import secrets
import sys
import threading
from typing import Any, cast

from memcli.errors import MemcliError

INSTRUCTIONS = ("memcli keeps this project's long-term memories. Call `recall` with what you are "
                "about to work on before starting; `remember` what you learnt that will matter "
                "later (a procedure, a fact, a decision); `forget` a memory that turned out wrong.")
EARLY = ("server/discover", "initialize", "tools/list", "prompts/list", "resources/list")
VERSION_META = "io.modelcontextprotocol/protocolVersion"
LISTEN = "subscriptions/listen"
ACK = "notifications/subscriptions/acknowledged"
SUBSCRIPTION_META = "io.modelcontextprotocol/subscriptionId"
LIST_CHANGES = ("toolsListChanged", "promptsListChanged", "resourcesListChanged")


class Session:
    """The store and the use-rule session of one connection."""

    def __init__(self, root: Any, wait: float) -> None:
        self.root = root
        self.wait = wait
        self.id = f"mcp-{secrets.token_hex(8)}"
        self.counted: set[str] = set()

    def store(self) -> Any:
        from memcli.store.store import Store

        return Store(self.root)

    def use(self, ids: list[str]) -> None:
        from memcli.recall import uses

        fresh = [i for i in ids if i not in self.counted]
        self.counted.update(fresh)
        if fresh:
            uses.record(self.root, fresh, self.id, uses.now())


def build(root: Any, wait: float = 10.0) -> Any:
    """The server with its four tools, bound to the store at `root`."""
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError

    session = Session(root, wait)
    server = MCPServer("memcli", instructions=INSTRUCTIONS)

    def guarded(fn: Any) -> Any:
        @functools.wraps(fn)
        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                return fn(*args, **kwargs)
            except MemcliError as exc:
                raise ToolError(str(exc)) from None
            except (ValueError, TypeError, OSError) as exc:
                raise ToolError(f"{type(exc).__name__}: {exc}") from None
        return call

    @server.tool(name="recall")
    @guarded
    def recall(query: str, agent: str | None = None, limit: int | None = None) -> dict[str, Any]:
        """Find the memories that match what you are working on, best first. Give a few
        words about the task or question. agent: your agent id, to search only your own
        memories, your team's and global ones; without it, every agent's."""
        from memcli.recall import search

        st = session.store()
        results = search.recall(st, query, agent, limit if limit is not None else st.settings.recall.limit)
        session.use([r.id for r in results])
        return {"query": query, "results": [r.as_dict() for r in results]}

    @server.tool(name="remember")
    @guarded
    def remember(summary: str, type: str, subtype: str, scope: str, scope_id: str | None = None,
                 tags: list[str] | None = None, details: str | None = None,
                 priority: str | None = None) -> dict[str, Any]:
        """Write a memory and return its id. type: episodic, semantic, procedural or working;
        scope: agent (scope_id = your agent id), team (scope_id = the team) or global. A
        near-identical memory already there is updated instead, and its id returned."""
        from memcli.store import memories

        if scope != "global" and not scope_id:
            raise MemcliError(f"scope_id is required for scope {scope!r}")
        author = f"agent:{scope_id}" if scope == "agent" else "agent:mcp"
        new = memories.NewMemory(type, subtype, scope, scope_id or "global", list(tags or []),
                                 priority or "normal", author, summary, details)
        st = session.store()
        from memcli.recall.uses import now

        with st.writing(session.wait):
            result = memories.add_memory(st, new, now())
        return {"id": result.id, "action": result.action, "path": result.path,
                "similar_to": result.similar_to, "flagged": result.flag_reason}

    @server.tool(name="show")
    @guarded
    def show(id: str) -> dict[str, Any]:
        """The whole record of one memory (live or archived), by id."""
        from memcli.store import memories

        mem, folder, record = memories.show_memory(session.store(), id)
        if folder.scope != "archive":
            session.use([mem.id])
        return {"memory": record, "folder": folder.rel, "archived": folder.scope == "archive"}

    @server.tool(name="forget")
    @guarded
    def forget(id: str, reason: str | None = None) -> dict[str, Any]:
        """Archive a memory that is wrong or no longer useful (reason `forgotten`, or the one
        given). A person can bring it back with `memcli restore ID`."""
        from memcli.store import memories

        outcome = memories.forget_memory(session.store(), id, reason, session.wait)
        return {"id": id, "archived": True, "run_id": outcome.run_id,
                "reason": reason or "forgotten"}

    return server


# ---------------------------------------------------------------- the wire


class _Inbox:
    """The SDK's stdin: lines the front has read, in order ("" at the end)."""

    def __init__(self) -> None:
        import queue

        self.lines: queue.Queue[str] = queue.Queue()

    def readline(self, *_: Any) -> str:
        return self.lines.get()

    def __iter__(self) -> _Inbox:
        return self

    def __next__(self) -> str:
        line = self.readline()
        if not line:
            raise StopIteration
        return line


class _Wire:
    """The real stdout, written a whole line at a time, and the ids answered early."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.lock = threading.Lock()
        self.answered: set[str] = set()  # request ids (as JSON) replied to early
        self.acked: set[str] = set()  # subscription ids acknowledged early
        self.sdk_ready = False

    def send(self, line: bytes) -> None:
        with self.lock:
            view = memoryview(line + b"\n")
            while view:
                view = view[os.write(self.fd, view):]


class _Outbox:
    """The SDK's stdout: whole lines go to the wire, except replies already given early."""

    def __init__(self, wire: _Wire) -> None:
        self.wire = wire
        self.buffer = ""

    def write(self, text: str) -> int:
        self.buffer += text
        while "\n" in self.buffer:
            line, self.buffer = self.buffer.split("\n", 1)
            if line.strip() and not self._answered(line):
                self.wire.send(line.encode("utf-8", "surrogatepass"))
        return len(text)

    def flush(self) -> None:
        pass

    def _answered(self, line: str) -> bool:
        """Whether the front already sent this reply (or this acknowledgement)."""
        try:
            message = json.loads(line)
        except ValueError:
            return False
        if not isinstance(message, dict):
            return False
        if message.get("method") == ACK:
            meta = _dict(_dict(message.get("params")).get("_meta"))
            key, seen = json.dumps(meta.get(SUBSCRIPTION_META)), self.wire.acked
        elif "method" not in message and "id" in message:
            key, seen = json.dumps(message["id"]), self.wire.answered
        else:
            return False
        with self.wire.lock:
            if key in seen:
                seen.discard(key)
                return True
        return False


class _Front:
    """Reads the client's lines, answers discovery early while the SDK loads, and hands
    every line to the SDK."""

    def __init__(self, fd: int, wire: _Wire, inbox: _Inbox, replies: dict[str, Any] | None) -> None:
        self.fd = fd
        self.wire = wire
        self.inbox = inbox
        self.replies = replies
        self.session_version: str | None = None

    def run(self) -> None:
        with os.fdopen(self.fd, "rb", closefd=False) as stream:
            for raw in stream:
                if not self.wire.sdk_ready and self.replies is not None:
                    self._maybe_answer(raw)
                self.inbox.lines.put(raw.decode("utf-8", "replace"))
        self.inbox.lines.put("")

    def _maybe_answer(self, raw: bytes) -> None:
        try:
            message = json.loads(raw)
        except ValueError:
            return
        if not isinstance(message, dict) or "id" not in message:
            return
        if message.get("method") == LISTEN:
            self._maybe_ack(message)
            return
        if message.get("method") not in EARLY:
            return
        result = self.reply_for(message)
        if result is None:
            return
        key = json.dumps(message["id"])
        with self.wire.lock:
            if self.wire.sdk_ready:
                return
            self.wire.answered.add(key)
        self.wire.send(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}).encode())

    def _maybe_ack(self, message: dict[str, Any]) -> None:
        """Acknowledge a listen for list changes as the SDK does (it honours each of them);
        the stream itself is the SDK's. Anything else waits for the SDK."""
        params = _dict(message.get("params"))
        meta = _dict(params.get("_meta"))
        wanted = params.get("notifications")
        if meta.get(VERSION_META) not in (self.replies or {}).get("listen_versions", []) \
                or not isinstance(wanted, dict) or not set(wanted) <= set(LIST_CHANGES) \
                or not all(isinstance(v, bool) for v in wanted.values()):
            return
        honoured = {name: True for name in LIST_CHANGES if wanted.get(name)}
        key = json.dumps(message["id"])
        with self.wire.lock:
            if self.wire.sdk_ready:
                return
            self.wire.acked.add(key)
        self.wire.send(json.dumps({"jsonrpc": "2.0", "method": ACK, "params": {
            "_meta": {SUBSCRIPTION_META: message["id"]}, "notifications": honoured}}).encode())

    def reply_for(self, message: dict[str, Any]) -> Any:
        """What the SDK answers to this discovery request, or None when not known."""
        assert self.replies is not None
        params = _dict(message.get("params"))
        method = message["method"]
        if method == "initialize":
            requested = params.get("protocolVersion")
            known = f"initialize {requested}" in self.replies
            version = requested if known else self.replies["latest_handshake"]
            self.session_version = version
            return self.replies.get(f"initialize {version}")
        version = _dict(params.get("_meta")).get(VERSION_META, self.session_version)
        return self.replies.get(f"{method} {version}") if isinstance(version, str) else None


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def serve(root: Any, wait: float = 10.0) -> None:
    """Serve on stdio until the client closes the connection."""
    wire_in, wire_out = os.dup(0), os.dup(1)
    # Stray output of anything the tools call must never reach the wire: fd 1 goes to
    # stderr and fd 0 reads nothing while serving (as the SDK's own stdio transport does).
    with open(os.devnull, "rb") as null:
        os.dup2(null.fileno(), 0)
    os.dup2(2, 1)
    wire = _Wire(wire_out)
    inbox = _Inbox()
    front = _Front(wire_in, wire, inbox, _replies())
    threading.Thread(target=front.run, daemon=True).start()

    import anyio
    from mcp.server.stdio import stdio_server

    server = build(root, wait)

    async def run() -> None:
        async with stdio_server(stdin=anyio.wrap_file(cast(Any, inbox)),
                                stdout=anyio.wrap_file(cast(Any, _Outbox(wire)))) as streams:
            with wire.lock:
                wire.sdk_ready = True
            low = server._lowlevel_server
            await low.run(streams[0], streams[1], low.create_initialization_options())

    anyio.run(run)


def _replies() -> dict[str, Any] | None:
    """The captured replies when they are this SDK's; else None (nothing answered early)."""
    try:
        from importlib import metadata

        from memcli.integrations import mcp_replies

        if metadata.version("mcp") != mcp_replies.SDK_VERSION:
            return None
        return dict(mcp_replies.REPLIES)
    except Exception:  # noqa: BLE001 - no early answers; the SDK answers everything
        return None


# ---------------------------------------------------------------- capturing the replies


def probes() -> list[list[dict[str, Any]]]:
    """Sessions of discovery requests, one per protocol version the SDK speaks."""
    from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS

    client = {"name": "memcli-capture", "version": "1"}
    sessions: list[list[dict[str, Any]]] = []
    for version in HANDSHAKE_PROTOCOL_VERSIONS:
        sessions.append([
            {"jsonrpc": "2.0", "id": 1, "method": "initialize",
             "params": {"protocolVersion": version, "capabilities": {}, "clientInfo": client}},
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            *({"jsonrpc": "2.0", "id": n, "method": m} for n, m in enumerate(EARLY[2:], 2))])
    for version in MODERN_PROTOCOL_VERSIONS:
        meta = {VERSION_META: version, "io.modelcontextprotocol/clientInfo": client,
                "io.modelcontextprotocol/clientCapabilities": {}}
        sessions.append([{"jsonrpc": "2.0", "id": n, "method": m, "params": {"_meta": meta}}
                         for n, m in enumerate([EARLY[0], *EARLY[2:]], 1)])
    return sessions


def ask_sdk(root: Any, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every message the SDK sends back for one session of requests, run in process: it
    ends once each request has its reply (a listen, its acknowledgement)."""
    import anyio
    from mcp.server.stdio import stdio_server

    inbox = _Inbox()
    for message in messages:
        inbox.lines.put(json.dumps(message) + "\n")
    listens = {json.dumps(m["id"]) for m in messages if m.get("method") == LISTEN}
    wanted = {json.dumps(m["id"]) for m in messages if "id" in m} - listens
    out: list[dict[str, Any]] = []

    def done() -> bool:
        replied = {json.dumps(m["id"]) for m in out if "id" in m and "method" not in m}
        acked = {json.dumps(((m.get("params") or {}).get("_meta") or {}).get(SUBSCRIPTION_META))
                 for m in out if m.get("method") == ACK}
        return replied >= wanted and acked >= listens

    class Capture:
        def write(self, text: str) -> int:
            out.extend(json.loads(line) for line in text.splitlines() if line.strip())
            if done():
                inbox.lines.put("")
            return len(text)

        def flush(self) -> None:
            pass

    server = build(root)

    async def run() -> None:
        async with stdio_server(stdin=anyio.wrap_file(cast(Any, inbox)),
                                stdout=anyio.wrap_file(cast(Any, Capture()))) as streams:
            low = server._lowlevel_server
            await low.run(streams[0], streams[1], low.create_initialization_options())

    anyio.run(run)
    return out


def capture(root: Any) -> dict[str, Any]:
    """What this SDK answers to every discovery request, by "METHOD VERSION"."""
    from importlib import metadata

    from mcp_types.version import LATEST_HANDSHAKE_VERSION, MODERN_PROTOCOL_VERSIONS

    replies: dict[str, Any] = {}
    for session in probes():
        got = {json.dumps(m["id"]): m for m in ask_sdk(root, session) if "id" in m and "method" not in m}
        version = None
        for message in session:
            if "id" not in message:
                continue
            params = _dict(message.get("params"))
            version = params.get("protocolVersion") or _dict(params.get("_meta")).get(VERSION_META) or version
            reply = got[json.dumps(message["id"])]
            if "result" in reply:  # an error is never answered early: the SDK says it
                replies[f"{message['method']} {version}"] = reply["result"]
    return {"sdk_version": metadata.version("mcp"), "latest_handshake": LATEST_HANDSHAKE_VERSION,
            "listen_versions": list(MODERN_PROTOCOL_VERSIONS), "replies": replies}


def write_replies(root: Any, path: str) -> None:
    data = capture(root)
    replies = {**data["replies"], "latest_handshake": data["latest_handshake"],
               "listen_versions": data["listen_versions"]}
    body = json.dumps(same_as_earlier(replies), indent=1, sort_keys=True, ensure_ascii=True)
    if "\'\'\'" in body:
        raise ValueError("a reply holds three quotes in a row; cannot write it as a raw string")
    with open(path, "w", encoding="utf-8") as handle:
        handle.write("# ruff: noqa: E501\n"
                     '"""What the `mcp` SDK answers to the discovery requests `memcli mcp` answers early\n'
                     "(see memcli.integrations.mcp_server). Generated; do not edit: run\n"
                     "`python -m memcli.integrations.mcp_server --write-replies` after changing a tool or\n"
                     'the SDK."""\n\n'
                     "import json\n\n"
                     f"SDK_VERSION = {data['sdk_version']!r}\n\n"
                     f"_RAW = json.loads(r\'\'\'{body}\'\'\')\n"
                     "# most protocol versions get the same reply: each is written once, the others\n"
                     "# name it ({\"$same_as\": key}); the replies are only read, so sharing is safe\n"
                     "REPLIES = {key: _RAW[value[\"$same_as\"]] if isinstance(value, dict) and "
                     "\"$same_as\" in value else value\n"
                     "           for key, value in _RAW.items()}\n")


def same_as_earlier(replies: dict[str, Any]) -> dict[str, Any]:
    """Each reply equal to one under an earlier key (in sorted order) replaced by
    `{"$same_as": that key}`: the captured replies of most protocol versions are identical."""
    out: dict[str, Any] = {}
    seen: dict[str, str] = {}  # canonical JSON -> first key
    for key in sorted(replies):
        canon = json.dumps(replies[key], sort_keys=True)
        if isinstance(replies[key], dict) and canon in seen:
            out[key] = {"$same_as": seen[canon]}
        else:
            seen.setdefault(canon, key)
            out[key] = replies[key]
    return out


if __name__ == "__main__":  # python -m memcli.integrations.mcp_server --write-replies
    import tempfile
    from pathlib import Path

    if sys.argv[1:] != ["--write-replies"]:
        sys.exit("usage: python -m memcli.integrations.mcp_server --write-replies")
    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp)
        (store / "memcli.toml").write_text("")
        write_replies(store, str(Path(__file__).with_name("mcp_replies.py")))
