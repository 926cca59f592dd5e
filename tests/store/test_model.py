"""Records: validation messages, the quick validity check, ids, time."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memcli.store import model
from tests.conftest import record


def problems(data: object, file_id: str | None = None) -> list[str]:
    return model.validate(data, file_id=file_id)[0]


def test_valid_record_has_no_problems() -> None:
    data = record()
    assert model.validate(data, file_id=data["id"]) == ([], [])


@pytest.mark.parametrize("bad_id", ["mem_", "mem_a/b", "../etc/passwd", "mem_" + "a" * 65, "MEM_x", 7])
def test_bad_ids_are_rejected(bad_id: object) -> None:
    assert any("bad id" in p for p in problems(record(id=bad_id)))


def test_id_must_match_file_name() -> None:
    assert any("does not match the file name" in p for p in problems(record(), file_id="mem_other"))


@pytest.mark.parametrize(("field", "value", "message"), [
    ("type", "dream", "unknown type"),
    ("priority", "urgent", "unknown priority"),
    ("scope", "planet", "unknown scope"),
    ("tags", "deploy", "'tags' must be a list of strings"),
    ("tags", [1, 2], "'tags' must be a list of strings"),
    ("access_count", -1, "'access_count' must be a non-negative integer"),
    ("access_count", True, "'access_count' must be a non-negative integer"),
    ("access_count", "3", "'access_count' must be a non-negative integer"),
    ("consent", "yes", "'consent' must be true or false"),
    ("content", "text", "'content' must be an object"),
    ("promoted_to", 5, "'promoted_to' must be a string or null"),
    ("created_at", "yesterday", "'created_at' is not an ISO 8601 timestamp"),  # updated_at too
    ("updated_at", 12, "'updated_at' must be an ISO 8601 timestamp string"),
    ("last_accessed", "2026-13-01T00:00:00Z", "'last_accessed' is not an ISO 8601 timestamp"),
])
def test_each_validation_error_names_the_field(field: str, value: object, message: str) -> None:
    assert any(message in p for p in problems(record(**{field: value})))


def test_missing_required_fields() -> None:
    data = record()
    del data["content"], data["created_at"]
    found = problems(data)
    assert "missing field 'content'" in found and "missing field 'created_at'" in found


def test_details_and_timeline_types() -> None:
    data = record()
    data["content"] = {"summary": "s", "details": 5, "timeline": "x"}
    found = problems(data)
    assert "field 'content.details' must be a string" in found
    assert "field 'content.timeline' must be a list" in found


def test_timestamp_without_zone_is_utc_with_warning() -> None:
    errors, warnings = model.validate(record(created_at="2026-01-01T10:00:00",
                                             updated_at="2026-01-01T10:00:00Z"))
    assert errors == [] and warnings == ["'created_at' has no time zone; read as UTC"]
    assert model.parse_ts("2026-01-01T10:00:00")[0] == dt.datetime(2026, 1, 1, 10, tzinfo=dt.timezone.utc)


def test_offsets_are_converted_to_utc() -> None:
    assert model.format_ts(model.parse_ts("2026-01-01T10:00:00+02:00")[0]) == "2026-01-01T08:00:00Z"


def test_memcli_now_replaces_the_clock() -> None:
    assert model.format_ts(model.now()) == "2026-11-22T00:00:00Z"


def test_ulids_sort_by_time_and_are_valid_ids() -> None:
    early = model.new_memory_id(model.parse_ts("2026-01-01T00:00:00Z")[0])
    late = model.new_memory_id(model.parse_ts("2026-06-01T00:00:00Z")[0])
    assert early < late and len(early) == 30 and model.is_valid_id(early)
    seeded = model.parse_ts("2026-01-01T00:00:00Z")[0]
    assert model.new_memory_id(seeded, "s") == model.new_memory_id(seeded, "s")


_ODD_VALUES = [None, True, False, 0, -1, 3, 2.5, "", "x", "normal", "agent", "semantic", "mem_a",
               "2026-01-01T00:00:00Z", "2026-01-01T00:00:00", "2026-02-30T00:00:00Z", [], ["a"], [1],
               {}, {"details": 3}, {"details": "d"}, {"timeline": "t"}, {"timeline": []}, ["mem_a"]]
_FIELDS = ["id", "type", "priority", "scope", "scope_id", "subtype", "created_by", "consent", "content",
           "promoted_to", "promoted_from", "tags", "supersedes", "superseded_by", "access_count",
           "created_at", "updated_at", "last_accessed", "other"]


@settings(max_examples=400, deadline=None)
@given(st.dictionaries(st.sampled_from(_FIELDS), st.sampled_from(_ODD_VALUES), max_size=6),
       st.lists(st.sampled_from(_FIELDS), max_size=3))
def test_the_quick_validity_check_never_passes_what_validate_objects_to(
        changes: dict[str, object], dropped: list[str]) -> None:
    data = record(id="mem_a")
    data.update(changes)
    for name in dropped:
        data.pop(name, None)
    if model.plainly_valid(data, "mem_a"):
        assert model.validate(data, file_id="mem_a") == ([], [])
    assert not model.plainly_valid(data, "mem_b") or data.get("id") == "mem_b"


def test_the_quick_validity_check_passes_the_usual_record() -> None:
    data = record(id="mem_a", tags=["x"], scope="agent", scope_id="a1", access_count=2,
                  updated_at="2026-01-02T03:04:05Z", promoted_from=None)
    assert model.validate(data, file_id="mem_a") == ([], []) and model.plainly_valid(data, "mem_a")
    assert not model.plainly_valid(data, "mem_b") and not model.plainly_valid([data], "mem_a")


@pytest.mark.parametrize("year", [2023, 2024, 1, 9999])
def test_the_quick_stamp_pattern_takes_real_days_only(year: int) -> None:
    """Every real day of a year but 29 February takes the quick path (a canonical stamp is used
    as it is), every day that does not exist does not: for those the full parse decides."""
    for month in range(1, 13):
        for day in range(1, 33):
            stamp = f"{year:04d}-{month:02d}-{day:02d}T23:59:59Z"
            try:
                real = dt.date(year, month, day) is not None
            except ValueError:
                real = False
            quick = model._CANONICAL_TS.match(stamp) is not None
            assert quick == (real and (month, day) != (2, 29)), stamp
            data = record(id="mem_a", created_at=stamp)
            assert (model.validate(data, file_id="mem_a") == ([], [])) == real, stamp


def test_year_zero_is_not_a_time() -> None:
    data = record(id="mem_a", created_at="0000-01-01T00:00:00Z")
    assert not model.plainly_valid(data, "mem_a")
    assert model.validate(data, file_id="mem_a")[0]


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(_FIELDS), st.sampled_from(_ODD_VALUES), max_size=6))
def test_a_plainly_valid_record_is_usable_for_its_text(changes: dict[str, object]) -> None:
    """`content_usable` (a planned memory read for its text) asks less than `plainly_valid`,
    never more: a record the quick validity check passes may always serve its text."""
    data = record(id="mem_a")
    data.update(changes)
    if model.plainly_valid(data, "mem_a"):
        assert model.content_usable(data, "mem_a")
