"""Work split over the machine's cores: pieces of a folder's pair search run in forked worker
processes while the parent does its own share, and the parent puts the results together (and
the forks, pipes and collection that `sharedplan`, `trustahead` and `since` build on).

A worker is a fork of the planner as it stands (its folder loaded), so it needs nothing sent
to it; it reads, signs and scores its share of the blocks, and sends back only the pairs found
and the guards' verdicts (pickled, through a pipe). It writes nothing: not the store, not a
cache, not a log (it leaves with `os._exit`, so not even the parent's buffered output is written
twice). Whatever goes wrong with a worker (no fork here, a fork refused, a worker that dies or
sends something unreadable) costs only time: the parent does that share itself, as a serial run
would, and the result is the same.

Serial whenever forking is not worth it or not safe: one core, or no core left idle by other
work (unless `MEMCLI_JOBS` asks for more), `MEMCLI_JOBS=1`, too little work (:data:`MIN_WORK`),
another thread running in the process (a fork copies one thread: a lock another holds would
never be released in the child), or no `os.fork` at all."""

from __future__ import annotations

import os
import pickle
import select
import signal
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

JOBS_ENV = "MEMCLI_JOBS"
MAX_JOBS = 4  # beyond a few cores, a folder's blocks are too uneven to share out well
# The estimated work (characters of text, plus `PER_MEMBER` a memory) below which a folder is
# searched serially: a fork of the planner, its pages copied as they are touched, and the
# results pickled back cost about as much as searching this much text (measured: see README).
MIN_WORK = 2_000_000
PER_MEMBER = 200
WAIT_MIN_S = 30.0  # how long a worker may take at least, and at most this times the parent's share
WAIT_FACTOR = 20.0


def jobs() -> int:
    """How many processes may share a folder's pair search: `MEMCLI_JOBS` when set to a
    positive number (1: serial), else the cores this process may run on that other work is
    not already using (at most :data:`MAX_JOBS`); 1 where processes cannot be forked."""
    if not hasattr(os, "fork"):
        return 1
    wanted = os.environ.get(JOBS_ENV, "").strip()
    if wanted:
        try:
            return max(1, min(int(wanted), MAX_JOBS * 4))
        except ValueError:
            pass  # (not a number: the default, as for an unset variable)
    return max(1, min(cores() - busy_cores(), MAX_JOBS))


def cores() -> int:
    """The cores this process may run on (1 where processes cannot be forked)."""
    if not hasattr(os, "fork"):
        return 1
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def busy_cores() -> int:
    """Cores other processes keep busy, from the 1-minute load average (this run itself
    counts for one): on a machine whose cores are all taken, a worker only competes for
    them, and the forks' copied pages make the run slower (measured: `bench/RESULTS.md`)."""
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):
        return 0
    return max(0, int(load - 1.0))  # (whole cores: the average lags, a part-time core still helps)


def helper_now() -> bool:
    """Whether one helper process may be started beside this one now (the session-end
    worker, the cold dry run's helper): as `MEMCLI_JOBS` says when it is set (2 or more:
    whatever the load), else when this process may run on a second core and one is idle at
    this moment (`idle_core`). Not the 1-minute load average that `jobs` weighs: a pass of
    a second or two runs beside what runs now, and the average still counts work that ended
    up to a minute before (the command before it; the previous phase of a benchmark), which
    kept helpers off with both cores idle. The caller also checks `may_fork`."""
    if os.environ.get(JOBS_ENV, "").strip():
        return jobs() >= 2
    return cores() >= 2 and idle_core()


def idle_core(loadavg: str = "/proc/loadavg") -> bool:
    """Whether a core is likely idle now: no more tasks runnable this moment (this process
    among them: the fourth field of /proc/loadavg) than the cores this process may run on.
    (One task more than this process is allowed: on an idle machine a kernel thread or the
    process reading a run's output is often runnable at that instant.) True where it cannot
    be known."""
    try:
        with open(loadavg, "rb") as f:
            runnable = int(f.read().split()[3].split(b"/")[0])
    except (OSError, ValueError, IndexError):
        return True
    return runnable <= cores()


def may_fork() -> bool:
    """Whether this process may fork workers now: only one thread runs in it."""
    return threading.active_count() == 1


def shares(costs: Sequence[float], count: int) -> list[list[int]]:
    """The positions of `costs` split into `count` shares of about equal total cost: the
    costliest first, each to the share with least so far (ties: the lower share). Share 0 is
    the parent's. Each share's positions in ascending order; the split depends on the costs
    alone, never on timing."""
    loads = [0.0] * count
    out: list[list[int]] = [[] for _ in range(count)]
    for n in sorted(range(len(costs)), key=lambda n: (-costs[n], n)):
        least = min(range(count), key=lambda s: (loads[s], s))
        loads[least] += costs[n]
        out[least].append(n)
    return [sorted(share) for share in out]


def run_shares(work: Callable[[list[int]], dict[int, Any]], split: list[list[int]]) -> dict[int, Any]:
    """`work(share)` for every share of `split`: the first in this process, each other in a
    forked worker when one can be started, else here as well. Returns the union of the results
    (each a dict by position). A worker that fails or dies has its share done here: the result
    never depends on whether workers ran."""
    started: list[tuple[int, int, list[int]]] = []  # (pid, read end, share)
    done: dict[int, Any] = {}
    try:
        for share in split[1:]:
            if share:
                child = _start(work, share)
                if child is None:
                    done.update(work(share))
                else:
                    started.append((child[0], child[1], share))
        began = time.monotonic()
        done.update(work(split[0]))
        # a worker is given as long as the parent's own share took, many times over: one
        # that is still at it after that (stopped by the machine, stuck on a lock a thread
        # held at the fork) is stopped, and its share done here
        deadline = time.monotonic() + max(WAIT_MIN_S, WAIT_FACTOR * (time.monotonic() - began))
        while started:
            pid, fd, share = started[0]
            found = collect(pid, fd, deadline)
            started.pop(0)
            done.update(work(share) if found is None else found)
    finally:
        for pid, fd, _ in started:  # (the parent's own share failed: the workers are not waited for)
            stop_child(pid, fd)
    return done


def fork_child(body: Callable[[], None], closes: Sequence[int]) -> int | None:
    """Fork a child that closes the descriptors `closes`, runs `body` and leaves by
    `os._exit` (0 once `body` returns, 1 on any exception: a child never reports, its parent
    does the work); the child's pid, or None when none can be forked (a process limit, no
    memory, a sandbox that refuses it)."""
    try:
        pid = os.fork()
    except OSError:
        return None
    if pid == 0:  # the child: never returns
        code = 1
        try:
            for fd in closes:
                os.close(fd)
            signal.signal(signal.SIGINT, signal.SIG_DFL)  # (Ctrl-C: the parent reports it)
            body()
            code = 0
        except BaseException:  # noqa: BLE001
            code = 1
        finally:
            os._exit(code)
    return pid


def fork_writer(body: Callable[[int], None], closes: Iterable[int] = ()) -> tuple[int, int] | None:
    """A child (`fork_child`, also closing `closes`) running `body(fd)`, fd the write end of a
    pipe to this process: (its pid, the read end); None when no pipe or child can be made."""
    try:
        read, write = os.pipe()
    except OSError:
        return None
    pid = fork_child(lambda: body(write), [read, *closes])
    os.close(write)
    if pid is None:
        os.close(read)
        return None
    return pid, read


def _start(work: Callable[[list[int]], dict[int, Any]], share: list[int]) -> tuple[int, int] | None:
    """A worker doing `share`, as (pid, the read end of its pipe); None when none can be forked."""
    return start_worker(lambda: work(share))


def start_worker(work: Callable[[], dict[int, Any]], closes: Iterable[int] = ()) -> tuple[int, int] | None:
    """A worker (`fork_writer`) sending what `work()` returns, with its memory then, pickled
    to this process, which reads it with `collect`: (its pid, the read end of its pipe); None
    when none can be forked."""

    def body(write: int) -> None:
        data = pickle.dumps((work(), private_kb()), protocol=pickle.HIGHEST_PROTOCOL)
        view = memoryview(data)
        while view:
            view = view[os.write(write, view):]

    return fork_writer(body, closes)


def collect(pid: int, fd: int, deadline: float) -> dict[int, Any] | None:
    """What worker `pid` sent, once it has ended; None when it failed, died or was still at
    work at `deadline` (then stopped; the parent does its share)."""
    chunks: list[bytes] = []
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                stop_child(pid, fd)
                return None
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
    except OSError:
        chunks = []
    os.close(fd)
    status = _reap(pid)
    if status != 0 or not chunks:
        return None
    try:
        found, kb = pickle.loads(b"".join(chunks))
    except Exception:  # noqa: BLE001 (cut short: done again here)
        return None
    global workers_peak_kb
    workers_peak_kb = max(workers_peak_kb, kb)
    return found if isinstance(found, dict) else None


# The most memory a worker of this process held of its own when it ended (KB): pages it wrote,
# its copies of the parent's included, shared ones not (`Private_*` of /proc's smaps_rollup).
# Linux keeps no high-water mark of private memory; the heap a worker freed stays with its
# allocator, so this is close to its peak but not a bound. A worker's memory is not in the
# parent's peak (VmHWM); `bench/run.py` adds this to it.
workers_peak_kb = 0


def private_kb() -> int:
    """This process's private memory now, in KB (0 where /proc does not say)."""
    try:
        with open("/proc/self/smaps_rollup", "rb") as f:
            text = f.read()
    except OSError:
        return 0
    total = 0
    for line in text.splitlines():
        if line.startswith((b"Private_Clean:", b"Private_Dirty:")):
            total += int(line.split()[1])
    return total


def _reap(pid: int) -> int:
    """The worker's exit status (0: it sent all it found); -1 when it cannot be known."""
    try:
        _, status = os.waitpid(pid, 0)
    except ChildProcessError:
        return -1
    return os.waitstatus_to_exitcode(status)


def stop_child(pid: int, fd: int) -> None:
    """End a forked child whose pipe to this process is `fd`: killed if still at work, its
    pipe closed, then waited for (never left behind)."""
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass
    try:
        os.close(fd)
    except OSError:
        pass
    try:
        _reap(pid)
    except OSError:  # (interrupted, or not this process's child)
        pass

