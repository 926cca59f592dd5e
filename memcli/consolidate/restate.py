"""Restatements: what two texts stating one fact may differ in without meaning anything else.

Two memories that say the same thing are rarely written alike. Some of their differences carry
no meaning at all, and the duplicate rule should not count them against the pair:

- an **attribution** around the statement: ``"The cache is warm," Alice said.`` states what
  ``The cache is warm.`` states (who said it, and when, is not what the memory is about);
- **spelling**: contractions ("doesn't" / "does not"), possessives ("Bush's" / "Bush"),
  British and American forms ("colour" / "color", "organise" / "organize", "programme" /
  "program"), dotted acronyms ("U.S." / "US"), honorifics ("Mr. Soros" / "Soros");
- **number formats**: "1,000" / "1000", "2.5 million" / "2,500,000", "20%" / "20 per cent" /
  "20 percent", "$5" / "5", "fifty-seven" / "57", "v2.3" / "version 2.3";
- **articles** ("the man is playing the drums" / "a man is playing drums").

:func:`plain_form` gives a text without any of these: the duplicate rule's second look
(:func:`memcli.consolidate.similar.second_look`) scores a pair just below the threshold again on
their plain forms. :func:`statement_span` finds where a text's statement lies once a *bare*
attribution (a speaker, a speech verb and at most when or how it was said) is set aside: the
guards that look for what one text adds (:mod:`memcli.consolidate.additions`) do not count such
an attribution as an added clause, while anything more in it ("..., he said to a standing
ovation") still counts.

Everything here is a pure function of one text, linear in its length (the attribution is looked
for in the first and last :data:`EDGE_CHARS` characters only), and computed once per text (see
:class:`memcli.consolidate.textfeatures.TextFeatures`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from decimal import Decimal, localcontext

from rapidfuzz.utils import default_process

__all__ = [
    "EDGE_CHARS",
    "NUMBER_RE",
    "SCALES",
    "REPORTING_VERBS",
    "SPEECH_VERBS",
    "canonical_number",
    "plain_form",
    "statement_span",
]

# --------------------------------------------------------------------------------------------
# attribution

# Verbs that report speech. An attribution is built around one of them.
SPEECH_VERBS = frozenset(
    """said says say told tells added adds stated states announced announces reported reports
    wrote writes explained explains noted notes argued argues insisted insists warned warns
    confirmed confirms acknowledged acknowledges commented comments declared declares continued
    concluded predicted testified asserted maintained claimed claims admitted admits recalled
    replied responded contended cautioned complained stressed observed remarked conceded
    according saying telling adding quoted""".split()
)
# Verbs that report a view or a finding ("I feel that", "as you know", "researchers have
# found"): a parenthesis built on one of them reports, it does not add a fact.
REPORTING_VERBS = frozenset(
    """feel feels felt think thinks thought believe believes believed know knows knew admit
    admits admitted call calls called find finds found show shows showed suggest suggests
    suggested indicate indicates indicated estimate estimates estimated hope hopes hoped expect
    expects expected say says said""".split()
)
# A statement opened by one of these can be a plain statement about a tool or a system ("the
# linter warned about unused imports"), so only the verbs that report people speaking open a
# leading attribution.
_LEADING_VERBS = (
    "said says stated announced explained argued insisted declared claimed admitted stressed "
    "acknowledged contended maintained asserted testified predicted recalled conceded added"
).split()

# An attribution is looked for this close to either end of a text (an attribution is a short
# clause; a longer window would only cost time on long memories).
EDGE_CHARS = 240

_SPEECH = "|".join(sorted(SPEECH_VERBS - {"according", "saying", "telling", "adding", "quoted"}))
_LEAD = "|".join(_LEADING_VERBS)
# When and how it was said: "yesterday", "on Tuesday", "in a statement", "at a news conference",
# "to reporters". Nothing else may stand in a bare attribution.
_SETTING = (
    r"(?:yesterday|today|tonight|earlier|later|last\s+(?:week|night|month|year)"
    r"|(?:on\s+)?[a-z]+day(?:\s+(?:morning|afternoon|evening|night))?"
    r"|in\s+an?\s+(?:[a-z]+\s+)?(?:statement|interview|letter|e-?mail|release)"
    r"|at\s+an?\s+(?:[a-z]+\s+)?(?:news\s+)?(?:conference|briefing|hearing)"
    r"|(?:to|told)\s+reporters)"
)
_SETTINGS = r"(?:\s+" + _SETTING + r"){0,2}"
# A speaker: up to six words, without a comma or a quote ("he", "Gov. John Baldacci", "White
# House press secretary Ari Fleischer", "Itar-Tass news agency").
_SPEAKER = r"(?:[\w.'\u2019&-]+\s+){0,5}?[\w.'\u2019&-]+"
_CLOSE = "\"\u201d"  # a closing quote (an apostrophe is not one: "the drivers' union said")
# "..., he said." / "...," said Alice Smith on Tuesday. / ..." Bush said in a statement.
_TRAILING_BARE = re.compile(
    r"(?:,|[" + _CLOSE + r"])\s*[" + _CLOSE + r"]?\s*"
    r"(?:" + _SPEAKER + r"\s+\b(?:" + _SPEECH + r")\b" + _SETTINGS
    + r"|\b(?:" + _SPEECH + r")\s+" + _SPEAKER + _SETTINGS + r")"
    r"\s*[.!?]?[" + _CLOSE + r"']*\s*$",
    re.IGNORECASE,
)
# "Police said her two children..." / "He added that..." / "Alice said on Tuesday: ...": the
# verb must be followed by what a reported statement starts with, so that "the linter warned
# about unused imports" keeps its verb.
_LEADING_BARE = re.compile(
    r"^\s*[\"\u201c]?" + _SPEAKER + r"\s+\b(?:" + _LEAD + r")\b" + _SETTINGS
    + r"(?:\s+that\b|\s*[,:]|(?=\s+[\"\u201c]|\s+(?:he|she|it|they|we|i|you|there|the|a|an|this|"
    r"these|those|his|her|its|their|our|my)\b))\s*",
    re.IGNORECASE,
)
# The whole attribution clause, whatever else it holds: what the second look sets aside to
# compare the statements themselves ("..., Breyer said to cheers in the courtroom.").
_TRAILING_CLAUSE = re.compile(
    r"(?:,|[" + _CLOSE + r"]|\s--?\s|\s-\s)\s*[" + _CLOSE + r"]?\s*"
    r"(?:(?:[^\s\"\u201c\u201d]+\s+){0,6}?\b(?:" + _SPEECH + r")\b|according\s+to\b)"
    r"[^\"\u201c\u201d]*$",
    re.IGNORECASE,
)
_LEADING_CLAUSE = re.compile(
    r"^\s*[\"\u201c]?[^\"\u201c\u201d.\n]{0,80}?\b(?:" + _LEAD + r")\b"
    r"(?:\s+(?:on|in|at)\s+[^,\"\u201c\n]{1,40}?)?(?:\s+that\b)?\s*[,:]?\s*(?=[\"\u201c]|\w)",
    re.IGNORECASE,
)
_ACCORDING_TO = re.compile(r"^\s*according\s+to\s+[^,\n]{1,60},\s*", re.IGNORECASE)
_MIN_STATEMENT_WORDS = 4  # what is left must still be a statement
_MAX_CLAUSE_WORDS = 16
_MAX_LEADING_WORDS = 10


def _words(text: str) -> int:
    return len(text.split())


def statement_span(text: str, *, bare: bool = True) -> tuple[int, int]:
    """(start, end): where ``text[start:end]`` states what the text states, an attribution at
    its start or end set aside (``(0, len(text))`` when it has none).

    With ``bare`` (the default), only a bare attribution is set aside: a speaker of up to six
    words, a speech verb, and at most when or how it was said ("..., he said.", "...," said
    Gov. John Baldacci on Tuesday., "Police said ..."). Without, the whole attribution clause
    is: up to :data:`_MAX_CLAUSE_WORDS` words after a comma or a quote with a speech verb in its
    first words ("..., Breyer said to cheers in the courtroom."), or up to ten words before the
    statement ending in a speech verb ("Speaking from the Senate floor, Byrd said ...").
    Either way, at least four words must be left.
    """
    start, end = 0, len(text.rstrip())
    tail_from = max(0, end - EDGE_CHARS)
    tail = text[tail_from:end]
    found = (_TRAILING_BARE if bare else _TRAILING_CLAUSE).search(tail)
    if found and (bare or _words(found.group(0)) <= _MAX_CLAUSE_WORDS):
        cut = tail_from + found.start()
        if _words(text[:cut]) >= _MIN_STATEMENT_WORDS:
            end = cut
    head = text[: min(end, EDGE_CHARS)]
    for pattern in ((_LEADING_BARE,) if bare else (_LEADING_CLAUSE, _ACCORDING_TO)):
        found = pattern.match(head)
        if (found and (bare or _words(found.group(0)) <= _MAX_LEADING_WORDS)
                and _words(text[found.end():end]) >= _MIN_STATEMENT_WORDS):
            start = found.end()
            break
    return start, end


# --------------------------------------------------------------------------------------------
# numbers

# Digits with optional thousands separators and dotted parts ("1,000", "3.14", "1.2.3"),
# optionally followed by a scale word ("1.5 million", "38-million") or suffix ("$1.4bn", "10k").
NUMBER_RE = re.compile(
    r"(?<![0-9.,])([0-9]{1,3}(?:,[0-9]{3})+|[0-9]+)((?:\.[0-9]+)*)"
    r"(?:[\s-]*(thousand|million|billion|trillion)\b|(bn|k)\b)?",
    re.IGNORECASE,
)
SCALES = {"thousand": 10**3, "million": 10**6, "billion": 10**9, "trillion": 10**12}
_SCALE_SUFFIXES = {"bn": "billion", "k": "thousand"}


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
            scaled = Decimal(integer + fraction) * SCALES[scale.lower()]
            return f"{scaled.normalize():f}"
    return integer + fraction


def canonical_number(match: re.Match[str]) -> str:
    """The canonical text of a :data:`NUMBER_RE` match: "1,000" = "1000" = "1 thousand" =
    "1k", "2.5 million" = "2500000", "5.00" = "5"; dotted versions as written."""
    suffix = _SCALE_SUFFIXES.get((match.group(4) or "").lower())
    return _number_value(match.group(1), match.group(2), match.group(3) or suffix)


# --------------------------------------------------------------------------------------------
# spelling and number formats

_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u00b4": "'", "`": "'"})
_CONTRACTIONS = (
    (re.compile(r"\bwon't\b", re.IGNORECASE), "will not"),
    (re.compile(r"\bcan't\b|\bcannot\b", re.IGNORECASE), "can not"),
    (re.compile(r"n't\b", re.IGNORECASE), " not"),
    (re.compile(r"'re\b", re.IGNORECASE), " are"),
    (re.compile(r"'m\b", re.IGNORECASE), " am"),
    (re.compile(r"'ve\b", re.IGNORECASE), " have"),
    (re.compile(r"'ll\b", re.IGNORECASE), " will"),
    (re.compile(r"'d\b", re.IGNORECASE), " would"),
    (re.compile(r"(?<=\w)'s\b", re.IGNORECASE), ""),  # possessive, or "it's": the rest says which
    (re.compile(r"(?<=\ws)'(?=\s|$)", re.IGNORECASE), ""),  # "the workers' union"
)
_VERSION_RE = re.compile(r"\bv(?=\d)", re.IGNORECASE)  # "v2.3" = "version 2.3"
_PERCENT_RE = re.compile(r"(?<=\d)\s*%|\bper\s*cent\b|\bpct\b", re.IGNORECASE)
_CURRENCY_RE = re.compile(r"[$\u20ac\u00a3]")
_DOTTED_ACRONYM_RE = re.compile(r"\b(?:[A-Za-z]\.){2,}")

# British forms (and a few variants) -> the American form. The regular ones (-our, -ise, -yse,
# -tre, -ogue) are rewritten by rule in :func:`_american`; both sides of a pair are rewritten
# alike, so a rule that also rewrites a word with no variant ("promise" -> "promize") is harmless.
_SPELLINGS = {
    "programme": "program", "programmes": "programs", "judgement": "judgment", "defence": "defense",
    "offence": "offense", "licence": "license", "pretence": "pretense", "grey": "gray",
    "cheque": "check", "cheques": "checks", "tyre": "tire", "tyres": "tires",
    "aluminium": "aluminum", "towards": "toward", "amongst": "among", "whilst": "while",
    "afterwards": "afterward", "ok": "okay", "e-mail": "email",
    "travelled": "traveled", "travelling": "traveling", "cancelled": "canceled",
    "cancelling": "canceling", "labelled": "labeled", "labelling": "labeling",
    "modelled": "modeled", "modelling": "modeling", "fuelled": "fueled", "signalled": "signaled",
    "totalled": "totaled", "counselled": "counseled", "channelled": "channeled",
    "levelled": "leveled", "marshalled": "marshaled", "tunnelled": "tunneled",
}
_OUR_RE = re.compile(r"(?<=[^aeiou])our(s|ed|ing|ite|ites|able|ably)?$")
_NOT_OUR = ("pour", "four", "tour", "sour", "hour", "your", "flour", "dour", "detour", "devour")
_ISE_RE = re.compile(r"^(.{3,}[^aeiou])is(e|es|ed|ing|ation|ations|er|ers)$")
_YSE_RE = re.compile(r"^(.{2,}[^aeiou])ys(e|es|ed|ing)$")
_TRE_RE = re.compile(r"^(.{3,})tre(s?)$")
_OGUE_RE = re.compile(r"^(.{3,})ogue(s?)$")

_UNIT_WORDS = """zero one two three four five six seven eight nine ten eleven twelve thirteen
    fourteen fifteen sixteen seventeen eighteen nineteen""".split()
_TENS_WORDS = {"twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70,
               "eighty": 80, "ninety": 90}
_HONORIFICS = frozenset({"mr", "mrs", "ms", "dr", "sir"})
_ALIASES = (("united", "states", "us"), ("united", "nations", "un"), ("united", "kingdom", "uk"))
_DROPPED = frozenset({"a", "an", "the", "s"})  # articles, and an "s" a possessive left behind


def _american(word: str) -> str:
    """The American spelling of a (lower-case) word."""
    if word in _SPELLINGS:
        return _SPELLINGS[word]
    if len(word) >= 6 and not word.endswith(_NOT_OUR):
        word = _OUR_RE.sub(lambda m: "or" + (m.group(1) or ""), word)
    for pattern, middle in ((_ISE_RE, "iz"), (_YSE_RE, "yz")):
        found = pattern.match(word)
        if found:
            return found.group(1) + middle + found.group(2)
    for pattern, ending in ((_TRE_RE, "ter"), (_OGUE_RE, "og")):
        found = pattern.match(word)
        if found:
            return found.group(1) + ending + found.group(2)
    return word


def _digits(words: Sequence[str]) -> list[str]:
    """Number words as digits ("fifty seven" -> "57", "two" -> "2")."""
    out: list[str] = []
    pos = 0
    while pos < len(words):
        word = words[pos]
        if word in _TENS_WORDS:
            value = _TENS_WORDS[word]
            if pos + 1 < len(words) and words[pos + 1] in _UNIT_WORDS[1:10]:
                value += _UNIT_WORDS.index(words[pos + 1])
                pos += 1
            out.append(str(value))
        elif word in _UNIT_WORDS:
            out.append(str(_UNIT_WORDS.index(word)))
        else:
            out.append(word)
        pos += 1
    return out


def _aliases(words: list[str]) -> list[str]:
    """"united states" -> "us" (as "U.S." and "US" become), and the like."""
    out: list[str] = []
    pos = 0
    while pos < len(words):
        for first, second, short in _ALIASES:
            if words[pos] == first and pos + 1 < len(words) and words[pos + 1] == second:
                out.append(short)
                pos += 2
                break
        else:
            out.append(words[pos])
            pos += 1
    return out


def plain_form(text: str) -> str:
    """The text as the duplicate rule's second look compares it: its statement (the whole
    attribution clause set aside, see :func:`statement_span`), normalised like the rule's
    texts (rapidfuzz ``default_process``), with contractions spelled out, possessives, articles
    and honorifics dropped, American spelling, numbers in one form (no thousands separators,
    scale words or currency signs: "2,500,000" = "2.5 million", "$5" = "5"; "v2.3" = "version
    2.3"), percentages as "percent", number words as digits, and "U.S." / "United States" as
    "us".

    Only differences that carry no meaning are undone: a different word, name or number
    still differs.
    """
    start, end = statement_span(text, bare=False)
    statement = text[start:end].translate(_APOSTROPHES)
    for pattern, replacement in _CONTRACTIONS:
        statement = pattern.sub(replacement, statement)
    statement = _VERSION_RE.sub("version ", statement)
    statement = NUMBER_RE.sub(lambda m: " " + canonical_number(m) + " ", statement)
    statement = _PERCENT_RE.sub(" percent ", statement)
    statement = _CURRENCY_RE.sub(" ", statement)
    statement = _DOTTED_ACRONYM_RE.sub(lambda m: m.group(0).replace(".", ""), statement)
    words = [_american(word) for word in default_process(statement).split()]
    words = _aliases(_digits(words))
    return " ".join(w for w in words if w not in _DROPPED and w not in _HONORIFICS)
