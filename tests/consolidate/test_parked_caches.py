"""A full run lets each folder's signature and pair caches go once it is done with the folder
(saved first by a real run): memory stays flat however many folders the store has."""

from __future__ import annotations

from pathlib import Path

import pytest

from memcli.consolidate import candidates, engine
from memcli.consolidate.planbase import PlannerBase
from memcli.store import sigcache
from memcli.store.store import Store
from tests.conftest import add, days_ago

TEXT = "the deploy pipeline retries the flaky integration step twice before it pages anyone on call"


def _store(store: Path) -> None:
    for scope, scope_id in (("agent", "coder"), ("agent", "writer"), ("team", "backend")):
        for n in range(6):
            add(store, scope=scope, scope_id=scope_id, summary=f"{TEXT} {scope_id} note {n} {'x' * n}",
                created_at=days_ago(40))
        add(store, scope=scope, scope_id=scope_id, summary=f"{TEXT} {scope_id} note 0 again",
            created_at=days_ago(30))


@pytest.mark.parametrize("dry_run", [False, True])
def test_each_folder_s_caches_leave_memory_when_the_run_is_done_with_it(
        store: Path, monkeypatch: pytest.MonkeyPatch, dry_run: bool) -> None:
    _store(store)
    held: list[tuple[str, list[str]]] = []
    real_park = PlannerBase._park_caches

    def park(self: PlannerBase, folder: object) -> None:
        real_park(self, folder)  # type: ignore[arg-type]
        held.append((folder.rel, sorted(set(self.sigs) | set(self.pairs_found) | set(self.pair_caches))))  # type: ignore[attr-defined]

    monkeypatch.setattr(PlannerBase, "_park_caches", park)
    out = engine.consolidate(Store(store), dry_run=dry_run)
    assert sorted(rel for rel, _ in held) == ["agent/coder", "agent/writer", "global", "team/backend"]
    assert all(rel not in others for rel, others in held)  # nothing of a folder held after it
    assert all(others == [] for _, others in held)  # nor of any other (no promotion here)
    caches = [Store(store).folder(*rel.split("/")).cache() for rel in ("agent/coder", "team/backend")]
    if dry_run:
        assert not any((c / sigcache.SIG_NAME).exists() for c in caches)  # a dry run leaves no cache
        return
    assert any(a["type"] == "merge" for a in out.actions)
    s = Store(store)
    for rel in ("agent/coder", "agent/writer", "team/backend"):
        folder = s.folder(*rel.split("/"))
        scan = s.scan(folder, load=True)
        cached = sigcache.load_sigs(folder.cache())
        assert scan.memories and all(cached.get(m.content_hash) for m in scan.memories.values())
    # the caches the run saved folder by folder are the steady state: a dry run now signs nothing
    monkeypatch.setattr(candidates, "signatures", lambda texts: pytest.fail(f"signed {len(texts)} texts"))
    engine.consolidate(Store(store), dry_run=True)



def test_a_block_s_text_features_leave_memory_with_it(store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The guards' per-text features live for one block, freed by reference counting alone
    (planning pauses the cycle collector) before the next block is compared, so a full run's
    memory grows neither with the store nor with a folder's blocks."""
    import gc
    import weakref

    from memcli.consolidate import merging, pairsearch

    _store(store)
    for n in range(3):  # a second block in the coder's folder, with a duplicate the guards look at
        add(store, type="procedural", subtype="deploy", summary=f"{TEXT} procedure {n // 2}",
            created_at=days_ago(40 - n))
    refs: list[weakref.ref[object]] = []
    alive: list[int] = []
    blocks: list[tuple[str, str]] = []
    real_features = pairsearch.PairSearch._features
    real_block = merging.DuplicateMerging._merge_block

    def features(self: pairsearch.PairSearch, item: object) -> object:
        made = real_features(self, item)  # type: ignore[arg-type]
        refs.append(weakref.ref(made))
        return made

    def merge_block(self: merging.DuplicateMerging, block: list[object], *ahead: object) -> None:
        assert not gc.isenabled()  # (what this test is about)
        real_block(self, block, *ahead)  # type: ignore[arg-type]
        alive.append(sum(r() is not None for r in refs))
        blocks.append((block[0].folder.rel, block[0].mem.type))  # type: ignore[attr-defined]

    monkeypatch.setattr(pairsearch.PairSearch, "_features", features)
    monkeypatch.setattr(merging.DuplicateMerging, "_merge_block", merge_block)
    out = engine.consolidate(Store(store), dry_run=True)
    assert sum(a["type"] == "merge" for a in out.actions) >= 4  # each folder's block, and the second
    assert {("agent/coder", "procedural"), ("agent/coder", "semantic")} <= set(blocks)
    assert refs and len(alive) == len(blocks) and alive == [0] * len(alive)
