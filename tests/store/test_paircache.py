"""The similar-pairs cache (`paircache`): a run with it plans what a run without it plans, a
damaged or foreign cache is none, and what a real run leaves covers what it rewrote."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from memcli.consolidate import engine, merging, pairsearch, similar
from memcli.store import lastrun, paircache
from memcli.store.store import Store
from tests.conftest import add, days_ago
from tests.store.test_index import cached

PLANTED = ["Rotate the staging database credentials before the quarterly security audit",
           "Page the secondary on call engineer when the primary does not answer quickly",
           "Run the schema migration on a replica first and compare the row counts after"]


def big_block(store: Path, n: int = 60) -> None:
    """More memories in one block than are compared all-pairs, a few restating each other."""
    for _ in range(n):
        add(store, tags=["ops"])
    for text in PLANTED:
        add(store, summary=text, tags=["ops"], created_at=days_ago(40))
        add(store, summary=text + " today", tags=["ops"], created_at=days_ago(30))


def test_a_run_with_the_pair_cache_plans_what_a_run_without_it_plans(store: Path) -> None:
    big_block(store)
    engine.consolidate(Store(store))  # merges the restatements, leaves _pairs.json behind
    assert (cached(store, "agent/coder") / paircache.PAIRS_NAME).exists()
    for text in PLANTED[:2]:
        add(store, summary=text + " again", tags=["ops"], created_at=days_ago(8))
    with_cache = engine.consolidate(Store(store), dry_run=True)
    (cached(store, "agent/coder") / paircache.PAIRS_NAME).unlink()
    without = engine.consolidate(Store(store), dry_run=True)
    assert with_cache.actions == without.actions and any(a["type"] == "merge" for a in with_cache.actions)


@pytest.mark.parametrize("damage", [b"{nope", b'{"params": "other", "covered": [], "pairs": []}',
                                    b'{"params": null}', b"[]"])
def test_a_damaged_or_foreign_pair_cache_is_no_cache(store: Path, damage: bytes) -> None:
    big_block(store)
    engine.consolidate(Store(store))
    path = cached(store, "agent/coder") / paircache.PAIRS_NAME
    params = orjson.loads(path.read_bytes())["params"]
    assert paircache.load_pairs(path.parent, params) is not None
    path.write_bytes(damage)
    assert paircache.load_pairs(path.parent, params) is None
    add(store, summary=PLANTED[0] + " again", tags=["ops"], created_at=days_ago(8))
    assert [a["type"] for a in engine.consolidate(Store(store), dry_run=True).actions] == ["merge"]


def test_a_full_run_covers_the_folder_its_promotions_create(store: Path) -> None:
    add(store, type="procedural", subtype="review", tags=["review"], access_count=6,
        summary="Always ask for two reviewers on schema changes")
    engine.consolidate(Store(store))
    team = store / "team" / "backend"
    assert (cached(store, "team/backend") / lastrun.LASTRUN_NAME).exists() and len(list(team.glob("mem_*"))) == 1
    add(store, summary="a note written in this session", created_at=days_ago(8))
    planning = engine.plan(Store(store), engine.RunOptions(trigger="session_end"), engine.now())
    assert planning.plan.covered == ["agent/coder"]  # the promoted copy is not looked at again


def test_the_pair_cache_a_real_run_leaves_covers_what_it_rewrote(store: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    big_block(store)
    first = engine.consolidate(Store(store))
    assert any(a["type"] == "merge" for a in first.actions)  # keepers rewritten: new content
    compared: list[Any] = []
    real = similar.similar_pairs
    spy = lambda *a, **k: compared.append(k.get("focus")) or real(*a, **k)  # noqa: E731
    for module in (merging, pairsearch):  # the planner's modules that compare
        monkeypatch.setattr(module, "similar_pairs", spy)
    again = engine.consolidate(Store(store), dry_run=True)
    assert compared == [] and not [a for a in again.actions if a["type"] == "merge"]
    monkeypatch.undo()
    (cached(store, "agent/coder") / paircache.PAIRS_NAME).unlink()
    assert engine.consolidate(Store(store), dry_run=True).actions == again.actions
