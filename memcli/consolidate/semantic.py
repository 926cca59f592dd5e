"""The optional semantic signal: one embedding per memory text, cached by content hash.

Fuzzy scores see characters; two memories that say the same thing in other words ("Deploy to
staging before production" / "Always ship to staging first, then production") score low and
never merge. With the `semantic` extra installed (``pip install 'memcli[semantic]'``, which
brings WordLlama, a 256-dimension word-embedding model that ships its weights inside its wheel
and runs on numpy) and ``semantic = true`` under ``[consolidation]``, the duplicate rule also
takes a pair whose embeddings' cosine is above :data:`THRESHOLD`; the tag rule, the conflict
cases and every guard still apply, so a guard always vetoes.

The interface is small so that other stages (recall) can share it:

- :func:`available` says whether the extra is installed;
- :func:`embed` turns texts into unit vectors (float32, one row a text);
- :class:`VectorCache` keeps vectors by content hash under ``<store>/.cache/semantic/``, so that a
  text is embedded once for as long as it does not change;
- :func:`similar_pairs` finds the pairs of a block above a cosine threshold.

WordLlama 0.4 tries to download its model on a default ``load()``; it is loaded here from the
package's own folder with downloads disabled, so memcli never reaches the network.
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memcli.errors import MemcliError

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = [
    "DIM",
    "MODEL",
    "NOT_INSTALLED",
    "THRESHOLD",
    "VectorCache",
    "available",
    "embed",
    "meaning_pairs",
    "similar_pairs",
]

MODEL = "wordllama-l2_supercat"
DIM = 256
# Cosine above which two texts count as saying the same thing. Tuned on the MRPC train split
# (with the guards on, 0.86 merged 16 more different pairs of 1,191 for 123 more paraphrases,
# 0.88 merged 6 for 74, 0.90 merged 3 for 41) and on bench/pairs.jsonl (0.88: 10 more
# restatements of 179, no different pair).
THRESHOLD = 0.88
NOT_INSTALLED = ("semantic = true, but the semantic extra is not installed "
                 "(pip install 'memcli[semantic]'); using text similarity only")

_MAGIC = b"MEMCLI-VECTORS 1\n"
_model: Any = None


def available() -> bool:
    """True when the embedding model's package is installed."""
    return importlib.util.find_spec("wordllama") is not None


def _load() -> Any:
    global _model
    if _model is None:
        try:
            import wordllama
            from wordllama import WordLlama
        except ImportError as exc:  # pragma: no cover - callers check available() first
            raise MemcliError(NOT_INSTALLED) from exc
        folder = Path(wordllama.__file__).parent
        _model = WordLlama.load(cache_dir=folder, disable_download=True, dim=DIM)
    return _model


def embed(texts: Sequence[str]) -> npt.NDArray[np.float32]:
    """Unit vectors of ``texts``, one row each (float32, :data:`DIM` columns)."""
    import numpy as np

    if not texts:
        return np.zeros((0, DIM), dtype=np.float32)
    vectors = np.asarray(_load().embed(list(texts), norm=True), dtype=np.float32)
    return vectors.reshape(len(texts), DIM)


class VectorCache:
    """Vectors by content hash, in ``<store>/.cache/semantic/vectors.bin``.

    The file is a cache: a missing, foreign or damaged one is ignored and rebuilt. Rows are a
    32-byte content digest and :data:`DIM` float16 values (512 bytes): 100,000 memories take
    about 54 MB. :meth:`save` writes only when vectors were added, and keeps only the hashes
    it was asked about since it was loaded when ``prune`` is set (a full run).
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self.vectors: dict[bytes, Any] = {}
        self.used: set[bytes] = set()
        self.added = False
        self._load()

    @property
    def path(self) -> Path:
        from memcli.store.cache import cache_dir

        return cache_dir(self.root, "semantic") / "vectors.bin"

    def _load(self) -> None:
        import numpy as np

        try:
            raw = self.path.read_bytes()
            if not raw.startswith(_MAGIC):
                return
            header_end = raw.index(b"\n", len(_MAGIC)) + 1
            if json.loads(raw[len(_MAGIC):header_end]) != {"model": MODEL, "dim": DIM}:
                return
            rows = np.frombuffer(raw, dtype=_row_type(), offset=header_end,
                                 count=(len(raw) - header_end) // _row_type().itemsize)
        except (OSError, ValueError):
            return
        self.vectors = {bytes(row["digest"]): row["vector"] for row in rows}

    def get(self, hashes: Sequence[str], text_of: Callable[[int], str]) -> npt.NDArray[np.float32]:
        """Vectors for texts known by their content hashes, in order. ``text_of(n)`` gives the
        n-th text; it is called only for the texts the cache does not hold yet."""
        import numpy as np

        digests = [_digest(h) for h in hashes]
        self.used.update(digests)
        missing = [n for n, d in enumerate(digests) if d not in self.vectors]
        if missing:
            fresh = embed([text_of(n) for n in missing])
            for n, vector in zip(missing, fresh, strict=True):
                self.vectors[digests[n]] = vector.astype(np.float16)
            self.added = True
        if not digests:
            return np.zeros((0, DIM), dtype=np.float32)
        matrix = np.stack([self.vectors[d] for d in digests]).astype(np.float32)
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        normed: npt.NDArray[np.float32] = (matrix / np.where(norms == 0, 1, norms)).astype(np.float32)
        return normed  # float16 storage: normalised again

    def save(self, prune: bool = False) -> None:
        """Write the cache back if vectors were added (or, with ``prune``, if some are unused)."""
        import numpy as np

        keep = self.used if prune else set(self.vectors)
        if not self.added and keep >= set(self.vectors):
            return
        from memcli.store import fsops
        from memcli.store.cache import cache_dir

        cache_dir(self.root, "semantic", create=True)
        rows = np.zeros(len(keep), dtype=_row_type())
        for n, digest in enumerate(sorted(keep)):
            rows[n]["digest"] = digest
            rows[n]["vector"] = self.vectors[digest]
        header = json.dumps({"model": MODEL, "dim": DIM}).encode() + b"\n"
        fsops.write_replace(self.path, _MAGIC + header + rows.tobytes())
        self.added = False


def _row_type() -> Any:
    import numpy as np

    return np.dtype([("digest", "S32"), ("vector", "<f2", (DIM,))])


def _digest(content_hash: str) -> bytes:
    try:
        return bytes.fromhex(content_hash)[:32].ljust(32, b"\0")
    except ValueError:
        import hashlib

        return hashlib.sha256(content_hash.encode()).digest()


def similar_pairs(vectors: npt.NDArray[np.float32], threshold: float = THRESHOLD, *,
                  focus: Sequence[int] | None = None) -> dict[tuple[int, int], float]:
    """{(i, j): cosine} for i < j with cosine > ``threshold``; with ``focus``, only pairs
    that involve one of those rows. Rows are compared a chunk at a time, so memory stays
    flat however large the block."""
    import numpy as np

    rows = list(range(len(vectors))) if focus is None else sorted(set(focus))
    found: dict[tuple[int, int], float] = {}
    chunk = 1024
    for start in range(0, len(rows), chunk):
        part = rows[start:start + chunk]
        scores = vectors[part] @ vectors.T
        for r, col in zip(*np.nonzero(scores > threshold), strict=True):
            i, j = part[int(r)], int(col)
            if i != j:
                found[(min(i, j), max(i, j))] = round(float(scores[r, col]), 4)
    return found


def meaning_pairs(vectors: npt.NDArray[np.float32], text_pairs: dict[tuple[int, int], float],
                  threshold: float, *, focus: Sequence[int] | None = None) -> dict[tuple[int, int], float]:
    """The pairs of a block that mean the same (cosine above :data:`THRESHOLD`) and that text
    similarity alone (``text_pairs``, above ``threshold``) does not already make duplicates."""
    found = similar_pairs(vectors, THRESHOLD, focus=focus)
    return {key: cos for key, cos in found.items() if text_pairs.get(key, 0.0) <= threshold}
