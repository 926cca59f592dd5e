"""session_end: what changed since the last run, and the duplicate candidates to read with it,
found from the last-run snapshot and the signature cache before any memory file is read."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from memcli.consolidate import rules
from memcli.consolidate.similar import ALL_PAIRS_MAX
from memcli.store.index import SigCache
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


def focus_rows(scan: FolderScan, changed: set[str]) -> list[Row]:
    """The rows of the folder's blocks that hold a changed memory: entries as read, and the
    unchanged snapshot rows of those blocks (no entry, no hex, for the rest of the folder)."""
    fresh = [Row(e["id"], e["file"], (str(e.get("type")), str(e.get("subtype") or "")),
                 bytes.fromhex(e["content_hash"]), False) for e in scan.entries]
    snap = scan.snap
    if snap is None:
        blocks = {row.block for row in fresh if row.id in changed}
        return [row for row in fresh if row.block in blocks]
    wanted = {snap.row(i + ext) for i in changed for ext in (".json", ".md")} - {None}
    blocks = {row.block for row in fresh if row.id in changed} | {snap.blocks[snap.block_of[r]]
                                                                   for r in wanted if r is not None}
    codes = {n for n, block in enumerate(snap.blocks) if block in blocks}
    names, block_of, hashes, table = snap.names, snap.block_of, snap.hashes, snap.blocks
    rs = [r for r in scan.kept if block_of[r] in codes]
    make = tuple.__new__  # a Row without NamedTuple's Python-level __new__ (thousands of rows a block)
    kept = [make(Row, (name[:name.rindex(".")], name, table[block_of[r]], hashes[32 * r:32 * r + 32], True))
            for r, name in zip(rs, [names[r] for r in rs], strict=True)]
    return [row for row in fresh if row.block in blocks] + kept


def with_candidates(rows: list[Row], changed: set[str], cache: SigCache,
                    read: Callable[[Row], Memory | None]) -> dict[str, Row]:
    """The changed memories' rows and those of their duplicate candidates: a whole block
    where it is small, else the LSH candidates of its changed members."""
    from memcli.consolidate import candidates

    blocks: dict[tuple[str, str], list[Row]] = {}
    for row in rows:
        blocks.setdefault(row.block, []).append(row)
    needed = {row.id: row for row in rows if row.id in changed}
    for block in blocks.values():
        if len(block) <= ALL_PAIRS_MAX:
            needed.update((row.id, row) for row in block)
            continue
        focus = [n for n, row in enumerate(block) if row.id in changed]
        pairs = candidates.candidate_pairs_for(focus, cached_sigs(block, cache, read), None)
        needed.update((block[n].id, block[n]) for pair in pairs for n in pair)
    return needed


def cached_sigs(block: list[Row], cache: SigCache, read: Callable[[Row], Memory | None]) -> list[bytes]:
    """Signatures of a block's rows from the folder's cache; the missing ones are read and
    computed in one go, and added to the cache."""
    from memcli.consolidate import candidates

    sigs = [sig or cache.added.get(row.digest.hex())
            for row, sig in zip(block, cache.raw_many([row.digest for row in block]), strict=True)]
    missing = [n for n, sig in enumerate(sigs) if sig is None]
    memories = [read(block[n]) for n in missing]
    texts = ["" if mem is None else rules.content_text(mem.content) for mem in memories]
    for n, mem, sig in zip(missing, memories, candidates.signatures(texts), strict=True):
        sigs[n] = sig  # a file that could not be read: the signature of no text, not cached
        if mem is not None:
            cache[mem.content_hash] = sig
    return [sig or b"" for sig in sigs]

