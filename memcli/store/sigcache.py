"""The MinHash cache (`.cache/<folder>/_minhash.bin`): each memory's signature by content
hash, so that candidate pairs come without re-reading or re-hashing unchanged memories. A cache
like the index: missing or unreadable, it is rebuilt; it never holds memory text."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from memcli.store import fsops

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
        head, body = _read_split(folder / SIG_NAME, len(_SIG_MAGIC) + 2)
    except OSError:
        return SigCache()
    if not head.startswith(_SIG_MAGIC) or len(head) < len(_SIG_MAGIC) + 2:
        return SigCache()
    width = int.from_bytes(head[5:7], "little")
    if width == 0:
        return SigCache()
    whole = len(body) - len(body) % (32 + width)  # an append cut short by a crash leaves a torn last row
    return SigCache(body[:whole] if whole != len(body) else body, width)


def _read_split(path: Path, size: int) -> tuple[bytes, bytes]:
    """The file's first `size` bytes and the rest, read apart (as `fsops.read_bytes` opens
    a file): the rows are not copied out of the whole file's bytes, a few MB for a large
    folder, which a session_end pass loads to look up a few hundred rows."""
    fd = fsops.open_regular(path)
    try:
        head = os.read(fd, size)
        return head, fsops.read_open(fd, os.fstat(fd).st_size - size)
    finally:
        os.close(fd)


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
