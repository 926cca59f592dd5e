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

import json
import os
import re
from pathlib import Path

from memcli.errors import MemcliError
from memcli.recall import index as rindex
from memcli.recall import rank, text
from memcli.recall.place import Place

TYPE_CHECKING = False  # no typing or dataclasses at run time: the hooks import this module
if TYPE_CHECKING:
    from typing import Any

FIELD_WEIGHTS = {"summary": 2.0, "tags": 1.5, "details": 1.0, "parts": 1.0, "code": 2.0}
ALIAS_WEIGHT = 0.5
MAX_QUERY = 2000  # characters of a query planned: a pasted log is not a question


class EmptyQueryError(MemcliError):
    """A query with nothing to search for (empty, or only stop words)."""


class Result:
    """One recalled memory (SPEC 10's fields, plus what ties are broken by)."""

    __slots__ = ("id", "score", "scope", "scope_id", "type", "subtype", "summary", "path", "priority",
                 "recency")

    def __init__(self, id: str, score: float, scope: str, scope_id: str, type: str, subtype: str,
                 summary: str, path: str, priority: str = "normal", recency: str = "") -> None:
        self.id = id
        self.score = score
        self.scope = scope
        self.scope_id = scope_id
        self.type = type
        self.subtype = subtype
        self.summary = summary
        self.path = path
        self.priority = priority
        self.recency = recency

    def __repr__(self) -> str:
        return f"Result({self.id!r}, {self.score:.4f}, {self.path!r})"

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "score": round(self.score, 4), "scope": self.scope,
                "scope_id": self.scope_id, "type": self.type, "subtype": self.subtype,
                "summary": self.summary, "path": self.path}


def place_of(store: Any) -> Place:
    """A `Place` for a Store (or the Place itself)."""
    return store if isinstance(store, Place) else Place.of(store)


def view(store: Any, agent: str | None) -> list[str]:
    """The folders (store-relative) that `agent` sees; every live folder without one."""
    return place_of(store).view(agent)


# ---------------------------------------------------------------- the query


class QueryPlan:
    """What a query looks for: (field, term) -> boost, and version numbers to match in
    their longer forms."""

    __slots__ = ("terms", "versions")

    def __init__(self, terms: dict[tuple[str, str], float], versions: list[str]) -> None:
        self.terms = terms
        self.versions = versions

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
        for term in text.code_terms(raw):  # the index's code terms come from the same function
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
    `store` is a Store or a Place. Raises EmptyQueryError for a query with nothing to
    search for."""
    if limit < 1:
        raise MemcliError("--limit must be 1 or more")
    place = place_of(store)
    found: list[Any] = problems if problems is not None else []
    words, code = rindex.analyzers()
    plan = plan_query(query, words, code)
    if not plan:
        raise EmptyQueryError(f"nothing to search for in {query.strip()[:80]!r}: the query is empty or "
                              "only common words; say what the memory is about (e.g. `memcli recall "
                              "'deploy to staging'`)")
    rels = place.view(agent)
    if not rels:
        return []
    root = Path(place.root)
    for attempt in range(2):
        noted = found if attempt == 0 else []
        opened = rindex.open_current(root, rels, noted)
        _gen, idx = opened if opened is not None else rindex.ready(place.store(), rels, noted)
        results, moved = _search(root, idx, plan, rels, limit)
        if not moved or attempt == 1:
            return results
        # a file changed in place without moving its folder's mtime: list those folders again
        with rindex.writing(root) as locked:
            gen = rindex.current(root)
            if locked and gen is not None:
                rindex.sync(place.store(), gen, sorted(moved), [], force=True)
    return []


def _search(root: Path, idx: Any, plan: QueryPlan, rels: list[str],
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
            meta = json.loads(doc.get_first("meta"))
        except (TypeError, ValueError):
            continue
        rel_folder = key.rsplit("/", 1)[0]
        try:
            st = os.lstat(os.path.join(root, key))
        except OSError:
            moved.add(rel_folder)
            continue
        if (st.st_size, st.st_mtime_ns) != (meta.get("size"), meta.get("mtime_ns")):
            moved.add(rel_folder)
        if meta["id"] in seen:
            continue
        seen.add(meta["id"])
        scope, _, scope_id = rel_folder.partition("/")
        results.append(Result(meta["id"], rank.combine(float(score)), scope, scope_id or "global",
                              str(meta.get("type")), str(meta.get("subtype") or ""),
                              str(meta.get("summary") or ""), key, str(meta.get("priority") or "normal"),
                              str(meta.get("recency") or "")))
    results.sort(key=lambda r: rank.recall_key(r.score, r.priority, r.recency, r.id))
    return results[:limit], moved
