"""The rules as pure functions, at the edges of every threshold (SPEC 2 and 3)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from memcli.config import Consolidation
from memcli.consolidate import rules
from memcli.consolidate.summary import HEADINGS, extractive_summary
from memcli.store.model import Memory
from tests.conftest import NOW_DT, days_ago, record

CFG = Consolidation()


def mem(**fields: object) -> Memory:
    data = record(**fields)
    return Memory(data, Path(f"/s/agent/coder/{data['id']}.json"), "json", "h")


@pytest.mark.parametrize(("fields", "reason"), [
    ({"priority": "critical"}, "critical"),
    ({"tags": ["x", "permanent"]}, "permanent"),
    ({"tags": ["protected"]}, "protected_tag"),
    ({"created_by": "USER"}, "user_without_consent"),
    ({"type": "semantic", "subtype": "decision"}, "decision"),
    ({"created_at": days_ago(6)}, "fresh"),
    ({"created_at": "2027-01-01T00:00:00Z"}, "fresh"),  # a future created_at is never old
])
def test_each_exclusion(fields: dict[str, object], reason: str) -> None:
    assert rules.protection_reason(mem(**fields), NOW_DT, CFG) == reason


@pytest.mark.parametrize("fields", [
    {"priority": "high"}, {"created_by": "USER", "consent": True}, {"created_at": days_ago(8)},
    {"type": "semantic", "subtype": "fact"}, {"type": "procedural", "subtype": "decision"},
])
def test_not_protected(fields: dict[str, object]) -> None:
    assert rules.protection_reason(mem(**fields), NOW_DT, CFG) is None


@pytest.mark.parametrize(("created", "fresh"), [
    ("2026-11-15T00:00:00Z", False),  # exactly min_age_days (7) old: old enough
    ("2026-11-15T00:00:01Z", True),  # a second younger
    ("2026-11-14T23:59:59Z", False),
    ("2026-11-15T01:00:00+01:00", False),  # the same moment with an offset (parsed, not compared)
    ("2026-11-15T01:00:01+01:00", True),
    ("2030-01-01T00:00:00Z", True),  # the future
])
@pytest.mark.parametrize("now", [NOW_DT, NOW_DT.replace(microsecond=500_000)])  # cutoff a string or not
def test_freshness_at_its_edge(created: str, fresh: bool, now: object) -> None:
    """Canonical stamps are compared as strings against the cutoff (when it falls on a whole
    second), others parsed: the same answers either way."""
    import datetime as dt

    from memcli.store.model import parse_ts

    assert isinstance(now, dt.datetime)
    for days in (7, 7.5):
        expected = now - parse_ts(created)[0] < dt.timedelta(days=days)  # the rule as written
        assert rules.is_fresh(mem(created_at=created), now, days) is expected
    if now.microsecond == 0:
        assert rules.is_fresh(mem(created_at=created), now, 7) is fresh


_REASON_CASES = [
    {"priority": "critical", "tags": ["permanent"]}, {"tags": ["x", "permanent", "protected"]},
    {"tags": ["protected"], "created_by": "USER"}, {"tags": []}, {"tags": None},
    {"created_by": "USER"}, {"created_by": "USER", "consent": True}, {"created_by": "USER", "consent": "yes"},
    {"type": "semantic", "subtype": "decision"}, {"type": "procedural", "subtype": "decision"},
    {"created_at": "2026-11-15T00:00:00Z"}, {"created_at": "2026-11-15T00:00:01Z"},
    {"created_at": "2026-11-15T01:00:01+01:00"}, {"created_at": "2026-11-15T01:00:00+01:00"},
    {"created_at": "2026-11-15T00:00:01"}, {"created_at": "2030-01-01T00:00:00Z"}, {"priority": "high"},
]


@pytest.mark.parametrize("consent", [False, True])
@pytest.mark.parametrize("now", [NOW_DT, NOW_DT.replace(microsecond=500_000)])  # cutoff a string or not
def test_protection_reasons_in_one_loop_are_the_rule_for_each(consent: bool, now: object) -> None:
    """`protection_reasons` (the report's counts over every memory) answers as
    `protection_reason` does for each memory, in order: each exclusion, their precedence,
    and freshness at its edge, canonical stamps or not."""
    import datetime as dt

    assert isinstance(now, dt.datetime)
    mems = [mem(**fields) for fields in _REASON_CASES]
    for days in (7, 7.5):
        cfg = Consolidation(min_age_days=days)
        expected = [rules.protection_reason(m, now, cfg, consent) for m in mems]
        assert rules.protection_reasons(mems, now, cfg, consent) == expected
        assert {None, "critical", "permanent", "protected_tag", "decision", "fresh"} <= set(expected)
    assert rules.protection_reasons([], NOW_DT, CFG) == []


def test_run_consent_covers_user_memories() -> None:
    assert rules.protection_reason(mem(created_by="USER"), NOW_DT, CFG, consent=True) is None


def test_archived_and_superseded_take_no_part() -> None:
    assert rules.takes_part(mem())
    assert not rules.takes_part(mem(superseded_by=["mem_x"]))
    assert not rules.takes_part(mem(archived_at=days_ago(1)))


@pytest.mark.parametrize(("a", "b", "expected"), [
    ([], [], 1.0), (["a"], [], 0.0), (["a", "b", "c", "d"], ["a", "b", "c", "d", "e"], 0.8),
    (["a", "b", "c", "d", "e"], ["a", "b", "c", "d", "e", "f"], 5 / 6),
])
def test_tag_overlap(a: list[str], b: list[str], expected: float) -> None:
    assert rules.tag_overlap(a, b) == pytest.approx(expected)


def test_tag_overlap_exactly_080_is_not_a_duplicate() -> None:
    a = mem(tags=["a", "b", "c", "d"])
    b = mem(tags=["a", "b", "c", "d", "e"])
    assert not rules.is_duplicate_pair(a, b, 0.99, CFG)
    c = mem(tags=["a", "b", "c", "d", "e", "f"])
    assert rules.is_duplicate_pair(mem(tags=["a", "b", "c", "d", "e"]), c, 0.99, CFG)


def test_content_similarity_edges() -> None:
    assert rules.similarity("abcdefghij", "abcdefghxy") == 0.8
    a, b = mem(), mem()
    assert not rules.is_duplicate_pair(a, b, 0.8, CFG)
    assert rules.is_duplicate_pair(a, b, 0.8001, CFG)
    assert not rules.is_duplicate_pair(a, mem(type="episodic"), 0.99, CFG)
    assert not rules.is_duplicate_pair(a, mem(subtype="other"), 0.99, CFG)


def test_promotion_linked_memories_are_never_duplicates() -> None:
    original = mem()
    copy = mem(promoted_from=original.id)
    assert rules.promotion_linked(original, copy) and not rules.is_duplicate_pair(original, copy, 1.0, CFG)
    sibling = mem(promoted_from=original.id)
    assert rules.promotion_linked(copy, sibling)


def test_content_text_order_and_normalisation() -> None:
    content = {"zeta": "Last", "details": "Middle, text!", "summary": "First", "alpha": "Other", "n": 5}
    assert rules.content_text(content) == "first middle  text  other last"


def test_merge_into_keeper() -> None:
    keeper = record(tags=["b", "a"], access_count=2, last_accessed=days_ago(10),
                    content={"summary": "k", "timeline": [{"at": "1", "event": "x"}]})
    member = record(tags=["a", "c"], access_count=3, last_accessed=days_ago(2),
                    content={"summary": "m", "timeline": [{"at": "1", "event": "x"}, {"at": "2", "event": "y"}],
                             "links": ["u"]})
    out = rules.merge_into_keeper(keeper, [member], "NOW")
    assert out["tags"] == ["b", "a", "c"] and out["access_count"] == 5
    assert out["last_accessed"] == days_ago(2) and out["updated_at"] == "NOW"
    assert out["content"] == {"summary": "k", "links": ["u"],
                              "timeline": [{"at": "1", "event": "x"}, {"at": "2", "event": "y"}]}
    assert out["supersedes"] == [member["id"]]


@pytest.mark.parametrize(("length", "age", "tags", "expected"), [
    (5000, 40, [], False), (5001, 40, [], True), (5001, 30, [], False), (5001, 31, [], True),
    (9000, 40, ["summarized"], False),
])
def test_needs_summary_edges(length: int, age: int, tags: list[str], expected: bool) -> None:
    m = mem(type="episodic", details="x" * length, created_at=days_ago(age), tags=tags)
    assert rules.needs_summary(m, NOW_DT, CFG) is expected
    assert not rules.needs_summary(mem(type="semantic", details="x" * 6000), NOW_DT, CFG)


@pytest.mark.parametrize("created", [
    "2026-10-23T00:00:00Z", "2026-10-22T23:59:59Z", "2026-10-23T00:00:01Z",  # 30 days before NOW, and a second off
    "2026-10-23T01:00:00+01:00", "2026-10-23T00:59:59+01:00", "2026-10-22T23:59:59",  # offsets, no zone
])
@pytest.mark.parametrize("now", [NOW_DT, NOW_DT.replace(microsecond=500_000)])  # cutoff a string or not
def test_needs_summary_at_the_age_edge(created: str, now: object) -> None:
    """A canonical created_at is compared with the cutoff as a string (when the cutoff falls
    on a whole second), others parsed: the same answers as the rule as written."""
    import datetime as dt

    from memcli.store.model import parse_ts

    assert isinstance(now, dt.datetime)
    m = mem(type="episodic", details="x" * 5001, created_at=created)
    for days in (30, 30.5):
        cfg = Consolidation(summarize_after_days=days)
        expected = now - parse_ts(created)[0] > dt.timedelta(days=days)
        assert rules.needs_summary(m, now, cfg) is expected, days


def test_summarized_record_keeps_first_and_last_three_timeline_entries() -> None:
    timeline = [{"at": str(i), "event": f"e{i}"} for i in range(10)]
    data = record(tags=["t"], content={"summary": "s", "details": "long", "timeline": timeline})
    out = rules.summarized_record(data, "short", "NOW")
    assert [e["at"] for e in out["content"]["timeline"]] == ["0", "1", "2", "7", "8", "9"]
    assert out["tags"] == ["t", "summarized"] and out["content"]["details"] == "short"
    six = record(content={"summary": "s", "timeline": timeline[:6]})
    assert rules.summarized_record(six, "x", "NOW")["content"]["timeline"] == timeline[:6]


def test_extractive_summary_is_deterministic_short_and_has_the_headings() -> None:
    text = ("We deployed the billing service with Alice. " * 3 + "The rollout failed at 10:02. "
            "Bob paired with us on the rollback. The rollback succeeded after five minutes. "
            "Lesson: always check the migration lock first. ") * 80
    summary = extractive_summary(text, 1500)
    assert summary == extractive_summary(text, 1500) and len(summary) < 1500
    for heading in HEADINGS:
        assert f"## {heading}" in summary
    assert "always check the migration lock" in summary


@pytest.mark.parametrize(("scope", "count", "target"), [
    ("agent", 4, None), ("agent", 5, "team"), ("team", 9, None), ("team", 10, "global"), ("global", 50, None),
])
def test_promotion_thresholds(scope: str, count: int, target: str | None) -> None:
    m = mem(type="procedural", scope=scope, access_count=count)
    assert rules.promotion_target(m, CFG) == target


def test_promoted_or_non_procedural_memories_are_not_promoted() -> None:
    assert rules.promotion_target(mem(type="procedural", access_count=9, promoted_to="mem_x"), CFG) is None
    assert rules.promotion_target(mem(type="semantic", access_count=9), CFG) is None


def test_promoted_copy_fields() -> None:
    data = record(type="procedural", access_count=7, tags=["deploy"], supersedes=["mem_old"])
    copy = rules.promoted_copy(data, new_id="mem_new", scope="team", scope_id="backend", stamp="NOW")
    assert copy["id"] == "mem_new" and copy["tags"] == ["deploy", "promoted"]
    assert (copy["scope"], copy["scope_id"], copy["promoted_from"]) == ("team", "backend", data["id"])
    assert (copy["access_count"], copy["last_accessed"], copy["supersedes"]) == (0, None, [])
    assert copy["created_at"] == copy["updated_at"] == "NOW" and copy["content"] == data["content"]


@pytest.mark.parametrize(("count", "last", "expected"), [
    (0, days_ago(1), True), (3, days_ago(89), False), (3, days_ago(91), True),
    (3, "2027-06-01T00:00:00Z", False),  # a future timestamp never makes a memory stale
])
def test_stale_edges(count: int, last: str, expected: bool) -> None:
    assert rules.is_stale(mem(access_count=count, last_accessed=last), NOW_DT, CFG) is expected


def test_edited_since_run() -> None:
    m = mem(updated_at=days_ago(1))
    assert rules.edited_since_run(m, "old-hash", had_run=True)
    assert not rules.edited_since_run(m, "h", had_run=True)  # same hash as at the last run
    assert not rules.edited_since_run(m, None, had_run=False)  # no earlier run: never
    assert not rules.edited_since_run(mem(), None, had_run=True)  # never edited after creation


def test_content_text_is_summary_details_then_the_other_strings_by_key() -> None:
    """The quick path for the usual content (summary and details only) gives what the rule
    says for every mix of present, empty and non-string values, with or without other keys."""
    import itertools

    from rapidfuzz.utils import default_process

    def spelled_out(content: dict[str, Any]) -> str:
        parts = [content.get("summary"), content.get("details")]
        parts += [content[k] for k in sorted(content) if k not in ("summary", "details")]
        return str(default_process(" ".join(p for p in parts if isinstance(p, str))))

    values: list[Any] = ["Deploy TO staging!", "", None, 3, ["x"], "Émile, 2 times"]
    for summary, details, extra in itertools.product(values, values, [None, "Zz top", 5]):
        for has_summary, has_details in itertools.product([False, True], repeat=2):
            content: dict[str, Any] = {}
            if has_summary:
                content["summary"] = summary
            if has_details:
                content["details"] = details
            if extra is not None:
                content["a_note"] = extra
            assert rules.content_text(content) == spelled_out(content), content


@pytest.mark.parametrize("raw", ["", " ", "!!", "a", "  a  ", "one, two;  three\tfour\nfive",
                                 "x -- y\u3000z\u00a0w\x1cv", "émile   ÉCOLE", "a" * 500 + ",  " * 40 + "b"])
def test_sorted_len_is_the_length_of_the_sorted_token_string(raw: str) -> None:
    from memcli.consolidate.similar import sorted_tokens

    text = rules.content_text({"summary": raw})
    assert rules.sorted_len(text) == len(sorted_tokens(text)) == len(" ".join(text.split()))


def test_normalising_leaves_no_whitespace_but_the_space() -> None:
    """What `rules.sorted_len` counts on: every code point but the plain space that str.split
    takes for whitespace is replaced by normalising (rapidfuzz's default_process)."""
    import sys

    from rapidfuzz.utils import default_process

    every = "".join(chr(c) for c in range(sys.maxunicode + 1) if not 0xD800 <= c <= 0xDFFF)
    kept = default_process("a" + every + "a")
    assert {ch for ch in kept if ch.isspace()} == {" "}
