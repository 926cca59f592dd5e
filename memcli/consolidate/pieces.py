"""A large block's pair search cut into pieces that can be searched apart, exactly.

Rule 3.1 pairs two memories only when their tags overlap enough (`similar.PairFilter`), so a
block whose tag sets fall into groups that never pair across (the components of the filter's
graph of tag sets) has no similar pair between two groups. A piece made of whole groups, its
members in block order, is then searched as a block of its own: its pairs are exactly the
block's pairs among its members (every test of a pair depends on the pair alone: tags, lengths,
shared LSH band, agreement of signatures, score, second look, guards), provided it is searched
the same way, by signatures, which a piece of more than `similar.ALL_PAIRS_MAX` members is (a
smaller one would be scored all-pairs, which may find a pair LSH misses)."""

from __future__ import annotations

from collections import Counter

from memcli.consolidate.similar import ALL_PAIRS_MAX, PairFilter

LEAST = ALL_PAIRS_MAX + 1  # the fewest members a piece has (searched by signatures, as its block)
TARGET = 150  # about this many members a piece: small enough to share a folder's search evenly


def split(allowed: PairFilter | None, size: int, target: int | None = None) -> list[list[int]] | None:
    """The positions ``0..size-1`` of a block (with the tag filter `allowed`) in pieces of at
    least :data:`LEAST` and about `target` members that no allowed pair crosses, each in
    ascending order; None when the block is not cut (no filter, or one piece)."""
    if allowed is None or size < 2 * LEAST:
        return None
    root = list(range(max(allowed.labels, default=-1) + 1))

    def find(x: int) -> int:
        while root[x] != x:
            root[x] = root[root[x]]
            x = root[x]
        return x

    for a, b in sorted(allowed.linked):
        ra, rb = find(a), find(b)
        if ra != rb:
            root[max(ra, rb)] = min(ra, rb)
    groups = [find(label) for label in allowed.labels]
    sizes = Counter(groups)
    target = max(TARGET if target is None else target, LEAST)
    piece_of: dict[int, int] = {}
    filled: list[int] = []
    for group in groups:  # groups in the order of their first member; each whole in one piece
        if group in piece_of:
            continue
        if not filled or filled[-1] >= target:
            filled.append(0)
        piece_of[group] = len(filled) - 1
        filled[-1] += sizes[group]
    if len(filled) > 1 and filled[-1] < LEAST:  # (too small alone: joins the one before)
        last = len(filled) - 1
        piece_of = {g: (p if p < last else last - 1) for g, p in piece_of.items()}
        tail = filled.pop()
        filled[-1] += tail
    if len(filled) < 2:
        return None
    out: list[list[int]] = [[] for _ in filled]
    for n, group in enumerate(groups):
        out[piece_of[group]].append(n)
    return out
