"""The signature cache (`sigcache`): appends that survive a torn row, and the lookups by
array and by binary search that give what the dict of every row gives."""

from __future__ import annotations

import os
from pathlib import Path

from memcli.store import sigcache


def test_signature_appends_survive_a_torn_last_row(tmp_path: Path) -> None:
    sigcache.add_sigs(tmp_path, {"aa" * 32: b"\1\2" * 4})  # no cache yet: written whole
    sigcache.add_sigs(tmp_path, {"bb" * 32: b"\3\4" * 4})
    assert sigcache.load_sigs(tmp_path).loaded() == {"aa" * 32: b"\1\2" * 4, "bb" * 32: b"\3\4" * 4}
    with open(tmp_path / sigcache.SIG_NAME, "ab") as handle:
        handle.write(b"\xcc" * 20)  # a crash in the middle of an append
    assert sigcache.load_sigs(tmp_path).loaded() == {"aa" * 32: b"\1\2" * 4, "bb" * 32: b"\3\4" * 4}
    sigcache.add_sigs(tmp_path, {"cc" * 32: b"\7\7" * 4})  # after a torn row: rewritten, aligned again
    assert sigcache.load_sigs(tmp_path).loaded() == {"aa" * 32: b"\1\2" * 4, "bb" * 32: b"\3\4" * 4,
                                         "cc" * 32: b"\7\7" * 4}
    sigcache.add_sigs(tmp_path, {"dd" * 32: b"\5\6" * 8})  # another width: the cache is rewritten
    assert sigcache.load_sigs(tmp_path).loaded() == {"dd" * 32: b"\5\6" * 8}


def test_a_cache_that_is_not_one_loads_empty(tmp_path: Path) -> None:
    """Anything but a cache of ours (cut short in its header, another magic, a width of 0, a
    FIFO, a link) loads as no cache: the run signs again, it never fails or waits."""
    path = tmp_path / sigcache.SIG_NAME
    good = b"MCSG2" + (8).to_bytes(2, "little") + b"\xaa" * 32 + b"\1" * 8
    for raw in (b"", b"MCS", b"MCSG2\x08", b"MCSG1" + good[5:], b"MCSG2\0\0" + good[7:]):
        path.write_bytes(raw)
        assert sigcache.load_sigs(tmp_path).loaded() == {}, raw
    path.write_bytes(good)
    assert sigcache.load_sigs(tmp_path).loaded() == {"aa" * 32: b"\1" * 8}
    path.unlink()
    os.mkfifo(path)
    assert sigcache.load_sigs(tmp_path).loaded() == {}
    path.unlink()
    (tmp_path / "elsewhere").write_bytes(good)
    path.symlink_to(tmp_path / "elsewhere")
    assert sigcache.load_sigs(tmp_path).loaded() == {}


def test_raw_many_is_raw_of_each(tmp_path: Path) -> None:
    sigs = {f"{n:064x}": bytes([n]) * 8 for n in range(1, 40)}
    sigcache.save_sigs(tmp_path, sigs)
    cache = sigcache.load_sigs(tmp_path)
    asked = [bytes.fromhex(f"{n:064x}") for n in (5, 0, 39, 40, 5, 1)]  # present, absent, repeated
    assert cache.raw_many(asked) == [cache.raw(d) for d in asked]
    assert cache.raw_many(asked) == [bytes([5]) * 8, None, bytes([39]) * 8, None, bytes([5]) * 8, bytes([1]) * 8]
    assert sigcache.SigCache().raw_many(asked[:2]) == [None, None]


def test_raw_rows_is_raw_of_each_row_of_a_hash_column(tmp_path: Path) -> None:
    import hashlib

    hashes = [hashlib.sha256(str(n).encode()).digest() for n in range(60)]
    sigcache.save_sigs(tmp_path, {h.hex(): bytes([n]) * 8 for n, h in enumerate(hashes[:40])})
    # appended later: a newer signature of a hash already there (the last row wins), and two more
    sigcache.add_sigs(tmp_path, {hashes[3].hex(): bytes([200]) * 8, hashes[45].hex(): bytes([45]) * 8})
    sigcache.add_sigs(tmp_path, {hashes[46].hex(): bytes([46]) * 8})
    column = b"".join(hashes)
    rows = [3, 0, 39, 40, 45, 46, 59, 3, 12]
    cache = sigcache.load_sigs(tmp_path)
    expected = [cache.raw(hashes[r]) for r in rows]
    assert expected[0] == bytes([200]) * 8 and expected[3] is None
    assert sigcache.load_sigs(tmp_path).raw_rows(column, rows) == expected  # before raw() built its dict
    assert cache.raw_rows(column, rows) == expected and cache.raw_rows(column, []) == []
    assert sigcache.SigCache().raw_rows(column, rows[:2]) == [None, None]
    searched = sigcache.load_sigs(tmp_path)
    searched.raw_rows(column, [0])  # rows sorted: later lookups search them, no dict is built
    assert [searched.raw(hashes[r]) for r in rows] == expected == searched.raw_many([hashes[r] for r in rows])
    assert searched._rows is None


def test_raw_rows_tells_hashes_with_the_same_first_bytes_apart(tmp_path: Path) -> None:
    sigs = {f"{n:064x}": bytes([n]) * 8 for n in range(1, 40)}  # every hash starts with 8 zero bytes
    sigcache.save_sigs(tmp_path, sigs)
    column = b"".join(bytes.fromhex(f"{n:064x}") for n in range(45))
    rows = [5, 0, 39, 40, 5, 1, 44]
    cache = sigcache.load_sigs(tmp_path)
    expected = [cache.raw(column[32 * r:32 * r + 32]) for r in rows]  # through the dict
    assert expected[:4] == [bytes([5]) * 8, None, bytes([39]) * 8, None]
    searched = sigcache.load_sigs(tmp_path)
    assert searched.raw_rows(column, rows) == expected
    assert [searched.raw(column[32 * r:32 * r + 32]) for r in rows] == expected and searched._rows is None
