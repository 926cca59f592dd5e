"""Guards: cheap, documented checks that two similar texts do not disagree on what matters.

The duplicate rule (SPEC 3.1) scores two memory texts with an order-blind fuzzy scorer. A high
score says that the texts share most of their characters; it does not say that they state the
same facts. Each guard looks for one way in which two high-scoring texts can still differ in
substance. A pair that a guard rejects is kept separate and queued for a human.

Guards take the raw (un-normalised) texts, because case, digits and punctuation carry what
they look for: a capital letter marks a name, "1,000" is one number. They are pure functions:
no I/O, no randomness, symmetric in their two arguments, and the same in every process.

Cost. What a guard needs of one text (its numbers, names, words, alignment tokens...) is
worked out once per text, in a :class:`TextFeatures`, and only when a guard first asks for
it; a guard then compares two feature sets, mostly with set operations. Every guard accepts
either raw texts or :class:`TextFeatures`; the engine keeps one :class:`TextFeatures` per
memory for the whole run, so a text compared with many others is analysed once.

The guards, in the order :func:`guard_rejects` applies them (the first that fires is the
reason logged):

``numbers``
    One text has a number the other does not mention ("port 8080" vs "port 8081").
``negation``
    One text is negated and the other is not ("never", "not", "n't", "no", "without",
    "unless" = "if not"...).
``polarity``
    The texts take opposite sides of an antonym pair ("enable" vs "disable").
``order`` (:mod:`memcli.consolidate.order`)
    Two words trade places around an order word ("staging before production" vs
    "production before staging"), a change that sorting the tokens hides completely.
``entities``
    Where one text has a name, the other has a different name ("deploy with Jenkins" vs
    "deploy with CircleCI").
``identifiers``
    Each text names a command, flag, path or setting the other lacks ("`make test`" vs
    "`make lint`", "settings.toml" vs "secrets.toml").
``roles``
    Two words (or short phrases, of equal length or not) trade places crosswise, whatever
    stands between them ("billing calls auth" vs "auth calls billing", "X is a tributary of Y"
    vs the reverse, "the cron container triggers the exporter" vs the reverse).
``substitution``
    One word is replaced by a word of contrary or sibling meaning ("small" vs "big",
    "flute" vs "guitar", "in" vs "out of"), from the compact lexicon in
    :mod:`memcli.consolidate.lexicon`.
``extra_detail``
    One text holds a clause (five or more new words in a row) that the other lacks. The
    texts do not state the same facts, and a merge would drop the clause from the survivor.
``clause``
    One text adds a clause (new words and a verb) where the other has nothing ("..., as she
    lay dead", "following California's lead, ...").
``qualifier``
    One text adds a short qualifying phrase the other lacks ("... in production", "... for
    the EU region"): it states something narrower, which a merge would blur.

Tuned on the MRPC train split and the memory pair set in ``bench/pairs.jsonl``;
``bench/mrpc.py`` and ``bench/pairs.py`` print the figures.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Callable, Sequence
from typing import NamedTuple

from rapidfuzz import fuzz, process

from memcli.consolidate.additions import (
    EXTRA_DETAIL_RUN,
    QUALIFIER_MAX_CONTEXT,
    QUALIFIER_MAX_WORDS,
    clause_added,
    extra_detail,
    qualifier_added,
)
from memcli.consolidate.identifiers import identifiers_differ
from memcli.consolidate.lexicon import contrast, known_words, senses
from memcli.consolidate.order import order_swapped
from memcli.consolidate.restate import NUMBER_RE, SCALES, SPEECH_VERBS, canonical_number
from memcli.consolidate.textfeatures import (
    APOSTROPHE_MARKS,
    APOSTROPHES,
    STOPWORDS,
    TextFeatures,
    Word,
    content_words,
    diff_blocks,
    features,
    negated,
    ordered,
)

__all__ = [
    "DESCRIPTIONS",
    "EXTRA_DETAIL_RUN",
    "GUARDS",
    "QUALIFIER_MAX_CONTEXT",
    "QUALIFIER_MAX_WORDS",
    "TextFeatures",
    "clause_added",
    "entities_differ",
    "extra_detail",
    "guard_function",
    "guard_rejects",
    "guards_rejecting",
    "identifiers_differ",
    "negation_differs",
    "numbers_differ",
    "order_swapped",
    "polarity_differs",
    "qualifier_added",
    "roles_swapped",
    "word_substituted",
]

_Text = str | TextFeatures


def _f(value: _Text) -> TextFeatures:
    return value if isinstance(value, TextFeatures) else features(value)


# --------------------------------------------------------------------------------------------
# numbers

# Number words only *match* a number on the other side ("five" = "5"). On their own they do
# not count: "one of them" or "the two men" are rarely quantities that matter.
_UNITS = """zero one two three four five six seven eight nine ten eleven twelve thirteen
    fourteen fifteen sixteen seventeen eighteen nineteen twenty""".split()
_ORDINALS = "zeroth first second third fourth fifth sixth seventh eighth ninth tenth".split()
_NUMBER_WORDS = {word: value for value, word in enumerate(_UNITS)}
_NUMBER_WORDS.update({word: value for value, word in enumerate(_ORDINALS)})
_TENS = {"thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90}
_NUMBER_WORDS.update(_TENS)
_NUMBER_WORDS.update({"twenty": 20, "hundred": 100, "dozen": 12, "once": 1, "twice": 2})
_DIGITS = "0123456789"  # every NUMBER_RE match holds one


def _has_digit(text: str) -> bool:
    """True when a text holds an ASCII digit (ten substring searches in C: several times faster
    than a character-class regex over a long text)."""
    return any(map(text.__contains__, _DIGITS))


def _number_word_values(words: Sequence[str]) -> frozenset[str]:
    """The values number words stand for: each word alone, a tens word with the unit after it
    ("ninety five" = 95), and either followed by a scale ("four million" = 4000000)."""
    values: set[str] = set()
    for pos, word in enumerate(words):
        value = _NUMBER_WORDS.get(word)
        if value is None:
            continue
        values.add(str(value))
        following = words[pos + 1] if pos + 1 < len(words) else ""
        if word in _TENS and following in _UNITS[1:10]:
            value += _NUMBER_WORDS[following]
            values.add(str(value))
            following = words[pos + 2] if pos + 2 < len(words) else ""
        if following in SCALES:
            values.add(str(value * SCALES[following]))
    return frozenset(values)


def _numbers(text: TextFeatures) -> frozenset[str]:
    """The numbers written with digits in a text, canonicalised."""
    if not _has_digit(text.text):
        return frozenset()
    return frozenset(canonical_number(m) for m in NUMBER_RE.finditer(text.text))


def _number_words(text: TextFeatures) -> frozenset[str]:
    """Values written in words ("five", "third", "ninety-five", "four million")."""
    return _number_word_values(text.words)


def numbers_differ(text_a: _Text, text_b: _Text) -> bool:
    """True when one text has a number (in digits) that the other does not mention.

    Thousands separators, a zero fraction, currency and percent signs and scale words do not
    matter ("1,000" = "1000" = "1 thousand" = "1k", "$5.00" = "5", "20%" = "20 percent",
    "$1.4bn" = "$1.4 billion"), and a number word on the other side is a mention ("5
    retries" = "five retries", "95" = "ninety-five", "4 million" = "four million"). Dotted
    numbers such as versions are compared verbatim ("3.10" is not "3.1").
    """
    a, b = _f(text_a), _f(text_b)
    numbers_a, numbers_b = a.once("numbers", _numbers), b.once("numbers", _numbers)
    if numbers_a == numbers_b:
        return False
    return bool(numbers_a - numbers_b - b.once("number_words", _number_words)
                or numbers_b - numbers_a - a.once("number_words", _number_words))


# --------------------------------------------------------------------------------------------
# negation

_NOT_ONLY_RE = re.compile(r"\bnot\s+only\b")  # "not only X but Y" affirms X


def negation_differs(text_a: _Text, text_b: _Text) -> bool:
    """True when exactly one of the two texts is negated.

    Presence is compared, not the number of cues: "don't, ever" restated as "never" keeps
    its meaning although the count changes, and "unless X" is "if not X".
    """
    return _f(text_a).once("negated", _is_negated) != _f(text_b).once("negated", _is_negated)


def _is_negated(text: TextFeatures) -> bool:
    """True when a text holds a negation cue: a word such as "never" or a "n't" ending."""
    lowered = text.text.lower()
    # The regex scans slowly (its leading \b defeats the literal search); "only" is rare.
    if "only" in lowered and _NOT_ONLY_RE.search(lowered):
        if any(mark in lowered for mark in APOSTROPHE_MARKS):  # translate() is slow: only when needed
            lowered = lowered.translate(APOSTROPHES)
        return negated(_NOT_ONLY_RE.sub(" ", lowered))
    # No token holds a space: the text is negated when one of its chunks between spaces is,
    # which the walk of its readings tells (each chunk looked at once a run).
    return text.negation_cue


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
        ("accept accepted accepts accepting", "reject rejected rejects rejecting"),
        ("include included includes including", "exclude excluded excludes excluding"),
        ("add added adds adding", "remove removed removes removing"),
        ("success succeeded succeeds successful", "failure failed fails unsuccessful"),
        ("start started starts starting", "stop stopped stops stopping"),
        ("public", "private"),
        ("always", "never"),
        ("minimum min", "maximum max"),
        ("win won wins winning", "lose lost loses losing"),
        ("buy bought buys buying", "sell sold sells selling"),
        ("import imported imports importing", "export exported exports exporting"),
        ("internal", "external"),
        ("sync synchronous synchronously", "async asynchronous asynchronously"),
        ("online", "offline"),
        ("upgrade upgraded upgrades upgrading", "downgrade downgraded downgrades downgrading"),
        ("required mandatory", "optional"),
        ("safe", "unsafe"),
        ("valid", "invalid"),
        ("supported", "unsupported"),
    )
)


def polarity_differs(text_a: _Text, text_b: _Text) -> bool:
    """True when the texts take opposite sides of an antonym pair (enable / disable...)."""
    sides_a, sides_b = _f(text_a).once("polarity", _polarity), _f(text_b).once("polarity", _polarity)
    return bool(sides_a) and bool(sides_b) and any(
        sides_b.get(pair, side) != side for pair, side in sides_a.items())


def _polarity(text: TextFeatures) -> dict[int, int]:
    """Antonym pair number -> 1 when the text uses only its left side, 2 only its right."""
    used: dict[int, int] = {}
    for word in text.word_set.intersection(_POLARITY_WORDS):  # most texts hold none or a few
        for pair, side in _POLARITY_WORDS[word]:
            used[pair] = used.get(pair, 0) | side
    return {pair: sides for pair, sides in used.items() if sides != 3}


_POLARITY_WORDS: dict[str, list[tuple[int, int]]] = {}
for _number, (_left, _right) in enumerate(_POLARITY_PAIRS):
    for _side, _words in ((1, _left), (2, _right)):
        for _word in _words:
            _POLARITY_WORDS.setdefault(_word, []).append((_number, _side))


# --------------------------------------------------------------------------------------------
# roles

# Words that join two items of a list: items may trade places around them ("Linux and macOS").
_COORDINATORS = frozenset({"and", "or", "nor", "plus", "vs", "versus", "between"})
_ROLE_MAX_WORDS = 4  # content words a side of a swapped phrase
# Words that may stand between two swapped items of an identity ("the owner is Alice" /
# "Alice is the owner"): a copula and the small words around it.
_COPULA = frozenset(
    """is are was were be been being am will would shall should can could may might must
    also still now their its his her our my your""".split()
)


def _symmetric(between: Sequence[str]) -> bool:
    """True when the words between two swapped items make the swap harmless: they join a list
    ("A and B", "A, B or C") or state an identity ("X would be Y")."""
    if not between:
        return False
    if all(w in _COPULA for w in between):
        return True
    return len(between) <= 2 and any(w in _COORDINATORS for w in between)


def _agent_marked(sequence: Sequence[str], spans: Sequence[tuple[int, int]]) -> bool:
    """True when "by" opens or precedes one of the spans: a passive voice's agent."""
    return any("by" in sequence[max(start - 1, 0):end] for start, end in spans)


def _whole_items(words: Sequence[Word], spans: Sequence[tuple[int, int]]) -> bool:
    """True when each span is a whole clause or list item (commas, "and"... on both sides):
    list items reordered, not roles swapped."""
    def whole(start: int, end: int) -> bool:
        clause = words[start].clause
        return (words[end - 1].clause == clause
                and (start == 0 or words[start - 1].clause != clause)
                and (end == len(words) or words[end].clause != clause))

    return all(whole(start, end) for start, end in spans)


def _one_sentence(words: Sequence[Word], start: int, end: int) -> bool:
    """True when ``words[start:end]`` lie in one sentence (a semicolon does not end one)."""
    return words[start].sentence == words[end - 1].sentence


def roles_swapped(text_a: _Text, text_b: _Text) -> bool:
    """True when two words or short phrases trade places crosswise, the rest in place: where
    one text has X ... Y, the other has Y ... X ("The woman picks up the kangaroo" vs "The
    kangaroo picks up the woman", "service A calls service B" vs "service B calls service A",
    "writes go to the primary, reads to the replica" vs the reverse, "forward port 5432 to
    6432" vs "forward port 6432 to 5432"). Phrases of unequal length are found too ("the cron
    container triggers the exporter" vs "the exporter triggers the cron container"), when
    they are the one stretch where the texts differ; each phrase holds up to four content
    words.

    Not a swap: items of a list trading places ("Linux and macOS" vs "macOS and Linux",
    clauses of a checklist reordered), the two sides of an identity ("the owner is Alice" vs
    "Alice is the owner"), the passive voice ("Postgres replaced MySQL" vs "MySQL was
    replaced by Postgres"), a sentence recast around another subject ("the error rate doubled
    after the release" vs "the release doubled the error rate": the phrases do not mirror
    each other exactly), sentences moved whole, an attribution turned around ("..., said
    Steve Anderson" vs "..., Steve Anderson said."), and words that trade places across
    sentences (a swap is looked for within one sentence; a semicolon does not end one).
    """
    first, second = ordered(_f(text_a), _f(text_b))
    seq_a, seq_b = first.sequence, second.sequence
    if seq_a == seq_b:
        return False
    blocks = diff_blocks(first, second)
    if len(blocks) < 2:  # two phrases trading places leave two blocks, or one the region check reads
        return _region_swapped(first, second)
    # Block i mirrors block j (i < j): A's side of i is B's side of j and the reverse, the
    # sides differing. B's sides are looked up by content, not compared pair by pair.
    sides_a = [seq_a[op.a0:op.a1] for op in blocks]
    sides_b = [seq_b[op.b0:op.b1] for op in blocks]
    where_b: dict[tuple[str, ...], list[int]] = {}
    for j, side in enumerate(sides_b):
        where_b.setdefault(side, []).append(j)
    mirrored = [
        (i, j) for i, op1 in enumerate(blocks) if op1.tag == "replace"
        for j in where_b.get(sides_a[i], ())
        if j > i and sides_a[i] != sides_b[i] == sides_a[j]
    ]
    paired = {n for pair in mirrored for n in pair}
    for i, j in mirrored:
        # The rest stays in place: any difference between the two is itself a swapped pair
        # ("because the index was missing, not because the table was large" swaps two).
        if any(n not in paired for n in range(i + 1, j)):
            continue
        op1, op2 = blocks[i], blocks[j]
        if _swap_counts(first, second, ((op1.a0, op1.a1), (op2.a0, op2.a1)),
                        ((op1.b0, op1.b1), (op2.b0, op2.b1))):
            return True
    return _region_swapped(first, second)


def _swap_counts(first: TextFeatures, second: TextFeatures, spans_a: Sequence[tuple[int, int]],
                 spans_b: Sequence[tuple[int, int]]) -> bool:
    """True when X and Y, at ``spans_a`` in the first text and trading places at ``spans_b``
    in the second (each pair of spans in text order: ``spans_a[0]`` holds what ``spans_b[1]``
    holds), are roles swapped rather than a harmless reordering."""
    seq_a, seq_b = first.sequence, second.sequence
    (x0, x1), (y0, y1) = spans_a
    (v0, v1), (w0, w1) = spans_b
    if not (_one_sentence(first.aligned, x0, y1) and _one_sentence(second.aligned, v0, w1)):
        return False  # roles trade places within a statement; words far apart are another matter
    content_x = content_words(first.aligned[x0:x1])
    content_y = content_words(first.aligned[y0:y1])
    if not (content_x and content_y) or max(len(content_x), len(content_y)) > _ROLE_MAX_WORDS:
        return False
    if _attribution_turned(first, second, spans_a, spans_b):
        return False
    if _symmetric(seq_a[x1:y0]) or _symmetric(seq_b[v1:w0]):
        return False
    if _agent_marked(seq_a, spans_a) != _agent_marked(seq_b, spans_b):
        return False  # the passive voice names the same agent
    return not (_whole_items(first.aligned, spans_a) and _whole_items(second.aligned, spans_b))


def _attribution_turned(first: TextFeatures, second: TextFeatures, spans_a: Sequence[tuple[int, int]],
                        spans_b: Sequence[tuple[int, int]]) -> bool:
    """True when one of the swapped spans is a lone speech verb that closes its sentence in
    either text: an attribution turned around ("..., said Steve Anderson, a Waco officer" /
    "..., Waco officer Steve Anderson said."), not roles traded ("the reports database is a
    replica of the orders database" keeps its "reports" mid-sentence)."""
    def closes(words: Sequence[Word], end: int) -> bool:
        return end == len(words) or words[end].sentence != words[end - 1].sentence

    for (x0, x1), (_v0, v1) in ((spans_a[0], spans_b[1]), (spans_a[1], spans_b[0])):
        if x1 - x0 == 1 and first.aligned[x0].canon in SPEECH_VERBS and (
                closes(first.aligned, x1) or closes(second.aligned, v1)):
            return True
    return False


# The differing stretch of two texts that _region_swapped splits into X, M, Y: beyond this
# many words it is a rewrite, not two phrases trading places.
_SWAP_REGION_MAX = 24


def _region_swapped(first: TextFeatures, second: TextFeatures) -> bool:
    """True when the one stretch where the texts differ reads X M Y in one and Y M X in the
    other: phrases of unequal length trading places ("the billing worker calls the ledger" /
    "the ledger calls the billing worker"), which a word alignment does not pair up block for
    block."""
    seq_a, seq_b = first.sequence, second.sequence
    if len(seq_a) != len(seq_b):
        return False  # trading places keeps the length
    size = len(seq_a)
    lead = 0
    while lead < size and seq_a[lead] == seq_b[lead]:
        lead += 1
    trail = 0
    while trail < size - lead and seq_a[size - 1 - trail] == seq_b[size - 1 - trail]:
        trail += 1
    region_a, region_b = seq_a[lead:size - trail], seq_b[lead:size - trail]
    n = len(region_a)
    if n < 3 or n > _SWAP_REGION_MAX:
        return False
    for len_x in range(1, n - 1):
        for len_y in range(1, n - len_x):
            x, y = region_a[:len_x], region_a[n - len_y:]
            if (x != y and region_b[:len_y] == y and region_b[n - len_x:] == x
                    and region_a[len_x:n - len_y] == region_b[len_y:n - len_x]
                    and _swap_counts(first, second,
                                     ((lead, lead + len_x), (lead + n - len_y, lead + n)),
                                     ((lead, lead + len_y), (lead + n - len_x, lead + n)))):
                return True
    return False


# --------------------------------------------------------------------------------------------
# substitution

_SUBSTITUTION_SPAN = 3  # words a side of an edit block that may hold a substituted word
_UNIT_CLASSES = frozenset({"duration", "bytes"})


def _units_only(only_a: Sequence[str], only_b: Sequence[str]) -> bool:
    """True when every contrast between the two word lists is one of units (time, bytes)."""
    pairs = [(x, y) for x in only_a for y in only_b if contrast(x, y)]
    return all(
        {c for c, _ in senses(x)} & {c for c, _ in senses(y)} <= _UNIT_CLASSES for x, y in pairs
    )



def _lexical(text: TextFeatures) -> frozenset[str]:
    """The words of a text that the lexicon knows (only they can contrast)."""
    return known_words(text.sequence_set)


def _may_contrast(a: TextFeatures, b: TextFeatures) -> bool:
    """True when A has a word the lexicon knows that could stand replaced in B: a function
    word, or a word B lacks (the test the alignment walk makes, on sets first)."""
    known = a.once("lexical", _lexical)
    return not (known.isdisjoint(STOPWORDS) and known.issubset(b.sequence_set))  # in C


def word_substituted(text_a: _Text, text_b: _Text) -> bool:
    """True when a word of one text stands, at the same place in the other, replaced by a word
    of contrary or sibling meaning: "a small dog" / "a big dog", "emptying" / "filling", "in
    the water" / "out of the water", "plays the flute" / "plays the guitar", "a kid" / "a man",
    "30 seconds" / "30 minutes", "staging" / "production" (see :mod:`memcli.consolidate.lexicon`).

    Synonyms and inflections never count ("big" / "large"), nor does a word the other text
    also uses elsewhere (it moved), nor words the lexicon does not know.
    """
    first, second = ordered(_f(text_a), _f(text_b))
    if not (_may_contrast(first, second) and _may_contrast(second, first)):
        return False
    seq_a, seq_b = first.sequence, second.sequence
    # Only words the lexicon knows contrast (contrast() is False for any other): a block
    # without one on either side is passed over, and the others are left out of the pairs.
    known_a, known_b = first.once("lexical", _lexical), second.once("lexical", _lexical)
    for op in diff_blocks(first, second):
        if op.tag != "replace" or op.a1 - op.a0 > _SUBSTITUTION_SPAN or op.b1 - op.b0 > _SUBSTITUTION_SPAN:
            continue
        span_a, span_b = seq_a[op.a0:op.a1], seq_b[op.b0:op.b1]
        if known_a.isdisjoint(span_a) or known_b.isdisjoint(span_b):
            continue
        # A content word that the other text has anywhere was moved, not replaced; a function
        # word ("in", "out") is too common for that test and is looked at in its place only.
        only_a = [w for w in span_a if w in known_a and w not in span_b
                  and (w in STOPWORDS or w not in second.sequence_set)]
        only_b = [w for w in span_b if w in known_b and w not in span_a
                  and (w in STOPWORDS or w not in first.sequence_set)]
        if any(contrast(x, y) for x in only_a for y in only_b):
            # "seven days" / "a week" is one length of time said two ways: units with a
            # number written in words on either side are the numbers guard's business.
            if not any(w in _NUMBER_WORDS for w in (*span_a, *span_b)) or not _units_only(only_a, only_b):
                return True
    return False


# --------------------------------------------------------------------------------------------
# entities

_NAME_MATCH_CUTOFF = 80.0  # rapidfuzz ratio that takes two words for one name (typo, plural)
_MIN_PREFIX = 3  # "Ron" / "Ronald", "Calif" / "California": a short form of one name
# Days and months are written with a capital but name a date, not a person, product or place:
# "yesterday" / "Tuesday" is one day said two ways, and a day replaced by another in place is
# the substitution guard's (its lexicon has days and months).
_DATE_NAMES = frozenset(
    """monday tuesday wednesday thursday friday saturday sunday january february march april
    june july august september october november december""".split()
)
# One country named in different words ("U.S. troops" / "American troops").
_NAME_ALIASES = tuple(
    frozenset(group.split())
    for group in ("us usa america american americans", "uk britain british briton britons")
)


def _letters(acronym: str) -> str:
    """The letters of an acronym, as its spelled-out form's initials give them ("s&p")."""
    return "".join(ch for ch in acronym if ch.isalpha())


def _spelled_out(text: TextFeatures, acronyms: frozenset[str]) -> set[str]:
    """Capitalised words whose initials, in a row, spell one of ``acronyms``
    ("United Nations" for "UN", "Standard & Poor's" for "S&P")."""
    capitalised, initials = text.capitalised, text.initials
    covered: set[str] = set()
    for acronym in acronyms:
        letters = _letters(acronym)
        start = initials.find(letters) if len(letters) > 1 else -1
        while start >= 0:
            covered.update(capitalised[start : start + len(letters)])
            start = initials.find(letters, start + 1)
    return covered


def _sorted_vocabulary(text: TextFeatures) -> list[str]:
    """The text's words in order: the words that begin with a given name stand together, so
    a short form of one of them ("Calif" of "California") is one binary search away."""
    return sorted(text.vocabulary)


def _mentions(name: str, other: TextFeatures) -> bool:
    """True when the other text holds ``name`` in another form: typo, plural, short form
    ("Ron" / "Ronald", either way round)."""
    vocabulary = other.vocabulary
    if process.extractOne(name, vocabulary, scorer=fuzz.ratio, score_cutoff=_NAME_MATCH_CUTOFF):
        return True
    if len(name) < _MIN_PREFIX:
        return False
    words = other.once("sorted_vocabulary", _sorted_vocabulary)
    at = bisect_left(words, name)
    return (at < len(words) and words[at].startswith(name)) or any(
        name[:end] in vocabulary for end in range(_MIN_PREFIX, len(name)))


class _Names(NamedTuple):
    """The names of one text, its acronyms, and the initials of its capitalised words."""

    names: frozenset[str]
    acronyms: frozenset[str]
    initials: str


def _names(text: TextFeatures) -> _Names:
    return _Names(text.names - _DATE_NAMES, text.acronyms, text.initials)


def _unmatched_names(a: TextFeatures, b: TextFeatures) -> frozenset[str]:
    """Names of ``a`` that ``b`` mentions in no form."""
    names_a = a.once("names", _names)
    if not names_a.names:  # most texts: B's vocabulary is not needed
        return frozenset()
    candidates = names_a.names - b.vocabulary
    if not candidates:
        return frozenset()
    names_b = b.once("names", _names)
    # "United Nations" here and "UN" there, or "UN" here and "United Nations" there.
    candidates -= _spelled_out(a, names_b.acronyms)
    return frozenset(
        name
        for name in candidates
        if not (name in names_a.acronyms and len(_letters(name)) > 1 and _letters(name) in names_b.initials)
        and not any(name in group and group & b.vocabulary for group in _NAME_ALIASES)
        and not _mentions(name, b)
    )


def entities_differ(text_a: _Text, text_b: _Text) -> bool:
    """True when one text has a name where the other has a different name: they are about
    different people, products or places ("deploy with Jenkins" vs "deploy with CircleCI").

    A name is a capitalised word that does not start a sentence, an acronym, or a CamelCase
    word; so a name that opens a sentence goes unseen ("Alice owns it" vs "Bob owns it"),
    the price of not taking every "Deploy" or "Restart" for a name. A name on one side only
    is not a disagreement (one text is more specific), nor is a name that moved (sentences
    reordered). Names match across case, possessives, dots, typos, short forms ("Ron" /
    "Ronald"), acronyms ("UN" / "United Nations") and a country's other names ("U.S." /
    "American"). Days and months are dates, not names (the substitution guard compares them).
    """
    first, second = ordered(_f(text_a), _f(text_b))
    only_a = _unmatched_names(first, second)
    only_b = _unmatched_names(second, first) if only_a else frozenset()
    if not only_b:
        return False
    seq_a, seq_b = first.sequence, second.sequence
    # A name replaced by another lands in one block of difference on both sides.
    return any(only_a.intersection(seq_a[op.a0:op.a1]) and only_b.intersection(seq_b[op.b0:op.b1])
               for op in diff_blocks(first, second))


# --------------------------------------------------------------------------------------------
# all guards

_GUARD_FUNCTIONS: dict[str, Callable[[_Text, _Text], bool]] = {
    "numbers": numbers_differ,
    "negation": negation_differs,
    "polarity": polarity_differs,
    "order": order_swapped,
    "entities": entities_differ,
    "identifiers": identifiers_differ,
    "roles": roles_swapped,
    "substitution": word_substituted,
    "extra_detail": extra_detail,
    "clause": clause_added,
    "qualifier": qualifier_added,
}

GUARDS: tuple[str, ...] = tuple(_GUARD_FUNCTIONS)

# What each guard saw, in words a person reading a review item can check.
DESCRIPTIONS: dict[str, str] = {
    "numbers": "one text has a number the other does not mention",
    "negation": "one text is negated and the other is not",
    "polarity": "the texts take opposite sides of an antonym pair (enable / disable...)",
    "order": "two words trade places around an order word (before, after, than, from... to)",
    "entities": "one text names a person, product or place where the other names another",
    "identifiers": "each text names a command, flag, path or setting the other lacks",
    "roles": "two words or phrases trade places crosswise (A calls B / B calls A)",
    "substitution": "a word is replaced by one of contrary or sibling meaning (small / big, staging /"
                    " production)",
    "extra_detail": "one text has a clause (five or more new words in a row) the other lacks",
    "clause": "one text adds a clause (new words and a verb) where the other has nothing",
    "qualifier": "one short text adds a qualifying phrase the other lacks (in production, for admins)",
}


def guard_function(name: str) -> Callable[[_Text, _Text], bool]:
    """The check behind a guard name (KeyError for an unknown name)."""
    return _GUARD_FUNCTIONS[name]


def guards_rejecting(text_a: _Text, text_b: _Text) -> list[str]:
    """Every guard that rejects the pair, in :data:`GUARDS` order (for people reviewing it)."""
    a, b = _f(text_a), _f(text_b)
    return [] if a.text == b.text else [name for name, check in _GUARD_FUNCTIONS.items() if check(a, b)]


def guard_rejects(text_a: _Text, text_b: _Text) -> str | None:
    """Name of the first guard, in :data:`GUARDS` order, that rejects the pair, else None.

    Takes raw, un-normalised texts or their :class:`TextFeatures`; swapping them gives the
    same answer.
    """
    a, b = _f(text_a), _f(text_b)
    if a.text == b.text:
        return None
    for name, check in _GUARD_FUNCTIONS.items():
        if check(a, b):
            return name
    return None
