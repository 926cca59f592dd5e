"""Tests for memcli.consolidate.restate: attributions set aside, the plain form, and the second
look of the duplicate rule that scores two texts' plain forms."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memcli.consolidate import rules
from memcli.consolidate.restate import EDGE_CHARS, plain_form, statement_span
from memcli.consolidate.similar import second_look
from memcli.consolidate.textfeatures import TextFeatures, features
from tests import sweep


def statement(text: str, bare: bool = True) -> str:
    start, end = statement_span(text, bare=bare)
    return text[start:end]


# --------------------------------------------------------------------------------------------
# attributions


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('"The cache is warm again," he said.', '"The cache is warm again'),
        ("The cache is warm again, Alice said.", "The cache is warm again"),
        ('"We will modify some features of our plans," said Gov. John Baldacci on Tuesday.',
         '"We will modify some features of our plans'),
        ("Russia had closed checkpoints on the border until June 4, Itar-Tass news agency said.",
         "Russia had closed checkpoints on the border until June 4"),
        ("The deploy freeze starts on Friday, the release manager said in a statement.",
         "The deploy freeze starts on Friday"),
        ("Police said her two small children were alone in the apartment.",
         "her two small children were alone in the apartment."),
        ("He added that the plan was dead on arrival.", "the plan was dead on arrival."),
        ("Priya said on Tuesday: the migration is done for good.", "the migration is done for good."),
    ],
)
def test_a_bare_attribution_is_set_aside(text: str, expected: str) -> None:
    assert statement(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        # more than a speaker and when it was said: what it adds still counts
        '"The sentence is custody for one day," Breyer said to tumultuous cheers in the courtroom.',
        '"I am proud of the citizens of this state," said Gov. John Baldacci, a casino foe.',
        # a statement about a tool, not a person speaking
        "The linter warned about unused imports in the CLI module.",
        "The health check reported the disk as full on db-2 twice.",
        # what would be left is too short to be a statement
        "It works, he said.",
        # an apostrophe is not a closing quote, and the speaker stands right before the verb
        "Pay rises were agreed by the drivers' union leaders said to be tough negotiators",
        "",
        "said",
    ],
)
def test_no_bare_attribution(text: str) -> None:
    assert statement(text) == text.rstrip()


def test_the_whole_attribution_clause_is_set_aside_for_the_second_look() -> None:
    text = '"Rosenthal is sentenced to one day with credit for time served," Breyer said to cheers.'
    assert statement(text, bare=False) == '"Rosenthal is sentenced to one day with credit for time served'
    byrd = 'Byrd, speaking from the Senate floor, said he questioned "the motives of a president."'
    assert statement(byrd, bare=False) == 'he questioned "the motives of a president."'
    assert statement("According to the filings, the probe covers revenue recognition.", bare=False) == (
        "the probe covers revenue recognition.")
    # a clause of more than sixteen words is not an attribution
    long_tail = ("The cache that the nightly export job fills is warm again for the first time this week, "
                 + "said the engineer who " + "looked at it again " * 5 + "today.")
    assert statement(long_tail, bare=False) == long_tail.rstrip()


def test_attributions_are_looked_for_near_the_edges_only() -> None:
    long = "word " * 10_000 + ", he said."
    assert statement(long) == long[: long.rindex(",")]  # the end is looked at
    opening = "Alice said the cache is warm. " + "word " * 100
    assert statement(opening) == opening.rstrip()[len("Alice said "):]
    assert EDGE_CHARS < 1000


@settings(max_examples=sweep.scale(50, 200), deadline=None)
@given(st.text(alphabet=st.sampled_from(list('ab ,."\u201d:said he told ')), max_size=400))
def test_statement_span_is_within_the_text(text: str) -> None:
    for bare in (True, False):
        start, end = statement_span(text, bare=bare)
        assert 0 <= start <= end <= len(text)


def test_hostile_text_is_handled_in_linear_time() -> None:
    # Many commas, quotes and speech verbs: the patterns only look at the edges, so a
    # megabyte is nothing (a backtracking pattern would hang here).
    text = ('"x," he said, said, "said, ' * 40_000)[:1_000_000]
    for bare in (True, False):
        statement_span(text, bare=bare)
    assert isinstance(plain_form(text), str)


# --------------------------------------------------------------------------------------------
# the plain form


@pytest.mark.parametrize(
    ("text_a", "text_b"),
    [
        ("The worker doesn't retry.", "The worker does not retry."),
        ("We can't deploy, they're on call.", "We cannot deploy, they are on call."),
        ("Bush's plan", "Bush plan"),
        ("The workers' union", "The workers union"),
        ("1,000 requests", "1000 requests"),
        ("Batch size: 2,500,000 rows.", "Batch size: 2.5 million rows."),
        ("The SDK is at v2.3.", "The SDK is at version 2.3."),
        ("20% of requests", "20 per cent of requests"),
        ("20 pct of requests", "20 percent of requests"),
        ("$5 a month", "5 a month"),
        ("U.S. troops", "US troops"),
        ("United States troops", "U.S. troops"),
        ("fifty-seven senators", "57 senators"),
        ("two retries", "2 retries"),
        ("the colour of the programme", "the color of the program"),
        ("organise and analyse the centre", "organize and analyze the center"),
        ("Mr. Soros", "Soros"),
        ("The man is playing the drums.", "A man is playing drums."),
        ('"The cache is warm again," Alice said in a statement.', "The cache is warm again."),
    ],
)
def test_meaning_free_differences_are_undone(text_a: str, text_b: str) -> None:
    assert plain_form(text_a) == plain_form(text_b)


@pytest.mark.parametrize(
    ("text_a", "text_b"),
    [
        ("port 8080", "port 8081"),
        ("Use pnpm.", "Use npm."),
        ("The worker retries.", "The worker does not retry."),
        ("Alice owns the billing service.", "Bob owns the billing service."),
        ("3.10", "3.1"),
        ("2.5 million rows", "25 million rows"),
    ],
)
def test_what_carries_meaning_still_differs(text_a: str, text_b: str) -> None:
    assert plain_form(text_a) != plain_form(text_b)


def test_the_features_keep_the_plain_form() -> None:
    text = TextFeatures('"The cache isn\'t warmed before the deploy," he said.')
    assert text.plain == "cache is not warmed before deploy"  # function words that matter stay
    assert features("Same text.").plain is features("Same text.").plain


# --------------------------------------------------------------------------------------------
# the second look


NEAR_A = '"The export job doesn\'t retry the uploads," Alice said.'
NEAR_B = "The export job does not retry uploads."


def test_rule_similarity_takes_the_plain_forms_when_given() -> None:
    a, b = rules.content_text({"summary": NEAR_A}), rules.content_text({"summary": NEAR_B})
    text_only = rules.similarity(a, b)
    assert 0.70 <= text_only <= 0.80
    plain = (features(NEAR_A).plain, features(NEAR_B).plain)
    assert rules.similarity(a, b, plain=plain) > 0.80
    assert rules.similarity(a, a, plain=("x", "y")) == 1.0  # equal texts stay 1.0
    assert rules.similarity(a, b, plain=("x", "y")) == text_only  # a lower plain score never lowers it


def test_second_look_scores_near_pairs_on_their_plain_forms() -> None:
    texts = [rules.content_text({"summary": t}) for t in (NEAR_A, NEAR_B, "Something else entirely here.")]
    plain = [features(t).plain for t in (NEAR_A, NEAR_B, "Something else entirely here.")]
    near = rules.similarity(texts[0], texts[1])
    pairs = {(0, 1): near, (0, 2): 0.75}
    second_look(texts, dict(pairs), "token_sort_ratio", 0.80, None)  # without plain forms: as before
    without = dict(pairs)
    second_look(texts, without, "token_sort_ratio", 0.80, None)
    assert without == {}
    with_plain = dict(pairs)
    second_look(texts, with_plain, "token_sort_ratio", 0.80, None, plain=plain.__getitem__)
    assert list(with_plain) == [(0, 1)] and with_plain[(0, 1)] > 0.80
    kept = dict(pairs)  # the LLM's discovery band keeps the pairs that do not pass
    second_look(texts, kept, "token_sort_ratio", 0.80, 0.60, plain=plain.__getitem__)
    assert kept[(0, 2)] == 0.75


def test_content_similarity_is_the_rule_as_a_run_finds_it() -> None:
    from memcli.consolidate.similar import content_similarity

    near = content_similarity({"summary": NEAR_A}, {"summary": NEAR_B}, "token_sort_ratio", 0.80)
    assert near > 0.80  # the second look
    # outside the band below the threshold, no second look: the scorer's figure
    assert content_similarity({"summary": NEAR_A}, {"summary": NEAR_B}, "token_sort_ratio", 0.95) == (
        rules.similarity(rules.content_text({"summary": NEAR_A}), rules.content_text({"summary": NEAR_B})))
    assert content_similarity({"summary": "a b"}, {"summary": "a b"}, "token_sort_ratio", 0.80) == 1.0
