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
import re
from itertools import compress, repeat
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
    store), without a parse of each folder index whole or work in Python for each of its
    entries: `_Scan` finds the entries' files and use counts, and those that can rank above
    the rest (or be archived), at C speed; only those, the entries with pending uses, and
    the entries of the (rank, uses) groups the caller gets to are looked at closer. Within a
    group: the most recent first (`rank.recency_key`), then the folders' order."""
    pool: list[Row] = []
    for rel in rels:
        folder = os.path.join(root, rel)
        try:
            listed = os.listdir(folder)
        except OSError:
            continue
        _gather(pool, folder, rel, listed, skip, extra)
    pool.sort(key=itemgetter(0), reverse=True)  # stable: ties keep the folders' order
    start = 0
    while start < len(pool):
        end, order = start + 1, pool[start][0]
        while end < len(pool) and pool[end][0] == order:
            end += 1
        group = pool[start:end]
        keys = _recency_keys(group)
        group = [group[n] for n in sorted(range(len(group)), key=keys.__getitem__, reverse=True)]
        for _order, scan, rel, name, _at, entry, uses in group:
            mem_id = entry.get("id") if entry is not None else scan.id(_at) if scan is not None else None
            record = _read(os.path.join(root, rel), rel, name)  # the file is the truth
            if record is None or record.get("id") != mem_id or "archived_at" in record:
                continue
            yield {"id": mem_id, "summary": record["summary"], "type": record.get("type"),
                   "subtype": record.get("subtype") or "", "folder": rel, "uses": uses}
        start = end


def _recency(candidate: Row) -> str:
    _order, scan, _rel, _name, at, entry, _uses = candidate
    if entry is None and scan is not None:
        return rank.recency_key(_time_value(scan.updated[at]) or _time_value(scan.created[at]))
    entry = entry or {}
    return rank.recency_key(entry.get("updated_at") or entry.get("created_at"))


# A timestamp as the store writes it, still JSON-quoted in the index's bytes, whose recency
# key is its first 19 characters: `rank.recency_key`'s own fast case (days to the 28th),
# and the days 29-31 of the months that have them (what `recency_key` builds a datetime
# for gives the same; February 29 and the year 0 are left to it). Bytes `\d` is ASCII.
_CANONICAL_RAW = re.compile(rb'"(?:\d{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|1\d|2[0-8])'
                            rb'|(?!0000)\d{4}-(?:(?:0[13-9]|1[0-2])-(?:29|30)|(?:0[13578]|1[02])-31))'
                            rb'T(?:[01]\d|2[0-3]):[0-5]\d:[0-5]\dZ"')


def _recency_keys(group: list[Row]) -> list[str]:
    """`_recency` of each row: taken from the index's bytes at once for the usual form (a
    briefing without a search index orders thousands of rows of one rank and use count):
    the keys are cut out of the group's raw values joined by newlines by two replaces and a
    split, and each value is checked by a map, not a call per row."""
    keys: list[str] = [""] * len(group)
    scanned: list[int] = []
    raws: list[bytes] = []
    for n, row in enumerate(group):
        scan, at, entry = row[1], row[4], row[5]
        if entry is None and scan is not None:
            raw = scan.updated[at]
            raws.append(scan.created[at] if raw == b"null" else raw)
            scanned.append(n)
        else:
            keys[n] = _recency(row)
    # every key cut out at once (right for the usual form; any other is worked out again)
    cut = b"\n".join(raws).replace(b'Z"', b"").replace(b'"', b"").decode(errors="replace").split("\n")
    if len(cut) != len(raws):  # (a raw value with a newline in it: none is cut out at once)
        cut = [raw[1:20].decode(errors="replace") for raw in raws]
    for n, key, usual in zip(scanned, cut, map(_CANONICAL_RAW.fullmatch, raws), strict=True):
        keys[n] = key if usual else _recency(group[n])
    return keys


Row = tuple[int, "_Scan | None", str, str, int, "dict[str, Any] | None", int]


def _gather(pool: list[Row], folder: str, rel: str, listed: list[str], skip: set[str],
            extra: dict[str, Pending]) -> None:
    """The candidates of one folder (`listed`: its directory listing), in the order of its
    file names: (order, scan, rel, name, entry number, entry or None, uses). Order is
    rank << 48 | uses."""
    raw = _index_bytes(folder)
    scan = _Scan.of(raw) if raw else None
    if scan is None:
        entries = _entries_of(raw)
        for name in sorted(filter(_is_memory_name, listed)):
            row = _row(folder, rel, name, entries.get(name), skip, extra)
            if row is not None:
                pool.append(row)
        return
    closer = scan.marked  # entries looked at closer: marked, with pending uses, or to skip
    if extra or skip:
        closer = closer | scan.numbers_of({*extra, *skip})
    files = scan.files
    present, indexed = set(listed), set(files)
    if len(indexed) == len(files) and indexed <= present and _sorted_memory_names(files) \
            and not any(map(_is_memory_name, present - indexed)):
        # the usual case, the index lists exactly the folder's memory files: rows at C speed
        count = len(files)
        rows: list[Row | None] = list(zip(scan.counts, repeat(scan, count), repeat(rel, count), files,
                                          range(count), repeat(None, count), scan.counts, strict=True))
        for at in closer:
            rows[at] = _row(folder, rel, files[at], scan.fields(at), skip, extra)
        pool.extend(filter(None, rows))  # (a row is a tuple, never empty)
        return
    where = {file: n for n, file in enumerate(files)}
    for name in sorted(filter(_is_memory_name, listed)):
        number = where.get(name)
        if number is not None and number not in closer:  # ranks 0: its uses are its count
            pool.append((scan.counts[number], scan, rel, name, number, None, scan.counts[number]))
            continue
        row = _row(folder, rel, name, scan.fields(number) if number is not None else None, skip, extra)
        if row is not None:
            pool.append(row)


def _is_memory_name(name: str) -> bool:
    return name.endswith((".json", ".md")) and name[0] not in "._"


def _sorted_memory_names(files: list[str]) -> bool:
    """Whether every name is a memory file's (`_is_memory_name`) and they come sorted: for
    10,000 names at once, by string searches over the names joined by newlines (the names
    of a `_Scan` hold none: a raw newline is not valid JSON), not a call per name."""
    if not files or files != sorted(files):
        return not files
    joined = "\n" + "\n".join(files) + "\n"
    return "\n." not in joined and "\n_" not in joined and "\n\n" not in joined \
        and joined.count(".json\n") + joined.count(".md\n") == len(files)


def _row(folder: str, rel: str, name: str, entry: dict[str, Any] | None, skip: set[str],
         extra: dict[str, Pending]) -> Row | None:
    """The row of a memory known by its entry (parsed), or by its file when it has none
    (dropped in by hand, or its entry unreadable); None when it is not a candidate."""
    if entry is None:
        entry = _read(folder, rel, name)
        if entry is None:
            return None
    mem_id = entry.get("id")
    if mem_id in skip or "archived_at" in entry or not isinstance(mem_id, str):
        return None
    found = extra.get(mem_id)
    uses = _count(entry.get("access_count")) + (found.count if found is not None else 0)
    return (rank.brief_rank(entry) << 48 | uses, None, rel, name, 0, entry, uses)


class _Scan:
    """A folder index in the layout the store writes (`memcli.store.index.entry_for`:
    compact, each entry opening with id, file, the record fields in their order, then the
    use count), read by one regular expression into columns, not parsed entry by entry.
    An entry is "marked" when a value that can raise its rank (`rank.brief_rank`: priority
    critical, a permanent or protected tag, subtype decision, created by USER) is there: its
    fields are decoded from the columns and it is ranked exactly; any other ranks 0 and its
    uses are its count. Anything unexpected (another layout, a value of another type, an
    escaped character): None, and the index is parsed whole. (An entry marked archived is
    left to the file, read before anything is shown.)"""

    __slots__ = ("columns", "files", "counts", "created", "updated", "marked")

    def __init__(self, columns: list[tuple[bytes, ...]], marked: set[int]) -> None:
        self.columns = columns
        self.files = list(map(bytes.decode, columns[1]))
        self.counts = list(map(int, columns[10]))
        self.created, self.updated = columns[8], columns[9]
        self.marked = marked

    @classmethod
    def of(cls, raw: bytes) -> _Scan | None:
        """The scan of a folder index's bytes, or None when they are not in the layout.
        (An entry the expression skips is not lost: its file is then not among the scan's
        files, and the folder is listed name by name.)"""
        at = raw.find(_ENTRIES_KEY)
        if at < 0:
            return None
        try:
            header = json.loads(raw[:at] + b"}")
            count = header.get("entry_count") if isinstance(header, dict) else None
            found = _ENTRY.findall(raw, at)
            if not count or count != len(found):
                return None
            columns = list(zip(*found, strict=True))
            b"".join(columns[0]).decode()  # the ids are decoded when used: valid UTF-8 all
            marked: set[int] = set()
            for col, hit in ((3, _is_decision), (4, _has_keep_tag), (5, _is_critical), (6, _is_user)):
                values = set(columns[col])  # (few distinct values)
                if col == 4 and any(b"\\" in value for value in values) \
                        or col != 4 and not all(map(_PLAIN.fullmatch, values)):
                    return None  # a value where a mark is looked for not written plainly: parsed whole
                if any(hit(value) for value in values):
                    marked.update(n for n, value in enumerate(columns[col]) if hit(value))
            return cls(columns, marked)
        except (ValueError, UnicodeDecodeError):
            return None

    def id(self, n: int) -> str:
        return self.columns[0][n].decode()

    def numbers_of(self, ids: set[str]) -> set[int]:
        """The entry numbers of these ids (a few: pending uses, ids to skip)."""
        wanted = {mem_id.encode() for mem_id in ids}
        column = self.columns[0]
        return set() if wanted.isdisjoint(column) else \
            set(compress(range(len(column)), map(wanted.__contains__, column)))

    def fields(self, n: int) -> dict[str, Any] | None:
        """What the briefing needs of entry `n` (the fields `rank.brief_rank`, the uses and
        the recency read), decoded from its columns; None when a value does not decode."""
        c = self.columns
        try:
            return {"id": self.id(n), "file": self.files[n], "access_count": self.counts[n],
                    **{name: json.loads(c[col][n]) for col, name in _FIELD_COLUMNS}}
        except ValueError:
            return None


_FIELD_COLUMNS = ((2, "type"), (3, "subtype"), (4, "tags"), (5, "priority"), (6, "created_by"),
                  (7, "consent"), (8, "created_at"), (9, "updated_at"))


def _is_decision(value: bytes) -> bool:
    return value == b'"decision"'


def _has_keep_tag(value: bytes) -> bool:
    return b'"permanent"' in value or b'"protected"' in value


def _is_critical(value: bytes) -> bool:
    return value == b'"critical"'


def _is_user(value: bytes) -> bool:
    return value == b'"USER"'


_ENTRIES_KEY = b',"entries":['
# A field's value, JSON as written, up to the comma after it: a value holding a comma (or a
# key out of order) makes the entry not match, and the index is parsed whole. (`[^,]*` is
# the regular expression engine's fastest loop: a third less time than matching each value
# as null or a string without escapes, which the values are then decoded to; escapes in the
# values that make marks send the index to the parse, see `_Scan.of`.)
_VALUE = rb'([^,]*)'
_PLAIN = re.compile(rb'null|"[^"\\]*"')
_ENTRY = re.compile(rb'\{"id":"([^"\\]*)","file":"([^"\\]*)","type":' + _VALUE + rb',"subtype":' + _VALUE
                    + rb',"tags":(\[[^\]]*\]),"priority":' + _VALUE + rb',"created_by":' + _VALUE
                    + rb',"consent":' + _VALUE + rb',"created_at":' + _VALUE + rb',"updated_at":' + _VALUE
                    + rb',"last_accessed":[^,]*,"access_count":(\d+)[,}]')


def _time_value(raw: bytes) -> Any:
    """A timestamp column's value, decoded (None when it does not decode)."""
    if raw == b"null":
        return None
    if raw[:1] == b'"' and raw[-1:] == b'"' and b"\\" not in raw and raw.count(b'"') == 2:
        return raw[1:-1].decode(errors="replace")  # a string without escapes (the usual)
    try:
        return json.loads(raw)
    except ValueError:
        return None


def _index_bytes(folder: str) -> bytes:
    try:
        with open(os.path.join(folder, INDEX_NAME), "rb") as handle:
            return handle.read()
    except OSError:
        return b""


def _entries_of(raw: bytes) -> dict[str, dict[str, Any]]:
    """A folder index's entries by file name, parsed whole ({} when empty or unreadable)."""
    if not raw:
        return {}
    try:
        if len(raw) > BIG_INDEX:  # orjson parses a big index 3x faster; its import costs 10 ms
            import orjson

            data = orjson.loads(raw)
        else:
            data = json.loads(raw)
    except (ValueError, RecursionError):
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
        from memcli.store.formats import decode  # Markdown: front matter (YAML), only when met

        return decode(raw, "md")
    except (ValueError, RecursionError, UnicodeDecodeError):
        return None
    except Exception:  # noqa: BLE001 - a YAML oddity in one file never stops a briefing
        return None


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0
