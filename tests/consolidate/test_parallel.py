"""Pair search on several cores (`memcli.consolidate.parallel`): the same plans as a serial
run, serial where it does not pay or cannot be done, and a worker's failure costs only time."""

from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from memcli.consolidate import engine, merging, parallel
from memcli.store import memories
from memcli.store.model import VANISHED
from memcli.store.store import Store

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import generate  # noqa: E402

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork here")


def _pids(share: list[int]) -> dict[int, int]:
    return {n: os.getpid() for n in share}


@pytest.fixture
def forked(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The pids of the workers a test forks (other tests' children are not looked at)."""
    pids: list[int] = []
    real = os.fork

    def fork() -> int:
        pid = real()
        if pid:
            pids.append(pid)
        return pid

    monkeypatch.setattr(os, "fork", fork)
    return pids


def _all_reaped(pids: list[int]) -> bool:
    for pid in pids:
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            continue  # (waited for already: none left behind)
        return False
    return bool(pids)


# ---------------------------------------------------------------- the switch and the split


def test_an_idle_core_is_one_no_other_task_wants_at_this_moment(tmp_path: Path) -> None:
    cores = len(os.sched_getaffinity(0))
    loadavg = tmp_path / "loadavg"
    loadavg.write_text(f"0.50 0.40 0.30 {cores + 1}/200 12345\n")
    assert not parallel.idle_core(str(loadavg))  # more runnable than cores: none idle
    loadavg.write_text(f"0.50 0.40 0.30 {cores}/200 12345\n")
    assert parallel.idle_core(str(loadavg))  # (this process, and one more at that instant)
    loadavg.write_text("7.50 7.40 7.30 1/200 12345\n")
    assert parallel.idle_core(str(loadavg))  # busy until a minute ago: idle now
    for unreadable in ("", "0.5 0.4", "0.5 0.4 0.3 x/2 1"):
        loadavg.write_text(unreadable)
        assert parallel.idle_core(str(loadavg))  # (not known)
    assert parallel.idle_core(str(tmp_path / "missing"))


def test_a_helper_now_goes_by_the_setting_else_the_cores_and_this_moment(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Not the 1-minute load average, which counts work that ended a while ago."""
    monkeypatch.delenv(parallel.JOBS_ENV, raising=False)
    monkeypatch.setattr(os, "getloadavg", lambda: (7.0, 0.0, 0.0))  # busy until a moment ago
    monkeypatch.setattr(parallel, "cores", lambda: 2)
    monkeypatch.setattr(parallel, "idle_core", lambda: True)
    assert parallel.jobs() == 1 and parallel.helper_now()
    monkeypatch.setattr(parallel, "idle_core", lambda: False)  # both cores taken right now
    assert not parallel.helper_now()
    monkeypatch.setattr(parallel, "idle_core", lambda: True)
    monkeypatch.setattr(parallel, "cores", lambda: 1)
    assert not parallel.helper_now()
    monkeypatch.setenv(parallel.JOBS_ENV, "2")  # asked for: whatever the load and the moment
    monkeypatch.setattr(parallel, "idle_core", lambda: False)
    assert parallel.helper_now()
    monkeypatch.setenv(parallel.JOBS_ENV, "1")
    monkeypatch.setattr(parallel, "idle_core", lambda: True)
    monkeypatch.setattr(parallel, "cores", lambda: 2)
    assert not parallel.helper_now()


def test_jobs_follow_the_setting_the_cores_and_fork(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    monkeypatch.setattr(os, "getloadavg", lambda: (1.2, 0.0, 0.0))  # this run alone
    monkeypatch.delenv(parallel.JOBS_ENV, raising=False)
    assert parallel.jobs() == 2
    monkeypatch.setattr(os, "getloadavg", lambda: (1.9, 0.0, 0.0))  # another task part of the time
    assert parallel.jobs() == 2
    monkeypatch.setattr(os, "getloadavg", lambda: (2.1, 0.0, 0.0))  # a core taken by other work
    assert parallel.jobs() == 1
    monkeypatch.setattr(os, "getloadavg", lambda: (7.0, 0.0, 0.0))
    assert parallel.jobs() == 1
    monkeypatch.setenv(parallel.JOBS_ENV, "2")  # asked for: whatever the load
    assert parallel.jobs() == 2
    monkeypatch.delenv(parallel.JOBS_ENV)
    monkeypatch.setattr(os, "getloadavg", lambda: (0.3, 0.0, 0.0))
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(16)), raising=False)
    assert parallel.jobs() == parallel.MAX_JOBS  # capped
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0}, raising=False)
    assert parallel.jobs() == 1  # one core: serial
    for value, expected in (("1", 1), ("0", 1), ("-3", 1), ("3", 3), ("many", 1), (" 2 ", 2)):
        monkeypatch.setenv(parallel.JOBS_ENV, value)
        assert parallel.jobs() == expected, value
    monkeypatch.setenv(parallel.JOBS_ENV, "2")
    monkeypatch.delattr(os, "fork")
    assert parallel.jobs() == 1  # no fork on this system


def test_a_thread_running_keeps_the_search_serial() -> None:
    assert parallel.may_fork()
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        assert not parallel.may_fork()
    finally:
        stop.set()
        thread.join()


def test_shares_split_by_cost_and_depend_on_the_costs_alone() -> None:
    costs = [5.0, 1.0, 4.0, 4.0, 2.0]
    split = parallel.shares(costs, 2)
    assert sorted(n for share in split for n in share) == list(range(5))
    assert [sum(costs[n] for n in share) for share in split] == [8.0, 8.0]
    assert split == parallel.shares(costs, 2) and all(share == sorted(share) for share in split)
    assert parallel.shares(costs, 1) == [[0, 1, 2, 3, 4]]
    assert parallel.shares([1.0], 3) == [[0], [], []]  # more shares than work: some empty


# ---------------------------------------------------------------- running the shares


def test_workers_do_their_shares_in_other_processes(forked: list[int]) -> None:
    found = parallel.run_shares(_pids, [[0, 2], [1], [3]])
    assert sorted(found) == [0, 1, 2, 3]
    assert found[0] == found[2] == os.getpid()
    assert sorted(forked) == sorted([found[1], found[3]])
    assert _all_reaped(forked)


@pytest.mark.parametrize("how", ["exit", "kill", "raise", "garbage", "hang"])
def test_a_worker_that_fails_has_its_share_done_by_the_parent(how: str, forked: list[int],
                                                              capfd: pytest.CaptureFixture[str],
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    parent = os.getpid()
    monkeypatch.setattr(parallel, "WAIT_MIN_S", 0.3)  # (a worker stuck: stopped after this)

    def work(share: list[int]) -> dict[int, Any]:
        if os.getpid() != parent:
            if how == "exit":
                os._exit(3)
            if how == "kill":
                os.kill(os.getpid(), 9)
            if how == "raise":
                raise RuntimeError("worker broke")
            if how == "hang":
                threading.Event().wait(60)
            return "not a dict"  # type: ignore[return-value]
        return _pids(share)

    found = parallel.run_shares(work, [[0], [1, 2]])
    assert found == {0: parent, 1: parent, 2: parent}
    assert _all_reaped(forked)
    out, err = capfd.readouterr()
    assert "Traceback" not in out + err and "worker broke" not in out + err


def test_no_fork_means_the_parent_does_every_share(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse() -> int:
        raise PermissionError("fork refused by the sandbox")

    monkeypatch.setattr(os, "fork", refuse)
    assert parallel.run_shares(_pids, [[0], [1]]) == {0: os.getpid(), 1: os.getpid()}


def test_the_parents_own_failure_stops_the_workers_and_is_raised(forked: list[int]) -> None:
    parent = os.getpid()

    def work(share: list[int]) -> dict[int, Any]:
        if os.getpid() == parent:
            raise KeyboardInterrupt
        threading.Event().wait(30)  # (a worker still busy: it is stopped, not waited for)
        return {}

    with pytest.raises(KeyboardInterrupt):
        parallel.run_shares(work, [[0], [1]])
    assert _all_reaped(forked)


# ---------------------------------------------------------------- plans


def _plan(root: Path) -> str:
    """A dry run's outcome as JSON, but for its timings."""
    out = engine.consolidate(Store(root), dry_run=True).to_json()
    out["stats"] = {k: v for k, v in out["stats"].items() if not k.endswith("_ms")}
    return json.dumps(out, sort_keys=True, default=str)


@pytest.mark.slow
def test_plans_are_the_same_on_several_cores_as_on_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A store of few large blocks (every folder shared out, whatever its size) with a file
    gone bad since it was indexed: the same actions and problems with workers, serial, and
    with every worker dying; nothing written under the store by a dry run either way."""
    root = tmp_path / "s"
    planted = generate.generate(root, 1200, shape="huge", dup_share=0.08)
    (root / "memcli.toml").write_text("[consolidation]\nindex_pause_ms = 0\nmax_per_run = 0\n")
    memories.reindex(Store(root))
    files = [root / "agent" / "agent0" / f"{a}.json" for pair in planted for a in pair]
    files = [path for path in files if path.exists()]  # (memories of a planted pair: pair search reads them)
    stat = files[0].stat()
    files[0].write_bytes(b"{" + b" " * (stat.st_size - 1))  # same size and mtime: planned from its entry
    os.utime(files[0], ns=(stat.st_atime_ns, stat.st_mtime_ns))
    files[9].write_text("{not json")  # changed since indexed: read and reported by the scan
    monkeypatch.setattr(parallel, "MIN_WORK", 0)
    monkeypatch.setenv(parallel.JOBS_ENV, "1")
    serial = _plan(root)
    assert '"merge"' in serial and files[9].name in serial
    monkeypatch.setenv(parallel.JOBS_ENV, "2")
    searched: list[int] = []
    real = merging.DuplicateMerging._search_ahead

    def spy(self: Any, blocks: Any) -> Any:
        found = real(self, blocks)
        searched.append(len(found))
        return found

    adopted: list[int] = []
    real_adopt = merging.DuplicateMerging._adopt

    def adopt(self: Any, block: Any, found: Any) -> Any:
        out = real_adopt(self, block, found)
        adopted.extend(n for n in found[2] if block[n].mem.content_hash == VANISHED)  # as if read here
        return out

    # (a thread an earlier test of this process left behind would keep the search serial)
    monkeypatch.setattr(parallel, "may_fork", lambda: True)
    monkeypatch.setattr(merging.DuplicateMerging, "_search_ahead", spy)
    monkeypatch.setattr(merging.DuplicateMerging, "_adopt", adopt)
    before = sorted(str(p) for p in root.rglob("*"))
    assert _plan(root) == serial
    assert sum(searched) > 0  # (the blocks were found ahead, by the workers too)
    assert len(adopted) == 1  # the file gone bad, read by pair search (by a worker or here)
    parent = os.getpid()
    real_block = merging.DuplicateMerging._search_block

    def dies(self: Any, block: Any) -> Any:
        if os.getpid() != parent:
            os._exit(9)
        return real_block(self, block)

    monkeypatch.setattr(merging.DuplicateMerging, "_search_block", dies)
    assert _plan(root) == serial
    assert sorted(str(p) for p in root.rglob("*")) == before


def test_a_folder_its_caches_cover_or_a_real_run_is_searched_serially(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """No worker where there is nothing to compare (a steady-state dry run: the pair cache
    covers every member) or where the search fills caches (a real run)."""
    root = tmp_path / "s"
    generate.generate(root, 300, shape="huge", dup_share=0.08)
    (root / "memcli.toml").write_text("[consolidation]\nindex_pause_ms = 0\nmax_per_run = 0\n")
    monkeypatch.setattr(parallel, "MIN_WORK", 0)
    monkeypatch.setattr(parallel, "may_fork", lambda: True)
    monkeypatch.setenv(parallel.JOBS_ENV, "2")
    forks: list[int] = []
    real = parallel.run_shares
    monkeypatch.setattr(parallel, "run_shares", lambda work, split: forks.append(len(split)) or real(work, split))
    _plan(root)
    assert forks  # (a cold dry run: shared out)
    forks.clear()
    engine.consolidate(Store(root))
    assert forks == []
    _plan(root)
    assert forks == []
