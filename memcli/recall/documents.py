"""How a memory becomes a document of the search index (`memcli.recall.index`).

A document holds the memory's words by field (summary, details, tags), the pieces of its
CamelCase words (`parts`), its identifiers whole (`code`), what a result shows (`meta`, JSON
bytes, stored and not indexed) and the briefing's order (`brief`). A build makes 100,000 of
them, so the text work runs over a folder's memories at once: one pass of byte-class tests
over all their text says which memories can hold an identifier or a CamelCase word at all
(`text.shapes_of`), and only those meet a regular expression. Most memories are prose.
"""

from __future__ import annotations

from memcli.recall import text
from memcli.recall.rank import brief_rank

TYPE_CHECKING = False  # the read path imports no typing (hooks)
if TYPE_CHECKING:
    from typing import Any

    from memcli.store.model import Memory

MAX_DETAILS = 100_000  # characters of details indexed: more never changes what a memory is about
TEXT_FIELDS = ("summary", "details", "tags", "parts", "code")


def _orjson() -> Any:
    import orjson

    return orjson


def document(rel: str, mem: Memory) -> dict[str, Any] | None:
    """The document of a live memory (None for a record marked archived: never recalled)."""
    return document_of(rel, mem.name, mem.data, mem.size, mem.mtime_ns)


def document_of(rel: str, name: str, data: dict[str, Any], size: int, mtime_ns: int) -> dict[str, Any] | None:
    """`document` from a record read and checked (here or by the folder's index)."""
    return documents_of(rel, [(name, data, size, mtime_ns)])[0]


def documents_of(rel: str, records: list[tuple[str, dict[str, Any], int, int]]
                 ) -> list[dict[str, Any] | None]:
    """The documents of records (file name, record, size, mtime) of the folder `rel`, in
    their order; None for a record marked archived (never recalled). A text field with
    nothing in it is left out."""
    dumps = _orjson().dumps
    out: list[dict[str, Any] | None] = []
    wholes: list[str] = []
    prefix = rel + "/"
    for name, data, size, mtime_ns in records:  # (runs 100,000 times in a build: kept lean)
        if "archived_at" in data:
            out.append(None)
            continue
        get = data.get
        content = get("content")
        if not isinstance(content, dict):
            content = {}
        summary = content.get("summary", "")
        if not isinstance(summary, str):
            summary = ""
        details = content.get("details", "")
        if not isinstance(details, str):
            details = ""
        if len(content) > ("summary" in content) + ("details" in content):  # (most hold only these)
            others = " ".join(v for k, v in sorted(content.items()) if k not in ("summary", "details")
                              and isinstance(v, str))
            if others:
                details = details + " " + others
        if len(details) > MAX_DETAILS:
            details = details[:MAX_DETAILS]
        raw_tags = get("tags")
        tags = " ".join([t for t in raw_tags if isinstance(t, str)]) if isinstance(raw_tags, list) else ""
        count = get("access_count", 0)
        if not isinstance(count, int) or isinstance(count, bool):
            count = 0
        rank = brief_rank(data)  # the briefing's order, kept as a fast field
        meta = dumps({"id": data["id"], "type": get("type"), "subtype": get("subtype") or "",
                      "priority": get("priority") or "normal",
                      "recency": str(get("updated_at") or get("created_at") or ""),
                      "summary": summary[:300], "size": size, "mtime_ns": mtime_ns, "rank": rank,
                      "uses": count})
        wholes.append(f"{summary} {details} {tags}")
        doc = {"key": prefix + name, "folder": rel, "summary": summary, "meta": meta,
               "brief": rank * 1_000_000_000 + min(max(count, 0), 999_999_999)}
        if details:  # an empty field is left out: the same to the index, and cheaper to hand over
            doc["details"] = details
        if tags:
            doc["tags"] = tags
        out.append(doc)
    live = [doc for doc in out if doc is not None]
    for n in text.shaped(wholes):  # the few that can hold identifiers or CamelCase words
        joined, camel = text.shapes(wholes[n])
        parts = text.camel_parts(wholes[n], camel)
        code = " ".join(text.code_terms(wholes[n], joined, camel))
        if parts:
            live[n]["parts"] = parts
        if code:
            live[n]["code"] = code
    return out
