"""The ``identifiers`` guard: each of two texts names a command, flag, path or setting the other
lacks ("`make test`" vs "`make lint`", "settings.toml" vs "secrets.toml").

Registered with the other guards in :mod:`memcli.consolidate.guards`; like them it takes raw
texts or their :class:`TextFeatures`, and works out a text's identifiers once per text.
"""

from __future__ import annotations

import re

from memcli.consolidate.textfeatures import TextFeatures, features

__all__ = ["identifiers_differ"]

_Text = str | TextFeatures


def _f(value: _Text) -> TextFeatures:
    return value if isinstance(value, TextFeatures) else features(value)


_CODE_SPAN_RE = re.compile(r"`([^`\n]+)`")
# A bare word that can only be code: a flag ("-x", "--force"), or a word holding "_", "/",
# "=", "@" or ":" between word characters (BILLING_QUEUE_URL, deploy/ledger-api,
# lock:invoices), or a dot between letters (settings.toml, m5.large). Dotted acronyms
# ("U.S.") and numbers are not code.
_CODE_WORD_RE = re.compile(
    r"-{1,2}[A-Za-z][\w-]*"
    r"|\S*\w[_/=@:]\w\S*"
    r"|\S*[A-Za-z0-9][.][A-Za-z]\S*"
)
_CODE_MARK_RE = re.compile(r"[-_/=@:.]")  # each _CODE_WORD_RE form holds one of these
_ACRONYM_DOTS_RE = re.compile(r"(?:[A-Za-z]\.)+[A-Za-z]?\.?")
_EDGE_PUNCTUATION = "\"'()[]{}<>,;.!?`*"


def _identifiers(text: TextFeatures) -> frozenset[str]:
    """Every word of a code span (`make test`) and every bare word shaped like code, in lower
    case, without the punctuation around it."""
    found: set[str] = set()
    bare = text.text
    if "`" in bare:
        for span in _CODE_SPAN_RE.findall(bare):
            found.update(w.strip(_EDGE_PUNCTUATION).lower() for w in span.split())
        bare = _CODE_SPAN_RE.sub(" ", bare)
    if _may_hold_code(bare):
        found.update(_bare_code(bare))
    found.discard("")
    return frozenset(found)


def _bare_code(bare: str) -> set[str]:
    """The bare words of a text shaped like code (:func:`_code_word`), each distinct word
    looked at once (the answer is a set); the words known not to be code, most of a text, set
    aside at once."""
    if len(_CODE_WORDS) + len(_NOT_CODE) > _CODE_WORDS_MAX:
        _CODE_WORDS.clear()
        _NOT_CODE.clear()
    found: set[str] = set()
    for word in set(bare.split()) - _NOT_CODE:
        code = _CODE_WORDS.get(word)
        if code is None:
            code = _code_word(word)
            if not code:
                _NOT_CODE.add(word)
                continue
            _CODE_WORDS[word] = code
        found.add(code)
    return found


def _may_hold_code(text: str) -> bool:
    """False when no bare word of the text can be shaped like code: each form of
    _CODE_WORD_RE holds a "-", one of "_/=@:", or a dot before an ASCII letter, and stripping
    the punctuation around a word adds none. Most prose holds none of them but the dot."""
    return any(map(text.__contains__, _CODE_CHARS)) or bool(_DOT_LETTER_RE.search(text))


_CODE_CHARS = "-_/=@:"
_DOT_LETTER_RE = re.compile(r"\.[A-Za-z]")


def _code_word(word: str) -> str:
    """A bare word as code (lower case, the punctuation around it stripped), or "" when it is
    not shaped like code."""
    word = word.strip(_EDGE_PUNCTUATION)
    # Code holds one of - _ / = @ : . (_CODE_MARK_RE); most words are not matched at all.
    if (_CODE_MARK_RE.search(word) and _CODE_WORD_RE.fullmatch(word)
            and not _ACRONYM_DOTS_RE.fullmatch(word)):
        return word.lower()
    return ""


# Bare words shaped like code -> _code_word(word), and bare words known not to be code: a
# store repeats its words.
_CODE_WORDS: dict[str, str] = {}
_NOT_CODE: set[str] = set()
_CODE_WORDS_MAX = 65_536  # both emptied when they hold more (a few MB)


def identifiers_differ(text_a: _Text, text_b: _Text) -> bool:
    """True when each text names a command word, flag, path or setting the other lacks:
    "`make test`" vs "`make lint`", "--force-with-lease" vs "--force", "settings.toml" vs
    "secrets.toml", "BILLING_QUEUE_NAME" vs "BILLING_QUEUE_URL".

    Code is compared exactly (a letter apart is another command), in lower case. Words in
    backticks are code; so is a bare word shaped like code (a flag, or holding "_", "/",
    "=", "@", ":" or a dot between letters). A text that adds code the other lacks, or
    writes the same command with and without backticks, does not disagree.
    """
    ids_a = _f(text_a).once("identifiers", _identifiers)
    ids_b = _f(text_b).once("identifiers", _identifiers)
    return bool(ids_a - ids_b) and bool(ids_b - ids_a)
