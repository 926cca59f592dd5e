"""`memcli recall QUERY` (SPEC 10): the live memories an agent sees, ranked for the query.

The agent's view is its own folder `agent/ID/`, its team's (`[teams]`, else `default_team`)
and `global/`; without an agent, every live folder. Ranking is BM25 (tantivy's) over the
summary, details and tags, with these additions, each measured on bench/recall.py:

- field weights: a word in the summary counts twice one in the details, tags 1.5x;
- stemming (Snowball English) and stop words: "how do I deploy" asks about `deploy`;
- code identifiers: `snake_case`, `CamelCase`, `a/b/c.py` and `v2.3.1` match whole (the
  `code` field), by their parts (the word fields), and CamelCase by its pieces (`parts`);
  a version matches its longer forms ("2.3" finds "v2.3.1");
- short forms both ways ("k8s" and "kubernetes", "db" and "database"), at half weight.

Ties are broken by priority (critical first), then recency (`updated_at`, then
`created_at`). Recording the uses of the results is the caller's (a person's `show` records
none; `recall`, MCP and the hooks do).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any

import orjson

from memcli.errors import MemcliError
from memcli.recall import index as rindex
from memcli.recall import text

FIELD_WEIGHTS = {"summary": 2.0, "tags": 1.5, "details": 1.0, "parts": 1.0, "code": 2.0}
ALIAS_WEIGHT = 0.5
PRIORITY_RANK = {"critical": 0, "high": 1, "normal": 2, "low": 3}
MAX_QUERY = 2000  # characters of a query planned: a pasted log is not a question


class EmptyQueryError(MemcliError):
    """A query with nothing to search for (empty, or only stop words)."""


@dataclass
class Result:
    id: str
    score: float
    scope: str
    scope_id: str
    type: str
    subtype: str
    summary: str
    path: str
    priority: str = "normal"
    recency: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "score": round(self.score, 4), "scope": self.scope,
                "scope_id": self.scope_id, "type": self.type, "subtype": self.subtype,
                "summary": self.summary, "path": self.path}


def view(store: Any, agent: str | None) -> list[str]:
    """The folders (store-relative) that `agent` sees; every live folder without one."""
    from memcli.store.store import is_valid_scope_id

    live = [f.rel for f in store.memory_folders()]
    if agent is None:
        return live
    if not is_valid_scope_id(agent):
        raise MemcliError(f"bad agent id {agent!r} (letters, digits, '.', '_', '-')")
    wanted = [f"agent/{agent}", f"team/{store.settings.team_for(agent)}", "global"]
    return [rel for rel in wanted if rel in live]


# ---------------------------------------------------------------- the query


@dataclass
class QueryPlan:
    terms: dict[tuple[str, str], float]  # (field, term) -> boost
    versions: list[str]  # version numbers to match in their longer forms

    def __bool__(self) -> bool:
        return bool(self.terms or self.versions)


def plan_query(query: str, words: Any, code: Any) -> QueryPlan:
    """What to look for: every field's terms for each meaningful word of the query."""
    terms: dict[tuple[str, str], float] = {}
    versions: list[str] = []

    def put(field: str, term: str, boost: float) -> None:
        if term and terms.get((field, term), 0.0) < boost:
            terms[(field, term)] = boost

    def words_of(raw: str, boost: float,
                 fields: tuple[str, ...] = ("summary", "details", "tags", "parts")) -> None:
        for piece in text.PIECE.findall(raw):
            if text.is_stop(piece):
                continue
            for term in words.analyze(piece):
                for field in fields:
                    put(field, term, boost * FIELD_WEIGHTS[field])

    for raw in text.RAW_TOKEN.findall(query[:MAX_QUERY]):
        lower = raw.lower()
        if text.is_stop(lower):
            continue
        words_of(raw, 1.0)
        for term in code.analyze(raw):
            put("code", term, FIELD_WEIGHTS["code"])
        version = text.VERSION.match(lower)
        if version is not None:
            versions.append(version.group(1))
        pieces = text.CAMEL_PIECE.findall(raw)
        if len(pieces) > 1 and not raw.islower():
            words_of(" ".join(pieces), ALIAS_WEIGHT)
        for other in text.expansions(lower):
            words_of(other, ALIAS_WEIGHT)
    return QueryPlan(terms, list(dict.fromkeys(versions)))


def _tantivy_query(tv: Any, schema: Any, plan: QueryPlan, rels: list[str]) -> Any:
    should: list[Any] = []
    for (field, term), boost in sorted(plan.terms.items()):
        term_query = tv.Query.term_query(schema, field, term)
        should.append((tv.Occur.Should, tv.Query.boost_query(term_query, boost)))
    for number in plan.versions:
        pattern = "v?" + re.escape(number) + r"([.\-+].*)?"
        should.append((tv.Occur.Should, tv.Query.boost_query(
            tv.Query.regex_query(schema, "code", pattern), FIELD_WEIGHTS["code"])))
    folders = tv.Query.boolean_query([(tv.Occur.Should, tv.Query.term_query(schema, "folder", rel))
                                      for rel in rels])
    return tv.Query.boolean_query([(tv.Occur.Must, tv.Query.const_score_query(folders, 0.0)),
                                   (tv.Occur.Must, tv.Query.boolean_query(should))])


# ---------------------------------------------------------------- searching


def recall(store: Any, query: str, agent: str | None = None, limit: int = 5,
           problems: list[Any] | None = None) -> list[Result]:
    """The `limit` memories of the agent's view that best match `query`, best first.
    Raises EmptyQueryError for a query with nothing to search for."""
    if limit < 1:
        raise MemcliError("--limit must be 1 or more")
    found: list[Any] = problems if problems is not None else []
    words, code = rindex.analyzers()
    plan = plan_query(query, words, code)
    if not plan:
        raise EmptyQueryError(f"nothing to search for in {query.strip()[:80]!r}: the query is empty or "
                              "only common words; say what the memory is about (e.g. `memcli recall "
                              "'deploy to staging'`)")
    rels = view(store, agent)
    if not rels:
        return []
    for attempt in range(2):
        _gen, idx = rindex.ready(store, rels, found if attempt == 0 else [])
        results, moved = _search(store, idx, plan, rels, limit)
        if not moved or attempt == 1:
            return results
        # a file changed in place without moving its folder's mtime: list those folders again
        with rindex.writing(store.root) as locked:
            gen = rindex.current(store.root)
            if locked and gen is not None:
                rindex.sync(store, gen, sorted(moved), [], force=True)
    return []


def _search(store: Any, idx: Any, plan: QueryPlan, rels: list[str],
            limit: int) -> tuple[list[Result], set[str]]:
    tv = rindex._tantivy()
    searcher = idx.searcher()
    hits = searcher.search(_tantivy_query(tv, idx.schema, plan, rels), limit=limit * 4 + 20, count=False).hits
    results: list[Result] = []
    moved: set[str] = set()
    seen: set[str] = set()
    for score, address in hits:
        doc = searcher.doc(address)
        key = doc.get_first("key")
        try:
            meta = orjson.loads(doc.get_first("meta"))
        except (TypeError, ValueError):
            continue
        rel_folder = key.rsplit("/", 1)[0]
        try:
            st = os.lstat(store.root / key)
        except OSError:
            moved.add(rel_folder)
            continue
        if (st.st_size, st.st_mtime_ns) != (meta.get("size"), meta.get("mtime_ns")):
            moved.add(rel_folder)
        if meta["id"] in seen:
            continue
        seen.add(meta["id"])
        scope, _, scope_id = rel_folder.partition("/")
        results.append(Result(meta["id"], float(score), scope, scope_id or "global", str(meta.get("type")),
                              str(meta.get("subtype") or ""), str(meta.get("summary") or ""), key,
                              str(meta.get("priority") or "normal"), str(meta.get("recency") or "")))
    results.sort(key=_rank)
    return results[:limit], moved


def _rank(result: Result) -> tuple[float, int, float]:
    # Scores equal to the sixth decimal are a tie: priority first, then the most recent
    # (a memory with no readable time comes last).
    from memcli.store.model import ts_or_none

    moment = ts_or_none(result.recency)
    return (-round(result.score, 6), PRIORITY_RANK.get(result.priority, 2),
            -moment.timestamp() if moment is not None else float("inf"))
