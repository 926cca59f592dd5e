"""The signatures' inner loop in C (memcli/consolidate/_signing.c) against the numpy way and the
written-out reference: the same bin minima, value for value, for any text and any number of
bins; and the C loop refuses what it cannot fill, with an error, never a crash."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rapidfuzz.utils import default_process

from memcli.consolidate import candidates
from tests import sweep
from tests.consolidate.test_candidates import _reference_minima, make_corpus

_C = candidates._signing
needs_c = pytest.mark.skipif(_C is None, reason="the C extension was not built (no compiler at install)")


def _numpy(texts: list[str], bins: int) -> np.ndarray:
    out = np.empty((len(texts), bins), dtype=np.uint32)
    candidates._bin_minima_numpy(texts, out, candidates._Work())
    return out


def _c(texts: list[str], bins: int) -> np.ndarray:
    out = np.empty((len(texts), bins), dtype=np.uint32)
    assert _C is not None
    _C.bin_minima_into(texts, out, bins)
    return out


# Texts across the C loop's blocks of 256 windows (a text of n characters has n + 1), short
# tokens at a text's ends, runs of spaces, code points of every width.
_EDGE_TEXTS = ["", " ", "  ", "a", "ab", "abc", " a", "a ", "ab cd", "abc d", "x  yy   zzz  wwww",
               "é ü 漢字 x", "\U0001F600 smile \U0001F600", "a b c d e f",
               *("w" * n for n in (254, 255, 256, 257, 511, 512, 513)),
               *(("ab " * n)[:k] for n in (120, 200) for k in (255, 256, 257, 300)),
               " ".join(["deploy"] * 100) + " z"]


@needs_c
@pytest.mark.parametrize("bins", [1, 2, 3, 7, 192, 1000, 65_536])
def test_c_gives_the_numpy_minima_and_the_reference(bins: int) -> None:
    texts = _EDGE_TEXTS + [default_process(t) for t in make_corpus(30, seed=8)]
    got = _c(texts, bins)
    assert np.array_equal(got, _numpy(texts, bins))
    for row, text in zip(got.tolist()[:40], texts[:40], strict=True):
        assert row == _reference_minima(text, bins), text


@needs_c
@settings(max_examples=sweep.scale(60, 400), deadline=None)
@given(texts=st.lists(st.text(st.characters(blacklist_categories=("Cs",)), max_size=300), min_size=1,
                      max_size=6),
       bins=st.sampled_from([1, 2, 5, 64, 192, 4099]))
def test_c_and_numpy_agree_on_any_text(texts: list[str], bins: int) -> None:
    assert np.array_equal(_c(texts, bins), _numpy(texts, bins))


@needs_c
def test_signatures_are_the_same_either_way(monkeypatch: pytest.MonkeyPatch) -> None:
    texts = [default_process(t) for t in make_corpus(300, seed=3)] + _EDGE_TEXTS
    fast = candidates.signatures(texts)
    monkeypatch.setattr(candidates, "_signing", None)
    assert candidates.signatures(texts) == fast
    assert candidates.signatures(texts, num_perm=64) == candidates.signatures(texts, num_perm=64)


@needs_c
@pytest.mark.parametrize("out", [
    np.empty((2, 8), dtype=np.int64),
    np.empty((2, 8), dtype=np.float32),
    np.empty((2, 9), dtype=np.uint32),
    np.empty((3, 8), dtype=np.uint32),
    np.empty((2, 16), dtype=np.uint32)[:, ::2],
    b"\0" * 64,
])
def test_c_refuses_a_buffer_it_cannot_fill(out: object) -> None:
    with pytest.raises((ValueError, TypeError, BufferError)):
        _C.bin_minima_into(["ab", "cd"], out, 8)  # type: ignore[union-attr]


@needs_c
def test_c_refuses_texts_that_are_not_a_list_of_str() -> None:
    out = np.empty((2, 8), dtype=np.uint32)
    with pytest.raises(TypeError):
        _C.bin_minima_into(("ab", "cd"), out, 8)  # type: ignore[union-attr]
    with pytest.raises(TypeError):
        _C.bin_minima_into(["ab", b"cd"], out, 8)  # type: ignore[union-attr]
    with pytest.raises(ValueError):
        _C.bin_minima_into(["ab", "cd"], out, 0)  # type: ignore[union-attr]


def test_memcli_pure_takes_the_python_ways() -> None:
    code = ("from memcli.consolidate import candidates; from memcli.store import scanning; "
            "print(candidates._signing is None, scanning._lstat is None)")
    env = {**os.environ, "MEMCLI_PURE": "1"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True True"
