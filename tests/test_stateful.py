"""A state machine drives add, access, the clock, consolidate, undo of the last run, restore,
and a run crashed at a random change then recovered, against a simple model:

- every memory id ever seen exists afterwards, live or archived, and is live at most once;
- undoing the last run, when nothing was written since but uses (SPEC 10: `access`
  records a use, folded into the file by the next command holding the lock), succeeds and
  gives back the live files before it, exactly for memories not used since and with the uses
  kept for the others (a run that changed nothing is refused);
- a crashed run is either finished (it is in the log) or leaves the live files exactly as
  before it (uses recorded earlier are folded first: a fold is not part of the run);
- after every step: no journal, no temporary file, and `doctor` finds nothing.
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from memcli.consolidate import engine, undo
from memcli.errors import UndoRefusedError
from memcli.store import doctor, fsops, journal, log, memories
from memcli.store.formats import decode
from memcli.store.model import format_ts
from memcli.store.store import Store
from tests import sweep
from tests.conftest import NOW_DT, days_ago, ids_everywhere, record, snapshot, write_memory

TOML = """\
[consolidation]
index_pause_ms = 0
summarize_min_chars = 300
summary_max_chars = 200
promote_to_team = 2
promote_to_global = 3
"""
TOPICS = [
    "Run the database migrations on staging first then deploy the build to production",
    "Rotate the staging credentials every month and tell the on call engineer afterwards",
    "The integration tests need the fake payment server started on port eight thousand",
    "Always ask two reviewers to approve a change to the public schema before merging",
]
VARIANTS = ["", " today", " as usual", " carefully please"]


def _base_dir() -> str | None:
    shm = Path("/dev/shm")
    return str(shm) if shm.is_dir() and os.access(shm, os.W_OK) else None  # fsync-free when possible


class StoreMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="memcli-stateful-", dir=_base_dir()))
        self.root = self.dir / "store"
        for sub in ("ops", "archive", "global"):
            (self.root / sub).mkdir(parents=True)
        (self.root / "memcli.toml").write_text(TOML)
        self.store = Store(self.root)
        self.clock = NOW_DT
        self._set_clock()
        self._seed()
        self.ids: set[str] = set(self.live_ids())
        self.before: dict[str, dict[str, bytes]] = {}  # run id -> memory files just before it
        self.after: dict[str, dict[str, bytes]] = {}  # run id -> memory files just after it
        self.used: dict[str, set[str]] = {}  # run id -> ids used (access) since it

    def _seed(self) -> None:
        """Memories the first run has work on: duplicates, stale, promotable, verbose."""
        write_memory(self.root, record(summary=TOPICS[0], tags=["t"], created_at=days_ago(50)))
        write_memory(self.root, record(summary=TOPICS[0] + VARIANTS[1], tags=["t"], created_at=days_ago(40)))
        write_memory(self.root, record(summary=TOPICS[1], access_count=0, scope_id="b"), "md")
        write_memory(self.root, record(summary=TOPICS[2], type="procedural", access_count=4))
        write_memory(self.root, record(summary=TOPICS[3], type="episodic", details=" ".join([TOPICS[3]] * 8),
                                       created_at=days_ago(45)), "md")
        memories.reindex(self.store)

    def teardown(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)

    def _set_clock(self) -> None:
        os.environ["MEMCLI_NOW"] = format_ts(self.clock)

    def live_ids(self) -> list[str]:
        return sorted(i for i, places in ids_everywhere(self.root).items()
                      if any(not p.startswith("archive/") for p in places))

    def archived_only(self) -> list[str]:
        return sorted(i for i, places in ids_everywhere(self.root).items()
                      if all(p.startswith("archive/") for p in places))

    def state(self) -> dict[str, bytes]:
        """Every memory file, live or archived (pre-images and indices aside)."""
        archived = {f"archive/{p.name}": p.read_bytes() for p in (self.root / "archive").glob("mem_*")}
        return {**snapshot(self.root), **archived}

    def _logged(self, before: dict[str, bytes], count: int) -> str | None:
        """The run a step logged (if any), with the memory files before and after it."""
        entries = log.read_entries(self.root)
        if len(entries) == count:
            return None
        run_id = str(entries[-1]["run_id"])
        self.before[run_id], self.after[run_id] = before, self.state()
        self.used[run_id] = set()
        return run_id

    def fold_uses(self) -> None:
        """What any command holding the store lock does first: fold the pending uses."""
        with self.store.writing(5):
            pass

    @staticmethod
    def same_but_uses(now: dict[str, bytes], then: dict[str, bytes], used: set[str]) -> bool:
        """The same files, byte for byte for memories not used since; for used ones the same
        record but for more uses (`access_count` not lower, `last_accessed` any)."""
        if set(now) != set(then):
            return False
        for path, raw in now.items():
            if raw == then[path]:
                continue
            if Path(path).stem.split("@")[0] not in used:
                return False
            fmt = "md" if path.endswith(".md") else "json"
            a, b = decode(raw, fmt), decode(then[path], fmt)
            if int(a.get("access_count") or 0) < int(b.get("access_count") or 0):
                return False
            for record_ in (a, b):
                record_.pop("access_count", None)
                record_.pop("last_accessed", None)
            if a != b:
                return False
        return True

    def last_run_in_force(self) -> str | None:
        """The newest logged run that changed files and has not been undone."""
        entries = log.read_entries(self.root)
        for entry in reversed(entries):
            run_id = str(entry["run_id"])
            if (journal.run_dir(self.store, run_id) / "manifest.json").exists() and \
                    undo.undone_by(entries, run_id) is None:
                return run_id
        return None

    # ------------------------------------------------------------ rules

    @rule(topic=st.integers(0, len(TOPICS) - 1), variant=st.integers(0, len(VARIANTS) - 1),
          kind=st.sampled_from(["semantic", "procedural", "episodic"]), fmt=st.sampled_from(["json", "md"]),
          scope_id=st.sampled_from(["coder", "b"]), long=st.booleans(), age=st.sampled_from([0, 20, 60, 120]))
    def add(self, topic: int, variant: int, kind: str, fmt: str, scope_id: str, long: bool, age: int) -> None:
        """A memory written `age` days ago (as an agent would have then), or now."""
        text = TOPICS[topic] + VARIANTS[variant]
        new = memories.NewMemory(kind, "fact", "agent", scope_id, ["t"], "normal", f"agent:{scope_id}",
                                 text, " ".join([text] * 6) if long else None, fmt)
        with self.store.lock(5):
            result = memories.add_memory(self.store, new, self.clock - dt.timedelta(days=age))
        self.ids.add(result.id)

    @rule(pick=st.integers(0, 1000))
    def access(self, pick: int) -> None:
        live = self.live_ids()
        if not live:
            return
        mem_id = live[pick % len(live)]
        with self.store.lock(5):
            memories.access_memory(self.store, mem_id, self.clock)
        for used in self.used.values():
            used.add(mem_id)

    @rule(days=st.sampled_from([3, 10, 40, 100]))
    def advance_clock(self, days: int) -> None:
        self.clock += dt.timedelta(days=days)
        self._set_clock()

    @rule()
    def consolidate(self) -> None:
        # A run folds the pending uses before it plans (SPEC 10), and its undo keeps them:
        # the files "before the run" are the files with the uses folded.
        self.fold_uses()
        before, count = self.state(), len(log.read_entries(self.root))
        engine.consolidate(self.store, wait=5)
        assert self._logged(before, count) is not None

    @rule()
    def undo_last_run(self) -> None:
        """Undo the newest run still in force. When every memory file is as that run left it,
        the undo must succeed and give back exactly the files before the run."""
        run_id = self.last_run_in_force()
        if run_id is None:
            return
        self.fold_uses()  # (the undo would fold them first anyway)
        used = self.used.get(run_id, set())
        clean = run_id in self.after and self.same_but_uses(self.state(), self.after[run_id], used)
        before, count = self.state(), len(log.read_entries(self.root))
        try:
            undo.undo_run(self.store, run_id, wait=5)
        except UndoRefusedError as exc:
            assert not clean, f"refused a clean undo: {exc}"
            return
        if clean:
            live_before = {k: v for k, v in self.before[run_id].items() if not k.startswith("archive/")}
            assert self.same_but_uses(snapshot(self.root), live_before, used)
        assert self._logged(before, count) is not None

    @rule()
    def undo_an_idle_run_is_refused(self) -> None:
        entries = log.read_entries(self.root)
        idle = [e["run_id"] for e in entries
                if not (journal.run_dir(self.store, str(e["run_id"])) / "manifest.json").exists()]
        if idle:
            with pytest.raises(UndoRefusedError, match="changed no memory file|already undone"):
                undo.undo_run(self.store, str(idle[-1]), wait=5)

    @rule(pick=st.integers(0, 1000))
    def restore(self, pick: int) -> None:
        archived = self.archived_only()
        if not archived:
            return
        mem_id = archived[pick % len(archived)]
        self.fold_uses()  # (the restore folds them first: see consolidate)
        before, count = self.state(), len(log.read_entries(self.root))
        undo.restore_memory(self.store, mem_id, wait=5)
        assert mem_id in self.live_ids()
        assert self._logged(before, count) is not None

    @precondition(lambda self: hasattr(os, "fork"))
    @rule(crash_at=st.integers(1, 80))
    def crash_a_run_then_recover(self, crash_at: int) -> None:
        self.fold_uses()
        before, count = self.state(), len(log.read_entries(self.root))
        pid = os.fork()
        if pid == 0:  # the child: a run that dies at its crash_at-th change, like a power cut
            code = 0
            try:
                os.environ["MEMCLI_CRASH_AT"] = str(crash_at)
                fsops._changes = 0
                engine.consolidate(Store(self.root), wait=5)
            except BaseException:
                code = 1
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) in (0, 70)
        report = doctor.repair(self.store, wait=5)
        assert report.ok, report.to_json()
        if self._logged(before, count) is None:
            assert self.state() == before, "a run rolled back left memory files changed"

    # ------------------------------------------------------------ invariants

    @invariant()
    def nothing_is_lost(self) -> None:
        places = ids_everywhere(self.root)
        self.ids |= set(self.live_ids())
        for mem_id in self.ids:
            assert mem_id in places, f"{mem_id} is gone"
            assert sum(1 for p in places[mem_id] if not p.startswith("archive/")) <= 1, places[mem_id]

    @invariant()
    def store_is_healthy(self) -> None:
        assert not journal.pending(self.store)
        assert not list(fsops.leftover_tmp_files(self.root))
        problems = doctor.diagnose(self.store).problems
        assert problems == [], [p.to_json() for p in problems]


@pytest.mark.slow
def test_store_state_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMCLI_NOW", format_ts(NOW_DT))  # restored after; the machine moves it
    from hypothesis.stateful import run_state_machine_as_test

    run_state_machine_as_test(StoreMachine, settings=settings(
        # 9 sequences of 30 steps by default, 40 with MEMCLI_FULL_SWEEPS=1 (tests/sweep.py)
        max_examples=sweep.scale(9, 40), stateful_step_count=30, derandomize=True, deadline=None, database=None,
        suppress_health_check=list(HealthCheck)))
