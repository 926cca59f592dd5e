"""Git merge drivers for memcli's own files (SPEC 13). Git calls `memcli merge-driver KIND
BASE OURS THEIRS PATH`; the driver writes the merged file over OURS and exits 0, or exits 1
(git then reports a conflict, which `memcli sync` resolves from the three versions).

- `ops`: the log is united by run id, the review queue by item (its pair, or its undo
  decision), the state by key. Three-way: what one side removed since the base stays
  removed. Every choice depends on the versions alone, never on which side is "ours", so two
  clones that merge the same two histories write the same bytes.
- `index`: a folder index is a cache of its folder; its entries are united by file, those
  one side removed dropped. `memcli sync` rebuilds every index from the merged files after
  the merge anyway (git calls a driver before the merged files are on disk).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from memcli.consolidate import review
from memcli.store import log, opsfiles

Doc = dict[str, Any]


def _bytes_key(item: Any) -> bytes:
    return orjson.dumps(item, option=orjson.OPT_SORT_KEYS)


def unite(base: list[Any], ours: list[Any], theirs: list[Any], key: Callable[[Any], str],
          pick: Callable[[Any, Any], Any]) -> list[Any]:
    """Items of both sides by key; an item in the base that one side dropped stays dropped;
    one changed on both sides is `pick(a, b)` (which must not depend on the order)."""
    base_keys = {key(i) for i in base}
    ours_by = {key(i): i for i in ours}
    theirs_by = {key(i): i for i in theirs}
    out: dict[str, Any] = {}
    for k in list(ours_by) + [k for k in theirs_by if k not in ours_by]:
        a, b = ours_by.get(k), theirs_by.get(k)
        if a is None or b is None:
            if k in base_keys:
                continue  # one side removed it
            out[k] = a if a is not None else b
        else:
            out[k] = a if a == b else pick(a, b)
    return list(out.values())


def _smaller(a: Any, b: Any) -> Any:
    return min(a, b, key=_bytes_key)


def merge_log(base: Doc, ours: Doc, theirs: Doc) -> Doc:
    """Every run of both sides once, in time order (a run logged on both sides, the same run
    decided in two clones, keeps one entry)."""
    entries = unite(_items(base, "entries"), _items(ours, "entries"), _items(theirs, "entries"),
                    lambda e: str(e.get("run_id")), _smaller)
    entries.sort(key=lambda e: (str(e.get("timestamp", "")), str(e.get("run_id"))))
    return {**theirs, **ours, "entries": entries}


def _item_pick(a: Doc, b: Doc) -> Doc:
    """The same review item on both sides: a decided one wins over an open one."""
    a_open, b_open = a.get("status", "open") == "open", b.get("status", "open") == "open"
    if a_open != b_open:
        return b if a_open else a
    return _smaller(a, b)


def merge_queue(base: Doc, ours: Doc, theirs: Doc) -> Doc:
    """Review items united by what they ask (`review.item_key`); ids two clones gave to
    different items are made distinct again (the later question gets a new number)."""
    items = unite(_items(base, "items"), _items(ours, "items"), _items(theirs, "items"),
                  review.item_key, _item_pick)
    items.sort(key=lambda i: (str(i.get("created_at", "")), review.item_key(i)))
    taken: set[str] = set()
    numbers = [_number(i.get("id")) for i in items]
    top = max([n for n in numbers if n is not None], default=0)
    for item in items:
        if item.get("id") in taken or not isinstance(item.get("id"), str):
            top += 1
            item["id"] = f"rev_{top:04d}"
        taken.add(item["id"])
    return {**theirs, **ours, "items": items}


def _number(value: Any) -> int | None:
    if isinstance(value, str) and value.startswith("rev_") and value[4:].isdigit():
        return int(value[4:])
    return None


def merge_state(base: Doc, ours: Doc, theirs: Doc) -> Doc:
    """Last runs: the later per trigger; flagged pairs: united (those looked at by either
    side dropped); any other key: the side that changed it (both: the smaller, for order)."""
    out: Doc = {}
    for key in sorted(set(ours) | set(theirs)):
        a, b, o = ours.get(key), theirs.get(key), base.get(key)
        if key == "runs" and isinstance(a, dict) and isinstance(b, dict):
            out[key] = {t: opsfiles.later_run(a.get(t), b.get(t)) for t in sorted(set(a) | set(b))}
        elif key == "last_success":
            out[key] = opsfiles.later_run(a, b)
        elif key == "flagged" and isinstance(a, list) and isinstance(b, list):
            pair = lambda f: review.pair_key(f.get("ids", [])) if isinstance(f, dict) else str(f)  # noqa: E731
            out[key] = sorted(unite(o if isinstance(o, list) else [], a, b, pair, _smaller), key=pair)
        elif key not in theirs:
            if key not in base or a != o:
                out[key] = a
        elif key not in ours:
            if key not in base or b != o:
                out[key] = b
        else:
            out[key] = b if a == o else a if b == o or a == b else _smaller(a, b)
    return out


def merge_index(base: Doc, ours: Doc, theirs: Doc) -> Doc:
    """A folder index: entries united by file (one side's removal kept); `sync` rebuilds it
    from the merged files right after."""
    entries = unite(_items(base, "entries"), _items(ours, "entries"), _items(theirs, "entries"),
                    lambda e: str(e.get("file")), _smaller)
    entries.sort(key=lambda e: (str(e.get("id")), str(e.get("file"))))
    updated = max(str(ours.get("updated_at", "")), str(theirs.get("updated_at", "")))
    return {**theirs, **ours, "entry_count": len(entries), "updated_at": updated, "entries": entries}


_OPS = {"consolidation-log.json": merge_log, "review-queue.json": merge_queue, "state.json": merge_state}


def merge_bytes(kind: str, name: str, base: bytes, ours: bytes, theirs: bytes) -> bytes:
    """The merged file; ValueError when a version is not a file of that kind."""
    docs = [_load(raw) for raw in (base, ours, theirs)]
    if kind == "index":
        return orjson.dumps(merge_index(*docs)) + b"\n"
    merge = merge_log if log.MONTH_FILE.match(name) or name == f"{log.UNDATED}.json" else _OPS.get(name)
    if merge is None:
        raise ValueError(f"{name} is not one of memcli's ops files")
    for doc in docs[1:]:
        problem = opsfiles.shape_problem("consolidation-log.json" if merge is merge_log else name, doc)
        if problem:
            raise ValueError(problem)
    return orjson.dumps(merge(*docs), option=orjson.OPT_INDENT_2) + b"\n"


def _load(raw: bytes) -> Doc:
    if not raw.strip():
        return {}  # no base (both sides added the file)
    data = orjson.loads(raw)
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    return data


def _items(doc: Doc, key: str) -> list[Any]:
    value = doc.get(key, [])
    return [i for i in value if isinstance(i, dict)] if isinstance(value, list) else []


def run_driver(argv: list[str]) -> int:
    """`memcli merge-driver KIND BASE OURS THEIRS PATH` as git calls it: 0 merged, 1 not."""
    if len(argv) != 5 or argv[0] not in ("index", "ops"):
        sys.stderr.write("usage: memcli merge-driver index|ops BASE OURS THEIRS PATH\n")
        return 2
    kind, base, ours, theirs, path = argv
    try:
        raw = [Path(p).read_bytes() for p in (base, ours, theirs)]
        merged = merge_bytes(kind, Path(path).name, *raw)
        Path(ours).write_bytes(merged)  # git's own temporary file, outside any store folder
    except (OSError, ValueError) as exc:
        sys.stderr.write(f"memcli merge-driver: {path}: {exc}; left to git as a conflict\n")
        return 1
    return 0
