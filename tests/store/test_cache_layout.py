"""SPEC 1: a memory folder holds its memories and `_index.json` only; every other derived
file lives under `.cache/folders/<folder>/`, and caches an older memcli left beside the
memories move there on first use."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from memcli.cli import app
from memcli.consolidate import engine
from memcli.store import lastrun, paircache, sigcache
from memcli.store.store import Store
from tests.conftest import add

DUP_TEXT = "Restart the payments worker after every config change to the staging cluster"

runner = CliRunner()


def folder_files(store: Path) -> dict[str, list[str]]:
    return {str(p.relative_to(store)): sorted(f.name for f in p.iterdir() if f.is_file())
            for p in [store / "agent" / "coder", store / "archive"]}


def doctor(store: Path, *args: str) -> dict:
    result = runner.invoke(app, ["--store", str(store), "--json", "doctor", *args])
    return json.loads(result.stdout)


def test_a_run_leaves_only_memories_and_the_index_in_memory_folders(store: Path) -> None:
    add(store, summary=DUP_TEXT)
    add(store, summary=DUP_TEXT + ".")
    add(store, summary="another note about the release train", access_count=0)
    engine.consolidate(Store(store))
    for rel, names in folder_files(store).items():
        assert all(n == "_index.json" or n.startswith("mem_") for n in names), (rel, names)
    cache = store / ".cache" / "folders" / "agent" / "coder"
    assert (cache / lastrun.LASTRUN_NAME).is_file() and (cache / sigcache.SIG_NAME).is_file()
    assert lastrun.load_lastrun(cache) is not None


def test_old_caches_beside_the_memories_move_on_the_first_writing_command(store: Path) -> None:
    add(store, summary="a note")
    engine.consolidate(Store(store))
    cache = store / ".cache" / "folders" / "agent" / "coder"
    folder = store / "agent" / "coder"
    for name in (lastrun.LASTRUN_NAME, sigcache.SIG_NAME):  # as an older memcli left them
        (cache / name).rename(folder / name)
    snap_bytes = (folder / lastrun.LASTRUN_NAME).read_bytes()
    (folder / "notes.txt").write_text("a person's file")
    found = {(p["code"], p["path"], p["severity"]) for p in doctor(store)["problems"]}
    assert found == {("stray_file", "agent/coder/_lastrun.bin", "warning"),
                     ("stray_file", "agent/coder/_minhash.bin", "warning"),
                     ("stray_file", "agent/coder/notes.txt", "warning")}
    result = runner.invoke(app, ["--store", str(store), "add", "--type", "semantic", "--scope", "agent",
                                 "--scope-id", "coder", "--summary", "something else entirely"])
    assert result.exit_code == 0, result.output
    assert not (folder / lastrun.LASTRUN_NAME).exists() and not (folder / sigcache.SIG_NAME).exists()
    assert (cache / lastrun.LASTRUN_NAME).read_bytes() == snap_bytes  # moved whole, not rebuilt
    assert (folder / "notes.txt").read_text() == "a person's file"  # not ours: left in place
    report = doctor(store)
    assert [(p["code"], p["path"]) for p in report["problems"]] == [("stray_file", "agent/coder/notes.txt")]
    assert report["ok"]


def test_doctor_fix_moves_an_old_cache_and_a_newer_one_wins(store: Path) -> None:
    add(store, summary="a note")
    engine.consolidate(Store(store))
    cache = store / ".cache" / "folders" / "agent" / "coder"
    newer = (cache / lastrun.LASTRUN_NAME).read_bytes()
    (store / "agent" / "coder" / lastrun.LASTRUN_NAME).write_bytes(b"old and stale")
    (store / "archive" / paircache.PAIRS_NAME).write_bytes(b"{}")
    report = doctor(store, "--fix")
    assert {p["path"] for p in report["problems"] if p["fixed"]} == {"agent/coder/_lastrun.bin",
                                                                    "archive/_pairs.json"}
    assert (cache / lastrun.LASTRUN_NAME).read_bytes() == newer
    assert (store / ".cache" / "folders" / "archive" / paircache.PAIRS_NAME).read_bytes() == b"{}"
    assert doctor(store)["problems"] == []


def test_the_archive_keeps_runs_and_suffixed_names_without_a_report(store: Path) -> None:
    (store / "archive" / "runs" / "run_X").mkdir(parents=True)
    (store / "archive" / "mem_A@run_B.json").write_text("{}")
    (store / "archive" / "mem_A.txt").write_text("x")
    paths = {p["path"] for p in doctor(store)["problems"] if p["code"] == "stray_file"}
    assert paths == {"archive/mem_A.txt"}
