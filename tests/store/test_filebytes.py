"""filebytes: a file's bytes read a page at a time; fsops.Span: a run of a file copied."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from memcli.store import filebytes, fsops
from memcli.store.filebytes import FileBytes

DATA = b"".join(b'{"id":"mem_%03d","file":"mem_%03d.json","n":%d},' % (n, n, n) for n in range(60))


@pytest.fixture
def opened(tmp_path: Path) -> Iterator[tuple[int, bytes]]:
    path = tmp_path / "f"
    path.write_bytes(DATA)
    fd = os.open(path, os.O_RDONLY)
    yield fd, DATA
    os.close(fd)


@pytest.mark.parametrize("page", [1, 7, 64, 1 << 14])
def test_every_search_answers_as_bytes_does_whatever_the_page_size(
        opened: tuple[int, bytes], page: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(filebytes, "PAGE", page)
    fd, raw = opened
    paged = FileBytes(fd, len(raw))
    assert len(paged) == len(raw)
    for sub in (b'{"id":"', b'mem_059.json', b',{"id":"mem_030', b"absent", b"},"):
        for start, end in ((0, len(raw)), (5, 400), (100, 101), (len(raw) - 3, len(raw)), (0, 10**9)):
            assert paged.find(sub, start, end) == raw.find(sub, start, end), (sub, start, end)
    for start, stop in ((0, 0), (0, 10), (63, 129), (5, len(raw)), (len(raw) - 1, len(raw) + 50)):
        assert paged.slice(start, stop) == raw[start:stop]
    assert [paged.byte(n) for n in range(len(raw))] == list(raw)
    with pytest.raises(IndexError):
        paged.byte(len(raw))
    assert paged.startswith(b'{"id":"mem_001', raw.find(b'{"id":"mem_001'))
    assert not paged.startswith(b'{"id":"mem_001', 1)
    assert paged.endswith(b"},") and not paged.endswith(b"}") and not paged.endswith(b"x" * (len(raw) + 1))
    head = re.compile(rb'\{"id":"([^"\\]*)","file":"([^"\\]*)"')
    at = raw.find(b'{"id":"mem_042')
    found = paged.match(head, at)
    assert found is not None and found.groups() == (b"mem_042", b"mem_042.json")
    assert paged.match(head, at + 1) is None


def test_a_match_longer_than_its_first_window_is_found_in_the_rest(tmp_path: Path) -> None:
    long_name = b"x" * 10_000
    raw = b'{"id":"' + long_name + b'","file":"a.json"}'
    path = tmp_path / "f"
    path.write_bytes(raw)
    fd = os.open(path, os.O_RDONLY)
    try:
        found = FileBytes(fd, len(raw)).match(re.compile(rb'\{"id":"([^"\\]*)","file":"([^"\\]*)"'), 0)
    finally:
        os.close(fd)
    assert found is not None and found.group(1) == long_name


def test_a_file_shorter_than_the_size_it_was_opened_with_says_it_changed(opened: tuple[int, bytes]) -> None:
    fd, raw = opened
    paged = FileBytes(fd, len(raw) + 100)  # as if it lost 100 bytes since its fstat
    with pytest.raises(fsops.SpanChangedError):
        paged.slice(0, len(raw) + 100)


@pytest.fixture(params=[True, False], ids=["kernel copy", "through memory"])
def target(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A file holding b"old", to be replaced; spans copied by the kernel or through memory."""
    monkeypatch.setattr(fsops, "_copy_range", request.param and hasattr(os, "copy_file_range"))
    path = tmp_path / "out"
    path.write_bytes(b"old")
    return path


def test_a_span_writes_the_run_of_the_source_file_between_other_pieces(
        target: Path, opened: tuple[int, bytes]) -> None:
    fd, raw = opened
    pieces: list[fsops.Piece] = [b"head|", fsops.Span(fd, 10, 500), b"|mid|", fsops.Span(fd, 0, 3),
                                 b"|", fsops.Span(fd, len(raw) - 7, 7), b"|tail"]
    fsops.write_replace(target, iter(pieces))
    assert target.read_bytes() == b"head|" + raw[10:510] + b"|mid|" + raw[:3] + b"|" + raw[-7:] + b"|tail"
    assert len(fsops.Span(fd, 10, 500)) == 500


def test_a_span_past_the_end_of_its_file_writes_nothing_and_leaves_no_temporary_file(
        target: Path, opened: tuple[int, bytes]) -> None:
    fd, raw = opened
    short: list[fsops.Piece] = [b"head", fsops.Span(fd, len(raw) - 10, 20)]
    with pytest.raises(fsops.SpanChangedError):
        fsops.write_replace(target, iter(short))
    assert target.read_bytes() == b"old"
    assert sorted(p.name for p in target.parent.iterdir()) == ["f", "out"]


def test_a_kernel_that_refuses_to_copy_is_asked_no_more_and_the_bytes_go_through_memory(
        tmp_path: Path, opened: tuple[int, bytes], monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []

    def refuse(*args: object) -> int:
        calls.append(1)
        raise OSError(18, "Invalid cross-device link")  # EXDEV

    monkeypatch.setattr(fsops, "_copy_range", True)
    monkeypatch.setattr(os, "copy_file_range", refuse, raising=False)
    fd, raw = opened
    target = tmp_path / "out"
    for _ in range(2):
        fsops.write_replace(target, iter([fsops.Span(fd, 0, len(raw))]))
        assert target.read_bytes() == raw
    assert calls == [1] and fsops._copy_range is False
