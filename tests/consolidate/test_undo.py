"""`undo RUN_ID` and `restore ID`: nothing a run did is beyond reach."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from memcli.cli import app
from memcli.store import log, opsfiles
from memcli.store.model import ARCHIVE_FIELDS
from tests import forked
from tests.conftest import NOW, add, all_files, assert_invariants, days_ago, load, record, snapshot
from tests.store.test_crash import build_store

runner = CliRunner()


def run(store: Path, *args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, ["--store", str(store), *args])
    return result.exit_code, result.stdout, result.stderr


def run_json(store: Path, *args: str) -> dict[str, Any]:
    code, out, err = run(store, "--json", *args)
    assert code == 0, (out, err)
    return json.loads(out)  # type: ignore[no-any-return]


def consolidate(store: Path) -> str:
    return str(run_json(store, "consolidate")["run_id"])


@pytest.fixture
def rich_store(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    root = tmp_path / "store"
    return root, build_store(root)


def archived_files(root: Path) -> dict[str, Path]:
    return {p.name: p for p in (root / "archive").glob("mem_*")}


def doctor_ok(root: Path) -> None:
    code, out, _ = run(root, "doctor")
    assert code == 0, out


# ---------------------------------------------------------------- undo


def test_undo_restores_every_live_file_byte_for_byte(rich_store: tuple[Path, dict[str, str]]) -> None:
    root, roles = rich_store
    before = snapshot(root)
    run_id = consolidate(root)
    after_run = snapshot(root)
    assert after_run != before
    outcome = run_json(root, "undo", run_id)
    assert snapshot(root) == before
    assert outcome["trigger"] == "undo"
    undo_action = outcome["actions"][0]
    assert undo_action == {"type": "undo", "run_id": run_id, "files_restored": undo_action["files_restored"]}
    manifest = json.loads((root / "archive" / "runs" / run_id / "manifest.json").read_bytes())
    assert undo_action["files_restored"] == len(manifest["files"])
    assert_invariants(root)
    doctor_ok(root)


def test_memories_the_run_created_end_in_the_archive_not_deleted(rich_store: tuple[Path, dict[str, str]]) -> None:
    root, roles = rich_store
    outcome = run_json(root, "consolidate")
    created = [a["result_id"] for a in outcome["actions"] if a["type"] == "promote"]
    assert len(created) == 2
    copies = {mem_id: next(root.rglob(f"{mem_id}.*")).read_bytes() for mem_id in created}
    undone = run_json(root, "undo", outcome["run_id"])
    assert sorted(a["memory_id"] for a in undone["actions"] if a.get("reason") == "undone") == sorted(created)
    for mem_id in created:
        archived = load(archived_files(root)[f"{mem_id}.json"])
        assert archived["archive_reason"] == "undone"
        assert archived["archive_run_id"] == undone["run_id"]
        assert archived["archived_from"] in ("team/backend", "global")
        kept = {k: v for k, v in archived.items() if k not in ARCHIVE_FIELDS}
        assert kept == json.loads(copies[mem_id])  # the whole copy, only the archive fields added
        assert not list((root / "team").rglob(f"{mem_id}.*")) and not list((root / "global").glob(f"{mem_id}.*"))
    # the run's own archived copies are gone from archive/ but their bytes stay in the undo's pre-images
    run_dir = root / "archive" / "runs" / undone["run_id"] / "archive"
    merged = [a for a in outcome["actions"] if a["type"] == "merge"]
    assert merged and all((run_dir / f"{i}.json").exists() for i in merged[0]["source_ids"][:-1])


def test_undo_is_logged_and_does_not_count_as_a_successful_run(rich_store: tuple[Path, dict[str, str]]) -> None:
    root, _ = rich_store
    run_id = consolidate(root)
    state_before = opsfiles.read_state(root)
    undo_id = run_json(root, "undo", run_id)["run_id"]
    state = opsfiles.read_state(root)
    assert state["last_success"] == state_before["last_success"]
    assert state["runs"]["undo"]["run_id"] == undo_id
    entry = log.find_run(root, undo_id)
    assert entry is not None and entry["trigger"] == "undo"
    assert entry["actions"][0]["run_id"] == run_id


def test_undo_refuses_naming_each_file_changed_since(rich_store: tuple[Path, dict[str, str]]) -> None:
    root, roles = rich_store
    outcome = run_json(root, "consolidate")
    summarized = next(root.rglob(f"{roles['verbose_md']}.md"))
    summarized.write_text(summarized.read_text() + "\nhand edit after the run\n")
    stale_path = root / "agent" / "coder" / f"{roles['never_used']}.json"
    stale_path.write_text("{}")  # a file where the run had removed one: 'exists again'
    before = all_files(root)
    code, out, err = run(root, "undo", outcome["run_id"])
    assert code == 1
    assert f"agent/coder/{roles['verbose_md']}.md (changed)" in err
    assert f"agent/coder/{roles['never_used']}.json (exists again)" in err
    assert all_files(root) == before  # refused whole: nothing written, no lock file either


def test_a_second_undo_is_refused(rich_store: tuple[Path, dict[str, str]]) -> None:
    root, _ = rich_store
    run_id = consolidate(root)
    undo_id = run_json(root, "undo", run_id)["run_id"]
    code, _, err = run(root, "undo", run_id)
    assert code == 1 and f"already undone by {undo_id}" in err


def test_undo_of_an_undo_redoes_the_run_and_the_run_can_be_undone_again(
        rich_store: tuple[Path, dict[str, str]]) -> None:
    root, _ = rich_store
    before = snapshot(root)
    run_id = consolidate(root)
    after_run = snapshot(root)
    undo_id = run_json(root, "undo", run_id)["run_id"]
    redo = run_json(root, "undo", undo_id)
    assert snapshot(root) == after_run
    assert redo["actions"][0]["run_id"] == undo_id
    run_json(root, "undo", run_id)  # the run is in force again, so it may be undone again
    assert snapshot(root) == before
    code, _, err = run(root, "undo", undo_id)
    assert code == 1 and "already undone" in err
    assert_invariants(root)
    doctor_ok(root)


def test_undo_keeps_later_changes_to_other_files(rich_store: tuple[Path, dict[str, str]]) -> None:
    root, roles = rich_store
    run_id = consolidate(root)
    later = add(root, summary="written after the run", scope_id="later")
    run_json(root, "undo", run_id)
    assert (root / "agent" / "later" / f"{later['id']}.json").exists()


def test_undo_refuses_unknown_rolled_back_and_no_change_runs(store: Path) -> None:
    add(store, summary="fresh and used", created_at=days_ago(1))
    code, _, err = run(store, "undo", "run_01JD3Z7Q9K8V5T2N4M6P0R1S3A")
    assert code == 1 and "not in the log" in err
    code, _, err = run(store, "undo", "../../etc")
    assert code == 1 and "bad run id" in err
    idle = consolidate(store)
    code, _, err = run(store, "undo", idle)
    assert code == 1 and "changed no memory file" in err


def test_undo_refuses_a_run_that_was_rolled_back(store: Path) -> None:
    add(store, summary="old and never used", access_count=0)
    env = {**os.environ, "MEMCLI_CRASH_AT": "14"}  # its journal in place, before its first pre-image
    crashed = forked.run(["--store", str(store), "consolidate"], env=env)  # `python -m memcli`, forked
    assert crashed.returncode == 70
    run_id = next((store / "ops").glob("journal-*")).stem.removeprefix("journal-")
    code, _, err = run(store, "undo", run_id)  # recovers (rolls back) first, then refuses
    assert code == 1 and "not in the log" in err
    assert not list((store / "ops").glob("journal-*"))


def test_undo_output_for_people_names_the_undo_run(rich_store: tuple[Path, dict[str, str]]) -> None:
    root, _ = rich_store
    run_id = consolidate(root)
    code, out, _ = run(root, "undo", run_id)
    assert code == 0
    assert out.startswith(f"Undid {run_id}: ") and f"memcli --store {root} undo run_" in out


# ---------------------------------------------------------------- restore


def test_restore_brings_back_a_stale_memory_as_a_use_and_the_next_run_keeps_it(store: Path) -> None:
    stale = add(store, summary="old fact never used", access_count=0)
    run_json(store, "consolidate")
    assert not (store / "agent" / "coder" / f"{stale['id']}.json").exists()
    outcome = run_json(store, "restore", stale["id"])
    assert outcome["trigger"] == "restore"
    assert outcome["actions"] == [{"type": "restore", "memory_id": stale["id"],
                                   "from": f"archive/{stale['id']}.json", "to": "agent/coder"}]
    back = load(store / "agent" / "coder" / f"{stale['id']}.json")
    assert not set(ARCHIVE_FIELDS) & set(back)
    assert back["access_count"] == 1 and back["last_accessed"] == NOW
    assert {k: v for k, v in back.items() if k not in ("access_count", "last_accessed")} == \
        {k: v for k, v in stale.items() if k not in ("access_count", "last_accessed")}
    assert not (store / "archive" / f"{stale['id']}.json").exists()
    again = run_json(store, "consolidate")
    assert not [a for a in again["actions"] if a.get("memory_id") == stale["id"]]
    assert (store / "agent" / "coder" / f"{stale['id']}.json").exists()
    assert_invariants(store)
    doctor_ok(store)


def test_restore_of_a_merged_memory_empties_superseded_by(store: Path) -> None:
    text = "Run the database migrations on staging first then deploy the build to production"
    old = add(store, summary=text, tags=["deploy"], created_at=days_ago(50))
    new = add(store, summary=text + " now", tags=["deploy"], created_at=days_ago(40))
    run_json(store, "consolidate")
    assert load(store / "archive" / f"{old['id']}.json")["superseded_by"] == [new["id"]]
    run_json(store, "restore", old["id"])
    back = load(store / "agent" / "coder" / f"{old['id']}.json")
    assert back["superseded_by"] == [] and back["content"] == old["content"]
    doctor_ok(store)  # the keeper's `supersedes` still names it: a live memory, not a dangling link


def test_restore_is_undoable_back_into_the_archive(store: Path) -> None:
    stale = add(store, "md", summary="old fact never used", access_count=0)
    run_json(store, "consolidate")
    archived = (store / "archive" / f"{stale['id']}.md").read_bytes()
    restore_id = run_json(store, "restore", stale["id"])["run_id"]
    undone = run_json(store, "undo", restore_id)
    assert (store / "archive" / f"{stale['id']}.md").read_bytes() == archived
    assert not (store / "agent" / "coder" / f"{stale['id']}.md").exists()
    assert not [a for a in undone["actions"] if a.get("reason") == "undone"]  # a move back, not a copy
    assert_invariants(store)


def test_restore_refuses_a_live_id_and_an_unknown_one(store: Path) -> None:
    live = add(store, summary="live and well")
    code, _, err = run(store, "restore", live["id"])
    assert code == 1 and "is live already" in err
    code, _, err = run(store, "restore", "mem_NOSUCHMEMORY")
    assert code == 1 and "no archived memory" in err
    code, _, err = run(store, "restore", "../x")
    assert code == 1 and "bad memory id" in err


def test_restore_takes_the_latest_archived_version(store: Path) -> None:
    from memcli.store.formats import encode

    data = record(summary="archived twice")
    older = {**data, "archived_at": days_ago(30), "archive_reason": "stale", "archived_from": "agent/coder",
             "archive_run_id": "run_A"}
    newer = {**older, "archived_at": days_ago(2), "archive_run_id": "run_B",
             "content": {"summary": "archived twice, second version"}}
    (store / "archive" / f"{data['id']}.json").write_bytes(encode(older, "json"))
    (store / "archive" / f"{data['id']}@run_B.json").write_bytes(encode(newer, "json"))
    run_json(store, "restore", data["id"])
    back = load(store / "agent" / "coder" / f"{data['id']}.json")
    assert back["content"] == newer["content"]
    assert (store / "archive" / f"{data['id']}.json").exists()
    assert not (store / "archive" / f"{data['id']}@run_B.json").exists()


def test_restore_cli_text(store: Path) -> None:
    stale = add(store, summary="old fact never used", access_count=0)
    run_json(store, "consolidate")
    code, out, _ = run(store, "restore", stale["id"])
    assert code == 0 and out.startswith(f"Restored {stale['id']} to agent/coder")


# ---------------------------------------------------------------- real processes


def memcli(store: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return forked.run(["--store", str(store), *args], timeout=60)


@pytest.mark.slow
def test_undo_and_restore_in_real_processes(store: Path) -> None:
    stale = add(store, summary="old fact never used", access_count=0)
    before = snapshot(store)
    result = memcli(store, "--json", "consolidate")
    run_id = json.loads(result.stdout)["run_id"]
    restored = memcli(store, "restore", stale["id"])
    assert restored.returncode == 0, restored.stderr
    restore_id = restored.stdout.split("(run ")[1].split(")")[0]
    assert memcli(store, "undo", restore_id).returncode == 0
    undone = memcli(store, "undo", run_id)
    assert undone.returncode == 0, undone.stderr
    assert snapshot(store) == before
    refused = memcli(store, "undo", run_id)
    assert refused.returncode == 1 and "already undone" in refused.stderr
