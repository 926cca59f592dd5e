"""Guards: cheap, documented checks that two similar texts do not disagree on what matters.

The duplicate rule (SPEC 3.1) scores two memory texts with an order-blind fuzzy scorer. A high
score says that the texts share most of their characters; it does not say that they state the
same facts. Each guard looks for one way in which two high-scoring texts can still differ in
substance. A pair that a guard rejects is kept separate and queued for a human.

Guards take the raw (un-normalised) texts, because case, digits and punctuation carry what
they look for: a capital letter marks a name, "1,000" is one number. They are pure functions:
no I/O, no randomness, symmetric in their two arguments, and the same in every process.

The guards, in the order :func:`guard_rejects` applies them (the first that fires is the
reason logged):

``numbers``
    One text has a number the other does not mention ("port 8080" vs "port 8081").
``negation``
    One text is negated and the other is not ("never", "not", "n't", "no", "without"...).
``polarity``
    The texts take opposite sides of an antonym pair ("enable" vs "disable").
``order``
    Two words trade places around an order word ("staging before production" vs
    "production before staging"), a change that sorting the tokens hides completely.
``entities``
    Where one text has a name, the other has a different name ("deploy with Jenkins" vs
    "deploy with CircleCI").
``extra_detail``
    One text holds a clause (five or more new words in a row) that the other lacks. The
    texts do not state the same facts, and a merge would drop the clause from the survivor.

Tuned on the MRPC train split; ``bench/mrpc.py`` prints the figures for train and test.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from decimal import Decimal, localcontext
from functools import lru_cache
from typing import NamedTuple

from rapidfuzz import fuzz, process
from rapidfuzz.distance import Levenshtein
from rapidfuzz.utils import default_process

__all__ = [
    "EXTRA_DETAIL_RUN",
    "GUARDS",
    "entities_differ",
    "extra_detail",
    "guard_function",
    "guard_rejects",
    "negation_differs",
    "numbers_differ",
    "order_swapped",
    "polarity_differs",
]

# Per-text features are cached: the engine compares one keeper with many members.
_CACHE_SIZE = 4096

# Function words. They state little on their own: a capitalised one is not a name, they
# bridge the new words of one clause, and they are skipped around order words.
_STOPWORDS = frozenset(
    """a about above after again against all also am an and any are as at be because been
    before being below between both but by can could did do does doing down during each even
    few for from further had has have having he her here hers him his how i if in into is it
    its itself just me more most my no nor not now of off on once only or other our ours out
    over own same she should so some such than that the their theirs them then there these
    they this those through to too under until up very was we were what when where which while
    who whom why will with would yet you your yours still many much may might must shall
    s t d ll m re ve""".split()
)


@lru_cache(maxsize=_CACHE_SIZE)
def _norm(text: str) -> str:
    """Normalise as the similarity rule does, so that guards see the scorer's words."""
    return default_process(text)


@lru_cache(maxsize=_CACHE_SIZE)
def _word_list(text: str) -> tuple[str, ...]:
    """The normalised words of a raw text, in order."""
    return tuple(_norm(text).split())


@lru_cache(maxsize=_CACHE_SIZE)
def _word_set(text: str) -> frozenset[str]:
    """The set of normalised words of a raw text."""
    return frozenset(_word_list(text))


# --------------------------------------------------------------------------------------------
# numbers

# Digits with optional thousands separators and dotted parts ("1,000", "3.14", "1.2.3"),
# optionally followed by a scale word ("1.5 million", "38-million").
_NUMBER_RE = re.compile(
    r"(?<![0-9.,])([0-9]{1,3}(?:,[0-9]{3})+|[0-9]+)((?:\.[0-9]+)*)"
    r"(?:[\s-]*(thousand|million|billion|trillion)\b)?",
    re.IGNORECASE,
)
_SCALES = {"thousand": 10**3, "million": 10**6, "billion": 10**9, "trillion": 10**12}

# Number words only *match* a number on the other side ("five" = "5"). On their own they do
# not count: "one of them" or "the two men" are rarely quantities that matter.
_NUMBER_WORDS = {
    word: str(value)
    for words in (
        "zero one two three four five six seven eight nine ten eleven twelve thirteen "
        "fourteen fifteen sixteen seventeen eighteen nineteen twenty",
        "zeroth first second third fourth fifth sixth seventh eighth ninth tenth",
    )
    for value, word in enumerate(words.split())
}
_NUMBER_WORDS.update({"thirty": "30", "forty": "40", "fifty": "50", "sixty": "60", "seventy": "70"})
_NUMBER_WORDS.update(
    {"eighty": "80", "ninety": "90", "hundred": "100", "dozen": "12", "once": "1", "twice": "2"}
)


def _number_value(integer: str, fraction: str, scale: str | None) -> str:
    """Canonical text of one number, so that "1,000", "1000" and "1 thousand" are equal."""
    integer = integer.replace(",", "").lstrip("0") or "0"  # text, not int(): any length
    if fraction.count(".") > 1:  # a version or an address (1.2.3): compare it verbatim
        return integer + fraction
    if not fraction.strip(".0"):  # "5.00" is 5, but "3.10" may be a version: keep it
        fraction = ""
    if scale:  # exact decimal arithmetic: "4.35 million" is 4350000, at any size
        with localcontext() as exact:
            exact.prec = len(integer) + len(fraction) + 16
            scaled = Decimal(integer + fraction) * _SCALES[scale.lower()]
            return f"{scaled.normalize():f}"
    return integer + fraction


@lru_cache(maxsize=_CACHE_SIZE)
def _numbers(text: str) -> frozenset[str]:
    """The numbers written with digits in a text, canonicalised."""
    return frozenset(_number_value(m.group(1), m.group(2), m.group(3)) for m in _NUMBER_RE.finditer(text))


@lru_cache(maxsize=_CACHE_SIZE)
def _number_word_values(text: str) -> frozenset[str]:
    """The values of the number words ("five", "third") of a text, as digit strings."""
    return frozenset(_NUMBER_WORDS[w] for w in _word_list(text) if w in _NUMBER_WORDS)


def numbers_differ(text_a: str, text_b: str) -> bool:
    """True when one text has a number (in digits) that the other does not mention.

    Thousands separators, a zero fraction, currency and percent signs and scale words do not
    matter ("1,000" = "1000" = "1 thousand", "$5.00" = "5", "20%" = "20 percent"), and a
    number word on the other side is a mention ("5 retries" = "five retries"). Dotted numbers
    such as versions are compared verbatim ("3.10" is not "3.1").
    """
    numbers_a, numbers_b = _numbers(text_a), _numbers(text_b)
    if numbers_a == numbers_b:
        return False
    return bool(
        numbers_a - numbers_b - _number_word_values(text_b)
        or numbers_b - numbers_a - _number_word_values(text_a)
    )


# --------------------------------------------------------------------------------------------
# negation

_NEGATION_WORDS = frozenset(
    """not no never without none nobody nothing neither nor cannot nowhere noone
    dont doesnt didnt isnt arent wasnt werent wont cant couldnt shouldnt wouldnt hasnt
    havent hadnt mustnt neednt aint""".split()
)
_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "`": "'", "\u00b4": "'"})
_NEGATION_TOKEN_RE = re.compile(r"[a-z]+(?:'[a-z]+)?")
_NOT_ONLY_RE = re.compile(r"\bnot\s+only\b")  # "not only X but Y" affirms X


@lru_cache(maxsize=_CACHE_SIZE)
def _is_negated(text: str) -> bool:
    """True when a text holds a negation cue: a word such as "never" or a "n't" ending."""
    lowered = _NOT_ONLY_RE.sub(" ", text.lower().translate(_APOSTROPHES))
    return any(
        token in _NEGATION_WORDS or token.endswith("n't") for token in _NEGATION_TOKEN_RE.findall(lowered)
    )


def negation_differs(text_a: str, text_b: str) -> bool:
    """True when exactly one of the two texts is negated.

    Presence is compared, not the number of cues: "don't, ever" restated as "never" keeps
    its meaning although the count changes.
    """
    return _is_negated(text_a) != _is_negated(text_b)


# --------------------------------------------------------------------------------------------
# polarity

# Opposite word forms. A pair fires only when each text uses one side and not the other, so
# "turn it on, then off" against "switch it on and off" stays quiet. Words with common
# unrelated senses ("up", "down", "close") are left out.
_POLARITY_PAIRS: tuple[tuple[frozenset[str], frozenset[str]], ...] = tuple(
    (frozenset(left.split()), frozenset(right.split()))
    for left, right in (
        ("enable enabled enables enabling", "disable disabled disables disabling"),
        ("increase increased increases increasing", "decrease decreased decreases decreasing"),
        ("rise rises rose risen rising", "fall falls fell fallen falling"),
        ("gain gains gained", "loss losses"),
        ("higher highest", "lower lowest"),
        ("true", "false"),
        ("allow allowed allows allowing", "deny denied denies denying block blocked blocks"),
        ("accept accepted accepts", "reject rejected rejects"),
        ("include included includes including", "exclude excluded excludes excluding"),
        ("add added adds adding", "remove removed removes removing"),
        ("success succeeded succeeds successful", "failure failed fails unsuccessful"),
        ("start started starts", "stop stopped stops"),
        ("public", "private"),
        ("always", "never"),
        ("minimum min", "maximum max"),
        ("win won wins", "lose lost loses"),
        ("buy bought buys", "sell sold sells"),
        ("import imported imports", "export exported exports"),
        ("internal", "external"),
        ("sync synchronous synchronously", "async asynchronous asynchronously"),
        ("online", "offline"),
        ("upgrade upgraded upgrades", "downgrade downgraded downgrades"),
        ("required mandatory", "optional"),
        ("safe", "unsafe"),
        ("valid", "invalid"),
        ("supported", "unsupported"),
    )
)


def polarity_differs(text_a: str, text_b: str) -> bool:
    """True when the texts take opposite sides of an antonym pair (enable / disable...)."""
    words_a, words_b = _word_set(text_a), _word_set(text_b)
    for left, right in _POLARITY_PAIRS:
        a_left, a_right = bool(words_a & left), bool(words_a & right)
        b_left, b_right = bool(words_b & left), bool(words_b & right)
        if (a_left != a_right) and (b_left != b_right) and (a_left != b_left):
            return True
    return False


# --------------------------------------------------------------------------------------------
# order

# Words whose two sides cannot trade places without changing the meaning. Verbs are left
# out on purpose: the passive voice swaps their sides ("A replaced B" = "B was replaced by A").
# "to" is one only after "from" ("from X to Y"); elsewhere it is mostly an infinitive.
_ORDER_WORDS = frozenset("before after than over instead into from then".split())
_ORDER_WINDOW = 2  # content words looked at on each side of an order word
_SENTENCE_SPLIT_RE = re.compile(r"[.!?;:\n]+(?:\s+|$)")

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


@lru_cache(maxsize=_CACHE_SIZE)
def _order_triples(text: str) -> frozenset[_Triple]:
    """(x, order word, y) for every content word x shortly before an order word and y
    shortly after it, within one sentence."""
    triples: set[_Triple] = set()
    for sentence in _SENTENCE_SPLIT_RE.split(text):
        words = [w for w in _word_list(sentence) if w not in _STOPWORDS or w in _ORDER_WORDS or w == "to"]
        marks = [_is_order_word(words, pos) for pos in range(len(words))]
        for pos, word in enumerate(words):
            if marks[pos]:
                after = _neighbours(words, marks, pos, 1)
                triples.update(
                    (x, word, y) for x in _neighbours(words, marks, pos, -1) for y in after if x != y
                )
    return frozenset(triples)


def order_swapped(text_a: str, text_b: str) -> bool:
    """True when two words trade places around an order word (before, after, than, over,
    instead, into, then, from... to): one text says "staging before production" and never
    "production before staging", the other the reverse.

    The default scorer sorts the tokens, so it rates such texts identical.
    """
    triples_a, triples_b = _order_triples(text_a), _order_triples(text_b)
    return any(
        (y, word, x) in triples_b and (y, word, x) not in triples_a and (x, word, y) not in triples_b
        for x, word, y in triples_a
    )


# --------------------------------------------------------------------------------------------
# entities

# A token: a dotted acronym ("U.S."), a word that may hold inner punctuation ("P&G",
# "config.yaml", "MEMCLI_STORE", "al-Qaida"), or a mark after which a sentence starts.
_TOKEN_RE = re.compile(
    r"(?:[A-Za-z]\.){2,}"
    r"|[^\W\d_]\w*(?:[-'\u2019&.]\w+)*"
    r"|[.!?]+(?=\s|$|[\"'\u201d\u2019)])|[:;\"\u201c\u201d\u2018(\[\n*#>|-]"
)
# Marks after which a capital letter is ordinary sentence case, not a name.
_SENTENCE_MARKS = frozenset(':"\u201c\u201d\u2018([\n*#>|-')
# Abbreviations whose full stop does not end a sentence.
_ABBREVIATIONS = frozenset(
    """mr mrs ms dr prof gov sen rep gen col lt sgt st jr sr inc corp co ltd vs no rev
    jan feb mar apr jun jul aug sep sept oct nov dec mt ft""".split()
)
_NOT_NAMES = _STOPWORDS | _ABBREVIATIONS  # capitalised, but not names
_ACRONYM_RE = re.compile(r"(?:[A-Za-z]\.){2,}|[A-Z][A-Z0-9&_]+")
_NAME_MATCH_CUTOFF = 80.0  # rapidfuzz ratio that takes two words for one name (typo, plural)
_MIN_PREFIX = 3  # "Ron" / "Ronald", "Calif" / "California": a short form of one name


class _Word(NamedTuple):
    """One word of a raw text: its canonical form and how it is written."""

    canon: str
    is_name: bool
    is_acronym: bool
    capitalised: bool


def _canon(token: str) -> str:
    """Case-, dot- and possessive-insensitive form of a word."""
    token = token.replace("\u2019", "'")
    if token.endswith("'s"):
        token = token[:-2]
    return token.replace(".", "").replace("'", "").lower()


def _starts_sentence(mark: str, previous: str) -> bool:
    """True when the mark makes the next capital letter sentence case."""
    if mark in _SENTENCE_MARKS:
        return True
    if mark[0] in ".!?":
        # "Mr. Smith", "J. Smith": that full stop belongs to an abbreviation or an initial.
        return not (_canon(previous) in _ABBREVIATIONS or len(previous) == 1)
    return False


def _has_inner_capital(token: str) -> bool:
    """CamelCase words ("GitHub", "PostgreSQL") are names even at a sentence start."""
    return any(ch.isupper() for ch in token[1:]) and any(ch.islower() for ch in token)


def _classify(part: str, at_start: bool) -> _Word:
    """Canonical form of a word and whether it is written as a name."""
    canon = _canon(part)
    acronym = bool(_ACRONYM_RE.fullmatch(part)) and len(canon) > 1
    capitalised = part[0].isupper()
    name = (
        capitalised
        and (not at_start or acronym or _has_inner_capital(part))
        and len(canon) > 1  # a lone initial ("George W. Bush") says too little
        and canon not in _NOT_NAMES
    )
    return _Word(canon, name, acronym, capitalised)


@lru_cache(maxsize=_CACHE_SIZE)
def _text_words(text: str) -> tuple[_Word, ...]:
    """The words of a raw text in order. Hyphenated words are split ("al-Qaida", "New
    York-based") so that each part can match on its own."""
    words: list[_Word] = []
    at_start, previous = True, ""
    for token in _TOKEN_RE.findall(text):
        if not token[0].isalnum():
            at_start = at_start or _starts_sentence(token, previous)
        else:
            parts = [token] if _ACRONYM_RE.fullmatch(token) else token.split("-")
            words.extend(_classify(part, at_start) for part in parts if part)
            at_start = False
        previous = token
    return tuple(words)


@lru_cache(maxsize=_CACHE_SIZE)
def _vocabulary(text: str) -> frozenset[str]:
    """All canonical words of a text, whatever their case."""
    return frozenset(w.canon for w in _text_words(text))


def _letters(acronym: str) -> str:
    """The letters of an acronym, as its spelled-out form's initials give them ("s&p")."""
    return "".join(ch for ch in acronym if ch.isalpha())


def _spelled_out(words: Sequence[_Word], acronyms: frozenset[str]) -> set[str]:
    """Capitalised words whose initials, in a row, spell one of ``acronyms``
    ("United Nations" for "UN", "Standard & Poor's" for "S&P")."""
    capitalised = [w.canon for w in words if w.capitalised]
    initials = "".join(word[0] for word in capitalised)
    covered: set[str] = set()
    for acronym in acronyms:
        letters = _letters(acronym)
        start = initials.find(letters) if len(letters) > 1 else -1
        while start >= 0:
            covered.update(capitalised[start : start + len(letters)])
            start = initials.find(letters, start + 1)
    return covered


def _mentions(name: str, vocabulary: frozenset[str]) -> bool:
    """True when ``vocabulary`` holds ``name`` in another form: typo, plural, short form."""
    if process.extractOne(name, vocabulary, scorer=fuzz.ratio, score_cutoff=_NAME_MATCH_CUTOFF):
        return True
    return len(name) >= _MIN_PREFIX and any(
        len(word) >= _MIN_PREFIX and (word.startswith(name) or name.startswith(word)) for word in vocabulary
    )


def _unmatched_names(text_a: str, text_b: str) -> frozenset[str]:
    """Names of ``text_a`` that ``text_b`` mentions in no form."""
    words_a, words_b = _text_words(text_a), _text_words(text_b)
    vocabulary_b = _vocabulary(text_b)
    candidates = {w.canon for w in words_a if w.is_name} - vocabulary_b
    if not candidates:
        return frozenset()
    # "United Nations" here and "UN" there, or "UN" here and "United Nations" there.
    candidates -= _spelled_out(words_a, frozenset(w.canon for w in words_b if w.is_acronym))
    acronyms_a = {w.canon for w in words_a if w.is_acronym}
    initials_b = "".join(w.canon[0] for w in words_b if w.capitalised)
    return frozenset(
        name
        for name in candidates
        if not (name in acronyms_a and len(_letters(name)) > 1 and _letters(name) in initials_b)
        and not _mentions(name, vocabulary_b)
    )


# Beyond this many words a side, aligning two texts costs too much; names that differ are
# then taken to disagree, which keeps such (rare) pairs apart rather than merging them.
_MAX_ALIGN_WORDS = 20_000


def _differing_spans(text_a: str, text_b: str) -> list[tuple[set[str], set[str]]]:
    """The aligned stretches where two texts differ, as (words of A, words of B).

    Consecutive edit blocks between two equal stretches form one span, so a name replaced
    by another name lands in the same span on both sides.
    """
    seq_a = [w.canon for w in _text_words(text_a)]
    seq_b = [w.canon for w in _text_words(text_b)]
    if max(len(seq_a), len(seq_b)) > _MAX_ALIGN_WORDS:
        return [(set(seq_a), set(seq_b))]
    spans: list[tuple[set[str], set[str]]] = []
    open_span = False
    for op in Levenshtein.opcodes(seq_a, seq_b):
        if op.tag == "equal":
            open_span = False
            continue
        if not open_span:
            spans.append((set(), set()))
            open_span = True
        spans[-1][0].update(seq_a[op.src_start : op.src_end])
        spans[-1][1].update(seq_b[op.dest_start : op.dest_end])
    return spans


def entities_differ(text_a: str, text_b: str) -> bool:
    """True when one text has a name where the other has a different name: they are about
    different people, products or places ("deploy with Jenkins" vs "deploy with CircleCI").

    A name is a capitalised word that does not start a sentence, an acronym, or a CamelCase
    word; so a name that opens a sentence goes unseen ("Alice owns it" vs "Bob owns it"),
    the price of not taking every "Deploy" or "Restart" for a name. A name on one side only
    is not a disagreement (one text is more specific), nor is a name that moved (sentences
    reordered). Names match across case, possessives, dots, typos, short forms ("Ron" /
    "Ronald") and acronyms ("UN" / "United Nations").
    """
    if text_b < text_a:  # the alignment below may break ties by argument order
        text_a, text_b = text_b, text_a
    only_a = _unmatched_names(text_a, text_b)
    only_b = _unmatched_names(text_b, text_a) if only_a else frozenset()
    if not only_b:
        return False
    return any(span_a & only_a and span_b & only_b for span_a, span_b in _differing_spans(text_a, text_b))


# --------------------------------------------------------------------------------------------
# extra detail

# A run of this many new words in a row is taken for a clause the other text lacks. On MRPC
# train, 4 rejects too many true paraphrases and 6 lets too many different pairs through.
EXTRA_DETAIL_RUN = 5
# Words that share their first four letters count as forms of one word (deploy, deployed,
# deployment), so that an inflection is not new; four did best on MRPC train.
_STEM_LETTERS = 4


@lru_cache(maxsize=_CACHE_SIZE)
def _stems(text: str) -> frozenset[str]:
    """Stems (first letters) of the normalised words of a text."""
    return frozenset(w[:_STEM_LETTERS] for w in _word_list(text))


def _longest_new_run(text_a: str, text_b: str) -> int:
    """Length of the longest run of words of A whose stem B lacks.

    A function word that B also has neither extends nor ends a run ("the", "of" bridge the
    new words of one clause); any other shared word ends it.
    """
    stems_b = _stems(text_b)
    best = current = 0
    for word in _word_list(text_a):
        if word[:_STEM_LETTERS] not in stems_b:
            current += 1
            best = max(best, current)
        elif word not in _STOPWORDS:
            current = 0
    return best


def extra_detail(text_a: str, text_b: str) -> bool:
    """True when either text holds a run of new words (a clause) that the other lacks.

    Rewording swaps a word here and there; five new words in a row are a statement of their
    own ("restart the worker after a deploy, unless the queue still holds pending jobs"). A
    merge keeps one text and archives the other, so such a pair goes to a human rather than
    silently losing the clause.
    """
    return (
        _longest_new_run(text_a, text_b) >= EXTRA_DETAIL_RUN
        or _longest_new_run(text_b, text_a) >= EXTRA_DETAIL_RUN
    )


# --------------------------------------------------------------------------------------------
# all guards

_GUARD_FUNCTIONS: dict[str, Callable[[str, str], bool]] = {
    "numbers": numbers_differ,
    "negation": negation_differs,
    "polarity": polarity_differs,
    "order": order_swapped,
    "entities": entities_differ,
    "extra_detail": extra_detail,
}

GUARDS: tuple[str, ...] = tuple(_GUARD_FUNCTIONS)


def guard_function(name: str) -> Callable[[str, str], bool]:
    """The check behind a guard name (KeyError for an unknown name)."""
    return _GUARD_FUNCTIONS[name]


def guard_rejects(text_a: str, text_b: str) -> str | None:
    """Name of the first guard, in :data:`GUARDS` order, that rejects the pair, else None.

    Takes the raw, un-normalised texts; swapping them gives the same answer.
    """
    for name, check in _GUARD_FUNCTIONS.items():
        if check(text_a, text_b):
            return name
    return None
