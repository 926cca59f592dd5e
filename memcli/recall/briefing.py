"""The briefing's memories (SPEC 11): an agent's most useful, critical and protected first,
then by use (folded and pending alike), then the most recent (`rank.briefing_key`).

The briefing needs no search: it comes from the search index when that is in line with the
agent's folders (its `brief` fast field orders them; documents queued by `add` and not yet
committed are merged in), and otherwise from the folders' `_index.json` entries, which every
writing command keeps, plus any file dropped in by hand that has no entry yet. So the very
first session of a store gets its briefing within the hook's budget, while the search index
is built in the background for the prompts that follow.

Rows come best first, lazily: the caller stops taking them when its text is full, so only
the files of the memories it shows are read (to check that they are still there and live,
and for their whole summary).
"""

from __future__ import annotations

import json
import os
from operator import itemgetter

from memcli.recall import index as rindex
from memcli.recall import rank

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Any

    from memcli.recall.place import Place
    from memcli.recall.uses import Pending

CANDIDATES = 200  # from the search index, by its order; pending uses reorder within them
SUMMARY_CHARS = 300
INDEX_NAME = "_index.json"
BIG_INDEX = 256 * 1024


def most_useful(place: Place, rels: list[str], skip: set[str], extra: dict[str, Pending],
                source: list[str] | None = None) -> Iterator[dict[str, Any]]:
    """Rows (id, summary, type, subtype, folder, uses) of the folders `rels`, most useful
    first, leaving out the ids in `skip`; `extra` holds the pending uses by id. `source`,
    when given, receives "search-index" or "folder-indices"."""
    from pathlib import Path

    opened = rindex.open_current(Path(place.root), rels, [], pending_ok=True)
    if source is not None:
        source.append("search-index" if opened is not None else "folder-indices")
    if opened is not None:
        return _from_search_index(place.root, opened, rels, skip, extra)
    return _from_folder_indices(place.root, rels, skip, extra)


# ---------------------------------------------------------------- from the search index


def _from_search_index(root: str, opened: tuple[Any, Any], rels: list[str], skip: set[str],
                       extra: dict[str, Pending]) -> Iterator[dict[str, Any]]:
    gen, idx = opened
    tv = rindex._tantivy()
    folders = tv.Query.boolean_query([(tv.Occur.Should, tv.Query.term_query(idx.schema, "folder", rel))
                                      for rel in rels])
    searcher = idx.searcher()
    hits = searcher.search(folders, limit=CANDIDATES + len(skip), order_by_field="brief", count=False).hits
    metas: dict[str, dict[str, Any]] = {}
    for _key, address in hits:
        doc = searcher.doc(address)
        try:
            metas[doc.get_first("key")] = json.loads(doc.get_first("meta"))
        except (TypeError, ValueError):
            continue
    for doc in rindex._read_pending(gen):  # written since the last commit: newer than the index
        key = str(doc["key"])
        if key.rsplit("/", 1)[0] not in rels:
            continue
        try:
            metas[key] = json.loads(doc["meta"]) if not doc.get("deleted") else {}
        except (KeyError, TypeError, ValueError):
            metas.pop(key, None)
    rows: list[dict[str, Any]] = []
    for key, meta in metas.items():
        mem_id = meta.get("id")
        if not isinstance(mem_id, str) or mem_id in skip:
            continue
        found = extra.get(mem_id)
        uses = _count(meta.get("uses")) + (found.count if found is not None else 0)
        rows.append({"id": mem_id, "summary": str(meta.get("summary") or ""), "type": meta.get("type"),
                     "subtype": meta.get("subtype") or "", "folder": key.rsplit("/", 1)[0], "uses": uses,
                     "_key": rank.briefing_key(int(meta.get("rank") or 0), uses, meta.get("recency")),
                     "_file": key})
    rows.sort(key=lambda r: r["_key"])
    for row in rows:
        if os.path.lexists(os.path.join(root, row["_file"])):  # still there (a run may have moved it)
            yield row


# ---------------------------------------------------------------- from the folders' indices


def _from_folder_indices(root: str, rels: list[str], skip: set[str],
                         extra: dict[str, Pending]) -> Iterator[dict[str, Any]]:
    """`rank.briefing_key`'s order over every memory of the view (20,000 at 100,000 in a
    store): sorted by rank and uses (one int), and by recency (`rank.recency_key`) only
    within the groups of equal rank and uses that the caller gets to."""
    candidates: list[tuple[int, str, str, str, int, dict[str, Any]]] = []
    brief_rank = rank.brief_rank
    for rel in rels:
        folder = os.path.join(root, rel)
        try:
            names = [n for n in os.listdir(folder) if n.endswith((".json", ".md")) and n[0] not in "._"]
        except OSError:
            continue
        entries = _entries(folder)
        for name in sorted(names):
            entry = entries.get(name)
            if entry is None:  # dropped in by hand: the next writing command indexes it
                entry = _read(folder, rel, name)
                if entry is None:
                    continue
            mem_id = entry.get("id")
            if mem_id in skip or "archived_at" in entry or not isinstance(mem_id, str):
                continue
            count = entry.get("access_count")
            uses = count if type(count) is int and count > 0 else 0
            if extra:
                found = extra.get(mem_id)
                if found is not None:
                    uses += found.count
            candidates.append((brief_rank(entry) << 48 | uses, rel, name, mem_id, uses, entry))
    candidates.sort(key=itemgetter(0), reverse=True)  # stable: ties keep the folders' order
    start = 0
    while start < len(candidates):
        end, order = start + 1, candidates[start][0]
        while end < len(candidates) and candidates[end][0] == order:
            end += 1
        group = candidates[start:end]
        group.sort(key=_recency, reverse=True)
        for _order, rel, name, mem_id, uses, _entry in group:
            record = _read(os.path.join(root, rel), rel, name)  # the file is the truth
            if record is None or record.get("id") != mem_id or "archived_at" in record:
                continue
            yield {"id": mem_id, "summary": record["summary"], "type": record.get("type"),
                   "subtype": record.get("subtype") or "", "folder": rel, "uses": uses}
        start = end


def _recency(candidate: tuple[int, str, str, str, int, dict[str, Any]]) -> str:
    entry = candidate[5]
    return rank.recency_key(entry.get("updated_at") or entry.get("created_at"))


def _entries(folder: str) -> dict[str, dict[str, Any]]:
    """A folder's `_index.json` entries by file name ({} when missing or unreadable)."""
    try:
        with open(os.path.join(folder, INDEX_NAME), "rb") as handle:
            raw = handle.read()
        if len(raw) > BIG_INDEX:  # orjson parses a big index 3x faster; its import costs 10 ms
            import orjson

            data = orjson.loads(raw)
        else:
            data = json.loads(raw)
    except (OSError, ValueError, RecursionError):
        return {}
    entries = data.get("entries") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        return {}
    return {e["file"]: e for e in entries if isinstance(e, dict) and isinstance(e.get("file"), str)}


def _read(folder: str, rel: str, name: str) -> dict[str, Any] | None:
    """The fields the briefing needs from a memory file, or None when it is not a live
    memory of this folder that can be read (bad files are reported by other commands)."""
    path = os.path.join(folder, name)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not (st.st_mode & 0o170000 == 0o100000) or st.st_size > 10 * 1024 * 1024:
            return None
        raw = os.read(fd, st.st_size + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    data = _decode(raw, name)
    if not isinstance(data, dict) or data.get("id") != name.rsplit(".", 1)[0]:
        return None
    content = data.get("content")
    summary = content.get("summary") if isinstance(content, dict) else None
    scope, _, scope_id = rel.partition("/")
    if not isinstance(summary, str) or data.get("scope", scope) != scope \
            or (scope != "global" and data.get("scope_id", scope_id) != scope_id):
        return None
    return {**{k: data.get(k) for k in ("id", "type", "subtype", "tags", "priority", "created_by", "consent",
                                        "created_at", "updated_at", "access_count")},
            "summary": " ".join(summary.split())[:SUMMARY_CHARS],
            **({"archived_at": data["archived_at"]} if "archived_at" in data else {})}


def _decode(raw: bytes, name: str) -> Any:
    try:
        if name.endswith(".json"):
            return json.loads(raw.decode("utf-8"))
        from memcli.store.model import decode  # Markdown: front matter (YAML), only when met

        return decode(raw, "md")
    except (ValueError, RecursionError, UnicodeDecodeError):
        return None
    except Exception:  # noqa: BLE001 - a YAML oddity in one file never stops a briefing
        return None


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0
