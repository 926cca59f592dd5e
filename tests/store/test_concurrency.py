"""Several writers at once: the store lock keeps them one at a time, and a lock left by a
killed process never blocks the next run."""

from __future__ import annotations

import json
import os
import random
import signal
import string
import subprocess
import sys
import time
from pathlib import Path

import pytest

from memcli.store import doctor, log
from memcli.store.store import Store
from tests import forked
from tests.conftest import add, assert_invariants, ids_everywhere

ADDERS = 4
ADDS_EACH = 8  # the consolidators run back to back for as long as the adders take
CONSOLIDATORS = 2

# Each worker is one process that runs the real CLI entry point once per command, so that the
# test measures the lock rather than ~60 interpreter starts.
ADDER = """
import json, sys
from memcli.cli import app
store, summaries, scope_id = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
for summary in summaries:
    code = app(args=["--store", store, "--wait", "60", "--quiet", "add", "--type", "semantic",
                     "--subtype", "fact", "--scope", "agent", "--scope-id", scope_id, "--tag", "load",
                     "--summary", summary], standalone_mode=False)
    if code:
        sys.exit(code)
"""
CONSOLIDATOR = """
import os, sys
from memcli.cli import app
store, stop = sys.argv[1], sys.argv[2]
runs = 0
while not os.path.exists(stop) or runs == 0:
    code = app(args=["--store", store, "--wait", "60", "--quiet", "consolidate"], standalone_mode=False)
    if code:
        sys.exit(code)
    runs += 1
print(runs)
"""


def summaries(rng: random.Random, count: int) -> list[str]:
    """Random words: no two are near-identical, so the on-save quick check never merges them."""
    def word() -> str:
        return "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(4, 9)))
    return [" ".join(word() for _ in range(8)) for _ in range(count)]


def spawn(code: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", code, *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


@pytest.mark.slow
def test_adders_and_consolidators_at_once_lose_nothing(store: Path, tmp_path: Path) -> None:
    stale = [add(store, summary=f"an old unused fact number {n}", access_count=0, scope_id="old")["id"]
             for n in range(5)]
    stop = tmp_path / "stop"
    rng = random.Random(7)
    planned = [summaries(rng, ADDS_EACH) for _ in range(ADDERS)]
    started = time.monotonic()
    consolidators = [spawn(CONSOLIDATOR, str(store), str(stop)) for _ in range(CONSOLIDATORS)]
    adders = [spawn(ADDER, str(store), json.dumps(planned[k]), f"agent{k % 2}") for k in range(ADDERS)]
    outputs = [p.communicate(timeout=120) for p in adders]
    stop.touch()
    runs = [p.communicate(timeout=120) for p in consolidators]
    assert all(p.returncode == 0 for p in adders + consolidators), outputs + runs
    added = [line for out, _ in outputs for line in out.split()]
    assert len(added) == ADDERS * ADDS_EACH == len(set(added))
    places = ids_everywhere(store)
    for mem_id in added:
        assert len(places[mem_id]) == 1 and places[mem_id][0].startswith("agent/agent"), places[mem_id]
    for mem_id in stale:
        assert places[mem_id] == [f"archive/{mem_id}.json"]
    assert doctor.diagnose(Store(store)).problems == []
    assert_invariants(store)
    total_runs = sum(int(out.split()[-1]) for out, _ in runs)  # after the run ids --quiet prints
    print(f"\n{total_runs} consolidate runs during {len(added)} adds")
    assert len(log.read_entries(store)) == total_runs > CONSOLIDATORS
    assert time.monotonic() - started < 90


LOCK_HOLDER = """
import sys, time
from pathlib import Path
from memcli.store.store import Store
with Store(Path(sys.argv[1])).lock(5):
    print("locked", flush=True)
    time.sleep(600)
"""


def test_a_lock_left_by_a_killed_process_never_blocks_the_next_run(store: Path) -> None:
    add(store, summary="an old unused fact", access_count=0)
    holder = spawn(LOCK_HOLDER, str(store))
    assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
    # the two runs: processes of their own, forked from one that imported memcli (tests/forked.py)
    memcli = ["--store", str(store)]
    try:
        blocked = forked.run([*memcli, "--wait", "0.5", "consolidate"])
        assert blocked.returncode == 75 and "locked by another memcli process" in blocked.stderr
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(timeout=10)
    assert (store / "ops" / ".lock").exists()  # the file stays; the OS dropped the lock with the process
    # no wait at all: a lock still held would make this exit 75 at once (no timing involved)
    result = forked.run([*memcli, "--wait", "0", "consolidate"])
    assert result.returncode == 0, result.stderr
    assert doctor.diagnose(Store(store)).ok
