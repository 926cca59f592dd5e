"""`memcli mcp` through the SDK's own stdio client: the four tools, tool errors that leave
the server serving, and one connection as one session of the use rule."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from tests.conftest import NOW, add, assert_invariants, load
from tests.recall.helpers import fold


def _params(store: Path) -> StdioServerParameters:
    env = {**os.environ, "MEMCLI_NOW": NOW}
    return StdioServerParameters(command=sys.executable, args=["-m", "memcli", "--store", str(store), "mcp"],
                                 env=env, cwd=str(store))


def _payload(result: Any) -> Any:
    if result.structured_content is not None:
        data = result.structured_content
        return data.get("result", data) if isinstance(data, dict) and set(data) == {"result"} else data
    return json.loads(result.content[0].text)


async def _session(store: Path, calls: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    out: list[Any] = []
    async with stdio_client(_params(store)) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        tools = await session.list_tools()
        out.append(sorted(t.name for t in tools.tools))
        for name, args in calls:
            out.append(await session.call_tool(name, args))
    return out


def run(store: Path, calls: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    return anyio.run(_session, store, calls)


def test_tools_and_a_session(store: Path) -> None:
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
    ])
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


def test_forget_and_bad_arguments(store: Path) -> None:
    mem = add(store, summary="Old staging host is stage-1.internal", tags=["infra"])
    _names, wrong_type, forgot, gone, twice = run(store, [
        ("recall", {"query": 42}),
        ("forget", {"id": mem["id"], "reason": "host retired"}),
        ("recall", {"query": "staging host"}),
        ("forget", {"id": mem["id"]}),
    ])
    assert wrong_type.is_error
    assert _payload(forgot)["archived"] is True
    archived = load(store / "archive" / f"{mem['id']}.json")
    assert archived["archive_reason"] == "host retired"
    assert _payload(gone)["results"] == []
    assert twice.is_error and "archived already" in twice.content[0].text


def test_remember_bad_type_is_a_tool_error(store: Path) -> None:
    _names, bad, good = run(store, [
        ("remember", {"summary": "x", "type": "gossip", "subtype": "s", "scope": "agent", "scope_id": "coder"}),
        ("remember", {"summary": "Tests need REDIS_URL set", "type": "semantic", "subtype": "fact",
                      "scope": "global"}),
    ])
    assert bad.is_error and "unknown type 'gossip'" in bad.content[0].text
    assert not good.is_error and _payload(good)["action"] == "created"


@pytest.mark.parametrize("fmt", ["json"])
def test_no_store_fails_before_serving(tmp_path: Path, fmt: str) -> None:
    import subprocess

    proc = subprocess.run([sys.executable, "-m", "memcli", "--store", str(tmp_path), "mcp"],
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert proc.returncode == 1 and "no memory store" in proc.stderr
