"""session_end: what changed since the last run, and the duplicate candidates to read with it,
found from the last-run snapshot and the signature cache before any memory file is read."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

from memcli.consolidate import rules
from memcli.consolidate.similar import ALL_PAIRS_MAX
from memcli.store.index import SigCache, Snapshot
from memcli.store.model import Memory
from memcli.store.store import FolderScan, Stamp


def stamps(saved: Any) -> dict[str, Stamp]:
    """The listing stamps of ops/state.json; anything malformed is no stamp (a cache)."""
    if not isinstance(saved, dict):
        return {}
    return {str(rel): (int(s[0]), int(s[1])) for rel, s in saved.items()
            if isinstance(s, list) and len(s) == 2 and all(type(v) is int for v in s)}


class Row(NamedTuple):
    """One file of a folder as a session_end pass sees it before reading anything."""

    id: str
    file: str
    block: tuple[str, str]  # (type, subtype)
    digest: bytes  # content hash, 32 bytes
    unchanged: bool  # a snapshot row of a file unchanged since the last run (run hash = content hash)


def changed_ids(scan: FolderScan, flagged_ids: set[str]) -> set[str]:
    """The folder's memories in a session_end pass's scope: changed since the last run (read
    again, with a run hash not their content hash), and those of flagged pairs."""
    changed = {e["id"] for e in scan.entries if e.get("run_hash") != e["content_hash"]}
    return changed | (flagged_ids & present_ids(scan, flagged_ids))


def present_ids(scan: FolderScan, ids: set[str]) -> set[str]:
    """Which of `ids` the folder holds (flagged pairs are in scope wherever they are)."""
    if not ids:
        return set()
    found = {e["id"] for e in scan.entries if e["id"] in ids}
    if scan.snap is not None:
        kept = set(scan.kept)
        found |= {i for i in ids for ext in (".json", ".md") if scan.snap.row(i + ext) in kept}
    return found


class FocusRows:
    """The rows of the blocks holding a changed memory: the entries read again, as Rows, and
    the unchanged snapshot rows of those blocks, kept as row numbers. A large block holding a
    change has thousands of unchanged rows, of which a pass takes a few dozen (the candidates):
    a Row is made only for those (`with_candidates`); iterating gives every row, in order."""

    def __init__(self, fresh: list[Row], snap: Snapshot | None = None, kept: list[int] | None = None) -> None:
        self.fresh, self.snap, self.kept = fresh, snap, kept or []

    def __len__(self) -> int:
        return len(self.fresh) + len(self.kept)

    def __iter__(self) -> Iterator[Row]:
        yield from self.fresh
        yield from map(self.kept_row, self.kept)

    def kept_row(self, r: int) -> Row:
        """The Row of snapshot row r: unchanged, so its run hash is its content hash."""
        snap = self.snap
        assert snap is not None  # (only a snapshot has kept rows)
        name = snap.names[r]
        # (a Row without NamedTuple's Python-level __new__)
        return tuple.__new__(Row, (name[:name.rindex(".")], name, snap.blocks[snap.block_of[r]],
                                   snap.hashes[32 * r:32 * r + 32], True))

    def by_block(self) -> dict[tuple[str, str], tuple[list[Row], list[int]]]:
        """Each block's fresh rows and kept row numbers, blocks in the order of their first row."""
        blocks: dict[tuple[str, str], tuple[list[Row], list[int]]] = {}
        for row in self.fresh:
            blocks.setdefault(row.block, ([], []))[0].append(row)
        if self.kept:
            assert self.snap is not None
            import numpy as np  # (with_candidates, the caller, signs with it)

            # grouped as arrays: the kept rows of a large block are thousands, not a dict step each
            kept = np.asarray(self.kept, dtype=np.int64)
            codes = np.frombuffer(self.snap.block_of, dtype=f"u{self.snap.block_of.itemsize}")[kept]
            found, first = np.unique(codes, return_index=True)
            for code in found[np.argsort(first, kind="stable")].tolist():
                blocks.setdefault(self.snap.blocks[code], ([], []))[1].extend(kept[codes == code].tolist())
        return blocks


def focus_rows(scan: FolderScan, changed: set[str]) -> FocusRows:
    """The rows of the folder's blocks that hold a changed memory: entries as read, and the
    unchanged snapshot rows of those blocks (no entry, no hex, for the rest of the folder)."""
    fresh = [Row(e["id"], e["file"], (str(e.get("type")), str(e.get("subtype") or "")),
                 bytes.fromhex(e["content_hash"]), False) for e in scan.entries]
    snap = scan.snap
    if snap is None:
        blocks = {row.block for row in fresh if row.id in changed}
        return FocusRows([row for row in fresh if row.block in blocks])
    wanted = {snap.row(i + ext) for i in changed for ext in (".json", ".md")} - {None}
    blocks = {row.block for row in fresh if row.id in changed} | {snap.blocks[snap.block_of[r]]
                                                                   for r in wanted if r is not None}
    codes = {n for n, block in enumerate(snap.blocks) if block in blocks}
    block_of = snap.block_of
    return FocusRows([row for row in fresh if row.block in blocks], snap,
                     [r for r in scan.kept if block_of[r] in codes])


def with_candidates(rows: FocusRows | list[Row], changed: set[str], cache: SigCache,
                    read: Callable[[Row], Memory | None]) -> dict[str, Row]:
    """The changed memories' rows and those of their duplicate candidates: a whole block
    where it is small, else the LSH candidates of its changed members."""
    from memcli.consolidate import candidates

    focus_of = rows if isinstance(rows, FocusRows) else FocusRows(list(rows))
    snap = focus_of.snap
    # the unchanged rows in scope for a flagged pair (changed ids are all read again, fresh)
    flagged: set[int] = set()
    if snap is not None and focus_of.kept:
        flagged = {r for i in changed for ext in (".json", ".md") if (r := snap.row(i + ext)) is not None}
    needed = {row.id: row for row in focus_of.fresh if row.id in changed}
    if flagged:
        taken = sorted(flagged.intersection(focus_of.kept))
        needed.update((row.id, row) for row in map(focus_of.kept_row, taken))
    for fresh, kept in focus_of.by_block().values():
        if len(fresh) + len(kept) <= ALL_PAIRS_MAX:
            needed.update((row.id, row) for row in fresh)
            needed.update((row.id, row) for row in map(focus_of.kept_row, kept))
            continue

        def row_at(n: int, fresh: list[Row] = fresh, kept: list[int] = kept) -> Row:
            return fresh[n] if n < len(fresh) else focus_of.kept_row(kept[n - len(fresh)])

        focus = [n for n, row in enumerate(fresh) if row.id in changed]
        if flagged:
            focus += [len(fresh) + p for p, r in enumerate(kept) if r in flagged]
        hashes = snap.hashes if snap is not None else b""
        sigs = cached_sigs([row.digest for row in fresh], row_at, cache, read, hashes, kept)
        pairs = candidates.candidate_pairs_for(focus, sigs, None)
        needed.update((row.id, row) for row in (row_at(n) for pair in pairs for n in pair))
    return needed


def cached_sigs(digests: list[bytes], row_at: Callable[[int], Row], cache: SigCache,
                read: Callable[[Row], Memory | None], column: bytes = b"",
                kept: list[int] | None = None) -> list[bytes]:
    """Signatures of a block's rows from the folder's cache: first those of the content hashes
    `digests`, then those of the snapshot rows `kept` (their hashes in `column`, 32 bytes a
    row). The missing ones are read (`row_at` gives a position's Row) and computed in one
    go, and added to the cache."""
    from memcli.consolidate import candidates

    kept = kept or []
    sigs = cache.raw_many(digests) + cache.raw_rows(column, kept)
    first = len(digests)
    missing = [n for n, sig in enumerate(sigs) if sig is None]
    for n in missing:  # computed earlier in this run (not in the file yet)?
        digest = digests[n] if n < first else column[32 * kept[n - first]:32 * kept[n - first] + 32]
        sigs[n] = cache.added.get(digest.hex())
    missing = [n for n in missing if sigs[n] is None]
    memories = [read(row_at(n)) for n in missing]
    texts = ["" if mem is None else rules.content_text(mem.content) for mem in memories]
    for n, mem, sig in zip(missing, memories, candidates.signatures(texts), strict=True):
        sigs[n] = sig  # a file that could not be read: the signature of no text, not cached
        if mem is not None:
            cache[mem.content_hash] = sig
    return [sig or b"" for sig in sigs]
