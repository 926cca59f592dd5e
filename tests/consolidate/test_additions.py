"""Tests for memcli.consolidate.additions: the guards for what one text adds (extra_detail,
clause, qualifier) at their edges, and the smaller changes to negation and entities that go
with them."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memcli.consolidate.additions import (
    CLAUSE_MIN_NEW,
    CLAUSE_NEW_WITHOUT_VERB,
    EXTRA_DETAIL_CONTENT,
    EXTRA_DETAIL_RUN,
    _body_walk,
    _function_words,
    _holds_new_run,
    _longest_new_run,
    _may_hold_run,
    _Walk,
    _walk_arrays,
    clause_added,
    extra_detail,
)
from memcli.consolidate.guards import entities_differ, guard_rejects, negation_differs
from memcli.consolidate.textfeatures import TextFeatures
from tests import sweep

BASE = "The nightly export job writes the ledger snapshot to the reports bucket"


def both(check: object, a: str, b: str) -> bool:
    """The guard's answer, checked to be the same both ways round."""
    assert callable(check)
    first, second = check(a, b), check(b, a)
    assert first == second
    return bool(first)


# --------------------------------------------------------------------------------------------
# clause


@pytest.mark.parametrize(
    "added",
    [
        ", which was deleted",  # a subordinator, a verb, one new word
        ", and they rebuilt it",  # a subject of its own and a verb
        " as the backup job failed",  # two new words and a verb
        ", which Priya moved",  # a verb after a name
    ],
)
def test_an_added_clause_is_caught(added: str) -> None:
    assert both(clause_added, BASE + ".", BASE + added + ".")
    assert guard_rejects(BASE + ".", BASE + added + ".") == "clause"


def test_new_words_without_a_verb_from_four_on() -> None:
    assert CLAUSE_MIN_NEW == 2 and CLAUSE_NEW_WITHOUT_VERB == 4
    three = "Following California's lead, several states passed similar bans."
    four = "Following California's lead on cars, several states passed similar bans."
    assert not both(clause_added, "Several states passed similar bans.", three)
    assert both(clause_added, "Several states passed similar bans.", four)
    # with a verb, two new words are enough
    assert both(clause_added, "Several states passed similar bans.",
                "As California had voted, several states passed similar bans.")


@pytest.mark.parametrize(
    ("text_a", "text_b"),
    [
        (BASE + ".", BASE + ", Priya said."),  # a bare attribution
        (BASE + ".", "Priya said the nightly export job writes the ledger snapshot to the reports bucket."),
        ("The cache is warm again.", "The cache, as you know, is warm again."),  # a reporting aside
        ("The cache is warm again.", "The cache is warm again, I feel."),
        (BASE + ".", BASE + " quickly."),  # one new word, no subordinator or subject
        (BASE + " and then stops.", BASE + " and then halts."),  # a word replaced, not added
        (BASE + " as the backup job runs.", BASE + " as the backup job failed."),  # replaced
        (BASE + ".", BASE + "."),
    ],
)
def test_what_is_not_an_added_clause(text_a: str, text_b: str) -> None:
    assert not both(clause_added, text_a, text_b)


def test_clause_compares_statements_without_their_attributions() -> None:
    # The attribution at the end of one text would hide the clause the other adds there.
    plain = '"These are defining moments for players and organizations," coach Mike Babcock said.'
    more = '"These are defining moments for players and organizations where you are measured."'
    assert TextFeatures(plain).statement.text == '"These are defining moments for players and organizations'
    assert both(clause_added, plain, more)


def test_a_text_without_attribution_is_its_own_statement() -> None:
    text = TextFeatures(BASE + ".")
    assert text.statement is text and text.attribution_words == (0, 0)
    said = TextFeatures(BASE + ", the on-call engineer said on Tuesday.")
    assert said.attribution_words == (0, 7) and said.statement.text == BASE


# --------------------------------------------------------------------------------------------
# extra detail


def test_extra_detail_needs_five_new_words_two_of_them_content_words() -> None:
    assert EXTRA_DETAIL_RUN == 5 and EXTRA_DETAIL_CONTENT == 2
    other = TextFeatures("deploys finish")
    assert _longest_new_run(TextFeatures("they had also been there with us"), other) == 0  # function words only
    assert _longest_new_run(TextFeatures("they had also been there with rollbacks"), other) == 0
    assert _longest_new_run(TextFeatures("they had also been there with rollbacks twice"), other) == 8
    assert not extra_detail("Restart the worker.", "Restart the worker when it is there.")
    assert extra_detail("Restart the worker.", "Restart the worker when memory usage exceeds its limit.")


_WORDS = st.sampled_from("the of and deploy deployed worker workers queue restart jobs pending when it "
                         "memory limit billing ledger said Priya".split())


@settings(max_examples=300, deadline=None)
@given(st.lists(_WORDS, max_size=14), st.lists(_WORDS, max_size=14))
def test_extra_detail_precheck_never_hides_a_run(words_a: list[str], words_b: list[str]) -> None:
    # The set-based pre-check only skips the word walk when no run could reach the length.
    a, b = TextFeatures(" ".join(words_a)), TextFeatures(" ".join(words_b))
    if not _may_hold_run(a, b):
        assert _longest_new_run(a, b) < EXTRA_DETAIL_RUN


def test_extra_detail_precheck_at_its_edges() -> None:
    other = TextFeatures("deploys finish")
    assert not _may_hold_run(TextFeatures("they had also been there with rollbacks"), other)  # one content word
    assert not _may_hold_run(TextFeatures("rollbacks twice"), other)  # two content words, two new words
    assert _may_hold_run(TextFeatures("they had rollbacks twice there"), other)  # five new words


def test_extra_detail_sets_a_bare_attribution_aside() -> None:
    quote = '"Rotate the keys every quarter and keep them in Vault."'
    said = '"Rotate the keys every quarter and keep them in Vault," said Priya Sharma on Tuesday.'
    assert not both(extra_detail, quote, said)
    assert not both(extra_detail, quote, "Priya Sharma said on Tuesday: " + quote)
    # an attribution that says more still counts
    cheered = '"Rotate the keys every quarter and keep them in Vault," Priya said to a standing ovation in the hall.'
    assert both(extra_detail, quote, cheered)


# --------------------------------------------------------------------------------------------
# negation and entities


def test_unless_is_if_not() -> None:
    assert not both(negation_differs, "Restart the worker unless the queue is empty.",
                    "Restart the worker if the queue is not empty.")
    assert both(negation_differs, "Restart the worker unless the queue is empty.",
                "Restart the worker if the queue is empty.")


def test_days_and_months_are_dates_not_names() -> None:
    assert not both(entities_differ, "The court ruled on Monday in Ohio.", "The court ruled yesterday in Ohio.")
    assert not both(entities_differ, "Prices rose in July in Ohio.", "Prices rose last month in Ohio.")
    # a day replaced by another in place is the substitution guard's
    assert guard_rejects("The freeze starts on Friday at noon.", "The freeze starts on Monday at noon.") == (
        "substitution")


def test_a_country_by_another_of_its_names() -> None:
    assert not both(entities_differ, "But U.S. troops will not shrink from raids.",
                    "But American troops will not shrink from raids.")
    assert not both(entities_differ, "Prospects for UK exports are weak.", "Prospects for British exports are weak.")
    assert both(entities_differ, "But U.S. troops will not shrink from raids.",
                "But French troops will not shrink from raids.")


_RUN_WORDS = st.sampled_from(["the", "of", "rollback", "deploy", "queue", "restart", "worker", "and",
                              "pending", "jobs", "after", "cache", "twice", "with", "said"])


@settings(max_examples=sweep.scale(50, 200), deadline=None)
@given(st.lists(_RUN_WORDS, min_size=1, max_size=30), st.lists(_RUN_WORDS, min_size=1, max_size=12),
       st.integers(min_value=1, max_value=8))
def test_a_run_search_that_stops_early_answers_the_same(a: list[str], b: list[str], enough: int) -> None:
    text_a, text_b = TextFeatures(" ".join(a)), TextFeatures(" ".join(b))
    full = _longest_new_run(text_a, text_b)
    early = _longest_new_run(text_a, text_b, enough)
    assert (early >= enough) == (full >= enough) and early <= full
    assert early == full or early >= enough


@settings(max_examples=400, deadline=None)
@given(st.lists(_RUN_WORDS, min_size=0, max_size=30), st.lists(_RUN_WORDS, min_size=0, max_size=30))
def test_the_run_found_from_new_word_positions_is_the_walks(a: list[str], b: list[str]) -> None:
    # extra_detail asks _holds_new_run, which must answer what the pre-check and the word walk
    # answer together (helper guards6).
    text_a, text_b = TextFeatures(" ".join(a) + ", Priya said."), TextFeatures(" ".join(b))
    for x, y in ((text_a, text_b), (text_b, text_a)):
        walk = (_may_hold_run(x, y) and _longest_new_run(x, y, EXTRA_DETAIL_RUN) >= EXTRA_DETAIL_RUN)
        assert _holds_new_run(x, y) is walk
        arrays = _walk_arrays(x)
        assert tuple(zip(_stems(x, arrays), _content_marks(x), strict=True)) == _body_walk(x)
        assert arrays.stem_set == frozenset(_stems(x, arrays))


def _stems(text: TextFeatures, arrays: _Walk) -> tuple[str, ...]:
    """The stems of a walk's words, in order."""
    return text.stem_sequence[arrays.start:arrays.end]


def _content_marks(text: TextFeatures) -> list[bool]:
    """Whether each position of a text's walk is a content word, from its function-word marks."""
    marks = _function_words(text)
    assert len(marks) == len(_stems(text, _walk_arrays(text))) and set(marks) <= {0, 1}
    return [not mark for mark in marks]


def test_the_walk_arrays_with_and_without_an_attribution() -> None:
    # Without an attribution the walk's stem set is the text's own stems (helper guards7);
    # with one, only the stems of the words walked.
    from memcli.consolidate import textfeatures

    plain = TextFeatures("restart the worker after a deploy twice")
    said = TextFeatures("restart the worker after a deploy twice, Priya said.")
    for cold in (True, False):
        if cold:
            textfeatures.WORD_STEMS.clear()
        for text in (TextFeatures(plain.text), TextFeatures(said.text)):
            arrays = _walk_arrays(text)
            assert arrays.stem_set == frozenset(_stems(text, arrays))
            assert tuple(zip(_stems(text, arrays), _content_marks(text), strict=True)) == _body_walk(text)
    assert _walk_arrays(TextFeatures(plain.text)).stem_set == plain.stems
    assert "priy" in TextFeatures(said.text).stems and "priy" not in _walk_arrays(TextFeatures(said.text)).stem_set


def test_the_run_from_positions_at_its_edges() -> None:
    other = TextFeatures("deploys finish")
    assert not _holds_new_run(TextFeatures("rollbacks twice"), other)  # two new words
    assert _holds_new_run(TextFeatures("they had rollbacks twice there"), other)  # five, two content
    # a content word the other text has ends the run: four and one new words
    assert not _holds_new_run(TextFeatures("they had rollbacks twice finish there"), other)
    # a function word it has bridges it
    assert _holds_new_run(TextFeatures("they had rollbacks the twice there"), TextFeatures("the deploys"))


@pytest.mark.parametrize(("text", "long"), [
    ("alpha beta gamma delta epsilon zeta eta theta iota", False),  # nine distinct content words
    ("alpha beta gamma delta epsilon zeta eta theta iota kappa", True),  # ten distinct
    ("alpha beta gamma delta epsilon zeta eta theta iota alpha", True),  # nine distinct, ten in all
    ("alpha beta gamma delta epsilon zeta eta theta and the of iota", False),  # function words
    ("alpha beta gamma delta epsilon zeta eta theta iota calls service A", True),  # a label counts
])
def test_a_long_statement_by_its_distinct_words_or_its_count(text: str, long: bool) -> None:
    # The qualifier guard's context test (helper guards7): the distinct aligned words that are
    # not function words decide when they are enough, the count of content words otherwise.
    from memcli.consolidate.additions import QUALIFIER_MAX_CONTEXT, _long_statement

    features = TextFeatures(text)
    assert _long_statement(features) is long
    assert (features.content_count > QUALIFIER_MAX_CONTEXT) is long


def test_a_long_statement_by_its_number_of_distinct_words_alone() -> None:
    # More distinct aligned words than function words and the limit (helper guards8): some
    # QUALIFIER_MAX_CONTEXT + 1 of them are not function words, without a set operation. At
    # the edge (every function word and nine others) the set operation decides.
    from memcli.consolidate.additions import QUALIFIER_MAX_CONTEXT, _long_statement
    from memcli.consolidate.textfeatures import ARTICLES, STOPWORDS

    function = sorted(STOPWORDS - ARTICLES)  # articles are not aligned
    others = [f"word{n}" for n in range(QUALIFIER_MAX_CONTEXT + 1 + len(ARTICLES))]
    for extra in (QUALIFIER_MAX_CONTEXT, QUALIFIER_MAX_CONTEXT + 1, QUALIFIER_MAX_CONTEXT + 1 + len(ARTICLES)):
        features = TextFeatures(" ".join(function + others[:extra]))
        expected = (len(features.sequence_set - STOPWORDS) > QUALIFIER_MAX_CONTEXT
                    or features.content_count > QUALIFIER_MAX_CONTEXT)
        assert _long_statement(features) is expected is (extra > QUALIFIER_MAX_CONTEXT)
