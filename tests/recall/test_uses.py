"""Uses (SPEC 10): pending, folded under the lock, crash-safe, seen by every reader, kept by
undo, and kept for archived or merged ids."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from memcli.consolidate import engine, undo
from memcli.recall import uses
from memcli.store import fsops, memories
from memcli.store.model import parse_ts
from memcli.store.store import Store
from tests import forked, sweep
from tests.conftest import NOW, add, assert_invariants, days_ago, load, snapshot
from tests.recall.helpers import fold

MOMENT = parse_ts(NOW)[0]


def path_of(root: Path, data: dict, folder: str = "agent/coder") -> Path:
    return root / folder / f"{data['id']}.json"


def test_pending_uses_keep_a_memory_from_going_stale(store: Path) -> None:
    mem = add(store, access_count=0, last_accessed=None)
    other = add(store, access_count=0, last_accessed=None)
    uses.record(store, [mem["id"]], None, MOMENT)
    outcome = engine.consolidate(Store(store), dry_run=True)
    archived = {a["memory_id"] for a in outcome.actions if a["type"] == "archive"}
    assert archived == {other["id"]}
    memories_list, _ = memories.list_memories(Store(store), memories.ListFilter())
    counts = {e["id"]: e["access_count"] for e in memories_list}
    assert counts == {mem["id"]: 1, other["id"]: 0}


def test_last_accessed_pending_keeps_it_fresh(store: Path) -> None:
    mem = add(store, access_count=4, last_accessed=days_ago(120))
    assert {a["memory_id"] for a in engine.consolidate(Store(store), dry_run=True).actions
            if a["type"] == "archive"} == {mem["id"]}
    uses.record(store, [mem["id"]], "s", MOMENT)
    assert not [a for a in engine.consolidate(Store(store), dry_run=True).actions if a["type"] == "archive"]


def test_pending_uses_promote_and_are_folded_not_doubled(store: Path) -> None:
    proc = add(store, type="procedural", subtype="deploy", access_count=3)
    uses.record(store, [proc["id"]], "a", MOMENT)
    dry = engine.consolidate(Store(store), dry_run=True)
    assert not [a for a in dry.actions if a["type"] == "promote"]  # 4 < 5
    uses.record(store, [proc["id"]], "b", MOMENT)
    dry = engine.consolidate(Store(store), dry_run=True)
    assert [a["memory_id"] for a in dry.actions if a["type"] == "promote"] == [proc["id"]]
    real = engine.consolidate(Store(store))
    assert [a["memory_id"] for a in real.actions if a["type"] == "promote"] == [proc["id"]]
    data = load(path_of(store, proc))
    assert data["access_count"] == 5 and data["promoted_to"]
    assert uses.pending(store) == {}
    assert_invariants(store)


def test_use_of_a_merged_id_counts_for_the_keeper(store: Path) -> None:
    keeper = add(store, summary="keeper text", access_count=2)
    gone = add(store, summary="merged text", access_count=1)
    archived = dict(gone, superseded_by=[keeper["id"]], archived_at=NOW, archive_reason="merged",
                    archived_from="agent/coder", archive_run_id="run_x")
    path_of(store, gone).unlink()
    (store / "archive" / f"{gone['id']}.json").write_text(json.dumps(archived))
    uses.record(store, [gone["id"]], None, MOMENT)
    fold(store)
    assert load(path_of(store, keeper))["access_count"] == 3
    assert load(store / "archive" / f"{gone['id']}.json")["access_count"] == 1


def test_use_of_a_stale_archived_id_goes_into_its_archived_record(store: Path) -> None:
    mem = add(store, access_count=1)
    memories.forget_memory(Store(store), mem["id"], None, 5)
    uses.record(store, [mem["id"]], None, MOMENT)
    fold(store)
    assert load(store / "archive" / f"{mem['id']}.json")["access_count"] == 2
    undo.restore_memory(Store(store), mem["id"])
    assert load(path_of(store, mem))["access_count"] == 3  # its uses, and the restore's


def test_use_of_an_unknown_id_is_logged_not_lost(store: Path) -> None:
    uses.record(store, ["mem_neverwas"], None, MOMENT)
    fold(store)
    lines = [json.loads(x) for x in (store / "ops" / "uses-folded.jsonl").read_text().splitlines()]
    assert lines[-1]["id"] == "mem_neverwas" and lines[-1]["path"] is None


def test_undo_keeps_uses_folded_since_the_run(store: Path) -> None:
    a = add(store, summary="Deploy staging before production always", access_count=2)
    b = add(store, summary="Deploy staging before production always!", access_count=1,
            created_at=days_ago(40))
    run = engine.consolidate(Store(store))
    assert run.stats["memories_merged"] == 1
    keeper = a if path_of(store, a).exists() else b
    uses.record(store, [keeper["id"]], None, MOMENT)
    fold(store)
    assert load(path_of(store, keeper))["access_count"] == 4
    undo.undo_run(Store(store), run.run_id)
    assert load(path_of(store, keeper))["access_count"] == keeper["access_count"] + 1
    assert path_of(store, a).exists() and path_of(store, b).exists()
    assert_invariants(store)


def test_undo_still_refuses_a_real_edit(store: Path) -> None:
    import pytest

    from memcli.errors import UndoRefusedError

    a = add(store, summary="Deploy staging before production always", access_count=2)
    b = add(store, summary="Deploy staging before production always!", access_count=1, created_at=days_ago(40))
    run = engine.consolidate(Store(store))
    keeper = a if path_of(store, a).exists() else b
    uses.record(store, [keeper["id"]], None, MOMENT)
    fold(store)
    data = load(path_of(store, keeper))
    data["content"]["summary"] = "edited by hand"
    path_of(store, keeper).write_text(json.dumps(data))
    with pytest.raises(UndoRefusedError, match="changed"):
        undo.undo_run(Store(store), run.run_id)


def test_a_fold_keeps_run_hash(store: Path) -> None:
    mem = add(store)
    engine.consolidate(Store(store))  # sets run_hash
    uses.record(store, [mem["id"]], None, MOMENT)
    fold(store)
    index = json.loads((store / "agent" / "coder" / "_index.json").read_bytes())
    entry = next(e for e in index["entries"] if e["id"] == mem["id"])
    assert entry["run_hash"] == entry["content_hash"] and entry["access_count"] == 2


def _memcli(root: Path, *args: str, crash_at: int | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "MEMCLI_NOW": NOW}
    if crash_at is not None:
        env["MEMCLI_CRASH_AT"] = str(crash_at)
    return forked.run(["--store", str(root), *args], timeout=120, env=env)


@pytest.mark.slow
def test_a_fold_killed_at_any_change_loses_and_doubles_nothing(store: Path, tmp_path: Path) -> None:
    mems = [add(store, access_count=1) for _ in range(3)]
    uses.record(store, [m["id"] for m in mems], "s", MOMENT)
    uses.record(store, [mems[0]["id"]], None, MOMENT)
    pristine = tmp_path / "pristine"
    shutil.copytree(store, pristine)
    k = _changes_of_reindex(pristine, tmp_path / "count")
    assert k > 5
    for n in sweep.points(1, k + 1):  # a sample by default, every point with MEMCLI_FULL_SWEEPS=1
        work = tmp_path / f"w{n}"
        shutil.copytree(pristine, work)
        proc = _memcli(work, "reindex", crash_at=n)
        assert proc.returncode == (70 if n <= k else 0), (n, sweep.label(), proc.stderr)
        assert _memcli(work, "doctor", "--fix").returncode in (0, 1)
        counts = [load(work / "agent" / "coder" / f"{m['id']}.json")["access_count"] for m in mems]
        assert counts == [3, 2, 2], (n, sweep.label(), counts)
        assert not (work / "ops" / "uses-fold.json").exists() and not (work / "ops" / "uses-folding.jsonl").exists()


def _changes_of_reindex(pristine: Path, work: Path) -> int:
    """How many file-system changes `memcli reindex` makes on a copy (in-process, counted)."""
    from memcli.cli import app

    shutil.copytree(pristine, work)
    start = fsops.change_count()
    with pytest.raises(SystemExit) as done:
        app(args=["--store", str(work), "reindex"], prog_name="memcli")
    assert done.value.code in (0, None)
    return fsops.change_count() - start


@pytest.mark.slow
def test_same_session_counts_once_across_processes(store: Path) -> None:
    mem = add(store, access_count=0)
    for _ in range(3):
        assert _memcli(store, "access", mem["id"], "--session", "abc").returncode == 0
    out = json.loads(_memcli(store, "access", mem["id"], "--json").stdout)
    assert out["access_count"] == 2
    assert snapshot(store)  # nothing folded yet: the files are untouched
    assert load(path_of(store, mem))["access_count"] == 0


def test_a_journal_parsed_once_is_read_again_when_it_changes(tmp_path: Path) -> None:
    """`_lines` keeps a journal's parsed lines while its inode, size and times stay: an
    appended line and a journal replaced by another are both seen at once."""
    path = tmp_path / "uses.jsonl"
    one = {"id": "mem_01JD0000000000000000000001", "at": "2026-11-01T00:00:00Z", "session": "a"}
    two = {**one, "id": "mem_01JD0000000000000000000002"}
    path.write_bytes(json.dumps(one).encode() + b"\n")
    assert uses._lines(path) == [one] == uses._lines(path)
    uses._lines(path).clear()  # a caller's copy: the kept lines stay
    assert uses._lines(path) == [one]
    with open(path, "ab") as handle:
        handle.write(json.dumps(two).encode() + b"\n")
    assert uses._lines(path) == [one, two]
    other = tmp_path / "other.jsonl"
    other.write_bytes(json.dumps(two).encode() + b"\n" + json.dumps(one).encode() + b"\n")
    os.replace(other, path)
    assert uses._lines(path) == [two, one]
    path.unlink()
    assert uses._lines(path) == []
