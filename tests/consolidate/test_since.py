"""session_end's view before reading: changed ids, the rows of their blocks, their candidates."""

from __future__ import annotations

import os
import select
from pathlib import Path
from typing import Any

import pytest

from memcli.consolidate import engine, since
from memcli.consolidate.similar import ALL_PAIRS_MAX
from memcli.store import lastrun, sigcache
from memcli.store.model import Memory
from memcli.store.sigcache import SigCache
from memcli.store.store import FolderScan, Store
from tests.conftest import add


def test_stamps_keep_only_pairs_of_integers() -> None:
    saved = {"agent/a": [1, 2], "agent/b": [1], "agent/c": ["1", 2], "agent/d": "x", "agent/e": [True, 2]}
    assert since.stamps(saved) == {"agent/a": (1, 2)}
    assert since.stamps(None) == {} and since.stamps([[1, 2]]) == {}


def scan_after_a_run(store: Path, kinds: list[str], new_kind: str) -> tuple[object, dict[str, str]]:
    """A folder covered by a run (so it has a snapshot), then one memory added of `new_kind`."""
    for kind in kinds:
        add(store, type=kind, subtype="x")
    engine.consolidate(Store(store))
    new = add(store, type=new_kind, subtype="x")
    s = Store(store)
    folder = s.folder("agent", "coder")
    snap = lastrun.load_lastrun(folder.cache())
    assert snap is not None
    return s.scan_since(folder, snap), new


def test_changed_ids_and_the_rows_of_their_blocks_only(store: Path) -> None:
    scan, new = scan_after_a_run(store, ["semantic", "semantic", "procedural"], "semantic")
    changed = since.changed_ids(scan, set())  # type: ignore[arg-type]
    assert changed == {new["id"]}
    rows = since.focus_rows(scan, changed)  # type: ignore[arg-type]
    assert sorted(r.block for r in rows) == [("semantic", "x")] * 3  # no procedural row
    assert [r.unchanged for r in rows].count(False) == 1  # the new file, read; the others not


def test_a_flagged_memory_is_in_scope_though_unchanged(store: Path) -> None:
    scan, new = scan_after_a_run(store, ["semantic", "procedural"], "semantic")
    procedural = next(p.stem for p in (store / "agent" / "coder").glob("mem_*.json")
                      if '"procedural"' in p.read_text())
    changed = since.changed_ids(scan, {procedural, "mem_not_here"})  # type: ignore[arg-type]
    assert changed == {new["id"], procedural}
    assert {r.block for r in since.focus_rows(scan, changed)} == {  # type: ignore[arg-type]
        ("semantic", "x"), ("procedural", "x")}


def test_a_small_block_is_taken_whole_without_signatures(store: Path) -> None:
    scan, new = scan_after_a_run(store, ["semantic"] * 3, "semantic")
    rows = since.focus_rows(scan, {new["id"]})  # type: ignore[arg-type]
    assert len(rows) <= ALL_PAIRS_MAX

    def never(row: since.Row) -> Memory:
        raise AssertionError("no file read for a small block")

    cache = SigCache()
    assert set(since.with_candidates(rows, {new["id"]}, cache, never)) == {r.id for r in rows}
    assert cache.added == {}


def _large_block_since(store: Path, other: str | None = None) -> tuple[dict[str, Any], dict[str, Any],
                                                                      FolderScan, dict[str, Any]]:
    """A block above ALL_PAIRS_MAX after a real run (with one more memory, `other`, when given),
    then a restatement of one member added: (the restated, the new one, the scan since the
    run, the other memory or {})."""
    text = "Rotate the staging database credentials before the quarterly security audit"
    for n in range(ALL_PAIRS_MAX + 5):
        add(store, type="semantic", subtype="x", summary=f"note {n}: {n * 7919} widgets in bay {n % 13}")
    old = add(store, type="semantic", subtype="x", summary=text)
    extra = add(store, type="semantic", subtype="x", summary=other) if other is not None else {}
    engine.consolidate(Store(store))
    new = add(store, type="semantic", subtype="x", summary=text + " today")
    s = Store(store)
    folder = s.folder("agent", "coder")
    snap = lastrun.load_lastrun(folder.cache())
    assert snap is not None
    return old, new, s.scan_since(folder, snap), extra


def test_a_large_block_gives_the_changed_memory_and_its_candidates_only(store: Path) -> None:
    old, new, scan, _ = _large_block_since(store)
    s = Store(store)
    folder = s.folder("agent", "coder")
    rows = since.focus_rows(scan, {new["id"]})
    assert len(rows) > ALL_PAIRS_MAX
    read: list[str] = []

    def reader(row: since.Row) -> Memory:
        read.append(row.id)
        return scan.memories.get(row.id) or s.read_memory(folder.path / row.file, folder)

    cache = sigcache.load_sigs(folder.cache())
    needed = since.with_candidates(rows, {new["id"]}, cache, reader)
    assert {old["id"], new["id"]} <= set(needed) and len(needed) < len(rows) // 2
    assert read == [new["id"]] and list(cache.added) == [scan.memories[new["id"]].content_hash]


def test_an_unchanged_looking_file_that_went_bad_is_a_problem_not_an_abort(store: Path) -> None:
    """A file rewritten with the same size and its old mtime put back passes the stat check;
    when session_end then reads it (a candidate), it is reported and left out, and the run
    goes on with the rest."""
    olds = [add(store, type="semantic", subtype="x", summary=f"fact {n} about rack {n}") for n in range(3)]
    engine.consolidate(Store(store))
    path = store / "agent" / "coder" / f"{olds[0]['id']}.json"
    before, st = path.read_bytes(), path.stat()
    path.write_bytes(b"{" + b" " * (len(before) - 1))  # same size, not JSON
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    new = add(store, type="semantic", subtype="x", summary="a new fact about the cooling")
    out = engine.consolidate(Store(store), trigger="session_end")
    assert any(olds[0]["id"] in note for note in out.notes)
    assert path.read_bytes() == b"{" + b" " * (len(before) - 1)  # left as it is
    assert out.stats["skipped"] == 0 and new["id"] not in str(out.notes)


def test_a_large_block_with_a_flagged_unchanged_member_gives_what_every_row_as_a_list_gives(store: Path) -> None:
    """The unchanged rows stay row numbers until taken (FocusRows): the changed memory, the
    flagged unchanged one (a focus too, though not read again) and their candidates are the
    same as from every row made up front, and a Row is made only for the rows taken."""
    old, new, scan, flagged = _large_block_since(store, "Badge readers in bay 4 reset at midnight")
    s, snap = Store(store), scan.snap
    folder = s.folder("agent", "coder")
    changed = since.changed_ids(scan, {flagged["id"]})
    assert changed == {new["id"], flagged["id"]}
    rows = since.focus_rows(scan, changed)
    every = list(rows)
    assert len(every) == len(rows) > ALL_PAIRS_MAX
    assert [r.unchanged for r in every].count(False) == 1 and every[0].id == new["id"]
    unchanged = every[1:]  # snapshot rows: their content hash as recorded, run hash the same
    assert all(r.digest.hex() == snap.content_hash(snap.row(r.file)) for r in unchanged)  # type: ignore[arg-type]

    def reader(row: since.Row) -> Memory:
        return scan.memories.get(row.id) or s.read_memory(folder.path / row.file, folder)

    made: list[int] = []
    plain = rows.kept_row

    def counted(r: int) -> since.Row:
        made.append(r)
        return plain(r)

    rows.kept_row = counted  # type: ignore[method-assign]
    needed = since.with_candidates(rows, changed, sigcache.load_sigs(folder.cache()), reader)
    assert needed == since.with_candidates(every, changed, sigcache.load_sigs(folder.cache()), reader)
    assert {old["id"], new["id"], flagged["id"]} <= set(needed) and len(needed) < len(every) // 2
    assert len(set(made)) <= len(needed) and len(made) < len(every) // 2


def test_focus_rows_of_a_small_block_without_a_snapshot_are_the_entries_as_read(store: Path) -> None:
    """Before any run (no snapshot): the rows are the read entries of the changed blocks only."""
    first = add(store, type="semantic", subtype="x")
    add(store, type="procedural", subtype="x")
    s = Store(store)
    scan = s.scan(s.folder("agent", "coder"), load=False)
    rows = since.focus_rows(scan, {first["id"]})
    assert [r.id for r in rows] == [first["id"]] and rows.kept == [] and len(rows) == 1
    assert set(since.with_candidates(rows, {first["id"]}, SigCache(), lambda row: None)) == {first["id"]}


def test_by_block_groups_kept_rows_by_block_in_the_order_of_their_first_row() -> None:
    from array import array

    names = [f"mem_{n:02d}.json" for n in range(9)]
    blocks = [("semantic", "a"), ("procedural", "b"), ("episodic", "c"), ("semantic", "d")]
    block_of = array("H", [2, 0, 2, 1, 0, 0, 2, 3, 1])
    snap = lastrun.Snapshot(names, array("q", [1] * 9), array("q", [1] * 9), bytes(32 * 9), block_of, blocks, 10)
    fresh = [since.Row("mem_x", "mem_x.json", ("procedural", "b"), bytes(32), False),
             since.Row("mem_y", "mem_y.json", ("new", "block"), bytes(32), False)]
    for kept in ([0, 1, 2, 3, 4, 5, 6, 7, 8], [1, 4, 8], [8], [6, 7]):
        got = since.FocusRows(fresh, snap, list(kept)).by_block()
        expected: dict[tuple[str, str], tuple[list[Any], list[int]]] = {}
        for row in fresh:  # what a dict step a row gives
            expected.setdefault(row.block, ([], []))[0].append(row)
        for r in kept:
            expected.setdefault(blocks[block_of[r]], ([], []))[1].append(r)
        assert list(got.items()) == list(expected.items())
    assert list(since.FocusRows(fresh).by_block()) == [("procedural", "b"), ("new", "block")]


# ---------------------------------------------------------------- a worker's share of the scans


def _store_after_a_run(store: Path, folders: int = 4, each: int = 3) -> None:
    for k in range(folders):
        for _ in range(each):
            add(store, scope_id=f"a{k}")
    engine.consolidate(Store(store))


def _held_stamps(s: Store) -> dict[str, tuple[int, int]]:
    """Stamps that hold for every folder (as a pass leaves them): no folder looks moved."""
    found = {}
    for folder in s.memory_folders():
        snap = lastrun.load_lastrun(folder.cache())
        if snap is not None:  # (global/, empty: none)
            found[folder.rel] = (os.stat(folder.path).st_mtime_ns, snap.written_ns)
    assert len(found) == 4
    return found


def _scans(store: Path, stamps: dict[str, tuple[int, int]]) -> list[tuple[Any, ...]]:
    s = Store(store)
    return [(scan.folder.rel, scan.count, scan.stamp, sorted(e["id"] for e in scan.entries),
             scan.reread, sorted(scan.memories), [p.code for p in scan.problems])
            for scan in since.scans(s, s.memory_folders(), stamps)]


def _forks(monkeypatch: pytest.MonkeyPatch) -> list[int | None]:
    """The workers started (pids), with a worker wanted for the smallest pass."""
    from memcli.consolidate import parallel

    monkeypatch.setattr(since, "SHARE_FROM", 0)
    monkeypatch.setenv("MEMCLI_JOBS", "2")
    started: list[int | None] = []
    original = parallel.fork_child

    def spy(body: Any, closes: Any) -> int | None:
        started.append(original(body, closes))
        return started[-1]

    monkeypatch.setattr(parallel, "fork_child", spy)
    return started


def test_a_worker_scans_some_folders_and_the_scans_are_a_serial_passs(
        store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _store_after_a_run(store)
    stamps = _held_stamps(Store(store))
    add(store, scope_id="a0")  # a folder with a new file: scanned here
    touched = next((store / "agent" / "a3").glob("mem_*.json"))  # changed in place: its folder looks unmoved
    touched.write_bytes(touched.read_bytes().replace(b'"summary": "', b'"summary": "edited, '))
    monkeypatch.setenv("MEMCLI_JOBS", "1")
    serial = _scans(store, stamps)
    started = _forks(monkeypatch)
    reports: list[dict[int, Any]] = []
    stop = since.Worker.stop

    def spy(self: since.Worker) -> None:
        if self.pid > 0 and not reports:
            reports.append({})
            while self.poll():  # (the worker's whole report: this test waits for it)
                select.select([self.fd], [], [], 5)
            reports[0] = {p: found for p, found in self.reports.items() if found is not None}
        stop(self)

    monkeypatch.setattr(since.Worker, "stop", spy)
    assert _scans(store, stamps) == serial
    assert len(started) == 1 and started[0] is not None
    rels = [scan[0] for scan in serial]
    assert len(reports) == 1 and reports[0]  # some unchanged folder was the worker's...
    assert rels.index("agent/a3") not in reports[0]  # ...but not a3, changed: scanned here again
    assert rels.index("agent/a0") not in reports[0]  # (a0 looks changed: never the worker's)
    assert serial[rels.index("agent/a3")][4] == [touched.name] and serial[0][3]


def test_a_worker_that_fails_or_hangs_costs_time_not_a_different_scan(
        store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import signal

    _store_after_a_run(store)
    stamps = _held_stamps(Store(store))
    add(store, scope_id="a1")
    monkeypatch.setenv("MEMCLI_JOBS", "1")
    serial = _scans(store, stamps)
    started = _forks(monkeypatch)
    parent, original = os.getpid(), Store.scan_since
    for trouble in ("raise", "hang"):
        def broken(self: Store, *args: Any, trouble: str = trouble) -> FolderScan:
            if os.getpid() != parent:
                if trouble == "raise":
                    raise OSError("worker trouble")
                signal.pause()  # stuck until stopped
            return original(self, *args)

        monkeypatch.setattr(Store, "scan_since", broken)
        assert _scans(store, stamps) == serial  # (never waited for: its folders scanned here)
    assert len(started) == 2 and None not in started
    for pid in started:  # every worker was waited for
        with pytest.raises(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)  # type: ignore[arg-type]


def test_no_worker_for_a_small_pass_or_when_every_folder_looks_changed(
        store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _store_after_a_run(store)
    s = Store(store)
    folders = s.memory_folders()
    snaps = [lastrun.load_lastrun(f.cache()) for f in folders]
    stamps = _held_stamps(s)
    assert since._split(folders, snaps, stamps) == ([], {})  # 12 files: below SHARE_FROM
    monkeypatch.setattr(since, "SHARE_FROM", 0)
    assert since._split(folders, snaps, stamps)[0]
    for folder in folders:  # a file came into every folder since the run
        if folder.scope == "agent":
            add(store, scope_id=folder.scope_id)
    assert since._split(folders, snaps, stamps) == ([], {})  # (too few rows for a part)


def test_the_split_gives_the_worker_unmoved_folders_up_to_this_processs_share(
        store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _store_after_a_run(store, folders=4, each=2)
    s = Store(store)
    folders = s.memory_folders()
    snaps = [lastrun.load_lastrun(f.cache()) for f in folders]
    stamps = _held_stamps(s)
    monkeypatch.setattr(since, "SHARE_FROM", 0)
    rels = [f.rel for f in folders]
    add(store, scope_id="a0")  # moved: 2 files, counted as 4, here
    # the largest unmoved first (ties: in order), each to the one with less so far
    assert [rels[p] for p in since._split(folders, snaps, stamps)[0]] == ["agent/a1", "agent/a2", "agent/a3"]
    add(store, scope_id="a0")
    add(store, scope_id="a0")  # 4 files, counted as 8
    add(store, scope_id="a3")  # moved too
    assert [rels[p] for p in since._split(folders, snaps, stamps)[0]] == ["agent/a1", "agent/a2"]


def test_a_workers_report_is_read_a_line_at_a_time() -> None:
    assert since._report(b"0 5 1 2") == (0, (5, (1, 2))) and since._report(b"3 7 - -") == (3, (7, None))
    assert since._report(b"4 changed") == (4, None)
    for garbled in (b"", b"0 5 1", b"x 5 1 2", b"0 5 - 2", b"0 5 1 2 3", b"\xff"):
        assert since._report(garbled) == (-1, None)


def test_the_worker_is_not_waited_for_its_folders_not_reported_are_scanned_here_from_the_last(
        store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import signal

    _store_after_a_run(store)
    stamps = _held_stamps(Store(store))
    parent, original = os.getpid(), Store.scan_since
    order: list[str] = []

    def slow(self: Store, folder: Any, *args: Any) -> FolderScan:
        if os.getpid() != parent:
            signal.pause()  # a worker that never reports
        order.append(folder.rel)
        return original(self, folder, *args)

    monkeypatch.setenv("MEMCLI_JOBS", "1")
    serial = _scans(store, stamps)
    _forks(monkeypatch)
    monkeypatch.setattr(Store, "scan_since", slow)
    order.clear()
    assert _scans(store, stamps) == serial
    s = Store(store)
    folders = s.memory_folders()
    share = since._split(folders, [lastrun.load_lastrun(f.cache()) for f in folders], stamps)[0]
    mine = [f.rel for p, f in enumerate(folders) if p not in share and f.rel != "global"]
    assert len(share) == 2 and len(mine) == 2  # (the folders alike: every other one the worker's)
    # its own folders, then the worker's from its last (global/ has no snapshot: scan_since never)
    assert order == mine + [folders[p].rel for p in share[::-1]]


def test_a_worker_only_beside_an_idle_core_unless_asked_for(store: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    _store_after_a_run(store)
    s = Store(store)
    folders = s.memory_folders()
    snaps = [lastrun.load_lastrun(f.cache()) for f in folders]
    monkeypatch.setattr(since, "SHARE_FROM", 0)
    monkeypatch.setattr("memcli.consolidate.parallel.idle_core", lambda: False)
    monkeypatch.setattr("memcli.consolidate.parallel.cores", lambda: 2)
    monkeypatch.delenv("MEMCLI_JOBS", raising=False)
    assert not since.Worker.wanted()
    monkeypatch.setenv("MEMCLI_JOBS", "2")  # asked for: whatever the load
    assert since.Worker.wanted()
    worker = since.Worker.start(folders, snaps, _held_stamps(s), lambda p: None)  # type: ignore
    assert worker is not None
    worker.stop()


def test_a_serial_pass_loads_each_snapshot_when_it_scans_its_folder(
        store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Not every folder's snapshot at once (about 180 bytes a row: 180 MB at 1,000,000 memories)."""
    _store_after_a_run(store)
    stamps = _held_stamps(Store(store))
    monkeypatch.setenv("MEMCLI_JOBS", "1")
    held = [0, 0]  # snapshots loaded and not scanned yet: now, at most
    load, scan_since = lastrun.load_lastrun, Store.scan_since

    def loading(folder: Path) -> Any:
        snap = load(folder)
        held[0] += snap is not None
        held[1] = max(held)
        return snap

    def scanning(self: Store, *args: Any) -> FolderScan:
        held[0] -= 1
        return scan_since(self, *args)

    monkeypatch.setattr(lastrun, "load_lastrun", loading)
    monkeypatch.setattr(Store, "scan_since", scanning)
    assert len(_scans(store, stamps)) == 5  # (four agent folders and global/, which has none)
    assert held == [0, 1]


def test_the_worker_is_not_kept_off_by_the_load_average_but_by_one_core(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The 1-minute average counts work that ended a while ago; the worker, at the lowest
    priority, takes only CPU nothing else wants. One core, or MEMCLI_JOBS=1: no worker."""
    from memcli.consolidate import parallel

    monkeypatch.delenv("MEMCLI_JOBS", raising=False)
    monkeypatch.setattr(parallel, "idle_core", lambda: True)
    monkeypatch.setattr(parallel, "busy_cores", lambda: 7)  # a machine busy until a moment ago
    monkeypatch.setattr(parallel, "cores", lambda: 2)
    assert parallel.jobs() == 1 and since.Worker.wanted()
    monkeypatch.setattr(parallel, "cores", lambda: 1)
    assert not since.Worker.wanted()
    monkeypatch.setattr(parallel, "cores", lambda: 2)
    monkeypatch.setenv("MEMCLI_JOBS", "1")
    assert not since.Worker.wanted()


def test_the_worker_runs_at_the_lowest_priority(store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Its body first lowers its own priority (SCHED_IDLE where there is one): seen from
    the scan it runs, in the worker."""
    _store_after_a_run(store)
    s = Store(store)
    folders = s.memory_folders()
    snaps = [lastrun.load_lastrun(f.cache()) for f in folders]
    monkeypatch.setattr(since, "SHARE_FROM", 0)
    read, write = os.pipe()

    def scan(p: int) -> Any:
        policy = os.sched_getscheduler(0) if hasattr(os, "sched_getscheduler") else -1
        os.write(write, f"{policy} {os.nice(0)}\n".encode())
        raise RuntimeError("only looked")  # (the worker ends; nothing reported)

    worker = since.Worker.start(folders, snaps, _held_stamps(s), scan)
    os.close(write)
    assert worker is not None
    try:
        line = os.read(read, 100).decode().split("\n")[0]
    finally:
        os.close(read)
        worker.stop()
    policy, niceness = map(int, line.split())
    assert policy == getattr(os, "SCHED_IDLE", -2) or niceness == 19
    assert os.sched_getscheduler(0) != getattr(os, "SCHED_IDLE", -2)  # (this process: unchanged)


def test_a_worker_stats_a_part_of_the_changed_folder_and_the_scans_are_a_serial_passs(
        store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A session's folder larger than the rest together (the mix's agent0): the worker stats
    its last rows, a chunk a line, and the pass takes them where they meet its own."""
    _store_after_a_run(store, folders=2, each=2)
    for _ in range(8):
        add(store, scope_id="a0")
    engine.consolidate(Store(store))
    s = Store(store)
    stamps = {f.rel: (os.stat(f.path).st_mtime_ns, snap.written_ns) for f in s.memory_folders()
              if (snap := lastrun.load_lastrun(f.cache())) is not None}
    a0 = next(f for f in s.memory_folders() if f.rel == "agent/a0")
    names = sorted(p.name for p in a0.path.glob("mem_*"))
    assert len(names) == 10
    for name in (names[2], names[8]):  # edited in place: one in the pass's rows, one in the worker's
        (a0.path / name).write_bytes((a0.path / name).read_bytes().replace(b'"summary": "', b'"summary": "e, '))
    add(store, scope_id="a0")
    monkeypatch.setenv("MEMCLI_JOBS", "1")
    serial = _scans(store, stamps)
    started = _forks(monkeypatch)
    monkeypatch.setattr(since, "PART_MIN", 1)
    monkeypatch.setattr(since, "PART_CHUNK", 2)
    folders = Store(store).memory_folders()
    share, parts = since._split(folders, [lastrun.load_lastrun(f.cache()) for f in folders], stamps)
    assert list(parts) == [0] and 0 < parts[0] < 10  # a0: the worker's from that row on
    seen: list[tuple[int, list[int]] | None] = []
    part = since.Worker.part

    def whole_part(self: since.Worker, p: int) -> tuple[int, list[int]] | None:
        while self.poll() and (self.rows.get(p) or (10, []))[0] < 10:  # (this test waits for it all)
            select.select([self.fd], [], [], 5)
        seen.append(part(self, p))
        return seen[-1]

    monkeypatch.setattr(since.Worker, "part", whole_part)
    assert _scans(store, stamps) == serial
    assert len(started) == 1 and started[0] is not None
    assert seen and seen[0] is not None and seen[0][0] == 10  # every row of its part reported
    assert seen[0][1] == [r for r in (2, 8) if r >= parts[0]]  # the rows edited, of its part
    assert {names[2], names[8]} < set(serial[0][4]) and len(serial[0][4]) == 3  # (and the new file)


def test_a_part_report_is_read_a_line_at_a_time() -> None:
    assert since._rows_report(b"0 rows 512 1024 513 700") == (0, 512, 1024, [513, 700])
    assert since._rows_report(b"2 rows 0 512") == (2, 0, 512, [])
    assert since._rows_report(b"2 rows 0 512 -") == (2, 0, 512, None)
    for garbled in (b"0 rows 1", b"x rows 0 1", b"0 rows 0 1 y", b"0 cols 0 1"):
        assert since._rows_report(garbled)[0] == -1
