"""Tests for the per-text work the guards share (memcli.consolidate.textfeatures) and the
cheap checks that let a guard skip what a text cannot need: each must give the answer the
full work gives, whatever the caches hold."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from memcli.consolidate import guards, textfeatures
from memcli.consolidate.textfeatures import TextFeatures, Word


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


@settings(max_examples=200, deadline=None)
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
    assert guards._identifiers(TextFeatures("push with force.")) == frozenset()
    assert guards._identifiers(TextFeatures("push with --force.")) == frozenset({"--force"})
    assert guards._identifiers(TextFeatures("read settings.toml, not the U.S. one")) == frozenset(
        {"settings.toml"})
    assert guards._identifiers(TextFeatures("run `make test` first")) == frozenset({"make", "test"})


def test_order_triples_need_an_order_word() -> None:
    assert guards._order_triples(TextFeatures("staging then production")) == frozenset(
        {("staging", "then", "production")})
    assert guards._order_triples(TextFeatures("staging and production")) == frozenset()


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
