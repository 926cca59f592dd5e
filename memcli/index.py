"""Folder indices (`_index.json`, SPEC 1.2): a derived cache of each folder's memory files.

The files are the truth. An entry is reused only while the file's size and mtime match it;
otherwise the file is read again. `run_hash` (the content hash when the last run covering
the folder finished) and other cached fields survive a rebuild when the content is the same.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import orjson

from memcli import fsops
from memcli.model import Memory, format_ts

INDEX_NAME = "_index.json"
INDEX_VERSION = 1
# Cached copies of record fields: enough to list, filter and plan without reading files.
_RECORD_FIELDS = ("type", "subtype", "tags", "priority", "created_by", "consent", "created_at",
                  "updated_at", "last_accessed", "access_count", "supersedes", "superseded_by",
                  "promoted_to", "promoted_from")
_ARCHIVE_FIELDS = {"archived_at": "archived_at", "reason": "archive_reason",
                   "run_id": "archive_run_id", "from": "archived_from"}
# Fields tied to a content hash: kept only while the content hash is unchanged.
_HASH_BOUND = ("sig", "norm_key")


def entry_for(mem: Memory, old: dict[str, Any] | None = None, archive: bool = False) -> dict[str, Any]:
    """The index entry of a memory read from disk, keeping what the old entry cached."""
    entry: dict[str, Any] = {"id": mem.id, "file": mem.path.name}
    for name in _RECORD_FIELDS:
        entry[name] = mem.data.get(name)
    entry["priority"] = entry["priority"] or "normal"
    entry["tags"] = entry["tags"] or []
    entry["access_count"] = entry["access_count"] or 0
    summary = mem.content.get("summary")
    entry["summary"] = summary[:80] if isinstance(summary, str) else ""  # what `list` shows
    entry.update(size=mem.size, mtime_ns=mem.mtime_ns, content_hash=mem.content_hash)
    if archive:
        entry.update({key: mem.data.get(field) for key, field in _ARCHIVE_FIELDS.items()})
    if old:
        if "run_hash" in old:
            entry["run_hash"] = old["run_hash"]
        if old.get("content_hash") == mem.content_hash:
            entry.update({k: old[k] for k in _HASH_BOUND if k in old})
    return entry


def load(folder: Path) -> dict[str, Any] | None:
    """The folder's index, or None when missing. Raises ValueError when it is unreadable."""
    path = folder / INDEX_NAME
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    data = orjson.loads(raw)  # orjson.JSONDecodeError is a ValueError
    if not isinstance(data, dict) or not isinstance(data.get("entries"), list):
        raise ValueError("not an index (no 'entries' list)")
    return data


def build(scope: str, scope_id: str, entries: list[dict[str, Any]], moment: dt.datetime) -> dict[str, Any]:
    ordered = sorted(entries, key=lambda e: e["id"])
    return {"version": INDEX_VERSION, "scope": scope, "scope_id": scope_id,
            "entry_count": len(ordered), "updated_at": format_ts(moment), "entries": ordered}


def save(folder: Path, index: dict[str, Any]) -> None:
    # Compact: a 10,000-entry index loads in ~60 ms this way, a third more when indented.
    fsops.write_replace(folder / INDEX_NAME, orjson.dumps(index) + b"\n")


def same_entries(index: dict[str, Any] | None, entries: list[dict[str, Any]]) -> bool:
    """Whether writing `entries` would change nothing but the index's own timestamp."""
    if index is None:
        return False
    old = sorted(index.get("entries", []), key=lambda e: str(e.get("id")))
    return old == sorted(entries, key=lambda e: e["id"]) and index.get("entry_count") == len(old)


# ---------------------------------------------------------------- the MinHash cache
# Next to each index, `_minhash.bin` keeps each memory's MinHash signature by content hash,
# so that candidate pairs come without re-reading or re-hashing unchanged memories. It is a
# cache like the index: missing or unreadable, it is rebuilt; it never holds memory text.

SIG_NAME = "_minhash.bin"
_SIG_MAGIC = b"MCSG1"


def load_sigs(folder: Path) -> dict[str, bytes]:
    """content hash -> signature; empty when the cache is missing or unreadable."""
    try:
        raw = (folder / SIG_NAME).read_bytes()
    except OSError:
        return {}
    if not raw.startswith(_SIG_MAGIC) or len(raw) < len(_SIG_MAGIC) + 2:
        return {}
    width = int.from_bytes(raw[5:7], "little")
    row = 32 + width
    body = memoryview(raw)[7:]
    if width == 0 or len(body) % row:
        return {}
    return {bytes(body[i:i + 32]).hex(): bytes(body[i + 32:i + row]) for i in range(0, len(body), row)}


def save_sigs(folder: Path, sigs: dict[str, bytes]) -> None:
    """Write the cache atomically (only signatures of one width are kept)."""
    if not sigs:
        return
    width = len(next(iter(sigs.values())))
    rows = b"".join(bytes.fromhex(h) + s for h, s in sorted(sigs.items()) if len(s) == width)
    fsops.write_replace(folder / SIG_NAME, _SIG_MAGIC + width.to_bytes(2, "little") + rows)


# ---------------------------------------------------------------- the last-run snapshot
# `_lastrun.json` keeps, per file, what the last run covering the folder saw: size, mtime,
# content hash (= run_hash) and block. session_end compares the folder's files against it by
# stat alone, so that it never loads every index of a large store (a tenth of the bytes).

LASTRUN_NAME = "_lastrun.json"


def save_lastrun(folder: Path, entries: list[dict[str, Any]]) -> None:
    rows = [[e["file"], e["size"], e["mtime_ns"], e["content_hash"], e.get("type"), e.get("subtype") or ""]
            for e in sorted(entries, key=lambda e: e["file"])]
    fsops.write_replace(folder / LASTRUN_NAME, orjson.dumps({"version": 1, "rows": rows}))


def load_lastrun(folder: Path) -> dict[str, list[Any]] | None:
    """file name -> [file, size, mtime_ns, content_hash, type, subtype]; None when missing or
    unreadable (the caller then falls back to the index)."""
    try:
        data = orjson.loads((folder / LASTRUN_NAME).read_bytes())
        return {str(row[0]): row for row in data["rows"] if isinstance(row, list) and len(row) == 6}
    except (OSError, ValueError, KeyError, TypeError):
        return None
