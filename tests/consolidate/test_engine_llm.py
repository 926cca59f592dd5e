"""The LLM path of a run (SPEC 9), with the real anthropic client against a local server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memcli.consolidate import engine
from memcli.store.plans import Outcome
from memcli.store.store import Store
from tests.conftest import add, days_ago, load, snapshot
from tests.llm_server import FakeAnthropic, Reply, error_body, fake_anthropic

OLD = "Deploy the billing worker to staging before production and check the queue depth"
NEW = "Deploy billing worker on staging prior to prod, then watch queue depth"  # 0.72 (0.79 on a second look)
SUMMARY = ("## What happened\nThe deploy failed, then worked.\n\n## Who was involved\nagent:coder and "
           "alice.\n\n## Outcome\nDeployed at 03:10.\n\n## Key learnings\nAdd the index first.")


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeAnthropic]:
    with fake_anthropic() as state:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key-not-secret")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", state.url)
        yield state


def run(root: Path, **kw: Any) -> Outcome:
    return engine.consolidate(Store(root), llm=True, **kw)


def grey_pair(store: Path, **newer: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    old = add(store, summary=OLD, created_at=days_ago(40), tags=["deploy"])
    new = add(store, summary=NEW, created_at=days_ago(20), tags=["deploy"], **newer)
    return old, new


def decide(server: FakeAnthropic, old: dict[str, Any], new: dict[str, Any], action: str, **extra: Any) -> None:
    server.push_json({"decisions": [{"pair_id": f"{old['id']}|{new['id']}", "action": action,
                                     "reason": "the same procedure, reworded", **extra}]})


def judged(outcome: Outcome) -> list[dict[str, Any]]:
    return [a for a in outcome.actions if a["type"] == "judge"]


@pytest.mark.slow
def test_llm_summary_is_written_and_logged(store: Path, server: FakeAnthropic) -> None:
    m = add(store, type="episodic", created_at=days_ago(40), details="A long session. " * 400)
    server.push_text(SUMMARY)
    out = run(store)
    assert out.actions == [{"type": "summarize", "memory_id": m["id"], "method": "llm"}]
    data = load(next(store.glob(f"agent/coder/{m['id']}.*")))
    assert data["content"]["details"].startswith("## What happened") and "summarized" in data["tags"]


def test_failed_summary_falls_back_to_extractive(store: Path, server: FakeAnthropic) -> None:
    add(store, type="episodic", created_at=days_ago(40), details="A long session. " * 400)
    server.push(Reply(500, error_body("api_error")))
    out = run(store)
    assert out.actions[0]["method"] == "extractive"


def test_grey_zone_merge(store: Path, server: FakeAnthropic) -> None:
    old, new = grey_pair(store)
    decide(server, old, new, "MERGE", merged_summary="Deploy the billing worker to staging first")
    out = run(store)
    assert judged(out) == [{"type": "judge", "memory_ids": [old["id"], new["id"]], "decision": "MERGE",
                            "reason": "the same procedure, reworded", "similarity": 0.7248}]
    merge = next(a for a in out.actions if a["type"] == "merge")
    assert merge["source_ids"] == [old["id"], new["id"]] and merge["result_id"] == new["id"]
    assert merge["similarity"] == 0.7248  # the pair's text similarity, as judged
    keeper = load(next(store.glob(f"agent/coder/{new['id']}.*")))
    assert keeper["content"]["summary"] == "Deploy the billing worker to staging first"


def test_keep_separate_and_skip_change_nothing_but_are_logged(store: Path, server: FakeAnthropic) -> None:
    old, new = grey_pair(store)
    before = snapshot(store)
    decide(server, old, new, "KEEP_SEPARATE")
    out = run(store)
    assert [a["decision"] for a in judged(out)] == ["KEEP_SEPARATE"] and snapshot(store) == before
    from memcli.store import log as run_log  # shared log and this machine's quiet runs

    assert run_log.read_entries(store)[0]["actions"][0]["reason"] == "the same procedure, reworded"


def test_replace_below_090_becomes_merge(store: Path, server: FakeAnthropic) -> None:
    old, new = grey_pair(store)
    decide(server, old, new, "REPLACE")
    out = run(store)
    assert judged(out)[0]["decision"] == "MERGE" and "downgraded" in judged(out)[0]["reason"]
    keeper = load(next(store.glob(f"agent/coder/{new['id']}.*")))
    assert keeper["supersedes"] == [old["id"]]  # a merge takes the older's content, a replace would not


def test_update_enriches_the_newer_and_keeps_both(store: Path, server: FakeAnthropic) -> None:
    old, new = grey_pair(store)
    decide(server, old, new, "UPDATE", merged_summary="Deploy to staging first, then check queue depth")
    out = run(store)
    assert {"type": "update", "memory_id": new["id"], "source_ids": [old["id"]], "method": "llm"} in out.actions
    assert next(store.glob(f"agent/coder/{old['id']}.*"))
    assert load(next(store.glob(f"agent/coder/{new['id']}.*")))["content"]["summary"].startswith("Deploy to")


def test_protection_and_authors_bind_whatever_the_llm_says(store: Path, server: FakeAnthropic) -> None:
    old, new = grey_pair(store, priority="critical")
    decide(server, old, new, "UPDATE")
    before = snapshot(store)
    run(store)
    assert snapshot(store) == before  # the newer is protected: UPDATE may not rewrite it
    other = Path(store.parent / "other")
    other.mkdir()
    for sub in ("ops", "archive"):
        (other / sub).mkdir()
    (other / "memcli.toml").write_text("[consolidation]\nindex_pause_ms = 0\n")
    old, new = grey_pair(other, created_by="agent:reviewer")
    decide(server, old, new, "MERGE")
    out = run(other)
    assert {"type": "keep_separate", "memory_ids": [old["id"], new["id"]], "reason": "different_authors"} in out.actions


def test_pairs_above_080_are_not_sent(store: Path, server: FakeAnthropic) -> None:
    add(store, summary=OLD, created_at=days_ago(40))
    add(store, summary=OLD + " now", created_at=days_ago(20))
    out = run(store)
    assert server.request_count == 0 and [a["type"] for a in out.actions] == ["merge"]


def test_guard_rejected_pair_goes_to_the_llm(store: Path, server: FakeAnthropic) -> None:
    old = add(store, summary="The request timeout of the billing API is 30 seconds", created_at=days_ago(40))
    new = add(store, summary="The request timeout of the billing API is 60 seconds", created_at=days_ago(20))
    decide(server, old, new, "KEEP_SEPARATE")
    out = run(store)
    assert [a["type"] for a in out.actions] == ["keep_separate", "judge"]
    assert server.requests[0].json["messages"][0]["content"].count("numbers") >= 1


def test_server_error_leaves_the_rule_based_path(store: Path, server: FakeAnthropic) -> None:
    grey_pair(store)
    server.push(Reply(500, error_body("api_error")))
    out = run(store)
    assert [a["decision"] for a in judged(out)] == ["SKIP"] and out.stats["memories_merged"] == 0


def test_dry_run_with_llm_shows_decisions_and_writes_nothing(store: Path, server: FakeAnthropic) -> None:
    old, new = grey_pair(store)
    decide(server, old, new, "MERGE")
    before = {p: p.read_bytes() for p in store.rglob("*") if p.is_file()}
    out = run(store, dry_run=True)
    assert judged(out)[0]["decision"] == "MERGE" and "merge" in [a["type"] for a in out.actions]
    assert {p: p.read_bytes() for p in store.rglob("*") if p.is_file()} == before


def test_secret_in_a_memory_never_leaves_and_comes_back(store: Path, server: FakeAnthropic) -> None:
    secret = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    m = add(store, type="episodic", created_at=days_ago(40),
            details=f"We rotated the token {secret} today. " + "More of the session. " * 300)
    server.push_text(SUMMARY.replace("Add the index first.", "Rotate [[MEMCLI_SECRET_1]] monthly."))
    run(store)
    assert all(secret not in s for s in server.received_strings())
    assert secret in load(next(store.glob(f"agent/coder/{m['id']}.*")))["content"]["details"]
    assert secret not in (store / "ops" / "consolidation-log.json").read_text()


def test_without_a_key_a_notice_and_the_rule_based_path(store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    grey_pair(store)
    out = run(store, dry_run=True)
    assert any("ANTHROPIC_API_KEY is not set" in n for n in out.notes) and judged(out) == []


def test_budget_holds_across_a_run(store: Path, server: FakeAnthropic) -> None:
    (store / "memcli.toml").write_text("[consolidation]\nindex_pause_ms = 0\n[llm]\nmax_calls_per_run = 1\n")
    for n in range(3):
        add(store, type="episodic", subtype=f"s{n}", created_at=days_ago(40), details="Long text. " * 600)
    server.push_text(SUMMARY, SUMMARY, SUMMARY)
    out = run(store)
    assert server.request_count == 1
    assert sorted(a["method"] for a in out.actions) == ["extractive", "extractive", "llm"]
