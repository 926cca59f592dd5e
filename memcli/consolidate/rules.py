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
from memcli.store.model import Memory

_SCORERS = {
    "token_sort_ratio": fuzz.token_sort_ratio,
    "token_set_ratio": fuzz.token_set_ratio,
    "ratio": fuzz.ratio,
    "partial_ratio": fuzz.partial_ratio,
    "WRatio": fuzz.WRatio,
    "QRatio": fuzz.QRatio,
}
SCORER_NAMES = frozenset(_SCORERS)


# ---------------------------------------------------------------- section 2: exclusions


def protection_reason(mem: Memory, now: dt.datetime, cfg: Consolidation, consent: bool = False) -> str | None:
    """Why a memory is protected (SPEC 2), or None. Protected memories are never rewritten,
    moved or archived by a consolidation action."""
    data = mem.facts  # every field here is in the index entry too: no need to read the file
    get = data.get  # (this runs for every memory of a full pass: plain lookups, no properties)
    if get("priority") == "critical":
        return "critical"
    tags = get("tags")  # (a list of strings: validated)
    if tags:
        if "permanent" in tags:
            return "permanent"
        if "protected" in tags:
            return "protected_tag"
    # (created_by and subtype are strings: compared as they are, as `str(value or "")` would)
    if get("created_by") == "USER" and get("consent") is not True and not consent:
        return "user_without_consent"
    if mem.type == "semantic" and get("subtype") == "decision":
        return "decision"
    if is_fresh(mem, now, cfg.min_age_days):
        return "fresh"
    return None


def protection_reasons(mems: Iterable[Memory], now: dt.datetime, cfg: Consolidation,
                       consent: bool = False) -> list[str | None]:
    """`protection_reason` of each of `mems`, in order: the same tests in one loop, for the
    report's counts over every memory of a run (a call to it and one to `is_fresh` each cost
    as much as the tests). A created_at that is not a canonical stamp asks `is_fresh`."""
    cutoff, days = _cutoff(now, cfg.min_age_days), cfg.min_age_days
    out: list[str | None] = []
    append = out.append
    for mem in mems:
        get = mem.facts.get
        if get("priority") == "critical":
            append("critical")
            continue
        tags = get("tags")
        if tags and "permanent" in tags:
            append("permanent")
        elif tags and "protected" in tags:
            append("protected_tag")
        elif get("created_by") == "USER" and get("consent") is not True and not consent:
            append("user_without_consent")
        elif mem.type == "semantic" and get("subtype") == "decision":
            append("decision")
        else:
            created = get("created_at")
            if cutoff is not None and type(created) is str and len(created) == 20 and created[10] == "T" \
                    and created[19] == "Z":
                append("fresh" if created > cutoff else None)  # as `is_fresh` compares them
            else:
                append("fresh" if is_fresh(mem, now, days) else None)
    return out


def is_fresh(mem: Memory, now: dt.datetime, min_age_days: float) -> bool:
    """Younger than `min_age_days` by created_at; a future created_at is fresh too."""
    value = mem.facts.get("created_at")
    cutoff = _cutoff(now, min_age_days)
    if cutoff is not None and type(value) is str and len(value) == 20 and value[10] == "T" \
            and value[19] == "Z":
        return value > cutoff  # canonical UTC stamps compare as strings: no parsing (_canonical)
    created = mem.ts("created_at")
    return created is None or now - created < dt.timedelta(days=min_age_days)


def takes_part(mem: Memory) -> bool:
    """Archived and superseded memories take part in no rule."""
    facts = mem.facts
    return not facts.get("superseded_by") and "archived_at" not in facts


# ---------------------------------------------------------------- similarity


def content_text(content: dict[str, Any]) -> str:
    """summary, details, then the other top-level string values sorted by key, normalised."""
    summary, details = content.get("summary"), content.get("details")
    if content.keys() <= _TEXT_KEYS:  # the usual content (a cold pass makes thousands): no sort
        if isinstance(summary, str):
            return default_process(f"{summary} {details}" if isinstance(details, str) else summary)
        return default_process(details if isinstance(details, str) else "")
    parts = [summary, details]
    parts += [content[k] for k in sorted(content) if k not in ("summary", "details")]
    return default_process(" ".join(p for p in parts if isinstance(p, str)))


def sorted_len(norm_text: str) -> int:
    """The length of a normalised text's tokens joined by single spaces, in whatever order:
    that of the string ``token_sort_ratio`` compares (`similar.sorted_tokens`), which an
    index entry caches as ``sort_len``. Normalising (rapidfuzz's ``default_process``) leaves
    no whitespace but the plain space (tested over every code point), so the tokens are the
    runs between spaces: collapsing the runs of spaces in C costs half of splitting a long
    text into its words."""
    text = norm_text.strip(" ")
    while "  " in text:
        text = text.replace("  ", " ")
    return len(text)


def raw_text(content: dict[str, Any]) -> str:
    """The same text before normalisation: what the guards look at (case and digits matter)."""
    parts = [content.get("summary"), content.get("details")]
    parts += [content[k] for k in sorted(content) if k not in ("summary", "details")]
    return " ".join(p for p in parts if isinstance(p, str))


_TEXT_KEYS = frozenset({"summary", "details"})

# A pair this far below the similarity threshold gets a second look without its articles.
SECOND_LOOK_BAND = 0.10
_ARTICLES = frozenset({"a", "an", "the"})


def similarity(a: str, b: str, scorer: str = "token_sort_ratio",
               plain: tuple[str, str] | None = None) -> float:
    """Content similarity of two normalised texts, 0..1: the scorer's result, or its result on
    the texts without their articles ("a", "an", "the") when that is higher, so that "the man
    is playing the drums" and "a man is playing drums" are one statement (README: choices).
    With ``plain`` (the two texts' plain forms, :func:`memcli.consolidate.restate.plain_form`),
    the scorer's result on those counts too when it is higher."""
    fn = _SCORERS[scorer]
    score = fn(a, b, processor=None) / 100.0
    if score >= 1.0:
        return score
    if _has_article(a) or _has_article(b):
        score = max(score, fn(without_articles(a), without_articles(b), processor=None) / 100.0)
    if plain is not None and score < 1.0:
        score = max(score, fn(plain[0], plain[1], processor=None) / 100.0)
    return score


def _has_article(text: str) -> bool:
    return any(word in _ARTICLES for word in text.split())


def without_articles(text: str) -> str:
    """A normalised text without the words "a", "an" and "the"."""
    return " ".join(word for word in text.split() if word not in _ARTICLES)


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
    da, db = a.facts, b.facts
    return (da.get("promoted_to") == b.id or db.get("promoted_to") == a.id
            or da.get("promoted_from") == b.id or db.get("promoted_from") == a.id
            or (da.get("promoted_from") is not None and da.get("promoted_from") == db.get("promoted_from")))


# ---------------------------------------------------------------- ordering and change


def newest_first_key(mem: Memory) -> tuple[str, str, str]:
    """created_at, then updated_at, then id: sorting by it descending puts the newest first."""
    facts = mem.facts
    created, updated = facts.get("created_at"), facts.get("updated_at")
    if type(created) is str and type(updated) is str and len(created) == len(updated) == 20 and (
            created[10] == updated[10] == "T" and created[19] == updated[19] == "Z"):
        return (created, updated, mem.id)  # both canonical (the common case), checked inline
    return (_sortable(created), _sortable(updated), mem.id)


def _sortable(value: Any) -> str:
    """A timestamp as a string that sorts in time order. Canonical UTC stamps already do
    (the common case, no parsing); others are parsed and rewritten."""
    if isinstance(value, str) and len(value) == 20 and value[10] == "T" and value[19] == "Z":
        return value
    from memcli.store.model import format_ts, ts_or_none

    moment = ts_or_none(value)
    return format_ts(moment) if moment else ""


def edited_since_run(mem: Memory, run_hash: str | None, had_run: bool) -> bool:
    """Changed since the last successful run (SPEC 6): the file differs from its run_hash and
    the record was edited after it was created. With no earlier run: never."""
    if not had_run or (run_hash is not None and run_hash == mem.content_hash):
        return False
    created, updated = mem.ts("created_at"), mem.ts("updated_at")
    return created is not None and updated is not None and updated > created


# ---------------------------------------------------------------- 3.1 merge duplicates


def is_duplicate_pair(a: Memory, b: Memory, score: float, cfg: Consolidation) -> bool:
    """The duplicate rule before guards: same type/subtype, tags and content above thresholds,
    not linked by promotion. Callers ensure both are in the same folder."""
    return (a.type == b.type and a.subtype == b.subtype
            and tag_overlap(a.tags, b.tags) > cfg.tag_overlap
            and score > cfg.content_similarity
            and not promotion_linked(a, b))


def merge_into_keeper(keeper: dict[str, Any], members: list[dict[str, Any]], stamp: str) -> dict[str, Any]:
    """The keeper after absorbing members (newest first): union of tags (its own order first),
    content keys it lacks, lists united without repeats, access counts summed, latest access."""
    out = dict(keeper)
    content = dict(out.get("content") or {})
    tags = list(out.get("tags") or [])
    for member in members:
        tags += [t for t in member.get("tags") or [] if t not in tags]
        for key, value in (member.get("content") or {}).items():
            if key not in content:
                content[key] = value
            elif isinstance(content[key], list) and isinstance(value, list):
                content[key] = _union_list(content[key], value)
    out["tags"] = tags
    out["content"] = content
    out["access_count"] = sum(int(m.get("access_count") or 0) for m in [keeper, *members])
    out["last_accessed"] = _latest([m.get("last_accessed") for m in [keeper, *members]])
    out["supersedes"] = list(out.get("supersedes") or []) + [
        str(m["id"]) for m in members if m["id"] not in (out.get("supersedes") or [])]
    out["updated_at"] = stamp
    return out


def _union_list(first: list[Any], second: list[Any]) -> list[Any]:
    import orjson

    seen = {orjson.dumps(v, option=orjson.OPT_SORT_KEYS) for v in first}
    out = list(first)
    for value in second:
        key = orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
        if key not in seen:
            seen.add(key)
            out.append(value)
    return out


def _latest(stamps: list[Any]) -> Any:
    from memcli.store.model import ts_or_none

    known = [(moment, s) for s in stamps if (moment := ts_or_none(s)) is not None]
    return max(known, key=lambda pair: pair[0])[1] if known else None


def archived_record(data: dict[str, Any], *, reason: str, folder: str, run_id: str, stamp: str,
                    superseded_by: str | None = None) -> dict[str, Any]:
    """A record as it goes into archive/: whole, plus the four archive fields."""
    out = dict(data)
    if superseded_by is not None:
        out["superseded_by"] = [superseded_by]
    out.update(archived_at=stamp, archive_reason=reason, archived_from=folder, archive_run_id=run_id)
    return out


# ---------------------------------------------------------------- 3.2 summarise verbose episodic


def needs_summary(mem: Memory, now: dt.datetime, cfg: Consolidation) -> bool:
    """Episodic, older than summarize_after_days, details longer than summarize_min_chars,
    not tagged `summarized`."""
    if mem.type != "episodic" or mem.details_len() <= cfg.summarize_min_chars:
        return False  # the cheap tests first: this runs for every memory of the store
    value, cutoff = mem.facts.get("created_at"), _cutoff(now, cfg.summarize_after_days)
    if cutoff is not None and type(value) is str and _canonical(value):
        old = value < cutoff  # canonical UTC stamps compare as strings: no parsing
    else:
        created = mem.ts("created_at")
        old = created is not None and now - created > dt.timedelta(days=cfg.summarize_after_days)
    return old and "summarized" not in (mem.facts.get("tags") or ())


def summarized_record(data: dict[str, Any], summary: str, stamp: str) -> dict[str, Any]:
    """details replaced by the summary, tag `summarized`, timeline cut to first 3 + last 3."""
    out = dict(data)
    content = dict(out.get("content") or {})
    content["details"] = summary
    timeline = content.get("timeline")
    if isinstance(timeline, list) and len(timeline) > 6:
        content["timeline"] = timeline[:3] + timeline[-3:]
    out["content"] = content
    out["tags"] = list(out.get("tags") or []) + ["summarized"]
    out["updated_at"] = stamp
    return out


# ---------------------------------------------------------------- 3.3 promote patterns


def promotion_target(mem: Memory, cfg: Consolidation) -> str | None:
    """'team' or 'global' when a procedural memory has earned promotion, else None."""
    if mem.type != "procedural" or mem.facts.get("promoted_to"):
        return None
    count = int(mem.facts.get("access_count") or 0)
    if count < min(cfg.promote_to_team, cfg.promote_to_global):
        return None
    scope = mem.facts.get("scope") or _scope_from_path(mem)
    if scope == "agent" and count >= cfg.promote_to_team:
        return "team"
    if scope == "team" and count >= cfg.promote_to_global:
        return "global"
    return None


def _scope_from_path(mem: Memory) -> str:
    return mem.path.parent.parent.name if mem.path.parent.parent.name in ("agent", "team") else "global"


def promoted_copy(data: dict[str, Any], *, new_id: str, scope: str, scope_id: str,
                  stamp: str) -> dict[str, Any]:
    """The copy written one level up: a new id, the tag `promoted`, counters reset."""
    out = dict(data)
    tags = list(out.get("tags") or [])
    out.update(id=new_id, scope=scope, scope_id=scope_id,
               tags=tags + (["promoted"] if "promoted" not in tags else []),
               promoted_from=data["id"], promoted_to=None, access_count=0, last_accessed=None,
               created_at=stamp, updated_at=stamp, supersedes=[], superseded_by=[])
    return out


# ---------------------------------------------------------------- 3.4 archive stale


def is_stale(mem: Memory, now: dt.datetime, cfg: Consolidation) -> bool:
    """Never used, or last used more than stale_after_days ago. A last_accessed in the future
    never makes a memory stale; a memory used but with no last_accessed falls back to
    updated_at, then created_at."""
    facts = mem.facts
    count = facts.get("access_count")
    if not count or (type(count) is not int and int(count) == 0):  # (an int: validated)
        return True
    cutoff = _cutoff(now, cfg.stale_after_days)
    value = facts.get("last_accessed")
    if cutoff is not None and type(value) is str and len(value) == 20 and value[10] == "T" \
            and value[19] == "Z":
        return value < cutoff  # canonical UTC stamps compare as strings: no parsing (_canonical)
    last = mem.ts("last_accessed") or mem.ts("updated_at") or mem.ts("created_at")
    return last is not None and now - last > dt.timedelta(days=cfg.stale_after_days)


def cutoff_stamp(now: dt.datetime, days: float) -> str | None:
    """`now` - `days` as a canonical UTC stamp (which compares with a canonical stamp as a
    string), or None when that would not be exact: a caller then asks the rule itself."""
    return _cutoff(now, days)


def _canonical(value: Any) -> bool:
    """`YYYY-MM-DDTHH:MM:SSZ`: sorts as a string in time order (a bad one fails validation)."""
    return isinstance(value, str) and len(value) == 20 and value[10] == "T" and value[19] == "Z"


# the last ones asked for (a run asks for two: freshness and staleness), newest first
_CUTOFF: list[tuple[dt.datetime, float, str | None]] = []


def _cutoff(now: dt.datetime, days: float) -> str | None:
    """now - days as a canonical stamp, when that is exact (now in whole seconds)."""
    if _CUTOFF:  # (the latest one first: a run asks for the same two again and again)
        known, known_days, stamp = _CUTOFF[0]
        if known is now and known_days == days:
            return stamp
    for known, known_days, stamp in _CUTOFF:
        if known is now and known_days == days:
            return stamp
    from memcli.store.model import format_ts

    moment = now - dt.timedelta(days=days)
    exact = moment.microsecond == 0 and moment.utcoffset() == dt.timedelta(0)
    _CUTOFF[:] = [(now, days, format_ts(moment) if exact else None), *_CUTOFF[:3]]
    return _CUTOFF[0][2]
