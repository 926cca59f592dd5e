"""Which index entries (and last-run snapshot rows) still describe their files: checked a
folder at a time, as whole lists, since a full pass checks every entry of the store. An entry
trusted here spares reading its file; anything not plainly trusted makes the file be read."""

from __future__ import annotations

import re
from array import array
from itertools import chain
from typing import Any, Protocol

from memcli.store import lastrun
from memcli.store.model import is_valid_id


class FileStat(Protocol):
    """What a scan keeps of a file's lstat: FileStat, or the three-field result of the
    C loop scans take where it was built (`memcli/store/_lstat.c`)."""

    @property
    def st_mode(self) -> int: ...

    @property
    def st_size(self) -> int: ...

    @property
    def st_mtime_ns(self) -> int: ...


def differ_in_place(names: list[str], stats: list[FileStat | None],
                    snap: lastrun.Snapshot) -> list[str]:
    """The names whose stat differs from the snapshot row of the same position. Compared as
    whole lists first (in C): a folder nobody touched costs no per-file Python."""
    if None not in stats:
        mtimes = [st.st_mtime_ns for st in stats]  # type: ignore[union-attr]
        try:  # compared as arrays: in C, item by item, without a Python int a snapshot row
            same = (array(snap.sizes.typecode, [st.st_size for st in stats]) == snap.sizes  # type: ignore[union-attr]
                    and array(snap.mtimes.typecode, mtimes) == snap.mtimes)
        except OverflowError:  # a value the snapshot's columns cannot hold: not the row's
            same = False
        if same and (not mtimes or max(mtimes) < snap.written_ns):
            return []
    return [n for i, (n, st) in enumerate(zip(names, stats, strict=True))
            if st is None or not snap.trusted(i, st.st_size, st.st_mtime_ns)]


def differ_with_new(names: list[str], stats: list[FileStat | None],
                    snap: lastrun.Snapshot) -> list[str]:
    """Files were added (a session wrote memories): the new ones differ, the others are
    compared as in `differ_in_place` when they are exactly the snapshot's files."""
    before = set(snap.names)
    known = [n for n in names if n in before]
    if known != snap.names:
        return [n for n, st in zip(names, stats, strict=True) if st is None or not trusted(snap, n, st)]
    added = [n for n in names if n not in before]
    known_stats = [st for n, st in zip(names, stats, strict=True) if n in before]
    return sorted(added + differ_in_place(known, known_stats, snap))


def trusted(snap: lastrun.Snapshot, name: str, st: FileStat) -> bool:
    row = snap.row(name)
    return row is not None and snap.trusted(row, st.st_size, st.st_mtime_ns)


def all_trusted(entries: list[Any], names: list[str], stats: list[FileStat | None]) -> bool:
    """Whether the index entries are the folder's files exactly, in order, each with its
    file's size and mtime and every field a run plans from: what scan(load=False) checks a
    file at a time, checked as whole lists (a warm run's common case, and a cold one's)."""
    if len(entries) != len(names) or None in stats or not all([type(e) is dict for e in entries]):
        return False
    try:
        return ([e["file"] for e in entries] == names
                and [e["size"] for e in entries] == [st.st_size for st in stats]  # type: ignore[union-attr]
                and [e["mtime_ns"] for e in entries] == [st.st_mtime_ns for st in stats]  # type: ignore[union-attr]
                and ids_ok([e.get("id") for e in entries])
                and facts_ok(entries)
                and all([bool(e.get("content_hash")) and "text_len" in e for e in entries]))
    except KeyError:
        return False


# Ids one per line, each as `model.ID_RE` takes it: a folder's ids checked in one match.
_ID_LINES = re.compile(r"(?:mem_[0-9A-Za-z_-]{1,64}\n)*")


def ids_ok(ids: list[Any]) -> bool:
    """Whether every one of `ids` is a valid memory id (`model.is_valid_id`), as one match
    over the ids joined by newlines rather than a call and a match an id. (A stricter test:
    an id ending in a newline, which `is_valid_id` lets through, fails here, and the entries
    are then checked one at a time.)"""
    if not set(map(type, ids)) <= {str}:
        return False
    lines = "\n".join(ids) + "\n"
    return not ids or (lines.count("\n") == len(ids) and _ID_LINES.fullmatch(lines) is not None)


def trusted_names(old: dict[Any, dict[str, Any]], names: list[str],
                  stats: list[FileStat | None]) -> set[str]:
    """The names whose entry in `old` still describes the file: the same size and mtime, and
    every field a run plans from. Checked as whole lists (this runs for every file of a scan
    that is not all trusted: a real run's recording of each folder it changed), then entry by
    entry only when some entry fails."""
    good = [(name, e) for name, st in zip(names, stats, strict=True)
            if st is not None and (e := old.get(name)) is not None and e.get("size") == st.st_size
            and e.get("mtime_ns") == st.st_mtime_ns and e.get("content_hash")
            and "text_len" in e and "details_len" in e]
    entries = [e for _, e in good]
    if ids_ok([e.get("id") for e in entries]) and facts_ok(entries):
        return {name for name, _ in good}
    return {name for name, e in good if is_valid_id(e.get("id")) and facts_ok([e])}


def facts_ok(entries: list[dict[str, Any]]) -> bool:
    """Whether the cached facts a run plans from have the types the rules use them as: an
    index edited by hand (or by a hostile hand) with `"tags": [[1]]` or `"access_count": "x"`
    is not trusted, and the files are read instead. Whole lists: a warm run checks 100,000
    entries this way in a few tens of milliseconds (the tags' types in one set, in C)."""
    return (set(map(type, [e.get("access_count") for e in entries])) <= {int}
            and set(map(type, [e.get("details_len") for e in entries])) <= {int}
            and set(map(type, tags := [e.get("tags") for e in entries])) <= {list}
            and set(map(type, chain.from_iterable(tags))) <= {str})  # type: ignore[arg-type]


def run_hashes(old: dict[Any, dict[str, Any]]) -> dict[str, Any]:
    return {str(e.get("id")): e.get("run_hash") for e in old.values()}
