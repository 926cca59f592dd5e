"""Find secrets in memory text and mask them reversibly before text leaves the machine.

SPEC section 9: API keys, tokens, passwords and private keys are masked before any text
is sent to the LLM and restored in what is written back. A `Masker` keeps one mapping for
a whole run, so the same secret always gets the same placeholder and a placeholder the
LLM echoes back can be restored in any later answer.

Detection is a set of regular expressions, each naming the span that is secret: the whole
match for self-describing tokens (``sk-ant-...``, ``ghp_...``, ``AIza...``, JWTs, PEM blocks,
webhook URLs), only the value for ``key=value`` forms and prose ("the admin password is X"),
where the key names what the value is and the LLM may keep it. Prose values must look like a
secret (a digit, a symbol or mixed case; or quoted), so that "the password is stored in the
vault" stays readable. No detector library is used: the well-kept offline ones scan files line
by line for a repository's leaks (high-entropy strings, keywords), which on prose both misses
the forms above and masks ordinary words; see README "Secrets".

`mask(text)` is the irreversible form for text written to the store (a captured transcript,
an LLM's reason in the log): every secret becomes ``[REDACTED]``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator

__all__ = ["PLACEHOLDER_RE", "Masker", "contains_secret", "find_secret_spans", "mask", "mask_new", "redact"]

Span = tuple[int, int]

# The placeholder shape. It holds no secret material, only a counter, and is unlikely to be
# mangled by a model (ASCII, no spaces, bracketed).
PLACEHOLDER_RE = re.compile(r"\[\[MEMCLI_SECRET_\d+\]\]")
_PLACEHOLDER_FORMAT = "[[MEMCLI_SECRET_{}]]"
REDACTED = "[REDACTED]"

# A secret seen once is also masked where it reappears without its telltale context
# (e.g. a password found in `password=...` and then quoted in prose). Short values are
# left out of that search because they would hit ordinary words.
_MIN_KNOWN_SECRET_LEN = 8

# Words that sometimes follow `password:` in prose or config templates and are not secrets.
_NON_SECRET_VALUES = frozenset(
    {"null", "none", "nil", "true", "false", "required", "optional", "redacted", "hidden", "[redacted]",
     "changeme?", "<redacted>", "***", "****", "*****", "******", "********", "xxx", "xxxx", "n/a", "tbd",
     "empty", "unset", "undefined", "secret", "password", "token", "example"}
)

# Keys whose value is a secret. The key must END with one of these words (then a quote, a
# space or the separator), so `DB_PASSWORD=` and `github_token:` match while
# `token_sort_ratio: 0.8` or `author: bob` do not.
_SECRET_KEYS = (
    r"password|passwd|passphrase|pwd|secret|secret[_-]?key|token|api[_-]?key|access[_-]?key"
    r"|client[_-]?secret|private[_-]?key(?:[_-]?id)?|credentials?|auth|authorization|account[_-]?key"
    r"|shared[_-]?access[_-]?key|signing[_-]?key|encryption[_-]?key|master[_-]?key|session[_-]?key"
)

_KEY_STARTS = "pstacmePSTACME"  # the first letters of _SECRET_KEYS: a cheap test before the alternation
# (Matched from the secret word on: whatever comes before it in the key changes nothing, and a
# `[\w.-]*?` prefix made these two patterns the slowest of all.)
_KEY_VALUE = re.compile(
    rf"(?=[{_KEY_STARTS}])(?:{_SECRET_KEYS})[\"']?[ \t]*(?::=|=>|=|:)[ \t]*"
    r"(?:(?:bearer|basic|token|digest)[ \t]+)?"
    r"(?:\"(?P<dq>[^\"\n]+)\"|'(?P<sq>[^'\n]+)'|(?P<bare>[^\s\"'`]+))",
    re.IGNORECASE,
)

# `api_key:` with its value alone on the next line (YAML, a pasted form).
_NEXT_LINE_VALUE = re.compile(
    rf"(?=[{_KEY_STARTS}])(?:{_SECRET_KEYS})[\"']?[ \t]*(?::|=)[ \t]*\r?\n[ \t]*"
    r"(?:\"(?P<dq>[^\"\n]+)\"|'(?P<sq>[^'\n]+)'|(?P<bare>[^\s\"'`|>#:-][^\s]*(?<!:)))[ \t]*(?=\r?\n|\Z)",
    re.IGNORECASE,
)

# `.env` lines: an upper-case variable whose name ends like a secret's, at a line's start.
_ENV_ASSIGNMENT = re.compile(
    r"(?m)^[ \t]*(?:export[ \t]+)?[A-Z][A-Z0-9_]*(?:KEY|TOKEN|SECRET|PASSWORD|PASSWD|PASS|PWD|CREDENTIALS?"
    r"|AUTH|DSN|SALT|SIGNATURE|COOKIE|SID)[ \t]*=[ \t]*"
    r"(?:\"(?P<dq>[^\"\n]+)\"|'(?P<sq>[^'\n]+)'|(?P<bare>[^\s\"'`#]+))"
)

_CLI_FLAG = re.compile(
    r"(?<![\w-])--(?:password|passwd|passphrase|token|secret|api-key|access-key|client-secret|auth-token)"
    r"(?:=|[ \t]+)(?P<bare>[^\s\"'`-][^\s\"'`]*)",
    re.IGNORECASE,
)

# The look-behind pins the match to the start of the scheme; without it every letter of a
# long word would start a scan to the word's end (quadratic on big texts).
_URL_CREDENTIALS = re.compile(
    r"(?<![a-z0-9+.-])[a-z][a-z0-9+.-]*://[^/\s:@]+:(?P<bare>[^/\s@]+)@", re.IGNORECASE
)

# A signed URL's signature (Azure SAS `sig=`, AWS `X-Amz-Signature=`): the query value.
_URL_SIGNATURE = re.compile(r"[?&](?:sig|x-amz-signature|signature)=(?P<bare>[A-Za-z0-9%+/=_-]{16,})",
                            re.IGNORECASE)

# Prose: "the admin password is X", "passphrase X", "x-api-key header value X", "my token was: X".
# A few linking words may come between the noun and the value; the value must look like a
# secret (`_looks_secret`) unless quoted, so "the password is stored in vault" is left alone.
_PROSE_NOUNS = (r"password|passphrase|passwd|pass ?code|pin(?: code)?|secret(?: key)?|api[ _-]?key|x-api-key"
                r"|access[ _-]?key|auth(?:entication)?[ _-]?token|access[ _-]?token|token|credentials?")
_PROSE = re.compile(
    rf"\b(?:{_PROSE_NOUNS})\b"
    r"(?:[ \t]+(?:for|of|on)[ \t]+(?:the[ \t]+|our[ \t]+|my[ \t]+)?"
    r"[\w.@/-]{1,40}(?:[ \t]+[\w.@/-]{1,40}){0,2})?"
    r"(?:[ \t]+(?:header|value|field|string|itself|now|currently|still|here|below))*"
    r"[ \t]*(?:(?:is|was|are|were|reads|becomes|became|to|set[ \t]+to|changed[ \t]+to|=|:|->|=>)[ \t]*)*"
    r"(?:(?:now|still|currently|just|simply|literally)[ \t]+)?"
    r"(?:\"(?P<dq>[^\"\n]{4,})\"|'(?P<sq>[^'\n]{4,})'|`(?P<bq>[^`\n]{4,})`|(?P<bare>[^\s\"'`]+))",
    re.IGNORECASE,
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
    # GitLab personal, deploy, runner, pipeline-trigger, SCIM, feed, incoming-mail, agent,
    # OAuth-app and CI-build tokens, and runner registration tokens.
    re.compile(r"\bgl(?:pat|dt|rt|ptt|soat|ft|imt|agent|oas|cbt)-[A-Za-z0-9_-]{20,}"),
    re.compile(r"\bGR1348941[A-Za-z0-9_-]{20,}"),
    # Slack bot, app, user, refresh and legacy tokens; app-level and rotating tokens.
    re.compile(r"\bxox[abprse]-[A-Za-z0-9-]{10,}"),
    re.compile(r"\bxapp-\d-[A-Za-z0-9-]{20,}"),
    # Webhook URLs: Slack (incoming, workflows), Discord.
    re.compile(r"https://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9_/-]{20,}"),
    re.compile(r"https://(?:ptb\.|canary\.)?discord(?:app)?\.com/api/webhooks/\d+/[A-Za-z0-9_-]{20,}"),
    # Discord bot tokens: base64 user id, timestamp, HMAC.
    re.compile(r"(?<![\w.-])[MNO][A-Za-z0-9_-]{23,25}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,38}(?![\w.-])"),
    # Google API keys, OAuth client secrets and access tokens.
    re.compile(r"(?<![\w-])AIza[0-9A-Za-z_-]{35}(?![\w-])"),
    re.compile(r"\bGOCSPX-[0-9A-Za-z_-]{20,}"),
    re.compile(r"\bya29\.[0-9A-Za-z_-]{20,}"),
    # Stripe secret, restricted and webhook-signing keys (publishable pk_ keys are public).
    re.compile(r"\b(?:sk|rk)_(?:live|test)_[0-9A-Za-z]{10,}"),
    re.compile(r"\bwhsec_[0-9A-Za-z]{20,}"),
    # npm, PyPI, Hugging Face, DigitalOcean, Shopify, Square, Mailgun tokens.
    re.compile(r"\bnpm_[A-Za-z0-9]{36}\b"),
    re.compile(r"\bpypi-[A-Za-z0-9_-]{50,}"),
    re.compile(r"\bhf_[A-Za-z0-9]{30,}\b"),
    re.compile(r"\bdo[por]_v1_[a-f0-9]{64}\b"),
    re.compile(r"\bshp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}\b"),
    re.compile(r"\bsq0(?:atp|csp)-[0-9A-Za-z_-]{22,}"),
    re.compile(r"\bkey-[0-9a-f]{32}\b"),
    # SendGrid API keys.
    re.compile(r"\bSG\.[A-Za-z0-9_-]{16,32}\.[A-Za-z0-9_-]{30,64}"),
    # Twilio API key and account SIDs (auth tokens are caught by their `token` key).
    re.compile(r"\b(?:SK|AC)[0-9a-f]{32}\b"),
    # Telegram bot tokens.
    re.compile(r"\b\d{8,10}:AA[A-Za-z0-9_-]{33}\b"),
    # JWTs: base64url header (always `{"` -> `eyJ`), payload, optional signature.
    re.compile(r"\beyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*"),
    # PEM private keys, also JSON-escaped on one line (a GCP service-account file's
    # "private_key"); an unterminated block is masked up to the next blank line.
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


def _any_value(value: str) -> bool:
    return True


def _looks_secret(value: str) -> bool:
    """A word in prose that is a secret, not English: at least 6 characters, and a digit,
    a symbol, or a capital past the first letter in it (hunter2, Tr0ub4dor&3, CorrectHorse)."""
    if len(value) < 6 or value.lower() in _NON_SECRET_VALUES:
        return False
    return any(c.isdigit() for c in value) or any(not c.isalnum() for c in value) or any(
        c.isupper() for c in value[1:])


def _env_value(value: str) -> bool:
    return len(value) >= 6 and not value.isdigit()


# (pattern, which values are secret); quoted prose values are always taken.
_VALUE_PATTERNS: tuple[tuple[re.Pattern[str], Callable[[str], bool]], ...] = (
    (_KEY_VALUE, _any_value), (_NEXT_LINE_VALUE, _any_value), (_ENV_ASSIGNMENT, _env_value),
    (_CLI_FLAG, _any_value), (_URL_CREDENTIALS, _any_value), (_URL_SIGNATURE, _any_value),
    (_BEARER, _any_value), (_PROSE, _looks_secret),
)
_TRAILING = ".,;:!?)]}>"  # sentence punctuation after a bare value in prose is not part of it


def _value_spans(pattern: re.Pattern[str], secret: Callable[[str], bool], text: str) -> Iterator[Span]:
    """Yield the span of the value group of each match, skipping non-secret words."""
    for match in pattern.finditer(text):
        group = next(name for name in ("dq", "sq", "bq", "bare") if match.groupdict().get(name))
        start, end = match.span(group)
        if group == "bare":
            while end > start and text[end - 1] in _TRAILING:
                end -= 1
        value = text[start:end]
        if not value or value.strip().strip("<>[]()*").lower() in _NON_SECRET_VALUES \
                or PLACEHOLDER_RE.fullmatch(value):
            continue
        if group == "bare" and not secret(value):
            continue
        yield start, end


def _pattern_spans(text: str) -> Iterator[Span]:
    """Yield the span of every secret the built-in patterns find (may overlap)."""
    for pattern in _TOKEN_PATTERNS:
        yield from (m.span() for m in pattern.finditer(text))
    for pattern, secret in _VALUE_PATTERNS:
        yield from _value_spans(pattern, secret, text)


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


def redact(text: str, replacement: str = REDACTED) -> str:
    """Replace every secret in ``text`` irreversibly; for logs and error messages."""
    return _replace_spans(text, find_secret_spans(text), lambda _secret: replacement)


def mask(text: str) -> str:
    """``text`` with every secret replaced by ``[REDACTED]``, irreversibly: for text that is
    written to the store (a captured transcript, an LLM's reason in the log), never restored."""
    return redact(text, REDACTED)


def mask_new(text: str, source: str) -> str:
    """Mask the secrets of ``text`` that are not in ``source``: an LLM's answer written back
    into a memory keeps the secrets the memory already held (restored from placeholders,
    SPEC 9), and anything else secret-shaped it produced is masked."""
    spans = [(a, b) for a, b in find_secret_spans(text) if text[a:b] not in source]
    return _replace_spans(text, spans, lambda _secret: REDACTED)


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
