"""Helpers that search a folder's blocks ahead of the planner: a worker process per folder,
forked when the run starts (while the planner is small: no folder's pages to copy), that waits
until the planner has searched the folder before it, then loads its own folder and searches
its blocks, costliest first, while the planner merges the previous folder, applies the later
rules, lets it go and loads this one. The planner then searches the same folder's blocks
cheapest first, skipping those the helper has begun; the two meet in the middle, so the split
follows the time each really had, and the work a serial run does outside pair search (loading,
merging, the later rules) runs beside the helper's share instead of before it.

The helper's results are used only when its folder came out the same as the planner's (the same
blocks, members, order and content hashes: :func:`layout`); a block both searched (each began it
before seeing the other's claim) is taken from the planner. Whatever goes wrong with a helper (it
dies, hangs, sends garbage, its folder differs) costs only time: the planner searches what it did
not get, as a serial run would. A helper writes nothing (it leaves with `os._exit`).

Messages, helper to planner: length-prefixed pickles ``("layout", digest)``, ``("start", n)``,
``("found", n, found)``, ``("end", private_kb)``. Planner to helper: 4-byte block positions it
claims, and :data:`GO` once the helper may start."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import pickle
import select
import signal
import struct
import time
from collections.abc import Callable, Iterable
from typing import Any

from memcli.consolidate import parallel

GO = 0xFFFFFFFF  # (not a block position)
# A folder is given a helper from this many memory files (fewer: its search is shorter than the
# helper's fork and load) up to `AHEAD_MAX` (more: the helper's own copy of the loaded folder
# would be added to the planner's at the run's peak; such a folder is shared out by
# `parallel.run_shares` once loaded, its pages shared with the workers).
AHEAD_MIN = 1_000
AHEAD_MAX = 20_000
MAX_HELPERS = 32
_PIPE_BYTES = 1 << 20  # results wait in the pipe while the planner is busy: room for a folder's
_HEAD = struct.Struct("<I")


def layout(blocks: Iterable[list[Any]]) -> bytes:
    """A digest of a folder's blocks as the duplicate rule searches them: each block's members
    in order, by id and content hash. The helper's and the planner's must be equal for the
    helper's pairs to be used (positions then mean the same memories)."""
    h = hashlib.blake2b(digest_size=16)
    for block in blocks:
        h.update(("\x1e".join(f"{i.mem.id}\x1f{i.mem.content_hash}" for i in block) + "\x1d").encode())
    return h.digest()


class Channel:
    """The helper's side: sends messages, sees the planner's claims."""

    def __init__(self, out_fd: int, in_fd: int) -> None:
        self.out_fd, self.in_fd = out_fd, in_fd
        self.claims: set[int] = set()
        self.go = False
        self._rest = b""

    def send(self, message: tuple[Any, ...]) -> None:
        data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        view = memoryview(_HEAD.pack(len(data)) + data)
        while view:
            view = view[os.write(self.out_fd, view):]

    def wait_go(self) -> bool:
        """Block until the planner says go; False when it is gone (its end of the pipe closed)."""
        while not self.go:
            select.select([self.in_fd], [], [], 5.0)
            if not self._read() or os.getppid() == 1:
                return False
        return True

    def claimed(self) -> set[int]:
        """The positions the planner has claimed so far."""
        self._read()
        return self.claims

    def _read(self) -> bool:
        """Take in what the planner wrote; False at the end of the pipe."""
        while True:
            try:
                chunk = os.read(self.in_fd, 4096)
            except BlockingIOError:
                return True
            if not chunk:
                return False
            data = self._rest + chunk
            whole = len(data) - len(data) % 4
            for (value,) in struct.iter_unpack("<I", data[:whole]):
                if value == GO:
                    self.go = True
                else:
                    self.claims.add(value)
            self._rest = data[whole:]


class Helper:
    """The planner's side of one folder's helper."""

    def __init__(self, rel: str, pid: int, in_fd: int, out_fd: int) -> None:
        self.rel, self.pid, self.in_fd, self.out_fd = rel, pid, in_fd, out_fd
        self.layout: bytes | None = None
        self.started: set[int] = set()
        self.found: dict[int, Any] = {}
        self.ended = False  # its pipe closed: nothing more will come
        self.failed = False
        self._buf = bytearray()

    def go(self) -> None:
        """Let the helper start on its folder."""
        self._write(GO)

    def claim(self, n: int) -> None:
        """Tell the helper the planner searches block `n` (a claim it misses costs only time)."""
        self._write(n)

    def _write(self, value: int) -> None:
        if self.ended:
            return
        with contextlib.suppress(OSError):  # (full, or the helper gone: only time is lost)
            os.write(self.out_fd, _HEAD.pack(value))

    def poll(self, timeout: float = 0.0) -> None:
        """Take in what the helper sent, waiting up to `timeout` seconds for something."""
        if self.ended:
            return
        if timeout > 0 and not select.select([self.in_fd], [], [], timeout)[0]:
            return
        while True:
            try:
                chunk = os.read(self.in_fd, 1 << 20)
            except BlockingIOError:
                break
            except OSError:
                chunk = b""
            if not chunk:
                self._end(failed=False)
                break
            self._buf += chunk
        self._parse()

    def _parse(self) -> None:
        buf, at = self._buf, 0
        while len(buf) - at >= 4:
            (size,) = _HEAD.unpack_from(buf, at)
            if len(buf) - at - 4 < size:
                break
            try:
                message = pickle.loads(bytes(buf[at + 4:at + 4 + size]))
                self._take(message)
            except Exception:  # noqa: BLE001 (garbage: nothing more of it is trusted)
                self.found.clear()
                self.stop(failed=True)
                return
            at += 4 + size
        del buf[:at]

    def _take(self, message: tuple[Any, ...]) -> None:
        kind = message[0]
        if kind == "layout":
            self.layout = message[1]
        elif kind == "start":
            self.started.add(int(message[1]))
        elif kind == "found":
            self.found[int(message[1])] = message[2]
        elif kind == "end":
            parallel.workers_peak_kb = max(parallel.workers_peak_kb, int(message[1]))
        else:
            raise ValueError(kind)

    def wait(self, positions: set[int], deadline: float) -> None:
        """Wait until the helper has sent every block of `positions` it began, or ended, or
        `deadline` passed (then it is stopped)."""
        while not self.ended and any(n in self.started and n not in self.found for n in positions):
            left = deadline - time.monotonic()
            if left <= 0:
                self.stop(failed=True)
                return
            self.poll(min(left, 1.0))

    def wait_end(self, deadline: float) -> None:
        """Wait a little for the helper to end by itself (its last message: its memory)."""
        while not self.ended and time.monotonic() < deadline:
            self.poll(max(0.0, min(deadline - time.monotonic(), 0.05)) or 0.001)

    def _end(self, failed: bool) -> None:
        if not self.ended:
            self.ended = True
            for fd in (self.in_fd, self.out_fd):
                with contextlib.suppress(OSError):
                    os.close(fd)
        self.failed = self.failed or failed

    def stop(self, failed: bool = False) -> None:
        """End the helper (killed if still at work) and reap it."""
        if self.pid:
            with contextlib.suppress(OSError):
                os.kill(self.pid, signal.SIGKILL)
        self._end(failed)
        self.reap()

    def reap(self) -> None:
        if self.pid:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(self.pid, 0)
            self.pid = 0


def start(rel: str, body: Callable[[Channel], None]) -> Helper | None:
    """Fork a helper that runs `body` (after the planner's go); None when none can be forked."""
    try:
        res_r, res_w = os.pipe()
    except OSError:
        return None
    try:
        cl_r, cl_w = os.pipe()
    except OSError:
        os.close(res_r)
        os.close(res_w)
        return None
    with contextlib.suppress(OSError, AttributeError):  # (Linux: room for a folder's results)
        fcntl.fcntl(res_w, fcntl.F_SETPIPE_SZ, _PIPE_BYTES)  # type: ignore[attr-defined]
    try:
        pid = os.fork()
    except OSError:
        for fd in (res_r, res_w, cl_r, cl_w):
            os.close(fd)
        return None
    if pid == 0:  # the helper: never returns
        code = 1
        try:
            os.close(res_r)
            os.close(cl_w)
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.set_blocking(cl_r, False)
            channel = Channel(res_w, cl_r)
            if channel.wait_go():
                body(channel)
                channel.send(("end", parallel.private_kb()))
            code = 0
        except BaseException:  # noqa: BLE001 (a helper never reports: the planner does its work)
            code = 1
        finally:
            os._exit(code)
    os.close(res_w)
    os.close(cl_r)
    os.set_blocking(res_r, False)
    os.set_blocking(cl_w, False)
    return Helper(rel, pid, res_r, cl_w)
