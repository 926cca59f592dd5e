"""staged.Staged: many writes made durable together, with the guarantees of the single ones."""

from __future__ import annotations

import _thread
import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from memcli.store import fsops, letgo, staged


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "store"
    for sub in ("agent/a", "archive"):
        (root / sub).mkdir(parents=True)
    fsops.confine(root)
    return root


def _batch(root: Path) -> staged.Staged:
    folder = root / "agent" / "a"
    (folder / "old.json").write_bytes(b"old")
    (folder / "gone.json").write_bytes(b"gone")
    os.chmod(folder / "old.json", 0o600)
    batch = staged.Staged(root)
    batch.write_replace(folder / "old.json", b"new")
    batch.write_new(root / "archive" / "gone.json", b"gone")
    batch.unlink(folder / "gone.json")
    return batch


@pytest.mark.parametrize("syncfs", [True, False])
def test_nothing_changes_until_commit_then_everything_in_order(root: Path, syncfs: bool,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[str] = []
    monkeypatch.setattr(fsops, "SYNCFS_FROM", 1 if syncfs else 10_000)
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: synced.append("fsync") or real_fsync(fd))
    batch = _batch(root)
    folder = root / "agent" / "a"
    assert (folder / "old.json").read_bytes() == b"old" and (folder / "gone.json").exists()
    assert not (root / "archive" / "gone.json").exists() and synced == []  # staged: not even synced
    batch.commit()
    assert (folder / "old.json").read_bytes() == b"new"
    assert oct((folder / "old.json").stat().st_mode & 0o777) == oct(0o600)  # the mode is kept
    assert (root / "archive" / "gone.json").read_bytes() == b"gone" and not (folder / "gone.json").exists()
    assert not list(root.rglob("*" + fsops.TMP_SUFFIX))
    if syncfs:
        assert synced == []  # two syncfs calls, no fsync at all
    else:
        assert len(synced) == 2 + 2 + 2  # the two files, their folders; then the two folders named


def test_a_new_file_never_overwrites_and_discard_leaves_no_temporary_file(root: Path) -> None:
    (root / "archive" / "taken.json").write_bytes(b"mine")
    batch = staged.Staged(root)
    batch.write_new(root / "archive" / "taken.json", b"theirs")
    with pytest.raises(FileExistsError):
        batch.commit()
    batch.discard()
    assert (root / "archive" / "taken.json").read_bytes() == b"mine"
    assert not list(root.rglob("*" + fsops.TMP_SUFFIX))
    batch = _batch(root)
    batch.discard()
    assert (root / "agent" / "a" / "old.json").read_bytes() == b"old"
    assert not list(root.rglob("*" + fsops.TMP_SUFFIX))


def test_each_step_is_a_counted_change(root: Path) -> None:
    batch = _batch(root)
    before = fsops.change_count()
    batch.commit()
    assert fsops.change_count() - before == 1 + 2 + 1  # rename; link and unlink of the tmp; unlink


@pytest.mark.parametrize("syncfs", [True, False])
def test_keep_copy_links_a_file_with_one_name_and_copies_one_with_two(
        root: Path, syncfs: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fsops, "SYNCFS_FROM", 1 if syncfs else 10_000)
    folder = root / "agent" / "a"
    (folder / "one.json").write_bytes(b"one")
    (folder / "two.json").write_bytes(b"two")
    os.link(folder / "two.json", root / "elsewhere.json")  # a second name someone could edit in place
    batch = staged.Staged(root)
    batch.keep_copy(folder / "one.json", root / "archive" / "one.json")
    batch.keep_copy(folder / "two.json", root / "archive" / "two.json")
    assert not (root / "archive" / "one.json").exists()  # staged: nothing yet
    before = fsops.change_count()
    batch.commit()
    assert fsops.change_count() - before == 1 + 2  # a link; the copy's link and tmp unlink
    assert os.path.samefile(folder / "one.json", root / "archive" / "one.json")
    assert not os.path.samefile(folder / "two.json", root / "archive" / "two.json")
    # the memory is then replaced whole and another removed: the kept bytes stay as they were
    batch = staged.Staged(root)
    batch.write_replace(folder / "one.json", b"ONE")
    batch.unlink(folder / "two.json")
    batch.commit()
    assert (root / "archive" / "one.json").read_bytes() == b"one"
    assert (root / "archive" / "two.json").read_bytes() == b"two"
    assert (folder / "one.json").read_bytes() == b"ONE" and (folder / "one.json").stat().st_nlink == 1
    assert not list(root.rglob("*" + fsops.TMP_SUFFIX))


def test_keep_copy_copies_where_the_file_system_refuses_a_link(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = root / "agent" / "a"
    (folder / "one.json").write_bytes(b"one")
    batch = staged.Staged(root)
    batch.keep_copy(folder / "one.json", root / "archive" / "one.json")
    real_link = os.link

    def no_links(src: str, dst: str, **kwargs: object) -> None:
        if str(dst).endswith("one.json") and not str(src).endswith(fsops.TMP_SUFFIX):
            raise OSError(1, "Operation not permitted")
        real_link(src, dst, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "link", no_links)
    batch.commit()
    assert (root / "archive" / "one.json").read_bytes() == b"one"
    assert not os.path.samefile(folder / "one.json", root / "archive" / "one.json")
    with pytest.raises(FileExistsError):  # and a kept copy never overwrites a name
        batch = staged.Staged(root)
        batch.keep_copy(folder / "one.json", root / "archive" / "one.json")
        batch.commit()


def _fsync_targets(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """What each os.fsync is called on, by path (a file or a folder)."""
    synced: list[str] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: synced.append(os.readlink(f"/proc/self/fd/{fd}"))
                        or real_fsync(fd))
    return synced


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="names a descriptor's file through /proc")
def test_one_barrier_syncs_the_replaced_files_once_at_its_end(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = root / "agent" / "a"
    monkeypatch.setattr(fsops, "SYNCFS_FROM", 10_000)  # fsync by fsync, to see each
    synced = _fsync_targets(monkeypatch)
    start = fsops.change_count()
    with fsops.one_barrier(root):
        fsops.write_replace(folder / "x.json", b"1")
        fsops.write_replace(folder / "y.json", b"2")
        fsops.write_replace(folder / "x.json", b"3")
        assert synced == []  # in place already (atomic: tmp and rename), not yet durable
        assert (folder / "x.json").read_bytes() == b"3" and (folder / "y.json").read_bytes() == b"2"
    assert fsops.change_count() - start == 6  # the same changes as three plain writes: the same crash points
    assert sorted(synced) == [str(folder), str(folder / "x.json"), str(folder / "y.json")]  # (side by side)
    synced.clear()
    fsops.write_replace(folder / "z.json", b"4")  # outside: durable at once, as ever
    assert len(synced) == 2


def test_one_barrier_syncs_at_once_with_syncfs_for_many_files(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fsops, "SYNCFS_FROM", 2)
    calls: list[Path] = []
    monkeypatch.setattr(fsops, "_syncfs", lambda where: calls.append(where) or True)
    synced = _fsync_targets(monkeypatch) if os.path.isdir("/proc/self/fd") else []
    with fsops.one_barrier(root):
        for n in range(3):
            fsops.write_replace(root / "agent" / "a" / f"{n}.json", b"x")
    assert calls == [root] and synced == []


def test_one_barrier_after_an_error_leaves_the_syncing_to_whoever_redoes_it(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[object] = []
    monkeypatch.setattr(fsops, "_barrier", lambda *args: calls.append(args))
    with pytest.raises(RuntimeError), fsops.one_barrier(root):
        fsops.write_replace(root / "agent" / "a" / "x.json", b"1")
        raise RuntimeError("disk full")
    assert calls == []
    assert fsops._deferred == {}  # and later writes are durable at once again


def test_one_barrier_is_per_thread(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two recoveries in one process (the crash tests run them on threads): each barrier
    covers its own thread's files, and one ending does not end the other's."""
    import threading

    barriers: list[list[Path]] = []
    monkeypatch.setattr(fsops, "_barrier", lambda _root, files, _folders: barriers.append(sorted(files)))
    inside, done = threading.Event(), threading.Event()
    folder = root / "agent" / "a"

    def other() -> None:
        with fsops.one_barrier(root):
            fsops.write_replace(folder / "b.json", b"b")
            inside.set()
            done.wait(10)

    thread = threading.Thread(target=other)
    with fsops.one_barrier(root):
        fsops.write_replace(folder / "a.json", b"a")
        thread.start()
        inside.wait(10)
        with fsops.one_barrier(root):  # nested: its own files, its own barrier
            fsops.write_replace(folder / "c.json", b"c")
    done.set()
    thread.join()
    fsops.write_replace(folder / "d.json", b"d")  # outside every barrier
    assert sorted(barriers) == [[folder / "a.json"], [folder / "b.json"], [folder / "c.json"]]


def test_write_replace_takes_pieces_and_an_error_half_way_changes_nothing(root: Path) -> None:
    path = root / "agent" / "a" / "x.json"
    fsops.write_replace(path, iter([b"ab", b"", b"cd"]))
    assert path.read_bytes() == b"abcd"

    def broken() -> Iterator[bytes]:
        yield b"half"
        raise TypeError("a value that cannot be written")

    with pytest.raises(TypeError):
        fsops.write_replace(path, broken(), durable=False)
    assert path.read_bytes() == b"abcd"
    assert [p.name for p in path.parent.iterdir()] == ["x.json"]  # no temporary file left


def test_ensure_parent_of_a_batch_syncs_the_folders_it_made_with_the_batch(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fsops, "SYNCFS_FROM", 10_000)
    synced = _fsync_targets(monkeypatch)
    (root / "agent" / "a" / "m.json").write_bytes(b"m")
    target = root / "archive" / "runs" / "r1" / "agent" / "a" / "m.json"
    batch = staged.Staged(root)
    start = fsops.change_count()
    batch.ensure_parent(target)
    assert target.parent.is_dir() and synced == []  # made, one change each, nothing synced yet
    assert fsops.change_count() - start == 4
    batch.ensure_parent(target)  # there already: nothing more
    assert fsops.change_count() - start == 4
    batch.keep_copy(root / "agent" / "a" / "m.json", target)
    batch.commit()
    made = [root / "archive", root / "archive" / "runs", root / "archive" / "runs" / "r1",
            root / "archive" / "runs" / "r1" / "agent"]
    assert {str(p) for p in made} <= set(synced)  # each new name durable with the batch
    assert str(target.parent) in synced and target.read_bytes() == b"m"


@contextlib.contextmanager
def _opened(root: Path, count: int) -> Iterator[list[int]]:
    """`count` small files in `agent/a`, open for reading (closed after)."""
    folder = root / "agent" / "a"
    fds = []
    try:
        for n in range(count):
            (folder / f"{n}.json").write_bytes(b"x")
            fds.append(os.open(folder / f"{n}.json", os.O_RDONLY))
        yield fds
    finally:
        for fd in fds:
            os.close(fd)


def test_fsync_together_syncs_every_descriptor_once_side_by_side(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each descriptor synced once, before it returns, on several threads at once (the file
    system then commits them together); a single one on the caller's own thread."""
    import threading

    synced: list[tuple[int, int]] = []
    real_fsync = os.fsync
    meet = threading.Barrier(2, timeout=10)  # the first two fsyncs must be in flight together
    lock = threading.Lock()

    def fsync(fd: int) -> None:
        with lock:
            synced.append((fd, threading.get_ident()))
            first_two = len(synced) <= 2
        if first_two:
            meet.wait()  # (BrokenBarrierError after 10 s if they ran one after the other)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    with _opened(root, 12) as fds:
        fsops.fsync_together(fds)
        assert sorted(fd for fd, _ in synced) == sorted(fds)
        assert len({thread for _, thread in synced[:2]}) == 2  # not one after the other on one thread
        monkeypatch.setattr(os, "fsync", lambda fd: synced.append((fd, threading.get_ident())) or real_fsync(fd))
        synced.clear()
        fsops.fsync_together(fds[:1])
        assert synced == [(fds[0], threading.get_ident())]
        synced.clear()
        fsops.fsync_together([])
        assert synced == []


def test_fsync_together_raises_the_first_error_after_every_fsync(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[int] = []

    def fsync(fd: int) -> None:
        synced.append(fd)
        if fd == bad:
            raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fsync", fsync)
    with _opened(root, 5) as fds:
        bad = fds[2]
        with pytest.raises(OSError, match="Input/output"):
            fsops.fsync_together(fds)
        assert sorted(synced) == sorted(fds)  # the others were still synced


def test_fsync_together_without_threads_does_them_itself(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_thread(*_args: object) -> None:
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(fsops._thread, "start_new_thread", no_thread)
    synced: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: synced.append(fd) or real_fsync(fd))
    with _opened(root, 3) as fds:
        fsops.fsync_together(fds)
        assert sorted(synced) == sorted(fds)


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="names a descriptor's file through /proc")
def test_renamed_after_barrier_puts_files_in_place_only_once_their_bytes_are_durable(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder, other = root / "agent" / "a", root / "archive"
    (folder / "x.json").write_bytes(b"old")
    monkeypatch.setattr(fsops, "SYNCFS_FROM", 10_000)  # fsync by fsync, to see each
    synced = _fsync_targets(monkeypatch)
    renamed: list[str] = []
    real_rename = os.rename
    monkeypatch.setattr(os, "rename", lambda src, dst, **kw: renamed.append(str(dst)) or real_rename(src, dst, **kw))
    start = fsops.change_count()
    with fsops.one_barrier(root):
        fsops.write_replace(folder / "cache.bin", b"c")  # a cache: in place at once, durable at the end
        with fsops.renamed_after_barrier():
            fsops.write_replace(folder / "x.json", b"new")
            fsops.write_replace(other / "y.json", b"y")
        # neither torn nor in place yet: the old bytes, the new ones in temporary files
        assert (folder / "x.json").read_bytes() == b"old" and not (other / "y.json").exists()
        assert renamed == ["cache.bin"] and synced == []
    assert fsops.change_count() - start == 6  # the same changes as three plain writes
    assert (folder / "x.json").read_bytes() == b"new" and (other / "y.json").read_bytes() == b"y"
    assert renamed == ["cache.bin", "x.json", "y.json"]  # in the order written, after the first barrier
    first, second = synced[:5], synced[5:]
    # the first barrier: the cache and both temporary files (and their folders); the second: the new names
    assert str(folder / "cache.bin") in first and {str(folder), str(other)} <= set(first)
    assert sum(Path(p).name.endswith(fsops.TMP_SUFFIX) for p in first) == 2
    assert sorted(second) == sorted([str(folder), str(other)])
    assert not [p for p in root.rglob("*") if p.name.endswith(fsops.TMP_SUFFIX)]


def test_renamed_after_barrier_after_an_error_leaves_the_old_files_and_no_temporary_one(root: Path) -> None:
    folder = root / "agent" / "a"
    (folder / "x.json").write_bytes(b"old")
    with pytest.raises(RuntimeError), fsops.one_barrier(root):
        with fsops.renamed_after_barrier():
            fsops.write_replace(folder / "x.json", b"new")
        raise RuntimeError("disk full")
    assert (folder / "x.json").read_bytes() == b"old"
    assert sorted(p.name for p in folder.iterdir()) == ["x.json"]
    assert fsops._late_names == {} and fsops._renaming == {}
    fsops.write_replace(folder / "x.json", b"later")  # and later writes are plain ones again
    assert (folder / "x.json").read_bytes() == b"later"


def test_a_failed_barrier_removes_the_temporary_files_it_would_have_renamed(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = root / "agent" / "a"

    def failing(*_args: object) -> None:
        raise OSError(5, "I/O error")

    monkeypatch.setattr(fsops, "_barrier", failing)
    with pytest.raises(OSError), fsops.one_barrier(root), fsops.renamed_after_barrier():
        fsops.write_replace(folder / "x.json", b"new")
    assert list(folder.iterdir()) == []


def test_renamed_after_barrier_needs_a_barrier(root: Path) -> None:
    with pytest.raises(RuntimeError, match="inside one_barrier"), fsops.renamed_after_barrier():
        pass


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="names a descriptor's file through /proc")
def test_append_within_one_barrier_is_durable_at_its_end(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = root / "agent" / "a" / "cache.bin"
    path.write_bytes(b"head")
    monkeypatch.setattr(fsops, "SYNCFS_FROM", 10_000)
    synced = _fsync_targets(monkeypatch)
    with fsops.one_barrier(root):
        fsops.append(path, b"+row")
        assert path.read_bytes() == b"head+row" and synced == []
    assert str(path) in synced
    synced.clear()
    fsops.append(path, b"+more")  # outside: durable at once, as ever
    assert synced == [str(path)]


def test_a_file_replaced_is_let_go_by_another_thread(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = root / "agent" / "a"
    big, small = folder / "big.json", folder / "small.json"
    big.write_bytes(b"x" * (1 << 20))
    small.write_bytes(b"y")
    held = {big.stat().st_ino: "big", small.stat().st_ino: "small"}
    closed: list[tuple[str, int]] = []  # (which, thread)
    real_close = os.close

    def close(fd: int) -> None:
        with contextlib.suppress(OSError):
            which = held.get(os.fstat(fd).st_ino)
            if which:
                closed.append((which, _thread.get_ident()))
        real_close(fd)

    monkeypatch.setattr(os, "close", close)
    start = fsops.change_count()
    fsops.write_replace(big, b"new big")
    fsops.write_replace(small, b"new small")
    assert letgo.released()
    monkeypatch.undo()
    assert fsops.change_count() - start == 4  # the same changes: a temporary file and a rename each
    assert big.read_bytes() == b"new big" and small.read_bytes() == b"new small"
    assert [which for which, _ in closed] == ["big", "small"]  # let go in the order replaced
    assert all(thread != _thread.get_ident() for _, thread in closed)  # by another thread
    if os.path.isdir("/proc/self/fd"):  # nothing held open any more
        names = [os.readlink(f"/proc/self/fd/{n}") for n in os.listdir("/proc/self/fd")
                 if os.path.exists(f"/proc/self/fd/{n}")]
        assert not [n for n in names if n.endswith("(deleted)") and str(folder) in n]


def test_a_file_with_another_name_is_not_held(root: Path) -> None:
    folder = root / "agent" / "a"
    big = folder / "big.json"
    big.write_bytes(b"x" * 100)
    os.link(big, root / "archive" / "kept.json")  # (as a run's pre-image is): replacing frees nothing
    handle = fsops._Dir(folder)
    try:
        assert letgo.hold(handle.at("big.json"), handle.dir_fd) is None
        assert letgo.hold(handle.at("missing.json"), handle.dir_fd) is None
    finally:
        handle.close()
    fsops.write_replace(big, b"new")
    assert (root / "archive" / "kept.json").stat().st_size == 100


def test_linkable_asks_the_device_of_a_folder_once_and_keep_copy_takes_the_answer(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = root / "agent" / "a"
    for name in ("one.json", "two.json"):
        (folder / name).write_bytes(name.encode())
    target = root / "archive" / "runs" / "r1" / "agent" / "a"
    near: dict[Path, int] = {}
    probes: list[str] = []
    real_lexists = os.path.lexists
    monkeypatch.setattr(os.path, "lexists", lambda p: probes.append(str(p)) or real_lexists(p))
    assert staged.Staged.linkable(folder / "one.json", target / "one.json", near)
    asked = len(probes)
    assert asked and near == {target: os.lstat(root).st_dev}
    assert staged.Staged.linkable(folder / "two.json", target / "two.json", near)
    assert len(probes) == asked  # the folder's device known: no probing again
    assert not staged.Staged.linkable(folder / "gone.json", target / "gone.json", near)
    monkeypatch.undo()
    batch = staged.Staged(root)
    batch.ensure_parent(target / "one.json")
    batch.keep_copy(folder / "one.json", target / "one.json", True)
    batch.keep_copy(folder / "two.json", target / "two.json", False)  # told to copy: copied
    batch.commit()
    assert os.path.samefile(folder / "one.json", target / "one.json")
    assert not os.path.samefile(folder / "two.json", target / "two.json")
    assert (target / "two.json").read_bytes() == b"two.json"


def test_a_memory_written_whole_keeps_its_mode_and_every_byte(root: Path) -> None:
    folder = root / "agent" / "a"
    (folder / "m.json").write_bytes(b"old")
    os.chmod(folder / "m.json", 0o600)
    data = os.urandom(300_000)  # larger than one write may take
    batch = staged.Staged(root)
    batch.write_replace(folder / "m.json", data)
    batch.write_new(folder / "n.json", data[:10])
    batch.commit()
    assert (folder / "m.json").read_bytes() == data and (folder / "n.json").read_bytes() == data[:10]
    assert (folder / "m.json").stat().st_mode & 0o777 == 0o600
