"""What a cold dry run reads: a bare dry run plans archives without reading the memories
it would archive, while `--plan-out` and a real run carry their records, with the same ops."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from memcli.consolidate import engine
from memcli.consolidate.planner import Planner, plan
from memcli.consolidate.plantypes import RunOptions
from memcli.store.formats import decode, encode
from memcli.store.memories import reindex
from memcli.store.model import now
from memcli.store.store import Store
from tests.conftest import add, days_ago, record_reads

DUP = "Deploy to staging before production and watch the dashboards for errors"


def _stale_store(root: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Three stale memories, one used recently, and a duplicate pair; indexed."""
    stale = [add(root, access_count=0, tags=[f"t{n}"]) for n in range(3)]
    kept = add(root, access_count=3, last_accessed=days_ago(2), tags=["kept"])
    add(root, summary=DUP, created_at=days_ago(50), tags=["deploy"])
    add(root, summary=DUP + ".", created_at=days_ago(40), tags=["deploy"])
    reindex(Store(root))
    return stale, kept


def _ops(actions: list[Any]) -> list[tuple[str, str, str | None]]:
    return [(op.kind, op.path, op.expect) for a in actions for op in a.ops]


def test_a_bare_dry_run_does_not_read_what_it_would_archive(store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stale, kept = _stale_store(store)
    reads = record_reads(monkeypatch)
    out = engine.consolidate(Store(store), dry_run=True)
    archived = {a["memory_id"] for a in out.actions if a["type"] == "archive"}
    assert archived == {m["id"] for m in stale}
    assert not {f"{m['id']}.json" for m in stale} & set(reads)
    assert f"{kept['id']}.json" not in reads  # no rule needs its text either


def test_plan_out_and_a_real_run_carry_the_archive_records(store: Path, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    stale, _ = _stale_store(store)
    bare = plan(Store(store), RunOptions(records=False), now())
    full = plan(Store(store), RunOptions(), now())
    assert [a.log for a in bare.plan.actions] == [a.log for a in full.plan.actions]
    assert _ops(bare.plan.actions) == _ops(full.plan.actions)
    assert bare.plan.run_id == full.plan.run_id
    creates = [op for a in full.plan.actions if a.type == "archive" for op in a.ops if op.kind == "create"]
    assert len(creates) == len(stale) and all(op.data is not None for op in creates)
    record = decode(creates[0].data or b"", "json")
    assert record["archive_reason"] == "stale" and record["archive_run_id"] == full.plan.run_id
    assert record["content"] == next(m for m in stale if m["id"] == record["id"])["content"]
    # --plan-out: the file holds every record's bytes; a real run archives them whole
    reads = record_reads(monkeypatch)
    plan_file = tmp_path / "plan.json"
    dry = engine.consolidate(Store(store), dry_run=True, plan_out=plan_file)
    assert {f"{m['id']}.json" for m in stale} <= set(reads)
    saved = json.loads(plan_file.read_text())
    records = [decode(op["data"].encode(), "json") for a in saved["actions"] if a["type"] == "archive"
               for op in a["ops"] if op["kind"] == "create"]
    assert sorted(r["id"] for r in records) == sorted(m["id"] for m in stale)
    assert all(r["archive_reason"] == "stale" for r in records)
    real = engine.consolidate(Store(store))
    assert real.actions == dry.actions and real.run_id == dry.run_id
    for mem in stale:
        moved = decode(next((store / "archive").glob(f"{mem['id']}*")).read_bytes(), "json")
        assert moved["content"] == mem["content"] and moved["archive_reason"] == "stale"


def test_an_edit_after_reindex_is_seen_by_a_cold_dry_run(store: Path) -> None:
    """A file edited after `reindex` is planned from the file, not its entry: an edit that
    makes one memory a restatement of another gives a merge; one that makes a memory stale
    (never used) gives an archive; one that breaks a file is reported, naming it, and the run
    goes on."""
    old = add(store, summary="Rotate the staging keys every Monday before the deploy",
              created_at=days_ago(50), tags=["keys"])
    other = add(store, summary="Completely unrelated note about lunch menus", created_at=days_ago(40),
                tags=["keys"])
    used = add(store, summary="A note used a lot", access_count=5, last_accessed=days_ago(1), tags=["n"])
    broken = add(store, summary="soon broken", tags=["b"])
    reindex(Store(store))
    where = store / "agent" / "coder"
    assert engine.consolidate(Store(store), dry_run=True).actions == []
    (where / f"{other['id']}.json").write_bytes(encode(
        {**other, "content": {"summary": old["content"]["summary"] + "."}}, "json"))
    (where / f"{used['id']}.json").write_bytes(encode({**used, "access_count": 0}, "json"))
    (where / f"{broken['id']}.json").write_text("{not json")
    out = engine.consolidate(Store(store), dry_run=True)
    assert {(a["type"], tuple(a.get("source_ids") or [a.get("memory_id")])) for a in out.actions} == {
        ("merge", (old["id"], other["id"])), ("archive", (used["id"],))}
    assert any(f"{broken['id']}.json" in note for note in out.notes)


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts open files through /proc")
def test_a_cold_full_run_reads_each_folder_through_its_folder_and_leaves_nothing_open(
        store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A full run reads the files of the memories it plans from their index entries relative
    to their folder (`FolderFiles`), one folder at a time, and holds no folder open once
    planning is done, with or without an error on the way."""
    from memcli.store.reading import FolderFiles

    for scope_id in ("coder", "writer"):
        add(store, summary="Rotate the staging keys every Monday before the deploy", scope_id=scope_id,
            tags=["k"])
        add(store, summary="Rotate the staging keys every Monday before the deploy.", scope_id=scope_id,
            tags=["k"])
    reindex(Store(store))
    opened: list[str] = []
    real_open = FolderFiles.open

    def spy(self: FolderFiles, name: str) -> int:
        opened.append(self.path.name)
        return real_open(self, name)

    monkeypatch.setattr(FolderFiles, "open", spy)
    held = len(os.listdir("/proc/self/fd"))
    out = engine.consolidate(Store(store), dry_run=True)
    assert len(os.listdir("/proc/self/fd")) == held
    assert [a["type"] for a in out.actions] == ["merge", "merge"]
    assert sorted(set(opened)) == ["coder", "writer"] and len(opened) == 4

    def failing(self: Any) -> None:
        assert [item.mem.content for item in self.live.values()]
        assert len(os.listdir("/proc/self/fd")) == held + 1  # (read: the folder is open)
        raise RuntimeError("stopped")

    monkeypatch.setattr(Planner, "_apply_rules", failing)
    with pytest.raises(RuntimeError):
        engine.consolidate(Store(store), dry_run=True)
    assert len(os.listdir("/proc/self/fd")) == held
