"""A whole-store dry run planned on two cores, a share of its folders each
(`memcli.consolidate.sharedplan`): the same plan as a serial run, each folder planned once, and
whatever goes wrong with the worker costing only time."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from memcli.consolidate import ahead, engine, parallel, sharedplan
from memcli.consolidate.plantypes import RunOptions
from memcli.store import memories
from memcli.store.store import Store
from tests.conftest import dry_plan as _plan
from tests.conftest import reaped

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import generate  # noqa: E402

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork here")


def _store(tmp_path: Path, *, indexed: bool = True) -> Path:
    """A mixed store (folders of uneven sizes, stale and unused memories, near-duplicates), a
    file that is bad input, and a flagged pair: every part of a folder's plan has something."""
    root = tmp_path / "s"
    generate.generate(root, 700, shape="mix", dup_share=0.08)
    (root / "memcli.toml").write_text("[consolidation]\nindex_pause_ms = 0\nmax_per_run = 0\n")
    if indexed:
        memories.reindex(Store(root))
    folder = sorted(p for p in (root / "team").iterdir() if p.is_dir())[0]
    (folder / "mem_01JBADBADBADBADBADBADBADBA.json").write_text("{not json")
    return root


@pytest.fixture
def shared(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Sharing on for small stores, whatever the machine's load; counts the workers started
    (their pids) and the folders this process planned."""
    monkeypatch.setattr(sharedplan, "MIN_FILES", 0)
    monkeypatch.setattr(parallel, "may_fork", lambda: True)
    monkeypatch.setenv(parallel.JOBS_ENV, "2")
    seen: dict[str, Any] = {"pids": [], "here": 0}
    real_start, real_part = parallel.start_worker, sharedplan._plan_part
    parent = os.getpid()

    def start(work: Any, closes: Any = ()) -> Any:
        worker = real_start(work, closes)
        if worker is not None:
            seen["pids"].append(worker[0])
        return worker

    def part(*args: Any) -> Any:
        if os.getpid() == parent:
            seen["here"] += 1
        return real_part(*args)

    monkeypatch.setattr(parallel, "start_worker", start)
    monkeypatch.setattr(sharedplan, "_plan_part", part)
    return seen


def _serial(root: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv(parallel.JOBS_ENV, "1")
    try:
        return _plan(root)
    finally:
        monkeypatch.setenv(parallel.JOBS_ENV, "2")


def _files(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): p.stat().st_mtime_ns for p in root.rglob("*")}


@pytest.mark.parametrize("indexed", [True, False])
def test_the_plan_is_the_serial_plan(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shared: dict[str, Any],
                                     indexed: bool) -> None:
    """Merges, archives, promotions, problems, protected counts, flagged pairs, the memory count
    and the run id: all as a serial run has them, each folder planned in one process, the
    worker's share by the worker; nothing written, no worker left behind."""
    root = _store(tmp_path, indexed=indexed)
    serial = _serial(root, monkeypatch)
    out = engine.consolidate(Store(root), dry_run=True).to_json()
    kinds = {a["type"] for a in out["actions"]}
    assert {"merge", "archive"} <= kinds and out["protected"]  # (a plan with something in each part)
    assert any("mem_01JBADBADBADBADBADBADBADBA" in note for note in out["notes"])  # (a problem)
    before = _files(root)
    shared.update(pids=[], here=0)
    assert _plan(root) == serial
    folders = len(Store(root).memory_folders())
    assert len(shared["pids"]) == 1 and 0 < shared["here"] < folders
    assert _files(root) == before
    assert all(reaped(pid) for pid in shared["pids"])


def test_no_helper_and_no_worker_beside_a_shared_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     shared: dict[str, Any]) -> None:
    """Each process plans its folders alone: the cold run's helper, the steady run's worker
    and a folder's pair-search workers stay off (two processes already use both cores)."""
    root = _store(tmp_path)
    serial = _serial(root, monkeypatch)
    from memcli.consolidate import trustahead

    def refused(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("started beside a shared run")

    monkeypatch.setattr(ahead, "start", refused)
    monkeypatch.setattr(trustahead.TrustAhead, "start", staticmethod(refused))
    monkeypatch.setattr(parallel, "run_shares", refused)
    assert _plan(root) == serial and len(shared["pids"]) == 1


def test_a_worker_that_dies_costs_only_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            shared: dict[str, Any]) -> None:
    """The worker takes a folder and dies in it: that folder, and every other, is planned here."""
    root = _store(tmp_path)
    serial = _serial(root, monkeypatch)
    parent, real = os.getpid(), sharedplan._plan_part

    def dies(*args: Any) -> Any:
        if os.getpid() != parent:
            os._exit(3)
        return real(*args)

    monkeypatch.setattr(sharedplan, "_plan_part", dies)
    assert _plan(root) == serial
    assert len(shared["pids"]) == 1 and all(reaped(pid) for pid in shared["pids"])


def test_what_the_worker_sends_is_taken_only_as_parts_of_its_folders(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch,
                                                                    shared: dict[str, Any]) -> None:
    """The worker plans its folders, then sends something else for them: those folders are
    planned here, and positions that are no folder are ignored."""
    root = _store(tmp_path)
    serial = _serial(root, monkeypatch)
    real_start = parallel.start_worker

    def garbling(work: Any, closes: Any = ()) -> Any:
        return real_start(lambda: {**{p: "not a part" for p in work()}, -1: None, 10**6: ("x",)}, closes)

    monkeypatch.setattr(parallel, "start_worker", garbling)
    assert _plan(root) == serial
    assert shared["here"] == len(Store(root).memory_folders())  # every folder again, here


def test_no_fork_plans_every_folder_here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                         shared: dict[str, Any]) -> None:
    root = _store(tmp_path)
    serial = _serial(root, monkeypatch)
    monkeypatch.setattr(parallel, "fork_child", lambda body, closes: None)
    assert _plan(root) == serial
    assert shared["here"] == len(Store(root).memory_folders())


def test_progress_counts_the_folders_planned(tmp_path: Path, shared: dict[str, Any]) -> None:
    """Progress follows this process's folders as they are done, and ends with all of them."""
    root = _store(tmp_path)
    seen: list[tuple[str, int, int]] = []
    engine.consolidate(Store(root), dry_run=True, progress=lambda stage, done, total: seen.append((stage, done, total)))
    planning = [(done, total) for stage, done, total in seen if stage == "planning"]
    folders = len(Store(root).memory_folders())
    assert planning[-1] == (folders, folders)
    assert [done for done, _ in planning] == sorted(done for done, _ in planning)


def test_the_claims_give_each_folder_to_one_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two processes read the claims at once: every position is taken, and by one of them."""
    monkeypatch.setattr(parallel, "may_fork", lambda: True)
    order = list(range(3000))
    claims = sharedplan._Claims.make(order)
    assert claims is not None
    worker = parallel.start_worker(lambda: {p: None for p in iter(claims.next, None)})
    assert worker is not None
    mine = list(iter(claims.next, None))
    claims.close()
    theirs = parallel.collect(*worker, time.monotonic() + 60)
    assert theirs is not None
    assert sorted([*mine, *theirs]) == order and not set(mine) & set(theirs)
    assert mine == sorted(mine)  # (each process takes them in the claims' order)


def test_claims_that_do_not_fit_their_pipe_share_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          shared: dict[str, Any]) -> None:
    """A pipe that takes only part of the claims (a user over the system's pipe quota gets
    pipes of one page): no claims, no pipe left open, and the run planned here alone."""
    fds = set(os.listdir("/proc/self/fd"))
    with monkeypatch.context() as patched:
        patched.setattr(sharedplan.os, "write", lambda fd, data: min(len(data), 4))
        assert sharedplan._Claims.make(list(range(10))) is None
    assert set(os.listdir("/proc/self/fd")) == fds
    root = _store(tmp_path)
    serial = _serial(root, monkeypatch)
    monkeypatch.setattr(sharedplan._Claims, "make", classmethod(lambda cls, order: None))
    assert _plan(root) == serial
    assert shared["pids"] == [] and shared["here"] == len(Store(root).memory_folders())


def _planner(root: Path, **opts: Any) -> Any:
    import datetime as dt

    from memcli.consolidate.planner import Planner

    options = RunOptions(opts.pop("trigger", "manual"), None, False, opts.pop("folders", None))
    for key, value in opts.items():
        setattr(options, key, value)
    return Planner(Store(root), options, dt.datetime(2026, 11, 22, tzinfo=dt.timezone.utc))


def test_split_shares_only_a_whole_store_dry_run_with_folders_to_share(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _store(tmp_path)
    monkeypatch.setattr(sharedplan, "MIN_FILES", 0)
    monkeypatch.setattr(parallel, "may_fork", lambda: True)
    monkeypatch.setenv(parallel.JOBS_ENV, "2")
    s = Store(root)
    folders = s.memory_folders()
    listings = {f.rel: s.memory_names(f) for f in folders}
    counts = [len(listings[f.rel]) for f in folders]
    order = sharedplan.split(_planner(root), folders, listings)
    assert order is not None and sorted(order) == list(range(len(folders)))
    assert [counts[p] for p in order] == sorted(counts, reverse=True)  # the largest first
    assert sharedplan.split(_planner(root, trigger="weekly"), folders, listings) is not None
    # not shared: a real run, a light or narrowed pass, one folder, the semantic signal or the
    # LLM judge, too few files, a folder too large, one folder most of the run, no idle core
    assert sharedplan.split(_planner(root, warm_caches=True), folders, listings) is None
    assert sharedplan.split(_planner(root, trigger="session_end"), folders, listings) is None
    assert sharedplan.split(_planner(root, trigger="index_overflow"), folders, listings) is None
    assert sharedplan.split(_planner(root, folders=folders), folders, listings) is None
    assert sharedplan.split(_planner(root), folders[:1], listings) is None
    assert sharedplan.split(_planner(root, judge=object()), folders, listings) is None
    vectors = _planner(root)
    vectors.vectors = object()
    assert sharedplan.split(vectors, folders, listings) is None
    monkeypatch.setattr(sharedplan, "MIN_FILES", sum(counts) + 1)
    assert sharedplan.split(_planner(root), folders, listings) is None
    monkeypatch.setattr(sharedplan, "MIN_FILES", sum(counts))
    assert sharedplan.split(_planner(root), folders, listings) is not None
    monkeypatch.setattr(sharedplan, "MAX_FILES", max(counts) - 1)
    assert sharedplan.split(_planner(root), folders, listings) is None
    monkeypatch.setattr(sharedplan, "MAX_FILES", max(counts))
    monkeypatch.setattr(sharedplan, "MAX_SHARE", max(counts) / sum(counts) - 0.001)
    assert sharedplan.split(_planner(root), folders, listings) is None
    monkeypatch.setattr(sharedplan, "MAX_SHARE", max(counts) / sum(counts) + 1e-9)
    assert sharedplan.split(_planner(root), folders, listings) is not None
    monkeypatch.setenv(parallel.JOBS_ENV, "1")
    assert sharedplan.split(_planner(root), folders, listings) is None
    monkeypatch.setenv(parallel.JOBS_ENV, "2")
    monkeypatch.setattr(parallel, "may_fork", lambda: False)
    assert sharedplan.split(_planner(root), folders, listings) is None
