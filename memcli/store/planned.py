"""Index entries a full run's planning made from the files it read, handed to its recording.

A real run records itself by rebuilding the index of every folder it covered (each entry's
`run_hash` becomes its content hash). Where the folder had no usable index, that meant
reading every file of it a second time, right after planning had read them all: at
1,000,000 memories, most of the apply. Instead, planning writes the entries of the files it
read (`save`, one folder at a time, so that a run's memory stays flat) to a scratch file
under `.cache/`, and the recording trusts such an entry, like any index entry, only while
its file still has the entry's size and mtime (`Store.scan` with `known=`): a file the run
wrote, or that another writer changed meanwhile, is read again.

Entries of files changed less than `STAMP_AGE_NS` before planning read them are left out:
a change made in the same timestamp tick, after the read, would keep size and mtime (git's
"racy" case). The scratch file is a cache that only the process that wrote it reads (a
ticket carries a random token it must match): written without fsync, removed after the
recording; a crash may leave one behind or lose it, and a run finished after a crash
(`journal.recover`) reads every file again, as before.
"""

from __future__ import annotations

import contextlib
import os
import time
import weakref
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from memcli.store import fsops, index
from memcli.store.store import STAMP_AGE_NS, Folder, FolderScan

PLANNED_NAME = "_planned.json"
# Below this many files read in a folder, the recording reads them again for less than the
# scratch file's write (an indexed store's run reads only what changed).
SAVE_FROM = 32
# Above this many, the recording reads the files again, as before: the entries handed over are
# parsed whole, about 3 KB a memory at once, which in a folder of 56,000 memories (mix, 100,000)
# raised a run's peak from 432 to 523 MB; re-reading makes them one file at a time.
SAVE_UP_TO = 20_000
# A `trusted` ticket keeps the entries planning parsed from the index (about 2 KB each), so
# that the recording need not parse those very bytes again (a third of a full run's apply):
# up to this many in all, over the tickets alive in the process; past it, the recording
# parses the index as before. (A run's memory otherwise stays flat from folder to folder.)
KEEP_UP_TO = 25_000


@dataclass(frozen=True, eq=False)
class Ticket:
    """Where one folder's entries were written, and the token that proves they are ours. Or,
    with `index` set (no file written): planning found the folder's index, whose identity
    that is, true of every file but `reread` (see `trusted`); `kept`, when set, is that
    index's `entry_count` and its entries as planning parsed them."""

    path: Path | None
    token: str
    index: tuple[int, int, int, int, int] | None = None
    reread: frozenset[str] = frozenset()
    kept: tuple[Any, list[dict[str, Any]]] | None = None


_kept = [0]  # entries held by the tickets alive (see KEEP_UP_TO), less each one as it goes


def _may_keep(count: int) -> bool:
    return _kept[0] + count <= KEEP_UP_TO


def _held(ticket: Ticket, count: int) -> None:
    _kept[0] += count
    weakref.finalize(ticket, _let_go, count)


def _let_go(count: int) -> None:
    _kept[0] -= count


def identity(st: os.stat_result) -> tuple[int, int, int, int, int]:
    """What tells an index file apart from any other version of it (see `trusted`)."""
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns


def started() -> int:
    """The moment to pass to `save`: taken before the folder's files are read."""
    return time.time_ns()


def save(folder: Folder, scan: FolderScan, read_from_ns: int) -> Ticket | None:
    """Write the entries of the memories `scan` read (as `Store.scan` would make them, each
    with what its saved index entry cached) for the recording; None when too few to be worth
    it or too many to hold at once, or when the scratch file cannot be written (the
    recording then reads the files)."""
    if len(scan.memories) < SAVE_FROM:
        return trusted(folder, scan, read_from_ns)
    old = {e.get("file"): e for e in (scan.index or {}).get("entries", [])}
    archive = folder.scope == "archive"
    cutoff = read_from_ns - STAMP_AGE_NS
    handed = [mem for mem in scan.memories.values() if mem.mtime_ns < cutoff]
    if not SAVE_FROM <= len(handed) <= SAVE_UP_TO:
        return None
    token = os.urandom(8).hex()

    def pieces() -> Iterator[bytes]:
        """Each entry made, written and let go in turn: the entries of a folder of 50,000
        memories are never all in memory (a list of them raised a run's peak by a fifth)."""
        yield b'{"token":"%s","entries":[' % token.encode()
        for n, mem in enumerate(handed):
            entry = index.entry_for(mem, old.get(mem.name), archive=archive)
            yield (b"," if n else b"") + orjson.dumps(entry)
        yield b"]}"

    try:
        path = folder.cache(create=True) / PLANNED_NAME
        fsops.write_replace(path, pieces(), durable=False)
    except (OSError, ValueError, TypeError):  # TypeError: a value orjson cannot write (never parsed JSON)
        return None
    return Ticket(path, token)


def trusted(folder: Folder, scan: FolderScan, read_from_ns: int) -> Ticket | None:
    """A ticket for a folder whose saved index planning found true of every file it did not
    read (an indexed store's run reads only what changed): the recording then takes the entries
    from that index, the same bytes (`identity`), and reads again only the files planning read,
    the entries it dropped and the files the run wrote, instead of a stat of every file and a
    check of every entry against it. Only for an index last changed `STAMP_AGE_NS` before
    planning started: one changed while planning read it would show a later ctime. None when
    planning met a problem in the folder (the recording then scans it, as before).

    As with the entries a scratch file hands over, a file another writer changes between
    planning and the recording keeps the entry planning saw: its `run_hash` is then the content
    this run saw, and the next session_end finds the file changed (a new size or mtime)."""
    if scan.index is None or scan.problems or scan.unreadable or folder.scope == "archive":
        return None
    try:
        st = os.lstat(folder.path / index.INDEX_NAME)
    except OSError:
        return None
    if st.st_ctime_ns >= read_from_ns - STAMP_AGE_NS:
        return None
    listed = scan.index.get("entries")
    if not isinstance(listed, list):
        return None
    kept = {e["file"] for e in scan.entries}
    dropped = {str(e.get("file")) for e in listed if isinstance(e, dict) and e.get("file") not in kept}
    reread = frozenset(dropped | {mem.name for mem in scan.memories.values()})
    # (the parsed entries are not changed by planning: a memory made from one refers to it,
    # and one whose facts change gets a new dict)
    keep = (scan.index.get("entry_count"), listed) if _may_keep(len(listed)) else None
    ticket = Ticket(None, "", identity(st), reread, keep)
    if keep is not None:
        _held(ticket, len(listed))
    return ticket


def load(ticket: Ticket | None) -> list[dict[str, Any]] | None:
    """The entries behind `ticket`, or None (no ticket, the file gone, not ours, unreadable)."""
    if ticket is None or ticket.path is None:
        return None
    try:
        data = orjson.loads(fsops.read_bytes(ticket.path))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("token") != ticket.token:
        return None
    entries = data.get("entries")
    if not isinstance(entries, list):
        return None
    return [e for e in entries if type(e) is dict and isinstance(e.get("file"), str)]


def discard(tickets: dict[str, Ticket]) -> None:
    """Remove the scratch files of `tickets` (each only if still ours); never fails."""
    for ticket in tickets.values():
        if ticket.path is None:
            continue  # (a `trusted` ticket: no file)
        with contextlib.suppress(OSError, ValueError):
            if _head(ticket.path).startswith(b'{"token":"%s"' % ticket.token.encode()):
                fsops.unlink(ticket.path, durable=False)
    tickets.clear()


def _head(path: Path) -> bytes:
    fd = fsops.open_regular(path)
    try:
        return os.read(fd, 64)
    finally:
        os.close(fd)
