"""How recalled memories are ordered (SPEC 10 and 11), as pure functions of their fields.

- `recall_key`: relevance first; scores equal to the sixth decimal are a tie, broken by
  priority (critical first), then recency (`updated_at`, else `created_at`; a memory with no
  readable time comes last), then the id (so that the order never depends on the index's
  internal layout).
- `brief_rank` and `briefing_key`: the briefing's order, critical first, then protected
  (SPEC 2, the age rule aside: it changes with the clock), then by use (folded and pending
  alike), then the most recent.
- `combine`: where another relevance signal (a semantic similarity, say) would add to the
  lexical score; today the score is BM25's alone.

Standard library only: the hooks import this.
"""

from __future__ import annotations

import re

PRIORITY_RANK = {"critical": 0, "high": 1, "normal": 2, "low": 3}
NO_TIME = float("inf")

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


# The usual form, YYYY-MM-DDTHH:MM:SSZ, always a real moment (days to the 28th; the store's
# own test): its first 19 characters sort as the moment does, with no datetime built.
_CANONICAL = re.compile(r"\d{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|1\d|2[0-8])T(?:[01]\d|2[0-3]):[0-5]\d:[0-5]\dZ\Z")


def _moment(value: Any) -> Any:
    """The aware datetime of an ISO 8601 timestamp (no zone: UTC), else None."""
    if not isinstance(value, str):
        return None
    import datetime as dt

    text = value.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    try:
        moment = dt.datetime.fromisoformat(text)
    except ValueError:
        return None
    return moment.replace(tzinfo=dt.timezone.utc) if moment.tzinfo is None else moment


def epoch(value: Any) -> float | None:
    """Seconds since the epoch of an ISO 8601 timestamp (no zone: UTC), else None."""
    moment = _moment(value)
    if moment is None:
        return None
    try:
        return float(moment.timestamp())
    except (ValueError, OverflowError):
        return None


def recency_key(value: Any) -> str:
    """A string that sorts as the moment of a timestamp does (UTC, to the microsecond), and
    "" (before every moment) for none: `briefing_key`'s order of recency without building a
    datetime for the usual form (a briefing from the folders' indices orders 20,000)."""
    if isinstance(value, str) and _CANONICAL.match(value):
        return value[:19]
    moment = _moment(value)  # days 29-31, zones, fractions of a second: built
    if moment is None or epoch(value) is None:
        return ""
    import datetime as dt

    try:
        m = moment.astimezone(dt.timezone.utc)
    except (ValueError, OverflowError):
        return ""
    whole = f"{m.year:04d}-{m.month:02d}-{m.day:02d}T{m.hour:02d}:{m.minute:02d}:{m.second:02d}"
    return whole + (f".{m.microsecond:06d}" if m.microsecond else "")


def combine(lexical: float, semantic: float | None = None, weight: float = 0.0) -> float:
    """The relevance of a memory: the lexical (BM25) score, plus `weight` times a semantic
    similarity when one is given (none is today; the seam for an optional signal)."""
    return lexical if semantic is None else lexical + weight * semantic


def recall_key(score: float, priority: Any, recency: Any, mem_id: str = "") -> tuple[float, int, float, str]:
    moment = epoch(recency)
    return (-round(score, 6), PRIORITY_RANK.get(str(priority), 2), -moment if moment is not None else NO_TIME,
            mem_id)


def brief_rank(data: dict[str, Any]) -> int:
    """2 for a critical memory, 1 for one protected otherwise (a `permanent` or `protected`
    tag, a decision, a person's memory without consent), 0 for the rest. (Runs for every
    memory of a briefing read from the folders' indices: kept to a few lookups.)"""
    if data.get("priority") == "critical":
        return 2
    tags = data.get("tags")
    if isinstance(tags, list) and ("permanent" in tags or "protected" in tags):
        return 1
    if data.get("subtype") == "decision" and data.get("type") == "semantic":
        return 1
    if data.get("created_by") == "USER" and data.get("consent") is not True:
        return 1
    return 0


def briefing_key(rank: int, uses: int, recency: Any) -> tuple[int, int, float]:
    """Ascending = the briefing's order. (Descending by (rank, uses, `recency_key`) is the same
    order: `memcli.recall.briefing` sorts many rows that way.)"""
    moment = epoch(recency)
    return (-rank, -uses, -moment if moment is not None else NO_TIME)
