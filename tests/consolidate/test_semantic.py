"""The optional semantic signal: vectors cached by content hash under .cache/semantic, pairs by
cosine, and the duplicate rule taking pairs that mean the same with every guard still able to
veto. A stand-in embedding makes these tests independent of the extra being installed; one
test runs the real model when it is."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memcli.consolidate import engine, semantic
from memcli.store.plans import Outcome
from memcli.store.store import Store
from tests.conftest import add, days_ago

# Texts the stand-in model places on the same point say the same thing.
MEANING = {
    "Use pnpm for the frontend repository.": 0,
    "The frontend repo is managed with pnpm.": 0,
    "The retry budget is 3 attempts per webhook.": 1,
    "Webhooks get 5 attempts before they are dropped for good.": 1,
}


def fake_embed(texts: list[str]) -> np.ndarray:
    rows = np.zeros((len(texts), semantic.DIM), dtype=np.float32)
    for n, text in enumerate(texts):
        key = MEANING.get(text)
        column = key if key is not None else 10 + int(hashlib.sha256(text.encode()).hexdigest(), 16) % 200
        rows[n, column] = 1.0
    return rows


@pytest.fixture
def fake_model(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    calls: list[list[str]] = []

    def embed(texts: Any) -> np.ndarray:
        calls.append(list(texts))
        return fake_embed(list(texts))

    monkeypatch.setattr(semantic, "embed", embed)
    monkeypatch.setattr(semantic, "available", lambda: True)
    return calls


def semantic_store(store: Path) -> Path:
    (store / "memcli.toml").write_text("[consolidation]\nindex_pause_ms = 0\nsemantic = true\n")
    return store


def run(root: Path, **kw: Any) -> Outcome:
    return engine.consolidate(Store(root), **kw)


def test_vectors_are_cached_by_content_hash(store: Path, fake_model: list[list[str]]) -> None:
    cache = semantic.VectorCache(store)
    texts = ["Use pnpm for the frontend repository.", "The retry budget is 3 attempts per webhook."]
    hashes = [hashlib.sha256(t.encode()).hexdigest() for t in texts]
    first = cache.get(hashes, lambda n: texts[n])
    assert first.shape == (2, semantic.DIM) and np.allclose(np.linalg.norm(first, axis=1), 1.0)
    assert not (store / ".cache").exists()  # nothing written until saved
    cache.save()
    again = semantic.VectorCache(store)
    assert np.allclose(again.get(hashes, lambda n: pytest.fail("embedded again")), first)
    assert fake_model == [texts]  # each text embedded once
    assert (store / ".cache" / "semantic" / "vectors.bin").is_file()


def test_a_damaged_or_foreign_cache_is_ignored(store: Path, fake_model: list[list[str]]) -> None:
    path = store / ".cache" / "semantic" / "vectors.bin"
    path.parent.mkdir(parents=True)
    for junk in (b"", b"not a cache", b"MEMCLI-VECTORS 1\n{\"model\": \"other\", \"dim\": 256}\n" + b"x" * 600):
        path.write_bytes(junk)
        assert semantic.VectorCache(store).vectors == {}


def test_save_prunes_unused_vectors_on_request(store: Path, fake_model: list[list[str]]) -> None:
    cache = semantic.VectorCache(store)
    cache.get(["aa" * 32, "bb" * 32], lambda n: ["one text here", "another text"][n])
    cache.save()
    fresh = semantic.VectorCache(store)
    fresh.get(["aa" * 32], lambda n: pytest.fail("cached"))
    fresh.save(prune=True)
    assert list(semantic.VectorCache(store).vectors) == [bytes.fromhex("aa" * 32)]


def test_similar_pairs_above_the_threshold_and_focus() -> None:
    vectors = fake_embed(list(MEANING) + ["something else entirely"])
    assert semantic.similar_pairs(vectors, 0.88) == {(0, 1): 1.0, (2, 3): 1.0}
    assert semantic.similar_pairs(vectors, 0.88, focus=[3]) == {(2, 3): 1.0}
    assert semantic.similar_pairs(vectors[:0], 0.88) == {}


def test_paraphrases_merge_by_meaning(store: Path, fake_model: list[list[str]]) -> None:
    # (A paraphrase that adds a clause is still stopped by extra_detail: every guard applies.)
    semantic_store(store)
    old = add(store, summary="Use pnpm for the frontend repository.", created_at=days_ago(40))
    new = add(store, summary="The frontend repo is managed with pnpm.", created_at=days_ago(20))
    dry = run(store, dry_run=True)
    assert not (store / ".cache" / "semantic").exists()  # a dry run leaves no cache
    merge = next(a for a in dry.actions if a["type"] == "merge")
    assert merge["source_ids"] == [old["id"], new["id"]] and merge["semantic"] == {old["id"]: 1.0}
    assert merge["similarity"] < 0.80  # the text alone would not have merged them
    assert "meaning 1.00" in dry.whys[0]
    run(store)
    assert (store / ".cache" / "semantic" / "vectors.bin").is_file()


def test_guards_veto_a_pair_that_means_the_same_to_the_model(store: Path, fake_model: list[list[str]]) -> None:
    semantic_store(store)
    add(store, summary="The retry budget is 3 attempts per webhook.", created_at=days_ago(40))
    add(store, summary="Webhooks get 5 attempts before they are dropped for good.", created_at=days_ago(20))
    out = run(store, dry_run=True)
    assert [(a["type"], a.get("reason")) for a in out.actions] == [("keep_separate", "numbers")]


def test_without_the_signal_nothing_merges_by_meaning(store: Path, fake_model: list[list[str]]) -> None:
    add(store, summary="Use pnpm for the frontend repository.", created_at=days_ago(40))
    add(store, summary="The frontend repo is managed with pnpm.", created_at=days_ago(20))
    assert run(store, dry_run=True).actions == [] and fake_model == []


def test_semantic_setting_without_the_extra_is_a_notice(store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    semantic_store(store)
    monkeypatch.setattr(semantic, "available", lambda: False)
    add(store, summary="Use pnpm for the frontend repository.", created_at=days_ago(40))
    out = run(store, dry_run=True)
    assert semantic.NOT_INSTALLED in out.notes and out.actions == []


@pytest.mark.skipif(not semantic.available(), reason="the semantic extra is not installed")
def test_the_real_model_offline() -> None:
    vectors = semantic.embed(["Deploy to staging before production.",
                              "Ship to staging first, then to production.",
                              "The invoice PDF is rendered with WeasyPrint."])
    assert vectors.shape == (3, semantic.DIM)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-3)
    assert float(vectors[0] @ vectors[1]) > float(vectors[0] @ vectors[2])
