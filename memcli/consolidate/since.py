"""session_end: what changed since the last run, and the duplicate candidates to read with it,
found from the last-run snapshot and the signature cache before any memory file is read."""

from __future__ import annotations

import contextlib
import functools
import os
import select
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

from memcli.consolidate import rules
from memcli.consolidate.similar import ALL_PAIRS_MAX
from memcli.store import lastrun
from memcli.store.lastrun import Snapshot
from memcli.store.model import Memory
from memcli.store.sigcache import SigCache
from memcli.store.store import Folder, FolderScan, Stamp, Store

# Files (snapshot rows; a folder whose listing stamp no longer holds counts twice) from which
# a session_end pass shares its scans with a forked worker (`Worker`): below it, the fork and
# the worker's report cost about what they would save.
SHARE_FROM = 6_000
# Rows of a changed folder the worker stats at least, when it takes a part of one (`_split`),
# and how many it reports at a time (a line; the pass joins lines that come in pieces): the pass
# stats the part from its last row back meanwhile, a chunk at a time, until they meet.
PART_MIN = 500
PART_CHUNK = 512


def stamps(saved: Any) -> dict[str, Stamp]:
    """The listing stamps of ops/state.json; anything malformed is no stamp (a cache)."""
    if not isinstance(saved, dict):
        return {}
    return {str(rel): (int(s[0]), int(s[1])) for rel, s in saved.items()
            if isinstance(s, list) and len(s) == 2 and all(type(v) is int for v in s)}


def scans(store: Store, folders: list[Folder], stamps: dict[str, Stamp]) -> Iterator[FolderScan]:
    """Each folder's scan, in order: against its last-run snapshot (`Store.scan_since`), or
    its index where it has none. Where a second core is free, a forked worker scans some of
    the folders meanwhile (`Worker`): the scans are those of a serial pass all the same."""
    # Snapshots are loaded a folder at a time and let go once it is scanned (about 180 bytes
    # a row in memory: 180 MB at 1,000,000 memories if all were held); all at once only to
    # share the folders out with a worker, and each let go once scanned here all the same.
    loaded: dict[int, Snapshot | None] = {}

    def scan(p: int) -> FolderScan:
        folder = folders[p]
        snap = loaded.pop(p) if p in loaded else lastrun.load_lastrun(folder.cache())
        if snap is None:
            return store.scan(folder, load=False)
        tail = None
        if worker is not None and p in worker.parts:  # its last rows stat'ed by the worker meanwhile
            tail = (worker.parts[p], functools.partial(worker.part, p))
        return store.scan_since(folder, snap, stamps.get(folder.rel), tail)

    def stat_rows(p: int, first: int, end: int) -> list[int] | None:  # (the worker's part of a folder)
        snap = loaded.get(p)
        return None if snap is None else store.stat_rows(folders[p], snap, first, end)

    worker: Worker | None = None
    if Worker.wanted():
        loaded.update((p, lastrun.load_lastrun(folder.cache())) for p, folder in enumerate(folders))
        worker = Worker.start(folders, [loaded[p] for p in range(len(folders))], stamps, scan, stat_rows)
    if worker is None:
        yield from map(scan, range(len(folders)))
        return
    ahead: dict[int, FolderScan] = {}  # scanned here before their turn
    mine_done = False
    try:
        for p, folder in enumerate(folders):
            if p not in worker.share:
                yield ahead.pop(p) if p in ahead else scan(p)
                continue
            if not mine_done:  # this process's own folders first
                ahead.update((q, scan(q)) for q in range(p + 1, len(folders)) if q not in worker.share)
                mine_done = True
            # then the worker's report of p, or, while there is none, the worker's folders
            # it has not reported, from its last (it goes from its first): never a wait
            while p not in ahead and worker.poll() and p not in worker.reports:
                last = max(q for q in worker.share if q not in worker.reports and q not in ahead)
                ahead[last] = scan(last)
            found = worker.reports.get(p)
            if p in ahead:
                yield ahead.pop(p)
            elif found is not None:  # what `scan_since` returns for a folder with no change
                yield FolderScan(folder, [], {}, [], None, False, {}, file_count=found[0], stamp=found[1])
            else:  # changed, or some doubt, or the worker is gone: scanned here
                yield scan(p)
    finally:
        worker.stop()


class Worker:
    """A forked process scanning some of a session_end pass's folders (`share`) meanwhile.

    A pass stats every live file (SPEC 1: a file is trusted while its size and mtime are its
    snapshot row's), and those system calls are about half of its CPU; threads cannot share
    them out (each call takes the interpreter's lock back, se12). So where a second core is
    free (`parallel.helper_now`), a fork of the planner scans folders that look unchanged, in
    order, and reports each as it is done: unchanged (with its file count and listing stamp,
    all a pass keeps of such a folder), or not (the parent scans it itself). The parent never
    waits for it: a folder it needs and the worker has not reported yet, it scans itself,
    from the worker's last folder back; a worker that is slow, stuck or gone only costs the
    scans it did not report. The scans are those of a serial pass."""

    def __init__(self, pid: int, fd: int, share: set[int], parts: dict[int, int] | None = None) -> None:
        self.pid, self.fd, self.share = pid, fd, share
        self.parts = parts or {}  # folders this process scans, of which the worker stats the rows from
        self.reports: dict[int, tuple[int, Stamp | None] | None] = {}  # None: not unchanged
        # a part's rows reported so far: (the end of those stat'ed from its first, the rows among
        # them that differ); None: some doubt (a file gone, not a plain one): none of it taken
        self.rows: dict[int, tuple[int, list[int]] | None] = {
            p: (first, []) for p, first in self.parts.items()}
        self._partial = b""

    @staticmethod
    def wanted() -> bool:
        """Whether a worker may be started now (`parallel.helper_now`: a second core idle at
        this moment, unless `MEMCLI_JOBS` says) and no thread runs in this process. The
        worker runs at the lowest priority (`lowest_priority`), so beside work that starts
        meanwhile it takes only the CPU that work leaves."""
        from memcli.consolidate import parallel

        return parallel.helper_now() and parallel.may_fork()

    @classmethod
    def start(cls, folders: list[Folder], snaps: list[Snapshot | None], stamps: dict[str, Stamp],
              scan: Callable[[int], FolderScan],
              stat_rows: Callable[[int, int, int], list[int] | None] | None = None) -> Worker | None:
        share, parts = _split(folders, snaps, stamps)
        if stat_rows is None:
            parts = {}
        if not share and not parts:
            return None
        from memcli.consolidate import parallel

        def body(write: int) -> None:
            lowest_priority()
            for p, first in parts.items():  # first: this process needs them soonest
                assert stat_rows is not None
                count = len(snaps[p].names)  # type: ignore[union-attr]
                for start in range(first, count, PART_CHUNK):  # a line a chunk (one writer: whole lines)
                    end = min(start + PART_CHUNK, count)
                    rows = stat_rows(p, start, end)
                    line = " ".join(map(str, [p, "rows", start, end, *(["-"] if rows is None else rows)]))
                    os.write(write, f"{line}\n".encode())
                    if rows is None:
                        break
            for p in share:  # a line a folder (under PIPE_BUF bytes: written whole)
                result = scan(p)
                if not _quiet(result):
                    line = f"{p} changed"
                elif result.stamp is None:
                    line = f"{p} {result.count} - -"
                else:
                    line = f"{p} {result.count} {result.stamp[0]} {result.stamp[1]}"
                os.write(write, f"{line}\n".encode())

        forked = parallel.fork_writer(body)
        return None if forked is None else cls(*forked, set(share), parts)

    def part(self, p: int) -> tuple[int, list[int]] | None:
        """What the worker has reported of folder p's part by now (never waited for): the
        end of the rows it stat'ed from the part's first, and those of them that differ from
        their files; None once it found a doubt (the caller stats the part itself)."""
        self.poll()
        return self.rows.get(p)

    def poll(self) -> bool:
        """Take in what the worker has reported so far, without waiting; False once it has
        ended (or cannot be heard): nothing more will come."""
        if self.pid < 0:
            return False
        try:
            while select.select([self.fd], [], [], 0)[0]:
                chunk = os.read(self.fd, 1 << 16)
                if not chunk:
                    self.stop()
                    return False
                *lines, self._partial = (self._partial + chunk).split(b"\n")
                for line in lines:
                    if b" rows" in line:
                        p, start, end, rows = _rows_report(line)
                        done = self.rows.get(p)
                        if done is not None and start == done[0]:  # (chunks in order, from the first)
                            self.rows[p] = None if rows is None else (end, done[1] + rows)
                    else:
                        p, found = _report(line)
                        self.reports[p] = found
        except OSError:
            self.stop()
            return False
        return True

    def stop(self) -> None:
        """End the worker, once: killed if still at work, then waited for."""
        if self.pid < 0:
            return
        from memcli.consolidate import parallel

        pid, self.pid = self.pid, -1
        parallel.stop_child(pid, self.fd)


def lowest_priority() -> None:
    """(The worker.) Run only on CPU nothing else wants: `SCHED_IDLE` where there is one (a
    task of any other priority runs first), else the highest niceness. A worker beside other
    work would otherwise take a share of this pass's own core; starved, it costs the pass
    only the folders it does not report (scanned by the pass itself)."""
    try:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
        return
    except (AttributeError, OSError):
        pass
    with contextlib.suppress(AttributeError, OSError):
        os.nice(19)


def _split(folders: list[Folder], snaps: list[Snapshot | None],
           stamps: dict[str, Stamp]) -> tuple[list[int], dict[int, int]]:
    """The folders a worker scans (positions): some of those that look unchanged, so that it
    has about as many files to stat as this process has work. A folder looks changed where a
    file came or went since its snapshot (its mtime moved: neither its listing stamp holds nor
    is it older than the snapshot); this process scans it, lists it, reads and plans what
    changed: counted as twice its files. A guess only: the worker scans its folders whole and
    reports only those it found unchanged. Where this process has more work all the same (a
    session's folder larger than every other folder together: the mix's `agent/agent0`),
    the worker also stats the last rows of its largest changed folder (the part: folder ->
    first row), so that each has about as much. Nothing when the pass is too small to share."""
    mine, unmoved, moved = 0, [], []
    for p, (folder, snap) in enumerate(zip(folders, snaps, strict=True)):
        if snap is None:
            continue  # (scanned here: its scan reads and compares the index)
        try:
            mtime = os.stat(folder.path).st_mtime_ns
        except OSError:
            continue
        if stamps.get(folder.rel) == (mtime, snap.written_ns) or mtime < snap.written_ns:
            unmoved.append(p)
        else:
            mine += 2 * len(snap.names)
            moved.append(p)
    rows = {p: len(snaps[p].names) for p in unmoved}  # type: ignore[union-attr]
    if mine + sum(rows.values()) < SHARE_FROM:
        return [], {}
    theirs = 0
    share: list[int] = []
    for p in sorted(unmoved, key=lambda p: (-rows[p], p)):  # the largest first, to the one with less
        if theirs <= mine:
            theirs += rows[p]
            share.append(p)
        else:
            mine += rows[p]
    parts: dict[int, int] = {}
    if moved and mine - theirs >= 2 * PART_MIN:  # each row of a part: one less here, one more there
        largest = max(moved, key=lambda p: (len(snaps[p].names), -p))  # type: ignore[union-attr]
        count = len(snaps[largest].names)  # type: ignore[union-attr]
        parts[largest] = count - min((mine - theirs) // 2, count)
    return sorted(share), parts


def _rows_report(line: bytes) -> tuple[int, int, int, list[int] | None]:
    """A line reporting a chunk of a part: (position, its first row, its end, the rows among
    them that differ, or None: some doubt). A line that does not read as one: position -1."""
    try:
        p, word, start, end, *rest = line.decode("ascii").split(" ")
        if word != "rows":
            return -1, 0, 0, None
        return int(p), int(start), int(end), None if rest == ["-"] else [int(r) for r in rest]
    except ValueError:
        return -1, 0, 0, None


def _report(line: bytes) -> tuple[int, tuple[int, Stamp | None] | None]:
    """One line of a worker's report: (position, (file count, stamp) when the folder is
    unchanged, else None). A line that does not read as one is no report (-1)."""
    try:
        p, *rest = line.decode("ascii").split(" ")
        if rest == ["changed"]:
            return int(p), None
        count, s0, s1 = rest
        return int(p), (int(count), None if s0 == s1 == "-" else (int(s0), int(s1)))
    except ValueError:
        return -1, None


def _quiet(scan: FolderScan) -> bool:
    """A scan with nothing in it but its file count and stamp: a folder unchanged since the
    last run, as `Store.scan_since` returns it."""
    return (not scan.entries and not scan.memories and not scan.problems and scan.reread is None
            and scan.snap is None and not scan.unreadable and scan.index is None and scan.file_count >= 0)


class Row(NamedTuple):
    """One file of a folder as a session_end pass sees it before reading anything."""

    id: str
    file: str
    block: tuple[str, str]  # (type, subtype)
    digest: bytes  # content hash, 32 bytes
    unchanged: bool  # a snapshot row of a file unchanged since the last run (run hash = content hash)


def changed_ids(scan: FolderScan, flagged_ids: set[str]) -> set[str]:
    """The folder's memories in a session_end pass's scope: changed since the last run (read
    again, with a run hash not their content hash), and those of flagged pairs."""
    changed = {e["id"] for e in scan.entries if e.get("run_hash") != e["content_hash"]}
    return changed | (flagged_ids & present_ids(scan, flagged_ids))


def present_ids(scan: FolderScan, ids: set[str]) -> set[str]:
    """Which of `ids` the folder holds (flagged pairs are in scope wherever they are)."""
    if not ids:
        return set()
    found = {e["id"] for e in scan.entries if e["id"] in ids}
    if scan.snap is not None:
        kept = set(scan.kept)
        found |= {i for i in ids for ext in (".json", ".md") if scan.snap.row(i + ext) in kept}
    return found


class FocusRows:
    """The rows of the blocks holding a changed memory: the entries read again, as Rows, and
    the unchanged snapshot rows of those blocks, kept as row numbers. A large block holding a
    change has thousands of unchanged rows, of which a pass takes a few dozen (the candidates):
    a Row is made only for those (`with_candidates`); iterating gives every row, in order."""

    def __init__(self, fresh: list[Row], snap: Snapshot | None = None, kept: list[int] | None = None) -> None:
        self.fresh, self.snap, self.kept = fresh, snap, kept or []

    def __len__(self) -> int:
        return len(self.fresh) + len(self.kept)

    def __iter__(self) -> Iterator[Row]:
        yield from self.fresh
        yield from map(self.kept_row, self.kept)

    def kept_row(self, r: int) -> Row:
        """The Row of snapshot row r: unchanged, so its run hash is its content hash."""
        snap = self.snap
        assert snap is not None  # (only a snapshot has kept rows)
        name = snap.names[r]
        # (a Row without NamedTuple's Python-level __new__)
        return tuple.__new__(Row, (name[:name.rindex(".")], name, snap.blocks[snap.block_of[r]],
                                   snap.hashes[32 * r:32 * r + 32], True))

    def by_block(self) -> dict[tuple[str, str], tuple[list[Row], list[int]]]:
        """Each block's fresh rows and kept row numbers, blocks in the order of their first row."""
        blocks: dict[tuple[str, str], tuple[list[Row], list[int]]] = {}
        for row in self.fresh:
            blocks.setdefault(row.block, ([], []))[0].append(row)
        if self.kept:
            assert self.snap is not None
            import numpy as np  # (with_candidates, the caller, signs with it)

            # grouped as arrays: the kept rows of a large block are thousands, not a dict step each
            kept = np.asarray(self.kept, dtype=np.int64)
            codes = np.frombuffer(self.snap.block_of, dtype=f"u{self.snap.block_of.itemsize}")[kept]
            found, first = np.unique(codes, return_index=True)
            for code in found[np.argsort(first, kind="stable")].tolist():
                blocks.setdefault(self.snap.blocks[code], ([], []))[1].extend(kept[codes == code].tolist())
        return blocks


def focus_rows(scan: FolderScan, changed: set[str]) -> FocusRows:
    """The rows of the folder's blocks that hold a changed memory: entries as read, and the
    unchanged snapshot rows of those blocks (no entry, no hex, for the rest of the folder)."""
    fresh = [Row(e["id"], e["file"], (str(e.get("type")), str(e.get("subtype") or "")),
                 bytes.fromhex(e["content_hash"]), False) for e in scan.entries]
    snap = scan.snap
    if snap is None:
        blocks = {row.block for row in fresh if row.id in changed}
        return FocusRows([row for row in fresh if row.block in blocks])
    wanted = {snap.row(i + ext) for i in changed for ext in (".json", ".md")} - {None}
    blocks = {row.block for row in fresh if row.id in changed} | {snap.blocks[snap.block_of[r]]
                                                                   for r in wanted if r is not None}
    codes = {n for n, block in enumerate(snap.blocks) if block in blocks}
    block_of = snap.block_of
    return FocusRows([row for row in fresh if row.block in blocks], snap,
                     [r for r in scan.kept if block_of[r] in codes])


def with_candidates(rows: FocusRows | list[Row], changed: set[str], cache: SigCache,
                    read: Callable[[Row], Memory | None]) -> dict[str, Row]:
    """The changed memories' rows and those of their duplicate candidates: a whole block
    where it is small, else the LSH candidates of its changed members."""
    from memcli.consolidate import candidates

    focus_of = rows if isinstance(rows, FocusRows) else FocusRows(list(rows))
    snap = focus_of.snap
    # the unchanged rows in scope for a flagged pair (changed ids are all read again, fresh)
    flagged: set[int] = set()
    if snap is not None and focus_of.kept:
        flagged = {r for i in changed for ext in (".json", ".md") if (r := snap.row(i + ext)) is not None}
    needed = {row.id: row for row in focus_of.fresh if row.id in changed}
    if flagged:
        taken = sorted(flagged.intersection(focus_of.kept))
        needed.update((row.id, row) for row in map(focus_of.kept_row, taken))
    for fresh, kept in focus_of.by_block().values():
        if len(fresh) + len(kept) <= ALL_PAIRS_MAX:
            needed.update((row.id, row) for row in fresh)
            needed.update((row.id, row) for row in map(focus_of.kept_row, kept))
            continue

        def row_at(n: int, fresh: list[Row] = fresh, kept: list[int] = kept) -> Row:
            return fresh[n] if n < len(fresh) else focus_of.kept_row(kept[n - len(fresh)])

        focus = [n for n, row in enumerate(fresh) if row.id in changed]
        if flagged:
            focus += [len(fresh) + p for p, r in enumerate(kept) if r in flagged]
        hashes = snap.hashes if snap is not None else b""
        sigs = cached_sigs([row.digest for row in fresh], row_at, cache, read, hashes, kept)
        pairs = candidates.candidate_pairs_for(focus, sigs, None)
        needed.update((row.id, row) for row in (row_at(n) for pair in pairs for n in pair))
    return needed


def cached_sigs(digests: list[bytes], row_at: Callable[[int], Row], cache: SigCache,
                read: Callable[[Row], Memory | None], column: bytes = b"",
                kept: list[int] | None = None) -> list[bytes]:
    """Signatures of a block's rows from the folder's cache: first those of the content hashes
    `digests`, then those of the snapshot rows `kept` (their hashes in `column`, 32 bytes a
    row). The missing ones are read (`row_at` gives a position's Row) and computed in one
    go, and added to the cache."""
    from memcli.consolidate import candidates

    kept = kept or []
    sigs = cache.raw_many(digests) + cache.raw_rows(column, kept)
    first = len(digests)
    missing = [n for n, sig in enumerate(sigs) if sig is None]
    for n in missing:  # computed earlier in this run (not in the file yet)?
        digest = digests[n] if n < first else column[32 * kept[n - first]:32 * kept[n - first] + 32]
        sigs[n] = cache.added.get(digest.hex())
    missing = [n for n in missing if sigs[n] is None]
    memories = [read(row_at(n)) for n in missing]
    texts = ["" if mem is None else rules.content_text(mem.content) for mem in memories]
    for n, mem, sig in zip(missing, memories, candidates.signatures(texts), strict=True):
        sigs[n] = sig  # a file that could not be read: the signature of no text, not cached
        if mem is not None:
            cache[mem.content_hash] = sig
    return [sig or b"" for sig in sigs]
