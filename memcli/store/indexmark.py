"""A mark of a large index's entry count, kept under `.cache/` (a cache: never the truth).

Splicing an index (`index.splice`) checks that its bytes are in the layout `save` writes:
among other things, that the header's `entry_count` is the number of entries the bytes hold.
Counting them is a scan of the whole file (about 5 ms for the 6 MB `archive/_index.json` of
a 20,000-memory store whose runs archived 7,000): a session-end pass that changes a few
entries paid it for every index it spliced. So each index memcli writes at `MARK_FROM`
bytes or more leaves a mark, `.cache/folders/<rel>/_index.mark`: the file's identity (device,
inode, size, mtime, ctime, as `planned.identity` tells an index apart from any other version
of it) and the entries it holds. While the index is still that very file, the count is the
mark's; anything else (no mark, a damaged one, one of another file, a count the header does
not agree with) and the entries are counted, as before.

An index is only ever replaced whole (a new file renamed over it), which gives it a new
inode, mtime and ctime; an edit in place by hand moves its mtime and ctime. The mark is
written without fsync: a crash loses it or leaves it naming a file that is no longer there.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import orjson

from memcli.store import cache, fsops

INDEX_NAME = "_index.json"  # (index.INDEX_NAME: index imports this module)
MARK_NAME = "_index.mark"
MARK_FROM = 1 << 20  # bytes: a smaller index is counted (a millisecond a megabyte or so)
_MARK_LIMIT = 4096  # a mark is a few dozen bytes: anything larger is not one


def identity(st: os.stat_result) -> list[int]:
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def mark_path(folder: Path, scope: str, scope_id: str, create: bool = False) -> Path | None:
    """Where the mark of `folder`'s index goes (its cache folder made when `create`); None
    when the folder's path is not the one its scope names (`agent/<id>`, `team/<id>`,
    `global`, `archive`): no mark then."""
    rel = scope if scope in ("global", "archive") else f"{scope}/{scope_id}"
    parts = rel.split("/")
    if len(folder.parts) <= len(parts) or list(folder.parts[-len(parts):]) != parts:
        return None
    return cache.folder_cache(folder, rel, create=create) / MARK_NAME


def known_count(folder: Path, scope: str, scope_id: str, st: os.stat_result) -> int | None:
    """The entry count the mark gives for the folder's index file, whose `fstat` is `st`;
    None when there is no mark, it cannot be read, or it is of another file."""
    mark = mark_path(folder, scope, scope_id)
    if mark is None or st.st_size < MARK_FROM:
        return None
    try:
        data = orjson.loads(fsops.read_bytes(mark, limit=_MARK_LIMIT))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("index") != identity(st):
        return None
    count = data.get("count")
    return count if type(count) is int and count >= 0 else None


def remember(folder: Path, scope: str, scope_id: str, size: int, count: int) -> None:
    """After writing `size` bytes holding `count` entries to the folder's index: mark the
    file now there with its count, when it is large enough to be worth it and is still what
    was written (its size). Failing to write the mark costs the next splice a count, no more."""
    if size < MARK_FROM:
        return
    with contextlib.suppress(OSError, ValueError):
        st = os.lstat(folder / INDEX_NAME)
        if st.st_size != size:  # not the file just written (a writer outside memcli's lock)
            return
        mark = mark_path(folder, scope, scope_id, create=True)
        if mark is not None:
            fsops.write_replace(mark, orjson.dumps({"index": identity(st), "count": count}), durable=False)
