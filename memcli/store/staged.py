"""`Staged`: many atomic writes and removals made durable together (SPEC section 8).

A run's apply (`journal.execute`) stages its pre-images, its changes and its journal here and
commits them in a fixed order of barriers. Every change still goes through `fsops` (its folder
descriptors, its crash points, its confinement to the store): this module only orders them.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path

from memcli.store import fsops


class Staged:
    """Many atomic writes and removals made durable together, in a fixed order of barriers,
    instead of two fsyncs each (a run of tens of thousands of actions paid 9 fsyncs an action).

    `write_new`, `write_replace` and `unlink` only stage: the bytes go to a temporary file in
    the target's folder, not yet synced. `commit` then (1) makes every temporary file durable,
    (2) puts them in place and removes what is to be removed, in the order staged (the same
    atomic link or rename, and the same crash points, as the single-file functions), and
    (3) makes those names durable. After a barrier nothing written before it can be lost or
    torn, so a caller that needs A durable before B is changed commits A's batch first (the
    journal: pre-images, then the changes they cover). A barrier is one `syncfs` of the store's
    file system where the platform has it and the batch is large (`fsops.SYNCFS_FROM`), else
    an fsync of each file, then one of each folder."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.steps: list[tuple[str, Path, str | None]] = []  # (kind, path, temporary name)
        self.sources: dict[int, Path] = {}  # step -> the file a "link" step names again
        self.dirs: dict[Path, fsops._Dir] = {}  # folders open for the batch (see `fsops._held`)
        self.made: set[Path] = set()  # folders holding a folder `ensure_parent` made
        self.there: set[Path] = set()  # folders `ensure_parent` found or made (none is removed meanwhile)

    @contextlib.contextmanager
    def _holding(self) -> Iterator[None]:
        """Folders opened within stay open for the batch (see `fsops._held`)."""
        outer, fsops._held = fsops._held, self.dirs
        try:
            yield
        finally:
            fsops._held = outer

    def _release(self) -> None:
        for handle in self.dirs.values():
            with contextlib.suppress(OSError):
                handle.close()
        self.dirs = {}

    def write_new(self, path: Path, data: bytes) -> None:
        with self._holding(), fsops._folder(path.parent) as handle:
            self.steps.append(("create", path, fsops._write_tmp(handle, path.name, data, sync=False)))

    def write_replace(self, path: Path, data: bytes) -> None:
        with self._holding(), fsops._folder(path.parent) as handle:
            tmp = fsops._write_tmp(handle, path.name, data, fsops._mode_of(handle, path.name), sync=False)
            self.steps.append(("write", path, tmp))

    def unlink(self, path: Path) -> None:
        self.steps.append(("remove", path, None))

    def ensure_parent(self, path: Path) -> None:
        """Make the missing folders on the way to `path` now (each a change, as `mkdir`), their
        names made durable with the batch's own at its second barrier instead of one fsync
        each: the three folders of a run's first pre-image (archive/runs/<run_id>/agent/...)
        were three journal commits in a row. Nothing is put in them before the batch commits,
        and nothing depends on them before its barrier."""
        if path.parent in self.there:  # (a run's pre-images: a few folders, thousands of files)
            return
        missing: list[Path] = []
        probe = Path(fsops._absolute(path.parent))
        while not os.path.lexists(probe):
            missing.append(probe)
            probe = probe.parent
        for folder in reversed(missing):
            with self._holding(), fsops._folder(folder.parent) as handle:
                fsops._change()
                with contextlib.suppress(FileExistsError):
                    os.mkdir(handle.at(folder.name), dir_fd=handle.dir_fd)
            self.made.add(folder.parent)
        self.there.add(path.parent)

    def keep_copy(self, src: Path, dst: Path, link: bool | None = None) -> None:
        """Stage `dst` (a new name) holding the bytes `src` has now: a second link to the
        same file where that is safe, else a copy. A link writes no bytes, and it spares the
        later replace or removal of `src` the cost of freeing a file (milliseconds each on
        a file system mounted with online discard). Safe, because every change memcli makes
        to a file replaces it whole (a new file renamed over the name; never an edit in
        place): the linked file keeps its bytes once `src` is replaced or removed. A file
        that already has another name (a link somewhere else, which someone could edit in
        place), or one on another file system, is copied instead. `link`: `linkable(src, dst)`
        when the caller asked it already."""
        if not (self.linkable(src, dst) if link is None else link):
            self.write_new(dst, fsops.read_bytes(src))
        else:
            self.steps.append(("link", dst, None))
            self.sources[len(self.steps) - 1] = src

    @staticmethod
    def linkable(src: Path, dst: Path, near: dict[Path, int] | None = None) -> bool:
        """Whether `keep_copy(src, dst)` makes a second link (no bytes written) rather than a
        copy. `dst`'s folder need not exist yet: the nearest one that does tells its file
        system. `near`: that device by `dst`'s folder, found once per folder (a run asks for
        each of its pre-images, a few folders, before any is made)."""
        try:
            st = os.lstat(src)
            device = None if near is None else near.get(dst.parent)
            if device is None:
                probe = dst.parent
                while not os.path.lexists(probe) and probe != probe.parent:
                    probe = probe.parent
                device = os.lstat(probe).st_dev
                if near is not None:
                    near[dst.parent] = device
        except FileNotFoundError:
            return False
        return stat.S_ISREG(st.st_mode) and st.st_nlink == 1 and device == st.st_dev and fsops._AT

    def commit(self) -> None:
        try:
            with self._holding():
                self._commit()
        finally:
            self._release()

    def _commit(self) -> None:
        parents = [path.parent for _, path, _ in self.steps]  # (each made once: thousands a run)
        temporary = [parent / tmp for parent, (_, _, tmp) in zip(parents, self.steps, strict=True)
                     if tmp is not None]
        fsops._barrier(self.root, temporary, set())
        fsops._unsynced, folders = set(), set(parents) | self.made
        self.made = set()
        steps = list(self.steps)
        try:
            for n, (kind, path, tmp) in enumerate(self.steps):
                if kind == "remove":
                    fsops.unlink(path)  # (the module's: a test may stand in for it)
                elif kind == "link":
                    _link_or_copy(self.sources[n], path)
                else:
                    self._place(kind, path, str(tmp), parents[n])
                self.steps[n] = (kind, path, None)
        finally:
            fsops._unsynced = None
        linked = [path for n, (kind, path, _) in enumerate(steps) if kind == "link"]
        self.steps, self.sources = [], {}
        # a linked file's bytes too: its writer may not have synced them
        fsops._barrier(self.root, linked, folders)

    def discard(self) -> None:
        """Remove the temporary files of steps not yet put in place (after an error)."""
        try:
            with self._holding():
                for _, path, tmp in self.steps:
                    if tmp is not None:
                        with contextlib.suppress(OSError), fsops._folder(path.parent) as handle:
                            os.unlink(handle.at(tmp), dir_fd=handle.dir_fd)
        finally:
            self._release()
        self.steps, self.sources, self.made, self.there = [], {}, set(), set()

    @staticmethod
    def _place(kind: str, path: Path, tmp: str, parent: Path) -> None:
        with fsops._folder(parent) as handle:
            fsops._change()
            if kind == "write":
                os.rename(handle.at(tmp), handle.at(path.name), src_dir_fd=handle.dir_fd,
                          dst_dir_fd=handle.dir_fd)
                return
            try:  # link() fails if the name exists: a new file never overwrites
                os.link(handle.at(tmp), handle.at(path.name), src_dir_fd=handle.dir_fd,
                        dst_dir_fd=handle.dir_fd, follow_symlinks=False)
            finally:
                fsops._change()
                os.unlink(handle.at(tmp), dir_fd=handle.dir_fd)


def _link_or_copy(src: Path, dst: Path) -> None:
    """`dst` as a second name of `src` (see `Staged.keep_copy`); where the file system
    refuses (no hard links there), a copy made durable on its own."""
    with fsops._folder(src.parent) as source, fsops._folder(dst.parent) as target:
        fsops._change()
        try:
            os.link(source.at(src.name), target.at(dst.name), src_dir_fd=source.dir_fd,
                    dst_dir_fd=target.dir_fd, follow_symlinks=False)
            return
        except OSError as exc:
            if exc.errno not in (errno.EPERM, errno.EXDEV, errno.EMLINK, errno.ENOTSUP, errno.EOPNOTSUPP):
                raise
    fsops.write_new(dst, fsops.read_bytes(src))
