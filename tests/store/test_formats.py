"""The two file formats (`formats`): round trips that keep unknown fields, the Markdown layout,
a reason for each unparsable file, and the bounds on YAML (alias bombs, nesting)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memcli.store import formats
from tests import sweep
from tests.conftest import record


@pytest.mark.parametrize("fmt", ["json", "md"])
def test_round_trip_keeps_unknown_fields(fmt: str) -> None:
    data = record(details="line one\n\nline two", extra_field={"nested": [1, "two"]}, rank=3)
    data["content"]["timeline"] = [{"at": "2026-01-01T00:00:00Z", "event": "e"}]
    data["content"]["source"] = "chat"
    assert formats.decode(formats.encode(data, fmt), fmt) == data


def test_markdown_layout_puts_details_in_the_body() -> None:
    data = record(details="The body text.")
    text = formats.encode(data, "md").decode()
    front, body = text.split("\n---\n", 1)
    assert "details" not in front and "content:" in front and body.strip() == "The body text."
    assert f"created_at: '{data['created_at']}'" in front  # timestamps are quoted strings


def test_markdown_with_unquoted_timestamps_reads_as_strings() -> None:
    text = "---\nid: mem_a\ntype: semantic\ncreated_at: 2026-01-01T00:00:00Z\ncontent:\n  summary: s\n---\nbody\n"
    data = formats.decode(text.encode(), "md")
    assert data["created_at"] == "2026-01-01T00:00:00Z" and data["content"]["details"] == "body"


@pytest.mark.parametrize(("raw", "fmt", "reason"), [
    (b"{not json", "json", "not valid JSON"),
    (b"[1, 2]", "json", "not a JSON object"),
    (b"\xff\xfe{}", "json", "not UTF-8 text"),
    (b"no front matter here", "md", "no YAML front matter"),
    (b"---\nid: [unclosed\n---\nbody", "md", "broken front matter"),
    (b"---\n- a list\n---\nbody", "md", "broken front matter"),
])
def test_unparsable_files_give_a_reason(raw: bytes, fmt: str, reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        formats.decode(raw, fmt)


_text = st.text(st.characters(blacklist_categories=("Cs", "Cc")), max_size=40)


@settings(max_examples=sweep.scale(15, 60), deadline=None)
@given(tags=st.lists(_text.filter(str.strip), max_size=4), summary=_text,
       extra=st.dictionaries(st.from_regex(r"[a-z]{1,8}", fullmatch=True), st.integers(-2**63, 2**63 - 1) | _text, max_size=3))
def test_json_round_trip_property(tags: list[str], summary: str, extra: dict[str, object]) -> None:
    data = record(tags=tags, summary=summary)
    data.update({f"x_{k}": v for k, v in extra.items()})
    assert formats.decode(formats.encode(data, "json"), "json") == data


# ---------------------------------------------------------------- alias bombs


def test_expanded_size_counts_every_copy_of_a_shared_node() -> None:
    leaf = ["x"] * 9  # 10 values: the list and its nine items
    assert formats.expanded_size(leaf, 10**6) == 10
    assert formats.expanded_size({"a": leaf, "b": leaf}, 10**6) == 1 + 2 * 10
    # nine copies of nine copies: 1 + 9 * (1 + 9 * 10)
    assert formats.expanded_size([[leaf] * 9] * 9, 10**6) == 1 + 9 * (1 + 9 * 10)


def test_expanded_size_stops_just_past_its_limit_and_a_cycle_is_over_it() -> None:
    bomb: list[object] = ["lol"] * 9
    for _ in range(8):
        bomb = [bomb] * 9  # 9**9 leaves once copied out
    assert formats.expanded_size(bomb, 100) == 101
    ring: list[object] = []
    ring.append(ring)
    assert formats.expanded_size(ring, 100) > 100


def test_front_matter_at_the_value_limit_loads_and_one_past_it_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    text = "---\nid: mem_A\ncontent:\n  a: &a [x, x, x]\n  b: [*a, *a]\n---\n"
    # values: the mapping, id, content, a (4), b (1 + 2 * 4) = 1 + 1 + 1 + 4 + 9 = 16
    monkeypatch.setattr(formats, "MAX_YAML_VALUES", 16)
    assert formats.decode(text.encode(), "md")["content"]["b"] == [["x"] * 3] * 2
    monkeypatch.setattr(formats, "MAX_YAML_VALUES", 15)
    with pytest.raises(ValueError, match="more than 15 values"):
        formats.decode(text.encode(), "md")


def test_nesting_made_of_aliases_is_refused_as_nesting_not_as_size() -> None:
    lines = ["---", "id: mem_A", "content:", "  a0: &a0 [x]"]
    lines += [f"  a{n}: &a{n} [*a{n - 1}]" for n in range(1, formats.MAX_DEPTH + 5)]
    text = "\n".join(lines) + "\n---\n"
    with pytest.raises(ValueError, match=f"nested more than {formats.MAX_DEPTH} levels"):
        formats.decode(text.encode(), "md")
