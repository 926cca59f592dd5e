"""Candidate pairs for the duplicate rule: MinHash signatures and LSH banding.

Scoring every pair of a 100,000-memory store takes too long, so the engine scores only the
pairs this module proposes: pairs with the same normalised text (:func:`exact_key`), and
pairs whose MinHash signatures agree on all rows of at least one band (locality-sensitive
hashing).

What is hashed mirrors the default scorer. ``token_sort_ratio`` compares the texts' tokens
sorted and joined by spaces, character by character; so a text's shingles are the character
5-grams of that sorted-token string. Two texts above the merge threshold share most of those
n-grams, two unrelated texts few.

On planted near-duplicates of memory-like texts (20-400 words; reworded, words changed,
inserted or deleted, sentences reordered; see ``tests/test_candidates.py``), 48 bands of 4
rows found 99.9% of the pairs the exact rule (token_sort_ratio > 0.80) finds, with about
0.5% of all pairs as candidates. Fewer permutations cost recall or many more candidates:
at 64, 21 bands of 3 rows find 99.8% but propose 2.4 times as many pairs, 16 bands of 4
rows drop to about 97%. Pairs below the threshold are found less and less (similarity
0.70-0.80: about two thirds; 0.60-0.70: about 5%), so banding tuned for 0.80 is no way to
list a wider band such as the LLM's discovery band.

Everything is deterministic across processes and machines: the hashes are fixed arithmetic
on the text's code points with fixed seeds (never Python's salted ``hash()``), and a
signature is stored as little-endian bytes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence

import numpy as np
import numpy.typing as npt

__all__ = [
    "DEFAULT_BANDS",
    "DEFAULT_NUM_PERM",
    "DEFAULT_ROWS",
    "SHINGLE_CHARS",
    "candidate_pairs",
    "candidate_pairs_for",
    "exact_key",
    "signature",
    "signature_matrix",
    "sorted_tokens",
]

# Banding: a pair becomes a candidate when all DEFAULT_ROWS rows of one of DEFAULT_BANDS bands
# agree (see the module docstring for the recall this gives).
DEFAULT_BANDS = 48
DEFAULT_ROWS = 4
DEFAULT_NUM_PERM = DEFAULT_BANDS * DEFAULT_ROWS
# Character n-gram length of the shingles.
SHINGLE_CHARS = 5

_U64 = np.uint64
# Multiplier of the rolling n-gram hash (an odd 64-bit constant).
_NGRAM_BASE = _U64(0x100000001B3)
_SEED = 0x6D656D636C69  # "memcli": the fixed seed of the permutations
# A signature value keeps 16 bits of each minimum: two different minima agree by chance with
# probability 2**-16 per row, 2**-64 for a whole 4-row band, which adds no noticeable candidates.
_SIG_DTYPE = np.dtype("<u2")
_SIG_BITS = 16
_EMPTY = (1 << _SIG_BITS) - 1  # the signature value of a text with no shingles
_CHUNK = 4096  # shingles hashed at a time


def _splitmix64(values: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    """The SplitMix64 finaliser, a fixed bijective mixer of 64-bit values (wraps mod 2**64)."""
    z: npt.NDArray[np.uint64] = values ^ (values >> _U64(30))
    z = z * _U64(0xBF58476D1CE4E5B9)
    z = z ^ (z >> _U64(27))
    z = z * _U64(0x94D049BB133111EB)
    mixed: npt.NDArray[np.uint64] = z ^ (z >> _U64(31))
    return mixed


def _permutation_params(num_perm: int) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.uint64]]:
    """Multipliers (odd) and offsets of ``num_perm`` fixed hash functions, as columns.

    Function k depends on k alone, so a shorter signature is a prefix of a longer one.
    """
    counter = np.arange(2 * num_perm, dtype=_U64) + _U64(_SEED)
    mixed = _splitmix64(counter).reshape(num_perm, 2)
    return (mixed[:, 0] | _U64(1)).reshape(-1, 1), mixed[:, 1].reshape(-1, 1)


def sorted_tokens(norm_text: str) -> str:
    """The string ``token_sort_ratio`` compares: the text's tokens sorted, joined by spaces."""
    return " ".join(sorted(norm_text.split()))


def _shingle_hashes(norm_text: str) -> npt.NDArray[np.uint64]:
    """Distinct 64-bit hashes of the character n-grams of the sorted-token string."""
    text = sorted_tokens(norm_text)
    if not text:
        return np.empty(0, dtype=_U64)
    points = np.frombuffer(text.encode("utf-32-le"), dtype="<u4").astype(_U64)
    width = min(SHINGLE_CHARS, len(points))  # a text shorter than n is one shingle
    count = len(points) - width + 1
    rolling = np.zeros(count, dtype=_U64)
    with np.errstate(over="ignore"):  # the arithmetic is meant to wrap mod 2**64
        for offset in range(width):
            rolling = rolling * _NGRAM_BASE + points[offset : offset + count]
        return np.unique(_splitmix64(rolling))


def _minhash(hashes: npt.NDArray[np.uint64], num_perm: int) -> npt.NDArray[np.uint16]:
    """16 bits of the minimum of each of ``num_perm`` hash functions over the shingle hashes.

    Each function is multiply-add mod 2**64 applied to already mixed hashes; min-wise it
    behaves like an independent random permutation. The minimum is mixed once more before
    its low bits are kept: a minimum is a small number, so its own high bits are mostly zero
    and would make unrelated texts agree.
    """
    if hashes.size == 0:
        return np.full(num_perm, _EMPTY, dtype=np.uint16)
    multipliers, offsets = _permutation_params(num_perm)
    minima = np.full(num_perm, np.iinfo(np.uint64).max, dtype=_U64)
    # In chunks, so that a very long text (files go up to 10 MB) never needs a
    # num_perm x shingles matrix in memory.
    for start in range(0, hashes.size, _CHUNK):
        chunk = hashes[start : start + _CHUNK].reshape(1, -1)
        with np.errstate(over="ignore"):
            minima = np.minimum(minima, (chunk * multipliers + offsets).min(axis=1))
    low_bits: npt.NDArray[np.uint64] = _splitmix64(minima) & _U64(_EMPTY)
    return low_bits.astype(np.uint16)


def signature(norm_text: str, *, num_perm: int = DEFAULT_NUM_PERM) -> bytes:
    """MinHash signature of an already-normalised text (``default_process`` output).

    ``num_perm`` little-endian 16-bit values (384 bytes by default). It depends on the text
    alone, so it can be cached under the text's content hash and stored as hex in an index.
    """
    if num_perm < 1:
        raise ValueError("num_perm must be at least 1")
    return _minhash(_shingle_hashes(norm_text), num_perm).astype(_SIG_DTYPE).tobytes()


def exact_key(norm_text: str) -> str:
    """Hash (SHA-256, hex) of the normalised text: equal keys mean exact duplicates."""
    return hashlib.sha256(norm_text.encode("utf-8")).hexdigest()


def signature_matrix(signatures: Sequence[bytes]) -> npt.NDArray[np.uint16]:
    """Stack signatures into an (n, num_perm) array; all must have the same length."""
    if not signatures:
        return np.empty((0, 0), dtype=np.uint16)
    width = len(signatures[0])
    if width % _SIG_DTYPE.itemsize or any(len(s) != width for s in signatures):
        raise ValueError("signatures differ in length or are not whole 16-bit values")
    flat = np.frombuffer(b"".join(signatures), dtype=_SIG_DTYPE)
    return flat.reshape(len(signatures), width // _SIG_DTYPE.itemsize).astype(np.uint16)


def _band_keys(matrix: npt.NDArray[np.uint16], bands: int, rows: int) -> npt.NDArray[np.uint64]:
    """(bands, n) bucket keys: the rows of each band hashed into one 64-bit value."""
    if bands < 1 or rows < 1:
        raise ValueError("bands and rows must be at least 1")
    if matrix.shape[1] < bands * rows:
        raise ValueError(f"signatures have {matrix.shape[1]} values, bands * rows needs {bands * rows}")
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
    order = np.argsort(keys, kind="stable")
    ordered = keys[order]
    # Starts of runs of equal keys, and run lengths; only runs of 2 or more give pairs.
    starts = np.flatnonzero(np.concatenate(([True], ordered[1:] != ordered[:-1])))
    lengths = np.diff(np.append(starts, len(keys)))
    for start, length in zip(starts[lengths > 1], lengths[lengths > 1], strict=True):
        members = np.sort(order[start : start + length]).tolist()
        for pos, first in enumerate(members):
            for second in members[pos + 1 :]:
                yield first, second


def _exact_codes(keys: Sequence[str]) -> npt.NDArray[np.uint64]:
    """Small integer codes of exact keys: equal keys, equal codes."""
    codes: dict[str, int] = {}
    return np.array([codes.setdefault(key, len(codes)) for key in keys], dtype=_U64)


def _check_lengths(signatures: Sequence[bytes], keys: Sequence[str]) -> None:
    if len(signatures) != len(keys):
        raise ValueError("signatures and keys must have the same length")


def candidate_pairs(
    signatures: Sequence[bytes],
    keys: Sequence[str],
    *,
    bands: int = DEFAULT_BANDS,
    rows: int = DEFAULT_ROWS,
) -> set[tuple[int, int]]:
    """Index pairs (i, j), i < j, that share an exact key or an LSH band bucket.

    ``signatures[i]`` and ``keys[i]`` describe item i; uses the first ``bands * rows``
    values of each signature.
    """
    _check_lengths(signatures, keys)
    if len(keys) < 2:
        return set()
    pairs = set(_group_pairs(_exact_codes(keys)))
    for band_keys in _band_keys(signature_matrix(signatures), bands, rows):
        pairs.update(_group_pairs(band_keys))
    return pairs


def _pairs_with(keys: npt.NDArray[np.uint64], new: npt.NDArray[np.int64]) -> Iterable[tuple[int, int]]:
    """Pairs (i, j), i < j, of equal keys where i or j is in ``new``."""
    order = np.argsort(keys, kind="stable")
    ordered = keys[order]
    low = np.searchsorted(ordered, keys[new], side="left")
    high = np.searchsorted(ordered, keys[new], side="right")
    for item, lo, hi in zip(new.tolist(), low.tolist(), high.tolist(), strict=True):
        if hi - lo < 2:
            continue
        for other in order[lo:hi].tolist():
            if other != item:
                yield (item, other) if item < other else (other, item)


def candidate_pairs_for(
    new_idx: Iterable[int],
    signatures: Sequence[bytes],
    keys: Sequence[str],
    *,
    bands: int = DEFAULT_BANDS,
    rows: int = DEFAULT_ROWS,
) -> set[tuple[int, int]]:
    """The pairs of :func:`candidate_pairs` that involve at least one index of ``new_idx``.

    For an incremental pass over a few changed memories: the cost is one pass of hashing
    over all signatures plus the pairs found, not all bucket pairs.
    """
    _check_lengths(signatures, keys)
    new = np.unique(np.fromiter(new_idx, dtype=np.int64))
    if new.size and (new[0] < 0 or new[-1] >= len(keys)):
        raise IndexError("new_idx holds an index outside the signatures")
    if new.size == 0 or len(keys) < 2:
        return set()
    pairs = set(_pairs_with(_exact_codes(keys), new))
    for band_keys in _band_keys(signature_matrix(signatures), bands, rows):
        pairs.update(_pairs_with(band_keys, new))
    return pairs
