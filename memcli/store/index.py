"""Folder indices (`_index.json`, SPEC 1.2): a derived cache of each folder's memory files.

The files are the truth. An entry is reused only while the file's size and mtime match it;
otherwise the file is read again. `run_hash` (the content hash when the last run covering
the folder finished) and other cached fields survive a rebuild when the content is the same.
"""

from __future__ import annotations

import bisect
import datetime as dt
import os
import re
import sys
from array import array
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from memcli.store import fsops, indexmark
from memcli.store.model import Memory, format_ts

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
    entry: dict[str, Any] = {"id": mem.id, "file": mem.name}  # (its path.name, without making the path)
    for name in _RECORD_FIELDS:
        entry[name] = mem.data.get(name)
    entry["priority"] = entry["priority"] or "normal"
    entry["tags"] = entry["tags"] or []
    entry["access_count"] = entry["access_count"] or 0
    summary = mem.content.get("summary")
    entry["summary"] = summary[:80] if isinstance(summary, str) else ""  # what `list` shows
    entry.update(size=mem.size, mtime_ns=mem.mtime_ns, content_hash=mem.content_hash)
    # Cached facts about the content, so that a run can plan a memory from its entry alone:
    # the length of content.details (rule 3.2) and of the normalised text (candidate scoring).
    # Store.scan trusts an entry only when it has both. And the length of the string the
    # scorer compares (its tokens sorted, joined by single spaces: `similar.sorted_tokens`),
    # so that pair search drops pairs by length before reading their texts (optional).
    text = _content_text(mem.content)
    entry.update(details_len=mem.details_len(), text_len=len(text), sort_len=_sorted_len(text))
    if "archived_at" in mem.data and not archive:
        entry["archived_at"] = mem.data["archived_at"]  # a live record marked archived takes part in no rule
    if archive:
        entry.update({key: mem.data.get(field) for key, field in _ARCHIVE_FIELDS.items()})
        _intern_values(entry, _ARCHIVE_FIELDS)
    # values repeated from entry to entry, one object each (a run's apply indexes the tens of
    # thousands of memories it archived, every one with the same stamp, reason and run id)
    _intern_values(entry, _REPEATED)
    for n, tag in enumerate(entry["tags"] if type(entry["tags"]) is list else ()):
        if type(tag) is str:
            entry["tags"][n] = sys.intern(tag)
    if entry["updated_at"] == entry["created_at"]:
        entry["updated_at"] = entry["created_at"]
    if old:
        if "run_hash" in old:
            entry["run_hash"] = old["run_hash"]
        if old.get("content_hash") == mem.content_hash:
            entry.update({k: old[k] for k in _HASH_BOUND if k in old})
    return entry


def _intern_values(entry: dict[str, Any], keys: Iterable[str]) -> None:
    for key in keys:
        value = entry.get(key)
        if type(value) is str:
            entry[key] = sys.intern(value)


def _content_text(content: dict[str, Any]) -> str:
    from memcli.consolidate.rules import (
        content_text,  # rapidfuzz: not for every command that imports the index
    )

    return content_text(content)


def _sorted_len(text: str) -> int:
    from memcli.consolidate.rules import sorted_len

    return sorted_len(text)


def load(folder: Path) -> dict[str, Any] | None:
    """The folder's index, or None when missing. Raises ValueError when it is unreadable."""
    path = folder / INDEX_NAME
    try:
        fd = fsops.open_regular(path)  # never a link, never a FIFO (an OSError)
    except FileNotFoundError:
        return None
    with os.fdopen(fd, "rb", buffering=0) as handle:
        # a large index read and parsed a batch at a time: never whole in memory as bytes either
        data = _by_batches(iter(lambda: handle.read(BATCH_BYTES), b"")) \
            if os.fstat(fd).st_size >= BATCH_FROM else None
        if data is None:
            handle.seek(0)
            data = _whole(handle.readall())  # orjson.JSONDecodeError is a ValueError
    if not isinstance(data, dict) or not isinstance(data.get("entries"), list):
        raise ValueError("not an index (no 'entries' list)")
    if not all([type(e) is dict for e in data["entries"]]):
        raise ValueError("not an index (an entry that is not an object)")
    return data


# A large index is parsed a batch of entries at a time: orjson builds a whole document before
# it makes one Python object, which for a 56,000-entry index (37 MB) held 80 MB above the
# entries themselves, and a run's peak memory is set there (and again when its apply reads the
# index back). Below this size the whole parse costs nothing worth saving.
BATCH_FROM = 1 << 20
BATCH_BYTES = 1 << 19  # about 700 entries a batch
# Values that repeat from entry to entry (a folder's few types, subtypes, tags and authors):
# one string object each for the whole index, not one per entry.
_REPEATED = ("type", "subtype", "priority", "created_by")


def parsed(raw: bytes) -> Any:
    """`orjson.loads(raw)` of an index, with the same result (or the same error): an index
    in the layout `save` writes (compact, entries last) and over `BATCH_FROM` bytes is parsed
    by batches of whole entries, anything else whole. The values that repeat across entries
    (`_REPEATED`, tags, an `updated_at` equal to `created_at`) are then one object each."""
    data = None
    if len(raw) >= BATCH_FROM:
        view = memoryview(raw)
        data = _by_batches(view[at:at + BATCH_BYTES] for at in range(0, len(raw), BATCH_BYTES))
    return _whole(raw) if data is None else data


def _whole(raw: bytes) -> Any:
    data = orjson.loads(raw)
    if isinstance(data, dict) and isinstance(data.get("entries"), list):
        _share_repeated(data["entries"], {})
    return data


def _by_batches(chunks: Iterable[bytes | memoryview]) -> dict[str, Any] | None:
    """The index whose bytes come in `chunks`, parsed header first, then its entries a batch
    at a time, each batch cut just before a `,{"id":"` (outside any string in valid JSON: a
    quote inside one is escaped). Every batch parsing as an array means the whole is valid
    JSON and the same entries, in order; None when any part does not parse (the caller then
    parses the whole, which gives the error, or the same value, as before)."""
    pending = bytearray()  # bytes read, not parsed yet
    header: Any = None
    entries: list[Any] = []
    shared: dict[str, str] = {}
    for chunk in chunks:
        pending += chunk
        if header is None:
            at = pending.find(_ENTRIES_KEY)  # (the first one: `pending` holds all bytes so far)
            if at < 0:
                continue
            try:
                header = orjson.loads(bytes(pending[:at]) + b"}")
            except ValueError:
                return None
            if not isinstance(header, dict):
                return None
            del pending[:at + len(_ENTRIES_KEY)]
        cut = pending.rfind(_BATCH_CUT)
        if cut > 0 and not _batch_into(entries, pending[:cut], shared):
            return None
        if cut > 0:
            del pending[:cut + 1]  # (past the comma)
    if header is None or not pending.endswith(b"]}\n"):
        return None
    if len(pending) > 3 and not _batch_into(entries, pending[:-3], shared):
        return None
    header["entries"] = entries  # (a key `entries` earlier in the header: the last one wins, as whole)
    return header  # type: ignore[no-any-return]


def _batch_into(entries: list[Any], batch: bytearray, shared: dict[str, str]) -> bool:
    """Parse entries separated by commas and add them to `entries`; False when they do not parse."""
    try:
        part = orjson.loads(b"[" + batch + b"]")
    except ValueError:
        return False
    if not isinstance(part, list):
        return False
    _share_repeated(part, shared)
    entries += part
    return True


def _share_repeated(entries: list[Any], shared: dict[str, str]) -> None:
    """Make equal repeated values of the entries one object (`shared`: value -> the object)."""
    intern = shared.setdefault
    for entry in entries:
        if type(entry) is not dict:
            continue
        for key in _REPEATED:
            value = entry.get(key)
            if type(value) is str:
                entry[key] = intern(value, value)
        tags = entry.get("tags")
        if type(tags) is list:
            for n, tag in enumerate(tags):
                if type(tag) is str:
                    tags[n] = intern(tag, tag)
        created = entry.get("created_at")
        if type(created) is str and entry.get("updated_at") == created:
            entry["updated_at"] = created


def build(scope: str, scope_id: str, entries: list[dict[str, Any]], moment: dt.datetime) -> dict[str, Any]:
    ordered = sorted(entries, key=lambda e: e["id"])
    return {"version": INDEX_VERSION, "scope": scope, "scope_id": scope_id,
            "entry_count": len(ordered), "updated_at": format_ts(moment), "entries": ordered}


def save(folder: Path, index: dict[str, Any]) -> None:
    # Compact: a 10,000-entry index loads in ~60 ms this way, a third more when indented.
    # the newline by orjson: one copy of the bytes, not two (a 35,000-entry index is 28 MB)
    entries = index.get("entries")
    if type(entries) is list and len(entries) > SAVE_BATCH and next(reversed(index)) == "entries":
        written = [0]

        def counted() -> Iterator[bytes | memoryview]:
            for piece in _saved_pieces(index, entries):
                written[0] += len(piece)
                yield piece

        fsops.write_replace(folder / INDEX_NAME, counted())
        size = written[0]
    else:
        raw = orjson.dumps(index, option=orjson.OPT_APPEND_NEWLINE)
        fsops.write_replace(folder / INDEX_NAME, raw)
        size = len(raw)
    indexmark.remember(folder, str(index.get("scope")), str(index.get("scope_id")), size,
                       len(index["entries"]))


SAVE_BATCH = 1000  # entries written a batch at a time past this many (see `_saved_pieces`)


def _saved_pieces(index: dict[str, Any], entries: list[Any]) -> Iterator[bytes | memoryview]:
    """The bytes of `orjson.dumps(index)` plus a newline, for an index whose last key is its
    entries, made and written a batch of entries at a time: never whole in memory (37 MB for a
    folder of 56,000 memories, written while a run's apply holds its plan)."""
    head = orjson.dumps({key: value for key, value in index.items() if key != "entries"})
    yield head[:-1] + (b',"entries":[' if len(head) > 2 else b'"entries":[')
    for at in range(0, len(entries), SAVE_BATCH):
        part = orjson.dumps(entries[at:at + SAVE_BATCH])
        yield (b"," if at else b"") + part[1:-1]
    yield b"]}\n"


def same_entries(index: dict[str, Any] | None, entries: list[dict[str, Any]]) -> bool:
    """Whether writing `entries` would change nothing but the index's own timestamp."""
    if index is None:
        return False
    old = sorted(index.get("entries", []), key=lambda e: str(e.get("id")))
    return old == sorted(entries, key=lambda e: e["id"]) and index.get("entry_count") == len(old)


# ---------------------------------------------------------------- updating a few entries
# A run that knows exactly which files of a folder it changed or read (session_end) updates
# only those entries: it cuts them out of the index bytes and puts the new ones in, instead of
# parsing and re-serialising every entry of a 10,000-entry index (several MB). The result is
# byte for byte what `save(build(...))` writes for the same entries; an index in any other
# layout (written by hand, by another tool) is not touched here and the caller rebuilds it.

_ENTRY_HEAD = re.compile(rb'\{"id":"([^"\\]*)","file":"([^"\\]*)"')  # how `entry_for` starts an entry
_ENTRY_START = b'{"id":"'  # found at memchr speed
_ENTRIES_KEY = b',"entries":['
_BATCH_CUT = b"," + _ENTRY_START  # where a batch of entries may end (see `_by_batches`)


def splice(folder: Path, scope: str, scope_id: str, moment: dt.datetime,
           update: Callable[[str, dict[str, Any] | None], dict[str, Any] | None],
           files: list[str]) -> bool:
    """Replace the entries of `files` (names) with `update(name, old entry or None)`, None
    meaning "no entry". False, with nothing written, when the index could not be spliced."""
    try:
        raw, st = fsops.read_bytes_stat(folder / INDEX_NAME)
    except OSError:
        return False
    known = indexmark.known_count(folder, scope, scope_id, st)  # spares counting a large index
    entries = (_Entries.of(raw, known) if known is not None else None) or _Entries.of(raw)
    if entries is None:
        return False
    try:
        units, count = _spliced(entries, update, files)
    except ValueError:  # entries not in the layout `save` writes after all
        return False
    size = _write_spliced(folder, scope, scope_id, moment, units, count)
    indexmark.remember(folder, scope, scope_id, size, count)
    return True


def _spliced(entries: _Entries, update: Callable[[str, dict[str, Any] | None], dict[str, Any] | None],
             files: list[str]) -> tuple[list[bytes | memoryview], int]:
    raw = entries.raw
    view = memoryview(raw)  # the unchanged runs as views: no copy of a 5-10 MB index
    replaced: dict[int, bytes] = {}  # by the entry's offset in `raw`
    added: dict[int, list[tuple[tuple[bytes, bytes], bytes]]] = {}  # by the offset they go before
    for name in dict.fromkeys(files):
        at = entries.find(name)
        new = update(name, orjson.loads(entries.text(at)) if at is not None else None)
        if at is not None:
            replaced[at] = b""  # dropped, or put back in place just below when its key is the same
            if new is not None and str(new["id"]).encode() == entries.key(at)[0]:
                replaced[at] = orjson.dumps(new)
                continue
        if new is not None:
            key = (str(new["id"]).encode(), name.encode())
            added.setdefault(entries.place(key), []).append((key, orjson.dumps(new)))
    end = entries.end
    units: list[bytes | memoryview] = []  # an unchanged run of entries is one slice, its commas included
    done = entries.first  # where the entries not yet copied start
    for at in sorted(set(replaced) | set(added)):
        if at > done:
            units.append(view[done:at - 1 if at < end else end])  # (without the comma before `at`)
        units += [part for _, part in sorted(added.get(at, []))]
        done = at
        if at in replaced:
            units += [replaced[at]] if replaced[at] else []
            done = entries.stop(at) + 1
    if done < end:
        units.append(view[done:end])
    count = entries.count + sum(map(len, added.values())) - sum(1 for part in replaced.values() if not part)
    return units, count


class _Entries:
    """The entries of an index's bytes, each known by the offset where it starts; found by a
    binary search over the bytes (entries are sorted by their (id, file) key), so a splice
    looks at a few dozen entries of a 10,000-entry index, not at every one."""

    def __init__(self, raw: bytes, first: int, end: int, count: int) -> None:
        self.raw, self.first, self.end, self.count = raw, first, end, count

    @classmethod
    def of(cls, raw: bytes, known: int | None = None) -> _Entries | None:
        """The entries of an index in the layout `save` writes (compact, entries last, each
        starting with its id and file); None for any other layout. The entries are taken to
        be sorted, as `save` and `splice` leave them: an index edited by hand into another
        order is only as wrong after a splice as before it (doctor reports it). `known`:
        how many entries these very bytes hold (`indexmark`), not counted again."""
        at = raw.find(_ENTRIES_KEY)
        if at < 0 or not raw.endswith(b"]}\n"):
            return None
        try:
            header = orjson.loads(raw[:at] + b"}")
        except ValueError:
            return None
        first, end = at + len(_ENTRIES_KEY), len(raw) - 3
        # (inside a JSON string, its quotes are escaped)
        count = raw.count(_ENTRY_START, first, end) if known is None else known
        if header.get("version") != INDEX_VERSION or header.get("entry_count") != count or (
                count and not raw.startswith(_ENTRY_START, first)) or (not count and first != end):
            return None
        return cls(raw, first, end, count)

    def key(self, at: int) -> tuple[bytes, bytes]:
        match = _ENTRY_HEAD.match(self.raw, at)
        if match is None:
            raise ValueError("index entry without an id and a file")
        return match.group(1), match.group(2)

    def next(self, at: int) -> int:
        """Where the entry after the one at `at` starts (`end` after the last)."""
        found = self.raw.find(_ENTRY_START, at + 1, self.end)
        return self.end if found < 0 else found

    def stop(self, at: int) -> int:
        """Where the entry at `at` ends (its comma, or `end`)."""
        following = self.next(at)
        if following < self.end and self.raw[following - 1] != 0x2C:
            raise ValueError("index entries not separated by a comma")
        return following - 1 if following < self.end else self.end

    def text(self, at: int) -> bytes:
        return self.raw[at:self.stop(at)]

    def place(self, key: tuple[bytes, bytes]) -> int:
        """Where an entry with this key goes: the offset of the first entry whose key is not
        smaller (`end` when none). `low` is always an entry's start, `high` one or `end`."""
        low, high = self.first, self.end
        while low < high:
            probe = self.raw.find(_ENTRY_START, (low + high) // 2, high)
            if probe < 0:  # no entry starts in the upper half: step from `low`
                probe = low
            if self.key(probe) < key:
                low = min(self.next(probe), high)
            else:
                high = probe
        return low

    def find(self, name: str) -> int | None:
        """The entry of file `name`: found from its id (the name up to `.` or, in archive/, `@`),
        then among the entries of that id."""
        file = name.encode()
        mem_id = file.split(b"@")[0].rsplit(b".", 1)[0]
        at = self.place((mem_id, b""))
        while at < self.end and self.key(at)[0] == mem_id:
            if self.key(at)[1] == file:
                return at
            at = self.next(at)
        return None


def _write_spliced(folder: Path, scope: str, scope_id: str, moment: dt.datetime,
                   units: list[bytes | memoryview], count: int) -> int:
    """Write the spliced index; returns its size in bytes."""
    header = orjson.dumps({"version": INDEX_VERSION, "scope": scope, "scope_id": scope_id,
                           "entry_count": count, "updated_at": format_ts(moment)})
    # written as pieces: the unchanged runs are slices of a 5-10 MB index, and joining them
    # (then adding head and tail) copied the whole index three times over
    head = header[:-1] + _ENTRIES_KEY
    fsops.write_replace(folder / INDEX_NAME, _pieces(head, units, b"]}\n"))
    return len(head) + sum(map(len, units)) + max(len(units) - 1, 0) + 3


def _pieces(head: bytes, units: list[bytes | memoryview], tail: bytes) -> Iterator[bytes | memoryview]:
    """head, the units separated by commas, tail: `head + b",".join(units) + tail` in pieces."""
    yield head
    for n, unit in enumerate(units):
        if n:
            yield b","
        yield unit
    yield tail


# ---------------------------------------------------------------- the MinHash cache
# Next to each index, `_minhash.bin` keeps each memory's MinHash signature by content hash,
# so that candidate pairs come without re-reading or re-hashing unchanged memories. It is a
# cache like the index: missing or unreadable, it is rebuilt; it never holds memory text.

SIG_NAME = "_minhash.bin"
# The header names the kind of signature (memcli.consolidate.candidates.SIGNATURE_KIND): a
# cache of another kind is not read, and is rewritten whole (MCSG1: shingles of sorted tokens;
# MCSG2: shingles within tokens).
_SIG_MAGIC = b"MCSG2"


class SigCache:
    """content hash (hex) -> signature, over the cache file's rows as read: a row is found
    through a dict of its 32-byte hash built on first use, so loading a cache costs one read
    and a run that needs no signature pays nothing more. Signatures set during a run are kept
    apart in `added` (what an append writes)."""

    def __init__(self, body: bytes = b"", width: int = 0) -> None:
        self._body = body  # rows: 32-byte hash, then `width` bytes of signature
        self.width = width
        self._rows: dict[bytes, int] | None = None
        self._sorted: tuple[Any, Any, Any] | None = None  # see `raw_rows`
        self.added: dict[str, bytes] = {}

    def _keys(self) -> Iterator[tuple[bytes, int]]:
        body, step = self._body, 32 + self.width
        # (a list of the keys zipped with a range: a third faster than a generator of pairs)
        starts = range(0, len(body), step)
        return zip([body[at:at + 32] for at in starts], range(32, len(body) + 32, step), strict=True)

    def raw(self, digest: bytes) -> bytes | None:
        """The cached signature of a content hash given as its 32 bytes (as a snapshot has it).
        Found by a binary search when `raw_rows` sorted the rows already (session_end looks
        up a few hundred), else through a dict of every row (a full run looks up all)."""
        if self._rows is None and self._sorted is not None and len(digest) == 32:
            return self._searched(digest)
        if self._rows is None:
            self._rows = dict(self._keys())
        at = self._rows.get(digest)
        return None if at is None else self._body[at:at + self.width]

    def _searched(self, digest: bytes) -> bytes | None:
        """`raw` by the sorted rows: the last row (in file order) of this hash."""
        import numpy as np

        heads, order, _ = self._sorted  # type: ignore[misc]
        head = np.frombuffer(digest[:8], dtype=np.uint64)[0]
        low = int(np.searchsorted(heads, head, side="left"))
        body, step = self._body, 32 + self.width
        for n in range(int(np.searchsorted(heads, head, side="right")) - 1, low - 1, -1):
            start = int(order[n]) * step
            if body[start:start + 32] == digest:
                return body[start + 32:start + step]
        return None

    def raw_many(self, digests: list[bytes]) -> list[bytes | None]:
        """`raw` of each digest, in one pass (session_end looks up every member of a large
        block holding a change)."""
        if self._rows is None and all(len(d) == 32 for d in digests):
            return self.raw_rows(b"".join(digests), list(range(len(digests))))
        if self._rows is None:
            self._rows = dict(self._keys())
        rows, body, width = self._rows, self._body, self.width
        return [None if (at := rows.get(digest)) is None else body[at:at + width] for digest in digests]

    def raw_rows(self, column: bytes, rows: list[int]) -> list[bytes | None]:
        """`raw_many` of the content hashes at `rows` of a column of 32-byte hashes (a
        snapshot's): matched as arrays, not a dict step and a slice a row, since session_end
        looks up every unchanged member of a large block holding a change (thousands)."""
        width, step = self.width, 32 + self.width
        count = len(self._body) // step if width else 0
        if not rows or not count:
            return [None] * len(rows)
        import numpy as np  # (session_end signs with it anyway)

        if self._sorted is None:  # the cache's rows by the first 8 bytes of their hash
            table = np.frombuffer(self._body, dtype=np.uint8, count=count * step).reshape(count, step)
            heads = np.ascontiguousarray(table[:, :8]).view(np.uint64).ravel()
            order = np.argsort(heads, kind="stable")  # equal heads keep file order: the last wins
            self._sorted = (heads[order], order, table)
        heads, order, table = self._sorted
        wanted = np.frombuffer(column, dtype=np.uint8).reshape(-1, 32)[np.asarray(rows, dtype=np.intp)]
        wanted_heads = np.ascontiguousarray(wanted[:, :8]).view(np.uint64).ravel()
        at = np.maximum(np.searchsorted(heads, wanted_heads, side="right") - 1, 0)
        head_found = heads[at] == wanted_heads
        found = order[at]
        whole = head_found & (table[found, :32] == wanted).all(axis=1)
        body = self._body
        if whole.all():  # the common case: every row signed already
            return [body[start:start + width] for start in (found * step + 32).tolist()]
        out: list[bytes | None] = [None] * len(rows)
        for n, start in zip(np.flatnonzero(whole).tolist(), (found[whole] * step + 32).tolist(), strict=True):
            out[n] = body[start:start + width]
        for n in np.flatnonzero(head_found & ~whole).tolist():  # another hash with the same head
            out[n] = self._searched(wanted[n].tobytes())
        return out

    def get(self, digest: str) -> bytes | None:
        sig = self.added.get(digest)
        if sig is not None or not self._body:
            return sig
        try:
            return self.raw(bytes.fromhex(digest))
        except ValueError:  # not a hash at all (VANISHED): nothing cached under it
            return None

    def __contains__(self, digest: object) -> bool:
        return isinstance(digest, str) and self.get(digest) is not None

    def __setitem__(self, digest: str, sig: bytes) -> None:
        self.added[digest] = sig

    def loaded(self) -> dict[str, bytes]:
        """Every row of the file, by hex hash (later rows win, as appends do)."""
        return {key.hex(): self._body[at:at + self.width] for key, at in self._keys()}


def load_sigs(folder: Path) -> SigCache:
    """The folder's signature cache; empty when the cache is missing or unreadable."""
    try:
        raw = fsops.read_bytes(folder / SIG_NAME)
    except OSError:
        return SigCache()
    if not raw.startswith(_SIG_MAGIC) or len(raw) < len(_SIG_MAGIC) + 2:
        return SigCache()
    width = int.from_bytes(raw[5:7], "little")
    if width == 0:
        return SigCache()
    body = raw[7:]
    whole = len(body) - len(body) % (32 + width)  # an append cut short by a crash leaves a torn last row
    return SigCache(body[:whole] if whole != len(body) else body, width)


def save_sigs(folder: Path, sigs: dict[str, bytes]) -> None:
    """Write the cache atomically (only signatures of one width are kept)."""
    if not sigs:
        return
    width = len(next(iter(sigs.values())))
    fsops.write_replace(folder / SIG_NAME, _sig_rows(sigs, width))


def _sig_rows(sigs: dict[str, bytes], width: int) -> Iterator[bytes]:
    """The cache file's bytes in pieces of a few hundred rows: a folder of 56,000 memories
    made a list of every row and then their join (50 MB above the signatures themselves)."""
    yield _SIG_MAGIC + width.to_bytes(2, "little")
    keys = sorted(sigs)
    for at in range(0, len(keys), 512):
        yield b"".join([bytes.fromhex(h) + sig for h in keys[at:at + 512] if len(sig := sigs[h]) == width])


def add_sigs(folder: Path, sigs: dict[str, bytes]) -> None:
    """Append signatures to the cache (a session_end pass adds a few to a large cache). The
    whole cache is written instead when there is none, its width differs, or a torn append
    left it with a partial last row (appending after that would misalign every new row)."""
    path = folder / SIG_NAME
    width = len(next(iter(sigs.values()), b""))
    try:
        with os.fdopen(fsops.open_regular(path), "rb") as handle:
            head = handle.read(len(_SIG_MAGIC) + 2)
            size = os.fstat(handle.fileno()).st_size
    except OSError:
        head, size = b"", 0
    fits = head[:5] == _SIG_MAGIC and int.from_bytes(head[5:7], "little") == width
    if not fits or (size - len(head)) % (32 + width) or path.is_symlink():
        save_sigs(folder, {**load_sigs(folder).loaded(), **sigs} if fits else sigs)
        return
    rows = [bytes.fromhex(h) + s for h, s in sorted(sigs.items()) if len(s) == width]
    if rows:
        fsops.append(path, b"".join(rows))


# ---------------------------------------------------------------- the similar-pairs cache
# `_pairs.json` keeps what the last full run found in the folder's large blocks: the content
# hashes it compared (`covered`) and every pair of them whose similarity passed, with its score.
# A similarity depends on the two files' bytes alone, so the next run takes the pairs of
# memories it still finds under a covered hash from here, and compares only the memories with
# a new hash (against the whole block). `params` names everything the pairs depend on; any
# other value, or a damaged file, is no cache.

PAIRS_NAME = "_pairs.json"


@dataclass
class PairCache:
    covered: set[str]
    pairs: dict[tuple[str, str], float]


def load_pairs(folder: Path, params: str) -> PairCache | None:
    try:
        data = orjson.loads(fsops.read_bytes(folder / PAIRS_NAME))
        if data.get("params") != params:
            return None
        pairs = {(str(a), str(b)): float(score) for a, b, score in data["pairs"]}
        return PairCache({str(h) for h in data["covered"]}, pairs)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def save_pairs(folder: Path, params: str, cache: PairCache) -> None:
    body = {"version": 1, "params": params, "covered": sorted(cache.covered),
            "pairs": [[a, b, score] for (a, b), score in sorted(cache.pairs.items())]}
    fsops.write_replace(folder / PAIRS_NAME, orjson.dumps(body))


# ---------------------------------------------------------------- the last-run snapshot
# `_lastrun.bin` keeps, per file, what the last run covering the folder saw: size, mtime,
# content hash (= run_hash) and block (type, subtype). session_end compares the folder's files
# against it by stat alone, so that it never loads every index of a large store. It is binary
# (fixed-width columns after a small JSON header) because session_end loads one per folder on
# every pass: a 10,000-row snapshot loads in about a millisecond, a JSON one in ten.

LASTRUN_NAME = "_lastrun.bin"
_LASTRUN_MAGIC = b"MCLR2"


@dataclass
class Snapshot:
    """A folder's last-run snapshot: columns by row, rows sorted by file name."""

    names: list[str]
    sizes: array
    mtimes: array
    hashes: bytes  # 32 bytes a row
    block_of: array  # row -> index into blocks
    blocks: list[tuple[str, str]]
    written_ns: int  # the snapshot file's own mtime (see `trusted`)
    _rows: dict[str, int] | None = None
    names_raw: bytes = b""  # the names as stored, UTF-8, one a line (see `name_bytes`)

    def name_bytes(self) -> list[bytes] | None:
        """The names as bytes, in row order, for a scan's `lstat` of every file (a bytes
        path spares the call encoding each name); None where the file system's encoding is
        not UTF-8, whose bytes these are, or when the snapshot was not read from a file."""
        if not self.names_raw or sys.getfilesystemencoding().lower() not in ("utf-8", "utf8"):
            return None
        found = self.names_raw.split(b"\n")
        return found if len(found) == len(self.names) else None

    def row(self, name: str) -> int | None:
        if self._rows is None:
            self._rows = dict(zip(self.names, range(len(self.names)), strict=True))  # (a comprehension: 2x)
        return self._rows.get(name)

    def content_hash(self, i: int) -> str:
        return self.hashes[32 * i: 32 * i + 32].hex()

    def trusted(self, i: int, size: int, mtime_ns: int) -> bool:
        """Whether a file with this size and mtime is the one row i describes, unread. A file
        whose mtime is not older than the snapshot itself may have been rewritten within the
        file system's timestamp granularity after the row was taken (the "racy" case git
        knows): it is read again."""
        return self.sizes[i] == size and self.mtimes[i] == mtime_ns and mtime_ns < self.written_ns

    def run_hashes(self) -> dict[str, str]:
        """id -> run_hash for every row."""
        return {name.rsplit(".", 1)[0]: self.content_hash(i) for i, name in enumerate(self.names)}


def save_lastrun(folder: Path, entries: list[dict[str, Any]]) -> None:
    """The snapshot of a folder's entries, built column by column (a real run writes one for
    every folder it covered: a tuple and a hex decoding per entry cost as much as the rest)."""
    ordered = sorted(entries, key=lambda e: e["file"])  # one entry per file: the rows' order
    blocks: dict[tuple[str, str], int] = {}
    block_of = array("H", [blocks.setdefault((str(e.get("type")), str(e.get("subtype") or "")), len(blocks))
                           for e in ordered])
    hashes = bytes.fromhex("".join([e["content_hash"] for e in ordered]))
    if len(hashes) != 32 * len(ordered):  # a hash of another length (an index edited by hand): as before,
        hashes = b"".join([bytes.fromhex(e["content_hash"]) for e in ordered])  # row by row
    _write_columns(folder, [e["file"] for e in ordered], array("q", map(int, [e["size"] for e in ordered])),
                   array("q", map(int, [e["mtime_ns"] for e in ordered])), hashes, block_of, list(blocks))


def update_lastrun(folder: Path, snap: Snapshot, drop: set[str], fresh: list[dict[str, Any]]) -> None:
    """The snapshot with the rows of `drop` replaced by `fresh` entries (session_end): the old
    columns edited in place (a few rows out, a few in), not rebuilt row by row."""
    names, sizes, mtimes = list(snap.names), array("q", snap.sizes), array("q", snap.mtimes)
    hashes, block_of, blocks = bytearray(snap.hashes), array("H", snap.block_of), list(snap.blocks)
    for row in sorted((r for r in map(snap.row, drop) if r is not None), reverse=True):
        del names[row], sizes[row], mtimes[row], block_of[row], hashes[32 * row:32 * row + 32]
    for e in sorted(fresh, key=lambda e: e["file"]):
        row = bisect.bisect_left(names, e["file"])
        block = (str(e.get("type")), str(e.get("subtype") or ""))
        if block not in blocks:
            blocks.append(block)
        names.insert(row, e["file"])
        sizes.insert(row, int(e["size"]))
        mtimes.insert(row, int(e["mtime_ns"]))
        block_of.insert(row, blocks.index(block))
        hashes[32 * row:32 * row] = bytes.fromhex(e["content_hash"])
    _write_columns(folder, names, sizes, mtimes, bytes(hashes), block_of, blocks)


def _write_columns(folder: Path, names: list[str], sizes: array[int], mtimes: array[int], hashes: bytes,
                   block_of: array[int], blocks: list[tuple[str, str]]) -> None:
    joined = "\n".join(names).encode()
    header = orjson.dumps({"count": len(names), "names_bytes": len(joined), "blocks": blocks})
    body = b"".join([_LASTRUN_MAGIC, len(header).to_bytes(4, "little"), header, joined, sizes.tobytes(),
                     mtimes.tobytes(), hashes, block_of.tobytes()])
    fsops.write_replace(folder / LASTRUN_NAME, body)


def load_lastrun(folder: Path) -> Snapshot | None:
    """The folder's snapshot; None when missing or unreadable (the caller then falls back to
    the index). Any inconsistency makes it unreadable: it is only a cache."""
    try:
        with os.fdopen(fsops.open_regular(folder / LASTRUN_NAME), "rb") as handle:
            raw = handle.read()
            written_ns = os.fstat(handle.fileno()).st_mtime_ns
        return _parse_lastrun(raw, written_ns)
    except (OSError, ValueError, KeyError, TypeError, IndexError, UnicodeDecodeError):
        return None


def _parse_lastrun(raw: bytes, written_ns: int) -> Snapshot | None:
    if not raw.startswith(_LASTRUN_MAGIC):
        return None
    at = len(_LASTRUN_MAGIC) + 4
    end = at + int.from_bytes(raw[at - 4: at], "little")
    header = orjson.loads(raw[at:end])
    count, names_len = int(header["count"]), int(header["names_bytes"])
    blocks = [(str(b[0]), str(b[1])) for b in header["blocks"]]
    names_raw = raw[end:end + names_len] if count else b""
    names = names_raw.decode().split("\n") if count else []
    at = end + names_len
    columns = []
    for code, width in (("q", 8), ("q", 8)):
        column = array(code)
        column.frombytes(raw[at: at + width * count])
        columns.append(column)
        at += width * count
    hashes = raw[at: at + 32 * count]
    block_of = array("H")
    block_of.frombytes(raw[at + 32 * count: at + 34 * count])
    if len(names) != count or at + 34 * count != len(raw) or (count and max(block_of) >= len(blocks)):
        return None
    return Snapshot(names, columns[0], columns[1], hashes, block_of, blocks, written_ns, names_raw=names_raw)
