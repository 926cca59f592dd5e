"""`doctor [--fix]`: every invariant checked, each problem by code, path and severity."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from memcli.cli import app
from memcli.store import doctor
from memcli.store.formats import encode
from memcli.store.store import Store
from tests import forked
from tests.conftest import add, all_files, assert_invariants, days_ago, record, snapshot, write_memory

runner = CliRunner()


def run(store: Path, *args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, ["--store", str(store), *args])
    return result.exit_code, result.stdout, result.stderr


def report(store: Path, *args: str) -> tuple[int, dict[str, Any]]:
    code, out, err = run(store, "--json", "doctor", *args)
    return code, json.loads(out)


def codes(data: dict[str, Any]) -> set[tuple[str, str]]:
    return {(p["code"], p["path"]) for p in data["problems"]}


def indexed(store: Path) -> None:
    assert run(store, "reindex")[0] == 0


def test_a_clean_store_exits_0(store: Path) -> None:
    add(store, summary="one")
    add(store, "md", summary="two", scope="team", scope_id="backend")
    indexed(store)
    code, out, _ = run(store, "doctor")
    assert code == 0 and out.strip() == "No problem found."
    assert report(store) == (0, {"problems": [], "ok": True})


def test_doctor_writes_nothing_and_takes_no_lock(store: Path) -> None:
    add(store, summary="no index yet")
    (store / "agent" / "coder" / ".x.json.1234abcd.tmp").write_text("partial")
    before = all_files(store)
    code, _ = report(store)
    assert code == 1
    assert all_files(store) == before
    assert not (store / "ops" / ".lock").exists()


def test_index_codes(store: Path) -> None:
    a = add(store, summary="a")
    add(store, summary="b", scope_id="other")
    add(store, summary="c", scope_id="third")
    add(store, summary="d", scope_id="fourth")
    indexed(store)
    add(store, summary="dropped by hand")                       # agent/coder: misses a file
    (store / "agent" / "other" / "_index.json").write_text("{broken")
    third = store / "agent" / "third" / "_index.json"
    third.write_bytes(third.read_bytes().replace(b'"entry_count":1', b'"entry_count":7'))
    (store / "agent" / "fourth" / "_index.json").unlink()
    add(store, summary="no index at all", scope="team", scope_id="t")
    code, data = report(store)
    assert code == 1
    found = codes(data)
    assert ("index_stale", "agent/coder/_index.json") in found
    assert ("index_unreadable", "agent/other/_index.json") in found
    assert ("index_count", "agent/third/_index.json") in found
    assert ("index_missing", "agent/fourth/_index.json") in found
    assert ("index_missing", "team/t/_index.json") in found
    assert all(p["severity"] == "error" and p["fixed"] is False for p in data["problems"])
    (store / "agent" / "coder" / f"{a['id']}.json").unlink()  # listed but gone
    _, data = report(store)
    stale = next(p for p in data["problems"] if p["path"] == "agent/coder/_index.json")
    assert "lists 1 file(s)" in stale["message"] and "misses 1 file(s)" in stale["message"]


def test_fix_rebuilds_indices_removes_tmp_files_and_exits_0(store: Path) -> None:
    add(store, summary="a")
    indexed(store)
    add(store, summary="dropped by hand")
    tmp = store / "agent" / "coder" / ".mem_x.json.1234abcd.tmp"
    tmp.write_text("partial")
    code, data = report(store, "--fix")
    assert code == 0 and data["ok"] is True
    assert {(p["code"], p["fixed"]) for p in data["problems"]} == {("index_stale", True), ("tmp_file", True)}
    assert not tmp.exists()
    assert_invariants(store)
    assert report(store) == (0, {"problems": [], "ok": True})


def test_fix_recovers_a_pending_journal(store: Path) -> None:
    for n in range(3):
        add(store, summary=f"old fact number {n} that nobody used", access_count=0, tags=[f"t{n}"])
    indexed(store)
    before = snapshot(store)
    env = {**os.environ, "MEMCLI_CRASH_AT": "20"}
    crashed = forked.run(["--store", str(store), "consolidate"], env=env)  # `python -m memcli`, forked
    assert crashed.returncode == 70
    code, data = report(store)
    assert code == 1 and "journal_pending" in {c for c, _ in codes(data)}
    code, data = report(store, "--fix")
    assert code == 0, data
    assert any(p["code"] == "journal_pending" and p["fixed"] for p in data["problems"])
    assert snapshot(store) == before  # rolled back: it died before committing
    assert_invariants(store)


def test_a_running_writer_makes_leftovers_warnings(store: Path) -> None:
    (store / "ops" / "journal-run_X.json").write_text('{"run_id": "run_X", "phase": "applying", "files": []}')
    with Store(store).lock(1):
        found = doctor.diagnose(Store(store))
    assert [(p.code, p.severity) for p in found.problems] == [("journal_pending", "warning")]
    assert "holds the store lock" in found.problems[0].message
    assert [p.severity for p in doctor.diagnose(Store(store)).problems] == ["error"]


def test_duplicate_ids_dangling_links_and_live_archived(store: Path) -> None:
    dup = record(summary="twice")
    write_memory(store, dup)
    write_memory(store, {**dup, "scope_id": "other"})
    linked = add(store, summary="links", supersedes=["mem_GONE"], promoted_to="mem_ALSOGONE")
    both = add(store, summary="both live and archived")
    archived = {**both, "archived_at": days_ago(3), "archive_reason": "stale", "archived_from": "agent/coder",
                "archive_run_id": "run_A"}
    (store / "archive" / f"{both['id']}.json").write_bytes(encode(archived, "json"))
    (store / "archive" / "mem_NOFIELDS.json").write_bytes(encode(record(id="mem_NOFIELDS"), "json"))
    indexed(store)
    code, data = report(store)
    by_code = {p["code"]: p for p in data["problems"]}
    assert code == 1
    assert {p["path"] for p in data["problems"] if p["code"] == "duplicate_id"} == {
        f"agent/coder/{dup['id']}.json", f"agent/other/{dup['id']}.json"}
    assert by_code["dangling_link"]["path"] == f"agent/coder/{linked['id']}.json"
    assert "supersedes -> mem_GONE" in by_code["dangling_link"]["message"]
    assert "promoted_to -> mem_ALSOGONE" in by_code["dangling_link"]["message"]
    assert by_code["archived_and_live"]["severity"] == "warning"
    assert by_code["archive_fields"]["path"] == "archive/mem_NOFIELDS.json"
    code, data = report(store, "--fix")  # nothing here can be fixed without guessing
    assert code == 1 and not any(p["fixed"] for p in data["problems"])


def test_ops_files_that_do_not_parse(store: Path) -> None:
    (store / "ops" / "consolidation-log.json").write_text("{not json")
    (store / "ops" / "state.json").write_text("[1, 2]")
    (store / "ops" / "review-queue.json").write_text('{"items": 3}')
    _, data = report(store)
    assert codes(data) == {("ops_unreadable", "ops/consolidation-log.json"), ("ops_unreadable", "ops/state.json"),
                           ("ops_unreadable", "ops/review-queue.json")}


def test_bad_files_are_reported_with_store_scan_codes(store: Path, tmp_path: Path) -> None:
    folder = store / "agent" / "coder"
    add(store, summary="good")
    (folder / "mem_BROKEN.json").write_text("{oops")
    (folder / "mem_WRONG.json").write_bytes(encode(record(id="mem_OTHER"), "json"))
    (folder / "mem_LINK.json").symlink_to(tmp_path / "elsewhere.json")
    with open(folder / "mem_HUGE.json", "wb") as handle:
        handle.truncate(10 * 1024 * 1024 + 1)
    add(store, summary="no zone", created_at="2026-08-01T00:00:00")
    indexed(store)
    code, data = report(store)
    found = codes(data)
    assert ("unreadable", "agent/coder/mem_BROKEN.json") in found
    assert ("invalid", "agent/coder/mem_WRONG.json") in found
    assert ("symlink", "agent/coder/mem_LINK.json") in found
    assert ("too_large", "agent/coder/mem_HUGE.json") in found
    assert "no_timezone" in {c for c, _ in found}
    assert code == 1
    assert next(p for p in data["problems"] if p["code"] == "no_timezone")["severity"] == "warning"


def test_warnings_alone_exit_0(store: Path) -> None:
    add(store, summary="no zone", created_at="2026-08-01T00:00:00")
    indexed(store)
    code, out, _ = run(store, "doctor")
    assert code == 0
    assert out.startswith("warning no_timezone")
    assert "0 error(s) left, 1 warning(s)" in out


def test_doctor_in_a_real_process(store: Path) -> None:
    add(store, summary="a")
    result = subprocess.run([sys.executable, "-m", "memcli", "--store", str(store), "doctor"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 1 and "index_missing" in result.stdout
    fixed = subprocess.run([sys.executable, "-m", "memcli", "--store", str(store), "doctor", "--fix"],
                           capture_output=True, text=True, timeout=60)
    assert fixed.returncode == 0 and "[fixed]" in fixed.stdout


def test_something_that_is_not_a_memory_folder_is_a_warning(store: Path, tmp_path: Path) -> None:
    (store / "agent" / "bad name").mkdir(parents=True)
    (store / "agent" / "stray.json").write_text("{}")
    (tmp_path / "real").mkdir()
    (store / "team").mkdir()
    (store / "team" / "linked").symlink_to(tmp_path / "real")
    code, data = report(store)
    assert code == 0
    assert {(p["code"], p["path"], p["severity"]) for p in data["problems"]} == {
        ("bad_folder", "agent/bad name", "warning"), ("bad_folder", "agent/stray.json", "warning"),
        ("bad_folder", "team/linked", "warning")}


def test_an_index_without_the_sorted_text_length_is_not_stale_but_a_wrong_one_is(store: Path) -> None:
    """`sort_len` (pair search's length of a text's sorted tokens) came after the other cached
    fields: an index written before it lacks it, which is no fault (the text is read
    instead); a value that is not the file's is out of date."""
    add(store, summary="the worker restarts the queue")
    indexed(store)
    path = store / "agent" / "coder" / "_index.json"
    index = json.loads(path.read_text())
    assert index["entries"][0]["sort_len"] == len("queue restarts the the worker")
    del index["entries"][0]["sort_len"]
    path.write_text(json.dumps(index))
    assert report(store) == (0, {"problems": [], "ok": True})
    index["entries"][0]["sort_len"] = 3
    path.write_text(json.dumps(index))
    code, data = report(store)
    assert code == 1 and codes(data) == {("index_stale", "agent/coder/_index.json")}
