"""`memcli mcp`: the Model Context Protocol on stdio (SPEC 10), on the official `mcp` SDK.

Tools: `recall(query, agent?, limit?)`, `remember(summary, type, subtype, scope, scope_id?,
tags?, details?, priority?)`, `show(id)`, `forget(id, reason?)`. Each call opens the store
afresh (settings edited meanwhile apply). Bad arguments and every memcli error are tool
errors with memcli's message: the server goes on serving. One connection (one server
process on stdio) is one session of the use rule: a memory that `recall` or `show` returns
counts once for the whole connection.
"""

from __future__ import annotations

import functools
import secrets
from typing import Any

from memcli.errors import MemcliError
from memcli.store.store import Store

INSTRUCTIONS = ("memcli keeps this project's long-term memories. Call `recall` with what you are "
                "about to work on before starting; `remember` what you learnt that will matter "
                "later (a procedure, a fact, a decision); `forget` a memory that turned out wrong.")


class Session:
    """The store and the use-rule session of one connection."""

    def __init__(self, store: Store, wait: float) -> None:
        self.root = store.root
        self.wait = wait
        self.id = f"mcp-{secrets.token_hex(8)}"
        self.counted: set[str] = set()

    def store(self) -> Store:
        return Store(self.root)

    def use(self, ids: list[str]) -> None:
        from memcli.recall import uses
        from memcli.store.model import now

        fresh = [i for i in ids if i not in self.counted]
        self.counted.update(fresh)
        if fresh:
            uses.record(self.root, fresh, self.id, now())


def build(store: Store, wait: float = 10.0) -> Any:
    """The server with its four tools, bound to `store`."""
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError

    session = Session(store, wait)
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
        """Find the memories that match what you are working on, best first: your own
        (agent), your team's and global ones. Give a few words about the task or question."""
        from memcli.recall import search

        st = session.store()
        results = search.recall(st, query, agent or st.settings.recall.agent,
                                limit if limit is not None else st.settings.recall.limit)
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
        from memcli.store.model import now

        if scope != "global" and not scope_id:
            raise MemcliError(f"scope_id is required for scope {scope!r}")
        author = f"agent:{scope_id}" if scope == "agent" else "agent:mcp"
        new = memories.NewMemory(type, subtype, scope, scope_id or "global", list(tags or []),
                                 priority or "normal", author, summary, details)
        st = session.store()
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


def serve(store: Store, wait: float = 10.0) -> None:
    """Serve on stdio until the client closes the connection."""
    build(store, wait).run("stdio")
