"""A helper that searches folders' blocks ahead of the planner (unless `MEMCLI_HELPER=0`: see
:func:`wanted`): one worker process, forked when a full dry run starts (while the planner is
small: few pages to copy), that loads the run's folders one after the other as the planner
will and searches each folder's blocks (a large one in pieces, `pieces`), costliest first.
The planner searches the same folder's blocks cheapest first, skipping those the helper has
begun; the two meet in the middle, so the split follows the time each really had. Once
the helper has nothing left in a folder it goes on to the next, while the planner finishes its
last block, merges, applies the later rules, lets the folder go and loads the next: that work,
serial before, now runs beside the helper's share of the next folder.

The helper's results for a folder are used only when its folder came out the same as the
planner's (the same blocks, members, order and content hashes: :func:`layout`); a block both
searched (each began it before seeing the other's claim) is taken from the planner. Whatever
goes wrong with the helper (it dies, hangs, sends garbage, a folder differs) costs only time: the
planner searches what it did not get, as a serial run would. The helper writes nothing (it leaves
with `os._exit`).

A folder that is not the helper's (see `Planner._start_helper`) is searched as before, workers
forked once it is loaded (:mod:`memcli.consolidate.parallel`); the helper does not go past it
before the planner has searched it, so that the two never compete with such workers.

Messages, helper to planner: length-prefixed pickles ``("layout", k, digest, blind, jobs,
costs)`` (blind: the folder's entries taken without comparing them with the files,
`FolderLoading._load_ahead`; its jobs, which the planner then need not make again), ``("start", k,
n)``, ``("found", k, n, found)``, ``("done", k)``, ``("end", private_kb)``, where ``k`` is the
folder's position among the helper's folders and ``n`` a block's. Planner to helper: pairs of
4-byte numbers ``(k, n)``, a claim of block ``n`` of folder ``k``, or ``(k, GO)``: the helper may
start folder ``k``."""

from __future__ import annotations

import contextlib
import os
import struct
import time
from collections.abc import Callable, Iterable
from typing import Any

# (pickle, select, signal and `parallel` are imported where a helper is started or heard:
# a run that starts none, a session-end pass above all, does not load them)

GO = 0xFFFFFFFF  # (not a block position)
HELPER_ENV = "MEMCLI_HELPER"  # "0": no helper (folders shared out once loaded, as before it)
# The helper takes a folder from this many memory files (fewer: its search is shorter than the
# messages' and the folder's second load) up to `AHEAD_MAX` (more: the helper's own copy of the
# loaded folder would add to the planner's at the run's peak; such a folder is shared out by
# `parallel.run_shares` once loaded, its pages shared with the workers). From 1,000 until the
# twelfth round: folders of a few hundred (the small shape's 500, the mix's agents of 129-921)
# then kept the second core idle; taken by the helper, a cold dry run of the small shape took
# about 40% less time and the mix's about 18% less, for 0-30% more CPU in all.
AHEAD_MIN = 100
AHEAD_MAX = 20_000
_PIPE_BYTES = 1 << 20  # results wait in the pipe while the planner is busy: room for a folder's
_HEAD = struct.Struct("<I")
_CLAIM = struct.Struct("<II")


def wanted() -> bool:
    """Whether a run may start a helper: unless `MEMCLI_HELPER` is 0 (to compare the two ways
    on one machine: see `bench/RESULTS.md`, "Cold dry run beside a helper")."""
    return os.environ.get(HELPER_ENV, "").strip() != "0"


def layout(blocks: Iterable[list[Any]]) -> bytes:
    """A digest of a folder's blocks as the duplicate rule searches them: each block's members
    in order, by id and content hash. The helper's and the planner's must be equal for the
    helper's pairs to be used (positions then mean the same memories). (A block's ids, then
    its hashes, each joined in one call: neither holds the separators.)"""
    import hashlib

    h = hashlib.blake2b(digest_size=16)
    for block in blocks:
        mems = [i.mem for i in block]
        h.update(("\x1e".join([m.id for m in mems]) + "\x1f" + "\x1e".join([m.content_hash for m in mems])
                  + "\x1d").encode())
    return h.digest()


class Channel:
    """The helper's side: sends messages, sees the planner's claims and go-aheads."""

    def __init__(self, out_fd: int, in_fd: int) -> None:
        self.out_fd, self.in_fd = out_fd, in_fd
        self.claims: set[tuple[int, int]] = set()
        self.allowed: set[int] = set()
        self._rest = b""

    def send(self, message: tuple[Any, ...]) -> None:
        import pickle

        data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        view = memoryview(_HEAD.pack(len(data)) + data)
        while view:
            view = view[os.write(self.out_fd, view):]

    def wait_go(self, k: int) -> bool:
        """Block until the planner lets folder `k` start; False when the planner is gone."""
        import select

        while k not in self.allowed:
            select.select([self.in_fd], [], [], 5.0)
            if not self._read() or os.getppid() == 1:
                return False
        return True

    def claimed(self, k: int, n: int) -> bool:
        """Whether the planner has claimed block `n` of folder `k`."""
        self._read()
        return (k, n) in self.claims

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
            whole = len(data) - len(data) % _CLAIM.size
            for k, n in _CLAIM.iter_unpack(data[:whole]):
                if n == GO:
                    self.allowed.add(k)
                else:
                    self.claims.add((k, n))
            self._rest = data[whole:]


class Helper:
    """The planner's side of the helper: what it sent, by folder position."""

    def __init__(self, rels: list[str], pid: int, in_fd: int, out_fd: int) -> None:
        self.position = {rel: k for k, rel in enumerate(rels)}
        self.pid, self.in_fd, self.out_fd = pid, in_fd, out_fd
        self.layouts: dict[int, bytes] = {}
        self.blind: set[int] = set()  # folders it loaded without comparing entries with files
        self.jobs: dict[int, tuple[Any, Any]] = {}  # a folder's jobs and their costs (checked where used)
        self.started: dict[int, set[int]] = {}
        self.found: dict[int, dict[int, Any]] = {}
        self.done: set[int] = set()  # folders it has sent all it will of
        self.ended = False  # its pipe closed: nothing more will come
        self._buf = bytearray()

    def go(self, k: int) -> None:
        """Let the helper start folder `k`."""
        self._write(k, GO)

    def claim(self, k: int, n: int) -> None:
        """Tell the helper the planner searches block `n` of folder `k` (a claim it misses
        costs only time)."""
        self._write(k, n)

    def _write(self, k: int, n: int) -> None:
        if self.ended:
            return
        with contextlib.suppress(OSError):  # (full, or the helper gone: only time is lost)
            os.write(self.out_fd, _CLAIM.pack(k, n))

    def agrees(self, k: int, mine: bytes, read_files: bool) -> bool | None:
        """Whether the helper's folder `k` came out as the planner's, whose layout is `mine`
        and which read some of its memories from their files (`read_files`: an entry did not
        describe its file); None while not known. A folder the helper loaded blind (its
        entries not compared with the files) agrees only with a planner's that took every
        memory from its entry: otherwise an entry the planner found stale, but whose file
        still hashes the same (touched, or the entry edited by hand), might hold other facts
        in the helper than the file's in the planner."""
        theirs = self.layouts.get(k)
        if theirs is None:
            return None
        return theirs == mine and not (read_files and k in self.blind)

    def over(self, k: int) -> bool:
        """Whether nothing more will come for folder `k`."""
        return self.ended or k in self.done

    def poll(self, timeout: float = 0.0) -> None:
        """Take in what the helper sent, waiting up to `timeout` seconds for something."""
        if self.ended:
            return
        import select

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
                self._parse()
                self._end()
                return
            self._buf += chunk
        self._parse()

    def _parse(self) -> None:
        import pickle

        buf, at = self._buf, 0
        while len(buf) - at >= 4:
            (size,) = _HEAD.unpack_from(buf, at)
            if len(buf) - at - 4 < size:
                break
            try:
                self._take(pickle.loads(bytes(buf[at + 4:at + 4 + size])))
            except Exception:  # noqa: BLE001 (garbage: nothing more of it is trusted)
                self.stop()
                return
            at += 4 + size
        del buf[:at]

    def _take(self, message: tuple[Any, ...]) -> None:
        kind = message[0]
        if kind == "layout":
            self.layouts[int(message[1])] = bytes(message[2])
            if message[3]:
                self.blind.add(int(message[1]))
            self.jobs[int(message[1])] = (message[4], message[5])
        elif kind == "start":
            self.started.setdefault(int(message[1]), set()).add(int(message[2]))
        elif kind == "found":
            self.found.setdefault(int(message[1]), {})[int(message[2])] = message[3]
        elif kind == "done":
            self.done.add(int(message[1]))
        elif kind == "end":
            from memcli.consolidate import parallel

            parallel.workers_peak_kb = max(parallel.workers_peak_kb, int(message[1]))
        else:
            raise ValueError(kind)

    def wait(self, k: int, positions: set[int], deadline: float) -> bool:
        """Wait until the helper has sent every block of folder `k` at `positions` it began,
        or will send nothing more of it; False when `deadline` passed first (it is stopped)."""
        while not self.over(k) and any(n in self.started.get(k, ()) and n not in self.found.get(k, {})
                                       for n in positions):
            left = deadline - time.monotonic()
            if left <= 0:
                self.stop()
                return False
            self.poll(min(left, 1.0))
        return True

    def forget(self, k: int) -> None:
        """Folder `k` is planned: what the helper sent of it serves no one now."""
        self.layouts.pop(k, None)
        self.blind.discard(k)
        self.jobs.pop(k, None)
        self.started.pop(k, None)
        self.found.pop(k, None)

    def _end(self) -> None:
        if not self.ended:
            self.ended = True
            for fd in (self.in_fd, self.out_fd):
                with contextlib.suppress(OSError):
                    os.close(fd)

    def stop(self) -> None:
        """End the helper (killed if still at work) and reap it."""
        import signal

        if self.pid:
            with contextlib.suppress(OSError):
                os.kill(self.pid, signal.SIGKILL)
        self._end()
        if self.pid:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(self.pid, 0)
            self.pid = 0

    def finish(self, deadline: float) -> None:
        """At the end of the run: wait a little for the helper to end by itself (its last
        message tells its memory), then stop it."""
        while not self.ended and time.monotonic() < deadline:
            self.poll(0.02)
        self.stop()


def start(rels: list[str], body: Callable[[Channel], None]) -> Helper | None:
    """Fork the helper for folders `rels`, running `body`; None when it cannot be forked."""
    from memcli.consolidate import parallel

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
    with contextlib.suppress(OSError, AttributeError, ImportError):  # (Linux: room for a folder's results)
        import fcntl  # (not on Windows, where nothing is forked anyway)

        fcntl.fcntl(res_w, fcntl.F_SETPIPE_SZ, _PIPE_BYTES)

    def run() -> None:
        os.set_blocking(cl_r, False)
        channel = Channel(res_w, cl_r)
        body(channel)
        channel.send(("end", parallel.private_kb()))

    pid = parallel.fork_child(run, [res_r, cl_w])
    if pid is None:
        for fd in (res_r, res_w, cl_r, cl_w):
            os.close(fd)
        return None
    os.close(res_w)
    os.close(cl_r)
    os.set_blocking(res_r, False)
    os.set_blocking(cl_w, False)
    return Helper(rels, pid, res_r, cl_w)
