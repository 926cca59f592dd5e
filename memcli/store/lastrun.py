"""The last-run snapshot (`.cache/<folder>/_lastrun.bin`): per file, what the last run
covering the folder saw (size, mtime, content hash = run_hash, block), so that session_end
compares the folder's files against it by stat alone and never loads every index of a large
store. Binary (fixed-width columns after a small JSON header) because session_end loads one a
folder on every pass: a 10,000-row snapshot loads in about a millisecond, a JSON one in ten."""

from __future__ import annotations

import bisect
import os
import sys
from array import array
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from memcli.store import fsops

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
