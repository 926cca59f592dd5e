"""No LLM output reaches the log or a memory unmasked, and no memory secret reaches the LLM
(SPEC 9, issue 13): the formats the masker used to miss, through a whole run against a local
server speaking the Anthropic API."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.secrets_corpus import SAMPLES
from memcli.consolidate import engine
from memcli.store.store import Store
from tests.conftest import add, days_ago, load
from tests.llm_server import FakeAnthropic, fake_anthropic

OLD = "Deploy the billing worker to staging before production and check the queue depth"
NEW = "Deploy billing worker on staging prior to prod, then check queue depth graphs"  # 0.76 with OLD
GOOGLE = next(s.secret for s in SAMPLES if s.kind == "google-api-key")
STRIPE = next(s.secret for s in SAMPLES if s.kind == "stripe-live")
PROSE = next(s for s in SAMPLES if s.kind == "prose-admin-password")


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeAnthropic]:
    with fake_anthropic() as state:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key-not-secret")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", state.url)
        yield state


def test_an_echoed_secret_never_reaches_the_log_or_a_memory(store: Path, server: FakeAnthropic) -> None:
    old = add(store, summary=OLD, created_at=days_ago(40), tags=["deploy"], details=f"maps key {GOOGLE}")
    new = add(store, summary=NEW, created_at=days_ago(20), tags=["deploy"], details=PROSE.text)
    server.push_json({"decisions": [{
        "pair_id": f"{old['id']}|{new['id']}", "action": "MERGE",
        "reason": f"same procedure; note the Stripe key {STRIPE} and {PROSE.text}",
        "merged_summary": f"Deploy the billing worker to staging first (key {STRIPE})"}]})
    outcome = engine.consolidate(Store(store), llm=True)
    sent = "\n".join(server.received_strings())
    assert GOOGLE not in sent and PROSE.secret not in sent  # masked before it left
    log = (store / "ops" / "consolidation-log.json").read_text()
    judge = next(a for a in json.loads(log)["entries"][0]["actions"] if a["type"] == "judge")
    assert STRIPE not in log and PROSE.secret not in log and GOOGLE not in log
    assert "[REDACTED]" in judge["reason"]
    merges = [{k: a[k] for k in ("type", "source_ids", "result_id")} for a in outcome.actions
              if a["type"] == "merge"]
    assert merges == [{"type": "merge", "source_ids": [old["id"], new["id"]], "result_id": new["id"]}]
    keeper = load(next(store.glob(f"agent/coder/{new['id']}.*")))
    assert STRIPE not in json.dumps(keeper) and "[REDACTED]" in keeper["content"]["summary"]
    assert PROSE.secret in keeper["content"]["details"]  # the memory's own text is restored as it was
