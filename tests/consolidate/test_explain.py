"""A merge's report line: the excerpt of a text, read from its head, is the one the whole
text gives."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from memcli.consolidate import rules
from memcli.consolidate.explain import excerpt


def _whole(content: dict[str, str], limit: int = 90) -> str:
    """The excerpt as the whole text's lines and words give it."""
    text = rules.raw_text(content).strip()
    line = " ".join(text.splitlines()[0].split()) if text else ""
    return '"' + (line if len(line) <= limit else line[: limit - 1].rstrip() + "…") + '"'


_PIECES = st.sampled_from(["deploy", "the", "a", "queue", " ", "  ", "\t", "\n", "\r", "\r\n", "\x0b",
                           "\x1c", "\u2028", "\u00a0", "\u0085", "x" * 95, " " * 400, "é", "."])


@settings(max_examples=400, deadline=None)
@given(st.lists(_PIECES, max_size=120), st.lists(_PIECES, max_size=40), st.integers(1, 120))
def test_the_excerpt_is_the_whole_texts(summary: list[str], details: list[str], limit: int) -> None:
    content = {"summary": "".join(summary), "details": "".join(details)}
    assert excerpt(content, limit) == _whole(content, limit)


def test_the_excerpt_at_the_heads_edges() -> None:
    for text in ["", " ", "word", "w" * 89, "w" * 90, "w" * 91, " " * 367 + "word", " " * 368 + "word",
                 "a " * 200, "a" + " " * 366 + "b\nc", "x" * 367 + "\r\ny", "x" * 366 + "\r\ny",
                 "short\n" + "y" * 500, "a" * 500]:
        for limit in (1, 2, 89, 90, 91):
            assert excerpt({"summary": text}, limit) == _whole({"summary": text}, limit), (text, limit)
