"""What the guards know about one text, worked out once, and how two texts line up.

A guard compares two texts many times over: in a block, one memory is paired with every
memory that resembles it. Whatever a guard needs of one text (its words, numbers, names,
the words it lines up...) is therefore computed once per text, on first use, and kept in a
:class:`TextFeatures`; comparing two texts is then mostly set operations. A guard that needs a
per-text value of its own computes it through :meth:`TextFeatures.once`.

The engine keeps one :class:`TextFeatures` per memory for a whole run; :func:`features`
keeps a bounded cache of them by text for other callers (the on-save check, benchmarks).
:func:`diff_blocks` aligns two texts word by word, for the few guards that look at where the
texts differ (the first text of a pair keeps its last alignment, so the guards of one pair
share it, and it goes with the text's features).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from functools import cached_property, lru_cache
from itertools import chain, repeat
from operator import getitem, itemgetter
from typing import Any, NamedTuple, TypeVar, cast

from rapidfuzz.distance import Levenshtein
from rapidfuzz.utils import default_process

from memcli.consolidate.restate import plain_form, statement_span

__all__ = [
    "ARTICLES",
    "STEM_LETTERS",
    "STOPWORDS",
    "Op",
    "Reading",
    "TextFeatures",
    "Word",
    "content_words",
    "diff_blocks",
    "features",
    "ordered",
]

# Function words. They state little on their own: a capitalised one is not a name, they
# bridge the new words of one clause, and they are skipped around order words.
STOPWORDS = frozenset(
    """a about above after again against all also am an and any are as at be because been
    before being below between both but by can could did do does doing down during each even
    few for from further had has have having he her here hers him his how i if in into is it
    its itself just me more most my no nor not now of off on once only or other our ours out
    over own same she should so some such than that the their theirs them then there these
    they this those through to too under until up very was we were what when where which while
    who whom why will with would yet you your yours still many much may might must shall
    s t d ll m re ve""".split()
)
ARTICLES = frozenset({"a", "an", "the"})
# Words that share their first four letters count as forms of one word (deploy, deployed,
# deployment), so that an inflection is not new; four did best on MRPC train.
STEM_LETTERS = 4

# A token: a dotted acronym ("U.S."), a word that may hold inner punctuation ("P&G",
# "config.yaml", "MEMCLI_STORE", "al-Qaida"), a number ("5432", "3.11", "1,000"), or a mark
# after which a sentence or a clause starts.
_TOKEN_RE = re.compile(
    r"(?:[A-Za-z]\.){2,}"
    r"|[^\W\d_]\w*(?:[-'\u2019&.]\w+)*"
    r"|[0-9]+(?:[.,:][0-9]+)*"
    r"|[.!?]+(?=\s|$|[\"'\u201d\u2019)])|[:;,\"\u201c\u201d\u2018(\[\n*#>|-]"
)
# Marks after which a capital letter is ordinary sentence case, not a name.
_SENTENCE_MARKS = frozenset(':"\u201c\u201d\u2018([\n*#>|-')
# Marks and words that end a clause: list items and clauses are told apart by them.
_CLAUSE_MARKS = frozenset(".!?;:,\n")
_CLAUSE_WORDS = frozenset({"and", "or", "but", "while", "whereas"})
# Abbreviations whose full stop does not end a sentence.
ABBREVIATIONS = frozenset(
    """mr mrs ms dr prof gov sen rep gen col lt sgt st jr sr inc corp co ltd vs no rev
    jan feb mar apr jun jul aug sep sept oct nov dec mt ft""".split()
)
_NOT_NAMES = STOPWORDS | ABBREVIATIONS  # capitalised, but not names
ACRONYM_RE = re.compile(r"(?:[A-Za-z]\.){2,}|[A-Z][A-Z0-9&_]+")

_T = TypeVar("_T")
_MISSING: Any = object()  # no value kept (once() values may be None)


class Word(NamedTuple):
    """One word of a raw text: its canonical form, how it is written, and where it stands."""

    canon: str
    is_name: bool
    is_acronym: bool
    capitalised: bool
    at_start: bool  # first word of a sentence (its capital is sentence case)
    clause: int  # clauses are numbered in order; commas, "and", "but"... start a new one
    sentence: int  # sentences are numbered in order; a full stop or a new line starts one


class TextFeatures:
    """What the guards need to know about one text, each part worked out on first use.

    Build it with :func:`features` (cached by text) or directly. It holds nothing but the text
    and what was derived from it, so it may be shared by any number of comparisons.
    """

    def __init__(self, text: str) -> None:
        self.text = text
        self._memo: dict[str, Any] = {}

    def __repr__(self) -> str:
        return f"TextFeatures({self.text[:40]!r}{'...' if len(self.text) > 40 else ''})"

    def once(self, key: str, compute: Callable[[TextFeatures], _T]) -> _T:
        """``compute(self)``, computed on the first call for ``key`` and kept."""
        value = self._memo.get(key, _MISSING)  # (a miss is no exception: most keys miss once)
        if value is _MISSING:
            value = self._memo[key] = compute(self)
        return value  # type: ignore[no-any-return]

    @cached_property
    def words(self) -> tuple[str, ...]:
        """The normalised words, in order, as the similarity rule sees them."""
        return tuple(default_process(self.text).split())

    @cached_property
    def word_set(self) -> frozenset[str]:
        return frozenset(self.words)

    @cached_property
    def stems(self) -> frozenset[str]:
        """First letters of each normalised word: forms of one word share them. The set of
        :attr:`stem_sequence`: a text whose stems a guard compares nearly always has its stems
        in order looked at too (extra_detail looks at both, each way round), and slicing its
        distinct words again cost more than the set of the slices made once (a long text: about
        60 against 10 us; and the set holds the very strings of the sequence, not copies)."""
        return frozenset(self.stem_sequence)

    @cached_property
    def stem_sequence(self) -> tuple[str, ...]:
        """The stem of each of :attr:`words`, in order: each word sliced in C (cheaper than
        looking each word up in a table of the run's stems, whose keys are strings spread over
        memory; a word of up to STEM_LETTERS letters is its own stem, not a copy)."""
        return tuple(map(getitem, self.words, repeat(_STEM_SLICE)))

    @cached_property
    def tokens(self) -> tuple[Word, ...]:
        """The words of the raw text in order, with how each is written."""
        return _text_words(self.text)

    @cached_property
    def _walk(self) -> _TextWalk:
        return _text_readings(self.text)

    @cached_property
    def _readings(self) -> list[Reading]:
        """What each word token of the text contributes (:class:`Reading`), in order: the
        features most pairs need, read without building a :class:`Word` for every word."""
        return list(chain.from_iterable(self._walk.readings))

    @property
    def negation_cue(self) -> bool:
        """True when one of the text's chunks between spaces holds a negation cue
        (:func:`negation_cue`), found by the same walk as the readings. (The negation guard
        reads "not only" first: it affirms.)"""
        return self._walk.negated

    @cached_property
    def vocabulary(self) -> frozenset[str]:
        """All canonical words, whatever their case (numbers aside)."""
        return frozenset(chain.from_iterable(map(_VOCABULARY, self._readings)))

    @cached_property
    def names(self) -> frozenset[str]:
        """The canonical forms of the words written as names (:attr:`Word.is_name`)."""
        return frozenset(chain.from_iterable(map(_NAMES, self._marked)))

    @cached_property
    def acronyms(self) -> frozenset[str]:
        """The canonical forms of the words written as acronyms (:attr:`Word.is_acronym`)."""
        return frozenset(chain.from_iterable(map(_ACRONYMS, self._marked)))

    @cached_property
    def capitalised(self) -> tuple[str, ...]:
        """The canonical forms of the capitalised words (:attr:`Word.capitalised`), in order."""
        return tuple(chain.from_iterable(map(_CAPITALISED, self._marked)))

    @property
    def _marked(self) -> Iterator[Reading]:
        """The readings of the chunks holding a name, an acronym or a capital, in order: the
        others add none to :attr:`names`, :attr:`acronyms` and :attr:`capitalised`."""
        return chain.from_iterable(map(_MARKED_READINGS, self._walk.marked))

    @cached_property
    def name_positions(self) -> frozenset[int]:
        """The positions in :attr:`sequence` of the words written as names (a name is
        capitalised: only the marked chunks hold one)."""
        positions: list[int] = []
        for pos, readings in self._walk.marked:
            for is_name in chain.from_iterable(map(_ALIGNED_NAMES, readings)):
                if is_name:
                    positions.append(pos)
                pos += 1
        return frozenset(positions)

    @cached_property
    def initials(self) -> str:
        """The first letters of :attr:`capitalised`, in order."""
        return "".join([word[0] for word in self.capitalised])

    @cached_property
    def aligned_names(self) -> tuple[bool, ...]:
        """For each word of :attr:`sequence`, whether it is written as a name."""
        flags = [False] * len(self.sequence)
        for pos in self.name_positions:
            flags[pos] = True
        return tuple(flags)

    @cached_property
    def content(self) -> tuple[str, ...]:
        """:func:`content_words` of :attr:`aligned`."""
        return tuple(chain.from_iterable(map(_CONTENT, self._readings)))

    @cached_property
    def aligned(self) -> tuple[Word, ...]:
        """The words two texts are lined up by: every word but the articles ("a" stays where
        it is written as a capital inside a sentence: "service A")."""
        return tuple(
            w for w in self.tokens
            if w.canon not in ARTICLES or (w.canon == "a" and w.capitalised and not w.at_start)
        )

    @cached_property
    def sequence(self) -> tuple[str, ...]:
        """The canonical forms of :attr:`aligned`."""
        return self._walk.sequence

    @cached_property
    def sequence_set(self) -> frozenset[str]:
        return frozenset(self.sequence)

    @cached_property
    def plain(self) -> str:
        """The text's plain form: its statement, spelled and written alike, articles aside
        (:func:`memcli.consolidate.restate.plain_form`), as the duplicate rule's second look
        scores it."""
        return plain_form(self.text)

    @cached_property
    def _statement_span(self) -> tuple[int, int]:
        """Where the statement stands (:func:`memcli.consolidate.restate.statement_span`),
        found once for :attr:`statement` and :attr:`attribution_words`."""
        return statement_span(self.text)

    @property
    def statement(self) -> TextFeatures:
        """The features of what the text states, a bare attribution at its start or end set
        aside ("..., he said."; :func:`memcli.consolidate.restate.statement_span`); the text's
        own features when it has none."""
        own = self._own_statement
        return self if own is None else own

    @cached_property
    def _own_statement(self) -> TextFeatures | None:
        """:attr:`statement` when it differs from the text, else None. Never the features
        themselves: a reference to itself would make every such text a reference cycle, which
        only the cycle collector frees, and planning pauses it (`planner._gc_paused`), so a
        full run kept every text the guards looked at to its end (1M memories: ~2 GB)."""
        start, end = self._statement_span
        if start == 0 and not self.text[end:].strip():
            return None
        return TextFeatures(self.text[start:end])

    @cached_property
    def attribution_words(self) -> tuple[int, int]:
        """How many of :attr:`words` a bare attribution takes at the start and at the end."""
        start, end = self._statement_span
        if start == 0 and not self.text[end:].strip():
            return (0, 0)
        return (len(default_process(self.text[:start]).split()),
                len(default_process(self.text[end:]).split()))

    @cached_property
    def content_count(self) -> int:
        """How many words of the text carry meaning (not function words, not articles)."""
        return len(self.content)


# word (normalised) -> its stem (its first STEM_LETTERS letters): one shared string per word
# of a store's vocabulary, its hash computed once, for the stems of a text and the walk of the
# extra_detail guard; emptied when it holds more than this many words.
WORD_STEMS: dict[str, str] = {}
_WORD_STEMS_MAX = 65_536
_STEM_SLICE = slice(0, STEM_LETTERS)


def word_stems(words: frozenset[str]) -> dict[str, str]:
    """:data:`WORD_STEMS`, holding every word of ``words`` (the new ones sliced in C)."""
    stems = WORD_STEMS
    if len(stems) > _WORD_STEMS_MAX:
        stems.clear()
    new = words.difference(stems)
    if new:  # a set is iterated in one order while it is left alone
        stems.update(zip(new, cast("map[str]", map(getitem, new, repeat(_STEM_SLICE))), strict=True))
    return stems


@lru_cache(maxsize=4096)
def features(text: str) -> TextFeatures:
    """The (cached) :class:`TextFeatures` of a raw text."""
    return TextFeatures(text)


def content_words(words: Sequence[Word]) -> tuple[str, ...]:
    """The words that carry meaning: not function words, except one written as a label
    inside a sentence ("service A")."""
    return tuple(w.canon for w in words if w.canon not in STOPWORDS or (w.capitalised and not w.at_start))


# --------------------------------------------------------------------------------------------
# words in order


def canon(token: str) -> str:
    """Case-, dot- and possessive-insensitive form of a word."""
    token = token.replace("\u2019", "'")
    if token.endswith("'s"):
        token = token[:-2]
    return token.replace(".", "").replace("'", "").lower()


# Words that negate, and the marks taken for an apostrophe ("don\u2019t", "can`t").
NEGATION_WORDS = frozenset(
    """not no never without none nobody nothing neither nor cannot nowhere noone unless
    dont doesnt didnt isnt arent wasnt werent wont cant couldnt shouldnt wouldnt hasnt
    havent hadnt mustnt neednt aint""".split()
)
APOSTROPHE_MARKS = ("\u2019", "\u2018", "`", "\u00b4")
APOSTROPHES = str.maketrans(dict.fromkeys(APOSTROPHE_MARKS, "'"))
_NEGATION_TOKEN_RE = re.compile(r"[a-z]+(?:'[a-z]+)?")


def negated(lowered: str) -> bool:
    """True when a lower-case text, its apostrophes made plain (and its "not only" set aside),
    holds a negation cue: a word of :data:`NEGATION_WORDS` or a word ending in "n't"."""
    # Every cue holds an "n" or a "w" ("without"): many chunks hold neither, and the regex is
    # the costly part.
    if "n" not in lowered and "w" not in lowered:
        return False
    tokens = _NEGATION_TOKEN_RE.findall(lowered)
    if not NEGATION_WORDS.isdisjoint(tokens):
        return True
    return "n't" in lowered and any(token.endswith("n't") for token in tokens)


def negation_cue(chunk: str) -> bool:
    """:func:`negated` of a raw chunk (lowered, apostrophes made plain). Lowering a text and
    then splitting it at spaces gives the chunks lowered one by one (no character lowers to a
    space; only a final sigma looks at its neighbours, and it is no cue), so a text holds a
    cue outside "not only" when one of its chunks does."""
    lowered = chunk.lower()
    if "n" not in lowered and "w" not in lowered:  # no cue (see negated), most chunks: at once
        return False
    if not lowered.isascii() or "`" in lowered:  # a mark taken for an apostrophe, maybe
        lowered = lowered.translate(APOSTROPHES)
    return negated(lowered)


@lru_cache(maxsize=4096)
def _starts_sentence(mark: str, previous: str) -> bool:
    """True when the mark makes the next capital letter sentence case. (Cached: a few marks
    after a store's vocabulary.)"""
    if mark in _SENTENCE_MARKS:
        return True
    if mark[0] in ".!?":
        # "Mr. Smith", "J. Smith": that full stop belongs to an abbreviation or an initial.
        return not (canon(previous) in ABBREVIATIONS or len(previous) == 1)
    return False


def _has_inner_capital(token: str) -> bool:
    """CamelCase words ("GitHub", "PostgreSQL") are names even at a sentence start."""
    return any(map(str.isupper, token[1:])) and any(map(str.islower, token))  # in C


@lru_cache(maxsize=65536)
def _classify(part: str, at_start: bool) -> tuple[str, bool, bool, bool]:
    """Canonical form of a word, whether it is written as a name, as an acronym, and with a
    capital. (Cached: a store repeats its vocabulary.)"""
    if part[0].isdigit():
        return (part, False, False, False)
    return _classify_form(part, canon(part), at_start)


def _classify_form(part: str, form: str, at_start: bool) -> tuple[str, bool, bool, bool]:
    """:func:`_classify` of a word that does not start with a digit, its canonical form
    given."""
    acronym = bool(ACRONYM_RE.fullmatch(part)) and len(form) > 1
    capitalised = part[0].isupper()
    name = (
        capitalised
        and (not at_start or acronym or _has_inner_capital(part))
        and len(form) > 1  # a lone initial ("George W. Bush") says too little
        and form not in _NOT_NAMES
    )
    return (form, name, acronym, capitalised)


_Parts = tuple[tuple[str, bool, bool, bool], ...]


@lru_cache(maxsize=65536)
def _token_parts(token: str, at_start: bool) -> tuple[bool, _Parts]:
    """Whether a word token starts a clause ("and", "but"...), and its parts as
    :func:`_classify` sees them. Hyphenated words are split ("al-Qaida", "New York-based") so
    that each part can match on its own; a hyphenated acronym stays whole. (Cached: a text is
    analysed token by token, and a store repeats its vocabulary.)"""
    parts = [token] if "-" not in token or ACRONYM_RE.fullmatch(token) else token.split("-")
    return (token.lower() in _CLAUSE_WORDS, tuple(_classify(part, at_start) for part in parts if part))


# What one word token adds to its text's features, read at a sentence start or inside one
# (the parts of a hyphenated word together): a plain tuple (one is made per token and state,
# and a tuple is made several times faster than an object with attributes) of the canonical
# forms it adds to :attr:`TextFeatures.sequence`, whether each is written as a name, the forms
# it adds to :attr:`TextFeatures.content`, its names (date names included), acronyms,
# capitalised words, and its vocabulary. Shared by every text that holds the token.
Reading = tuple[tuple[Any, ...], ...]


def _parts_reading(parts: _Parts, at_start: bool) -> Reading:
    """The :class:`Reading` of a word token from its parts (:func:`_token_parts`)."""
    if len(parts) == 1:  # most words: no hyphen
        return _one_reading(*parts[0], at_start)
    aligned = [p for p in parts if p[0] not in ARTICLES or (p[0] == "a" and p[3] and not at_start)]
    return (
        tuple([p[0] for p in aligned]),
        tuple([p[1] for p in aligned]),
        tuple([p[0] for p in aligned if p[0] not in STOPWORDS or (p[3] and not at_start)]),
        tuple([p[0] for p in parts if p[1]]),
        tuple([p[0] for p in parts if p[2]]),
        tuple([p[0] for p in parts if p[3]]),
        tuple([p[0] for p in parts if not p[0][0].isdigit()]),
    )


def _one_reading(form: str, name: bool, acronym: bool, capitalised: bool, at_start: bool) -> Reading:
    """The :class:`Reading` of a word of one part (as :func:`_classify` gives it)."""
    alone = (form,)
    names, acronyms, capitals = alone if name else (), alone if acronym else (), alone if capitalised else ()
    vocabulary = () if form[0].isdigit() else alone
    if form in ARTICLES and not (form == "a" and capitalised and not at_start):  # not aligned
        return ((), (), (), names, acronyms, capitals, vocabulary)
    content = alone if form not in STOPWORDS or (capitalised and not at_start) else ()
    return (alone, (name,), content, names, acronyms, capitals, vocabulary)


# The parts of a Reading, read in C over all the readings of a text.
_SEQUENCE, _ALIGNED_NAMES, _CONTENT, _NAMES, _ACRONYMS, _CAPITALISED, _VOCABULARY = map(itemgetter, range(7))
_MARKED_READINGS = itemgetter(1)


# How the walk of :func:`_text_readings` reads a token, worked out once per token: a word:
# [True, a full stop after it belongs to it, its Reading at a sentence start, inside one]
# (each Reading made when first needed); a mark: [False, a full stop after it belongs to
# it, it makes the next capital sentence case, it is a full stop (or ! ?)].
_TOKENS: dict[str, list[Any]] = {}
_TOKENS_MAX = 32_768  # distinct tokens kept (a store repeats its vocabulary); emptied when full


def _token_info(token: str) -> list[Any]:
    """How :func:`_text_readings` reads a token (see :data:`_TOKENS`)."""
    # "Mr. Smith", "J. Smith": a full stop after an abbreviation or an initial is its own
    # (as :func:`_starts_sentence` has it).
    form = token.lower() if token.isalpha() else canon(token)  # letters alone: no mark to drop
    owns_stop = form in ABBREVIATIONS or len(token) == 1
    if token[0].isalnum():
        return [True, owns_stop, None, None, form]
    return [False, owns_stop, token in _SENTENCE_MARKS, token[0] in ".!?"]


def _reading(token: str, form: str, at_start: bool) -> Reading:
    """The :class:`Reading` of a word token (``form`` its canonical form): what
    ``_parts_reading(_token_parts(token, at_start)[1], at_start)`` gives, without the caches
    and their keys for the usual word of one part (a token is read this way once per run)."""
    if token[0].isdigit() or "-" in token and not ACRONYM_RE.fullmatch(token):
        return _parts_reading(_token_parts(token, at_start)[1], at_start)
    if token.islower() and "." not in token:
        # The usual word: no capital (so neither a name nor capitalised) and no dot (so not
        # an acronym, which starts with a capital or is dotted: ACRONYM_RE).
        return _one_reading(form, False, False, False, at_start)
    return _one_reading(*_classify_form(token, form, at_start), at_start)


# Chunk (a stretch of text between two spaces) -> a _ChunkEntry (its Readings, the state
# after it, ...), one table per state the walk enters it in (2 * at a sentence start + a
# full stop would be owned).
_ChunkEntry = tuple[tuple[Reading, ...], int, bool, tuple[str, ...], bool]
_CHUNKS: tuple[dict[str, _ChunkEntry], ...] = ({}, {}, {}, {})
_CHUNKS_MAX = 16_384  # chunks kept per table (a few MB each); emptied when full


class _TextWalk(NamedTuple):
    """What the walk of :func:`_text_readings` gives: the readings of each chunk of a text,
    in order (a tuple of :class:`Reading` a chunk), its :attr:`TextFeatures.sequence`, the
    readings of the chunks holding a name, an acronym or a capital, and whether a chunk holds a
    negation cue."""

    readings: list[tuple[Reading, ...]]
    sequence: tuple[str, ...]
    marked: list[tuple[int, tuple[Reading, ...]]]  # (where in the sequence it starts, readings)
    negated: bool


def _text_readings(text: str) -> _TextWalk:
    """The :class:`Reading` of each word token of a raw text, in order: the walk of
    :func:`_text_words`, keeping only whether a sentence starts; and whether one of its chunks
    holds a negation cue (:func:`negation_cue`).

    No token holds a space, and a full stop before a space ends the same token whether a space
    or the end of the stretch follows it: the tokens of a text are those of its chunks
    between spaces, in order. So the walk goes chunk by chunk, each chunk's readings and the
    state after it looked up by the chunk and the state before it (a store repeats its
    words, punctuation included). The features every pair needs are gathered on the way:
    the aligned words (each chunk's own, ready in its entry), and the few chunks with a name,
    an acronym or a capital (most chunks hold none)."""
    readings: list[tuple[Reading, ...]] = []
    append = readings.append
    sequence: list[str] = []
    extend = sequence.extend
    marked: list[tuple[int, tuple[Reading, ...]]] = []
    tables = _CHUNKS
    state = 2  # at a sentence start, no full stop owned
    negated = False
    for chunk in text.split(" "):
        found = tables[state].get(chunk)
        if found is None:
            table = tables[state]
            if len(table) >= _CHUNKS_MAX:
                table.clear()
            found = table[chunk] = _chunk_entry(chunk, state)
        append(found[0])
        if found[4]:
            marked.append((len(sequence), found[0]))
        extend(found[3])
        state = found[1]
        if found[2]:
            negated = True
    return _TextWalk(readings, tuple(sequence), marked, negated)


def _chunk_entry(chunk: str, state: int) -> _ChunkEntry:
    """What :data:`_CHUNKS` holds for a chunk entered in ``state``: its readings and the state
    after it (:func:`_chunk_readings`), and whether it holds a negation cue. The usual new
    chunk of prose, a word of letters alone, maybe followed by one mark (``deploy``,
    ``Deploy``, ``deploy.``, ``queue,``), is read the short way: no regex, no token table."""
    if chunk.isalpha():
        word, mark = chunk, ""
    elif chunk[-1:] in _WORD_END_MARKS and chunk[:-1].isalpha():
        word, mark = chunk[:-1], chunk[-1]
    else:
        readings, after = _chunk_readings(chunk, state)
        return _entry(readings, after, negation_cue(chunk))
    # One word token (letters alone, _TOKEN_RE's word form) and maybe one mark token after it
    # (a letter is not a mark's lookahead; the chunk's end is). A full stop after the word is
    # its own when it is an abbreviation or a letter, and every mark of one character owns
    # the next (_token_info).
    form = word.lower()
    if word.islower():  # the usual word: _reading's short way, in place
        vocabulary = (form,)
        if form in ARTICLES:  # not aligned ("a" is, written as a capital inside a sentence)
            reading: Reading = ((), (), (), (), (), (), vocabulary)
        else:
            content = () if form in STOPWORDS else vocabulary
            reading = (vocabulary, _NOT_A_NAME, content, (), (), (), vocabulary)
    else:
        reading = _reading(word, form, state >= 2)
    owns_stop = form in ABBREVIATIONS or len(word) == 1
    if not mark:
        after = int(owns_stop)
    else:  # a sentence starts after ":" (a sentence mark), or after a full stop not the word's
        after = 2 * (mark == ":" or (mark in ".!?" and not owns_stop)) + 1
    # A negation cue in an ASCII chunk of letters (and a mark) is its word: an "n't" ending
    # needs an apostrophe (see negated).
    cue = form in NEGATION_WORDS if chunk.isascii() else negation_cue(chunk)
    if not (reading[3] or reading[4] or reading[5]):  # no name, acronym nor capital
        return (reading,), after, cue, reading[0], False
    return (reading,), after, cue, reading[0], True


def _entry(readings: tuple[Reading, ...], after: int, cue: bool) -> _ChunkEntry:
    """A chunk's entry in :data:`_CHUNKS` from its readings, the state after it and whether it
    holds a negation cue: its aligned words and whether it holds a name, an acronym or a
    capital (a name is capitalised) added."""
    return (readings, after, cue, tuple(chain.from_iterable(map(_SEQUENCE, readings))),
            any(r[3] or r[4] or r[5] for r in readings))


_NOT_A_NAME = (False,)
# The marks a word may end its chunk with for _chunk_entry's short way: each a token of its own.
_WORD_END_MARKS = frozenset(".,;:!?")


def _chunk_readings(chunk: str, state: int) -> tuple[tuple[Reading, ...], int]:
    """The readings of one chunk (no space in it) entered in ``state`` (see :data:`_CHUNKS`),
    and the state after it."""
    readings: list[Reading] = []
    append = readings.append
    tokens = _TOKENS
    if len(tokens) > _TOKENS_MAX:
        tokens.clear()
    at_start, stop_owned = state >= 2, bool(state & 1)
    # A chunk of letters alone is one word token (_TOKEN_RE's word form: a letter, then word
    # characters), most new chunks of prose: the regex is not needed.
    for token in (chunk,) if chunk.isalpha() else _TOKEN_RE.findall(chunk):
        info = tokens.get(token)
        if info is None:
            info = tokens[token] = _token_info(token)
        if info[0]:
            slot = 2 if at_start else 3
            reading = info[slot]
            if reading is None:
                reading = info[slot] = _reading(token, info[4], at_start)
            append(reading)
            at_start = False
        else:
            at_start = at_start or info[2] or (info[3] and not stop_owned)
        stop_owned = info[1]
    return tuple(readings), 2 * at_start + stop_owned


def _text_words(text: str) -> tuple[Word, ...]:
    """The words of a raw text in order (hyphenated words split, see :func:`_token_parts`)."""
    words: list[Word] = []
    append = words.append
    make = tuple.__new__  # a Word from a ready tuple, without NamedTuple.__new__'s extra call
    at_start, previous, clause, sentence = True, "", 0, 0
    for token in _TOKEN_RE.findall(text):
        if token[0].isalnum():
            clause_word, parts = _token_parts(token, at_start)
            clause += clause_word
            for part in parts:
                append(make(Word, (*part, at_start, clause, sentence)))
            at_start = False
        else:
            starts = _starts_sentence(token, previous)
            at_start = at_start or starts
            clause += token[0] in _CLAUSE_MARKS
            sentence += (starts and token[0] in ".!?") or token == "\n"
        previous = token
    return tuple(words)


# --------------------------------------------------------------------------------------------
# two texts lined up

# Beyond this many words a side, aligning two texts costs too much: they are then taken to
# differ in one block spanning both (entities reads differing names as a disagreement; the
# other alignment guards stay quiet), which keeps such rare pairs apart rather than merging.
MAX_ALIGN_WORDS = 20_000


class Op(NamedTuple):
    """One block of an alignment: ``first.sequence[a0:a1]`` stands where
    ``second.sequence[b0:b1]`` does; tag replace, insert (a0 == a1) or delete (b0 == b1)."""

    tag: str
    a0: int
    a1: int
    b0: int
    b1: int


def ordered(a: TextFeatures, b: TextFeatures) -> tuple[TextFeatures, TextFeatures]:
    """The pair in one fixed order, so that guards built on an alignment (which may break ties
    by argument order) stay symmetric."""
    return (b, a) if b.text < a.text else (a, b)


def diff_blocks(first: TextFeatures, second: TextFeatures) -> tuple[Op, ...]:
    """Where two texts differ, as blocks between their equal stretches (pass the pair through
    :func:`ordered`). Consecutive edits form one block ("in the water" / "out of the water"
    is one block: in -> out of), however the edit script splits them.

    The guards of one pair share one alignment: the first text keeps the last two it was
    aligned by (the clause guard aligns the statements, which differ from the texts when one
    has an attribution), each with the other text (a string, not its features: no reference
    from one text's features to another's, so nothing outlives its features nor forms a
    cycle)."""
    last: tuple[tuple[str, tuple[Op, ...]], ...] = first._memo.get(_LAST_DIFF, ())
    other = second.text
    for text, found in last:
        if text is other or text == other:
            return found
    blocks = _diff_blocks(first, second)
    first._memo[_LAST_DIFF] = ((other, blocks), *last[:1])
    return blocks


_LAST_DIFF = " diff"  # the key of a text's last alignments among its once() values (no name)


def _diff_blocks(first: TextFeatures, second: TextFeatures) -> tuple[Op, ...]:
    """:func:`diff_blocks`, worked out."""
    seq_a, seq_b = first.sequence, second.sequence
    if seq_a == seq_b:
        return ()
    if max(len(seq_a), len(seq_b)) > MAX_ALIGN_WORDS:
        return (Op("replace", 0, len(seq_a), 0, len(seq_b)),)
    # Plain tuples from the edit script (as_list() gives plain (tag, a0, a1, b0, b1) tuples at
    # run time; its stub says Opcode). The edits follow one another without gaps, so the
    # edits between two equal stretches span from the end of one to the start of the next:
    # the blocks are the gaps between the equal stretches, read from those alone.
    edits = cast(list[tuple[str, int, int, int, int]], Levenshtein.opcodes(seq_a, seq_b).as_list())
    blocks: list[Op] = []
    append = blocks.append
    a_end = b_end = 0  # where the last equal stretch ends
    for tag, a0, a1, b0, b1 in edits:
        if tag == "equal":
            if a0 != a_end or b0 != b_end:
                append(_block(a_end, b_end, a0, b0))
            a_end, b_end = a1, b1
    if a_end != len(seq_a) or b_end != len(seq_b):
        append(_block(a_end, b_end, len(seq_a), len(seq_b)))
    return tuple(blocks)


def _block(a0: int, b0: int, a1: int, b1: int) -> Op:
    """One block of difference, tagged by what it holds on each side (an Op made from a ready
    tuple, without NamedTuple.__new__'s extra call)."""
    tag = "insert" if a0 == a1 else "delete" if b0 == b1 else "replace"
    return tuple.__new__(Op, (tag, a0, a1, b0, b1))
