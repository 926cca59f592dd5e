"""A full pass's worker that checks folders' entries against their files ahead of the planner
(`memcli.consolidate.trustahead`): the same plans as a serial pass, its word taken only for
the very index file it checked, and its failures cost only time."""

from __future__ import annotations

import json
import os
import select
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from memcli.consolidate import engine, parallel, trustahead
from memcli.store import index, memories
from memcli.store.store import FolderScanning, Store
from tests.conftest import dry_plan as _plan
from tests.conftest import reaped

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import generate  # noqa: E402

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork here")


def _steady(tmp_path: Path, n: int = 600) -> Path:
    """A store after a real run: indices, snapshots and pair caches (a steady-state pass)."""
    root = tmp_path / "s"
    generate.generate(root, n, shape="huge", dup_share=0.08)
    (root / "memcli.toml").write_text("[consolidation]\nindex_pause_ms = 0\nmax_per_run = 0\n")
    memories.reindex(Store(root))
    engine.consolidate(Store(root))
    return root


def _reset(seen: dict[str, Any]) -> None:
    seen.update(started=0, pids=[], vouched=0, stat=0, shares=[])


@pytest.fixture
def worked(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The worker on for small stores, whatever the machine's load, and the planner waiting
    for its word on each folder (so that what it reported is used every time); counts the
    workers started, the folders taken on its word, and the planner's own `lstat` passes."""
    monkeypatch.setattr(trustahead, "MIN_FILES", 0)
    monkeypatch.setattr(parallel, "may_fork", lambda: True)
    monkeypatch.setenv(parallel.JOBS_ENV, "2")
    seen: dict[str, Any] = {"started": 0, "pids": [], "vouched": 0, "stat": 0, "shares": []}
    real_start, real_vouched = trustahead.TrustAhead.start, trustahead.TrustAhead.vouched
    real_scan, real_stat = FolderScanning.scan, FolderScanning._stat_all
    parent = os.getpid()

    def start(store: Any, folders: Any, listings: Any, *rest: Any) -> Any:
        worker = real_start(store, folders, listings, *rest)
        if worker is not None:
            seen["started"] += 1
            seen["pids"].append(worker.pid)
            seen["shares"].append(set(worker.positions))
        return worker

    def vouched(self: Any, rel: str) -> Any:
        p = self.positions.get(rel)
        deadline = time.monotonic() + 20
        while p is not None and p not in self.reports and self.pid > 0 and time.monotonic() < deadline:
            select.select([self.fd], [], [], 0.05)
            self.poll()
        return real_vouched(self, rel)

    def scan(self: Any, folder: Any, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("vouched"):
            seen["vouched"] += 1
        return real_scan(self, folder, *args, **kwargs)

    def stat_all(self: Any, *args: Any, **kwargs: Any) -> Any:
        if os.getpid() == parent:
            seen["stat"] += 1
        return real_stat(self, *args, **kwargs)

    monkeypatch.setattr(trustahead.TrustAhead, "start", staticmethod(start))
    monkeypatch.setattr(trustahead.TrustAhead, "vouched", vouched)
    monkeypatch.setattr(FolderScanning, "scan", scan)
    monkeypatch.setattr(FolderScanning, "_stat_all", stat_all)
    return seen


# ---------------------------------------------------------------- the store's side


def test_vouch_names_the_index_file_only_when_its_entries_are_the_files(store: Path) -> None:
    from tests.conftest import add

    for n in range(4):
        add(store, type="semantic", subtype="x", summary=f"note {n}")
    s = Store(store)
    folder = s.folder("agent", "coder")
    memories.reindex(s)
    names = s.memory_names(folder)
    identity = s.vouch(folder, names)
    assert identity is not None and identity == [*map(int, _identity(folder.path / index.INDEX_NAME))]
    assert s.vouch(folder, names[1:]) is None  # a file the listing has not
    assert s.vouch(folder, [*names, "mem_gone.json"]) is None  # a listed file gone
    first = folder.path / names[0]
    st = first.stat()
    os.utime(first, ns=(st.st_atime_ns, st.st_mtime_ns + 1))  # touched since indexed
    assert s.vouch(folder, names) is None
    memories.reindex(s)
    raw = (folder.path / index.INDEX_NAME).read_bytes()
    assert s.vouch(folder, names) is not None
    (folder.path / index.INDEX_NAME).write_bytes(raw.replace(b'"access_count":', b'"access_count":"x","_":', 1))
    assert s.vouch(folder, names) is None  # a field a run plans from, of the wrong type
    (folder.path / index.INDEX_NAME).write_bytes(b"{not json")
    assert s.vouch(folder, names) is None
    (folder.path / index.INDEX_NAME).unlink()
    assert s.vouch(folder, names) is None


def _identity(path: Path) -> list[int]:
    st = os.stat(path)
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def test_index_load_gives_the_identity_of_the_file_it_parsed(store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.conftest import add

    add(store, type="semantic", subtype="x")
    s = Store(store)
    folder = s.folder("agent", "coder")
    memories.reindex(s)
    path = folder.path / index.INDEX_NAME
    found: list[int] = []
    assert index.load(folder.path, found) is not None and found == _identity(path)
    real_whole = index._whole

    def edited_meanwhile(raw: bytes, *rest: Any) -> Any:  # written in place while it is read
        with open(path, "r+b") as handle:
            handle.write(raw[:1])
        return real_whole(raw, *rest)

    monkeypatch.setattr(index, "_whole", edited_meanwhile)
    found = [1]
    assert index.load(folder.path, found) is not None and found == []


def test_a_scan_takes_the_workers_word_only_for_the_very_index_it_checked(tmp_path: Path) -> None:
    root = _steady(tmp_path, 300)
    s = Store(root)
    folder = s.memory_folders()[0]
    names = s.memory_names(folder)
    identity = s.vouch(folder, names)
    assert identity is not None
    serial = s.scan(folder, load=False, entries=False, compare=False, names=names)
    calls: list[int] = []
    real_stat = s._stat_all

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real_stat(*args, **kwargs)

    s._stat_all = counted  # type: ignore[method-assign]
    taken = s.scan(folder, load=False, entries=False, compare=False, names=names, vouched=identity)
    assert calls == [] and taken.entries == serial.entries and taken.run_hashes == serial.run_hashes
    assert taken.memories == {} and taken.problems == [] and taken.drift == serial.drift
    # the index written again (the same entries, another file): its entries checked again
    index.save(folder.path, index.load(folder.path) or {})
    again = s.scan(folder, load=False, entries=False, compare=False, names=names, vouched=identity)
    assert calls == [1] and again.entries == serial.entries
    # a word for another file (a stale identity) is no word at all
    wrong = [*identity[:-1], identity[-1] + 1]
    s.scan(folder, load=False, entries=False, compare=False, names=names, vouched=wrong)
    assert calls == [1, 1]


# ---------------------------------------------------------------- the planner's side


@pytest.mark.slow
def test_plans_are_the_same_with_the_worker_as_without(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       worked: dict[str, Any]) -> None:
    """A steady-state dry run: the same plan serially and with the worker, whose word spares
    the planner the `lstat` of every folder after the first; a file changed since it was
    indexed is read and planned as serially; nothing written; the worker never left behind."""
    root = _steady(tmp_path)
    _reset(worked)
    folders = len(Store(root).memory_folders())
    before = sorted(str(p) for p in root.rglob("*"))
    monkeypatch.setenv(parallel.JOBS_ENV, "1")
    serial = _plan(root)
    assert worked["started"] == 0 and worked["stat"] == folders
    monkeypatch.setenv(parallel.JOBS_ENV, "2")
    worked["stat"] = 0
    assert _plan(root) == serial
    assert worked["started"] == 1 and worked["vouched"] == folders - 1 and worked["stat"] == 1
    assert all(reaped(pid) for pid in worked["pids"])

    late = sorted((root / "global").glob("mem_*.json"))[2]  # changed since the real run
    data = json.loads(late.read_text())
    data["content"]["summary"] += " Also rotate the keys."
    late.write_text(json.dumps(data))
    monkeypatch.setenv(parallel.JOBS_ENV, "1")
    serial = _plan(root)
    monkeypatch.setenv(parallel.JOBS_ENV, "2")
    vouched = worked["vouched"]
    assert _plan(root) == serial
    assert worked["vouched"] == vouched + folders - 2  # global: not vouched for, checked here
    assert sorted(str(p) for p in root.rglob("*")) == before


@pytest.mark.slow
def test_a_real_run_with_the_worker_does_what_a_serial_one_does(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                worked: dict[str, Any]) -> None:
    root = _steady(tmp_path)
    generate.add_session(root, 12, seed=5)  # new memories in every folder: a real run's work
    _reset(worked)
    twin = tmp_path / "twin"
    os.system(f"cp -a {root} {twin}")  # noqa: S605  (a copy with the same mtimes)
    monkeypatch.setenv(parallel.JOBS_ENV, "1")
    serial = engine.consolidate(Store(twin)).to_json()
    monkeypatch.setenv(parallel.JOBS_ENV, "2")
    helped = engine.consolidate(Store(root)).to_json()
    assert worked["started"] == 1 and worked["vouched"] > 0

    def shown(out: dict[str, Any]) -> list[Any]:
        return [{k: v for k, v in a.items() if k not in ("run_id",)} for a in out["actions"]]

    assert shown(helped) == shown(serial)
    assert all(reaped(pid) for pid in worked["pids"])


def test_a_worker_that_fails_costs_only_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             worked: dict[str, Any]) -> None:
    root = _steady(tmp_path, 300)
    _reset(worked)
    monkeypatch.setenv(parallel.JOBS_ENV, "1")
    serial = _plan(root)
    monkeypatch.setenv(parallel.JOBS_ENV, "2")
    parent = os.getpid()
    real_vouch = FolderScanning.vouch

    def broken(how: str) -> Any:
        def vouch(self: Any, folder: Any, names: Any) -> Any:
            if os.getpid() != parent:
                if how == "exit":
                    os._exit(3)
                if how == "raise":
                    raise RuntimeError("worker broke")
                if how == "garbage":
                    return ["x"]
            return real_vouch(self, folder, names)
        return vouch

    for how in ("exit", "raise", "garbage"):
        monkeypatch.setattr(FolderScanning, "vouch", broken(how))
        assert _plan(root) == serial, how
        assert all(reaped(pid) for pid in worked["pids"]), how
    assert worked["vouched"] == 0

    def cannot_fork(body: Any, closes: Any) -> None:
        return None

    monkeypatch.setattr(parallel, "fork_child", cannot_fork)
    started = worked["started"]
    assert _plan(root) == serial and worked["started"] == started


def test_the_worker_reports_its_memory_and_no_worker_runs_beside_a_folder_over_max_files(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, worked: dict[str, Any]) -> None:
    root = _steady(tmp_path, 300)
    _reset(worked)
    monkeypatch.setattr(parallel, "workers_peak_kb", 0)
    _plan(root)
    assert worked["started"] == 1
    if os.path.exists("/proc/self/smaps_rollup"):
        assert parallel.workers_peak_kb > 0
    largest = max(len(Store(root).memory_names(f)) for f in Store(root).memory_folders())
    monkeypatch.setattr(trustahead, "MAX_FILES", largest - 1)  # (the planner's peak: that folder)
    _plan(root)
    assert worked["started"] == 1
    monkeypatch.setattr(trustahead, "MAX_FILES", largest)
    _plan(root)
    assert worked["started"] == 2


def test_no_worker_under_min_files_on_one_core_or_beside_a_helper(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                  worked: dict[str, Any]) -> None:
    root = _steady(tmp_path, 300)
    _reset(worked)
    monkeypatch.setattr(trustahead, "MIN_FILES", 10_000)
    _plan(root)
    assert worked["started"] == 0
    monkeypatch.setattr(trustahead, "MIN_FILES", 0)
    monkeypatch.setenv(parallel.JOBS_ENV, "1")
    _plan(root)
    assert worked["started"] == 0
    monkeypatch.setenv(parallel.JOBS_ENV, "2")
    engine.consolidate(Store(root), trigger="session_end")  # (a session-end pass has its own)
    assert worked["started"] == 0
    _plan(root)
    assert worked["started"] == 1


def test_reports_that_are_not_lines_of_numbers_are_ignored() -> None:
    assert trustahead._report(b"3 - 900") == (3, None, 900)
    assert trustahead._report(b"2 1 2 3 4 5 800") == (2, [1, 2, 3, 4, 5], 800)
    for line in (b"", b"3 -", b"x - 1", b"2 1 2 3 4 5", b"2 1 2 3 4 y 7", b"\xff\xfe"):
        assert trustahead._report(line) == (None, None, 0)


@pytest.mark.slow
def test_a_helper_for_one_folder_leaves_the_others_to_the_worker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 worked: dict[str, Any]) -> None:
    """A steady-state run whose helper searches one folder with no pair cache yet (as one a
    real run's promotions created) still has the worker check the other folders; a cold run,
    whose helper takes every folder, has none (three busy processes on two cores)."""
    from memcli.consolidate import ahead
    from memcli.store.paircache import PAIRS_NAME

    monkeypatch.setenv(ahead.HELPER_ENV, "1")
    root = _steady(tmp_path)
    folders = len(Store(root).memory_folders())
    (root / ".cache" / "folders" / "global" / PAIRS_NAME).unlink()
    _reset(worked)
    monkeypatch.setenv(parallel.JOBS_ENV, "1")
    serial = _plan(root)
    monkeypatch.setenv(parallel.JOBS_ENV, "2")
    helpers: list[Any] = []
    real_start = ahead.start

    def counted(rels: list[str], body: Any) -> Any:
        helpers.append(rels)
        return real_start(rels, body)

    monkeypatch.setattr(ahead, "start", counted)
    assert _plan(root) == serial
    assert helpers == [["global"]]
    assert worked["started"] == 1 and worked["vouched"] == folders - 2  # not the first, not global
    assert "global" not in worked["shares"][0]
    assert all(reaped(pid) for pid in worked["pids"])

    for cached in (root / ".cache" / "folders").rglob(PAIRS_NAME):
        cached.unlink()
    _reset(worked)
    assert _plan(root) == serial
    cold = set(helpers[1])
    assert len(helpers) == 2 and len(cold) >= folders - 1  # (not a folder under ahead.AHEAD_MIN)
    assert all(share.isdisjoint(cold) for share in worked["shares"])
    monkeypatch.setattr(trustahead, "MIN_FILES", 6_000)  # (what is left: a few promoted memories)
    _plan(root)
    assert len(helpers) == 3 and worked["started"] == len(worked["shares"]) <= 1
