"""Tests for memcli.consolidate.guards and for the MRPC measurement in bench/mrpc.py.

Each guard gets pairs it must reject and restatements it must let through; guard_rejects is
checked to let real restatements of a memory (same facts reworded or reordered) pass, to be
symmetric, and to never reject a text paired with itself.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rapidfuzz import fuzz
from rapidfuzz.utils import default_process

from memcli.consolidate.guards import (
    DESCRIPTIONS,
    GUARDS,
    QUALIFIER_MAX_CONTEXT,
    TextFeatures,
    entities_differ,
    extra_detail,
    guard_function,
    guard_rejects,
    guards_rejecting,
    identifiers_differ,
    negation_differs,
    numbers_differ,
    order_swapped,
    polarity_differs,
    qualifier_added,
    roles_swapped,
    word_substituted,
)
from memcli.consolidate.lexicon import contrast, known_words, senses
from memcli.consolidate.textfeatures import diff_blocks, features, ordered
from tests import sweep

ROOT = Path(__file__).resolve().parents[2]


def similarity(a: str, b: str) -> float:
    """The duplicate rule's default similarity, 0-1."""
    return fuzz.token_sort_ratio(default_process(a), default_process(b), processor=None) / 100


# --------------------------------------------------------------------------------------------
# Restatements: the same facts, reworded or reordered. No guard may reject them.

RESTATEMENTS = [
    (
        "Deploy to staging before production. Run the smoke tests after every deploy.",
        "Run the smoke tests after every deploy. Deploy to staging before production.",
    ),
    ("The API rate limit is 1,000 requests per minute.", "The API rate limit is 1000 requests per minute."),
    ("Set the timeout to 30 seconds.", "Set the timeout to thirty seconds."),
    (
        "Don't push directly to main; open a pull request.",
        "Do not push directly to main, open a pull request.",
    ),
    ("Never run migrations on Friday.", "Migrations should never be run on Friday."),
    (
        "The staging database uses PostgreSQL 15 on AWS RDS.",
        "PostgreSQL 15 on AWS RDS is what the staging database uses.",
    ),
    (
        "Alice owns the billing service and reviews its PRs.",
        "The billing service is owned by Alice, who reviews its PRs.",
    ),
    ("Use the U.S. region for the S3 bucket.", "Use the US region for the S3 bucket."),
    ("Costs rose 5% in March.", "Costs rose 5 percent in March."),
    ("The build costs about $5.00 of CI credit.", "The build costs about $5 of CI credit."),
    (
        "Tests are flaky when the cache is cold; warm it first.",
        "When the cache is cold tests are flaky, so warm it first.",
    ),
    ("Deployments are done with GitHub Actions.", "GitHub Actions does the deployments."),
    (
        "The user prefers concise answers and dislikes emojis.",
        "The user dislikes emojis and prefers concise answers.",
    ),
    (
        "- Rotate the API keys every 90 days\n- Store them in Vault",
        "- Store the API keys in Vault\n- Rotate them every 90 days",
    ),
    ("Restart the worker after changing config.yaml.", "After changing config.yaml, restart the worker."),
    (
        "The deploy script needs AWS credentials exported.",
        "The deploy script requires exported AWS credentials.",
    ),
    ("Bob said the release is planned for Q3.", "The release is planned for Q3, Bob said."),
    ("Run `make test` before committing.", "Before committing, run make test."),
    (
        "The UN office in Geneva handles the requests.",
        "The United Nations office in Geneva handles the requests.",
    ),
    ("We migrated from MySQL to Postgres last year.", "Last year we migrated from MySQL to Postgres."),
    (
        "Python 3.11 is required; 3.10 is not supported.",
        "Python 3.11 is required and 3.10 isn't supported.",
    ),
    (
        "The service listens on port 8080 and logs to stdout.",
        "Logs go to stdout and the service listens on port 8080.",
    ),
    ("Disable the feature flag before the release.", "Before the release, disable the feature flag."),
    ("Jenkins runs the nightly build at 2am.", "The nightly build is run by Jenkins at 2am."),
    (
        "The deployment failed because the disk was full.",
        "Because the disk was full, the deployment failed.",
    ),
    ("Use Postgres instead of MySQL for the cache.", "For the cache, use Postgres instead of MySQL."),
    ("Upgrade to 2.5 million rows per batch.", "Upgrade to 2,500,000 rows per batch."),
    ("Ron Smith approved the change.", "Ronald Smith approved the change."),
]

LONG_A = (
    "The payments service is deployed with Helm to the production cluster in eu-west-1. "
    "Before each deploy, run the database migrations with the migrate job and check that it "
    "exits cleanly. The service reads its secrets from Vault at start-up, so a missing Vault "
    "token makes the pods crash-loop. Alerts go to the #payments-oncall channel and the "
    "on-call engineer acknowledges them in PagerDuty. Rollbacks use helm rollback with the "
    "previous revision number, which takes about 2 minutes. Never deploy during the Friday "
    "freeze, and always tag the release in Git first."
)
LONG_B = (
    "Alerts go to the #payments-oncall channel, and the on-call engineer acknowledges them in "
    "PagerDuty. Always tag the release in Git first, and never deploy during the Friday "
    "freeze. The payments service is deployed to the production cluster in eu-west-1 with "
    "Helm. Rollbacks use helm rollback with the previous revision number; this takes about 2 "
    "minutes. Before every deploy, run the database migrations using the migrate job and "
    "check that it exits cleanly. Because the service reads its secrets from Vault at "
    "start-up, a missing Vault token makes the pods crash-loop."
)


@pytest.mark.parametrize(("text_a", "text_b"), RESTATEMENTS + [(LONG_A, LONG_B)])
def test_restatements_pass_every_guard(text_a: str, text_b: str) -> None:
    assert guard_rejects(text_a, text_b) is None
    assert guard_rejects(text_b, text_a) is None


def test_long_restatement_is_a_duplicate_by_the_rule() -> None:
    # Reordered sentences and a few reworded phrases: the scorer merges, the guards agree.
    assert similarity(LONG_A, LONG_B) > 0.80
    assert guard_rejects(LONG_A, LONG_B) is None


# --------------------------------------------------------------------------------------------
# Disagreements: each must be caught by the named guard (and guard_rejects names it).

DISAGREEMENTS = [
    ("numbers", "The service listens on port 8080.", "The service listens on port 8081."),
    ("numbers", "Retry the upload 3 times.", "Retry the upload a few times."),
    ("numbers", "Requires Python 3.10 or newer.", "Requires Python 3.1 or newer."),
    ("numbers", "The limit is 1.5 million rows.", "The limit is 15 million rows."),
    ("negation", "Run the migrations on Friday.", "Never run the migrations on Friday."),
    ("negation", "The cache is shared between workers.", "The cache isn't shared between workers."),
    ("negation", "Deploy with the feature flag.", "Deploy without the feature flag."),
    ("polarity", "Enable the feature flag in staging.", "Disable the feature flag in staging."),
    ("polarity", "Latency increased after the upgrade.", "Latency decreased after the upgrade."),
    ("polarity", "The bucket is public.", "The bucket is private."),
    ("order", "Deploy to staging before production.", "Deploy to production before staging."),
    ("order", "Prefer tabs over spaces in Makefiles.", "Prefer spaces over tabs in Makefiles."),
    ("order", "Postgres is faster than MySQL here.", "MySQL is faster than Postgres here."),
    ("order", "We migrated from MySQL to Postgres.", "We migrated from Postgres to MySQL."),
    ("order", "Build then test.", "Test then build."),
    ("entities", "Deploys run on Jenkins every night.", "Deploys run on CircleCI every night."),
    ("entities", "The billing service is owned by Alice.", "The billing service is owned by Bob."),
    ("entities", "Store the backups in Frankfurt.", "Store the backups in Dublin."),
    (
        "numbers",
        "The transfers would reduce the work force to slightly less than 100,000.",
        "The transfers would reduce the work force to slightly less than 100,000, down from "
        "110,000 several years ago.",
    ),
    (
        "extra_detail",
        "Legislation making it harder to erase debts in bankruptcy court won House approval.",
        "Legislation making it harder to erase debts in bankruptcy court won House approval "
        "and was endorsed by the White House.",
    ),
    (
        "extra_detail",
        "Restart the worker after a deploy.",
        "Restart the worker after a deploy when the billing queue still holds pending jobs.",
    ),
    ("clause", "Police said her two small children were alone in the apartment for up to two days.",
     "Police said her two small children were alone in the apartment for up to two days as she lay dead."),
    ("clause", "The export job writes the ledger snapshot to the reports bucket.",
     "The export job writes the ledger snapshot to the reports bucket, which was deleted."),
    ("roles", "billing-worker calls ledger-api to post entries.", "ledger-api calls billing-worker to post entries."),
    ("roles", "The woman is picking up the kangaroo.", "The kangaroo is picking up the woman."),
    ("roles", "The Sava is a tributary of the Drava.", "The Drava is a tributary of the Sava."),
    ("roles", "Service A publishes events that service B consumes.", "Service B publishes events that service A consumes."),
    ("roles", "Writes go to the primary and reads go to the replica.", "Writes go to the replica and reads go to the primary."),
    ("roles", "Forward port 5432 on the bastion to port 6432 on the host.",
     "Forward port 6432 on the bastion to port 5432 on the host."),
    ("roles", "The deal was signed in England and the team returned to Australia.",
     "The deal was signed in Australia and the team returned to England."),
    ("roles", "The job was slow because the index was missing, not because the table was large.",
     "The job was slow because the table was large, not because the index was missing."),
    ("roles", "The cron container triggers the exporter, which then notifies Slack.",
     "The exporter triggers the cron container, which then notifies Slack."),  # phrases of unequal length
    ("roles", "The reports database is a replica of the orders database.",
     "The orders database is a replica of the reports database."),
    ("substitution", "A man is riding a horse along the beach.", "A man is standing near a horse along the beach."),
    ("substitution", "A woman is emptying a bucket.", "A woman is filling a bucket."),
    ("substitution", "The dog is jumping in the water.", "The dog is jumping out of the water."),
    ("substitution", "A boy is playing the flute.", "A boy is playing the guitar."),
    ("substitution", "A kid is drawing on the sidewalk.", "A man is drawing on the sidewalk."),
    ("substitution", "The payments table is small.", "The payments table is big."),
    ("substitution", "Feature flags are evaluated in staging only.", "Feature flags are evaluated in production only."),
    ("substitution", "The session lifetime is 30 minutes.", "The session lifetime is 30 seconds."),
    ("substitution", "Install the dependencies with pnpm.", "Install the dependencies with yarn."),
    ("identifiers", "Run `make test` before pushing.", "Run `make lint` before pushing."),
    ("identifiers", "Use `git push --force-with-lease` after a rebase.", "Use `git push --force` after a rebase."),
    ("identifiers", "The worker reads BILLING_QUEUE_NAME at start.", "The worker reads BILLING_QUEUE_URL at start."),
    ("identifiers", "The config lives at /etc/ledger/settings.toml.", "The config lives at /etc/ledger/secrets.toml."),
    ("qualifier", "What is the best way to invest in the share market in India?",
     "What is the best way to invest in the share market?"),
    ("qualifier", "The response cache is disabled in production.", "The response cache is disabled."),
    ("qualifier", "Restart the workers after each deploy to staging.", "Restart the workers after each deploy."),
]


@pytest.mark.parametrize(("guard", "text_a", "text_b"), DISAGREEMENTS)
def test_disagreements_are_rejected_by_their_guard(guard: str, text_a: str, text_b: str) -> None:
    assert guard_function(guard)(text_a, text_b)
    assert guard_function(guard)(text_b, text_a)
    assert guard_rejects(text_a, text_b) == guard
    assert guard_rejects(text_b, text_a) == guard


def test_order_swaps_fool_the_default_scorer() -> None:
    # Why the order guard exists: sorting tokens makes these identical to the scorer.
    assert similarity("Deploy to staging before production.", "Deploy to production before staging.") == 1.0


def test_guard_names_and_lookup() -> None:
    assert set(DESCRIPTIONS) == set(GUARDS) and all(DESCRIPTIONS.values())
    assert GUARDS == ("numbers", "negation", "polarity", "order", "entities", "identifiers", "roles", "substitution",
                      "extra_detail", "clause", "qualifier")
    assert len(set(GUARDS)) == len(GUARDS)
    with pytest.raises(KeyError):
        guard_function("nope")


def test_first_guard_in_order_is_reported() -> None:
    a = "Never deploy on port 8080."
    b = "Deploy on port 9090."
    assert numbers_differ(a, b) and negation_differs(a, b)
    assert guard_rejects(a, b) == "numbers"


# --------------------------------------------------------------------------------------------
# Each guard on its own: what it ignores.


@pytest.mark.parametrize(
    ("text_a", "text_b"),
    [
        ("1,000 users", "1000 users"),
        ("$5.00 a month", "5 dollars a month"),
        ("20% of requests", "20 percent of requests"),
        ("5 retries", "five retries"),
        ("the 3rd attempt", "the third attempt"),
        ("1.5 million rows", "1,500,000 rows"),
        ("two of them", "both of them"),  # number words alone are not quantities
        ("$1.4bn in revenue", "$1.4 billion in revenue"),
        ("10k rows a batch", "10,000 rows a batch"),
        ("95 percent of cargo", "Ninety-five percent of cargo"),
        ("nearly 4 million hosts", "nearly four million hosts"),
        ("", ""),
    ],
)
def test_numbers_equal(text_a: str, text_b: str) -> None:
    assert not numbers_differ(text_a, text_b)
    assert not numbers_differ(text_b, text_a)


def test_numbers_handles_huge_and_odd_numbers() -> None:
    huge = "9" * 5000
    assert not numbers_differ(f"id {huge}", f"id {huge}")
    assert numbers_differ(f"id {huge}", f"id {huge}8")
    assert numbers_differ("version 1.2.3", "version 1.2.4")
    assert not numbers_differ(f"{huge} million", f"{huge} million")


@pytest.mark.parametrize(
    ("text_a", "text_b"),
    [
        ("Do not force-push.", "Never force-push."),
        ("Don\u2019t force-push.", "You must not force-push."),
        ("It is not only fast but also cheap.", "It is fast and also cheap."),
        ("No tests were skipped.", "Nothing was skipped in the tests."),
    ],
)
def test_negation_equal(text_a: str, text_b: str) -> None:
    assert not negation_differs(text_a, text_b)


def test_polarity_needs_opposite_sides() -> None:
    assert polarity_differs("Upgrading the driver fixed it.", "Downgrading the driver fixed it.")
    assert not polarity_differs("Enable then disable the flag.", "Disable after you enable the flag.")
    assert not polarity_differs("Enable the flag.", "Turn on the flag.")
    assert polarity_differs("Add the user to the group.", "Remove the user from the group.")


def test_order_ignores_moved_sentences_and_passive_voice() -> None:
    assert not order_swapped("Run the tests. Deploy after review.", "Deploy after review. Run the tests.")
    assert not order_swapped("Postgres replaced MySQL.", "MySQL was replaced by Postgres.")
    assert not order_swapped(
        "Palm expects to move Handspring's employees to Palm Solutions in Milpitas.",
        "Handspring employees are expected to move to Palm Solutions in Milpitas.",
    )


@pytest.mark.parametrize(
    ("text_a", "text_b"),
    [
        ("Deploy with Jenkins.", "Deploy with Jenkins and ArgoCD."),  # one side more specific
        ("Ask Alice. Then ask Bob.", "Ask Bob. Then ask Alice."),  # moved, not replaced
        ("The S&P 500 rose.", "The Standard & Poor's 500 rose."),  # acronym spelled out
        ("Ron approved it.", "Ronald approved it."),  # short form
        ("Barbakow said so.", "Brabakow said so."),  # typo
        ("Microsoft's plan.", "Microsoft plan."),  # possessive
        ("Deploy now. Staging first.", "Deploy now. Production first."),  # sentence case
        ("Alice owns it.", "Bob owns it."),  # a limit: a sentence's first word is not a name
        ("Sent by George W. Bush.", "Sent by George Bush."),  # initial
    ],
)
def test_entities_equal(text_a: str, text_b: str) -> None:
    assert not entities_differ(text_a, text_b)
    assert not entities_differ(text_b, text_a)


def test_extra_detail_tolerates_rewording_and_inflection() -> None:
    assert not extra_detail("Deploy the service.", "Deployed the services.")
    assert not extra_detail(
        "Restart the worker after each deploy.", "Restart the worker quickly after every deploy."
    )
    assert extra_detail("Restart the worker.", "Restart the worker when memory usage exceeds its limit.")


# --------------------------------------------------------------------------------------------
# Properties

_VOCAB = (
    "deploy Deploy staging production before after than over from to then not never no "
    "don't enable disable Alice Bob UN United Nations 1,000 1000 5 five 3.10 $5 the a of . , ; \n"
).split(" ")
_RAW = st.lists(st.sampled_from(_VOCAB + [" "]), max_size=30).map(" ".join)


@pytest.mark.slow
@settings(max_examples=sweep.scale(50, 200), deadline=None)
@given(text=st.one_of(_RAW, st.text(max_size=200)))
def test_a_text_never_disagrees_with_itself(text: str) -> None:
    assert guard_rejects(text, text) is None


@settings(max_examples=200, deadline=None)
@given(text_a=st.one_of(_RAW, st.text(max_size=120)), text_b=st.one_of(_RAW, st.text(max_size=120)))
def test_guards_are_symmetric(text_a: str, text_b: str) -> None:
    for name in GUARDS:
        assert guard_function(name)(text_a, text_b) == guard_function(name)(text_b, text_a), name
    assert guard_rejects(text_a, text_b) == guard_rejects(text_b, text_a)


# --------------------------------------------------------------------------------------------
# bench/mrpc.py


def _load_bench() -> ModuleType:
    path = ROOT / "bench" / "mrpc.py"
    spec = importlib.util.spec_from_file_location("bench_mrpc", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("bench_mrpc", module)
    spec.loader.exec_module(module)
    return module


bench = _load_bench()

SAMPLE = (
    "\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
    "1\t1\t2\tThe cache is warmed at 6 am by the cron job.\tThe cron job warms the cache at 6 am.\n"
    "0\t3\t4\tThe cache is warmed at 6 am by the cron job.\tThe cache is warmed at 7 am by the cron job.\n"
    "0\t5\t6\tShares rose 3 percent on Monday.\tThe weather in Paris was mild and dry.\n"
    "1\t7\t8\tAlice approved the release.\tThe release was approved by Alice.0\t9\t10\t"
    "Deploy to staging before production.\tDeploy to production before staging.\n"
)


def test_parse_pairs_repairs_a_missing_newline() -> None:
    pairs = bench.parse_pairs(SAMPLE.lstrip("\ufeff").splitlines(keepends=True))
    assert [p.label for p in pairs] == [1, 0, 0, 1, 0]
    assert pairs[3].text_b == "The release was approved by Alice."
    assert pairs[4].text_a == "Deploy to staging before production."


def test_measure_on_inline_sample() -> None:
    pairs = bench.parse_pairs(SAMPLE.splitlines())
    result = bench.measure(pairs, scorers=("token_sort_ratio", "ratio"))
    assert result["pairs"] == {"0": 3, "1": 2}
    tsr = result["scorers"]["token_sort_ratio"]
    # Label 0: the 6 am / 7 am pair and the order swap score > 0.80; guards stop both.
    assert tsr["merged"] == {"0": 2, "1": 2}
    assert tsr["false_merge_rate"] == pytest.approx(2 / 3)
    assert tsr["merged_guarded"] == {"0": 0, "1": 2}
    assert tsr["false_merge_rate_guarded"] == 0.0
    assert tsr["recall"] == tsr["recall_guarded"] == 1.0
    assert tsr["guards"]["numbers"]["first"] == {"0": 1, "1": 0}
    assert tsr["guards"]["order"]["first"] == {"0": 1, "1": 0}
    assert set(tsr["guards"]) == set(GUARDS)
    assert "token_sort_ratio" in bench.format_report("sample", result)


def test_measure_says_which_rule_decided() -> None:
    pairs = bench.parse_pairs(SAMPLE.splitlines())
    assert bench.measure(pairs, scorers=("token_sort_ratio",))["rule"] == "plain"
    learned = bench.measure(pairs, scorers=("token_sort_ratio",), learned_rule=True)
    assert learned["rule"] == "learned" and "the learned rule" in bench.format_report("sample", learned)
    assert bench._parse_args(["--learned-rule"]).learned_rule and not bench._parse_args([]).learned_rule


def test_bench_main_reports_missing_data(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert bench.main(["--data", str(tmp_path)]) == 1
    assert "missing MRPC file" in capsys.readouterr().err
    assert bench.main(["--data", str(tmp_path), "--scorer", "nope"]) == 2


def test_bench_main_on_a_data_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for split in bench.SPLITS:
        (tmp_path / f"msr_paraphrase_{split}.txt").write_text(SAMPLE, encoding="utf-8")
    assert bench.main(["--data", str(tmp_path), "--scorer", "token_sort_ratio", "--json"]) == 0
    assert '"false_merge_rate_guarded": 0.0' in capsys.readouterr().out


@pytest.mark.skipif(
    not (bench.DEFAULT_DATA / "msr_paraphrase_test.txt").exists(), reason="MRPC data not present"
)
def test_mrpc_figures_on_the_test_split() -> None:
    # Held where bench/RESULTS.md reports them: a change that costs any figure shows here.
    # The default rule (similarity > 0.80, SPEC 3.1): 2.8% / 33.2%, 16 of 578 false merges,
    # 381 of 1147 paraphrases. (The 2.0% is not met; RESULTS.md says why.) The opt-in
    # learned rule (consolidation.learned_rule): 1.4% / 32.4%, 8 of 578, 372 of 1147. Train
    # is where the guards and the learned rule were fitted: 1.6% / 33.7% and 1.1% / 33.7%.
    pairs = bench.load_split(bench.DEFAULT_DATA, "test")
    default = bench.measure(pairs, scorers=("token_sort_ratio",))["scorers"]["token_sort_ratio"]
    assert default["merged_guarded"]["0"] <= 16
    assert default["merged_guarded"]["1"] >= 381
    opt_in = bench.measure(pairs, scorers=("token_sort_ratio",), learned_rule=True)["scorers"]["token_sort_ratio"]
    assert opt_in["merged_guarded"]["0"] <= 8
    assert opt_in["merged_guarded"]["1"] >= 372


# --------------------------------------------------------------------------------------------
# The guards for changed roles, changed words, code and one-sided qualifiers: what they let by.


@pytest.mark.parametrize(
    ("text_a", "text_b"),
    [
        ("Supported platforms are Linux, macOS and Windows.", "Supported platforms are Windows, macOS and Linux."),
        ("Priya and Marco own the billing service.", "Marco and Priya own the billing service."),
        ("Postgres replaced MySQL for the orders service.", "MySQL was replaced by Postgres for the orders service."),
        ("The plan was dropped because schoolchildren would be their victims.",
         "The plan was dropped because the victims would be schoolchildren."),  # an identity
        ("The error rate doubled after the release.", "The release doubled the error rate."),  # recast
        ("Review checklist: migrations are reversible, endpoints have tests, no secrets in the diff.",
         "Review checklist: no secrets in the diff, endpoints have tests, migrations are reversible."),
        ("Staging runs on three small nodes; production runs on six large nodes.",
         "Production runs on six large nodes, while staging runs on three small nodes."),
        # A limit, on purpose: words that trade places across sentences are not looked at
        # (a statement's roles live in one sentence; distant words trade places in rewording).
        ("The worker reads the queue. The scheduler writes the report.",
         "The scheduler reads the queue. The worker writes the report."),
    ],
)
def test_roles_let_reorderings_through(text_a: str, text_b: str) -> None:
    assert not roles_swapped(text_a, text_b) and not roles_swapped(text_b, text_a)


@pytest.mark.parametrize(
    ("text_a", "text_b"),
    [
        ("The customers are big.", "The customers are large."),  # synonyms
        ("A man rides a horse.", "A man is riding a horse."),  # inflection
        ("A child is playing in the park.", "A kid is playing in the park."),
        ("A kid is playing.", "A boy is playing."),  # a word and its hypernym
        ("Reported missing seven days after he was seen.", "Reported missing about a week after he was seen."),
        ("Use pnpm, not npm, in the frontend.", "Use npm, not pnpm, in the frontend."),  # moved: roles' business
        ("The zorblax is tiny.", "The zorblax is wibbly."),  # unknown to the lexicon
        ("Deploy to staging first.", "Deploy to staging first and production second."),  # an addition
    ],
)
def test_substitution_lets_synonyms_and_moves_through(text_a: str, text_b: str) -> None:
    assert not word_substituted(text_a, text_b) and not word_substituted(text_b, text_a)


def test_lexicon_known_words_are_those_with_senses() -> None:
    words = frozenset({"guitars", "flute", "zorblax", "bus", "in", "deploy"})
    assert known_words(words) == frozenset(w for w in words if senses(w)) == {"guitars", "flute", "bus", "in"}


def test_lexicon_contrasts_senses_not_synonyms() -> None:
    assert contrast("small", "big") and contrast("flute", "guitar") and contrast("staging", "production")
    assert contrast("minutes", "seconds") and contrast("in", "out") and contrast("kid", "man")
    assert not contrast("big", "large") and not contrast("kid", "child") and not contrast("kid", "boy")
    assert not contrast("big", "big") and not contrast("zorblax", "big")
    assert senses("guitars") == senses("guitar") != ()  # a plural falls back to its singular


@pytest.mark.parametrize(
    ("text_a", "text_b"),
    [
        ("Run migrations with alembic upgrade head.", "Run migrations with `alembic upgrade head`."),
        ("Use the `--no-verify` flag only for hotfixes.", "Use the --no-verify flag only for hotfixes."),
        ("Run `make test` before pushing.", "Run `make test` before pushing; see docs/testing.md."),  # added
        ("The U.S. region hosts the warehouse.", "The US region hosts the warehouse."),  # not code
    ],
)
def test_identifiers_equal(text_a: str, text_b: str) -> None:
    assert not identifiers_differ(text_a, text_b) and not identifiers_differ(text_b, text_a)


@pytest.mark.parametrize(
    ("phrase", "swapped"),
    [
        ("billing", True),
        ("billing worker", True),
        ("nightly billing export worker", True),  # four content words: the longest phrase that counts
        ("nightly billing invoice export worker", False),  # five: a rewrite, not two roles traded
    ],
)
def test_roles_phrase_length_edge(phrase: str, swapped: bool) -> None:
    text_a, text_b = f"The {phrase} calls the ledger before noon.", f"The ledger calls the {phrase} before noon."
    assert roles_swapped(text_a, text_b) is swapped and roles_swapped(text_b, text_a) is swapped


def test_roles_an_attribution_turned_around_is_not_a_swap() -> None:
    text_a = '"We have no new places to check," said Steve Anderson, a Waco information officer.'
    text_b = '"We have no new places to check," Waco information officer Steve Anderson said.'
    assert not roles_swapped(text_a, text_b) and not roles_swapped(text_b, text_a)
    # ... while a passive turned around with its agent is a swap
    assert roles_swapped("Billing was replaced by the new ledger service.",
                         "The new ledger service was replaced by billing.")


@pytest.mark.parametrize(
    ("changed", "substituted"),
    [("big", True), ("very much big", True), ("quite very much big", False)],  # up to three words a side
)
def test_substitution_span_edge(changed: str, substituted: bool) -> None:
    text_a, text_b = "Keep the cache small in every region.", f"Keep the cache {changed} in every region."
    assert word_substituted(text_a, text_b) is substituted and word_substituted(text_b, text_a) is substituted


@pytest.mark.parametrize(
    ("added", "qualifies"),
    [(" on staging hosts", True), (" on shared staging hosts", True),  # up to four words
     (" on shared blue staging hosts", False)],  # five: extra_detail's business
)
def test_qualifier_phrase_length_edge(added: str, qualifies: bool) -> None:
    short = "Restart the workers after each deploy"
    assert qualifier_added(short + ".", short + added + ".") is qualifies
    assert qualifier_added(short + added + ".", short + ".") is qualifies


@pytest.mark.parametrize(("tail", "content", "qualifies"), [("", 9, True), (" today", 10, False)])
def test_qualifier_context_edge(tail: str, content: int, qualifies: bool) -> None:
    statement = ("Restart the billing workers after each nightly deploy of the ledger service with "
                 "extreme caution" + tail)
    assert features(statement + ".").content_count == content
    assert QUALIFIER_MAX_CONTEXT == 9
    assert qualifier_added(statement + ".", statement + " on staging.") is qualifies


def test_qualifier_stays_quiet_in_long_texts_and_for_moved_phrases() -> None:
    long_a = ("Dennehy's family reported him missing on June 19, seven days after he was last seen on the "
              "campus of the university where he studied and played basketball")
    assert qualifier_added(long_a + " in Waco.", long_a.replace("seen on", "seen at") + ".") is False
    assert features(long_a).content_count > QUALIFIER_MAX_CONTEXT
    assert not qualifier_added("Jenkins runs the nightly build at 2am.", "At 2am, Jenkins runs the nightly build.")
    assert not qualifier_added("The cache is disabled in production.", "In production, the cache is disabled.")
    # five new words or more are extra_detail's
    assert not qualifier_added("Restart the worker.", "Restart the worker after the nightly billing export job.")


def test_each_text_is_analysed_once() -> None:
    calls: list[str] = []

    def count(text: TextFeatures) -> int:
        calls.append(text.text)
        return len(text.text)

    text = TextFeatures("Deploy to staging before production.")
    assert text.once("length", count) == text.once("length", count) == 36 and len(calls) == 1
    assert features("same text") is features("same text")
    a, b = TextFeatures("Run the tests, then deploy."), TextFeatures("Run the tests, then ship.")
    for check in GUARDS:
        guard_function(check)(a, b)
    words = a.__dict__.get("words")
    for check in GUARDS:  # a second round reuses every part of the analysis
        guard_function(check)(a, b)
    assert a.__dict__.get("words") is words and diff_blocks(*ordered(a, b)) is diff_blocks(*ordered(a, b))


def test_texts_and_their_features_give_the_same_answers() -> None:
    for guard, text_a, text_b in DISAGREEMENTS:
        assert guard_rejects(TextFeatures(text_a), TextFeatures(text_b)) == guard_rejects(text_a, text_b) == guard
        assert guard in guards_rejecting(text_a, text_b)
    assert guards_rejecting("same", "same") == []


# --------------------------------------------------------------------------------------------
# bench/pairs.py: memcli's own labelled memory pairs


def _load_pairs_bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_pairs", ROOT / "bench" / "pairs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("bench_pairs", module)
    spec.loader.exec_module(module)
    return module


pairs_bench = _load_pairs_bench()


def test_pair_file_is_checked_line_by_line(tmp_path: Path) -> None:
    bad = tmp_path / "pairs.jsonl"
    bad.write_text('{"id": "x", "label": 0, "class": "numbers", "kind": "config", "a": "a"}\n')
    with pytest.raises(ValueError, match="pairs.jsonl:1"):
        pairs_bench.load_pairs(bad)
    assert pairs_bench.main(["--pairs", str(bad)]) == 1


def test_pair_set_is_large_and_covers_every_class() -> None:
    pairs = pairs_bench.load_pairs()
    assert len(pairs) >= 400 and len({p.id for p in pairs}) == len(pairs)
    classes = {p.cls for p in pairs if p.label == 0}
    assert {"numbers", "negation", "polarity", "order", "roles", "substitution", "entities", "commands",
            "qualifier", "extra_detail"} <= classes
    kinds = {p.kind for p in pairs}
    assert {"config", "command", "version", "owners", "dependency", "deadline"} <= kinds


def test_pair_set_targets() -> None:
    result = pairs_bench.summarise(pairs_bench.decide(pairs_bench.load_pairs()))
    assert result["must_not_merge"]["rate"] <= 0.02
    assert result["should_merge"]["rate"] >= 0.70


def test_pair_bench_decides_as_the_engine_default_or_with_the_learned_rule() -> None:
    # the default (similarity > 0.80): 0.88 merges, 0.78 does not; --learned-rule: the reverse
    pairs = [pairs_bench.Pair("swap", 1, "reorder", "ci", "Deployments are done with GitHub Actions.",
                              "GitHub Actions does the deployments."),
             pairs_bench.Pair("near", 1, "reword", "db", "Add a down migration to every Alembic revision.",
                              "Add a downgrade step to every Alembic revision.")]
    assert [v["merged"] for v in pairs_bench.decide(pairs)] == [True, False]
    assert [v["merged"] for v in pairs_bench.decide(pairs, learned_rule=True)] == [False, True]
    assert pairs_bench._parse_args(["--learned-rule"]).learned_rule
    assert not pairs_bench._parse_args([]).learned_rule


@pytest.mark.slow
def test_store_pairs_are_the_pairs_a_dry_run_guards(tmp_path: Path) -> None:
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from bench import generate

    generate.generate(tmp_path / "store", 300, shape="small")
    found = pairs_bench.store_pairs(tmp_path / "store")
    assert found and all(isinstance(a, str) and isinstance(b, str) and a != b for a, b in found)
    from memcli.consolidate.pairsearch import PairSearch

    assert PairSearch._guard.__name__ == "_guard"  # the recording wrapper is taken off again
    cost = pairs_bench.guard_cost(found[:5], repeat=1)
    assert cost["pairs"] == len(found[:5]) and cost["per_pair_unshared_us"] > 0


# helper guards8: the substitution guard passes over the blocks without a word the lexicon knows


def _substituted_reference(text_a: str, text_b: str) -> bool:
    """word_substituted as it was: every replaced block and every word in it looked at."""
    from memcli.consolidate import guards as g
    from memcli.consolidate.lexicon import contrast

    first, second = ordered(features(text_a), features(text_b))

    def may_contrast(a: TextFeatures, b: TextFeatures) -> bool:  # word by word, as it was
        return any(w in g.STOPWORDS or w not in b.sequence_set for w in known_words(a.sequence_set))

    if not (may_contrast(first, second) and may_contrast(second, first)):
        return False
    seq_a, seq_b = first.sequence, second.sequence
    for op in diff_blocks(first, second):
        if op.tag != "replace" or op.a1 - op.a0 > 3 or op.b1 - op.b0 > 3:
            continue
        span_a, span_b = seq_a[op.a0:op.a1], seq_b[op.b0:op.b1]
        only_a = [w for w in span_a if w not in span_b and (w in g.STOPWORDS or w not in second.sequence_set)]
        only_b = [w for w in span_b if w not in span_a and (w in g.STOPWORDS or w not in first.sequence_set)]
        if any(contrast(x, y) for x in only_a for y in only_b) and (
                not any(w in g._NUMBER_WORDS for w in (*span_a, *span_b)) or not g._units_only(only_a, only_b)):
            return True
    return False


_SUBSTITUTION_WORDS = st.sampled_from(["small", "big", "large", "in", "out", "of", "the", "dog", "cat", "seven",
                                       "days", "week", "seconds", "minutes", "staging", "production", "deploy",
                                       "flute", "guitar", "x", "queue", "30"])


@settings(max_examples=sweep.scale(100, 400), deadline=None)
@given(st.lists(_SUBSTITUTION_WORDS, min_size=1, max_size=10), st.lists(_SUBSTITUTION_WORDS, min_size=1, max_size=10))
def test_the_substitution_guard_answers_as_when_it_read_every_block(a: list[str], b: list[str]) -> None:
    # The blocks without a lexicon word passed over, the pre-check made with set operations
    # (helper guards8): the answers of the word-by-word reading.
    text_a, text_b = " ".join(a), " ".join(b)
    assert word_substituted(text_a, text_b) is _substituted_reference(text_a, text_b)
    assert word_substituted(text_b, text_a) is _substituted_reference(text_a, text_b)
