"""The point of recall: weeks of an agent's life. What it recalls stays live, what it never
recalls goes stale, and a procedure recalled in five sessions is promoted to its team."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from memcli.cli.fast import FastOpts
from memcli.cli.recallmain import run_recall
from memcli.consolidate import engine
from memcli.store import memories
from memcli.store.model import format_ts, parse_ts
from memcli.store.store import Store
from tests.conftest import assert_invariants

START = parse_ts("2026-09-01T09:00:00Z")[0]


@pytest.mark.slow
def test_weeks_of_an_agents_life(store: Path, monkeypatch: pytest.MonkeyPatch,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    def at(moment: dt.datetime) -> None:
        monkeypatch.setenv("MEMCLI_NOW", format_ts(moment))

    at(START)
    st = Store(store)

    def remember(kind: str, subtype: str, summary: str) -> str:
        new = memories.NewMemory(kind, subtype, "agent", "coder", [subtype], "normal", "agent:coder", summary)
        with st.writing(5):
            return memories.add_memory(st, new, START).id

    procedure = remember("procedural", "deployment", "To deploy the API run make release then watch the canary")
    fact = remember("semantic", "fact", "The payments service talks to Stripe through the billing gateway")
    forgotten = remember("semantic", "fact", "The office plant is watered on Mondays")
    promoted_in: int | None = None
    session = 0
    for week in range(1, 16):
        monday = START + dt.timedelta(weeks=week)
        for day, query in enumerate(["how is the payments service wired", "which gateway handles billing"]):
            at(monday + dt.timedelta(days=day))
            session += 1
            assert run_recall(FastOpts(str(store)), query, "coder", 2, f"s{session}") == 0
            if week <= 5 and day == 0:  # five sessions in which the agent looks up how to deploy
                run_recall(FastOpts(str(store)), "how do I deploy the api", "coder", 1, f"s{session}")
        capsys.readouterr()
        at(monday + dt.timedelta(days=6))
        outcome = engine.consolidate(Store(store), trigger="weekly")
        promotes = [a for a in outcome.actions if a["type"] == "promote"]
        if promotes and promoted_in is None:
            assert [a["memory_id"] for a in promotes] == [procedure]
            promoted_in = week
        assert not [a for a in outcome.actions if a["type"] == "archive" and a["memory_id"] == fact]
    assert promoted_in == 5  # the fifth session's use is what earns it
    live = {e["id"] for e in memories.list_memories(Store(store), memories.ListFilter())[0]}
    archived = {e["id"] for e in memories.list_memories(Store(store), memories.ListFilter(archived=True))[0]}
    assert fact in live and forgotten in archived
    copies = [e for e in memories.list_memories(Store(store), memories.ListFilter(archived=True))[0]
              + memories.list_memories(Store(store), memories.ListFilter(scope="team"))[0]
              if e.get("promoted_from") == procedure]
    assert [e.get("from") or e["folder"] for e in copies] == ["team/backend"]  # the copy went to coder's team
    assert_invariants(store)
