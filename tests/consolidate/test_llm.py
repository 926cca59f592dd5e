"""Tests for memcli.consolidate.llm against a local fake of the Messages API (real SDK, no network)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memcli.consolidate.llm import (
    NO_KEY_NOTICE,
    SUMMARY_HEADINGS,
    Decision,
    LLMClient,
    PairCandidate,
    client_from_env,
    fit_summary,
    parse_decisions,
)
from memcli.secrets import Masker
from tests.llm_server import FakeAnthropic, Reply, error_body, fake_anthropic, message_body
from tests.test_secrets import PLANTED

SUMMARY = """## What happened
The nightly deploy of api v2.3.1 failed twice on the migration step, then succeeded.

## Who was involved
agent:coder ran the deploy; alice reviewed the migration.

## Outcome
Deployed at 03:10 UTC after adding an index before the migration.

## Key learnings
Create indexes before data migrations on large tables."""


@pytest.fixture
def server() -> Iterator[FakeAnthropic]:
    """A fresh fake Messages API for one test."""
    with fake_anthropic() as state:
        yield state


def make_client(server: FakeAnthropic, **overrides: Any) -> LLMClient:
    """A real LLMClient pointed at the fake server."""
    settings: dict[str, Any] = {
        "api_key": "test-key-not-secret",
        "model": "claude-haiku-4-5",
        "max_calls": 20,
        "timeout_s": 5.0,
        "base_url": server.url,
    }
    settings.update(overrides)
    return LLMClient(**settings)


def pair(n: int, similarity: float = 0.7, guard: str | None = None) -> PairCandidate:
    """A pair with distinct ids and texts."""
    return PairCandidate(
        pair_id=f"mem_a{n}|mem_b{n}",
        text_a=f"older memory {n}: deploy to staging first",
        text_b=f"newer memory {n}: always deploy to staging before production",
        similarity=similarity,
        guard=guard,
    )


def decisions_json(pairs: list[PairCandidate], action: str = "MERGE", **extra: Any) -> str:
    """A well-formed judge answer giving ``action`` for every pair."""
    items = [{"pair_id": p.pair_id, "action": action, "reason": "same fact", **extra} for p in pairs]
    return json.dumps({"decisions": items})


# --- summaries --------------------------------------------------------------------------


def test_summary_is_returned_with_four_headings(server: FakeAnthropic) -> None:
    server.push_text(SUMMARY)
    client = make_client(server)
    summary = client.summarize("a very long session log " * 300, 1500, Masker())
    assert summary is not None
    assert len(summary) < 1500
    assert [line for line in summary.splitlines() if line.startswith("## ")] == list(SUMMARY_HEADINGS)
    assert "Create indexes before data migrations" in summary
    assert client.calls_made == 1
    request = server.requests[0]
    assert request.path == "/v1/messages"
    assert request.json["model"] == "claude-haiku-4-5"
    assert request.json["max_tokens"] == 1024


def test_system_prompt_is_a_cached_block(server: FakeAnthropic) -> None:
    server.push_text(SUMMARY)
    make_client(server).summarize("log", 1500, Masker())
    system = server.requests[0].json["system"]
    assert isinstance(system, list) and len(system) == 1
    assert system[0]["type"] == "text"
    assert system[0]["cache_control"] == {"type": "ephemeral"}
    assert "## Key learnings" in system[0]["text"]


def test_summary_in_a_code_fence_with_loose_headings_is_normalised(
    server: FakeAnthropic,
) -> None:
    loose = SUMMARY.replace("## What happened", "# What happened").replace("## Outcome", "**Outcome:**")
    server.push_text(f"```markdown\n{loose}\n```")
    summary = make_client(server).summarize("log", 1500, Masker())
    assert summary is not None
    assert summary.startswith("## What happened\n")
    assert "\n## Outcome\n" in summary


def test_too_long_summary_is_truncated_to_fit(server: FakeAnthropic) -> None:
    long_answer = SUMMARY.replace("succeeded.", "succeeded. " + "More detail here. " * 200)
    server.push_text(long_answer)
    summary = make_client(server).summarize("log", 600, Masker())
    assert summary is not None
    assert len(summary) < 600
    assert all(heading in summary for heading in SUMMARY_HEADINGS)
    assert "Create indexes before data migrations" in summary  # short sections kept whole


@pytest.mark.parametrize(
    "answer",
    [
        "Here is a summary: the deploy failed and then worked.",
        SUMMARY.replace("## Outcome", "## Result"),
        SUMMARY.replace(
            "## Key learnings\nCreate indexes before data migrations on large tables.", "## Key learnings\n"
        ),
    ],
    ids=["no-headings", "missing-heading", "empty-section"],
)
def test_malformed_summary_gives_none(server: FakeAnthropic, answer: str) -> None:
    server.push_text(answer)
    client = make_client(server)
    assert client.summarize("log", 1500, Masker()) is None
    assert client.last_error == "unparsable"
    assert client.disabled_reason is None


def test_inline_headings_are_accepted() -> None:
    answer = ("What happened: The deploy of api 2.3.1 stalled on a migration lock.\n"
              "**Who was involved:** agent:coder, and Tomas on call.\n"
              "Outcome: Deployed at 03:10 after cancelling the migration.\n"
              "Key learnings: Set lock_timeout on every migration.\n"
              "Outcome of the retry: fine.")  # no heading: the word opens a line of body text
    summary = fit_summary(answer, 1500)
    assert summary is not None
    assert [line for line in summary.splitlines() if line.startswith("## ")] == list(SUMMARY_HEADINGS)
    assert "## Outcome\nDeployed at 03:10" in summary and summary.endswith("Outcome of the retry: fine.")
    assert fit_summary(answer.replace("Outcome: Deployed", "Outcome Deployed"), 1500) is None  # no colon


def test_fit_summary_rejects_when_headings_alone_do_not_fit() -> None:
    assert fit_summary(SUMMARY, 80) is None


# --- judging pairs ----------------------------------------------------------------------


def test_decisions_come_back_in_input_order(server: FakeAnthropic) -> None:
    pairs = [pair(1), pair(2), pair(3)]
    items = [
        {"pair_id": pairs[2].pair_id, "action": "keep separate", "reason": "different hosts"},
        {
            "pair_id": pairs[0].pair_id,
            "action": "merge",
            "reason": "restated",
            "merged_summary": "Deploy to staging before production.",
        },
        {"pair_id": pairs[1].pair_id, "action": "UPDATE", "reason": "A has the port"},
    ]
    server.push_json({"decisions": items})
    decisions = make_client(server).judge_pairs(pairs, Masker())
    assert [d.pair_id for d in decisions] == [p.pair_id for p in pairs]
    assert [d.action for d in decisions] == ["MERGE", "UPDATE", "KEEP_SEPARATE"]
    assert decisions[0].merged_summary == "Deploy to staging before production."
    assert decisions[0].reason == "restated"
    assert decisions[2].merged_summary is None
    assert [d.similarity for d in decisions] == [0.7, 0.7, 0.7]


def test_pairs_are_sent_with_guard_and_similarity(server: FakeAnthropic) -> None:
    pairs = [pair(1, 0.65, guard="numbers_differ")]
    server.push_text(decisions_json(pairs, "KEEP_SEPARATE"))
    make_client(server).judge_pairs(pairs, Masker())
    prompt = server.requests[0].json["messages"][0]["content"]
    assert '"guard": "numbers_differ"' in prompt
    assert '"similarity": 0.65' in prompt
    assert pairs[0].pair_id in prompt


def test_answer_wrapped_in_fence_and_prose_is_parsed(server: FakeAnthropic) -> None:
    pairs = [pair(1)]
    server.push_text(f"Sure! Here you go:\n```json\n{decisions_json(pairs)}\n```\nHope it helps.")
    assert make_client(server).judge_pairs(pairs, Masker())[0].action == "MERGE"


@pytest.mark.parametrize(
    "answer",
    ['{"decisions": [{"pair_id": "mem_a1|mem_b1", "action": "MERGE", ', "I think merge.", "[]x"],
    ids=["cut-json", "prose", "no-decisions"],
)
def test_malformed_json_answer_skips_the_batch(server: FakeAnthropic, answer: str) -> None:
    pairs = [pair(1), pair(2)]
    server.push_text(answer)
    client = make_client(server)
    decisions = client.judge_pairs(pairs, Masker())
    assert [(d.action, d.reason) for d in decisions] == [("SKIP", "unparsable")] * 2
    assert client.disabled_reason is None


def test_non_json_http_body_skips(server: FakeAnthropic) -> None:
    server.push(Reply(200, "<html>proxy says hi</html>"))
    decisions = make_client(server).judge_pairs([pair(1)], Masker())
    assert decisions[0].action == "SKIP"


def test_unknown_action_and_missing_pair_are_skipped(server: FakeAnthropic) -> None:
    pairs = [pair(1), pair(2), pair(3)]
    items = [
        {"pair_id": pairs[0].pair_id, "action": "DELETE", "reason": "bad action"},
        {"pair_id": "mem_x|mem_y", "action": "MERGE", "reason": "not asked"},
        {"pair_id": pairs[2].pair_id, "action": "KEEP_SEPARATE", "reason": "differ"},
    ]
    server.push_json({"decisions": items})
    decisions = make_client(server).judge_pairs(pairs, Masker())
    assert [(d.action, d.reason) for d in decisions] == [
        ("SKIP", "unparsable"),
        ("SKIP", "unparsable"),
        ("KEEP_SEPARATE", "differ"),
    ]


@pytest.mark.parametrize(
    ("similarity", "expected"), [(0.85, "MERGE"), (0.8999, "MERGE"), (0.90, "REPLACE"), (0.95, "REPLACE")]
)
def test_replace_below_090_is_downgraded_to_merge(
    server: FakeAnthropic, similarity: float, expected: str
) -> None:
    pairs = [pair(1, similarity)]
    server.push_text(decisions_json(pairs, "REPLACE"))
    decision = make_client(server).judge_pairs(pairs, Masker())[0]
    assert decision.action == expected
    assert decision.similarity == similarity
    assert ("downgraded" in decision.reason) == (expected == "MERGE")
    assert decision.reason.startswith("same fact")


def test_llm_skip_keeps_its_reasoning(server: FakeAnthropic) -> None:
    pairs = [pair(1)]
    server.push_text(decisions_json(pairs, "SKIP"))
    assert make_client(server).judge_pairs(pairs, Masker())[0] == Decision(
        pair_id=pairs[0].pair_id, action="SKIP", reason="same fact", similarity=0.7
    )


def test_batches_of_batch_size(server: FakeAnthropic) -> None:
    pairs = [pair(n) for n in range(25)]
    server.push_text(*(decisions_json(pairs[i : i + 10]) for i in range(0, 25, 10)))
    decisions = make_client(server).judge_pairs(pairs, Masker())
    assert server.request_count == 3
    assert [d.action for d in decisions] == ["MERGE"] * 25
    last_prompt = server.requests[2].json["messages"][0]["content"]
    assert pairs[24].pair_id in last_prompt and pairs[19].pair_id not in last_prompt


def test_no_pairs_no_request(server: FakeAnthropic) -> None:
    assert make_client(server).judge_pairs([], Masker()) == []
    assert server.request_count == 0


# --- guard rails ------------------------------------------------------------------------


def test_budget_two_calls_for_25_pairs(server: FakeAnthropic) -> None:
    pairs = [pair(n) for n in range(25)]
    server.push_text(decisions_json(pairs[:10]), decisions_json(pairs[10:20]))
    client = make_client(server, max_calls=2)
    decisions = client.judge_pairs(pairs, Masker())
    assert server.request_count == 2
    assert client.calls_made == 2
    assert [d.action for d in decisions[:20]] == ["MERGE"] * 20
    assert [(d.action, d.reason) for d in decisions[20:]] == [("SKIP", "budget_exhausted")] * 5
    assert client.summarize("log", 1500, Masker()) is None
    assert client.last_error == "budget_exhausted"
    assert server.request_count == 2


def test_zero_budget_makes_no_request(server: FakeAnthropic) -> None:
    client = make_client(server, max_calls=0)
    assert client.judge_pairs([pair(1)], Masker())[0].reason == "budget_exhausted"
    assert server.request_count == 0


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        (Reply(429, error_body("rate_limit_error")), "rate_limited"),
        (Reply(500, error_body("api_error")), "server_error"),
        (Reply(529, error_body("overloaded_error")), "server_error"),
        (Reply(401, error_body("authentication_error")), "api_error_401"),
    ],
    ids=["429", "500", "529", "401"],
)
def test_error_skips_and_disables_for_the_run(server: FakeAnthropic, reply: Reply, reason: str) -> None:
    server.push(reply)
    server.push_text(SUMMARY, decisions_json([pair(2)]))  # would succeed, must not be asked
    client = make_client(server)
    first = client.judge_pairs([pair(1)], Masker())
    assert [(d.action, d.reason) for d in first] == [("SKIP", reason)]
    assert client.disabled_reason == reason
    assert client.summarize("log", 1500, Masker()) is None
    later = client.judge_pairs([pair(2)], Masker())
    assert [(d.action, d.reason) for d in later] == [("SKIP", "llm_disabled_after_error")]
    assert server.request_count == 1


def test_bad_request_skips_without_disabling(server: FakeAnthropic) -> None:
    server.push(Reply(400, error_body("invalid_request_error")))
    server.push_text(decisions_json([pair(2)]))
    client = make_client(server)
    assert client.judge_pairs([pair(1)], Masker())[0].reason == "api_error_400"
    assert client.disabled_reason is None
    assert client.judge_pairs([pair(2)], Masker())[0].action == "MERGE"


def test_connection_error_disables(server: FakeAnthropic) -> None:
    with fake_anthropic() as gone:
        dead_url = gone.url  # a port that is closed once the block ends
    client = make_client(server, base_url=dead_url)
    assert client.judge_pairs([pair(1)], Masker())[0].reason == "connection_error"
    assert client.disabled_reason == "connection_error"


def test_slow_answers_time_out(server: FakeAnthropic) -> None:
    # The one test that waits: the timeout is the thing under test (2 x 0.5 s).
    slow = Reply(200, message_body(decisions_json([pair(1)])), delay=2.0)
    server.push(slow, Reply(200, message_body(SUMMARY), delay=2.0))
    client = make_client(server, timeout_s=0.5)
    assert client.judge_pairs([pair(1)], Masker())[0] == Decision(
        pair_id=pair(1).pair_id, action="SKIP", reason="timeout", similarity=0.7
    )
    assert client.disabled_reason is None  # one timeout may be a fluke
    assert client.summarize("log", 1500, Masker()) is None
    assert client.last_error == "timeout"
    assert client.disabled_reason == "repeated_timeouts"
    assert client.judge_pairs([pair(2)], Masker())[0].reason == "llm_disabled_after_error"
    assert server.request_count == 2


# --- secrets ----------------------------------------------------------------------------


def _assert_no_planted_secret_sent(server: FakeAnthropic) -> None:
    sent = "\n".join(server.received_strings())
    raw = "\n".join(r.raw for r in server.requests)
    headers = "\n".join(json.dumps(r.headers) for r in server.requests)
    for kind, _context, secret in PLANTED:
        pieces = [secret, *(line for line in secret.splitlines() if len(line) >= 20)]
        for piece in pieces:
            assert piece not in sent, kind
            assert piece not in raw, kind
            assert piece not in headers, kind


def test_no_secret_leaves_the_machine(server: FakeAnthropic) -> None:
    contexts = [context for _kind, context, _secret in PLANTED]
    pairs = [
        PairCandidate(f"mem_a{i}|mem_b{i}", f"note: {c}", f"newer note: {c}", 0.75, None)
        for i, c in enumerate(contexts)
    ]
    server.push_text(*(decisions_json(pairs[i : i + 10]) for i in range(0, len(pairs), 10)))
    server.push_text(SUMMARY)
    client = make_client(server)
    masker = Masker()
    client.judge_pairs(pairs, masker)
    client.summarize("session log\n" + "\n".join(contexts), 1500, masker)
    assert server.request_count == len(range(0, len(pairs), 10)) + 1
    _assert_no_planted_secret_sent(server)


def test_echoed_placeholder_is_restored_but_not_in_reason(server: FakeAnthropic) -> None:
    secret = "Tr0ub4dor&3-horse"
    masker = Masker()
    pairs = [PairCandidate("mem_a|mem_b", f"db password={secret}", f"password: {secret}", 0.8, None)]
    item = {
        "pair_id": "mem_a|mem_b",
        "action": "MERGE",
        "reason": "both store [[MEMCLI_SECRET_1]] for the db; also sk-ant-api03-LeakedByModel1234567890",
        "merged_summary": "The db password is [[MEMCLI_SECRET_1]].",
    }
    server.push_json({"decisions": [item]})
    server.push_text(SUMMARY.replace("alice reviewed", "alice used [[MEMCLI_SECRET_1]]"))
    client = make_client(server)
    decision = client.judge_pairs(pairs, masker)[0]
    assert decision.merged_summary == f"The db password is {secret}."
    assert secret not in decision.reason and "sk-ant-" not in decision.reason
    assert "[[MEMCLI_SECRET_1]]" in decision.reason  # harmless placeholder stays
    summary = client.summarize(f"log with password={secret}", 1500, masker)
    assert summary is not None and f"alice used {secret}" in summary
    _assert_no_planted_secret_sent(server)
    assert all(secret not in s for s in server.received_strings())


def test_parse_decisions_first_wins_on_repeats() -> None:
    answer = json.dumps(
        {"decisions": [{"pair_id": "p", "action": "MERGE"}, {"pair_id": "p", "action": "SKIP"}]}
    )
    assert parse_decisions(answer)["p"]["action"] == "MERGE"


# --- construction -----------------------------------------------------------------------


def test_client_from_env_disabled(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    assert client_from_env(enabled=False, model="m", max_calls=5, timeout_s=1) == (None, None)


def test_client_from_env_without_key_gives_notice(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    client, notice = client_from_env(enabled=True, model="m", max_calls=5, timeout_s=1)
    assert client is None
    assert notice == NO_KEY_NOTICE
    assert notice == ("LLM enabled but ANTHROPIC_API_KEY is not set; using rule-based consolidation")


def test_client_from_env_with_key_and_base_url(
    monkeypatch: pytest.MonkeyPatch, server: FakeAnthropic
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key-from-env")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
    client, notice = client_from_env(enabled=True, model="m", max_calls=3, timeout_s=2)
    assert notice is None and client is not None
    assert (client.model, client.max_calls, client.timeout_s) == ("m", 3, 2)
    assert "test-key-from-env" not in repr(client)
    server.push_text(SUMMARY)
    assert client.summarize("log", 1500, Masker()) is not None
    assert server.requests[0].headers.get("Authorization", "").endswith("test-key-from-env") or (
        server.requests[0].headers.get("X-Api-Key") == "test-key-from-env"
    )


@pytest.mark.parametrize("bad", [{"max_calls": -1}, {"timeout_s": 0}, {"max_tokens": 0}, {"batch_size": 0}])
def test_invalid_settings_are_rejected(server: FakeAnthropic, bad: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        make_client(server, **bad)


def test_importing_core_modules_does_not_import_anthropic() -> None:
    code = (
        "import sys, memcli.consolidate.llm, memcli.secrets; "
        "bad = [m for m in ('anthropic', 'typer', 'rich') if m in sys.modules]; "
        "assert not bad, bad"
    )
    root = Path(__file__).resolve().parents[2]
    subprocess.run([sys.executable, "-c", code], check=True, cwd=root)


def test_answer_cut_at_max_tokens_is_skipped(server: FakeAnthropic) -> None:
    body = message_body(decisions_json([pair(1)]))
    body["stop_reason"] = "max_tokens"
    server.push(Reply(200, body), Reply(200, {**message_body(SUMMARY), "stop_reason": "max_tokens"}))
    client = make_client(server)
    assert client.judge_pairs([pair(1)], Masker())[0].reason == "truncated"
    assert client.summarize("log", 1500, Masker()) is None
    assert client.last_error == "truncated"
    assert client.disabled_reason is None


def test_missing_sdk_gives_notice(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    monkeypatch.setattr("importlib.util.find_spec", lambda name: None)
    client, notice = client_from_env(enabled=True, model="m", max_calls=5, timeout_s=1)
    assert client is None and notice is not None and "anthropic package" in notice
