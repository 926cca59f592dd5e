"""The briefing's order (SPEC 11): an agent's most useful memories, critical and protected
first, then by use (folded and pending alike), then the most recent."""

from __future__ import annotations

from typing import Any

import orjson

from memcli.recall import index as rindex
from memcli.recall import search, uses

CANDIDATES = 200  # by the index's order; pending uses reorder within them


def most_useful(store: Any, agent: str | None, skip: set[str]) -> list[dict[str, Any]]:
    """Rows (id, summary, type, subtype, folder) of the agent's view, most useful first."""
    rels = search.view(store, agent)
    if not rels:
        return []
    _gen, idx = rindex.ready(store, rels, [])
    tv = rindex._tantivy()
    folders = tv.Query.boolean_query([(tv.Occur.Should, tv.Query.term_query(idx.schema, "folder", rel))
                                      for rel in rels])
    searcher = idx.searcher()
    hits = searcher.search(folders, limit=CANDIDATES + len(skip), order_by_field="brief", count=False).hits
    extra = uses.pending(store.root)
    rows: list[dict[str, Any]] = []
    for _key, address in hits:
        doc = searcher.doc(address)
        try:
            meta = orjson.loads(doc.get_first("meta"))
        except (TypeError, ValueError):
            continue
        if meta.get("id") in skip or not (store.root / doc.get_first("key")).exists():
            continue
        count, _ = uses.applied(meta.get("uses"), None, extra.get(str(meta.get("id"))))
        rows.append({**meta, "uses": count, "folder": doc.get_first("key").rsplit("/", 1)[0]})
    rows.sort(key=lambda r: (-int(r.get("rank") or 0), -int(r["uses"]), _recency(r)))
    return rows


def _recency(row: dict[str, Any]) -> float:
    from memcli.store.model import ts_or_none

    moment = ts_or_none(row.get("recency"))
    return -moment.timestamp() if moment is not None else float("inf")
