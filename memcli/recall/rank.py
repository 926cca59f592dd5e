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

PRIORITY_RANK = {"critical": 0, "high": 1, "normal": 2, "low": 3}
NO_TIME = float("inf")

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def epoch(value: Any) -> float | None:
    """Seconds since the epoch of an ISO 8601 timestamp (no zone: UTC), else None."""
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
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.timezone.utc)
    return moment.timestamp()


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
    moment = epoch(recency)
    return (-rank, -uses, -moment if moment is not None else NO_TIME)
