"""Similar pairs within a block: texts made on demand, cached signatures and pair caches,
the text features the guards compare, and the semantic signal."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

from memcli.consolidate import rules
from memcli.consolidate.loading import FolderLoading
from memcli.consolidate.plantypes import DISCOVERY_FLOOR, Live
from memcli.consolidate.similar import (
    ALL_PAIRS_MAX,
    PairFilter,
    Subset,
    similar_pairs,
    sorted_tokens,
    tag_filter,
)
from memcli.store import paircache
from memcli.store.reading import peeked_content
from memcli.store.store import Folder


class BlockTexts(Sequence[str]):
    """The normalised texts of a block's memories, each made (and its file read) only when
    asked for: with cached signatures most memories of a large block are never compared."""

    def __init__(self, block: list[Live]) -> None:
        self.block = block
        self.made: dict[int, str] = {}
        self.sorted_made: dict[int, str] = {}

    def __len__(self) -> int:
        return len(self.block)

    def __getitem__(self, n: int) -> str:  # type: ignore[override]
        if n not in self.made:
            self.made[n] = rules.content_text(self.block[n].mem.content)
        return self.made[n]

    def peeked(self, n: int) -> str:
        """Text ``n`` (as ``self[n]``), its memory, when planned from its index entry and not
        read yet, keeping no record of the read (`reading.peeked_content`): for a dry run's
        large block, which reads most of its members' files only to sign their texts, and
        needs the records of the few it then guards or merges (read again then)."""
        found = self.made.get(n)
        if found is None:
            found = self.made[n] = rules.content_text(peeked_content(self.block[n].mem))
        return found

    def __iter__(self) -> Iterator[str]:
        return (self[n] for n in range(len(self.block)))

    def sorted_at(self, n: int) -> str:
        """Text ``n``'s tokens sorted (:func:`similar.sorted_tokens`), made once, for the
        scorer (``token_sort_ratio``): only a text whose pairs are scored needs them (its
        signature hashes the text as it is), and sorting a long text's tokens costs more than
        hashing its signature."""
        found = self.sorted_made.get(n)
        if found is None:
            found = self.sorted_made[n] = sorted_tokens(self[n])
        return found

    def sorted_len(self, n: int) -> int | None:
        """The length of text ``n``'s sorted-token string, known without reading its file: that
        string's own when made, else the index entry's (`Memory.cached_sort_len`); None when
        neither is at hand. Pair search drops by it the pairs whose lengths alone keep them
        below the cutoff, before their texts are read."""
        found = self.sorted_made.get(n)
        return len(found) if found is not None else self.block[n].mem.cached_sort_len()

    def lengths(self, members: list[int] | None = None) -> list[int]:
        """Text lengths (of `members` only, when given), from the index entries where the text
        is not at hand."""
        at = range(len(self.block)) if members is None else members
        out = [(n, self.block[n].mem.cached_text_len()) for n in at]
        return [len(self[n]) if value is None else value for n, value in out]



class _Peeked(Sequence[str]):
    """A block's texts as `BlockTexts.peeked` gives them."""

    def __init__(self, texts: BlockTexts) -> None:
        self.texts = texts

    def __len__(self) -> int:
        return len(self.texts)

    def __getitem__(self, n: int) -> str:  # type: ignore[override]
        return self.texts.peeked(n)


class TextLengths(Sequence[int]):
    """A block's text lengths (`BlockTexts.lengths`), each found when asked for: a dry run's
    large block asks only for those of the texts its pairs by tags and lengths need."""

    def __init__(self, texts: BlockTexts) -> None:
        self.texts = texts

    def __len__(self) -> int:
        return len(self.texts)

    def __getitem__(self, n: int) -> int:  # type: ignore[override]
        value = self.texts.block[n].mem.cached_text_len()
        return len(self.texts[n]) if value is None else value


class PairSearch(FolderLoading):
    """Finds a block's similar pairs, from caches where they cover it."""

    def _cover_rewritten(self) -> None:
        """(A real full run.) The folder's blocks as the run leaves them: memories it
        rewrote have new content, compared now against their block, so that the pair cache the
        run leaves behind covers them too and the next run compares nothing it need not. A
        dry run skips this: it leaves no cache."""
        if not self.opts.warm_caches or not self.pairs_found:
            return
        floor = DISCOVERY_FLOOR if self.opts.judge is not None else None
        blocks: dict[tuple[str, str, str], list[Live]] = {}
        for item in self.live.values():
            if rules.takes_part(item.mem):
                blocks.setdefault((item.folder.rel, item.mem.type, item.mem.subtype), []).append(item)
        for (rel, _, _), block in blocks.items():
            found = self.pairs_found.get(rel)
            if found is None or found[0] != self._pair_params(floor):
                continue
            hashes = [i.mem.content_hash for i in block]  # (pairs are by content: order plays no part)
            focus = [n for n, h in enumerate(hashes) if h not in found[1].covered]
            if not focus or len(set(hashes)) != len(hashes):
                continue
            texts = BlockTexts(block)
            sigs, lengths = self._large_block(block, texts)
            pairs = similar_pairs(texts, self.cfg.scorer, self.cfg.content_similarity, focus=focus,
                                  floor=floor, sigs=sigs, lengths=lengths, near=self._near(),
                                  allowed=self._tag_filter(block))
            found[1].covered.update(hashes[n] for n in focus)
            found[1].pairs.update(((hashes[i], hashes[j]), score) for (i, j), score in pairs.items())

    def _block_pairs(self, block: list[Live], texts: BlockTexts,
                     floor: float | None) -> dict[tuple[int, int], float]:
        """A block's similar pairs in a full run: those among memories the folder's pair cache
        covers come from it; only memories with a new content hash are compared (with the whole
        block). Gives exactly what comparing the whole block gives. A block whose members did
        not change is thus not compared again, whatever its size."""
        folder = block[0].folder
        params = self._pair_params(floor)
        cache = self._pair_cache_of(folder)
        hashes = [item.mem.content_hash for item in block]
        position = {h: n for n, h in enumerate(hashes)}
        usable = cache is not None and len(position) == len(hashes)  # equal files: compare them all
        focus = [n for n, h in enumerate(hashes) if not usable or h not in cache.covered]  # type: ignore[union-attr]
        found: dict[tuple[int, int], float] = {}
        if focus:
            allowed = self._tag_filter(block)
            sign = None
            lengths: Sequence[int] | None
            if self.opts.warm_caches or allowed is None or len(block) <= ALL_PAIRS_MAX:
                sigs, lengths = self._large_block(block, texts, None if self.opts.warm_caches else allowed)
            else:  # a dry run signs only the members it must (a real run signs all, for its cache)
                sigs, lengths = None, TextLengths(texts)
                sign = self._signer(block, texts)
            found = similar_pairs(texts, self.cfg.scorer, self.cfg.content_similarity, floor=floor,
                                  sigs=sigs, lengths=lengths, near=self._near(),
                                  focus=None if len(focus) == len(block) else focus, allowed=allowed,
                                  sign=sign)
        if usable and cache is not None:
            for (a, b), score in cache.pairs.items():
                if a in position and b in position:
                    i, j = sorted((position[a], position[b]))
                    found[(i, j)] = score
        if not self.opts.warm_caches:
            return found  # a dry run leaves no cache
        fresh = self.pairs_found.setdefault(folder.rel, (params, paircache.PairCache(set(), {})))[1]
        fresh.covered.update(hashes)
        fresh.pairs.update(((hashes[i], hashes[j]), score) for (i, j), score in found.items())
        return found

    def _pair_cache_of(self, folder: Folder) -> Any:
        """The folder's pair cache (paircache.PairCache, or None), loaded once."""
        if folder.rel not in self.pair_caches:
            floor = DISCOVERY_FLOOR if self.opts.judge is not None else None
            self.pair_caches[folder.rel] = paircache.load_pairs(folder.cache(), self._pair_params(floor))
        return self.pair_caches[folder.rel]

    def _large_block(self, block: list[Live], texts: BlockTexts,
                     allowed: PairFilter | None = None) -> tuple[list[bytes] | None, list[int] | None]:
        """Signatures and text lengths for a block that finds its candidates by LSH; a small
        block is scored all-pairs and needs neither (a signature costs more than its pairs).
        With `allowed`, only those of the memories it lets pair with another (the others are
        left empty: the search never looks at them)."""
        if len(block) <= ALL_PAIRS_MAX:
            return None, None
        if allowed is None:
            return self._sigs(block, texts), texts.lengths()
        members = allowed.members()
        sigs, lengths = [b""] * len(block), [0] * len(block)
        if not members:
            return sigs, lengths
        for n, sig, length in zip(members, self._sigs([block[n] for n in members], Subset(texts, members)),
                                  texts.lengths(members), strict=True):
            sigs[n], lengths[n] = sig, length
        return sigs, lengths

    def _signer(self, block: list[Live], texts: BlockTexts) -> Callable[[list[int]], list[bytes]]:
        """The signatures of the block's memories at given positions (cached ones, or made):
        a dry run's, whose memories keep no record read only to sign its text
        (`BlockTexts.peeked`)."""
        peeked = _Peeked(texts)

        def sign(at: list[int]) -> list[bytes]:
            return self._sigs([block[n] for n in at], Subset(peeked, at))

        return sign

    def _tag_filter(self, block: list[Live]) -> PairFilter | None:
        """The pairs of the block whose tags the duplicate rule could let through."""
        # (each memory's tags as its facts hold them: `Memory.tags` copies them into a list, and
        # a search ahead filters each block's members twice, as a block and by pieces)
        return tag_filter([item.mem.facts.get("tags") or () for item in block], self.cfg.tag_overlap)

    def _pair_params(self, floor: float | None) -> str:
        from memcli.consolidate import banding, similar  # (banding: the parameters alone, no numpy)

        # the cache holds only pairs whose tags overlap above tag_overlap (see _tag_filter)
        return (f"{self.cfg.scorer}|>{self.cfg.content_similarity}|floor={floor}|near={self._near()}"
                f"|tags>{self.cfg.tag_overlap}"
                f"|lsh={banding.DEFAULT_BANDS}x{banding.DEFAULT_ROWS}|agree={similar.MIN_AGREEMENT}"
                f"|short={similar.SHORT_TEXT}|sig={banding.SIGNATURE_KIND}")

    def _sigs(self, block: list[Live], texts: Sequence[str]) -> list[bytes]:
        """The block's signatures: cached by content hash, the missing ones computed in bulk
        and kept for the folder's cache."""
        from memcli.consolidate import candidates

        cache = self._folder_sigs(block[0].folder)
        for item in block:
            if item.sig is None:
                item.sig = cache.get(item.mem.content_hash)
        missing = [n for n, item in enumerate(block) if item.sig is None]
        made = candidates.signatures([texts[n] for n in missing])
        for n, sig in zip(missing, made, strict=True):
            block[n].sig = cache[block[n].mem.content_hash] = sig
        return [item.sig or b"" for item in block]

    def _guard(self, older: Live, newer: Live) -> str | None:
        """The first guard that rejects the pair; each text is analysed once a run."""
        from memcli.consolidate.guards import guard_rejects

        return guard_rejects(self._features(older), self._features(newer))

    def _features(self, item: Live) -> Any:
        """The memory's text features (guards.TextFeatures), made once for its block."""
        key = item.mem.content_hash
        if key not in self.features:
            from memcli.consolidate.guards import TextFeatures

            self.features[key] = TextFeatures(rules.raw_text(item.mem.content))
        return self.features[key]

    # ------------------------------------------------------------ text similarity, second looks

    def _near(self) -> float:
        return round(self.cfg.content_similarity - rules.SECOND_LOOK_BAND, 4)

    def _semantic_pairs(self, block: list[Live], texts: BlockTexts, pairs: dict[tuple[int, int], float],
                        focus: list[int] | None) -> dict[tuple[int, int], float]:
        """Pairs whose embeddings say they mean the same (cosine), that text similarity alone
        does not make duplicates; {} without the semantic signal."""
        if self.vectors is None or len(block) < 2 or focus == []:
            return {}
        from memcli.consolidate import semantic

        vectors = self.vectors.get([i.mem.content_hash for i in block],
                                   lambda n: rules.raw_text(block[n].mem.content))
        return semantic.meaning_pairs(vectors, pairs, self.cfg.content_similarity, focus=focus)
