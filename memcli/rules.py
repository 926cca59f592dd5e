"""The consolidation rules of SPEC sections 2 and 3 as pure functions: no I/O, no clock.

Each rule is one named function; the engine calls them in order and turns their answers
into a plan. `now` is always passed in.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from typing import Any

from rapidfuzz import fuzz
from rapidfuzz.utils import default_process

from memcli.config import Consolidation
from memcli.model import Memory

_SCORERS = {
    "token_sort_ratio": fuzz.token_sort_ratio,
    "token_set_ratio": fuzz.token_set_ratio,
    "ratio": fuzz.ratio,
    "partial_ratio": fuzz.partial_ratio,
    "WRatio": fuzz.WRatio,
    "QRatio": fuzz.QRatio,
}


# ---------------------------------------------------------------- section 2: exclusions


def protection_reason(mem: Memory, now: dt.datetime, cfg: Consolidation, consent: bool = False) -> str | None:
    """Why a memory is protected (SPEC 2), or None. Protected memories are never rewritten,
    moved or archived by a consolidation action."""
    data = mem.data
    if data.get("priority") == "critical":
        return "critical"
    tags = set(mem.tags)
    if "permanent" in tags:
        return "permanent"
    if "protected" in tags:
        return "protected_tag"
    if mem.created_by == "USER" and data.get("consent") is not True and not consent:
        return "user_without_consent"
    if mem.type == "semantic" and mem.subtype == "decision":
        return "decision"
    if is_fresh(mem, now, cfg.min_age_days):
        return "fresh"
    return None


def is_fresh(mem: Memory, now: dt.datetime, min_age_days: float) -> bool:
    """Younger than `min_age_days` by created_at; a future created_at is fresh too."""
    created = mem.ts("created_at")
    return created is None or now - created < dt.timedelta(days=min_age_days)


def takes_part(mem: Memory) -> bool:
    """Archived and superseded memories take part in no rule."""
    return not mem.data.get("superseded_by") and "archived_at" not in mem.data


# ---------------------------------------------------------------- similarity


def content_text(content: dict[str, Any]) -> str:
    """summary, details, then the other top-level string values sorted by key, normalised."""
    parts = [content.get("summary"), content.get("details")]
    parts += [content[k] for k in sorted(content) if k not in ("summary", "details")]
    return default_process(" ".join(p for p in parts if isinstance(p, str)))


def raw_text(content: dict[str, Any]) -> str:
    """The same text before normalisation: what the guards look at (case and digits matter)."""
    parts = [content.get("summary"), content.get("details")]
    parts += [content[k] for k in sorted(content) if k not in ("summary", "details")]
    return " ".join(p for p in parts if isinstance(p, str))


def similarity(a: str, b: str, scorer: str = "token_sort_ratio") -> float:
    """Content similarity of two normalised texts, 0..1."""
    return _SCORERS[scorer](a, b, processor=None) / 100.0


def scorer_fn(scorer: str) -> Any:
    return _SCORERS[scorer]


def tag_overlap(a: Iterable[str], b: Iterable[str]) -> float:
    """Jaccard overlap of two tag sets; two empty sets count as 1.0."""
    sa, sb = set(a), set(b)
    if not sa and not sb:
        return 1.0
    return len(sa & sb) / len(sa | sb)


def promotion_linked(a: Memory, b: Memory) -> bool:
    """Memories linked by promotion are never duplicates of each other."""
    da, db = a.data, b.data
    return (da.get("promoted_to") == b.id or db.get("promoted_to") == a.id
            or da.get("promoted_from") == b.id or db.get("promoted_from") == a.id
            or (da.get("promoted_from") is not None and da.get("promoted_from") == db.get("promoted_from")))
