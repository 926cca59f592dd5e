"""SPEC 13: a run's id comes from its decisions, so that two clones deciding the same over the
same files at the same moment write byte-identical results."""

from __future__ import annotations

import shutil
from pathlib import Path

import orjson

from memcli.consolidate import engine
from memcli.store.store import Store
from tests.conftest import add, all_files, days_ago

DUP = "Restart the payments worker after every config change to the staging cluster"


def shared_files(root: Path) -> dict[str, bytes]:
    """What git would track: no cache, nothing machine-local, no index (it holds mtimes)."""
    return {rel: data for rel, data in all_files(root).items()
            if not rel.startswith((".cache/", "ops/local/", "ops/.")) and not rel.endswith("_index.json")}


def test_two_copies_deciding_the_same_write_the_same_bytes(store: Path, tmp_path: Path) -> None:
    add(store, summary=DUP)
    add(store, summary=DUP + ".")
    add(store, summary="an old note nobody reads", access_count=0, last_accessed=days_ago(200))
    copy = tmp_path / "copy"
    shutil.copytree(store, copy)
    one, two = engine.consolidate(Store(store)), engine.consolidate(Store(copy))
    assert one.run_id == two.run_id and {a["type"] for a in one.actions} == {"merge", "archive"}
    mine, theirs = shared_files(store), shared_files(copy)
    logs = [orjson.loads(files.pop("ops/consolidation-log.json")) for files in (mine, theirs)]
    for data in logs:  # a run's durations are the figures two machines never agree on
        for key in ("duration_ms", "plan_ms", "apply_ms"):
            data["entries"][0]["stats"].pop(key)
    assert mine == theirs and logs[0] == logs[1]
    assert any(rel.startswith(f"archive/runs/{one.run_id}/") for rel in shared_files(store))


def test_the_id_follows_the_decisions_and_a_dry_run_names_the_same(store: Path, tmp_path: Path) -> None:
    add(store, summary=DUP)
    add(store, summary=DUP + ".")
    copy = tmp_path / "copy"
    shutil.copytree(store, copy)
    add(copy, summary="an old note nobody reads", access_count=0, last_accessed=days_ago(200))
    preview = engine.consolidate(Store(store), dry_run=True)
    one, two = engine.consolidate(Store(store)), engine.consolidate(Store(copy))
    assert preview.run_id == one.run_id != two.run_id  # the copy also archives: another decision
    assert one.run_id[4:14] == two.run_id[4:14]  # the same moment: the same ULID time part


def test_runs_that_decide_nothing_at_one_moment_still_get_distinct_ids(store: Path) -> None:
    ids = {engine.consolidate(Store(store)).run_id for _ in range(3)}
    assert len(ids) == 3
