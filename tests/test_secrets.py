"""Tests for memcli.secrets: every kind of secret is masked, restored, and nothing else."""

from __future__ import annotations

import time
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memcli.secrets import PLACEHOLDER_RE, Masker, contains_secret, find_secret_spans, redact
from tests import sweep

# Fake secrets, built by concatenation so that secret scanners do not flag this file.
# Each entry: (kind, text as it would appear in a memory, the secret part of it).
_PEM_BODY = (
    "MIIEowIBAAKCAQEA0Z3VS5JJcds3xfn/ygWyF8PbnGy0AHB7MhgwMbRvI0MBZhpF\n"
    "Hp0Ws6ZGwqN5ZMQvKP9ulA0ZQxVWAI3yGzN5yHXEIx7WJHrG3d3nZFX3qJ0aLkUo\n"
    "3rKbP7QnO2yM1vXcW8eT4uS6zD9fG0hJ2kL5mN8pQ1rS4tU7vW0xY3zA6bC9dE2F"
)
_PEM_RSA = "-----BEGIN RSA " + "PRIVATE KEY-----\n" + _PEM_BODY + "\n-----END RSA PRIVATE KEY-----"
_PEM_PLAIN = "-----BEGIN " + "PRIVATE KEY-----\n" + _PEM_BODY + "\n-----END PRIVATE KEY-----"
_PEM_SSH = (
    "-----BEGIN OPENSSH " + "PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAAB"
    "\n-----END OPENSSH PRIVATE KEY-----"
)
_JWT = (
    "eyJ" + "hbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9"
    ".eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ"
    ".SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)


def _token(kind: str, text: str) -> tuple[str, str, str]:
    """A self-describing token planted on its own in a sentence."""
    return kind, f"we used {text} yesterday", text


def _value(kind: str, text: str, value: str) -> tuple[str, str, str]:
    """A value planted in a key/value context; only ``value`` is secret."""
    return kind, text.format(value), value


PLANTED: list[tuple[str, str, str]] = [
    _token(
        "anthropic",
        "sk-" + "ant-api03-" + "Qm9vTGVhbkZha2VLZXlGb3JUZXN0c09ubHkxMjM0NTY3ODkw" + "AA",
    ),
    _token("anthropic-admin", "sk-" + "ant-admin01-" + "ZmFrZUFkbWluS2V5Rm9yVGVzdGluZzEyMzQ1Ng"),
    _token("openai", "sk-" + "T3BlbkFJZmFrZWtleWZvcnRlc3Rpbmdvbmx5MTIzNDU2Nzg5"),
    _token("openai-proj", "sk-" + "proj-" + "Xy7_aB3-cD9eF2gH5iJ8kL1mN4oP7qR0sT3uV6wX9yZ2"),
    _token("aws-key-id", "AKIA" + "Z7Q2R8T4V6X1Y3W5"),
    _token("aws-session-key-id", "ASIA" + "QW3ER5TY7UI9OP1A"),
    _value(
        "aws-secret",
        "[default]\naws_secret_access_key = {}\nregion = eu-west-1",
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYz" + "FAKEKEY01",
    ),
    _value(
        "aws-secret-env",
        "export AWS_SECRET_ACCESS_KEY={}",
        "Je7MtGbClwBF/2Zp9Utk/h3yCo8nvb" + "FAKEKEY02",
    ),
    _token("github-pat-classic", "ghp_" + "aB3dE5fG7hI9jK1lM3nO5pQ7rS9tU1vW3xY5"),
    _token("github-oauth", "gho_" + "Zy9xW7vU5tS3rQ1pO9nM7lK5jI3hG1fE9dC7"),
    _token("github-user", "ghu_" + "Qa1Ws2Ed3Rf4Tg5Yh6Uj7Ik8Ol9Pz0Xc1Vb2N"),
    _token("github-server", "ghs_" + "Mn1Bv2Cx3Za4Sd5Fg6Hj7Kl8Qw9Er0Ty1Ui2O"),
    _token("github-refresh", "ghr_" + "Lp0Ok9Ij8Uh7Yg6Tf5Rd4Es3Wa2Qz1Xs2Cd3V"),
    _token(
        "github-fine-grained",
        "github_pat_" + "11ABCDEFG0123456789_abcdefghijKLMNOPQRSTuvwxyz0123456789ABCD",
    ),
    _token("slack-bot", "xox" + "b-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx"),
    _token("slack-user", "xox" + "p-123456789012-123456789012-123456789012-0123456789abcdef"),
    _token("jwt", _JWT),
    _value(
        "bearer",
        "curl -H 'Authorization: Bearer {}' https://api.example.com",
        "a1b2c3d4e5f6g7h8i9j0",
    ),
    _value("bearer-prose", "send it with Bearer {} in the header", "opaque-9f8e7d6c5b4a3f2e"),
    _value("password", "login with password={} today", "Tr0ub4dor&3-horse"),
    _value("password-yaml-quoted", "db:\n  password: '{}'\n  host: db1", "c0rrect horse battery"),
    _value("password-json", '{{"user": "svc", "password": "{}"}}', "s3cr3t-J$on-Pw"),
    _value("passwd", "passwd={}", "p4sswd-Value-77"),
    _value("pwd", "mysql -u root pwd: {}", "Pwd-Val-0987"),
    _value("db-password-env", "DB_PASSWORD={}", "env-Pa55w0rd-xyz"),
    _value("secret", "secret: {}", "mySuperSecretValue42"),
    _value("token", "token = {}", "tok_9a8b7c6d5e4f3a2b1c"),
    _value("api_key", "api_key={}", "key-1234abcd5678efgh"),
    _value("apikey", "APIKEY: {}", "ApIkEy-00112233445566"),
    _value("access_key", "access_key = {}", "acc-Key-88776655443322"),
    _value("client_secret", '"client_secret": "{}"', "cs-4f3e2d1c0b9a8f7e"),
    _value("auth", "auth={}", "auth-Val-13579bdf"),
    _value("basic-auth-header", "Authorization: Basic {}", "dXNlcjpzM2NyM3RwYXNz"),
    _value("url-credentials", "postgres://admin:{}@db.internal:5432/app", "url-Pass-2468ace"),
    _value("cli-flag", "run ./deploy --password {} --env prod", "cliPa55-24680"),
    ("pem-rsa", f"key below\n{_PEM_RSA}\nend of note", _PEM_RSA),
    ("pem-plain", f"key:\n{_PEM_PLAIN}", _PEM_PLAIN),
    ("pem-openssh", _PEM_SSH, _PEM_SSH),
]

ORDINARY = [
    "the password policy requires 12 chars",
    "use token_sort_ratio for scoring",
    "token_sort_ratio: 0.8",
    'scorer = "token_sort_ratio"',
    "the bearer of bad news arrived",
    "Bearer token authentication is configured in the gateway",
    "rotate the API key every 90 days; tokens expire after 1h.",
    "author: alice",
    "ask-the-team-before-deploying-anything-to-production",
    "disk-usage-monitoring-dashboard-v2-production",
    "the AKIA prefix marks long-term AWS keys",
    "a JWT header starts with eyJ by convention",
    "password: required",
    "see https://example.com/docs/auth for details",
    "merged mem_01JD3Z7Q9K8V5T2N4M6P0R1S3A into mem_01JD3Z7Q9K8V5T2N4M6P0R1S3B",
    "sha256: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "Deploy to staging before production.",
    "",
]


def _secret_fragments(secret: str) -> list[str]:
    """The secret itself plus, for multi-line secrets (PEM), each long line of it."""
    lines = [line for line in secret.splitlines() if len(line) >= 20 and "-----" not in line]
    return [secret, *lines]


@pytest.mark.parametrize(("kind", "text", "secret"), PLANTED, ids=[p[0] for p in PLANTED])
def test_every_planted_secret_is_masked_and_restored(kind: str, text: str, secret: str) -> None:
    masker = Masker()
    masked = masker.mask(text)
    for fragment in _secret_fragments(secret):
        assert fragment not in masked, kind
    assert PLACEHOLDER_RE.search(masked)
    assert masker.unmask(masked) == text
    assert contains_secret(text)


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert Masker().mask(text) == text
    assert not contains_secret(text)
    assert find_secret_spans(text) == []


def test_key_names_survive_only_values_are_masked() -> None:
    masked = Masker().mask("DB_PASSWORD=env-Pa55w0rd-xyz and api_key: key-1234abcd5678efgh")
    assert masked == "DB_PASSWORD=[[MEMCLI_SECRET_1]] and api_key: [[MEMCLI_SECRET_2]]"


def test_same_secret_same_placeholder_across_calls() -> None:
    masker = Masker()
    first = masker.mask("token = tok_9a8b7c6d5e4f3a2b1c")
    second = masker.mask("again: token=tok_9a8b7c6d5e4f3a2b1c and AKIA" + "Z7Q2R8T4V6X1Y3W5")
    assert first == "token = [[MEMCLI_SECRET_1]]"
    assert second == "again: token=[[MEMCLI_SECRET_1]] and [[MEMCLI_SECRET_2]]"
    assert len(masker) == 2


def test_known_secret_is_masked_where_it_reappears_without_context() -> None:
    masker = Masker()
    masked = masker.mask("password=Tr0ub4dor&3-horse\nlater I typed Tr0ub4dor&3-horse by mistake")
    assert "Tr0ub4dor" not in masked
    later = masker.mask("the old one was Tr0ub4dor&3-horse")
    assert later == "the old one was [[MEMCLI_SECRET_1]]"


def test_placeholders_echoed_back_are_restored_unknown_ones_kept() -> None:
    masker = Masker()
    masker.mask("ghp_" + "aB3dE5fG7hI9jK1lM3nO5pQ7rS9tU1vW3xY5")
    answer = "rotate [[MEMCLI_SECRET_1]] now; ignore [[MEMCLI_SECRET_9]]"
    expected = "rotate ghp_aB3dE5fG7hI9jK1lM3nO5pQ7rS9tU1vW3xY5 now; ignore [[MEMCLI_SECRET_9]]"
    assert masker.unmask(answer) == expected


def test_literal_placeholder_in_memory_text_round_trips() -> None:
    masker = Masker()
    text = "docs mention [[MEMCLI_SECRET_1]] and token=tok_9a8b7c6d5e4f3a2b1c"
    masked = masker.mask(text)
    assert "tok_9a8b7c6d5e4f3a2b1c" not in masked
    assert masker.unmask(masked) == text


def test_redact_is_irreversible_and_keeps_context() -> None:
    assert redact("password=Tr0ub4dor&3-horse ok") == "password=[REDACTED] ok"
    assert redact("nothing here") == "nothing here"


_SEPARATORS = st.sampled_from(["\n", " \n", "\n\n", "\t\n"])
_PIECES = st.one_of(
    st.text(max_size=30),
    st.sampled_from([p[1] for p in PLANTED]),
    st.sampled_from(ORDINARY),
    st.just("[[MEMCLI_SECRET_1]]"),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(_PIECES, max_size=8), _SEPARATORS)
def test_property_round_trip_and_no_planted_secret_survives(pieces: list[str], sep: str) -> None:
    text = sep.join(pieces)
    masker = Masker()
    masked = masker.mask(text)
    assert masker.unmask(masked) == text
    for _kind, context, secret in PLANTED:
        if context in pieces:
            assert secret not in masked


@settings(max_examples=sweep.scale(50, 200), deadline=None)
@given(st.text())
def test_property_round_trip_any_text(text: str) -> None:
    masker = Masker()
    assert masker.unmask(masker.mask(text)) == text


def test_long_words_do_not_make_masking_quadratic() -> None:
    """Four times the text costs about four times the CPU (a quadratic pattern: sixteen). CPU
    time, best of three, so that a loaded machine does not decide the result."""
    def text(k: int) -> str:
        return "a" * 10_000 * k + " password=" + "b" * 10_000 * k + " " + "c.d-e_" * 2_000 * k

    def cost(k: int) -> float:
        best = float("inf")
        for _ in range(3):
            started = time.process_time()
            masked = Masker().mask(text(k))
            best = min(best, time.process_time() - started)
        assert "b" * 1000 not in masked
        return max(best, 1e-3)

    assert cost(4) / cost(1) < 8


# ---------------------------------------------------------------- the labelled corpus (issue 13)

import sys as _sys  # noqa: E402
from pathlib import Path as _Path  # noqa: E402

_sys.path.insert(0, str(_Path(__file__).resolve().parents[1]))
from bench.secrets_corpus import ORDINARY as CORPUS_ORDINARY  # noqa: E402
from bench.secrets_corpus import SAMPLES  # noqa: E402
from memcli.secrets import mask, mask_new  # noqa: E402


def test_the_corpus_has_at_least_fifty_secrets_of_every_common_format() -> None:
    kinds = {s.kind.split("-")[0] for s in SAMPLES}
    assert len(SAMPLES) >= 50
    for family in ("google", "gcp", "azure", "aws", "stripe", "gitlab", "npm", "pypi", "sendgrid", "slack",
                   "discord", "twilio", "env", "prose", "next", "pem", "jwt"):
        assert family in kinds, family


@pytest.mark.parametrize("sample", SAMPLES, ids=[s.kind for s in SAMPLES])
def test_every_corpus_secret_is_masked_and_restored(sample: Any) -> None:
    masked = mask(sample.text)
    for fragment in _secret_fragments(sample.secret.replace("\\n", "\n")) + [sample.secret]:
        assert fragment not in masked, (sample.kind, masked)
    masker = Masker()
    assert masker.unmask(masker.mask(sample.text)) == sample.text
    assert sample.secret not in masker.mask(sample.text)


@pytest.mark.parametrize("text", CORPUS_ORDINARY)
def test_ordinary_memory_text_about_secrets_is_left_alone(text: str) -> None:
    assert find_secret_spans(text) == [], [text[a:b] for a, b in find_secret_spans(text)]
    assert mask(text) == text


def test_mask_is_irreversible_and_keeps_what_names_the_value() -> None:
    text = "the admin password is Wint3r-2026 and STRIPE_KEY=sk_" + "live_" + "4eC39HqLyjWDarjtT1zdp7dc"
    assert mask(text) == "the admin password is [REDACTED] and STRIPE_KEY=[REDACTED]"


def test_mask_new_keeps_the_sources_secrets_and_masks_the_rest() -> None:
    source = "rotate token=tok_9a8b7c6d5e4f3a2b1c monthly"
    answer = "Rotate tok_9a8b7c6d5e4f3a2b1c monthly; also AIza" + "SyD3Xq7Lr9Kp2Wm5Nv8Bc1Fg4Hj6Tk0Qz2Y and token=tok_9a8b7c6d5e4f3a2b1c"
    out = mask_new(answer, source)
    assert "tok_9a8b7c6d5e4f3a2b1c" in out and "AIza" not in out and "[REDACTED]" in out


def test_prose_values_must_look_like_secrets() -> None:
    assert mask("the password is hunter22") == "the password is [REDACTED]"
    assert mask("the password is rotated weekly") == "the password is rotated weekly"
    assert mask("the password is 'swordfish'") == "the password is '[REDACTED]'"
    assert mask("Note: the password is Stg#4kd9. Rotate it.") == "Note: the password is [REDACTED]. Rotate it."
