"""Guards for what one text adds that the other lacks: a clause, a run of new words, a qualifier.

A merge keeps one text and archives the other. When one of two similar texts states something
more (a clause of its own, a condition, a place), the pair does not state the same facts, and
a merge would lose what the archived text added. These guards find such additions; they are
registered, with the others, in :mod:`memcli.consolidate.guards` (``extra_detail``, ``clause``,
``qualifier``), and take raw texts or their :class:`TextFeatures` like every guard.

What restatements add without meaning anything (an attribution such as "..., he said.", see
:mod:`memcli.consolidate.restate`) does not count as an addition.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from itertools import compress
from operator import not_
from typing import NamedTuple

from memcli.consolidate.restate import REPORTING_VERBS, SPEECH_VERBS
from memcli.consolidate.textfeatures import (
    STEM_LETTERS,
    STOPWORDS,
    TextFeatures,
    diff_blocks,
    features,
    ordered,
    word_stems,
)

__all__ = [
    "CLAUSE_MIN_NEW",
    "CLAUSE_NEW_WITHOUT_VERB",
    "EXTRA_DETAIL_CONTENT",
    "EXTRA_DETAIL_RUN",
    "QUALIFIER_MAX_CONTEXT",
    "QUALIFIER_MAX_WORDS",
    "clause_added",
    "extra_detail",
    "qualifier_added",
]

_Text = str | TextFeatures


def _f(value: _Text) -> TextFeatures:
    return value if isinstance(value, TextFeatures) else features(value)


# --------------------------------------------------------------------------------------------
# extra detail

# A run of this many new words in a row is taken for a clause the other text lacks. On MRPC
# train, 4 rejects too many true paraphrases and 6 lets too many different pairs through.
EXTRA_DETAIL_RUN = 5
# ... if at least this many of them carry meaning: five function words the other text happens
# not to use ("of them had also been") state nothing of their own.
EXTRA_DETAIL_CONTENT = 2


def _longest_new_run(a: TextFeatures, b: TextFeatures, enough: int | None = None) -> int:
    """Length of the longest run of words of A whose stem B lacks, counted once the run holds
    :data:`EXTRA_DETAIL_CONTENT` content words; with ``enough``, the length of the first run
    that reaches it (the caller only asks whether one does).

    A function word that B also has neither extends nor ends a run ("the", "of" bridge the
    new words of one clause); any other shared word ends it. The words of a bare attribution
    at either end of A ("..., Fraley said.") are not looked at.
    """
    stems_b = b.stems
    best = current = content = 0
    for stem, is_content in a.once("body_walk", _body_walk):
        if stem not in stems_b:
            current += 1
            content += is_content
            if content >= EXTRA_DETAIL_CONTENT and current > best:
                best = current
                if enough is not None and best >= enough:
                    return best
        elif is_content:
            current = content = 0
    return best


def _body_walk(text: TextFeatures) -> tuple[tuple[str, bool], ...]:
    """The words :func:`_longest_new_run` walks (a bare attribution aside), as (stem, is a
    content word): worked out once per text, walked once per pair."""
    lead, trail = text.attribution_words
    words = text.words[lead:len(text.words) - trail]
    stems = word_stems(text.word_set)
    return tuple(zip(map(stems.__getitem__, words), _content_marks(words), strict=True))  # in C


def _content_marks(words: Sequence[str]) -> Iterator[bool]:
    """Whether each word is a content word (not a function word), in C."""
    return map(not_, map(STOPWORDS.__contains__, words))




def _body_stems(text: TextFeatures) -> tuple[dict[str, int], dict[str, int]]:
    """How often each stem occurs among the words :func:`_longest_new_run` walks (a bare
    attribution aside), over all words and over content words."""
    walk = text.once("body_walk", _body_walk)
    stems = [stem for stem, _ in walk]
    # Counted in C: a long text walks hundreds of words.
    return Counter(stems), Counter(compress(stems, [is_content for _, is_content in walk]))


def _may_hold_run(a: TextFeatures, b: TextFeatures) -> bool:
    """False when A cannot hold a run :func:`extra_detail` counts: fewer new words in all, or
    fewer new content words, than a run needs. Set operations on what each text holds, so
    that the word-by-word walk is only made for the few pairs that might have such a run."""
    counts, content = a.once("body_stems", _body_stems)
    stems_b = b.stems
    if sum(content[stem] for stem in content.keys() - stems_b) < EXTRA_DETAIL_CONTENT:
        return False
    return sum(counts[stem] for stem in counts.keys() - stems_b) >= EXTRA_DETAIL_RUN


class _Walk(NamedTuple):
    """The words :func:`_body_walk` walks: ``text.words[start:end]`` (a bare attribution
    aside), and the set of their stems. Their stems in order and which of them are function
    words are looked up only for a pair that needs them (:func:`_holds_new_run`)."""

    start: int
    end: int
    stem_set: frozenset[str]


def _walk_arrays(text: TextFeatures) -> _Walk:
    """:func:`_body_walk`'s words as a :class:`_Walk`."""
    lead, trail = text.attribution_words
    end = len(text.words) - trail
    if lead == trail == 0:  # the walk holds every word: its stems are the text's
        return _Walk(0, end, text.stems)
    return _Walk(lead, end, frozenset(text.stem_sequence[lead:end]))


def _function_words(text: TextFeatures) -> bytes:
    """Which of the walk's words are function words: a byte each, 1 for a function word, 0
    for a content word (made in C, and searched in C for the content words between two
    positions)."""
    walk = text.once("walk", _walk_arrays)
    return bytes(map(STOPWORDS.__contains__, text.words[walk.start:walk.end]))


def _holds_new_run(a: TextFeatures, b: TextFeatures) -> bool:
    """True when A holds a run of new words :func:`extra_detail` counts (what
    ``_may_hold_run(a, b) and _longest_new_run(a, b, EXTRA_DETAIL_RUN) >= EXTRA_DETAIL_RUN``
    says), found from the positions of A's new words alone.

    Between two new words of A stand only words B has; one of them a content word ends the
    run, which a search of the function-word marks between them tells without walking there.
    Two near copies have few new words, so a pair costs a few set operations."""
    walk = a.once("walk", _walk_arrays)
    new_stems = walk.stem_set - b.stems
    if not new_stems:
        return False
    stems = a.stem_sequence[walk.start:walk.end]
    new = list(compress(range(len(stems)), map(new_stems.__contains__, stems)))
    if len(new) < EXTRA_DETAIL_RUN:
        return False
    marks = a.once("function_words", _function_words)
    run = run_content = 0
    last = -1
    for pos in new:
        if last >= 0 and marks.find(0, last + 1, pos) >= 0:  # a content word B has stands between
            run = run_content = 0
        run += 1
        run_content += 1 - marks[pos]  # 1 for a content word
        if run >= EXTRA_DETAIL_RUN and run_content >= EXTRA_DETAIL_CONTENT:
            return True
        last = pos
    return False


def extra_detail(text_a: _Text, text_b: _Text) -> bool:
    """True when either text holds a run of new words (a clause) that the other lacks.

    Rewording swaps a word here and there; five new words in a row, two of them content words,
    are a statement of their own ("restart the worker after a deploy, unless the queue still
    holds pending jobs"). A
    merge keeps one text and archives the other, so such a pair goes to a human rather than
    silently losing the clause. A bare attribution ("..., said Gov. John Baldacci on
    Tuesday.") is not such a clause; an attribution that says more still counts ("..., he
    said to a standing ovation.").
    """
    a, b = _f(text_a), _f(text_b)
    return _holds_new_run(a, b) or _holds_new_run(b, a)


# --------------------------------------------------------------------------------------------
# clause

# A one-sided phrase with at least this many new content words and a verb is a clause.
CLAUSE_MIN_NEW = 2
# A one-sided phrase with this many new content words is a statement of its own even when no
# verb is recognised in it ("despite hefty losses against the euro").
CLAUSE_NEW_WITHOUT_VERB = 4
# Verbs recognised without a tagger: auxiliaries and copulas, common irregular past forms, and
# regular past forms ("-ed", bar a few words that only look like one).
_AUXILIARIES = frozenset(
    "is are was were be been being has have had do does did will would can could may might "
    "shall should must am".split()
)
_IRREGULAR_PAST = frozenset(
    """came went took gave made found won lost lay ran saw began became left held kept brought
    bought sold fell rose struck met paid sent spent built thought felt led grew knew threw broke
    chose drove ate hit put set cut quit hurt shut spread stood sat stole fought caught taught
    sought dealt meant forgot got hung lit shot slid spoke swore swept swam swung tore woke wore
    withdrew undertook overtook arose known given taken seen done gone shown""".split()
)
_NOT_PAST = frozenset(
    """aged based need feed seed deed reed heed speed breed greed bleed steed indeed hundred
    red bed shed wed sled naked wicked sacred beloved kindred rugged ragged jagged crooked
    learned""".split()
)
# Words that open a clause of their own ("..., where the old remains are stored").
_SUBORDINATORS = frozenset(
    "who whom whose which where when while because although though if unless whereas as after "
    "before since until so".split()
)
_SUBJECTS = frozenset("he she they we i you it".split())


def _verbs(text: TextFeatures, start: int, end: int) -> list[str]:
    """The words of ``text.aligned[start:end]`` taken for verbs (speech verbs and names aside):
    auxiliaries, irregular past forms, "-ed" forms, and a word right after a subject pronoun
    ("they chatted", "she accepts")."""
    found: list[str] = []
    sequence, names = text.sequence, text.name_positions  # the canonical forms of text.aligned
    for pos in range(start, end):
        canon = sequence[pos]
        if canon in SPEECH_VERBS or pos in names:
            continue
        if (canon in _AUXILIARIES or canon in _IRREGULAR_PAST
                or (len(canon) >= 4 and canon.endswith("ed") and canon not in _NOT_PAST)
                or (pos > start and sequence[pos - 1] in _SUBJECTS and canon not in STOPWORDS)):
            found.append(canon)
    return found


def _reports(words: Sequence[str]) -> bool:
    """True when the phrase is an attribution or a reporting parenthesis: it holds a speech
    verb ("Rumsfeld said"), or ends in a reporting verb ("I feel that", "as you know",
    "researchers have found")."""
    if any(w in SPEECH_VERBS for w in words):
        return True
    last = words[-1] if words[-1] != "that" or len(words) == 1 else words[-2]
    return last in REPORTING_VERBS


def _clause(text: TextFeatures, start: int, end: int, other: TextFeatures) -> bool:
    """True when ``text.aligned[start:end]``, which the other text lacks, is a clause."""
    words = text.sequence[start:end]
    content = [w for w in words if w not in STOPWORDS and not w[0].isdigit()]
    new = [w for w in content if w not in other.sequence_set and w[:STEM_LETTERS] not in other.stems]
    # Mostly words the other text has: a passage moved (and reworded), not added.
    if not new or len(new) * 2 < len(content) or _reports(words):
        return False
    if len(new) >= CLAUSE_NEW_WITHOUT_VERB:
        return True
    if not _verbs(text, start, end):
        return False
    return len(new) >= CLAUSE_MIN_NEW or (
        len(words) >= 3 and (words[0] in _SUBORDINATORS or any(w in _SUBJECTS for w in words)))


def clause_added(text_a: _Text, text_b: _Text) -> bool:
    """True when one text adds a clause where the other has nothing: "... alone in the
    apartment" / "... alone there as she lay dead", "... passed stricter bans" / "following
    California's lead, ... passed stricter bans", "the cache is warm" / "the cache is warm,
    and they checked it".

    A clause is a phrase the other text lacks with new words and a verb: two new content words
    and a verb, or one with a subordinator or a subject of its own ("where you are measured",
    "and she accepts that"), or four new content words with or without a recognised verb;
    and at least half of its content words are new (else it is a passage moved elsewhere and
    reworded, which the alignment also shows as a phrase on one side only). A
    bare attribution is set aside first (the texts' :attr:`TextFeatures.statement`), and a
    phrase that only reports ("Rumsfeld said", "I feel that", "as you know") is not a clause.
    Only additions count: where the other text says something else in the same place, the
    other guards decide.
    """
    first, second = ordered(_f(text_a).statement, _f(text_b).statement)
    for op in diff_blocks(first, second):
        if op.tag == "delete" and _clause(first, op.a0, op.a1, second):
            return True
        if op.tag == "insert" and _clause(second, op.b0, op.b1, first):
            return True
    return False


# --------------------------------------------------------------------------------------------
# qualifier

# Words that open a qualifying phrase: where, when, for whom, on what, how far.
_QUALIFIER_OPENERS = frozenset(
    """in on at to for from with within during after before since until till via per except
    across inside outside behind near through under over against without only unless if
    when while""".split()
)
# A one-sided phrase up to this many words is a qualifier; a longer one is extra_detail's.
QUALIFIER_MAX_WORDS = 4
# A qualifier narrows a short statement ("the cache is disabled in production"); in a long one
# (the news sentences of MRPC train, 12-20 content words) such a phrase is mostly an aside a
# restatement adds or drops ("said on Tuesday", "in Toronto"). Above this many content words
# in the shorter text, the guard stays quiet: at 9 it costs 0.6% of MRPC train's paraphrases.
QUALIFIER_MAX_CONTEXT = 9


def _qualifier(words: Sequence[str], other: TextFeatures) -> bool:
    """True when ``words`` (inserted on one side only) form a qualifying phrase with at least
    one content word the other text lacks in every form."""
    return (
        0 < len(words) <= QUALIFIER_MAX_WORDS
        and words[0] in _QUALIFIER_OPENERS
        and any(w not in STOPWORDS and not w[0].isdigit() and w not in other.sequence_set
                and w[:STEM_LETTERS] not in other.stems for w in words[1:])
    )


def _long_statement(text: TextFeatures) -> bool:
    """True when the text has more than :data:`QUALIFIER_MAX_CONTEXT` content words. Its
    distinct aligned words that are not function words are content words, each once at
    least: when they are enough, the content words need not be listed (a long text's set
    difference costs a fraction of a walk over its words)."""
    distinct = text.sequence_set
    # More distinct words than function words and the limit: enough without a set operation
    # (a long text); else those that are not function words.
    if (len(distinct) > len(STOPWORDS) + QUALIFIER_MAX_CONTEXT
            or len(distinct - STOPWORDS) > QUALIFIER_MAX_CONTEXT):
        return True
    return text.content_count > QUALIFIER_MAX_CONTEXT


def qualifier_added(text_a: _Text, text_b: _Text) -> bool:
    """True when one text adds, where the other has nothing, a short qualifying phrase with a
    new word: "... invest in the share market in India?" vs "... invest in the share
    market?", "the cache is disabled in production" vs "the cache is disabled".

    The longer text states something narrower (a place, an environment, a condition);
    merging would keep one claim and lose the other. Only in short statements (at most
    :data:`QUALIFIER_MAX_CONTEXT` content words in the shorter text): in a long one such a
    phrase is mostly an aside. Phrases of five or more new words are
    the ``extra_detail`` guard's, and a phrase whose words the other text has elsewhere was
    moved, not added.
    """
    first, second = ordered(_f(text_a), _f(text_b))
    if _long_statement(first) and _long_statement(second):
        return False
    seq_a, seq_b = first.sequence, second.sequence
    for op in diff_blocks(first, second):
        if op.tag == "delete" and _qualifier(seq_a[op.a0:op.a1], second):
            return True
        if op.tag == "insert" and _qualifier(seq_b[op.b0:op.b1], first):
            return True
    return False
