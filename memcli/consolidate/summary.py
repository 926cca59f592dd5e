"""The extractive summary of rule 3.2: deterministic, offline, under four headings.

A long episodic memory (a session log, an incident write-up, research notes) becomes, under
What happened / Who was involved / Outcome / Key learnings, sentences of its own:

1. **Its own sections.** A log often has its own parts: Markdown or bold headings
   ("## Resolution", "**Lessons learned**"), label lines ("Outcome:") or paragraphs that open
   with a short label ("Who was involved: ...", "Key learnings. First, ..."). Each part goes
   under the heading its label names (:data:`SECTION_WORDS`); labels themselves are never
   copied, so no stray "## Setup" line lands in the text. The original's own learnings
   come first under Key learnings, each point shortened to its core so that they survive
   side by side. Unlabelled sentences are filed by cue words.
2. **What the text states.** Sentences are chosen greedily by what they add per character:
   facts not yet in the summary (commands, identifiers, numbers with their unit, names,
   acronyms, and the words the text keeps coming back to), plus decisions, errors and fixes
   (decided, failed, root cause, fixed, must...). The opening sentence says what the memory
   is about and always leads What happened.
3. **Short sentences.** Parentheses without facts and openers such as "First," go; a long
   sentence keeps its most telling run of clauses (or its first clause and its conclusion);
   a sentence that would keep too little of itself in the room left is not squeezed in.
4. **A fair share of the space for each heading**, and what one heading cannot use goes to
   the best sentences left.

Chosen sentences appear in their original order. The same input always gives the same
summary, shorter than ``max_chars``; ``bench/summaries.py`` measures how many of the facts
listed for each of its long memories a summary keeps.
"""

from __future__ import annotations

import functools
import heapq
import re
from collections.abc import Sequence
from typing import NamedTuple

__all__ = ["HEADINGS", "SECTION_WORDS", "classify", "extractive_summary", "sections", "sentences"]

HEADINGS = ("What happened", "Who was involved", "Outcome", "Key learnings")
_EMPTY = "(not recorded)"

# Label words that map a section of the original to a heading (first match wins, in order).
SECTION_WORDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Key learnings", ("learn", "lesson", "takeaway", "next time", "notes for", "recommend", "advice",
                       "tips", "gotcha", "retro", "what went", "root cause", "why it happened",
                       "why staging", "prevention", "to remember")),
    ("Who was involved", ("who ", "who:", "involved", "people", "participants", "attendees",
                          "owners", "contacts", "roles", "responders")),
    ("Outcome", ("outcome", "result", "resolution", "resolved", "status", "fix", "conclusion",
                 "decision", "follow-up", "follow up", "next steps", "action items", "impact",
                 "what changed", "final", "verdict", "recommendation")),
    ("What happened", ("what happened", "summary", "context", "background", "timeline", "goal",
                       "problem", "symptom", "overview", "incident", "issue", "setup", "investigation",
                       "debug", "steps", "attempt", "details", "session", "task", "findings",
                       "approach", "plan", "communication")),
)
_SHARES = {"What happened": 0.26, "Who was involved": 0.12, "Outcome": 0.29, "Key learnings": 0.33}

# A person or an agent: "agent:coder", "@sam", "Priya Nair", "the user".
_PERSON = re.compile(r"\bagent:[\w-]+|@\w+|\b[A-Z][a-z]+ [A-Z][a-z]+(?:-[A-Z][a-z]+)?\b|\bthe user\b")
_CUES = {
    "Who was involved": re.compile(
        r"\b(paired|reviewer|reviewed|asked|helped|owner|on-call|engineer|lead|manager|SRE|joined|"
        r"approved|confirmed|handled|investigated|wrote)\b"),
    "Outcome": re.compile(
        r"\b(result|outcome|fixed|resolved|succeeded|success|failed|failure|shipped|deployed|"
        r"merged|completed|finished|works|passing|green|rolled back|closed|now|filed|follow-up)\b", re.I),
    "Key learnings": re.compile(
        r"\b(learn\w*|lesson\w*|next time|should|must|always|never|remember|important|avoid|"
        r"takeaway|note that|turns out|root cause|worth keeping|for the future)\b", re.I),
}
# What makes a sentence worth keeping: a decision, an error, a fix, a rule for next time.
_WEIGHTY = re.compile(
    r"\b(decid\w*|decision|chose|choose|agreed|fix(?:ed|es)?|resolv\w*|root cause|caus\w*|because|"
    r"error\w*|exception|fail\w*|broke\w*|broken|regress\w*|revert\w*|roll(?:ed)? ?back|workaround|"
    r"patch\w*|pinn\w*|switch\w*|migrat\w*|replac\w*|timeout|time(?:d)? out|crash\w*|leak\w*|"
    r"deadlock\w*|must|should|never|always|lesson\w*|learn\w*|instead|so that|the cause|"
    r"blocked|stuck|outage|incident|mitigat\w*)\b", re.I)
# A capitalised word inside a sentence, or an acronym: a name (Qdrant, Redis, SQL, ECR).
_NAME = re.compile(r"(?<=[a-z0-9,;:] )[A-Z][A-Za-z0-9]+|\b[A-Z]{2,}\b")
# An opening that describes the text rather than the events.
_META = re.compile(r"\b(session log|log of|notes? (?:from|by)|written (?:up )?by|this (?:memory|log|is)|"
                   r"write-up|records?|postmortem)\b", re.I)
# Facts: numbers, versions, identifiers (snake_case, dotted, paths, flags, tickets), code.
_FACT = re.compile(r"`[^`]+`|\b[A-Z]{2,}-\d+\b|\b\w+[_./:]\w[\w./:-]*|\B--?\w[\w-]*|\d[\d.,:%]*|"
                   r"\b[A-Z][a-z]+(?:[A-Z]\w*)+\b|\b[A-Z][a-z]+ [A-Z][a-z]+\b")
_SENTENCE = re.compile(r"(?:(?<=[.!?])|(?<=[.!?][\"\u201d')]))\s+(?=[A-Z0-9\"'(\[`])|\n{2,}"
                       r"|\n(?=\s*(?:[-*+]|\d+[.)])\s)")
_MD_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.+?)\s*#*\s*$")
_BOLD_HEADING = re.compile(r"^\s*(?:\*\*|__)(.+?)(?:\*\*|__)\s*:?\s*(.*)$")
_LABEL_LINE = re.compile(r"^\s*([A-Z][\w ,'/&()-]{1,48}?)\s*:\s*$")
_INLINE_LABEL = re.compile(r"^\s*([A-Z][\w ,'/&:-]{1,60}?)\s*(:|\.)\s+(?=\S)")
_LIST_MARK = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")
_OPENERS = re.compile(r"^(?:first|second|third|fourth|fifth|finally|also|in total|however|so|then|"
                      r"next|in the end|overall|all in all|in short|basically)\s*,\s*", re.I)
_PLAIN_PARENS = re.compile(r"\s*\((?![^)]*(?:\d|`|_|/|\.\w|[A-Z]{2}))[^()]{0,80}\)")
_CLAUSE_BREAK = re.compile(r";\s+|:\s+(?=[a-z])|,\s+(?=(?:so|which|because|while|but|and then)\b)")
_DEPENDENT = re.compile(r"(?:which|because|while|and then)\b")
_MAX_SENTENCE = 260  # a longer sentence keeps its best clauses
_MAX_CLAUSES = 40  # clauses of one sentence looked at (a run-on "sentence" may have thousands)
_MAX_CANDIDATES = 400  # sentences a summary chooses from (the best by worth, for huge logs)
# Frequent words that are no topic of any text.
_COMMON = frozenset("""that this with from have were when what which their there been they into
    then than them also would could should about after before only more most some such each
    other first second third time over just like does done make made many much very will
    because while where these those being still even every""".split())


class Section(NamedTuple):
    """A part of the original: its label as written (None before any label) and its text."""

    label: str | None
    text: str


class _Sentence(NamedTuple):
    position: int
    heading: str
    text: str
    tier: int  # 0: from the original's own section for its heading (see _tier)
    terms: dict[str, float]  # the facts it states, weighted (see _terms)


def _clauses(text: str) -> list[str]:
    """The clauses of a sentence, split at semicolons, colons and ", so"/", which"... outside
    parentheses and quotes; each keeps its closing mark."""
    out: list[str] = []
    start = depth = 0
    quoted = False
    for match in _CLAUSE_BREAK.finditer(text):
        before = text[start:match.start()]
        depth += before.count("(") - before.count(")")
        quoted ^= before.count('"') % 2 == 1
        if depth == 0 and not quoted:
            out.append(text[start:match.start()] + match.group(0).strip().rstrip(","))
            start = match.end()
        else:
            depth -= before.count("(") - before.count(")")
            quoted ^= before.count('"') % 2 == 1
    out.append(text[start:])
    return [c.strip() for c in out if c.strip()]


def sections(text: str) -> list[Section]:
    """The original's parts, by Markdown or bold headings, label lines ("Outcome:") and
    paragraphs that open with a known label ("Who was involved: ...", "Key learnings. ...")."""
    found: list[Section] = []
    label: str | None = None
    lines: list[str] = []

    def close() -> None:
        body = "\n".join(lines).strip()
        if body or label is not None:
            found.append(Section(label, body))
        lines.clear()

    for line in text.splitlines():
        markdown = _MD_HEADING.match(line)
        heading = (markdown.group(1), "") if markdown else _label_line(line)
        if heading is not None:
            close()
            label, rest = heading
            if rest:
                lines.append(rest)
            continue
        inline = _INLINE_LABEL.match(line)
        if inline and (not lines or not lines[-1].strip()) and _is_label(inline.group(1), inline.group(2)):
            close()
            label = inline.group(1).strip()
            rest = line[inline.end():]
            lines.append(_capitalised(rest, "") if rest[:1].islower() else rest)
            continue
        lines.append(line)
    close()
    return [s for s in found if s.text]


def _is_label(text: str, mark: str) -> bool:
    """True when a paragraph's opening words are a section label: they map to a heading, and
    are short ("Outcome.", "What happened, in order.", "Key learnings for this codebase:")."""
    words = len(text.split())
    return heading_of(text) is not None and (words <= 4 or (mark == ":" and words <= 8))


def _label_line(line: str) -> tuple[str, str] | None:
    """(label, text after it) for a bold heading or a label line, else None."""
    bold = _BOLD_HEADING.match(line)
    if bold and len(bold.group(1).split()) <= 8:
        return bold.group(1).strip().rstrip(":"), bold.group(2).strip()
    plain = _LABEL_LINE.match(line)
    if plain and len(plain.group(1).split()) <= 6:
        return plain.group(1).strip(), ""
    return None


def heading_of(label: str | None) -> str | None:
    """The heading a section label maps to, or None for a label that says nothing known."""
    if not label:
        return None
    lowered = label.lower().strip() + ":"
    for heading in HEADINGS:
        if lowered.startswith(heading.lower()):
            return heading
    for heading, words in SECTION_WORDS:
        if any(word in lowered for word in words):
            return heading
    return None


def sentences(text: str) -> list[str]:
    """The sentences and list items of a text, cleaned of Markdown marks. A quotation that
    holds several sentences stays one ("... added a line: "Does it lock? Then retry."")."""
    parts = [re.sub(r"\s+", " ", _LIST_MARK.sub("", p.strip())).strip(" -*#>") for p in _SENTENCE.split(text)]
    joined: list[str] = []
    for part in parts:
        if joined and joined[-1].count('"') % 2 == 1:
            joined[-1] += " " + part
        else:
            joined.append(part)
    return [p for p in joined if len(p) > 2]


def classify(sentence: str) -> str:
    """The heading a sentence belongs to by its cue words; learnings first, as they are the
    rarest and most useful. A sentence is about who was involved when it names two people
    or agents, or one with a role."""
    if _CUES["Key learnings"].search(sentence):
        return "Key learnings"
    if _CUES["Outcome"].search(sentence):
        return "Outcome"
    people = len(_PERSON.findall(sentence))
    if people >= 2 or (people == 1 and _CUES["Who was involved"].search(sentence)):
        return "Who was involved"
    return "What happened"


def _terms(sentence: str, topic: dict[str, int]) -> dict[str, float]:
    """The facts a sentence states, each with a weight: commands, identifiers and code (3),
    numbers with their unit (2), names (2), and the words the whole text keeps coming back
    to (1 to 1.5)."""
    found: dict[str, float] = {}
    for match in _FACT.finditer(sentence):
        term = match.group(0).strip("`").lower()
        found[term] = 2.0 if term[:1].isdigit() or " " in term else 3.0
    for match in _NAME.finditer(sentence):  # acronyms and names of tools, places, people
        found.setdefault(match.group(0).lower(), 2.0)
    for word in re.findall(r"[A-Za-z][a-z]{3,}", sentence):
        lowered = word.lower()
        if topic.get(lowered, 0) >= 2 and lowered not in found:
            found[lowered] = min(1.0 + topic[lowered] / 8, 1.5)
    return found


def _value(sentence: _Sentence, covered: set[str]) -> float:
    """What a sentence would add to the summary: its facts not covered yet, its decisions,
    errors and fixes, and whether the original filed it under the heading."""
    new = sum(weight for term, weight in sentence.terms.items() if term not in covered)
    return new + 2.0 * min(_weighty(sentence.text), 3) + (3.0, 2.0, 0.0)[sentence.tier]


@functools.lru_cache(maxsize=4096)
def _weighty(text: str) -> int:
    """How many decision, error and fix words a sentence holds: asked again for each sentence
    on every step of the greedy choice, so counted once per text."""
    return len(_WEIGHTY.findall(text))


def _compress(sentence: str, cap: int, topic: dict[str, int] | None = None) -> str:
    """Drop parentheses that hold no fact and openers such as "First,"; a sentence longer than
    ``cap`` keeps its best run of clauses, else is cut at a word."""
    text = _OPENERS.sub("", _PLAIN_PARENS.sub("", sentence)).strip()
    if len(text) <= cap:
        return _capitalised(text, sentence)
    clauses = _clauses(text)[:_MAX_CLAUSES]
    if len(clauses) > 1:
        worth = [sum(_terms(c, topic or {}).values()) + 2.0 * _weighty(c) for c in clauses]
        best: tuple[float, list[int]] | None = None
        # The run of clauses (in order) worth most within the cap, alone or after the opening
        # clause (the statement, then its conclusion: "X is not safe: so Y must set Z").
        for i in range(len(clauses)):
            if i and _DEPENDENT.match(clauses[i]):
                continue  # a run starts with a clause that stands on its own
            length = total = 0.0
            for j in range(i, len(clauses)):
                length += len(clauses[j]) + 1
                total += worth[j]
                if length > cap:
                    break
                options = [(total, list(range(i, j + 1)))]
                if i > 1 and length + len(clauses[0]) + 1 <= cap:
                    options.append((total + worth[0], [0, *range(i, j + 1)]))
                for option in options:
                    if best is None or option[0] > best[0]:
                        best = option
        if best is not None:
            joined = " ".join(clauses[n] for n in best[1]).rstrip(",;: ")
            if len(joined) < cap:
                return _capitalised(joined + ("" if joined[-1:] in ".!?\"" else "."), sentence)
    cut = text[: cap - 1]
    space = cut.rfind(" ")
    cut = cut[:space] if space > cap // 2 else cut
    if cut.count("(") > cut.count(")") and cut.rfind("(") > 0:  # never end inside a parenthesis
        cut = cut[: cut.rfind("(")]
    return _capitalised(cut.rstrip(",;:( ") + "…", sentence)


def _capitalised(text: str, original: str) -> str:
    """A shortened sentence starts with a capital when it lost its opening words, unless it
    starts with an identifier ("agent:coder", "ledger-api")."""
    if not text or (original and text[:1] == original[:1]) or not text[:1].islower():
        return text
    first = text.split(" ", 1)[0]
    return text if any(ch in first for ch in ":_./-`") else text[:1].upper() + text[1:]


def _tier(label: str | None, heading: str | None) -> int:
    """0: the original's own section for the heading ("Outcome", "Lessons learned"); 1: a
    section mapped to it by a looser word ("What went well"); 2: no section label."""
    if heading is None or label is None:
        return 2
    lowered = label.lower()
    return 0 if any(word in lowered for word in _OWN_SECTION[heading]) else 1


# Label words that make a section the original's own version of a heading.
_OWN_SECTION = {
    "What happened": ("what happened", "summary", "overview", "context", "background", "timeline",
                      "incident", "problem"),
    "Who was involved": ("who", "involved", "people", "participants", "attendees", "responders"),
    "Outcome": ("outcome", "result", "resolution", "resolved", "status", "conclusion"),
    "Key learnings": ("learn", "lesson", "takeaway"),
}


def _sentences_by_heading(details: str) -> tuple[list[_Sentence], dict[str, int]]:
    """Every sentence with its heading, tier and facts; and the text's topic words (word ->
    how often the text uses it)."""
    parts = [(section, sentences(section.text)) for section in sections(details)]
    topic: dict[str, int] = {}
    for word in re.findall(r"[A-Za-z][a-z]{3,}", details):
        lowered = word.lower()
        if lowered not in _COMMON:
            topic[lowered] = topic.get(lowered, 0) + 1
    found: list[_Sentence] = []
    seen: set[str] = set()
    position = 0
    for section, texts in parts:
        mapped = heading_of(section.label)
        tier = _tier(section.label, mapped)
        for sentence in texts:
            key = " ".join(sentence.lower().split())
            if key in seen or len(sentence.split()) < 4:  # repeats; "Second attempt." says nothing
                continue
            seen.add(key)
            if mapped is not None:
                heading = mapped
            elif position < 2:  # the opening sentences say what the session was about
                heading = "What happened"
            else:
                heading = classify(sentence)
            found.append(_Sentence(position, heading, sentence, tier, _terms(sentence, topic)))
            position += 1
    return found, topic


def _caps(wanted: dict[str, int], available: int) -> dict[str, int]:
    """Room per heading: each gets its share, and what one does not need goes to the others."""
    caps = {h: 0 for h in HEADINGS}
    open_headings = [h for h in HEADINGS if wanted[h] > 0]
    remaining = available
    while open_headings and remaining > 0:
        total_share = sum(_SHARES[h] for h in open_headings)
        grant = {h: int(remaining * _SHARES[h] / total_share) for h in open_headings}
        done = [h for h in open_headings if caps[h] + grant[h] >= wanted[h]]
        if not done:
            for h in open_headings:
                caps[h] += grant[h]
            break
        for h in done:
            remaining -= wanted[h] - caps[h]
            caps[h] = wanted[h]
            open_headings.remove(h)
    return caps


_DENSITY = 0.6  # a sentence's worth is divided by its length to this power
# Tuned on bench/summaries (fact recall 86% at these values, 85-86% at their neighbours):
_KEEP_SHARE = 0.3  # a sentence shortened to fit the room left must keep this share of its facts
_OWN_SECTION_SENTENCES = 3  # share the room among up to this many sentences of the own section
_OWN_FLOOR = 160  # ... but never shortened below this many characters
# Headings whose own section in the original goes first: the learnings are the point of a log.
_OWN_FIRST = ("Key learnings",)
_LEAD = 200  # the opening sentence, kept in What happened, shortened to this
# A sentence is shortened to fit what room is left only down to this many characters: a
# shorter fragment says too little.
_MIN_FRAGMENT = 80


def _pick(candidates: list[_Sentence], room: int, covered: set[str],
          topic: dict[str, int], first: Sequence[_Sentence] = ()) -> list[_Sentence]:
    """Greedily the sentences that add most per character (new facts, decisions, the
    original's own section first) until ``room`` is used, after those of ``first`` that fit;
    ``covered`` collects their facts."""
    picked: list[_Sentence] = []
    pool = [s for s in candidates if s not in first]
    for sentence in first:
        if len(sentence.text) + 1 <= room:
            picked.append(sentence)
            room -= len(sentence.text) + 1
            covered.update(sentence.terms)
    # The original's own section for the heading comes first, each of its sentences shortened
    # to a fair part of the room, so that its points survive side by side.
    own = sum(1 for s in pool if s.tier == 0 and s.heading in _OWN_FIRST)
    own_cap = max(_OWN_FLOOR, room // min(own, _OWN_SECTION_SENTENCES)) if own else _MAX_SENTENCE
    def rank(s: _Sentence) -> tuple[bool, float, int]:
        """Smallest first: the original's own section, then most gain per character, then
        the earliest sentence."""
        own_first = s.tier == 0 and s.heading in _OWN_FIRST
        return not own_first, -_value(s, covered) / (min(len(s.text), _MAX_SENTENCE) ** _DENSITY), s.position

    # Lazy greedy: a sentence's gain only falls as `covered` grows, so a rank computed earlier
    # is a bound; the head of the heap is the best once its rank is fresh. The same choices as
    # ranking the whole pool at every step, without its cost on long logs.
    heap = [(rank(s), n, s) for n, s in enumerate(pool)]  # n: pool order breaks any tie, as max() did
    heapq.heapify(heap)
    while heap and room >= _MIN_FRAGMENT // 2:
        stale, n, best = heap[0]
        fresh = rank(best)
        if fresh != stale:
            heapq.heapreplace(heap, (fresh, n, best))
            continue
        heapq.heappop(heap)
        cap = own_cap if best.tier == 0 and best.heading in _OWN_FIRST else _MAX_SENTENCE
        limit = min(_MAX_SENTENCE, room - 1, cap)
        if limit < min(_MIN_FRAGMENT, len(best.text)):
            continue
        short = best._replace(text=_compress(best.text, limit, topic))
        kept_terms = _terms(short.text, topic)
        if sum(kept_terms.values()) < _KEEP_SHARE * sum(best.terms.values()):
            continue  # crushed into the room left, it would say too little: leave the room to others
        if len(short.text) + 1 <= room and _value(best, covered) > 0:
            picked.append(short)
            room -= len(short.text) + 1
            covered.update(best.terms)
    return picked


def extractive_summary(details: str, max_chars: int) -> str:
    """A summary shorter than ``max_chars`` under the four headings, from the text's own
    sentences (see the module docstring)."""
    found, topic = _sentences_by_heading(details)
    if len(found) > _MAX_CANDIDATES:  # a huge log: choose among its most telling sentences
        best = sorted(found[1:], key=lambda s: (-_value(s, set()), s.position))[: _MAX_CANDIDATES - 1]
        found = [found[0], *sorted(best, key=lambda s: s.position)]
    by_heading = {h: [s for s in found if s.heading == h] for h in HEADINGS}
    frame = sum(len(f"## {h}\n\n\n") + (0 if by_heading[h] else len(_EMPTY)) for h in HEADINGS)
    available = max(max_chars - 1 - frame, 0)
    # The opening says what the memory is about; when it only says what kind of text this is
    # ("Session log written by ..."), the next sentence says it.
    leads = [s for s in found[:2] if s.heading == "What happened" and s.position == 0
             or s.position == 1 and _META.search(found[0].text) and s.heading == "What happened"]
    short = {s.position: s._replace(text=_compress(s.text, min(_LEAD, available), topic)) for s in leads}
    by_heading["What happened"] = [short.get(s.position, s) for s in by_heading["What happened"]]
    wanted = {h: sum(min(len(s.text), _MAX_SENTENCE) + 1 for s in by_heading[h]) for h in HEADINGS}
    caps = _caps(wanted, available)
    covered: set[str] = set()
    # The rarest headings first, so that their facts count as new where they are stated.
    leading = list(short.values())
    picked = {h: _pick(by_heading[h], caps[h], covered, topic, leading if h == HEADINGS[0] else [])
              for h in ("Key learnings", "Outcome", "Who was involved", "What happened")}
    # Room a heading could not use goes to the best sentences left, wherever they belong.
    left = available - sum(len(s.text) + 1 for h in HEADINGS for s in picked[h])
    taken = {s.position for h in HEADINGS for s in picked[h]}
    for sentence in _pick([s for s in found if s.position not in taken], left, covered, topic):
        picked[sentence.heading].append(sentence)
    chosen = {h: sorted(picked[h], key=lambda s: s.position) for h in HEADINGS}
    body = "\n\n".join(f"## {h}\n" + (" ".join(s.text for s in chosen[h]) or _EMPTY) for h in HEADINGS)
    return body[: max_chars - 1]
