"""A worker that checks folders' index entries against their files ahead of a full pass.

A full pass takes each folder's memories from its index while every entry still describes its
file (SPEC 1: the same size and mtime): a `lstat` of every file and a comparison of the lists
(`FolderScanning.scan`), about a fifth of a steady-state dry run's CPU at the long shape, all
of it in the planner's one process. Where no helper searches beside the planner (a
steady-state run: its pair caches leave little to search; a real run), or it searches only a
few folders, and a second core is idle, a forked worker does that check for the run's other
folders after the first, in the run's order, and reports for each the identity of the index
file it found exact (`vouch`). The planner, when it comes to the folder, takes the entries
without looking at the files again while its index is still that very file
(`scan(vouched=...)`); a folder not reported by then (the worker slow, stuck, gone, or the
folder not exact) it checks itself, as a serial pass does. The worker writes nothing and
leaves with `os._exit`; it runs at the lowest priority. A dry run whose folders are planned
on two cores (`sharedplan`) starts none: each folder there is loaded by one process only.

Messages, worker to planner: one line a folder, ``"<position> <dev> <ino> <size> <mtime_ns>
<ctime_ns> <kb>"``, or ``"<position> - <kb>"`` (not exact: the planner looks itself), where
``kb`` is the worker's private memory then (`parallel.private_kb`, for the benchmark's peak).
"""

from __future__ import annotations

import os
import select
from collections.abc import Collection

from memcli.consolidate import parallel
from memcli.store.store import Folder, Store

MIN_FILES = 6_000  # memory files in the run's folders after the first: fewer, and the fork
# and the messages cost about what the worker spares (a folder of 5,000 files: ~25 ms)
MAX_FILES = 20_000  # a folder with more is left to the planner: the worker's parse of its index
# would add to the planner's memory at the run's peak (the helper's bound, `ahead.AHEAD_MAX`);
# and a run with such a folder starts no worker at all: the planner's peak is that folder's
# (the mix at 100,000: 420 MB for its 56,000 memories), and the worker's memory would add to it


class TrustAhead:
    """The planner's side: the worker's reports, taken in without waiting."""

    def __init__(self, pid: int, fd: int, positions: dict[str, int]) -> None:
        self.pid, self.fd, self.positions = pid, fd, positions
        self.reports: dict[int, list[int] | None] = {}
        self._partial = b""

    @classmethod
    def start(cls, store: Store, folders: list[Folder], listings: dict[str, list[str]],
              helped: Collection[str] = (), closes: Collection[int] = ()) -> TrustAhead | None:
        """Fork the worker for the folders after the first that have a listing (the names the
        planner will take them with) and are not the helper's (`helped`: a cold run's helper
        searches every folder it takes, and keeps the second core busy; a steady-state run's
        takes only a folder with no pair cache yet, as one a real run's promotions created);
        None when those hold too few files to be worth it, a folder of the run holds more
        than `MAX_FILES`, no core is idle now, or no process can be forked. `closes`:
        descriptors of this process the worker closes (the helper's pipes)."""
        from memcli.consolidate.since import lowest_priority

        share = [(p, listings[f.rel]) for p, f in enumerate(folders)
                 if p and f.rel in listings and f.rel not in helped]
        if sum(len(names) for _, names in share) < MIN_FILES or max(map(len, listings.values())) > MAX_FILES:
            return None
        if not parallel.helper_now() or not parallel.may_fork():
            return None

        def body(write: int) -> None:
            lowest_priority()
            largest, kb = 0, 0
            for p, names in share:
                identity = store.vouch(folders[p], names)
                # its private memory after the largest folder so far, for the benchmark's peak
                # (`parallel.workers_peak_kb`): not after each, as /proc walks every page of the
                # process to say (milliseconds for a fork of a run holding 1,000,000 names)
                if len(names) > largest:
                    largest, kb = len(names), parallel.private_kb()
                line = " ".join(map(str, [p, *(identity or "-"), kb]))
                os.write(write, f"{line}\n".encode())  # (under PIPE_BUF: written whole)

        forked = parallel.fork_writer(body, closes)
        return None if forked is None else cls(*forked, {folders[p].rel: p for p, _ in share})

    def vouched(self, rel: str) -> list[int] | None:
        """The identity of folder `rel`'s index file as the worker found it exact, if it has
        said so by now (never waited for)."""
        p = self.positions.get(rel)
        if p is not None and p not in self.reports:
            self.poll()
        return self.reports.get(p) if p is not None else None

    def poll(self) -> None:
        """Take in what the worker has reported so far."""
        if self.pid < 0:
            return
        try:
            while select.select([self.fd], [], [], 0)[0]:
                chunk = os.read(self.fd, 1 << 16)
                if not chunk:
                    self.stop()
                    return
                *lines, self._partial = (self._partial + chunk).split(b"\n")
                for line in lines:
                    p, identity, kb = _report(line)
                    if p is not None:
                        self.reports[p] = identity
                        parallel.workers_peak_kb = max(parallel.workers_peak_kb, kb)
        except OSError:
            self.stop()

    def stop(self) -> None:
        """End the worker, once: killed if still at work, then waited for."""
        if self.pid < 0:
            return
        pid, self.pid = self.pid, -1
        parallel.stop_child(pid, self.fd)


def _report(line: bytes) -> tuple[int | None, list[int] | None, int]:
    """(position, identity or None, the worker's private KB) from one line; (None, None, 0)
    for anything malformed."""
    parts = line.split()
    try:
        if len(parts) == 3 and parts[1] == b"-":
            return int(parts[0]), None, int(parts[2])
        if len(parts) == 7:
            numbers = [int(v) for v in parts]
            return numbers[0], numbers[1:6], numbers[6]
    except ValueError:
        pass
    return None, None, 0
