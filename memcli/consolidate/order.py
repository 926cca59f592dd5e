"""The ``order`` guard: two words trade places around an order word ("staging before
production" vs "production before staging"), a change that sorting the tokens hides.

Registered with the other guards in :mod:`memcli.consolidate.guards`; like them it takes raw
texts or their :class:`TextFeatures`, and works out a text's order triples once per text.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence

from rapidfuzz.utils import default_process

from memcli.consolidate.textfeatures import STOPWORDS, TextFeatures, features

__all__ = ["order_swapped"]

_Text = str | TextFeatures


def _f(value: _Text) -> TextFeatures:
    return value if isinstance(value, TextFeatures) else features(value)


# Words whose two sides cannot trade places without changing the meaning. Verbs are left
# out on purpose: the passive voice swaps their sides ("A replaced B" = "B was replaced by A").
# "to" is one only after "from" ("from X to Y"); elsewhere it is mostly an infinitive.
_ORDER_WORDS = frozenset("before after than over instead into from then".split())
_ORDER_WINDOW = 2  # content words looked at on each side of an order word
# "[.!?;:\n]+(...)" written with the class first: the same matches, but the regex engine then
# skips ahead by the class instead of trying the repeat at every character (twice as fast).
_SENTENCE_SPLIT_RE = re.compile(r"[.!?;:\n][.!?;:\n]*(?:\s+|$)")

# (word before, order word, word after)
_Triple = tuple[str, str, str]


def _is_order_word(words: Sequence[str], pos: int) -> bool:
    """True when ``words[pos]`` is an order word in its place."""
    word = words[pos]
    return word in _ORDER_WORDS or (word == "to" and "from" in words[:pos])


def _neighbours(words: Sequence[str], marks: Sequence[bool], pos: int, step: int) -> list[str]:
    """Up to _ORDER_WINDOW content words from ``pos`` in direction ``step``, stopping at the
    next order word."""
    found: list[str] = []
    pos += step
    while 0 <= pos < len(words) and not marks[pos] and len(found) < _ORDER_WINDOW:
        if words[pos] != "to":  # an infinitive "to" is not content
            found.append(words[pos])
        pos += step
    return found


def _order_triples(text: TextFeatures) -> frozenset[_Triple]:
    """(x, order word, y) for every content word x shortly before an order word and y
    shortly after it, within one sentence."""
    # No order word in the text (a "to" counts only after "from"): no sentence has a triple.
    present = _ORDER_WORDS.intersection(text.word_set)
    if not present:
        return frozenset()
    raw = text.text
    if raw.isascii():
        sentences = _sentences_holding(raw, present)
    else:
        sentences = _SENTENCE_SPLIT_RE.split(raw)
    triples: set[_Triple] = set()
    for sentence in sentences:
        triples.update(_sentence_triples(sentence))
    return frozenset(triples)


def _sentences_holding(text: str, words: Collection[str]) -> list[str]:
    """The sentences of an ASCII text (pieces of ``_SENTENCE_SPLIT_RE.split(text)``) that hold
    one of ``words`` (lower case) as a substring in any case, in order: every sentence whose
    words include one of them (an ASCII text's words are its letters and digits in a row,
    lowered). Each sentence is found from where the words stand, without splitting the rest
    of the text (a long text holds a few order words in dozens of sentences)."""
    lowered = text.lower()  # an ASCII text lowers in place
    places: list[int] = []
    for word in words:
        at = lowered.find(word)
        while at >= 0:
            places.append(at)
            at = lowered.find(word, at + 1)
    sentences: list[str] = []
    covered = -1  # where the last sentence found ends
    for place in sorted(places):
        if place < covered:
            continue
        start, covered = _sentence_around(text, place)
        sentences.append(text[start:covered])
    return sentences


def _sentence_around(text: str, place: int) -> tuple[int, int]:
    """Where the sentence (a piece of ``_SENTENCE_SPLIT_RE.split(text)``) holding the letter or
    digit at ``place`` starts and ends. A separator holds marks and spaces only, so none
    covers a letter or a digit: the pattern scanned from such a letter's end finds what the
    scan of the whole text finds from there. The scan starts a little before ``place``,
    further back until a separator before ``place`` is found (or the text starts)."""
    back = 256
    while True:
        start = max(place - back, 0)
        while start > 0 and not text[start - 1].isalnum():
            start -= 1
        end = len(text)
        sentence_start = 0 if start == 0 else -1
        for match in _SENTENCE_SPLIT_RE.finditer(text, start):
            if match.start() >= place:
                end = match.start()
                break
            sentence_start = match.end()
        if sentence_start >= 0:
            return sentence_start, end
        back *= 4


def _sentence_triples(sentence: str) -> frozenset[_Triple]:
    """The order triples of one sentence (see :func:`_order_triples`)."""
    # No order word in this sentence (nor a "from"): no triple. (Splitting and one set
    # test cost less than eight substring tests.)
    words = default_process(sentence).split()
    if _ORDER_WORDS.isdisjoint(words):
        return frozenset()
    triples: set[_Triple] = set()
    words = [w for w in words if w not in STOPWORDS or w in _ORDER_WORDS or w == "to"]
    marks = [_is_order_word(words, pos) for pos in range(len(words))]
    for pos, word in enumerate(words):
        if marks[pos]:
            after = _neighbours(words, marks, pos, 1)
            triples.update(
                (x, word, y) for x in _neighbours(words, marks, pos, -1) for y in after if x != y
            )
    return frozenset(triples)


def order_swapped(text_a: _Text, text_b: _Text) -> bool:
    """True when two words trade places around an order word (before, after, than, over,
    instead, into, then, from... to): one text says "staging before production" and never
    "production before staging", the other the reverse.

    The default scorer sorts the tokens, so it rates such texts identical.
    """
    triples_a = _f(text_a).once("order", _order_triples)
    triples_b = _f(text_b).once("order", _order_triples)
    return any(
        (y, word, x) in triples_b and (y, word, x) not in triples_a and (x, word, y) not in triples_b
        for x, word, y in triples_a
    )
