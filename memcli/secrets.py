"""Find secrets in memory text and mask them reversibly before text leaves the machine.

SPEC section 9: API keys, tokens, passwords and private keys are masked before any text
is sent to the LLM and restored in what is written back. A `Masker` keeps one mapping for
a whole run, so the same secret always gets the same placeholder and a placeholder the
LLM echoes back can be restored in any later answer.

Detection is a set of regular expressions, each naming the span that is secret: the whole
match for self-describing tokens (``sk-ant-...``, ``ghp_...``, JWTs, PEM blocks), only the
value for ``key=value`` forms (the key names what the value is, which the LLM may keep).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator

__all__ = ["PLACEHOLDER_RE", "Masker", "contains_secret", "find_secret_spans", "redact"]

Span = tuple[int, int]

# The placeholder shape. It holds no secret material, only a counter, and is unlikely to be
# mangled by a model (ASCII, no spaces, bracketed).
PLACEHOLDER_RE = re.compile(r"\[\[MEMCLI_SECRET_\d+\]\]")
_PLACEHOLDER_FORMAT = "[[MEMCLI_SECRET_{}]]"

# A secret seen once is also masked where it reappears without its telltale context
# (e.g. a password found in `password=...` and then quoted in prose). Short values are
# left out of that search because they would hit ordinary words.
_MIN_KNOWN_SECRET_LEN = 8

# Words that sometimes follow `password:` in prose or config templates and are not secrets.
_NON_SECRET_VALUES = frozenset(
    {"null", "none", "nil", "true", "false", "required", "optional", "redacted", "hidden"}
)

# Keys whose value is a secret. The key must END with one of these words (then a quote, a
# space or the separator), so `DB_PASSWORD=` and `github_token:` match while
# `token_sort_ratio: 0.8` or `author: bob` do not.
_SECRET_KEYS = (
    r"password|passwd|pwd|secret|secret[_-]?key|token|api[_-]?key|access[_-]?key"
    r"|client[_-]?secret|private[_-]?key|credentials?|auth|authorization"
)

_KEY_VALUE = re.compile(
    rf"(?<![\w.-])[\w.-]*?(?:{_SECRET_KEYS})[\"']?[ \t]*(?::=|=>|=|:)[ \t]*"
    r"(?:(?:bearer|basic|token|digest)[ \t]+)?"
    r"(?:\"(?P<dq>[^\"\n]+)\"|'(?P<sq>[^'\n]+)'|(?P<bare>[^\s\"'`]+))",
    re.IGNORECASE,
)

_CLI_FLAG = re.compile(
    r"(?<![\w-])--(?:password|passwd|token|secret|api-key|access-key|client-secret)"
    r"(?:=|[ \t]+)(?P<bare>[^\s\"'`-][^\s\"'`]*)",
    re.IGNORECASE,
)

# The look-behind pins the match to the start of the scheme; without it every letter of a
# long word would start a scan to the word's end (quadratic on big texts).
_URL_CREDENTIALS = re.compile(
    r"(?<![a-z0-9+.-])[a-z][a-z0-9+.-]*://[^/\s:@]+:(?P<bare>[^/\s@]+)@", re.IGNORECASE
)

# Self-describing tokens: the whole match is the secret.
_TOKEN_PATTERNS = (
    # Anthropic (sk-ant-...) and OpenAI (sk-..., sk-proj-..., sk-svcacct-...) keys.
    re.compile(r"(?<![\w-])sk-[A-Za-z0-9_-]{20,}"),
    # AWS access key ids: long-term (AKIA) and temporary (ASIA).
    re.compile(r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b"),
    # GitHub personal, OAuth, user-to-server, server-to-server and refresh tokens.
    re.compile(r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{20,}\b"),
    re.compile(r"\bgithub_pat_[A-Za-z0-9_]{20,}\b"),
    # Slack bot, app, user, refresh and legacy tokens.
    re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}"),
    # JWTs: base64url header (always `{"` -> `eyJ`), payload, optional signature.
    re.compile(r"\beyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*"),
    # PEM private keys; an unterminated block is masked up to the next blank line.
    re.compile(
        r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"
        r"(?:[\s\S]*?-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|(?:\r?\n[^\r\n]+)*)"
    ),
)

# `Bearer <token>`: the token must look like one (a digit in it, or long), so that
# "the bearer of bad news" or "Bearer token auth" stays readable.
_BEARER = re.compile(
    r"\bbearer[ \t]+(?P<bare>(?=[\w.~+/-]*\d)[\w.~+/-]{8,}=*|[\w.~+/-]{20,}=*)",
    re.IGNORECASE,
)

_VALUE_PATTERNS = (_KEY_VALUE, _CLI_FLAG, _URL_CREDENTIALS, _BEARER)


def _value_spans(pattern: re.Pattern[str], text: str) -> Iterator[Span]:
    """Yield the span of the value group of each match, skipping non-secret words."""
    for match in pattern.finditer(text):
        group = next(name for name in ("dq", "sq", "bare") if match.groupdict().get(name))
        value = match.group(group)
        if value.strip().lower() in _NON_SECRET_VALUES or PLACEHOLDER_RE.fullmatch(value):
            continue
        yield match.span(group)


def _pattern_spans(text: str) -> Iterator[Span]:
    """Yield the span of every secret the built-in patterns find (may overlap)."""
    for pattern in _TOKEN_PATTERNS:
        yield from (m.span() for m in pattern.finditer(text))
    for pattern in _VALUE_PATTERNS:
        yield from _value_spans(pattern, text)


def _merge_spans(spans: Iterable[Span]) -> list[Span]:
    """Sort spans and join overlapping ones, so each character is masked at most once."""
    merged: list[Span] = []
    for start, end in sorted(spans):
        if merged and start < merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def find_secret_spans(text: str) -> list[Span]:
    """Return the sorted, non-overlapping ``(start, end)`` spans of secrets in ``text``."""
    return _merge_spans(_pattern_spans(text))


def contains_secret(text: str) -> bool:
    """Tell whether ``text`` holds anything that looks like a secret."""
    return any(True for _ in _pattern_spans(text))


def redact(text: str, replacement: str = "[REDACTED]") -> str:
    """Replace every secret in ``text`` irreversibly; for logs and error messages."""
    return _replace_spans(text, find_secret_spans(text), lambda _secret: replacement)


def _replace_spans(text: str, spans: list[Span], new: Callable[[str], str]) -> str:
    """Rebuild ``text`` with each (sorted, disjoint) span replaced by ``new(span_text)``."""
    parts: list[str] = []
    position = 0
    for start, end in spans:
        parts.append(text[position:start])
        parts.append(new(text[start:end]))
        position = end
    parts.append(text[position:])
    return "".join(parts)


class Masker:
    """Reversible secret masking with one consistent mapping for a whole run.

    ``unmask(mask(text)) == text`` holds for any text. Text that already contains
    something shaped like a placeholder is protected too (it is masked as if it were a
    secret), so a literal placeholder in a memory can never be confused with ours.
    """

    def __init__(self) -> None:
        self._by_secret: dict[str, str] = {}
        self._by_placeholder: dict[str, str] = {}
        self._known_re: re.Pattern[str] | None = None

    def __len__(self) -> int:
        """Number of distinct secrets masked so far."""
        return len(self._by_secret)

    def mask(self, text: str) -> str:
        """Replace every secret in ``text`` by its placeholder, e.g. ``[[MEMCLI_SECRET_1]]``."""
        spans = list(_pattern_spans(text))
        spans += (m.span() for m in PLACEHOLDER_RE.finditer(text))
        # Register this text's secrets first so a second, context-free occurrence of one
        # of them in the same text is found by the known-secret search below.
        for start, end in _merge_spans(spans):
            self._placeholder_for(text[start:end])
        spans += self._known_spans(text)
        return _replace_spans(text, _merge_spans(spans), self._placeholder_for)

    def unmask(self, text: str) -> str:
        """Restore the originals of our placeholders; unknown placeholders stay as they are."""
        return PLACEHOLDER_RE.sub(lambda m: self._by_placeholder.get(m.group(0), m.group(0)), text)

    def _placeholder_for(self, secret: str) -> str:
        """Return the placeholder of ``secret``, allocating the next number when it is new."""
        placeholder = self._by_secret.get(secret)
        if placeholder is None:
            placeholder = _PLACEHOLDER_FORMAT.format(len(self._by_secret) + 1)
            self._by_secret[secret] = placeholder
            self._by_placeholder[placeholder] = secret
            self._known_re = None  # the set of known secrets changed
        return placeholder

    def _known_spans(self, text: str) -> list[Span]:
        """Spans where an already-masked secret reappears without its original context."""
        if self._known_re is None:
            known = [s for s in self._by_secret if len(s) >= _MIN_KNOWN_SECRET_LEN]
            if not known:
                return []
            # Longest first so that a secret containing another one wins the alternation.
            known.sort(key=len, reverse=True)
            self._known_re = re.compile("|".join(re.escape(s) for s in known))
        return [m.span() for m in self._known_re.finditer(text)]
