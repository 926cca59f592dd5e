"""Folder indices (`_index.json`, SPEC 1.2): a derived cache of each folder's memory files.

The files are the truth. An entry is reused only while the file's size and mtime match it;
otherwise the file is read again. `run_hash` (the content hash when the last run covering
the folder finished) and other cached fields survive a rebuild when the content is the same.
"""

from __future__ import annotations

import datetime as dt
import errno
import functools
import os
import re
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import orjson

from memcli.store import fsops, indexmark
from memcli.store.filebytes import FileBytes
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


def load(folder: Path, identity: list[int] | None = None) -> dict[str, Any] | None:
    """The folder's index, or None when missing. Raises ValueError when it is unreadable.
    `identity`, when given, is filled with the identity of the file parsed
    (`indexmark.identity`: the same before and after the read), or left empty when the file
    changed while it was read."""
    path = folder / INDEX_NAME
    try:
        fd = fsops.open_regular(path)  # never a link, never a FIFO (an OSError)
    except FileNotFoundError:
        return None
    with os.fdopen(fd, "rb", buffering=0) as handle:
        before = os.fstat(fd)
        # a large index read and parsed a batch at a time: never whole in memory as bytes either
        share = before.st_size >= SHARE_VALUES_FROM
        data = _by_batches(iter(lambda: handle.read(BATCH_BYTES), b""), share) \
            if before.st_size >= BATCH_FROM else None
        if data is None:
            handle.seek(0)
            data = _whole(handle.readall(), share)  # orjson.JSONDecodeError is a ValueError
        if identity is not None:
            mark = indexmark.identity(before)
            identity[:] = mark if indexmark.identity(os.fstat(fd)) == mark else []
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
# one string object each for the whole index, not one per entry, in an index from this size
# (about 12,000 entries). That holds a fifth less (2,010 bytes an entry in memory against
# 2,420: 23 MB less at 56,000, where a run's peak is set), but walks every entry once more: a
# third of the parse (5-8 ms of 12-20 for 5,000 entries), paid for every folder of every
# pass, and not worth 2 MB at a folder of 5,000.
_REPEATED = ("type", "subtype", "priority", "created_by")
SHARE_VALUES_FROM = 8 << 20


def parsed(raw: bytes) -> Any:
    """`orjson.loads(raw)` of an index, with the same result (or the same error): an index
    in the layout `save` writes (compact, entries last) and over `BATCH_FROM` bytes is parsed
    by batches of whole entries, anything else whole. In an index over `SHARE_VALUES_FROM` bytes the
    values that repeat across entries (`_REPEATED`, tags, an `updated_at` equal to
    `created_at`) are then one object each."""
    data = None
    share = len(raw) >= SHARE_VALUES_FROM
    if len(raw) >= BATCH_FROM:
        view = memoryview(raw)
        data = _by_batches((view[at:at + BATCH_BYTES] for at in range(0, len(raw), BATCH_BYTES)), share)
    return _whole(raw, share) if data is None else data


def _whole(raw: bytes, share: bool) -> Any:
    data = orjson.loads(raw)
    if share and isinstance(data, dict) and isinstance(data.get("entries"), list):
        _share_repeated(data["entries"], {})
    return data


def _by_batches(chunks: Iterable[bytes | memoryview], share: bool = False) -> dict[str, Any] | None:
    """The index whose bytes come in `chunks`, parsed header first, then its entries a batch
    at a time, each batch cut just before a `,{"id":"` (outside any string in valid JSON: a
    quote inside one is escaped). Every batch parsing as an array means the whole is valid
    JSON and the same entries, in order; None when any part does not parse (the caller then
    parses the whole, which gives the error, or the same value, as before). With `share`, the
    repeated values are one object each (`_share_repeated`)."""
    pending = bytearray()  # bytes read, not parsed yet
    header: Any = None
    entries: list[Any] = []
    shared: dict[str, str] | None = {} if share else None
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


def _batch_into(entries: list[Any], batch: bytearray, shared: dict[str, str] | None) -> bool:
    """Parse entries separated by commas and add them to `entries` (their repeated values
    shared through `shared`, unless None); False when they do not parse."""
    try:
        part = orjson.loads(b"[" + batch + b"]")
    except ValueError:
        return False
    if not isinstance(part, list):
        return False
    if shared is not None:
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
_HEADER_MAX = 1 << 16  # the header `save` writes is a few dozen bytes: past this, another layout


def splice(folder: Path, scope: str, scope_id: str, moment: dt.datetime,
           update: Callable[[str, dict[str, Any] | None], dict[str, Any] | None],
           files: list[str]) -> bool:
    """Replace the entries of `files` (names) with `update(name, old entry or None)`, None
    meaning "no entry". False, with nothing written, when the index could not be spliced."""
    try:
        fd = fsops.open_regular(folder / INDEX_NAME)
    except OSError:
        return False
    try:
        try:
            st = os.fstat(fd)
            known = indexmark.known_count(folder, scope, scope_id, st)  # spares counting a large index
            # the very file marked (a large one): read only where the search looks, and its
            # unchanged runs copied file to file; anything else read whole and checked whole
            entries = None
            if known is not None and fsops.SPANS:
                entries = _Entries.of(FileBytes(fd, st.st_size), known)
            if entries is None:
                entries = _Entries.of(fsops.read_open(fd, st.st_size))
            if entries is None:
                return False
            units, count = _spliced(entries, update, files)
        except ValueError:  # entries not in the layout `save` writes after all
            return False
        except OSError:  # (SpanChangedError among them) the index could not be read: nothing written
            return False
        same = functools.partial(_still_same, fd, indexmark.identity(st))
        try:
            size = _write_spliced(folder, scope, scope_id, moment, units, count, same)
        except fsops.SpanChangedError:  # the index changed while it was copied: nothing was written
            return False
    finally:
        os.close(fd)
    indexmark.remember(folder, scope, scope_id, size, count)
    return True


def _still_same(fd: int, identity: list[int]) -> None:
    """Raise SpanChangedError when the file open as `fd` is no longer what it was when
    opened (written in place meanwhile: a memcli writer never does that, a hand may)."""
    if indexmark.identity(os.fstat(fd)) != identity:
        raise fsops.SpanChangedError(errno.EIO, "the index changed while it was spliced")


def _spliced(entries: _Entries, update: Callable[[str, dict[str, Any] | None], dict[str, Any] | None],
             files: list[str]) -> tuple[list[fsops.Piece], int]:
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
    units: list[fsops.Piece] = []  # an unchanged run of entries is one run, its commas included
    done = entries.first  # where the entries not yet copied start
    for at in sorted(set(replaced) | set(added)):
        if at > done:
            units.append(entries.run(done, at - 1 if at < end else end))  # (without the comma before `at`)
        units += [part for _, part in sorted(added.get(at, []))]
        done = at
        if at in replaced:
            units += [replaced[at]] if replaced[at] else []
            done = entries.stop(at) + 1
    if done < end:
        units.append(entries.run(done, end))
    count = entries.count + sum(map(len, added.values())) - sum(1 for part in replaced.values() if not part)
    return units, count


class _Entries:
    """The entries of an index's bytes, each known by the offset where it starts; found by a
    binary search over the bytes (entries are sorted by their (id, file) key), so a splice
    looks at a few dozen entries of a 10,000-entry index, not at every one."""

    def __init__(self, raw: bytes | FileBytes, first: int, end: int, count: int) -> None:
        self.raw, self.first, self.end, self.count = raw, first, end, count
        self._view = memoryview(raw) if isinstance(raw, bytes) else None
        # what the searches of one splice found: the first probes of each search are the same
        # (a file read a page at a time is searched in Python, at a few microseconds a probe)
        self._keys: dict[int, tuple[bytes, bytes]] = {}
        self._starts: dict[tuple[int, int], int] = {}

    @classmethod
    def of(cls, raw: bytes | FileBytes, known: int | None = None) -> _Entries | None:
        """The entries of an index in the layout `save` writes (compact, entries last, each
        starting with its id and file); None for any other layout. The entries are taken to
        be sorted, as `save` and `splice` leave them: an index edited by hand into another
        order is only as wrong after a splice as before it (doctor reports it). `known`:
        how many entries these very bytes hold (`indexmark`), not counted again."""
        at = raw.find(_ENTRIES_KEY, 0, _HEADER_MAX)
        if at < 0 or not raw.endswith(b"]}\n"):
            return None
        try:
            header = orjson.loads((raw[:at] if isinstance(raw, bytes) else raw.slice(0, at)) + b"}")
        except ValueError:
            return None
        first, end = at + len(_ENTRIES_KEY), len(raw) - 3
        # (inside a JSON string, its quotes are escaped)
        if known is not None:
            count = known
        elif isinstance(raw, bytes):
            count = raw.count(_ENTRY_START, first, end)
        else:
            return None  # (counted only in a whole read)
        if header.get("version") != INDEX_VERSION or header.get("entry_count") != count or (
                count and not raw.startswith(_ENTRY_START, first)) or (not count and first != end):
            return None
        return cls(raw, first, end, count)

    def key(self, at: int) -> tuple[bytes, bytes]:
        known = self._keys.get(at)
        if known is not None:
            return known
        raw = self.raw
        match = _ENTRY_HEAD.match(raw, at) if isinstance(raw, bytes) else raw.match(_ENTRY_HEAD, at)
        if match is None:
            raise ValueError("index entry without an id and a file")
        self._keys[at] = found = (match.group(1), match.group(2))
        return found

    def next(self, at: int) -> int:
        """Where the entry after the one at `at` starts (`end` after the last)."""
        return self._start(at + 1, self.end)

    def _start(self, low: int, high: int) -> int:
        """The first entry start in [low, high), `high` when none."""
        found = self._starts.get((low, high))
        if found is None:
            found = self.raw.find(_ENTRY_START, low, high)
            self._starts[(low, high)] = found = high if found < 0 else found
        return found

    def stop(self, at: int) -> int:
        """Where the entry at `at` ends (its comma, or `end`)."""
        following = self.next(at)
        if following < self.end and self._byte(following - 1) != 0x2C:
            raise ValueError("index entries not separated by a comma")
        return following - 1 if following < self.end else self.end

    def _byte(self, at: int) -> int:
        return self.raw[at] if isinstance(self.raw, bytes) else self.raw.byte(at)

    def text(self, at: int) -> bytes:
        raw, stop = self.raw, self.stop(at)
        return raw[at:stop] if isinstance(raw, bytes) else raw.slice(at, stop)

    def run(self, start: int, stop: int) -> memoryview | fsops.Span:
        """Bytes [start, stop) as a piece to write: a view (no copy of a 5-10 MB index), or
        a span of the file copied by the kernel."""
        if self._view is not None:
            return self._view[start:stop]
        assert isinstance(self.raw, FileBytes)
        return fsops.Span(self.raw.fd, start, stop - start)

    def place(self, key: tuple[bytes, bytes]) -> int:
        """Where an entry with this key goes: the offset of the first entry whose key is not
        smaller (`end` when none). `low` is always an entry's start, `high` one or `end`."""
        low, high = self.first, self.end
        while low < high:
            probe = self._start((low + high) // 2, high)
            if probe == high:  # no entry starts in the upper half: step from `low`
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
                   units: list[fsops.Piece], count: int, check: Callable[[], None]) -> int:
    """Write the spliced index; returns its size in bytes."""
    header = orjson.dumps({"version": INDEX_VERSION, "scope": scope, "scope_id": scope_id,
                           "entry_count": count, "updated_at": format_ts(moment)})
    # written as pieces: the unchanged runs are slices of a 5-10 MB index, and joining them
    # (then adding head and tail) copied the whole index three times over
    head = header[:-1] + _ENTRIES_KEY
    fsops.write_replace(folder / INDEX_NAME, _pieces(head, units, b"]}\n", check))
    return len(head) + sum(map(len, units)) + max(len(units) - 1, 0) + 3


def _pieces(head: bytes, units: list[fsops.Piece], tail: bytes,
            check: Callable[[], None]) -> Iterator[fsops.Piece]:
    """head, the units separated by commas, tail: `head + b",".join(units) + tail` in pieces;
    `check()` last of all, before the file is renamed into place (it may raise)."""
    yield head
    for n, unit in enumerate(units):
        if n:
            yield b","
        yield unit
    check()
    yield tail
