"""`memcli mcp` through the SDK's own stdio client: the four tools, tool errors that leave
the server serving, and one connection as one session of the use rule."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import pytest

from tests.conftest import NOW, add, assert_invariants, load
from tests.integrations import mcp_forked
from tests.recall.helpers import fold

if TYPE_CHECKING:
    from mcp.client.stdio import StdioServerParameters


@pytest.fixture(scope="module")
def launch(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[str]]:
    """The command that starts `memcli mcp` forked from a zygote (tests/integrations/mcp_forked.py):
    for the tests of the tools, which need a server process, not an interpreter's start-up."""
    with mcp_forked.zygote(tmp_path_factory.mktemp("mcp")) as command:
        yield command


def _params(store: Path, launch: list[str] | None = None) -> StdioServerParameters:
    from mcp.client.stdio import StdioServerParameters

    env = {**os.environ, "MEMCLI_NOW": NOW}
    command = launch or [sys.executable, "-m", "memcli"]
    return StdioServerParameters(command=command[0], args=[*command[1:], "--store", str(store), "mcp"],
                                 env=env, cwd=str(store))


def _payload(result: Any) -> Any:
    if result.structured_content is not None:
        data = result.structured_content
        return data.get("result", data) if isinstance(data, dict) and set(data) == {"result"} else data
    return json.loads(result.content[0].text)


async def _session(store: Path, calls: list[tuple[str, dict[str, Any]]], launch: list[str] | None) -> list[Any]:
    # the SDK's client is imported here, not with the module: importing `mcp` takes over a
    # second of CPU, which every worker would pay at collection for the few tests below
    from mcp.client.session import ClientSession
    from mcp.client.stdio import stdio_client

    out: list[Any] = []
    async with stdio_client(_params(store, launch)) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        tools = await session.list_tools()
        out.append(sorted(t.name for t in tools.tools))
        for name, args in calls:
            out.append(await session.call_tool(name, args))
    return out


def run(store: Path, calls: list[tuple[str, dict[str, Any]]], launch: list[str] | None = None) -> list[Any]:
    """The calls in one session of `memcli mcp`: a real interpreter's, or forked with `launch`."""
    return anyio.run(_session, store, calls, launch)


def test_tools_and_a_session(store: Path, launch: list[str]) -> None:
    deploy = add(store, summary="Deploy to staging with make deploy-staging", tags=["deploy"], access_count=1)
    add(store, summary="The cafeteria closes at three", tags=["food"])
    names, found, again, shown, bad, empty, remembered = run(store, [
        ("recall", {"query": "how do I deploy to staging", "agent": "coder"}),
        ("recall", {"query": "deploy staging", "agent": "coder"}),
        ("show", {"id": deploy["id"]}),
        ("show", {"id": "mem_nope"}),
        ("recall", {"query": "the of and"}),
        ("remember", {"summary": "Use pnpm, not npm, in the web app", "type": "procedural",
                      "subtype": "tooling", "scope": "agent", "scope_id": "coder", "tags": ["web"]}),
    ], launch)
    assert names == ["forget", "recall", "remember", "show"]
    results = _payload(found)["results"]
    assert results[0]["id"] == deploy["id"] and results[0]["path"].startswith("agent/coder/")
    assert set(results[0]) == {"id", "score", "scope", "scope_id", "type", "subtype", "summary", "path"}
    assert _payload(again)["results"][0]["id"] == deploy["id"]
    assert _payload(shown)["memory"]["id"] == deploy["id"]
    assert bad.is_error and "no memory mem_nope" in bad.content[0].text
    assert empty.is_error and "nothing to search for" in empty.content[0].text
    new_id = _payload(remembered)["id"]
    assert (store / "agent" / "coder" / f"{new_id}.json").exists()
    # recall twice and show: one connection is one session, so one use
    fold(store)
    assert load(store / "agent" / "coder" / f"{deploy['id']}.json")["access_count"] == 2
    assert_invariants(store)


def test_forget_and_bad_arguments(store: Path, launch: list[str]) -> None:
    mem = add(store, summary="Old staging host is stage-1.internal", tags=["infra"])
    _names, wrong_type, forgot, gone, twice = run(store, [
        ("recall", {"query": 42}),
        ("forget", {"id": mem["id"], "reason": "host retired"}),
        ("recall", {"query": "staging host"}),
        ("forget", {"id": mem["id"]}),
    ], launch)
    assert wrong_type.is_error
    assert _payload(forgot)["archived"] is True
    archived = load(store / "archive" / f"{mem['id']}.json")
    assert archived["archive_reason"] == "host retired"
    assert _payload(gone)["results"] == []
    assert twice.is_error and "archived already" in twice.content[0].text


def test_remember_bad_type_is_a_tool_error(store: Path, launch: list[str]) -> None:
    _names, bad, good = run(store, [
        ("remember", {"summary": "x", "type": "gossip", "subtype": "s", "scope": "agent", "scope_id": "coder"}),
        ("remember", {"summary": "Tests need REDIS_URL set", "type": "semantic", "subtype": "fact",
                      "scope": "global"}),
    ], launch)
    assert bad.is_error and "unknown type 'gossip'" in bad.content[0].text
    assert not good.is_error and _payload(good)["action"] == "created"


@pytest.mark.parametrize("fmt", ["json"])
def test_no_store_fails_before_serving(tmp_path: Path, fmt: str) -> None:
    import subprocess

    proc = subprocess.run([sys.executable, "-m", "memcli", "--store", str(tmp_path), "mcp"],
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert proc.returncode == 1 and "no memory store" in proc.stderr


def test_recall_without_agent_searches_every_folder(store: Path, launch: list[str]) -> None:
    """SPEC 10: `recall(query, agent?)` gives results "as above": without an agent, every
    live folder (as `memcli recall` without --agent); with one, that agent's view."""
    coder = add(store, summary="Deploy to staging with make ship-staging", scope_id="coder")
    writer = add(store, summary="Staging deploys wait for the editor's sign-off", scope_id="writer")
    _names, everyone, own = run(store, [("recall", {"query": "staging deploy"}),
                                        ("recall", {"query": "staging deploy", "agent": "writer"})], launch)
    assert {r["id"] for r in _payload(everyone)["results"]} == {coder["id"], writer["id"]}
    assert [r["id"] for r in _payload(own)["results"]] == [writer["id"]]


# ---------------------------------------------------------------- answering discovery early

# What Claude Code 2.1.330 sends a stdio server first (recorded, client details shortened).
_META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
         "io.modelcontextprotocol/clientInfo": {"name": "claude-code", "version": "2.1.330"},
         "io.modelcontextprotocol/clientCapabilities": {"roots": {"listChanged": True}}}
CLAUDE_CODE = [
    {"jsonrpc": "2.0", "id": "server-discover-probe-1", "method": "server/discover", "params": {"_meta": _META}},
    {"jsonrpc": "2.0", "id": "listen:0", "method": "subscriptions/listen",
     "params": {"_meta": _META, "notifications": {"toolsListChanged": True, "promptsListChanged": True,
                                                  "resourcesListChanged": True}}},
    {"method": "server/discover", "jsonrpc": "2.0", "id": 0, "params": {"_meta": _META}},
    {"method": "prompts/list", "jsonrpc": "2.0", "id": 1, "params": {"_meta": _META}},
    {"method": "resources/list", "jsonrpc": "2.0", "id": 2, "params": {"_meta": _META}},
    {"method": "tools/list", "jsonrpc": "2.0", "id": 3, "params": {"_meta": _META}},
]
OLDER_CLIENT = [
    {"jsonrpc": "2.0", "id": 7, "method": "initialize",
     "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "x", "version": "1"}}},
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "id": 8, "method": "tools/list"},
]
UNKNOWN_VERSION = [
    {"jsonrpc": "2.0", "id": "a", "method": "initialize",
     "params": {"protocolVersion": "1999-01-01", "capabilities": {}, "clientInfo": {"name": "x", "version": "1"}}},
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "id": "b", "method": "tools/list"},
]


def test_captured_replies_are_this_sdks(store: Path) -> None:
    """mcp_replies.py is what the installed SDK answers, tools and instructions included;
    when this fails, run `python -m memcli.integrations.mcp_server --write-replies`."""
    from importlib import metadata

    from memcli.integrations import mcp_replies, mcp_server

    data = mcp_server.capture(store)
    assert metadata.version("mcp") == mcp_replies.SDK_VERSION == data["sdk_version"]
    assert {**data["replies"], "latest_handshake": data["latest_handshake"],
            "listen_versions": data["listen_versions"]} == mcp_replies.REPLIES


def _early(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What the front sends before the SDK is there, for these client messages."""
    from memcli.integrations import mcp_server

    sent: list[bytes] = []
    wire = mcp_server._Wire(-1)
    wire.send = sent.append  # type: ignore[method-assign]
    front = mcp_server._Front(-1, wire, mcp_server._Inbox(), mcp_server._replies())
    for message in messages:
        front._maybe_answer(json.dumps(message).encode())
    return [json.loads(line) for line in sent]


@pytest.mark.parametrize("messages", [CLAUDE_CODE, OLDER_CLIENT, UNKNOWN_VERSION])
def test_early_answers_are_what_the_sdk_answers(store: Path, messages: list[dict[str, Any]]) -> None:
    from memcli.integrations import mcp_server

    early = _early(messages)
    listens = {m["id"] for m in messages if m.get("method") == "subscriptions/listen"}
    # (the SDK ends a listen stream with an error when the input closes: not discovery)
    sdk = [m for m in mcp_server.ask_sdk(store, messages) if "method" in m or m.get("id") not in listens]
    key = lambda m: json.dumps(m, sort_keys=True)  # noqa: E731
    assert sorted(map(key, early)) == sorted(map(key, sdk))
    assert len(early) == len([m for m in messages if "id" in m])  # every request answered early


def test_a_listen_the_front_cannot_match_waits_for_the_sdk() -> None:
    odd = {"jsonrpc": "2.0", "id": "l", "method": "subscriptions/listen",
           "params": {"_meta": _META, "notifications": {"resourceSubscriptions": ["file:///x"]}}}
    other = {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "recall"}}
    assert _early([odd, other]) == []


def test_the_process_answers_each_request_once(store: Path) -> None:
    """Through `memcli mcp` itself: the early replies, then the SDK's, never both."""
    import subprocess

    add(store, summary="Deploy to staging with make ship-staging", scope_id="coder")
    call = {"jsonrpc": "2.0", "id": 9, "method": "tools/call",
            "params": {"_meta": _META, "name": "recall", "arguments": {"query": "staging"}}}
    proc = subprocess.Popen([sys.executable, "-m", "memcli", "--store", str(store), "mcp"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, "MEMCLI_NOW": NOW})
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(b"".join(json.dumps(m).encode() + b"\n" for m in [*CLAUDE_CODE, call]))
    proc.stdin.flush()
    got: list[dict[str, Any]] = []
    while not any(m.get("id") == 9 for m in got):
        line = proc.stdout.readline()
        assert line, proc.stderr.read() if proc.stderr else ""
        got.append(json.loads(line))
    proc.stdin.close()
    proc.wait(timeout=60)
    ids = [m["id"] for m in got if "id" in m]
    assert sorted(map(str, ids)) == sorted(map(str, ["server-discover-probe-1", 0, 1, 2, 3, 9]))
    acks = [m for m in got if m.get("method") == "notifications/subscriptions/acknowledged"]
    assert len(acks) == 1 and acks[0]["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == "listen:0"
    result = next(m for m in got if m.get("id") == 9)["result"]
    assert "ship-staging" in json.dumps(result)
