"""A real run's recording takes the entries its planning made of the files it read
(`memcli.store.planned`): no second read of an unindexed folder, the same index as a fresh
`reindex`, and never stale facts for a file another writer changed during the run."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from memcli.consolidate import engine
from memcli.store import fsops, index, journal, lastrun, planned
from memcli.store.memories import reindex
from memcli.store.model import sha256
from memcli.store.store import Store
from tests import sweep
from tests.conftest import add, days_ago, snapshot
from tests.store import test_crash

BASE = "Run the database migrations on staging first then deploy the build to production"
OLD_NS = 1_700_000_000 * 10**9  # files last written long before any run of these tests


def build(root: Path, count: int = 40) -> dict[str, str]:
    """An unindexed store: `count` memories in agent/coder (two of them duplicates, so the
    run writes), every file's mtime long past. Returns role -> id."""
    roles = {"dup0": add(root, summary=BASE, tags=["deploy"], type="procedural", subtype="deployment",
                         created_at=days_ago(50))["id"],
             "dup1": add(root, summary=BASE + " today", tags=["deploy"], type="procedural",
                         subtype="deployment", created_at=days_ago(40))["id"]}
    for n in range(count - 2):
        roles[f"m{n}"] = add(root, tags=[f"t{n}"], subtype=f"s{n}")["id"]
    for path in (root / "agent" / "coder").iterdir():
        os.utime(path, ns=(OLD_NS, OLD_NS))
    return roles


def fresh_entries(root: Path) -> dict[str, list[dict[str, Any]]]:
    """What a fresh `reindex` would hold: every file read, keeping what the saved index cached."""
    store = Store(root)
    return {f.rel: sorted(store.scan(f, load=True).entries, key=lambda e: e["id"])
            for f in [*store.memory_folders(), store.archive_folder()]}


def saved_entries(root: Path) -> dict[str, list[dict[str, Any]]]:
    store = Store(root)
    return {f.rel: sorted((index.load(f.path) or {"entries": []})["entries"], key=lambda e: e["id"])
            for f in [*store.memory_folders(), store.archive_folder()]}


class Reads:
    """Counts the memory files `Store` reads (not indices, not caches)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.names: list[str] = []
        original = Store._open_read

        def counted(store: Store, path: Path | str, problems: list[Any]) -> Any:
            self.names.append(Path(path).name)
            return original(store, path, problems)

        monkeypatch.setattr(Store, "_open_read", counted)


def test_the_recording_reads_only_the_files_the_run_wrote(store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    roles = build(store)
    reads = Reads(monkeypatch)
    seen: dict[str, int] = {}

    def confirm(_: Any) -> bool:  # planning is done: what is read from here on is the recording's
        seen["planning"] = len(reads.names)
        return True

    outcome = engine.consolidate(Store(store), confirm=confirm)
    assert [a["type"] for a in outcome.actions] == ["merge"]
    assert seen["planning"] >= 40  # planning read every file (no index)
    recorded = reads.names[seen["planning"]:]
    # the merge's keeper (rewritten) and its archived member: nothing else is read again
    assert sorted({n.split("@")[0].rsplit(".", 1)[0] for n in recorded}) == sorted([roles["dup0"], roles["dup1"]])
    assert saved_entries(store) == fresh_entries(store)
    assert all(e["run_hash"] == e["content_hash"] for e in saved_entries(store)["agent/coder"])
    assert not list(store.rglob(planned.PLANNED_NAME)) and not list(store.rglob("*.tmp"))


def test_the_same_index_as_without_the_handed_entries(store: Path, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    build(store)
    other = tmp_path / "other"
    shutil.copytree(store, other)
    engine.consolidate(Store(store))
    monkeypatch.setattr(planned, "SAVE_FROM", 10**9)  # the old way: every file read again
    engine.consolidate(Store(other))
    assert snapshot(store).keys() == snapshot(other).keys()
    ours, theirs = saved_entries(store), saved_entries(other)
    drop = ("mtime_ns", "archived_at", "archive_run_id", "run_hash", "content_hash", "size")
    assert ours.keys() == theirs.keys()
    for rel in ours:  # the rewritten files differ only by their run id and mtimes
        assert [{k: v for k, v in e.items() if k not in drop} for e in ours[rel]] == \
               [{k: v for k, v in e.items() if k not in drop} for e in theirs[rel]]
    assert ours == fresh_entries(store)


@pytest.mark.parametrize("recent", [False, True])
def test_a_file_another_writer_changed_during_the_run_is_read_again(
        store: Path, monkeypatch: pytest.MonkeyPatch, recent: bool) -> None:
    """Changed after planning read it: with a new mtime (the usual case), and with the same
    size and mtime (a rewrite within one timestamp tick of a file written just before the
    run read it, the "racy" case: such a file is never handed over, so it is read again)."""
    roles = build(store)
    victim = store / "agent" / "coder" / f"{roles['m3']}.json"
    if recent:  # written a moment before the run: within STAMP_AGE_NS of planning's read
        stamp = time.time_ns() - 10**8
        os.utime(victim, ns=(stamp, stamp))
    raw = victim.read_bytes()
    edited = raw.replace(b'"access_count": ', b'"access_count":1')  # same size: one space less, one digit
    assert len(edited) == len(raw) and edited != raw

    def confirm(_: Any) -> bool:
        before = os.stat(victim)
        victim.write_bytes(edited)  # in place, as an editor might
        if recent:
            os.utime(victim, ns=(before.st_atime_ns, before.st_mtime_ns))  # the same tick
        return True

    engine.consolidate(Store(store), confirm=confirm)
    entry = next(e for e in saved_entries(store)["agent/coder"] if e["id"] == roles["m3"])
    assert entry["content_hash"] == sha256(edited) and entry["run_hash"] == sha256(edited)
    assert saved_entries(store) == fresh_entries(store)


def test_files_written_just_before_the_run_are_not_handed_over(store: Path) -> None:
    build(store, planned.SAVE_FROM + 10)
    folder = Store(store).folder("agent", "coder")
    names = sorted(p.name for p in folder.path.iterdir())
    now = time.time_ns()
    for name in names[:10]:  # within the last second: a same-tick rewrite could follow the read
        os.utime(folder.path / name, ns=(now - 10**8, now - 10**8))
    read_from = planned.started()
    scan = Store(store).scan(folder, load=False, entries=False, compare=False)
    ticket = planned.save(folder, scan, read_from)
    handed = planned.load(ticket)
    assert handed is not None
    assert sorted(e["file"] for e in handed) == names[10:]


@pytest.mark.parametrize("count,saved,up_to", [(planned.SAVE_FROM - 1, False, None),
                                               (planned.SAVE_FROM, True, None),
                                               (50, True, 50), (51, False, 50)])
def test_a_folder_with_few_or_too_many_files_read_writes_no_scratch_file(
        store: Path, monkeypatch: pytest.MonkeyPatch, count: int, saved: bool, up_to: int | None) -> None:
    if up_to is not None:
        monkeypatch.setattr(planned, "SAVE_UP_TO", up_to)
    build(store, count)
    folder = Store(store).folder("agent", "coder")
    scan = Store(store).scan(folder, load=False, entries=False, compare=False)
    assert len(scan.memories) == count
    ticket = planned.save(folder, scan, planned.started())
    assert (ticket is not None) == saved
    assert (folder.cache() / planned.PLANNED_NAME).exists() == saved


def test_a_scratch_file_that_is_not_ours_is_neither_used_nor_removed(store: Path) -> None:
    build(store)
    folder = Store(store).folder("agent", "coder")
    scan = Store(store).scan(folder, load=False, entries=False, compare=False)
    ticket = planned.save(folder, scan, planned.started())
    assert ticket is not None and planned.load(ticket)
    stranger = planned.Ticket(ticket.path, "0" * 16)  # another run's (a crash left it behind)
    assert planned.load(stranger) is None
    planned.discard({"agent/coder": stranger})
    assert ticket.path.exists()
    fsops.write_replace(ticket.path, b"not json")
    assert planned.load(ticket) is None
    planned.discard({"agent/coder": ticket})
    assert ticket.path.exists()  # not ours any more: left alone (the next run's write replaces it)
    fsops.write_replace(ticket.path, b'{"token":"%s","entries":[]}' % ticket.token.encode())
    planned.discard({"agent/coder": ticket})
    assert not ticket.path.exists()


def test_a_dry_run_and_a_cancelled_run_leave_no_scratch_file(store: Path) -> None:
    build(store)
    engine.consolidate(Store(store), dry_run=True)
    assert not list(store.rglob(planned.PLANNED_NAME))
    with pytest.raises(Exception, match="cancelled"):
        engine.consolidate(Store(store), confirm=lambda _: False)
    assert not list(store.rglob(planned.PLANNED_NAME))


def test_the_recording_makes_its_indices_and_snapshots_durable_in_one_barrier(
        store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    build(store)
    barriers: list[list[Path]] = []
    real_barrier = fsops._barrier

    def barrier(root: Path, files: list[Path], folders: set[Path]) -> None:
        barriers.append(list(files))
        real_barrier(root, files, folders)

    monkeypatch.setattr(fsops, "_barrier", barrier)
    engine.consolidate(Store(store))
    coder = Store(store).folder("agent", "coder")
    recorded = [b for b in barriers if coder.path / index.INDEX_NAME in b]
    assert len(recorded) == 1  # the last barrier of the run: every index and snapshot it wrote
    assert {coder.path / index.INDEX_NAME, coder.cache() / lastrun.LASTRUN_NAME,
            store / "archive" / index.INDEX_NAME} <= set(recorded[0])


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("planned") / "pristine"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MEMCLI_NOW", test_crash.NOW)
        for sub in ("ops", "archive", "global"):
            (root / sub).mkdir(parents=True)
        (root / "memcli.toml").write_text(test_crash.TOML)
        build(root)
    return root


@pytest.mark.slow
def test_every_crash_point_of_a_run_that_hands_entries_over_recovers(pristine: Path, tmp_path: Path) -> None:
    """The crash sweep of tests/store/test_crash.py on an unindexed folder large enough for
    planning to hand its entries over; after recovery the index is also what `reindex`
    would build."""
    k = test_crash.count_changes(pristine, tmp_path / "count")
    clean = tmp_path / "clean"
    shutil.copytree(pristine, clean)
    assert test_crash.memcli(clean, "consolidate").returncode == 0
    pre, post = snapshot(pristine), snapshot(clean)
    assert pre != post

    def one_point(n: int) -> tuple[int, list[str]]:
        root = tmp_path / f"n{n}"
        shutil.copytree(pristine, root)
        code, output = test_crash.forked_memcli(root, "consolidate", crash_at=n)
        if code != (70 if n <= k else 0):
            return n, [f"exit {code}: {output[-300:]}"]
        failures = test_crash.recover(root, via_cli=False)
        failures += test_crash.check_recovered(root, pre, post)
        if saved_entries(root) != fresh_entries(root):
            failures.append("the index is not what a fresh reindex builds")
        return n, failures

    test_crash.every_point("handed-over entries", k, one_point)


# ---------------------------------------------------------------- an indexed folder, trusted whole


@pytest.fixture
def settled(monkeypatch: pytest.MonkeyPatch) -> None:
    """Indices count as written long before the run reads them (without waiting a second)."""
    monkeypatch.setattr(planned, "STAMP_AGE_NS", -10**15)


def indexed(root: Path) -> dict[str, str]:
    roles = build(root)
    reindex(Store(root))
    return roles


def trusted_calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, bool]]:
    """(folder, taken from its index) for each covered folder the recording handled so."""
    calls: list[tuple[str, bool]] = []
    original = journal._reindex_trusted

    def spy(store: Store, rel: str, ticket: planned.Ticket, written: set[str]) -> set[str] | None:
        found = original(store, rel, ticket, written)
        calls.append((rel, found is not None))
        return found

    monkeypatch.setattr(journal, "_reindex_trusted", spy)
    return calls


def snapshot_rows(root: Path, rel: str) -> list[tuple[str, int, int, str, tuple[str, str]]]:
    snap = lastrun.load_lastrun(Store(root).folder_by_rel(rel).cache())  # type: ignore[union-attr]
    assert snap is not None
    return [(n, snap.sizes[i], snap.mtimes[i], snap.content_hash(i), snap.blocks[snap.block_of[i]])
            for i, n in enumerate(snap.names)]


def fresh_rows(root: Path, rel: str) -> list[tuple[str, int, int, str, tuple[str, str]]]:
    entries = sorted(fresh_entries(root)[rel], key=lambda e: e["file"])
    return [(e["file"], e["size"], e["mtime_ns"], e["content_hash"], (e["type"], e["subtype"] or ""))
            for e in entries]


def test_an_indexed_folder_is_recorded_from_its_index(store: Path, settled: None,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Planning trusted the whole index: the recording reads only the files the run wrote,
    and leaves the index and snapshot a fresh scan would."""
    roles = indexed(store)
    calls, reads = trusted_calls(monkeypatch), Reads(monkeypatch)
    seen: dict[str, int] = {}

    def confirm(_: Any) -> bool:
        seen["planning"] = len(reads.names)
        return True

    outcome = engine.consolidate(Store(store), confirm=confirm)
    assert [a["type"] for a in outcome.actions] == ["merge"]
    assert dict(calls)["agent/coder"] is True and all(found for _, found in calls)
    recorded = {n.split("@")[0].rsplit(".", 1)[0] for n in reads.names[seen["planning"]:]}
    assert recorded == {roles["dup0"], roles["dup1"]}  # the keeper, and its member in archive/
    assert saved_entries(store) == fresh_entries(store)
    assert all(e["run_hash"] == e["content_hash"] for e in saved_entries(store)["agent/coder"])
    assert snapshot_rows(store, "agent/coder") == fresh_rows(store, "agent/coder")


def test_the_same_index_and_snapshot_as_a_scan(store: Path, tmp_path: Path, settled: None,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    indexed(store)
    other = tmp_path / "other"
    shutil.copytree(store, other)
    engine.consolidate(Store(store))
    with monkeypatch.context() as patch:
        patch.setattr(planned, "trusted", lambda *args: None)  # the old way: a scan of the folder
        engine.consolidate(Store(other))
    ours, theirs = saved_entries(store), saved_entries(other)
    drop = ("mtime_ns", "archived_at", "archive_run_id", "run_hash", "content_hash", "size")
    for rel in ours:  # the rewritten files differ only by their run id and mtimes
        assert [{k: v for k, v in e.items() if k not in drop} for e in ours[rel]] == \
               [{k: v for k, v in e.items() if k not in drop} for e in theirs[rel]]
    same = lambda rows: [(n, b) for n, _, _, _, b in rows]  # noqa: E731
    assert same(snapshot_rows(store, "agent/coder")) == same(snapshot_rows(other, "agent/coder"))
    # a second run, nothing to do: neither path rewrites the index (its updated_at stays)
    before = {p: p.read_bytes() for p in [store / "agent/coder/_index.json", other / "agent/coder/_index.json"]}
    engine.consolidate(Store(store))
    with monkeypatch.context() as patch:
        patch.setattr(planned, "trusted", lambda *args: None)
        engine.consolidate(Store(other))
    assert {p: p.read_bytes() for p in before} == before


def test_an_index_changed_after_planning_is_not_trusted(store: Path, settled: None,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    indexed(store)
    calls = trusted_calls(monkeypatch)
    folder = store / "agent" / "coder"

    def confirm(_: Any) -> bool:  # the same entries, a new file: another inode and ctime
        index.save(folder, index.load(folder) or {})
        return True

    engine.consolidate(Store(store), confirm=confirm)
    assert dict(calls)["agent/coder"] is False  # scanned instead
    assert saved_entries(store) == fresh_entries(store)
    assert snapshot_rows(store, "agent/coder") == fresh_rows(store, "agent/coder")


def test_an_index_written_moments_before_planning_gets_no_ticket(store: Path) -> None:
    indexed(store)  # just now
    s = Store(store)
    folder = s.folder("agent", "coder")
    scan = s.scan(folder, load=False, entries=False, compare=False)
    assert planned.trusted(folder, scan, planned.started()) is None  # within STAMP_AGE_NS
    later = planned.started() + planned.STAMP_AGE_NS + 10**9
    ticket = planned.trusted(folder, scan, later)
    assert ticket is not None and ticket.path is None and ticket.reread == frozenset()
    assert planned.trusted(s.archive_folder(), s.scan(s.archive_folder(), load=False), later) is None


def test_files_planning_read_or_lost_are_read_again(store: Path, settled: None,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """A file changed since the index (planning read it) and one gone since: their entries
    are made again and dropped."""
    roles = indexed(store)
    changed = store / "agent" / "coder" / f"{roles['m1']}.json"
    changed.write_bytes(changed.read_bytes().replace(b'"access_count": ', b'"access_count": 7'))
    (store / "agent" / "coder" / f"{roles['m2']}.json").unlink()
    calls = trusted_calls(monkeypatch)
    engine.consolidate(Store(store))
    assert dict(calls)["agent/coder"] is True
    entries = {e["id"]: e for e in saved_entries(store)["agent/coder"]}
    assert roles["m2"] not in entries and entries[roles["m1"]]["content_hash"] == sha256(changed.read_bytes())
    assert saved_entries(store) == fresh_entries(store)
    assert snapshot_rows(store, "agent/coder") == fresh_rows(store, "agent/coder")


def test_a_file_changed_or_added_during_the_run_counts_as_changed_since_it(
        store: Path, settled: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another writer edits a file (in place, a new size) and adds one after planning: the
    recording keeps what planning saw, so the run does not claim to have seen either, and
    the next reader finds both changed since the run (SPEC 1: no run_hash, or another)."""
    roles = indexed(store)
    victim = store / "agent" / "coder" / f"{roles['m3']}.json"
    seen = victim.read_bytes()
    added: dict[str, Any] = {}

    def confirm(_: Any) -> bool:
        victim.write_bytes(seen.replace(b'"access_count": ', b'"access_count": 12'))
        added.update(add(store, tags=["late"], subtype="late"))
        return True

    engine.consolidate(Store(store), confirm=confirm)
    saved = {e["id"]: e for e in saved_entries(store)["agent/coder"]}
    assert saved[roles["m3"]]["run_hash"] == saved[roles["m3"]]["content_hash"] == sha256(seen)
    assert added["id"] not in saved
    s = Store(store)
    scan = s.scan(s.folder("agent", "coder"), load=False)  # a reader: the index refreshed from the files
    now = {e["id"]: e for e in scan.entries}
    assert now[roles["m3"]]["content_hash"] == sha256(victim.read_bytes()) != saved[roles["m3"]]["run_hash"]
    assert "run_hash" not in now[added["id"]]


def crashed_run(root: Path, crash_at: int) -> int:
    """`consolidate` on `root` in a child forked from this process (so that it keeps this
    test's settings), stopped abruptly before its `crash_at`th change; its exit code."""
    pid = os.fork()
    if pid == 0:  # the child: never returns into the test
        code = 1
        try:
            os.environ["MEMCLI_CRASH_AT"] = str(crash_at)
            fsops._changes = 0  # counted from this child's start, as in a new process
            engine.consolidate(Store(root))
            code = 0
        finally:
            os._exit(code)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


@pytest.mark.slow
def test_every_crash_point_of_a_run_recorded_from_its_index_recovers(
        tmp_path: Path, settled: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """The crash sweep of tests/store/test_crash.py on an indexed folder the recording takes
    from its index (`planned.trusted`); after recovery the index is also what `reindex` builds."""
    pristine = tmp_path / "pristine"
    for sub in ("ops", "archive", "global"):
        (pristine / sub).mkdir(parents=True)
    (pristine / "memcli.toml").write_text(test_crash.TOML)
    indexed(pristine)
    calls = trusted_calls(monkeypatch)
    k = test_crash.count_changes(pristine, tmp_path / "count")
    assert dict(calls)["agent/coder"] is True
    clean = tmp_path / "clean"
    shutil.copytree(pristine, clean)
    assert crashed_run(clean, 10**6) == 0
    pre, post = snapshot(pristine), snapshot(clean)
    assert pre != post
    failed: dict[int, list[str]] = {}
    chosen = sweep.points(1, k + 1)
    for n in chosen:
        root = tmp_path / f"n{n}"
        shutil.copytree(pristine, root)
        code = crashed_run(root, n)
        failures = [f"exit {code}"] if code != (70 if n <= k else 0) else []
        failures += test_crash.recover(root, via_cli=False)
        failures += test_crash.check_recovered(root, pre, post)
        if saved_entries(root) != fresh_entries(root):
            failures.append("the index is not what a fresh reindex builds")
        if failures:
            failed[n] = failures
        shutil.rmtree(root)
    assert not failed, f"crash points of {k} ({sweep.label()}) that failed: {failed}"


def index_loads(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The folders whose index `index.load` parses."""
    loads: list[Path] = []
    original = index.load

    def spy(folder: Path, identity: list[int] | None = None) -> dict[str, Any] | None:
        loads.append(folder)
        return original(folder, identity)

    monkeypatch.setattr(index, "load", spy)
    return loads


@pytest.mark.parametrize("keep", [40, 39])
def test_the_recording_takes_the_entries_planning_parsed_up_to_the_limit(
        store: Path, settled: None, keep: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Within `KEEP_UP_TO` (the folder holds 40 entries) the recording takes the entries
    planning parsed from the very index, not parsing it again; past it, it parses the index.
    Either way the index and snapshot a fresh scan would make."""
    indexed(store)
    monkeypatch.setattr(planned, "KEEP_UP_TO", keep)
    calls, loads = trusted_calls(monkeypatch), index_loads(monkeypatch)
    seen: dict[str, int] = {}

    def confirm(_: Any) -> bool:
        seen["planning"] = len(loads)
        return True

    engine.consolidate(Store(store), confirm=confirm)
    assert dict(calls)["agent/coder"] is True
    parsed_again = store / "agent" / "coder" in loads[seen["planning"]:]
    assert parsed_again is (keep < 40)
    assert saved_entries(store) == fresh_entries(store)
    assert all(e["run_hash"] == e["content_hash"] for e in saved_entries(store)["agent/coder"])
    assert snapshot_rows(store, "agent/coder") == fresh_rows(store, "agent/coder")


def test_entries_are_kept_up_to_the_limit_over_the_tickets_alive(
        store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    indexed(store)
    monkeypatch.setattr(planned, "KEEP_UP_TO", 60)
    s = Store(store)
    folder = s.folder("agent", "coder")
    later = planned.started() + planned.STAMP_AGE_NS + 10**9

    def ticket() -> planned.Ticket:
        found = planned.trusted(folder, s.scan(folder, load=False, entries=False, compare=False), later)
        assert found is not None and found.index is not None
        return found

    first = ticket()
    assert first.kept is not None and len(first.kept[1]) == 40 and first.kept[0] == 40
    second = ticket()
    assert second.kept is None  # 80 entries would be over the limit: this one's index is parsed again
    del first  # (a run's tickets go when the run is recorded: `discard`)
    import gc

    gc.collect()
    assert ticket().kept is not None
