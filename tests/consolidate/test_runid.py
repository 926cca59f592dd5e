"""SPEC 13: a run's id comes from its decisions, so that two clones deciding the same over the
same files at the same moment write byte-identical results."""

from __future__ import annotations

import shutil
from pathlib import Path

import orjson

from memcli.consolidate import engine, runid
from memcli.consolidate.planner import Planner
from memcli.consolidate.plantypes import RunOptions
from memcli.store import model, plans
from memcli.store.store import Store
from tests.conftest import add, all_files, days_ago, write_memory

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


def _every_kind(store: Path) -> None:
    """A store whose run plans every action kind, a review item, an archive name that carries
    the run id and deferred actions."""
    flagged = [add(store, summary=f"unrelated note number {n} on {w}", created_at=days_ago(40 - n))
               for n, w in enumerate(("lattices", "orchards"))]
    engine.consolidate(Store(store))  # a first run: both changed since it, below, are flagged
    for data in flagged:
        data.update(updated_at=days_ago(1), content={"summary": "Warm the search cache at nine every morning before the standup"})
        write_memory(store, data)
    add(store, summary=DUP, created_at=days_ago(40))
    add(store, "md", summary=DUP + ".", created_at=days_ago(20), details="first body")  # merge
    add(store, summary="Rotate the vault token weekly for the billing API", created_at=days_ago(40))
    add(store, summary="Rotate the vault token weekly for the billing API", created_at=days_ago(20),
        created_by="agent:reviewer")  # keep_separate: different authors
    add(store, summary="The request timeout of the billing API is 30 seconds", created_at=days_ago(40))
    add(store, summary="The request timeout of the billing API is 60 seconds",
        created_at=days_ago(20))  # keep_separate by the numbers guard, with a review item
    add(store, type="procedural", subtype="deploy", access_count=6)  # promote
    add(store, type="episodic", subtype="session", created_at=days_ago(50),
        details="Something happened at the release. " * 300)  # summarize
    for n in range(4):  # archive; the first one's name is taken in archive/: it carries the run id
        stale = add(store, summary=f"stale note {n} about {WORDS[n]}", access_count=0)
        if n == 0:
            (store / "archive" / f"{stale['id']}.json").write_bytes(b"{}")


WORDS = ["glacier calving season", "compiler register spill", "saffron market prices", "lunar regolith dust"]


def test_renaming_in_place_gives_what_the_json_round_trip_gave(store: Path) -> None:
    _every_kind(store)
    opts = RunOptions("manual", limit=6)
    planner = Planner(Store(store), opts, model.now())
    planner.run()
    planner.apply_limit()
    provisional = planner.plan
    kinds = {a.type for a in provisional.actions + provisional.deferred}
    assert kinds == {"merge", "keep_separate", "flag", "promote", "summarize", "archive"}, kinds
    assert provisional.deferred and any(a.review for a in provisional.actions + provisional.deferred)
    raw = orjson.dumps(provisional.to_json())
    rid = provisional.run_id
    every = provisional.actions + provisional.deferred  # (which are deferred follows the random ids)
    everywhere = [[op.path for a in every for op in a.ops],
                  [op.data.decode() for a in every for op in a.ops if op.data],
                  [str(a.review) for a in every if a.review]]
    assert all(any(rid in part for part in parts) for parts in everywhere)  # paths, bytes, review items
    new_id = "run_01KAQZZZZZZZZZZZZZZZZZZZZZ"
    expected = plans.Plan.from_json(orjson.loads(raw.replace(rid.encode(), new_id.encode())))
    renamed = runid.renamed(provisional, new_id)
    assert renamed is provisional and renamed == expected  # dataclass equality: every field, every type
    assert rid.encode() not in orjson.dumps(renamed.to_json())
    assert any(op.path.startswith("archive/") and new_id in op.path
               for a in renamed.actions + renamed.deferred for op in a.ops)


def test_renaming_to_the_same_id_changes_nothing(store: Path) -> None:
    _every_kind(store)
    planner = Planner(Store(store), RunOptions("manual"), model.now())
    planner.run()
    before = orjson.dumps(planner.plan.to_json())
    assert runid.renamed(planner.plan, planner.plan.run_id) is planner.plan
    assert orjson.dumps(planner.plan.to_json()) == before
