"""A run that dies at any file-system change is finished or rolled back by the next command.

`MEMCLI_CRASH_AT=N` ends the process abruptly (os._exit(70), no clean-up) just before its
Nth file-system change. A representative store's full `consolidate` makes k changes; for
every N in 1..k (a sample of them by default, all with MEMCLI_FULL_SWEEPS=1: tests/sweep.py)
the run is crashed there, a recovering command runs, and then: every memory
that existed before is live or archived with its full content, the live files are the
pre-run or the post-run version (all of them the one or all the other), no temporary file
or journal is left, and `doctor` finds nothing. N = k + 1 completes normally.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from multiprocessing.pool import ThreadPool
from pathlib import Path
from typing import Any

import pytest

from memcli.consolidate import engine, review, undo
from memcli.store import doctor, fsops, log
from memcli.store.formats import decode
from memcli.store.model import sha256
from memcli.store.store import Store
from tests import forked, sweep
from tests.conftest import NOW, TOML, add, days_ago, snapshot

BASE = "Run the database migrations on staging first then deploy the build to production"
SECRET = "The staging database password rotates every month on the first Monday"
# crash points run two at a time: each thread keeps a zygote (tests/forked.py), and the
# suite's workers already use every core
THREADS = 2
pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="the crash harness forks (POSIX only)")
CLI_EVERY = 20  # with MEMCLI_FULL_SWEEPS=1, every 20th crash point also runs `python -m memcli`


def build_store(root: Path) -> dict[str, str]:
    """A small store where one run does every kind of action; returns role -> id."""
    for sub in ("ops", "archive", "global"):
        (root / sub).mkdir(parents=True)
    (root / "memcli.toml").write_text(TOML)
    roles: dict[str, str] = {}
    for n, (suffix, age) in enumerate(((" ", 50), (" today", 40), (" now", 30))):
        roles[f"dup{n}"] = add(root, summary=BASE + suffix, tags=["deploy"], type="procedural",
                               subtype="deployment", created_at=days_ago(age))["id"]
    roles["critical"] = add(root, summary=SECRET, tags=["db"], subtype="ops", priority="critical",
                            created_at=days_ago(20))["id"]
    roles["restates_critical"] = add(root, summary=SECRET + " morning", tags=["db"], subtype="ops",
                                     created_at=days_ago(10))["id"]
    details = " ".join(f"Step {i}: the agent ran the tests and they failed at module {i}."
                       for i in range(150))
    roles["verbose_md"] = add(root, "md", type="episodic", subtype="session", details=details,
                              summary="long session", tags=["s"], created_at=days_ago(45))["id"]
    roles["to_team"] = add(root, type="procedural", subtype="review", tags=["review"], access_count=6,
                           summary="Always ask for two reviewers on schema changes")["id"]
    roles["to_global"] = add(root, type="procedural", subtype="oncall", scope="team", scope_id="backend",
                             summary="Page the secondary when the primary does not answer in ten minutes",
                             tags=["oncall"], access_count=12)["id"]
    roles["never_used"] = add(root, summary="old fact never used", access_count=0, tags=["old"])["id"]
    roles["stale_md"] = add(root, "md", summary="old fact used long ago", last_accessed=days_ago(200),
                            tags=["older"], subtype="misc")["id"]
    roles["stays"] = add(root, summary="a normal fact that stays", tags=["keep"], subtype="keep")["id"]
    _reindex(root)
    roles["hand_dropped_stale"] = add(root, summary="hand dropped stale fact", access_count=0, tags=["hand"],
                                      subtype="hand", scope_id="writer")["id"]
    roles["hand_dropped"] = add(root, summary="hand dropped in coder", tags=["hand2"], subtype="hand2")["id"]
    return roles


def _reindex(root: Path) -> None:
    from memcli.store.memories import reindex

    reindex(Store(root))


def _env(crash_at: int | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "MEMCLI_CRASH_AT"}
    if crash_at is not None:
        env["MEMCLI_CRASH_AT"] = str(crash_at)
    return env


def memcli(root: Path, *args: str, crash_at: int | None = None, real: bool = False,
           ) -> subprocess.CompletedProcess[str]:
    """`python -m memcli --store ROOT ARGS` in a process of its own: forked from a zygote
    (tests/forked.py), or with `real` a new interpreter."""
    if not real:
        return forked.run(["--store", str(root), *args], env=_env(crash_at), timeout=120)
    return subprocess.run([sys.executable, "-m", "memcli", "--store", str(root), *args],
                          capture_output=True, text=True, env=_env(crash_at), timeout=120)


def forked_memcli(root: Path, *args: str, crash_at: int | None = None) -> tuple[int, str]:
    """`memcli --store ROOT ARGS` in a process forked from one that imported memcli once
    (tests/forked.py): each command still dies there with os._exit, without paying the
    interpreter start and imports a few hundred times. (exit code, stdout + stderr)"""
    done = forked.run(["--store", str(root), *args], env=_env(crash_at), timeout=120)
    return done.returncode, done.stdout + done.stderr


def records(root: Path) -> dict[str, list[dict[str, Any]]]:
    """id -> every record of it, live or in archive/ (pre-images under archive/runs aside)."""
    found: dict[str, list[dict[str, Any]]] = {}
    for path in root.rglob("mem_*"):
        rel = path.relative_to(root)
        if rel.parts[0] == "archive" and len(rel.parts) > 2:
            continue
        data = decode(path.read_bytes(), "md" if path.suffix == ".md" else "json")
        found.setdefault(str(data["id"]), []).append(data)
    return found


def count_changes(pristine: Path, work: Path) -> int:
    """The file-system changes of a full run, counted in-process on a copy."""
    shutil.copytree(pristine, work)
    start = fsops.change_count()
    engine.consolidate(Store(work))
    return fsops.change_count() - start


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("crash") / "pristine"
    with pytest.MonkeyPatch.context() as mp:  # module-scoped: runs before the autouse clock
        mp.setenv("MEMCLI_NOW", NOW)
        build_store(root)
    return root


def kept_versions(root: Path) -> set[str]:
    """Hashes of every pre-image the runs kept (archive/runs/<run_id>/...)."""
    runs = root / "archive" / "runs"
    return {sha256(p.read_bytes()) for p in runs.rglob("mem_*")} if runs.is_dir() else set()


@pytest.fixture
def work(tmp_path: Path) -> Iterator[Path]:
    """Where the crashed copies live: tmpfs when there is one. A crash is os._exit, which
    loses nothing the kernel already has, so durability (fsync) plays no part here and tmpfs
    only saves the time of a few thousand fsyncs."""
    shm = Path("/dev/shm")
    if not (shm.is_dir() and os.access(shm, os.W_OK)):
        yield tmp_path
        return
    folder = Path(tempfile.mkdtemp(prefix="memcli-crash-", dir=shm))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def check_recovered(root: Path, pre: dict[str, bytes], post: dict[str, bytes]) -> list[str]:
    """Everything the crash test asserts about a recovered store, as a list of failures."""
    failures = []
    live = snapshot(root)
    found = records(root)
    kept = kept_versions(root)
    for rel, raw in pre.items():
        mem_id = Path(rel).stem
        data = decode(raw, "md" if rel.endswith(".md") else "json")
        if not found.get(mem_id):
            failures.append(f"{mem_id} is neither live nor archived")
        elif not (any(r["content"] == data["content"] for r in found[mem_id]) or sha256(raw) in kept):
            failures.append(f"{mem_id}: its full pre-run content is nowhere (live, archive, pre-images)")
    for rel, raw in live.items():
        if raw != pre.get(rel) and raw != post.get(rel):
            failures.append(f"{rel} is neither its pre-run nor its post-run version")
    if live != pre and live != post:
        failures.append("the live files are a mix of pre-run and post-run versions")
    leftovers = list(root.rglob("*.tmp")) + list((root / "ops").glob("journal-*"))
    failures += [f"left behind: {p.relative_to(root)}" for p in leftovers]
    report = doctor.diagnose(Store(root))
    failures += [f"doctor: {p.code} {p.path} {p.message}" for p in report.problems]
    return failures


@pytest.mark.slow
def test_every_crash_point_of_a_full_run_recovers(pristine: Path, work: Path) -> None:
    started = time.monotonic()
    k = count_changes(pristine, work / "count")
    clean = work / "clean"
    shutil.copytree(pristine, clean)
    assert memcli(clean, "consolidate").returncode == 0
    pre, post = snapshot(pristine), snapshot(clean)
    assert pre != post

    chosen = sweep.points(1, k + 1)
    # two points run `python -m memcli` itself, a crash in the middle and the run that ends
    # (with MEMCLI_FULL_SWEEPS=1 also every CLI_EVERY-th and the last change); the others a
    # forked child: both die with os._exit at the same change, but a new interpreter costs
    # half a second a command
    every = [*chosen[:: max(1, CLI_EVERY * len(chosen) // (k + 1))], k] if sweep.FULL else []
    via_cli = {chosen[len(chosen) // 2], k + 1, *every}

    def one_point(n: int) -> tuple[int, list[str]]:
        root = work / f"n{n}"
        shutil.copytree(pristine, root)
        real = n in via_cli
        code, output = _consolidate(root, n, real)
        expected = 70 if n <= k else 0
        if code != expected:
            return n, [f"exit {code}, expected {expected}: {output[-500:]}"]
        failures = recover(root, via_cli=real)
        failures += check_recovered(root, pre, post)
        if real and memcli(root, "doctor", real=True).returncode != 0:
            failures.append("`memcli doctor` exits non-zero")
        return n, failures

    with ThreadPool(THREADS) as pool:
        results = pool.map(one_point, chosen)
    failed = {n: f for n, f in results if f}
    ran = len(results) - 1
    elapsed = time.monotonic() - started
    print(f"\ncrash points: {ran - len(failed)} of {ran} run of {k} recovered ({elapsed:.1f}s)")
    assert not failed, f"crash points of {k} ({sweep.label()}) that failed: {failed}"


def _consolidate(root: Path, n: int, real: bool) -> tuple[int, str]:
    if real:
        result = memcli(root, "consolidate", crash_at=n, real=True)
        return result.returncode, result.stderr
    return forked_memcli(root, "consolidate", crash_at=n)


def recover(root: Path, via_cli: bool) -> list[str]:
    """The recovering command: `memcli doctor --fix` (in-process on most points, for time)."""
    if via_cli:
        result = memcli(root, "doctor", "--fix", real=True)
        return [] if result.returncode == 0 else [f"doctor --fix exit {result.returncode}: {result.stdout}"]
    report = doctor.repair(Store(root), wait=30)
    return [] if report.ok else [f"doctor --fix left: {report.to_json()}"]


@pytest.mark.slow
def test_a_consolidate_after_a_crash_recovers_first_then_runs(pristine: Path, work: Path) -> None:
    """Any writing command recovers, not only doctor: a crashed run then a normal run."""
    root = work / "s"
    shutil.copytree(pristine, root)
    assert memcli(root, "consolidate", crash_at=40).returncode == 70
    result = memcli(root, "consolidate", "--json")
    assert result.returncode == 0, result.stderr
    assert "rolled back interrupted run" in result.stdout
    assert not list((root / "ops").glob("journal-*")) and not list(root.rglob("*.tmp"))
    assert doctor.diagnose(Store(root)).ok


def every_point(label: str, k: int, one_point: Callable[[int], tuple[int, list[str]]]) -> None:
    """Crash points 1..k (and k + 1, a complete run; a sample of them unless
    MEMCLI_FULL_SWEEPS=1) on THREADS workers; all must recover."""
    chosen = sweep.points(1, k + 1)
    with ThreadPool(THREADS) as pool:
        failed = {n: f for n, f in pool.map(one_point, chosen) if f}
    print(f"\n{label} crash points: {len(chosen) - len(failed)} of {len(chosen)} run of {k} recovered")
    assert not failed, f"{label} crash points of {k} ({sweep.label()}) that failed: {failed}"


@pytest.mark.slow
def test_every_crash_point_of_an_undo_recovers(pristine: Path, work: Path) -> None:
    """The undo is a journaled run too: crashed at any change and recovered, the live files
    are all as the consolidation left them or all as they were before it."""
    base = work / "base"
    shutil.copytree(pristine, base)
    run = memcli(base, "--json", "consolidate")
    run_id = json.loads(run.stdout)["run_id"]
    after_run, before_run = snapshot(base), snapshot(pristine)
    counted = work / "count"
    shutil.copytree(base, counted)
    start = fsops.change_count()
    undo.undo_run(Store(counted), run_id)
    k = fsops.change_count() - start
    assert snapshot(counted) == before_run

    def one_point(n: int) -> tuple[int, list[str]]:
        root = work / f"u{n}"
        shutil.copytree(base, root)
        code, output = forked_memcli(root, "undo", run_id, crash_at=n)
        if code != (70 if n <= k else 0):
            return n, [f"exit {code}: {output[-300:]}"]
        failures = recover(root, via_cli=False)
        if snapshot(root) not in (after_run, before_run):
            failures.append("live files are neither the run's result nor the state before it")
        failures += [f"doctor: {p.code} {p.path}" for p in doctor.diagnose(Store(root)).problems]
        # SPEC 3.6: the undo's decisions travel in its journal: both or neither
        undone = any(e.get("trigger") == "undo" for e in log.read_entries(root))
        decided = any(i.get("reason") in review.UNDO_REASONS for i in review.read_items(root))
        if undone != decided:
            failures.append(f"undo logged: {undone}, its decisions queued: {decided}")
        return n, failures

    every_point("undo", k, one_point)


@pytest.mark.slow
def test_a_recovery_that_itself_crashes_is_recovered(pristine: Path, work: Path) -> None:
    """Rolling back is crash-safe too: a run dies half-way, then the `doctor --fix` that rolls
    it back dies at each of its own changes in turn; one more recovery always gives back the
    store exactly as before the run."""
    k = count_changes(pristine, work / "count")
    pre = snapshot(pristine)

    def one(point: tuple[int, int]) -> tuple[tuple[int, int], list[str]]:
        n, m = point
        root = work / f"r{n}-{m}"
        shutil.copytree(pristine, root)
        if forked_memcli(root, "consolidate", crash_at=n)[0] != 70:
            return point, ["the run did not crash"]
        journals = list((root / "ops").glob("journal-*"))
        if not journals or json.loads(journals[0].read_bytes()).get("phase") != "applying":
            return point, ["expected a run that died before committing"]
        code, output = forked_memcli(root, "doctor", "--fix", crash_at=m)
        expected = 70 if m <= r else 0
        failures = [] if code == expected else [f"recovery exit {code}, expected {expected}: {output[-300:]}"]
        failures += recover(root, via_cli=False)
        if snapshot(root) != pre:
            failures.append("not rolled back to the state before the run")
        return point, failures + check_recovered(root, pre, pre)

    n = k // 2  # half-way through the memory changes: a rollback with files of every kind
    r = recovery_changes(pristine, work, n)
    points = [(n, m) for m in sweep.points(1, r + 1)]
    with ThreadPool(THREADS) as pool:
        failed = {p: f for p, f in pool.map(one, points) if f}
    assert not failed, f"({sweep.label()}) {failed}"


def recovery_changes(pristine: Path, work: Path, n: int) -> int:
    """How many changes the recovery of a run crashed at `n` makes (counted in-process)."""
    root = work / f"count-recovery-{n}"
    shutil.copytree(pristine, root)
    assert memcli(root, "consolidate", crash_at=n).returncode == 70
    start = fsops.change_count()
    doctor.repair(Store(root))
    return fsops.change_count() - start


def test_a_real_error_mid_run_rolls_back_at_once(pristine: Path, work: Path) -> None:
    """Not a crash but an exception (say, a full disk) half-way: the run puts the store back
    before it fails, instead of leaving it for the next command."""
    root = work / "s"
    shutil.copytree(pristine, root)
    pre = snapshot(root)
    real_unlink = fsops.unlink
    failed: list[Path] = []

    def failing_unlink(path: Path) -> None:
        if path.parts[-3] == "agent" and not failed:  # the first memory the run moves away
            failed.append(path)
            raise OSError(28, "No space left on device", str(path))
        real_unlink(path)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(fsops, "unlink", failing_unlink)
        with pytest.raises(OSError, match="No space left"):
            engine.consolidate(Store(root))
    assert failed
    assert snapshot(root) == pre
    assert not list((root / "ops").glob("journal-*")) and not list(root.rglob("*.tmp"))
    assert doctor.diagnose(Store(root)).ok


@pytest.mark.slow
def test_access_after_a_crash_is_not_lost_by_the_rollback(pristine: Path, work: Path) -> None:
    root = work / "s"
    shutil.copytree(pristine, root)
    keeper = next(p for p in (root / "agent" / "coder").glob("mem_*.json")
                  if json.loads(p.read_bytes())["content"]["summary"] == BASE + " now")
    k = count_changes(pristine, work / "count")
    n = _first_point_rewriting(pristine, work, k, keeper.name)
    assert memcli(root, "consolidate", crash_at=n).returncode == 70
    uses = json.loads((pristine / "agent" / "coder" / keeper.name).read_bytes())["access_count"]
    assert memcli(root, "access", keeper.stem).returncode == 0  # should roll the run back first
    assert memcli(root, "doctor", "--fix").returncode == 0
    assert json.loads(keeper.read_bytes())["access_count"] == uses + 1, "the recorded use was lost"


def _first_point_rewriting(pristine: Path, work: Path, k: int, name: str) -> int:
    """The first crash point at which a run has rewritten the keeper but not committed.

    Whether the keeper is rewritten only grows with the crash point, so the first point where
    it is is found by bisection; the run must still be uncommitted there."""
    low, high = 1, k  # the keeper is rewritten by a crash at `high`, not by one at `low`
    assert _probe(pristine, work, high, name)[0]
    while high - low > 1:
        middle = (low + high) // 2
        if _probe(pristine, work, middle, name)[0]:
            high = middle
        else:
            low = middle
    rewritten, applying = _probe(pristine, work, high, name)
    assert rewritten and applying, f"at crash point {high} the run has already committed"
    return high


def _probe(pristine: Path, work: Path, n: int, name: str) -> tuple[bool, bool]:
    """A run crashed at `n`: whether it rewrote the keeper, and whether it is uncommitted."""
    root = work / f"probe{n}"
    if not root.exists():
        shutil.copytree(pristine, root)
        forked_memcli(root, "consolidate", crash_at=n)
    journals = list((root / "ops").glob("journal-*"))
    rewritten = (root / "agent" / "coder" / name).read_bytes() != (pristine / "agent" / "coder" / name).read_bytes()
    return rewritten, bool(journals) and json.loads(journals[0].read_bytes())["phase"] == "applying"


@pytest.mark.slow
def test_every_crash_point_of_a_session_end_run_recovers(pristine: Path, work: Path) -> None:
    """A session_end run updates only the index entries, snapshot rows and signatures it must
    (splices and appends, not rewrites): crashed at any of its changes and recovered, the live
    files are all pre-run or all post-run, and every index still matches its folder."""
    base = work / "base"
    shutil.copytree(pristine, base)
    assert memcli(base, "consolidate").returncode == 0
    stays = next(records(base)[i][0] for i in records(base) if records(base)[i][0]["content"]["summary"]
                 == "a normal fact that stays")
    add(base, summary=stays["content"]["summary"] + " too", tags=["keep"], subtype="keep",
        created_at=days_ago(9))
    add(base, summary="a brand new fact from this session", tags=["new"], subtype="new",
        created_at=days_ago(8), access_count=0)
    counted = work / "count"
    shutil.copytree(base, counted)
    start = fsops.change_count()
    outcome = engine.consolidate(Store(counted), trigger="session_end")
    k = fsops.change_count() - start
    assert outcome.stats["memories_merged"] == 1 and outcome.stats["memories_archived"] == 1
    pre, post = snapshot(base), snapshot(counted)

    def one_point(n: int) -> tuple[int, list[str]]:
        root = work / f"s{n}"
        shutil.copytree(base, root)
        code, output = forked_memcli(root, "consolidate", "--trigger", "session_end", crash_at=n)
        if code != (70 if n <= k else 0):
            return n, [f"exit {code}: {output[-300:]}"]
        failures = recover(root, via_cli=False)
        return n, failures + check_recovered(root, pre, post)

    every_point("session_end", k, one_point)
