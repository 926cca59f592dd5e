"""SPEC 13's promise, simulated: three clones of one store and a bare remote, 20 rounds in
a seeded random order of add, consolidate, undo, recall and sync. Afterwards, in every
clone: every memory ever written is live or archived, no id is live twice, each run that
changed anything is in the shared log once, doctor is clean and `git status` is clean."""

from __future__ import annotations

import json
import os
import random
import time
from collections import Counter
from pathlib import Path

import pytest

from memcli.consolidate import engine, undo
from memcli.errors import MemcliError
from memcli.recall import search
from memcli.store import doctor, log
from memcli.store.store import Store
from tests.conftest import add, days_ago
from tests.sync.gitstore import status, sync, team

TOPICS = ["Restart the payments worker after every config change to the staging cluster",
          "Run the database migrations before deploying the API service to production",
          "The release train leaves on Thursdays; freeze the branch on Wednesday evening",
          "Rotate the deploy keys every ninety days and record it in the vault log"]
ROUNDS = 20


def live_files(store: Path) -> list[Path]:
    return [p for scope in ("agent", "team", "global") for p in (store / scope).rglob("mem_*")
            if p.suffix in (".json", ".md") and "/." not in str(p)]


def archived_ids(store: Path) -> set[str]:
    return {p.name.split("@")[0].rsplit(".", 1)[0] for p in (store / "archive").glob("mem_*")}


@pytest.mark.slow
def test_three_clones_twenty_rounds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    started = time.monotonic()
    rng = random.Random(int(os.environ.get("MEMCLI_SIM_SEED", "16")))  # other seeds: explore
    _, clones = team(tmp_path, clones=3)
    written: set[str] = set()
    made_runs: set[str] = set()
    counts: Counter[str] = Counter()

    def note_live(store: Path) -> None:
        written.update(p.stem for p in live_files(store))

    for n in range(ROUNDS):
        # a round is an hour: two clones deciding the same in one round write the same run
        monkeypatch.setenv("MEMCLI_NOW", f"2026-11-22T{n:02d}:00:00Z")
        for store in rng.sample(clones, k=len(clones)):
            op = rng.choice(["add", "add", "add", "consolidate", "consolidate", "undo", "recall", "sync", "sync"])
            counts[op] += 1
            if op == "add":
                topic = rng.choice(TOPICS)
                variant = rng.choice(["", ".", " (noted again)", f" — case {rng.randint(1, 3)}"])
                stale = rng.random() < 0.25
                add(store, summary=topic + variant, access_count=0 if stale else 2,
                    last_accessed=days_ago(200 if stale else 3), created_by="agent:coder")
            elif op == "consolidate":
                out = engine.consolidate(Store(store))
                if out.actions:
                    made_runs.add(out.run_id)
            elif op == "undo":
                done = [e for e in log.read_entries(store) if e.get("trigger") != "undo" and e.get("actions")]
                if done:
                    try:
                        made_runs.add(undo.undo_run(Store(store), rng.choice(done)["run_id"]).run_id)
                    except MemcliError:
                        counts["undo_refused"] += 1  # already undone, or changed since: refused whole
            elif op == "recall":
                search.recall(Store(store), rng.choice(["payments worker", "migrations", "release train", "deploy keys"]), limit=3)
            else:
                code, result = sync(store)
                assert code == 0, result
                counts.update("resolved:" + r["how"] for r in result["resolutions"])
            note_live(store)
    for _ in range(2):  # everyone syncs, twice: the last merges reach every clone
        for store in clones:
            code, result = sync(store)
            assert code == 0 and result["doctor_ok"], result
    shared_logs = []
    for store in clones:
        live = [p.stem for p in live_files(store)]
        assert len(live) == len(set(live)), f"an id live twice in {store.name}"
        missing = written - set(live) - archived_ids(store)
        assert not missing, f"{store.name} lost {sorted(missing)}"
        entries = json.loads((store / "ops" / "consolidation-log.json").read_text())["entries"]
        runs = [e["run_id"] for e in entries]
        assert len(runs) == len(set(runs)), f"a run logged twice in {store.name}"
        assert made_runs <= set(runs), f"{store.name} misses runs {sorted(made_runs - set(runs))}"
        shared_logs.append(runs)
        report = doctor.diagnose(Store(store))
        assert report.ok, [p.to_json() for p in report.problems]
        assert status(store) == "", status(store)
    assert shared_logs[0] == shared_logs[1] == shared_logs[2]
    elapsed = time.monotonic() - started
    print(f"\nsimulation: {dict(counts)}; {len(written)} memories written, {len(made_runs)} runs, "
          f"{len(shared_logs[0])} in the log; {elapsed:.1f} s")
    assert counts["sync"] and counts["consolidate"] and counts["add"]
