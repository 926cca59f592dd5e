"""The order in which a real run makes its files durable (`journal.execute`, `journal.complete`):
few barriers, each after what it depends on. A crash is covered by tests/store/test_crash.py;
here, the power cut: what reaches the disk before what."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from memcli.consolidate import engine
from memcli.store import fsops, index, lastrun, log, opsfiles, sigcache
from memcli.store.store import Store
from tests.conftest import add, days_ago

BASE = "Run the database migrations on staging first then deploy the build to production"


def build(root: Path) -> dict[str, str]:
    """Two duplicates (the run merges them) and a few other memories in agent/coder."""
    roles = {"dup0": add(root, summary=BASE, tags=["deploy"], type="procedural", subtype="deployment",
                         created_at=days_ago(50))["id"],
             "dup1": add(root, summary=BASE + " today", tags=["deploy"], type="procedural",
                         subtype="deployment", created_at=days_ago(40))["id"]}
    for n in range(4):
        roles[f"m{n}"] = add(root, tags=[f"t{n}"], subtype=f"s{n}")["id"]
    return roles


class Events:
    """Every barrier (its files and folders) and every rename, link and unlink, in order."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.seen: list[tuple[str, Any]] = []
        real_barrier, real_rename, real_unlink = fsops._barrier, os.rename, os.unlink

        def barrier(root: Path, files: list[Path], folders: set[Path]) -> None:
            self.seen.append(("barrier", ([p.name for p in files], {p.name for p in folders})))
            real_barrier(root, files, folders)

        def rename(src: Any, dst: Any, **kw: Any) -> None:
            self.seen.append(("rename", os.path.basename(str(dst))))
            real_rename(src, dst, **kw)

        def unlink(path: Any, **kw: Any) -> None:
            self.seen.append(("unlink", os.path.basename(str(path))))
            real_unlink(path, **kw)

        monkeypatch.setattr(fsops, "_barrier", barrier)
        monkeypatch.setattr(os, "rename", rename)
        monkeypatch.setattr(os, "unlink", unlink)

    def barriers(self) -> list[tuple[list[str], set[str]]]:
        return [what for kind, what in self.seen if kind == "barrier"]

    def at(self, kind: str, test: Any) -> int:
        return next(n for n, (k, what) in enumerate(self.seen) if k == kind and test(what))


def test_the_journal_is_made_durable_with_the_pre_images(store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    build(store)
    events = Events(monkeypatch)
    outcome = engine.consolidate(Store(store))
    assert outcome.stats["memories_merged"] == 1
    first, second = events.barriers()[:2]
    # the first barrier: the journal's bytes (the pre-images are links: no bytes of their own)
    assert [n for n in first[0] if n.startswith(".journal-")] and not any(n.startswith("mem_") for n in first[0])
    # the second: its name (ops/) and the pre-images' (their folders), before any memory changes
    assert "ops" in second[1] and any(n.startswith("mem_") for n in second[0])
    changed = events.at("rename", lambda name: name.startswith("mem_"))
    assert events.at("barrier", lambda what: "ops" in what[1]) < changed


def test_a_pre_image_to_copy_comes_after_the_journal_is_durable(store: Path, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    roles = build(store)
    # a second name outside the store: its pre-image is a copy (a temporary file) rather than a link
    for path in (store / "agent" / "coder").glob(f"{roles['dup0']}.*"):
        os.link(path, tmp_path / "elsewhere.json")
    written: list[str] = []
    real_write_tmp = fsops._write_tmp

    def write_tmp(handle: Any, name: str, *args: Any, **kw: Any) -> str:
        if "runs" in handle.path.parts and name.startswith("mem_"):
            written.append(name)
            journals = list((store / "ops").glob("journal-*.json"))
            assert journals, "a pre-image copied before the journal was in place"
        return real_write_tmp(handle, name, *args, **kw)

    monkeypatch.setattr(fsops, "_write_tmp", write_tmp)
    engine.consolidate(Store(store))
    assert written  # the copy was made, after the journal
    runs = list((store / "archive" / "runs").iterdir())
    assert len(runs) == 1 and (runs[0] / "manifest.json").exists()


def test_the_state_and_log_are_renamed_only_after_the_indices_barrier(store: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    build(store)
    events = Events(monkeypatch)
    outcome = engine.consolidate(Store(store))
    indexed = events.at("barrier", lambda what: index.INDEX_NAME in what[0])
    files, _ = events.barriers()[[n for n, (k, _) in enumerate(events.seen) if k == "barrier"].index(indexed)]
    # one barrier: the indices, the snapshots, the signature cache, and the bytes of state and log
    assert {lastrun.LASTRUN_NAME, opsfiles.state_path(store).name}.issubset(
        {n.split(".")[1] + ".json" if n.startswith(".state.") else n for n in files})
    assert any(n.startswith(".consolidation-log.json.") for n in files)
    state = events.at("rename", lambda name: name == "state.json")
    logged = events.at("rename", lambda name: name == log.log_path(store).name)
    names = events.at("barrier", lambda what: what[1] == {"ops"} and not what[0])
    gone = events.at("unlink", lambda name: name.startswith("journal-"))
    assert indexed < state < names and indexed < logged < names < gone
    assert [e["run_id"] for e in log.read_entries(store)] == [outcome.run_id]
    assert not list(store.rglob("*" + fsops.TMP_SUFFIX))


def test_a_session_end_pass_appends_its_signatures_durable_with_the_indices(
        store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    build(store)
    engine.consolidate(Store(store))
    add(store, summary=BASE + " again", tags=["deploy"], type="procedural", subtype="deployment")
    sig_file = Store(store).folder("agent", "coder").cache() / sigcache.SIG_NAME
    before = sig_file.stat().st_size
    events = Events(monkeypatch)
    synced: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: synced.append(os.fstat(fd).st_ino) or real_fsync(fd))
    engine.consolidate(Store(store), trigger="session_end")
    assert sig_file.stat().st_size > before  # appended in place (the same file)
    indexed = events.at("barrier", lambda what: index.INDEX_NAME in what[0])
    files, _ = events.seen[indexed][1]
    assert sigcache.SIG_NAME in files  # its fsync waits for the barrier, not one commit of its own
    assert synced.count(sig_file.stat().st_ino) == 1
