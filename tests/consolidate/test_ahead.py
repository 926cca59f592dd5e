"""A dry run's helper process (`memcli.consolidate.ahead`) and blocks searched in pieces
(`memcli.consolidate.pieces`): the same plans as a serial run, the helper used only where it
may be, and its failures cost only time."""

from __future__ import annotations

import datetime as dt
import json
import os
import random
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from memcli.consolidate import ahead, engine, merging, parallel, pieces, planner
from memcli.consolidate.plantypes import RunOptions
from memcli.consolidate.similar import ALL_PAIRS_MAX, tag_filter
from memcli.store import memories
from memcli.store.store import Store
from tests.conftest import dry_plan as _plan
from tests.conftest import reaped

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import generate  # noqa: E402

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork here")


# ---------------------------------------------------------------- pieces


def test_pieces_hold_whole_tag_groups_of_enough_members() -> None:
    rng = random.Random(7)
    vocabulary = [f"t{n}" for n in range(60)]
    for size in (ALL_PAIRS_MAX, 2 * pieces.LEAST - 1, 2 * pieces.LEAST, 300, 1200):
        tags = [rng.sample(vocabulary, rng.randint(1, 3)) for _ in range(size)]
        for threshold in (0.5, 0.3):
            allowed = tag_filter(tags, threshold)
            split = pieces.split(allowed, size, target=60)
            if size < 2 * pieces.LEAST:
                assert split is None  # (a piece this small would be scored all-pairs)
                continue
            if split is None:
                continue  # (one group spans the block)
            assert sorted(n for piece in split for n in piece) == list(range(size))
            assert all(piece == sorted(piece) and len(piece) >= pieces.LEAST for piece in split)
            where = {n: k for k, piece in enumerate(split) for n in piece}
            assert allowed is not None
            assert not [(i, j) for i in range(size) for j in range(i + 1, size)
                        if where[i] != where[j] and allowed.allows(i, j)]


def test_a_block_with_no_filter_or_one_group_is_not_cut() -> None:
    assert pieces.split(None, 500) is None
    tags = [["a", "b"]] * 200  # one tag set: one group
    assert pieces.split(tag_filter(tags, 0.5), 200, target=50) is None
    tags = [[f"t{n % 4}"] for n in range(200)]  # four groups of 50, none pairing with another
    split = pieces.split(tag_filter(tags, 0.5), 200, target=50)
    assert split is not None and [len(piece) for piece in split] == [50, 50, 50, 50]
    split = pieces.split(tag_filter(tags, 0.5), 200, target=120)
    assert split is not None and [len(piece) for piece in split] == [150, 50]
    tags = [["a"]] * 50 + [["b"]] * 50 + [["c"]] * 20  # the last piece too small alone: joins the one before
    split = pieces.split(tag_filter(tags, 0.5), 120, target=50)
    assert split is not None and [len(piece) for piece in split] == [50, 70]
    tags = [[f"t{n % 5}"] for n in range(230)]
    split = pieces.split(tag_filter(tags, 0.5), 230, target=184)
    assert split is not None and [len(piece) for piece in split] == [184, 46]
    assert pieces.split(tag_filter(tags, 0.5), 230, target=200) is None  # (all five groups in one)


def _store(tmp_path: Path, n: int = 2000) -> Path:
    root = tmp_path / "s"
    generate.generate(root, n, shape="huge", dup_share=0.08)
    (root / "memcli.toml").write_text("[consolidation]\nindex_pause_ms = 0\nmax_per_run = 0\n")
    memories.reindex(Store(root))
    return root


@pytest.mark.slow
def test_a_block_searched_in_pieces_finds_what_it_finds_whole(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pieces, "TARGET", pieces.LEAST)
    root = _store(tmp_path)
    store = Store(root)
    plan = planner.Planner(store, RunOptions(trigger="manual"), dt.datetime(2026, 11, 22, tzinfo=dt.timezone.utc))
    folder = store.memory_folders()[0]
    listings: dict[str, list[str]] = {}
    plan._load_folder(folder, store.duplicate_ids(listings), listings[folder.rel])
    blocks = plan._ordered(plan._blocks())
    jobs = plan._jobs(blocks)
    assert len(jobs) > len(blocks)  # (some block cut)
    found = 0
    for n, block in enumerate(blocks):
        whole = plan._search_block(block)
        pairs: dict[tuple[int, int], float] = {}
        verdicts: dict[tuple[int, int], Any] = {}
        for job in jobs:
            if job[0] == n:
                got = plan._search_job(blocks, job)
                pairs.update(got[0])
                verdicts.update(got[1])
        assert pairs == whole[0] and verdicts == whole[1]
        found += len(pairs)
    assert found  # (the planted duplicates)


# ---------------------------------------------------------------- the helper in a dry run


@pytest.fixture
def helped(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Helper on for small folders, whatever the machine's load; counts what the helper sent
    and the helpers started."""
    monkeypatch.setattr(ahead, "AHEAD_MIN", 100)
    monkeypatch.setattr(pieces, "TARGET", pieces.LEAST)
    monkeypatch.setattr(parallel, "may_fork", lambda: True)
    monkeypatch.setenv(parallel.JOBS_ENV, "2")
    monkeypatch.setenv(ahead.HELPER_ENV, "1")
    seen = {"found": 0, "started": 0, "pids": 0}
    real_take, real_start = ahead.Helper._take, ahead.start

    def take(self: Any, message: tuple[Any, ...]) -> None:
        if message[0] == "found":
            seen["found"] += 1
        real_take(self, message)

    def start(rels: list[str], body: Any) -> Any:
        helper = real_start(rels, body)
        if helper is not None:
            seen["started"] += 1
            seen["pids"] = helper.pid
        return helper

    monkeypatch.setattr(ahead.Helper, "_take", take)
    monkeypatch.setattr(ahead, "start", start)
    return seen


@pytest.fixture
def seen(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, int]]:
    """The folders of each helper started (its `position`: folder -> number)."""
    found: list[dict[str, int]] = []
    real = ahead.Helper.__init__

    def init(self: Any, rels: list[str], *args: Any) -> None:
        real(self, rels, *args)
        found.append(self.position)

    monkeypatch.setattr(ahead.Helper, "__init__", init)
    return found


@pytest.mark.slow
def test_plans_are_the_same_with_the_helper_as_without(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       helped: dict[str, int]) -> None:
    """The same outcome serially, with the helper, and with a helper that dies, hangs, sends
    garbage or finds its folders other than the planner's; nothing written under the store,
    the helper never left behind."""
    root = _store(tmp_path)
    files = sorted((root / "agent" / "agent1").glob("mem_*.json"))
    files[3].write_text("{not json")  # changed since indexed: read and reported by the scan
    before = sorted(str(p) for p in root.rglob("*"))
    monkeypatch.setenv(parallel.JOBS_ENV, "1")
    serial = _plan(root)
    assert '"merge"' in serial and files[3].name in serial and helped["started"] == 0
    monkeypatch.setenv(parallel.JOBS_ENV, "2")
    assert _plan(root) == serial
    assert helped["started"] == 1 and helped["found"] > 0 and reaped(helped["pids"])

    monkeypatch.setattr(parallel, "WAIT_MIN_S", 0.3)
    monkeypatch.setattr(parallel, "WAIT_FACTOR", 1.0)
    real_job, real_layout = merging.DuplicateMerging._search_job, ahead.layout

    def broken(how: str) -> Any:
        def job(self: Any, blocks: Any, which: Any) -> Any:
            if self._in_helper:
                if how == "exit":
                    os._exit(3)
                if how == "hang":
                    threading.Event().wait(60)
                if how == "raise":
                    raise RuntimeError("helper broke")
            return real_job(self, blocks, which)
        return job

    for how in ("exit", "hang", "raise"):
        monkeypatch.setattr(merging.DuplicateMerging, "_search_job", broken(how))
        assert _plan(root) == serial, how
        assert reaped(helped["pids"]), how
    monkeypatch.setattr(merging.DuplicateMerging, "_search_job", real_job)

    parent = os.getpid()

    def other_layout(blocks: Any) -> bytes:  # (the helper's folder other than the planner's)
        digest = real_layout(blocks)
        return digest[::-1] if os.getpid() != parent else digest

    monkeypatch.setattr(ahead, "layout", other_layout)
    found = helped["found"]
    assert _plan(root) == serial  # (what it sent is not used)
    assert helped["found"] >= found
    monkeypatch.setattr(ahead, "layout", real_layout)

    def garbage(self: Any, message: tuple[Any, ...]) -> None:
        os.write(self.out_fd, b"\xff\xff\x00\x00garbage")

    monkeypatch.setattr(ahead.Channel, "send", garbage)
    assert _plan(root) == serial and reaped(helped["pids"])
    assert sorted(str(p) for p in root.rglob("*")) == before


@pytest.mark.slow
def test_no_helper_for_a_real_run_a_steady_state_session_end_or_one_core(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, helped: dict[str, int]) -> None:
    root = _store(tmp_path, 1200)
    monkeypatch.setenv(parallel.JOBS_ENV, "1")
    _plan(root)
    assert helped["started"] == 0
    monkeypatch.setenv(parallel.JOBS_ENV, "2")
    monkeypatch.setattr(ahead, "AHEAD_MAX", 200)  # (folders of about 300: too large)
    _plan(root)
    assert helped["started"] == 0
    monkeypatch.setattr(ahead, "AHEAD_MAX", 20_000)
    monkeypatch.setenv(ahead.HELPER_ENV, "0")  # turned off: folders shared out as before
    _plan(root)
    assert helped["started"] == 0
    monkeypatch.delenv(ahead.HELPER_ENV)  # (on unless turned off)
    _plan(root)
    assert helped["started"] == 1
    engine.consolidate(Store(root))  # a real run: its search fills the caches
    assert helped["started"] == 1
    _plan(root)  # steady state: every folder's pair cache there
    assert helped["started"] == 1
    engine.consolidate(Store(root), trigger="session_end")
    assert helped["started"] == 1


def test_no_helper_for_a_folder_with_no_index(tmp_path: Path, helped: dict[str, int],
                                              seen: list[dict[str, int]]) -> None:
    root = tmp_path / "s"
    generate.generate(root, 600, shape="huge", dup_share=0.08)  # (never indexed)
    (root / "memcli.toml").write_text("[consolidation]\nindex_pause_ms = 0\nmax_per_run = 0\n")
    _plan(root)
    assert helped["started"] == 0
    memories.reindex(Store(root))
    (root / "agent" / "agent0" / "_index.json").unlink()
    _plan(root)
    assert helped["started"] == 1 and seen and "agent/agent0" not in seen[0] and len(seen[0]) == 3


def test_the_helper_goes_by_an_idle_core_now_not_the_load_average(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, helped: dict[str, int]) -> None:
    """A cold dry run lasts a second or two: the 1-minute average (work that ended a while
    ago, as the command before it) does not keep its helper off; a busy moment does."""
    root = tmp_path / "s"
    generate.generate(root, 600, shape="huge", dup_share=0.08)
    (root / "memcli.toml").write_text("[consolidation]\nindex_pause_ms = 0\nmax_per_run = 0\n")
    memories.reindex(Store(root))
    monkeypatch.delenv(parallel.JOBS_ENV)
    monkeypatch.setattr(os, "getloadavg", lambda: (7.0, 7.0, 7.0))
    monkeypatch.setattr(parallel, "cores", lambda: 2)
    monkeypatch.setattr(parallel, "idle_core", lambda: False)  # both cores taken right now
    serial = _plan(root)
    assert helped["started"] == 0
    monkeypatch.setattr(parallel, "idle_core", lambda: True)  # idle now, busy until a moment ago
    assert _plan(root) == serial and helped["started"] == 1


def test_the_planners_failure_stops_the_helper(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               helped: dict[str, int]) -> None:
    root = _store(tmp_path, 600)

    def fails(self: Any) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(planner.Planner, "summarize_verbose", fails)
    with pytest.raises(KeyboardInterrupt):
        engine.consolidate(Store(root), dry_run=True)
    assert helped["started"] == 1 and reaped(helped["pids"])


def test_a_helper_that_cannot_be_forked_leaves_the_search_to_the_planner(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, helped: dict[str, int]) -> None:
    root = _store(tmp_path, 600)
    monkeypatch.setenv(parallel.JOBS_ENV, "1")
    serial = _plan(root)
    monkeypatch.setenv(parallel.JOBS_ENV, "2")

    def refuse() -> int:
        raise PermissionError("fork refused by the sandbox")

    monkeypatch.setattr(os, "fork", refuse)
    assert _plan(root) == serial and helped["started"] == 0


def test_the_helper_takes_folders_from_ahead_min_to_ahead_max_memories(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, helped: dict[str, int], seen: list[dict[str, int]]) -> None:
    root = tmp_path / "s"
    generate.generate(root, 600, shape="huge", dup_share=0.08)
    (root / "memcli.toml").write_text("[consolidation]\nindex_pause_ms = 0\nmax_per_run = 0\n")
    memories.reindex(Store(root))
    sizes = {f.rel: sum(1 for p in f.path.iterdir() if p.name.startswith("mem_"))
             for f in Store(root).memory_folders()}
    low, high = min(sizes.values()), max(sizes.values())
    assert low < high  # (folders of different sizes: each edge below is met)
    for least, most in ((low, high), (low + 1, high), (low, high - 1), (high, low)):
        monkeypatch.setattr(ahead, "AHEAD_MIN", least)  # (both ends included)
        monkeypatch.setattr(ahead, "AHEAD_MAX", most)
        seen.clear()
        _plan(root)
        expected = {rel for rel, n in sizes.items() if least <= n <= most}
        assert (set(seen[0]) if seen else set()) == expected, (least, most)


# ---------------------------------------------------------------- blind loads and the helper's jobs


@pytest.mark.slow
def test_a_blind_load_serves_only_where_the_planner_read_no_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, helped: dict[str, int]) -> None:
    """The helper takes a folder's entries without comparing them with the files; where the
    planner then found an entry stale (here: edited by hand, its file touched, so that both
    give the same content hash but other tags), what the helper found there goes unused,
    and the plan is the serial one."""
    root = _store(tmp_path)
    folder = root / "agent" / "agent1"
    saved = json.loads((folder / "_index.json").read_bytes())
    entry = saved["entries"][5]
    entry["tags"] = ["edited", "by", "hand"]
    (folder / "_index.json").write_text(json.dumps(saved))
    path = folder / entry["file"]
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 10**9))
    monkeypatch.setenv(parallel.JOBS_ENV, "1")
    serial = _plan(root)
    monkeypatch.setenv(parallel.JOBS_ENV, "2")
    said: list[tuple[bool, bool | None]] = []
    real = ahead.Helper.agrees

    def agrees(self: Any, k: int, mine: bytes, read_files: bool) -> bool | None:
        out = real(self, k, mine, read_files)
        said.append((read_files and k in self.blind, out))
        return out

    monkeypatch.setattr(ahead.Helper, "agrees", agrees)
    assert _plan(root) == serial and helped["found"] > 0
    assert (True, False) in said and (False, True) in said  # (that folder refused, the others used)
    assert all(out is not True for stale, out in said if stale)


def _blocks_of(*sizes: int) -> list[list[Any]]:
    return [[object()] * size for size in sizes]


def test_the_helpers_jobs_are_checked_before_the_planner_takes_them() -> None:
    from memcli.consolidate.searchahead import _cover

    blocks = _blocks_of(3, 5, 2)
    jobs: list[Any] = [(0, None), (1, [0, 2, 4]), (1, [1, 3]), (2, None)]
    assert _cover(blocks, jobs, [1.0, 2.0, 3.0, 4.0])
    assert _cover([], [], [])
    bad: list[tuple[Any, Any]] = [
        (jobs, [1.0, 2.0, 3.0]),  # a cost missing
        (jobs, [1, 2.0, 3.0, 4.0]),  # not a cost
        (jobs[:-1], [1.0, 2.0, 3.0]),  # a block without a job
        ([(0, None), (1, [0, 2, 4]), (1, [1, 2]), (2, None)], [1.0] * 4),  # a member twice, one never
        ([(0, None), (1, [0, 2, 4]), (1, [1, 3, 5]), (2, None)], [1.0] * 4),  # past the block
        ([(0, None), (1, [0, 1, 2, 3, 4]), (1, None), (2, None)], [1.0] * 4),  # whole and in pieces
        ([(1, [0, 2, 4]), (0, None), (1, [1, 3]), (2, None)], [1.0] * 4),  # out of block order
        ([(0, None), (1, [0, 1, 2, 3, 4]), (2, None), (3, None)], [1.0] * 4),  # a block too many
        ([(0, None), (1, (0, 1, 2, 3, 4)), (2, None)], [1.0] * 3),  # not a list
        ([(0, None), (1, [0, 1, 2, 3, "4"]), (2, None)], [1.0] * 3),
        ([[0, None], (1, None), (2, None)], [1.0] * 3),
        ([(0, None), (1, None), (2, None)], (1.0, 1.0, 1.0)),
        ("garbage", [1.0]),
    ]
    for sent, costs in bad:
        assert not _cover(blocks, sent, costs), sent


@pytest.mark.slow
def test_a_helper_whose_jobs_differ_is_not_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                helped: dict[str, int]) -> None:
    """Jobs the planner may not take (out of range), or other than the planner's: its
    findings, numbered by its own jobs, are not used; the plan is the serial one."""
    root = _store(tmp_path)
    monkeypatch.setenv(parallel.JOBS_ENV, "1")
    serial = _plan(root)
    monkeypatch.setenv(parallel.JOBS_ENV, "2")
    real = merging.DuplicateMerging._jobs

    for how in ("out of range", "reversed"):
        def jobs(self: Any, blocks: Any, how: str = how) -> Any:
            made = real(self, blocks)
            if not self._in_helper:
                return made
            return [(n, [10**6]) for n, _ in made] if how == "out of range" else made[::-1]

        monkeypatch.setattr(merging.DuplicateMerging, "_jobs", jobs)
        assert _plan(root) == serial, how
        assert reaped(helped["pids"]), how
