"""Candidate pairs for the duplicate rule: MinHash signatures and LSH banding.

Scoring every pair of a 100,000-memory store takes too long, so the engine scores only the
pairs this module proposes: pairs with the same normalised text (:func:`exact_key`), and
pairs whose MinHash signatures agree on all rows of at least one band (locality-sensitive
hashing).

What is hashed mirrors the default scorer. ``token_sort_ratio`` compares the texts' tokens
sorted and joined by spaces, character by character, so a text's shingles are the character
5-grams of its tokens, each padded with a space on both sides (a token of one or two
characters is a shingle of its own): the same set whatever the order of the tokens, so a text
is hashed as it is, without sorting its tokens (see :func:`_bin_minima`). Two texts above the
merge threshold share most of those n-grams, two unrelated texts few.

On planted near-duplicates of memory-like texts (20-400 words; reworded, words changed,
inserted or deleted, sentences reordered; see ``tests/consolidate/test_candidates.py``), 48
bands of 4 rows found every pair the exact rule (token_sort_ratio > 0.80) finds (2,000 texts,
two seeds: 918 and 997 pairs; 3,000 texts: 1,592 pairs), with 0.8-1.0% of all pairs as
candidates; the true pairs' signatures agree on at least half their values. Pairs below the
threshold are found less and less (similarity 0.75-0.80: all 57 of them; 0.70-0.80: 78%;
0.60-0.70: about 7%), so banding tuned for 0.80 is no way to list a wider band such as the
LLM's discovery band. (The shingles of the sorted-token string, this module's signature until
2026-11-23, found 99.8-99.9% of the pairs above the threshold, 73% at 0.70-0.80, with 0.7-0.8%
of all pairs as candidates; with them, fewer permutations cost recall or many more candidates:
at 64, 21 bands of 3 rows found 99.8% but proposed 2.4 times as many pairs, 16 bands of 4 rows
about 97%.)

Everything is deterministic across processes and machines: the hashes are fixed arithmetic
on the text's code points with fixed seeds (never Python's salted ``hash()``), and a
signature is stored as little-endian bytes.
"""

from __future__ import annotations

import functools
import hashlib
import os
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from memcli.consolidate.banding import (
    DEFAULT_BANDS,
    DEFAULT_NUM_PERM,
    DEFAULT_ROWS,
    SHINGLE_CHARS,
    SIGNATURE_KIND,
)

try:  # the inner loop in C, built by `pip install` where a compiler is at hand (optional)
    from memcli.consolidate import _signing  # type: ignore[attr-defined]
except ImportError:
    _signing = None
if os.environ.get("MEMCLI_PURE"):  # (none of memcli's C loops: to compare the two ways)
    _signing = None

__all__ = [
    "DEFAULT_BANDS",
    "DEFAULT_NUM_PERM",
    "DEFAULT_ROWS",
    "SHINGLE_CHARS",
    "SIGNATURE_KIND",
    "banded_together",
    "candidate_pair_array",
    "candidate_pairs",
    "candidate_pairs_for",
    "exact_key",
    "signature",
    "signature_matrix",
    "signatures",
]

_U64 = np.uint64
_SEED = 0x6D656D636C69  # "memcli": the fixed seed of the permutations
# A signature value keeps 16 bits of each minimum: two different minima agree by chance with
# probability 2**-16 per row, 2**-64 for a whole 4-row band, which adds no noticeable candidates.
_SIG_DTYPE = np.dtype("<u2")
_SIG_BITS = 16
_EMPTY = (1 << _SIG_BITS) - 1  # the signature value of a text with no shingles
# Texts are hashed a chunk of about _CHARS_PER_CHUNK characters at a time: every step of the
# hashing is a pass over arrays of one value a character, and arrays of 64k values stay in the
# CPU's cache between passes, where chunks of a million characters did not (the passes then
# ran at memory speed: with 64-bit hashes of sorted-token strings, 20,000 texts of 2,300
# characters hashed in 2.4 s, against 1.1 s in chunks of 64k). Memory stays flat whatever the
# number or length of the texts. A chunk also costs about 150 us whatever its size (some fifty
# numpy calls): since the work arrays are reused (`_Work`), chunks of 128k characters sign
# long texts about 5% faster than chunks of 64k, and chunks of 16k half as fast again.
_CHARS_PER_CHUNK = 131_072
# ... and the densification runs on the bin minima of up to this many texts at once: its cost
# is mostly per call (a few dozen numpy calls, whatever the number of rows), but its (rows,
# bins) temporaries of 8 bytes a value weigh 0.8 MB each at 512 rows, 3 MB at 2,048 (which
# raised the peak of huge's cold dry run by 7 MB, and was no faster: 24 against 25-26 us a
# text of 630 characters).
_TEXTS_PER_CHUNK = 512
# (a chunk's bins are numbered in 32 bits: texts a chunk times num_perm stays far below 2**32)
_MAX_PERM = 1 << 16


def _splitmix64(values: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    """The SplitMix64 finaliser, a fixed bijective mixer of 64-bit values (wraps mod 2**64)."""
    mixed = np.array(values, dtype=_U64)  # (a copy: the mixing is in place)
    _splitmix64_into(mixed)
    return mixed


def signature(norm_text: str, *, num_perm: int = DEFAULT_NUM_PERM) -> bytes:
    """MinHash signature of an already-normalised text (``default_process`` output: tokens
    parted by spaces; the text's tokens in any order, and any runs of spaces, sign alike).

    ``num_perm`` little-endian 16-bit values (384 bytes by default). It depends on the text
    alone, so it can be cached under the text's content hash.
    """
    return signatures([norm_text], num_perm=num_perm)[0]


def signatures(norm_texts: Iterable[str], *, num_perm: int = DEFAULT_NUM_PERM) -> list[bytes]:
    """Signatures of many texts at once: the same values as :func:`signature`, computed in bulk.

    One-permutation hashing: every shingle is hashed once, falls into one of ``num_perm`` bins
    by its hash, and each bin keeps its smallest hash; an empty bin borrows from a non-empty
    one (see :func:`_densify`). Two texts' bins agree with a probability close to their
    shingle sets' Jaccard overlap, like classic MinHash, at a cost of one hash a shingle
    instead of ``num_perm``. Texts are done in chunks so that memory stays flat whatever their
    number.
    """
    if not 1 <= num_perm <= _MAX_PERM:
        raise ValueError(f"num_perm must be 1 to {_MAX_PERM}")
    # texts densified at once: _TEXTS_PER_CHUNK at the default width, fewer at a wider one (the
    # densification's work arrays hold a value a bin: 65,536 bins of 512 texts weigh GBs)
    batch = max(1, _TEXTS_PER_CHUNK * DEFAULT_NUM_PERM // num_perm)
    minima = np.empty((batch, num_perm), dtype=_U32)  # bin minima of the texts not yet densified
    work = _Work()
    out: list[bytes] = []
    rows = 0
    chunk: list[str] = []
    size = 0
    for text in norm_texts:
        chunk.append(text)
        size += len(text)
        if size >= _CHARS_PER_CHUNK or rows + len(chunk) == batch:
            _bin_minima_into(chunk, minima[rows : rows + len(chunk)], work)
            rows += len(chunk)
            chunk, size = [], 0
            if rows == batch:
                out.extend(_signature_bytes(minima))
                rows = 0
    if chunk:
        _bin_minima_into(chunk, minima[rows : rows + len(chunk)], work)
        rows += len(chunk)
    if rows:
        out.extend(_signature_bytes(minima[:rows]))
    return out


class _Work:
    """Work arrays reused from one chunk of texts to the next. Allocating a chunk's arrays
    afresh each time cost more than some of the passes over them: arrays of a few hundred KB
    come from and go back to the system (60,000 page faults signing 20,000 long texts, 0.09 s
    of system time, 0.5 s with chunks twice as large)."""

    def __init__(self) -> None:
        self.arrays: dict[str, npt.NDArray[np.generic]] = {}

    def get(self, name: str, size: int, dtype: type[np.generic]) -> npt.NDArray[Any]:
        """A work array of `size` values (contents undefined), the same storage each call."""
        found = self.arrays.get(name)
        if found is None or len(found) < size:
            found = self.arrays[name] = np.empty(size + size // 4, dtype=dtype)
        return found[:size]


def _signature_bytes(minima: npt.NDArray[np.uint32]) -> list[bytes]:
    """The signatures of texts whose bin minima are these rows."""
    values = _densify(minima)
    width = values.shape[1] * _SIG_DTYPE.itemsize
    # (slices of one bytes object: a row's own tobytes() costs a view and a call, 1-2 us a text)
    flat = values.astype(_SIG_DTYPE, copy=False).tobytes()
    return [flat[at : at + width] for at in range(0, len(flat), width)]


_U32 = np.uint32
# The shingles are hashed in 32 bits (a third faster than in 64: every pass moves half the
# bytes): distinct shingles of one block collide about once in 2**32 pairs, and a signature
# keeps 16 bits of a bin's minimum anyway. The rolling hash's multiplier is the 32-bit FNV
# prime; its square (mod 2**32) makes a 4-gram's hash from two 2-gram hashes.
_NGRAM_BASE = _U32(0x01000193)
_NGRAM_BASE_2 = _U32((int(_NGRAM_BASE) ** 2) % (1 << 32))
_MAX32 = _U32(np.iinfo(np.uint32).max)
_SPACE = 0x20


def _bin_minima(texts: list[str], bins: int) -> npt.NDArray[np.uint32]:
    """(len(texts), bins) smallest quotient of each bin (``_MAX32``: empty) for normalised
    texts (see :func:`_bin_minima_into`)."""
    minima = np.empty((len(texts), bins), dtype=_U32)
    _bin_minima_into(texts, minima, _Work())
    return minima


def _bin_minima_into(texts: list[str], minima: npt.NDArray[np.uint32], work: _Work) -> None:
    """Fill `minima` (len(texts), bins) with the smallest quotient of each bin (``_MAX32``:
    empty) for normalised texts (:func:`_bin_minima_numpy`): in C where the package's
    extension was built (`_signing`: each block of a text's windows hashed in one vectorised
    loop, then offered to its bins), else with numpy."""
    n = SHINGLE_CHARS
    if n != 5:  # (both ways are written for 5-grams)
        raise AssertionError("SHINGLE_CHARS is 5")
    if not minima.flags.c_contiguous:  # (filled through a flat view)
        raise ValueError("minima must be C-contiguous")
    if _signing is not None and minima.dtype == _U32:
        _signing.bin_minima_into(texts, minima, minima.shape[1])
    else:
        _bin_minima_numpy(texts, minima, work)


def _bin_minima_numpy(texts: list[str], minima: npt.NDArray[np.uint32], work: _Work) -> None:
    """Fill `minima` (len(texts), bins) with the smallest quotient of each bin (``_MAX32``:
    empty) for normalised texts: every shingle of a text (:data:`SHINGLE_CHARS`) is hashed (a
    polynomial in its code points, then the MurmurHash3 finaliser, mod 2**32), falls into bin
    ``hash % bins`` and offers ``hash // bins``.

    The shingles are the 5-grams of each token padded with a space on both sides (" word "
    gives " word" and "word "), and a token of one or two characters is one shingle of its own
    (" a ", " ab "). No shingle crosses from one token into another, so a text's shingles are
    the same set whatever the order of its tokens and however many spaces part them: the
    sorted tokens ``token_sort_ratio`` compares give the same signature as the text itself,
    which is hashed as it is (sorting a long text's tokens costs more than hashing it).

    The texts are joined by spaces: a 5-gram whose three inner characters hold no space lies
    within one token of one text, the others are dropped. Every step is one pass of a numpy
    operation over the chunk, into `work`'s arrays or in place (each temporary would be
    written and read once more, and allocated)."""
    n = SHINGLE_CHARS
    bins = minima.shape[1]
    # (a space before the first text and enough after the last for every window to exist)
    joined = " " + " ".join(texts) + "    "
    points = np.frombuffer(joined.encode("utf-32-le"), dtype="<u4")
    count = len(points) - n + 1  # windows: 5 characters from position p
    space = np.equal(points, _SPACE, out=work.get("space", len(points), np.bool_))
    # a window is kept when its 3 inner characters are in a token, or when a token of 1 or 2
    # characters starts at p + 1 (its padded form ends at p + 2 or p + 3: `short`)
    ends_soon = np.bitwise_or(space[1 : count + 1], space[2 : count + 2],
                              out=work.get("ends", count, np.bool_))
    ends_soon |= space[3 : count + 3]
    # (booleans: a & ~b is a > b; and as `short` lies within `ends_soon`, ~ends_soon | short
    # is ends_soon <= short)
    short = np.greater(space[:count], space[1 : count + 1], out=work.get("short", count, np.bool_))
    short &= ends_soon
    keep = np.less_equal(ends_soon, short, out=ends_soon)
    # (the arithmetic wraps mod 2**32, as meant: numpy's integer arrays do so silently, only
    # its scalars warn; and an errstate costs a few us a chunk)
    # p0 B^4 + p1 B^3 + p2 B^2 + p3 B + p4 in six passes: 2-grams p0 B + p1, 4-grams
    # (p0 B + p1) B^2 + p2 B + p3, 5-grams B * 4-gram + p4
    hashes, scratch = work.get("hashes", count + 3, _U32), work.get("fours", count + 3, _U32)
    np.multiply(points[:-1], _NGRAM_BASE, out=hashes)
    hashes += points[1:]
    np.multiply(hashes[: count + 1], _NGRAM_BASE_2, out=scratch[: count + 1])
    scratch[: count + 1] += hashes[2:]
    fours, hashes = scratch[:count], hashes[:count]
    # a short token's shingle is its padded form's 4-gram, the character after the padding
    # taken out for a token of one character (" a " and a NUL)
    short_at = np.flatnonzero(short)
    one = space[short_at + 2]
    padded = fours[short_at] - np.where(one, points[short_at + 3], 0).astype(_U32)
    np.multiply(fours, _NGRAM_BASE, out=hashes)
    hashes += points[n - 1 :]
    hashes[short_at] = padded
    kept = np.flatnonzero(keep)
    hashes = hashes.take(kept, out=work.get("kept", len(kept), _U32), mode="clip")
    # the first slot of the row of each kept window's text: a text's windows are those
    # from the space before it to its last character (that of their character p + 1)
    lengths = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts)) + 1
    starts = np.cumsum(lengths) - lengths
    bounds = np.searchsorted(kept, starts).tolist()
    row = kept  # (the windows' positions, no longer needed: a new array costs page faults)
    for first, (start, end) in enumerate(zip(bounds, bounds[1:] + [len(kept)], strict=True)):
        row[start:end] = first * bins
    scratch = work.get("scratch", len(kept), _U32)
    _mix32_into(hashes, scratch)
    quotient = np.floor_divide(hashes, _U32(bins), out=work.get("quotient", len(kept), _U32))
    # slot = row + hash % bins = hash - quotient * bins + row: a multiply, a subtraction
    # and an addition (hash % bins would be a real division a shingle; hash // bins is a
    # multiply and shift, numpy divides by a constant that way); in 64 bits, which
    # minimum.at takes as they are (it converts 32-bit indices first)
    np.multiply(quotient, _U32(bins), out=scratch)
    hashes -= scratch
    slot = np.add(hashes, row, out=row)
    flat = minima.reshape(-1)
    flat.fill(_MAX32)
    np.minimum.at(flat, slot, quotient)


def _mix32_into(z: npt.NDArray[np.uint32], scratch: npt.NDArray[np.uint32]) -> None:
    """MurmurHash3's 32-bit finaliser of `z` in place (a fixed bijective mixer; `scratch`: a
    work array of the same size)."""
    _shift_multiply_into(z, scratch, (_U32(16), _U32(13), _U32(16)), (_U32(0x85EBCA6B), _U32(0xC2B2AE35)))


def _shift_multiply_into(z: npt.NDArray[Any], scratch: npt.NDArray[Any], shifts: tuple[Any, Any, Any],
                         factors: tuple[Any, Any]) -> None:
    """The finaliser both mixers share, in place: ``z ^= z >> s0; z *= f0; z ^= z >> s1;
    z *= f1; z ^= z >> s2`` (`scratch`: a work array of z's size and type). The products wrap
    (mod 2**32 or 2**64), silently for arrays."""
    for n, shift in enumerate(shifts):
        np.right_shift(z, shift, out=scratch)
        z ^= scratch
        if n < len(factors):
            z *= factors[n]


def _densify(minima: npt.NDArray[np.uint32]) -> npt.NDArray[np.uint16]:
    """Fill each empty bin from a non-empty one, then keep 16 mixed bits of each value.

    "Optimal densification": empty bin j probes bins in its own fixed pseudo-random order and
    borrows the first non-empty one's value, salted by j. Neighbouring empty bins thus borrow
    from unrelated bins, so that the bins of a short text stay nearly independent (borrowing
    from the next bin on the right would make whole LSH bands copies of one value).
    """
    rows, bins = minima.shape
    flat = minima.ravel()
    filled = flat != _MAX32
    values = flat.astype(_U64)
    # Only the empty bins probe, each until it finds a non-empty one, and all in flat
    # positions (row * bins + bin): a short text leaves a third or more of its bins empty, and
    # indexing (rows, bins) arrays by pairs of index arrays cost three times as much.
    empty = np.flatnonzero(~filled)
    if empty.size:
        column = empty % bins
        source = _probe(filled, empty - column, column, bins)
        salt = (column + 1).astype(_U64)
        with np.errstate(over="ignore"):
            salt *= _U64(0x9E3779B97F4A7C15)
        salt ^= values.take(source)
        values[empty] = salt
    _splitmix64_into(values)
    mixed = values.astype(np.uint16)  # (the low 16 bits)
    # _EMPTY means "no shingles": a text with shingles never takes it, one without always does
    np.minimum(mixed, _U16(_EMPTY - 1), out=mixed)
    out = mixed.reshape(rows, bins)
    if empty.size:
        out[~filled.reshape(rows, bins).any(axis=1)] = _EMPTY
    return out


_U16 = np.uint16


# Once the empty bins still probing times their probes left are at most this many, they try
# all those probes at once: the last few bins of a batch (or the many of one short text) would
# otherwise cost a round of numpy calls each probe, up to 24 of them (0.6 ms for a text of 80
# characters signed alone).
_PROBE_AT_ONCE = 8192


def _probe(filled: npt.NDArray[np.bool_], base: npt.NDArray[np.int64], column: npt.NDArray[np.int64],
           bins: int) -> npt.NDArray[np.int64]:
    """For empty bins at flat positions ``base + column`` (``base``: their row's first), the
    flat position of the bin each borrows from: the first non-empty one of its probe order
    (:func:`_probe_order`), else the first non-empty bin of its row (a text of a few
    shingles), else the row's first bin (a text without shingles: its value is replaced)."""
    order = _probe_order(bins)
    attempts = order.shape[1]
    source = np.empty(len(base), dtype=np.int64)
    waiting = np.arange(len(base))  # positions (in `base`) still probing
    for first in range(attempts):
        if len(waiting) * (attempts - first) <= _PROBE_AT_ONCE:
            tried = order[:, first:].take(column, axis=0)  # (waiting, probes left)
            tried += base[:, None]
            hit = filled.take(tried)
            at = hit.argmax(axis=1)  # the first probe that found one (0 also when none did)
            rows = np.arange(len(at))
            found = np.flatnonzero(hit[rows, at])
            source[waiting.take(found)] = tried[found, at.take(found)]
            missed = np.flatnonzero(~hit.any(axis=1))
            waiting, base = waiting.take(missed), base.take(missed)
            break
        tried = base + order[:, first].take(column)
        hit = filled.take(tried)
        found = np.flatnonzero(hit)
        source[waiting.take(found)] = tried.take(found)
        if len(found) == len(waiting):
            return source
        missed = np.flatnonzero(~hit)
        waiting, base, column = waiting.take(missed), base.take(missed), column.take(missed)
    # (the first non-empty bin of each row, once a row: an array of the waiting bins' rows
    # would hold waiting times bins values, GBs for a short text at tens of thousands of bins)
    if len(waiting):
        first_filled = filled.reshape(-1, bins).argmax(axis=1)
        source[waiting] = base + first_filled.take(base // bins)
    return source


def _splitmix64_into(z: npt.NDArray[np.uint64]) -> None:
    """:func:`_splitmix64` of `z` in place (one work array instead of a temporary an operation)."""
    _shift_multiply_into(z, np.empty_like(z), (_U64(30), _U64(27), _U64(31)),
                         (_U64(0xBF58476D1CE4E5B9), _U64(0x94D049BB133111EB)))


@functools.lru_cache(maxsize=8)
def _probe_order(bins: int, attempts: int = 24) -> npt.NDArray[np.int64]:
    """For each bin, a fixed pseudo-random sequence of bins to borrow from (read only)."""
    seeds = np.arange(bins * attempts, dtype=_U64) + _U64(_SEED)
    order = (_splitmix64(seeds) % _U64(bins)).astype(np.int64).reshape(bins, attempts)
    order.setflags(write=False)  # shared by every call (cached)
    return order


def exact_key(norm_text: str) -> str:
    """Hash (SHA-256, hex) of the normalised text: equal keys mean exact duplicates."""
    return hashlib.sha256(norm_text.encode("utf-8")).hexdigest()


def signature_matrix(signatures: Sequence[bytes]) -> npt.NDArray[np.uint16]:
    """Stack signatures into an (n, num_perm) array; all must have the same length."""
    if not signatures:
        return np.empty((0, 0), dtype=np.uint16)
    width = len(signatures[0])
    if width % _SIG_DTYPE.itemsize or len(set(map(len, signatures))) != 1:
        raise ValueError("signatures differ in length or are not whole 16-bit values")
    flat = np.frombuffer(b"".join(signatures), dtype=_SIG_DTYPE)
    return flat.reshape(len(signatures), width // _SIG_DTYPE.itemsize).astype(np.uint16)


def _band_keys(matrix: npt.NDArray[np.uint16], bands: int, rows: int) -> npt.NDArray[np.uint64]:
    """(bands, n) bucket keys: the rows of each band in one 64-bit value.

    Four 16-bit rows fit in 64 bits exactly, so the default banding packs them (a view of the
    signature bytes, no arithmetic): equal keys are then exactly equal bands. Wider bands are
    hashed into 64 bits."""
    if bands < 1 or rows < 1:
        raise ValueError("bands and rows must be at least 1")
    if matrix.shape[1] < bands * rows:
        raise ValueError(f"signatures have {matrix.shape[1]} values, bands * rows needs {bands * rows}")
    if rows * _SIG_BITS == 64:
        packed = np.ascontiguousarray(matrix[:, : bands * rows], dtype="<u2").view("<u8")
        return np.ascontiguousarray(packed.T).astype(_U64, copy=False)
    keys = np.empty((bands, matrix.shape[0]), dtype=_U64)
    with np.errstate(over="ignore"):
        for band in range(bands):
            key = np.full(matrix.shape[0], _U64(band + 1), dtype=_U64)
            for value in matrix[:, band * rows : (band + 1) * rows].T:
                key = _splitmix64(key ^ value.astype(_U64)) + _U64(0x9E3779B97F4A7C15)
            keys[band] = key
    return keys


def _group_pairs(keys: npt.NDArray[np.uint64]) -> Iterable[tuple[int, int]]:
    """All (i, j), i < j, of indices whose keys are equal."""
    pairs = _group_pair_array(keys)
    return zip(pairs[:, 0].tolist(), pairs[:, 1].tolist(), strict=True)


def _group_pair_array(keys: npt.NDArray[np.uint64]) -> npt.NDArray[np.int64]:
    """(m, 2) array of every (i, j), i < j, whose keys are equal in one row of `keys` (one
    row: one band; a 1-d array is one band), with repeats across rows. Made without a Python
    loop over pairs: all rows are sorted at once, runs of equal keys are grouped by length,
    and each length's pairs come from one upper-triangle index pattern."""
    keys = keys.reshape(-1, keys.shape[-1]) if keys.ndim > 1 else keys[None, :]
    bands, n = keys.shape
    order = np.argsort(keys, axis=1)  # the order within a run does not matter: pairs are (min, max)
    ordered = np.take_along_axis(keys, order, axis=1)
    is_start = np.ones((bands, n), dtype=bool)
    is_start[:, 1:] = ordered[:, 1:] != ordered[:, :-1]  # a run never spans two rows
    starts = np.flatnonzero(is_start.ravel())
    lengths = np.diff(np.append(starts, bands * n))
    flat = order.ravel()
    out = [np.empty((0, 2), dtype=np.int64)]
    for length in np.unique(lengths[lengths > 1]).tolist():
        first, second = np.triu_indices(length, k=1)
        at = starts[lengths == length][:, None]
        a, b = flat[at + first[None, :]].ravel(), flat[at + second[None, :]].ravel()
        out.append(np.stack([np.minimum(a, b), np.maximum(a, b)], axis=1))
    return np.concatenate(out).astype(np.int64, copy=False)


def candidate_pair_array(signatures: Sequence[bytes], *, bands: int = DEFAULT_BANDS,
                         rows: int = DEFAULT_ROWS) -> npt.NDArray[np.int64]:
    """The LSH pairs of :func:`candidate_pairs` (no exact keys) as a sorted (m, 2) array of
    unique (i, j), i < j: what a large block's scoring starts from, kept in numpy."""
    if len(signatures) < 2:
        return np.empty((0, 2), dtype=np.int64)
    n = len(signatures)
    pairs = _group_pair_array(_band_keys(signature_matrix(signatures), bands, rows))
    codes = np.unique(pairs[:, 0] * n + pairs[:, 1])
    return np.stack([codes // n, codes % n], axis=1)


def banded_together(signatures: Sequence[bytes], pairs: npt.NDArray[np.int64], *,
                    bands: int = DEFAULT_BANDS, rows: int = DEFAULT_ROWS) -> npt.NDArray[np.bool_]:
    """For each row (a, b) of `pairs` (indices into `signatures`), whether the two share a band:
    whether (min, max) is among :func:`candidate_pair_array` of the same signatures."""
    keys = _band_keys(signature_matrix(signatures), bands, rows)
    together: npt.NDArray[np.bool_] = (keys[:, pairs[:, 0]] == keys[:, pairs[:, 1]]).any(axis=0)
    return together


def _exact_codes(keys: Sequence[str]) -> npt.NDArray[np.uint64]:
    """Small integer codes of exact keys: equal keys, equal codes."""
    codes: dict[str, int] = {}
    return np.array([codes.setdefault(key, len(codes)) for key in keys], dtype=_U64)


def _check_lengths(signatures: Sequence[bytes], keys: Sequence[str] | None) -> None:
    if keys is not None and len(signatures) != len(keys):
        raise ValueError("signatures and keys must have the same length")


def candidate_pairs(
    signatures: Sequence[bytes],
    keys: Sequence[str] | None,
    *,
    bands: int = DEFAULT_BANDS,
    rows: int = DEFAULT_ROWS,
) -> set[tuple[int, int]]:
    """Index pairs (i, j), i < j, that share an exact key or an LSH band bucket.

    ``signatures[i]`` and ``keys[i]`` describe item i; uses the first ``bands * rows``
    values of each signature. ``keys`` may be None: equal texts have equal signatures and
    meet in every band anyway.
    """
    _check_lengths(signatures, keys)
    if len(signatures) < 2:
        return set()
    pairs = set(_group_pairs(_exact_codes(keys))) if keys is not None else set()
    found = candidate_pair_array(signatures, bands=bands, rows=rows)
    pairs.update(zip(found[:, 0].tolist(), found[:, 1].tolist(), strict=True))
    return pairs


def _pairs_with(keys: npt.NDArray[np.uint64], new: npt.NDArray[np.int64]) -> Iterable[tuple[int, int]]:
    """Pairs (i, j), i < j, sharing a key in any band (``keys`` is (bands, n)) where i or j is
    in ``new``: one comparison of every band against each new item, no sorting. (A vectorised
    lookup of all new items at once measured six times slower for tens of new items.)"""
    for item in new.tolist():
        hits = np.flatnonzero((keys == keys[:, item : item + 1]).any(axis=0)).tolist()
        for other in hits:
            if other != item:
                yield (item, other) if item < other else (other, item)


def candidate_pairs_for(
    new_idx: Iterable[int],
    signatures: Sequence[bytes],
    keys: Sequence[str] | None,
    *,
    bands: int = DEFAULT_BANDS,
    rows: int = DEFAULT_ROWS,
) -> set[tuple[int, int]]:
    """The pairs of :func:`candidate_pairs` that involve at least one index of ``new_idx``.

    For an incremental pass over a few changed memories: the cost is one pass of hashing
    over all signatures plus the pairs found, not all bucket pairs.
    """
    _check_lengths(signatures, keys)
    new = np.array(sorted(set(new_idx)), dtype=np.int64)  # (np.unique imports numpy.ma: 25 ms)
    if new.size and (new[0] < 0 or new[-1] >= len(signatures)):
        raise IndexError("new_idx holds an index outside the signatures")
    if new.size == 0 or len(signatures) < 2:
        return set()
    pairs = set(_pairs_with(_exact_codes(keys)[None, :], new)) if keys is not None else set()
    pairs.update(_pairs_with(_band_keys(signature_matrix(signatures), bands, rows), new))
    return pairs
