"""A full run hands the heap a large folder's planning freed back to the system; the plan is
the same whether it does or not."""

from __future__ import annotations

from pathlib import Path

import pytest

from memcli.consolidate import engine, planner
from memcli.store.store import Store
from tests.conftest import add, days_ago

DUP = "Restart the payments worker after every config change to the staging cluster"


def plan_of(store: Path) -> list[tuple[str, str]]:
    outcome = engine.consolidate(Store.open(str(store)), dry_run=True)
    return [(str(a.get("type")), str(a.get("memory_id") or a.get("source_ids"))) for a in outcome.actions]


@pytest.mark.parametrize("trim_from", [1, 3, 4, 10_000])
def test_the_heap_is_given_back_after_folders_of_trim_from_memories_and_the_plan_is_the_same(
        store: Path, monkeypatch: pytest.MonkeyPatch, trim_from: int) -> None:
    for n in range(3):
        add(store, summary=f"{DUP} number {n % 2}", scope_id="coder")
    add(store, summary="An old note nobody used", created_at=days_ago(400), last_accessed=days_ago(400),
        access_count=0, scope_id="coder")
    add(store, summary="Another agent's note", scope_id="writer")
    before = plan_of(store)
    calls: list[int] = []
    monkeypatch.setattr(planner, "TRIM_FROM", trim_from)
    monkeypatch.setattr(planner, "give_back_freed", lambda: calls.append(1))
    assert plan_of(store) == before
    # folders of 4 memories (agent/coder) and 1 (agent/writer)
    assert len(calls) == {1: 2, 3: 1, 4: 1, 10_000: 0}[trim_from]


def test_giving_back_the_heap_runs_where_there_is_glibc_and_is_harmless_where_not(
        monkeypatch: pytest.MonkeyPatch) -> None:
    planner.give_back_freed()  # glibc here: malloc_trim(0); elsewhere nothing
    monkeypatch.setattr(planner, "_trim", False)
    planner.give_back_freed()
