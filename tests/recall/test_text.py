"""How text becomes index terms: identifiers found in Python behind a byte-class test, and
the recency order of timestamps without datetimes."""

from __future__ import annotations

import pytest

from memcli.recall import rank, text

# tantivy's own regex tokenizer with the pattern the index used before (schema version 4):
# the Python side must find the same terms.
OLD_PATTERN = (r"[\p{L}\p{N}_]+(?:[./:@#\-][\p{L}\p{N}_]+)+|[\p{Ll}\p{N}]+\p{Lu}[\p{L}\p{N}_]*"
               r"|\p{Lu}{2,}\p{Ll}[\p{L}\p{N}_]*")
SAMPLES = [
    "Deploy staging after the migration. Then roll back.",
    "Fixed in v2.3.1, see src/worker/queue_runner.py and refresh_token_cache",
    "getUserName returns None when HTTPServer restarts; user-service on api.example.com:8080",
    "e-mail foo@bar.com #42 a.b",
    "XgetUser and ABCdef and abc9Def",
    "größe/datei.txt and Ünïcode-thing",
    "trailing dot. and comma, and (paren.thesis)",
]


def old_terms(sample: str) -> list[str]:
    import tantivy as tv

    analyzer = tv.TextAnalyzerBuilder(tv.Tokenizer.regex(OLD_PATTERN)).filter(tv.Filter.lowercase()).build()
    return list(analyzer.analyze(sample))


@pytest.mark.parametrize("sample", SAMPLES)
def test_code_terms_are_the_old_tokenizers(sample: str) -> None:
    joined, camel = text.shapes(sample)
    assert text.code_terms(sample, joined, camel) == old_terms(sample)


@pytest.mark.parametrize(("sample", "joined", "camel"), [
    ("Plain prose. With sentences, commas; and CAPS.", False, False),
    ("a.b", True, False), ("a. b", False, False), ("a .b", False, False),
    ("x-y", True, False), ("größe/datei", True, False), ("é.é", True, False),
    ("getUser", False, True), ("HTTPServer", False, True), ("HTTP", False, False), ("abc9Def", False, True),
    ("Version", False, False), ("9A", False, True),
])
def test_shapes_at_their_edges(sample: str, joined: bool, camel: bool) -> None:
    assert text.shapes(sample) == (joined, camel)


def test_shaped_finds_the_same_texts_all_at_once() -> None:
    texts = [*SAMPLES, "", "only prose here", "a\x00b.c", "fooBar"]  # a NUL of its own: one at a time
    assert text.shaped(texts) == [n for n, one in enumerate(texts) if any(text.shapes(one))]
    assert text.shaped(SAMPLES[:1] * 3) == []


@pytest.mark.parametrize("texts", [
    ["a.", "b", "prose", "x", "y.z"],  # a shape never spans two texts: only the last holds one
    ["größe", "über.", "ab", "cD", "é"],  # non-ASCII before: byte offsets are not characters
    ["a.b c.d eF GHi", "", "", "a.b"],  # several hits in one text; empty texts between
    ["aB", "\x00", "\x00x.y", "A\x00B", "x\x00"],  # a text's own NULs
    ["\ud800 a.b", "plain", "q.r"],  # a lone surrogate (kept by surrogatepass)
    ["prose " * 50 + "x.y"] + ["prose"] * 3 + ["Tail" * 3 + "AAb"],  # at a text's very end
])
def test_shaped_at_text_boundaries(texts: list[str]) -> None:
    assert text.shaped(texts) == [n for n, one in enumerate(texts) if any(text.shapes(one))]


def test_camel_parts() -> None:
    assert text.camel_parts("call getUserName on HTTPServer") == "get User Name HTTP Server"
    assert text.camel_parts("all lower case") == ""
    assert text.camel_parts("getUserName", camel=False) == ""


STAMPS = ["2026-10-01T10:00:00Z", "2026-10-01T10:00:01Z", "2026-10-30T08:00:00Z", "2026-10-31T23:59:59Z",
          "2026-10-01T12:00:00+02:00", "2026-10-01T10:00:00.500Z", "2026-10-01T10:00:00.000Z",
          "2026-10-01T10:00:00", "2026-02-28T00:00:00Z", "0001-01-01T00:00:00Z", "not a time", "", None, 42,
          "2026-13-01T00:00:00Z"]


def test_recency_key_sorts_as_the_moment() -> None:
    """Descending by `recency_key` is `briefing_key`'s order of recency (no time: last)."""
    for a in STAMPS:
        for b in STAMPS:
            ka, kb = rank.briefing_key(0, 0, a)[2], rank.briefing_key(0, 0, b)[2]
            ra, rb = rank.recency_key(a), rank.recency_key(b)
            assert (ka < kb) == (ra > rb) and (ka == kb) == (ra == rb), (a, b)
