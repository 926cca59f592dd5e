"""Tests for the per-text work the guards share (memcli.consolidate.textfeatures) and the
cheap checks that let a guard skip what a text cannot need: each must give the answer the
full work gives, whatever the caches hold."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memcli.consolidate import guards, identifiers, order, textfeatures
from memcli.consolidate.textfeatures import TextFeatures, Word
from tests import sweep


def _fresh_words(text: str) -> tuple[Word, ...]:
    textfeatures._token_parts.cache_clear()
    textfeatures._classify.cache_clear()
    textfeatures._starts_sentence.cache_clear()
    textfeatures._TOKENS.clear()
    return textfeatures._text_words(text)


def test_words_carry_case_clause_and_sentence() -> None:
    words = _fresh_words("Deploy al-Qaida-free builds and restart. Mr. Smith owns the U.S. mirror")
    assert [w.canon for w in words] == ["deploy", "al", "qaida", "free", "builds", "and", "restart",
                                        "mr", "smith", "owns", "the", "us", "mirror"]
    assert all(type(w) is Word for w in words)
    deploy, al, qaida = words[0], words[1], words[2]
    assert deploy.at_start and not deploy.is_name  # sentence case, not a name
    assert al.canon == "al" and qaida.is_name and not qaida.at_start
    assert words[5].clause == words[4].clause + 1  # "and" opens a clause
    smith = words[8]
    # the full stop after "Mr" is an abbreviation's: "Smith" stays in the second sentence, a name
    assert smith.is_name and smith.sentence == words[7].sentence == words[6].sentence + 1
    assert words[11].is_acronym and words[11].is_name


def test_each_part_of_a_hyphenated_word_is_classified_on_its_own() -> None:
    words = _fresh_words("the COVID-19 rules")
    assert [w.canon for w in words] == ["the", "covid", "19", "rules"]
    assert words[1].is_acronym and not words[2].is_acronym


def test_a_token_cached_at_a_sentence_start_is_not_reused_inside_one() -> None:
    # "Deploy" opens the first text (sentence case) and stands inside the second (a name):
    # the token cache is keyed by where the token stands.
    first = _fresh_words("Deploy now.")
    second = textfeatures._text_words("We run Deploy now.")
    assert not first[0].is_name and first[0].at_start
    assert second[2].canon == "deploy" and second[2].is_name and not second[2].at_start


_WORDS = st.sampled_from(["Deploy", "deploy", "the", "U.S.", "and", "al-Qaida", "COVID-19", "5,000",
                          "Mr.", "Smith", "but", "Ron", "--force", "isn't", "from", "to", "CI"])
_MARKS = st.sampled_from([" ", " ", " ", ". ", ", ", "; ", "\n", ": ", " - ", "! "])


@settings(max_examples=sweep.scale(50, 200), deadline=None)
@given(st.lists(st.tuples(_WORDS, _MARKS), min_size=1, max_size=14))
def test_words_do_not_depend_on_what_the_caches_hold(parts: list[tuple[str, str]]) -> None:
    text = "".join(word + mark for word, mark in parts)
    cold = _fresh_words(text)
    for other in (text.upper(), text.lower(), "Deploy. " + text):
        textfeatures._text_words(other)  # warm the caches with the same tokens elsewhere
    assert textfeatures._text_words(text) == cold


def test_numbers_without_a_digit_are_none_and_words_still_match() -> None:
    assert guards._numbers(TextFeatures("retry five times")) == frozenset()
    assert guards._numbers(TextFeatures("retry 5 times")) == frozenset({"5"})
    assert not guards.numbers_differ("retry 5 times", "retry five times")
    assert guards.numbers_differ("retry 5 times", "retry 6 times")


def test_negation_by_a_word_and_by_an_n_t_ending_alone() -> None:
    assert guards._is_negated(TextFeatures("The cache is never warmed"))
    assert guards._is_negated(TextFeatures("The cache isn\u2019t warmed"))  # only the "n't" path
    assert not guards._is_negated(TextFeatures("The cache is warmed, n' stuff"))
    assert not guards._is_negated(TextFeatures("Not only the cache is warmed but the index"))


def test_identifiers_need_a_code_mark() -> None:
    assert identifiers._identifiers(TextFeatures("push with force.")) == frozenset()
    assert identifiers._identifiers(TextFeatures("push with --force.")) == frozenset({"--force"})
    assert identifiers._identifiers(TextFeatures("read settings.toml, not the U.S. one")) == frozenset(
        {"settings.toml"})
    assert identifiers._identifiers(TextFeatures("run `make test` first")) == frozenset({"make", "test"})


def test_order_triples_need_an_order_word() -> None:
    assert order._order_triples(TextFeatures("staging then production")) == frozenset(
        {("staging", "then", "production")})
    assert order._order_triples(TextFeatures("staging and production")) == frozenset()


def test_statement_and_attribution_share_one_span() -> None:
    text = TextFeatures("The deploy froze the queue, Priya said.")
    assert text.statement.text == "The deploy froze the queue"
    assert text.attribution_words == (0, 2)


def test_features_are_freed_without_the_cycle_collector() -> None:
    """Planning pauses the cycle collector: a text's features must hold no reference to
    themselves, or every text the guards looked at stayed until the run ended."""
    import gc
    import weakref

    was_enabled = gc.isenabled()
    gc.disable()
    try:
        for raw, own in (("The deploy froze the queue.", True),
                         ("The deploy froze the queue, Priya said.", False)):
            text = TextFeatures(raw)
            assert (text.statement is text) is own
            assert text.attribution_words == ((0, 0) if own else (0, 2))
            ref = weakref.ref(text)
            del text
            assert ref() is None
    finally:
        if was_enabled:
            gc.enable()


# --------------------------------------------------------------------------------------------
# the lean walk (Readings, chunk by chunk) and the per-word tables (helper guards6): each gives
# what the full walk over Words gives, whatever the tables hold and however often they empty


def _clear_tables() -> None:
    textfeatures._TOKENS.clear()
    for table in textfeatures._CHUNKS:
        table.clear()
    identifiers._CODE_WORDS.clear()
    identifiers._NOT_CODE.clear()
    textfeatures.WORD_STEMS.clear()


def _from_words(text: str) -> dict[str, object]:
    """The lean features as the full walk over Words has them (the reference)."""
    words = textfeatures._text_words(text)
    aligned = [w for w in words
               if w.canon not in textfeatures.ARTICLES or (w.canon == "a" and w.capitalised and not w.at_start)]
    return {
        "sequence": tuple(w.canon for w in aligned),
        "aligned_names": tuple(w.is_name for w in aligned),
        "name_positions": frozenset(pos for pos, w in enumerate(aligned) if w.is_name),
        "content": textfeatures.content_words(aligned),
        "vocabulary": frozenset(w.canon for w in words if not w.canon[0].isdigit()),
        "names": frozenset(w.canon for w in words if w.is_name),
        "acronyms": frozenset(w.canon for w in words if w.is_acronym),
        "capitalised": tuple(w.canon for w in words if w.capitalised),
        "initials": "".join(w.canon[0] for w in words if w.capitalised),
    }


def _lean(text: str) -> dict[str, object]:
    features = TextFeatures(text)
    return {key: getattr(features, key) for key in ("sequence", "aligned_names", "name_positions", "content",
                                                    "vocabulary", "names", "acronyms", "capitalised", "initials")}


_LEAN_WORDS = st.sampled_from(["Deploy", "deploy", "the", "a", "A", "An", "U.S.", "and", "al-Qaida", "COVID-19",
                               "5,000", "Mr.", "Smith", "but", "Ron", "--force", "isn't", "from", "to", "CI",
                               "GitHub", "x.y", "J.", "said", "Tuesday", "\"Quote", "(Paren)", "UN", "e.g."])
_LEAN_MARKS = st.sampled_from([" ", " ", " ", ". ", ". ", ", ", "; ", "\n", ": ", " - ", "! ", "? ", ".. ",
                               " . ", ".\n", "\". ", "  ", ".\t", ")."])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(_LEAN_WORDS, _LEAN_MARKS), min_size=1, max_size=20))
def test_the_lean_walk_gives_what_the_words_give(parts: list[tuple[str, str]]) -> None:
    text = "".join(word + mark for word, mark in parts)
    expected = _from_words(text)
    _clear_tables()
    assert _lean(text) == expected  # every chunk and token seen for the first time
    for other in (text.upper(), text.lower(), "Deploy. " + text, text.replace(". ", ", ")):
        _lean(other)  # the same chunks entered in other states
    assert _lean(text) == expected  # from the tables


def test_a_chunk_is_looked_up_by_the_state_it_is_entered_in() -> None:
    _clear_tables()
    # "Smith" after "Mr." stays a name inside the sentence; after "done." it opens one.
    assert TextFeatures("We asked Mr. Smith today").names == frozenset({"smith"})
    assert TextFeatures("We are done. Smith today").names == frozenset()
    assert TextFeatures("We asked Mr. Smith today").names == frozenset({"smith"})


def test_the_tables_empty_when_full_and_answer_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    texts = [f"Service{n} calls Billing{n}. It isn't fast, says the owner of `tool{n}` at x{n}.y"
             for n in range(12)]
    expected = [(_from_words(t), guards._is_negated(TextFeatures(t)), identifiers._identifiers(TextFeatures(t)))
                for t in texts]
    _clear_tables()  # the negation guard reads the chunk tables too
    monkeypatch.setattr(textfeatures, "_CHUNKS_MAX", 3)
    monkeypatch.setattr(textfeatures, "_TOKENS_MAX", 3)
    monkeypatch.setattr(identifiers, "_CODE_WORDS_MAX", 3)
    monkeypatch.setattr(textfeatures, "_WORD_STEMS_MAX", 3)
    for _ in range(2):
        got = [(_lean(t), guards._is_negated(TextFeatures(t)), identifiers._identifiers(TextFeatures(t)))
               for t in texts]
        assert got == expected
    assert all(len(table) <= 4 for table in textfeatures._CHUNKS)
    assert len(textfeatures._TOKENS) <= 4 + 20  # emptied before a text, filled by at most its tokens


_NEGATION_BITS = st.sampled_from(["not", "only", "Not", "NOT", "no", "know", "isn't", "isn\u2019t", "can`t",
                                  "n't", "o'not", "a'b'no", "never", "nothing", "node", "unless", "5no",
                                  "no_x", "dont", "Don\u2018t", "the", "cache", "without", "Without", "with",
                                  "withoutx", "t't", "w", "deploy"])
_NEGATION_GAPS = st.sampled_from([" ", " ", "\n", "  ", ". ", ", ", "\t"])


def _negated_reference(text: str) -> bool:
    """The whole-text check as it was before the chunk sets."""
    lowered = re.sub(r"\bnot\s+only\b", " ", text.lower().translate(textfeatures.APOSTROPHES))
    tokens = re.findall(r"[a-z]+(?:'[a-z]+)?", lowered)
    if not textfeatures.NEGATION_WORDS.isdisjoint(tokens):
        return True
    return "n't" in lowered and any(token.endswith("n't") for token in tokens)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(_NEGATION_BITS, _NEGATION_GAPS), min_size=1, max_size=10))
def test_negation_by_chunks_answers_as_the_whole_text(parts: list[tuple[str, str]]) -> None:
    text = "".join(bit + gap for bit, gap in parts)
    expected = _negated_reference(text)
    _clear_tables()
    assert guards._is_negated(TextFeatures(text)) is expected
    assert guards._is_negated(TextFeatures(text)) is expected  # from the chunk tables
    assert guards._is_negated(TextFeatures(text.upper())) is _negated_reference(text.upper())


def test_every_negation_cue_holds_an_n_or_a_w() -> None:
    # _negated skips a chunk holding neither letter (helper guards7): exact only while every
    # cue holds one.
    negated = textfeatures.negated
    assert all("n" in word or "w" in word for word in textfeatures.NEGATION_WORDS)
    assert negated("without") and negated("isn't") and negated("never")
    assert not negated("with") and not negated("cache") and not negated("t't")


def test_the_walk_finds_the_negated_chunks() -> None:
    # The readings walk tells whether a chunk holds a cue (helper guards7): in any state, from
    # cold or warm tables, a cue in another case or after a curly apostrophe included.
    for text in ("Never deploy", "deploy. Never", "it isn\u2019t", "Mr. NOT here", "x  not", "it is fine",
                 "know nothing", "nothing", "no", "with care", "WITHOUT", "the cache, node"):
        expected = _negated_reference(text)
        _clear_tables()
        assert TextFeatures(text).negation_cue is expected, text
        assert TextFeatures(text).negation_cue is expected, text


def test_a_text_without_only_skips_the_not_only_pattern() -> None:
    # "only" is looked for before the slow pattern (helper guards7); either way the answers
    # are the whole text's.
    for text in ("It is not only fast", "It is not fast", "Only it is fast", "It is NOT  ONLY fast, never",
                 "not\tonly", "not-only", "knot only"):
        _clear_tables()
        assert guards._is_negated(TextFeatures(text)) is _negated_reference(text), text


_CODE_BITS = st.sampled_from(["--force", "-x", "settings.toml", "U.S.", "e.g.", "3.11", "a_b", "(deploy/api)",
                              "`make", "test`", "lock:invoices", "user@host", "key=value", "plain", "\"x.y\"",
                              "m5.large,", "--", "_", "x.Y", "a.5", "end.", "\u00ff.\u00ff", "3.x", "(a.b)",
                              "done.Next"])


def _identifiers_reference(text: str) -> frozenset[str]:
    """The per-word check as it was before the word tables."""
    found: set[str] = set()
    bare = text
    if "`" in bare:
        for span in identifiers._CODE_SPAN_RE.findall(bare):
            found.update(w.strip(identifiers._EDGE_PUNCTUATION).lower() for w in span.split())
        bare = identifiers._CODE_SPAN_RE.sub(" ", bare)
    for word in bare.split():
        word = word.strip(identifiers._EDGE_PUNCTUATION)
        if (identifiers._CODE_MARK_RE.search(word) and identifiers._CODE_WORD_RE.fullmatch(word)
                and not identifiers._ACRONYM_DOTS_RE.fullmatch(word)):
            found.add(word.lower())
    found.discard("")
    return frozenset(found)


@settings(max_examples=sweep.scale(75, 300), deadline=None)
@given(st.lists(st.tuples(_CODE_BITS, _NEGATION_GAPS), min_size=1, max_size=10))
def test_identifiers_from_the_word_tables_are_the_words_own(parts: list[tuple[str, str]]) -> None:
    text = "".join(bit + gap for bit, gap in parts)
    expected = _identifiers_reference(text)
    _clear_tables()
    assert identifiers._identifiers(TextFeatures(text)) == expected
    assert identifiers._identifiers(TextFeatures(text)) == expected


def test_a_text_without_code_marks_has_no_bare_code() -> None:
    # The pre-check (helper guards7): no "-", "_/=@:" nor a dot before an ASCII letter, no
    # bare code word; each is enough to look at the words.
    _clear_tables()
    for text in ("Deploy the worker. Then restart it, twice!", "Version 3.11 ships (a.5).", "\u00ff.\u00ff end."):
        assert not identifiers._may_hold_code(text) and identifiers._identifiers(TextFeatures(text)) == frozenset()
    for text, code in (("use -x", "-x"), ("set a_b", "a_b"), ("see a/b", "a/b"), ("k=v", "k=v"),
                       ("me@host", "me@host"), ("lock:db", "lock:db"), ("open App.Yaml now", "app.yaml")):
        assert identifiers._may_hold_code(text) and identifiers._identifiers(TextFeatures(text)) == frozenset({code})
    assert identifiers._identifiers(TextFeatures("run `make test` now.")) == frozenset({"make", "test"})


def test_a_digit_is_any_of_the_ten_ascii_digits() -> None:
    assert not guards._has_digit("no digits here \u0663 \u00b2")  # Arabic-Indic three, superscript two
    assert all(guards._has_digit(f"port {d}") for d in "0123456789")
    assert guards._numbers(TextFeatures("port 8080 and 1,000")) == frozenset({"8080", "1000"})
    assert guards._numbers(TextFeatures("port \u0663")) == frozenset()


def test_known_words_are_those_with_senses() -> None:
    from memcli.consolidate import lexicon

    words = set(lexicon._index())
    words |= {w + "s" for w in words} | {w[:-1] for w in words if len(w) > 1} | {"ss", "bus", "xyzs", "s"}
    assert lexicon.known_words(frozenset(words)) == frozenset(w for w in words if lexicon.senses(w))


# --------------------------------------------------------------------------------------------
# helper guards7: a word token's Reading made without the caches, and the sentence split


_READING_TOKENS = ["deploy", "isn't", "don\u2019t", "e.g.", "x.y", "abc5", "a", "the", "an", "A", "The", "Deploy",
                   "U.S.", "GitHub", "al-qaida", "al-Qaida", "COVID-19", "ΑΒΓ", "über", "Über", "ǅx", "mr", "Mr",
                   "5,000", "3.11", "²ab's", "CI", "I", "x", "it's", "St", "NASA's", "e-mail", "and", "also", "Straße", "ΣΑΣ",
                   "İstanbul", "McDonald", "iPhone"]


@pytest.mark.parametrize("token", _READING_TOKENS)
def test_a_reading_made_directly_is_the_parts_reading(token: str) -> None:
    form = textfeatures.canon(token)
    if token[0].isalnum():  # a word token: its canonical form as canon() gives it
        assert textfeatures._token_info(token)[4] == form
    assert textfeatures._has_inner_capital(token) is (
        any(ch.isupper() for ch in token[1:]) and any(ch.islower() for ch in token))
    for at_start in (True, False):
        expected = textfeatures._parts_reading(textfeatures._token_parts(token, at_start)[1], at_start)
        assert textfeatures._reading(token, form, at_start) == expected


def test_a_lower_case_word_takes_the_short_way() -> None:
    # No capital and no dot: neither a name, an acronym nor capitalised, in either state.
    for at_start in (True, False):
        sequence, names, content, own_names, acronyms, capitals, vocabulary = textfeatures._reading(
            "deploys", "deploys", at_start)
        assert (sequence, names, content, own_names, acronyms, capitals, vocabulary) == (
            ("deploys",), (False,), ("deploys",), (), (), (), ("deploys",))
    assert textfeatures._reading("the", "the", False)[0] == ()  # an article is not aligned
    assert textfeatures._reading("A", "a", False)[0] == ("a",)  # "service A"
    assert textfeatures._reading("A", "a", True)[0] == ()  # an article opening a sentence


_OLD_SENTENCE_SPLIT = re.compile(r"[.!?;:\n]+(?:\s+|$)")


@settings(max_examples=sweep.scale(75, 300), deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab .!?;:\n\t\u00a0,")), max_size=40))
def test_the_sentence_split_is_the_old_patterns(text: str) -> None:
    assert order._SENTENCE_SPLIT_RE.split(text) == _OLD_SENTENCE_SPLIT.split(text)


def test_stems_from_the_word_table_are_the_words_first_letters(monkeypatch: pytest.MonkeyPatch) -> None:
    # Stems read through the shared word table (helper guards7), cold, warm and emptied when
    # full, are the first STEM_LETTERS letters of each word.
    texts = ["Deploy the deployment, then deploys", "a an the of it", "Über ünder x y", ""]
    for full in (False, True):
        if full:
            monkeypatch.setattr(textfeatures, "_WORD_STEMS_MAX", 3)
        textfeatures.WORD_STEMS.clear()
        for _ in range(2):
            for text in texts:
                features = TextFeatures(text)
                assert features.stems == frozenset(w[:textfeatures.STEM_LETTERS] for w in features.word_set)
                stems = textfeatures.word_stems(features.word_set)
                assert all(stems[w] == w[:4] for w in features.word_set)


@settings(max_examples=sweep.scale(75, 300), deadline=None)
@given(st.text(alphabet=st.sampled_from(list("abcdeÜßİ ﬁ.-'1")), max_size=60), st.booleans())
def test_stems_are_the_set_of_the_stems_in_order(text: str, sequence_first: bool) -> None:
    # (cold16) The stems are the set of stem_sequence, made once: the first STEM_LETTERS
    # letters of each distinct word, whichever of the two a guard asks for first.
    features = TextFeatures(text)
    if sequence_first:
        assert features.stem_sequence == tuple(w[:textfeatures.STEM_LETTERS] for w in features.words)
    assert features.stems == frozenset(w[:textfeatures.STEM_LETTERS] for w in features.word_set)
    assert features.stem_sequence == tuple(w[:textfeatures.STEM_LETTERS] for w in features.words)


# --------------------------------------------------------------------------------------------
# helper guards8: a new chunk of one word (and one mark) read the short way


_SHORT_WAY_CHUNKS = ["deploy", "Deploy", "DEPLOY", "deploy.", "deploy,", "deploy;", "deploy:", "deploy!", "deploy?",
                     "Mr.", "mr.", "mr", "St.", "I.", "I", "x!", "a.", "A:", "The.", "an,", "no.", "Not:", "NOWHERE!",
                     "without?", "KNOT;", "über!", "Über,", "ſtop", "ﬁx.", "ǅx.", "ß.", "İstanbul.", "ΣΑΣ.", "K",
                     "NASA:", "GitHub.", "", ".", "..", ",", "deploy..", "deploy.)", "x.y", "e.g.", "n't", "isn't.",
                     "5.", "abc5.", "al-Qaida.", "(deploy", "deploy\nNext", "don\u2019t,"]


@pytest.mark.parametrize("chunk", _SHORT_WAY_CHUNKS)
def test_a_chunk_read_the_short_way_is_the_full_reading(chunk: str) -> None:
    for state in range(4):
        expected = textfeatures._entry(*textfeatures._chunk_readings(chunk, state), textfeatures.negation_cue(chunk))
        assert textfeatures._chunk_entry(chunk, state) == expected, (chunk, state)


@settings(max_examples=sweep.scale(75, 300), deadline=None)
@given(st.text(alphabet=st.sampled_from(list("aZnotwKß\u0130\u017f.,;:!?'-")), min_size=1, max_size=8))
def test_any_chunk_read_by_its_entry_is_the_full_reading(chunk: str) -> None:
    for state in range(4):
        expected = textfeatures._entry(*textfeatures._chunk_readings(chunk, state), textfeatures.negation_cue(chunk))
        assert textfeatures._chunk_entry(chunk, state) == expected, (chunk, state)


# --------------------------------------------------------------------------------------------
# helper guards8: the order guard reads only the sentences that hold an order word


def _order_triples_reference(text: str) -> frozenset[tuple[str, str, str]]:
    """The order triples from every sentence of the text (the split of the whole text)."""
    features = TextFeatures(text)
    if order._ORDER_WORDS.isdisjoint(features.word_set):
        return frozenset()
    return frozenset().union(*map(order._sentence_triples, order._SENTENCE_SPLIT_RE.split(text)))


_ORDER_BITS = st.sampled_from(["before", "Before", "BEFORE", "after", "than", "thank", "over", "overall", "from",
                               "From", "to", "into", "then", "instead", "staging", "prod", "db", "x", "3.5", "e.g",
                               "the", "cache", "a", "7"])
_ORDER_GAPS = st.sampled_from([" ", " ", " ", ". ", "; ", ":", ".\n", "\n", "!? ", ".", " . ", "  ", "\t", ", ",
                               "-", ";\n ", "...", ".x"])


@settings(max_examples=sweep.scale(100, 400), deadline=None)
@given(st.lists(st.tuples(_ORDER_BITS, _ORDER_GAPS), min_size=1, max_size=25))
def test_the_sentences_found_around_order_words_give_every_triple(parts: list[tuple[str, str]]) -> None:
    text = "".join(bit + gap for bit, gap in parts)
    assert order._order_triples(TextFeatures(text)) == _order_triples_reference(text)
    present = order._ORDER_WORDS.intersection(TextFeatures(text).word_set)
    expected = [s for s in order._SENTENCE_SPLIT_RE.split(text) if any(w in s.lower() for w in present)]
    assert order._sentences_holding(text, present) == expected


def test_a_sentence_is_found_however_far_back_it_starts() -> None:
    # The scan for a sentence's start goes further back until it finds a separator (or the
    # text's start): a sentence longer than the first look back, and one after a long one.
    long_sentence = " ".join(["word"] * 300)
    for text in (f"{long_sentence} staging before production",
                 f"{long_sentence}. staging before production",
                 f"First. {long_sentence} staging before production. Last after all",
                 "staging before production"):
        assert order._order_triples(TextFeatures(text)) == _order_triples_reference(text)
        place = text.index("before")
        start, end = order._sentence_around(text, place)
        assert text[start:end] in order._SENTENCE_SPLIT_RE.split(text)
        assert start <= place < end
    assert ("staging", "before", "production") in order._order_triples(TextFeatures(f"{long_sentence} staging "
                                                                                     "before production"))


def test_a_text_beyond_ascii_splits_every_sentence() -> None:
    text = "Über staging before production. Then ünder after prod"
    assert order._order_triples(TextFeatures(text)) == _order_triples_reference(text)
    assert ("staging", "before", "production") in order._order_triples(TextFeatures(text))


# --------------------------------------------------------------------------------------------
# helper guards8: the blocks read from the equal stretches, and a text's last alignment kept
# on its own features


def _blocks_reference(first: TextFeatures, second: TextFeatures) -> tuple[textfeatures.Op, ...]:
    """The blocks as runs of consecutive edits of the edit script (how they were first read)."""
    from rapidfuzz.distance import Levenshtein

    seq_a, seq_b = first.sequence, second.sequence
    if seq_a == seq_b:
        return ()
    blocks, run = [], None
    for tag, a0, a1, b0, b1 in Levenshtein.opcodes(seq_a, seq_b).as_list():
        if tag == "equal":
            if run is not None:
                blocks.append(run)
                run = None
            continue
        run = (a0, b0, a1, b1) if run is None else (run[0], run[1], a1, b1)
    if run is not None:
        blocks.append(run)
    return tuple(textfeatures.Op("insert" if a0 == a1 else "delete" if b0 == b1 else "replace", a0, a1, b0, b1)
                 for a0, b0, a1, b1 in blocks)


_DIFF_WORDS = st.sampled_from(["deploy", "the", "staging", "production", "in", "out", "of", "cache", "Alice", "x"])


@settings(max_examples=sweep.scale(75, 300), deadline=None)
@given(st.lists(_DIFF_WORDS, max_size=14), st.lists(_DIFF_WORDS, max_size=14))
def test_the_blocks_between_equal_stretches_are_the_runs_of_edits(a: list[str], b: list[str]) -> None:
    first, second = textfeatures.ordered(TextFeatures(" ".join(a)), TextFeatures(" ".join(b)))
    expected = _blocks_reference(first, second)
    assert textfeatures.diff_blocks(first, second) == expected
    assert all(type(op) is textfeatures.Op for op in textfeatures.diff_blocks(first, second))


def test_a_text_keeps_its_last_alignment_without_holding_the_other_text() -> None:
    import gc
    import weakref

    a = TextFeatures("restart the worker after a deploy")
    b = TextFeatures("restart the queue after a deploy")
    c = TextFeatures("restart the worker before a deploy")
    ab = textfeatures.diff_blocks(a, b)
    assert textfeatures.diff_blocks(a, b) is ab  # the guards of one pair share it
    assert textfeatures.diff_blocks(a, TextFeatures(b.text)) is ab  # the same text
    ac = textfeatures.diff_blocks(a, c)
    assert ac == _blocks_reference(a, c) != ab
    assert textfeatures.diff_blocks(a, b) is ab  # the last two are kept (texts, statements)
    d = TextFeatures("restart the worker after a rollback")
    assert textfeatures.diff_blocks(a, d) == _blocks_reference(a, d)
    assert textfeatures.diff_blocks(a, c) is ac  # the last two made: d's and c's
    again = textfeatures.diff_blocks(a, b)  # the oldest let go: aligned again
    assert again is not ab and again == ab
    was_enabled = gc.isenabled()
    gc.disable()  # planning pauses the collector: the other text must go without it
    try:
        ref = weakref.ref(c)
        textfeatures.diff_blocks(a, c)
        del c
        assert ref() is None
    finally:
        if was_enabled:
            gc.enable()
