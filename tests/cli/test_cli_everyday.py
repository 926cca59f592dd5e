"""Everyday commands: list (limit, sort, since, ellipsis, no cache fields), ids by unique
prefix, edit, reindex counts, add's scope check, log order and marks, status on a new store."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memcli.cli import app
from tests.conftest import add, days_ago, load

runner = CliRunner()


def run(store: Path, *args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    result = runner.invoke(app, ["--store", str(store), *args], env=env)
    return result.exit_code, result.stdout, result.stderr


def listed(store: Path, *args: str) -> list[dict[str, object]]:
    code, out, err = run(store, "list", "--json", *args)
    assert code == 0, err
    return json.loads(out)["memories"]


# ---------------------------------------------------------------- list


@pytest.fixture
def three(store: Path) -> list[dict[str, object]]:
    return [add(store, created_at=days_ago(30), access_count=9, last_accessed=days_ago(20)),
            add(store, created_at=days_ago(10), access_count=1, last_accessed=days_ago(1)),
            add(store, created_at=days_ago(3), access_count=4, last_accessed=days_ago(9), scope_id="reviewer")]


def test_list_sorts(store: Path, three: list[dict[str, object]]) -> None:
    old, mid, new = (m["id"] for m in three)
    assert [m["id"] for m in listed(store)] == [mid, old, new]  # folders in order, newest first in each
    assert [m["id"] for m in listed(store, "--sort", "created")] == [new, mid, old]
    assert [m["id"] for m in listed(store, "--sort", "uses")] == [old, new, mid]
    assert [m["id"] for m in listed(store, "--sort", "accessed")] == [mid, new, old]
    code, out, _ = run(store, "list", "--sort", "size")
    assert code == 1 and "unknown sort 'size'" in out + run(store, "list", "--sort", "size")[2]


def test_list_limit(store: Path, three: list[dict[str, object]]) -> None:
    code, out, _ = run(store, "list", "--json", "--limit", "2", "--sort", "created")
    data = json.loads(out)
    assert code == 0 and data["count"] == 2 and data["matched"] == 3
    assert [m["id"] for m in data["memories"]] == [three[2]["id"], three[1]["id"]]
    code, out, _ = run(store, "list", "--limit", "2")
    assert code == 0 and out.rstrip().endswith("2 of 3 memories (--limit 0 for all)")
    code, out, _ = run(store, "list", "--limit", "3")
    assert code == 0 and out.rstrip().endswith("\n3 memories")
    assert len(listed(store, "--limit", "0")) == 3
    assert run(store, "list", "--limit", "-1")[0] == 1


def test_list_since(store: Path, three: list[dict[str, object]]) -> None:
    ids = [m["id"] for m in three]
    assert {m["id"] for m in listed(store, "--since", "10d")} == set(ids[1:])  # 10 days ago exactly: in
    assert {m["id"] for m in listed(store, "--since", "9d")} == {ids[2]}
    assert {m["id"] for m in listed(store, "--since", days_ago(10)[:10])} == set(ids[1:])
    assert {m["id"] for m in listed(store, "--since", days_ago(3))} == {ids[2]}
    assert {m["id"] for m in listed(store, "--since", "72h")} == {ids[2]}
    code, _, err = run(store, "list", "--since", "last tuesday")
    assert code == 1 and "--since 'last tuesday'" in err


def test_list_cuts_summaries_with_an_ellipsis_and_keeps_cache_fields_out(store: Path) -> None:
    long = add(store, summary="word " * 40)["id"]
    short = add(store, summary="a" * 79)["id"]
    rows = {m["id"]: m for m in listed(store)}
    assert str(rows[long]["summary"]).endswith("…") and len(str(rows[long]["summary"])) == 80
    assert rows[short]["summary"] == "a" * 79
    for row in rows.values():
        assert not {"size", "mtime_ns", "content_hash", "details_len", "text_len", "run_hash", "sig"} & set(row)
        assert {"id", "folder", "type", "summary", "tags", "access_count", "created_at"} <= set(row)
    code, out, _ = run(store, "list", env={"COLUMNS": "60"})
    assert code == 0 and all(len(line) <= 60 for line in out.splitlines())
    cut = [line for line in out.splitlines() if line.startswith("  word")]
    assert len(cut) == 1 and cut[0].endswith("…") and len(cut[0]) == 60


# ---------------------------------------------------------------- ids by prefix


def test_a_unique_prefix_names_a_memory(store: Path) -> None:
    mem = add(store, id="mem_01ABCDEF0000000000000000AA")
    add(store, id="mem_01ABCDXY0000000000000000BB")
    for prefix in ("mem_01ABCDE", "01ABCDEF", "mem_01ABCDEF0000000000000000AA", mem["id"] + ".json"):
        code, out, err = run(store, "show", prefix, "--json")
        assert code == 0 and json.loads(out)["memory"]["id"] == mem["id"], (prefix, err)
    code, out, err = run(store, "access", "01ABCDE")
    assert code == 0 and mem["id"] in out


def test_an_ambiguous_prefix_lists_the_candidates(store: Path) -> None:
    a = add(store, id="mem_01ABCDEF0000000000000000AA")["id"]
    b = add(store, id="mem_01ABCDXY0000000000000000BB", scope_id="reviewer")["id"]
    code, _, err = run(store, "show", "01ABCD")
    assert code == 1 and "'01ABCD' is ambiguous: 2 memories start with it" in err
    assert f"{a}  agent/coder" in err and f"{b}  agent/reviewer" in err
    code, out, _ = run(store, "show", "01ABCD", "--json")
    assert code == 1 and a in json.loads(out)["error"]
    code, _, err = run(store, "show", "01A")
    assert code == 1 and "too short a prefix" in err
    code, _, err = run(store, "show", "01ZZZZ")
    assert code == 1 and "no memory 01ZZZZ" in err


def test_prefixes_reach_archived_memories_and_runs(store: Path) -> None:
    gone = add(store, access_count=0, last_accessed=None, created_at=days_ago(200))["id"]
    add(store)
    run_id = json.loads(run(store, "consolidate", "--json")[1])["run_id"]
    code, out, _ = run(store, "show", gone[:14], "--json")
    assert code == 0 and json.loads(out)["archived"] is True
    code, out, _ = run(store, "log", "--run", run_id[4:16], "--json")
    assert code == 0 and json.loads(out)["entries"][0]["run_id"] == run_id
    code, out, _ = run(store, "undo", run_id[:16])
    assert code == 0 and out.startswith(f"Undid {run_id}")


# ---------------------------------------------------------------- edit


def editor(tmp_path: Path, body: str, name: str = "ed") -> str:
    """A small editor program: a Python script that changes the file it is given."""
    script = tmp_path / f"{name}.py"
    script.write_text("import sys, pathlib\np = pathlib.Path(sys.argv[1])\ntext = p.read_text()\n" + body)
    wrapper = tmp_path / name
    wrapper.write_text(f"#!/bin/sh\nexec {sys.executable} {script} \"$@\"\n")
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IEXEC)
    return str(wrapper)


def test_edit_saves_checks_and_reindexes(store: Path, tmp_path: Path) -> None:
    mem = add(store, summary="Deploy to staging first")
    run(store, "reindex")
    ed = editor(tmp_path, "p.write_text(text.replace('staging first', 'staging, then canary'))\n")
    code, out, err = run(store, "edit", mem["id"][:14], env={"EDITOR": ed})
    assert code == 0 and "Saved agent/coder/" in out, err
    assert load(store / "agent" / "coder" / f"{mem['id']}.json")["content"]["summary"] == "Deploy to staging, then canary"
    assert listed(store)[0]["summary"] == "Deploy to staging, then canary"  # the index follows
    code, out, _ = run(store, "doctor")
    assert code == 0 and "No problem found" in out
    assert not list((store / ".cache" / "edit").iterdir())  # the draft is gone once saved


@pytest.mark.parametrize(("body", "reason"), [
    ("p.write_text('{not json')\n", "not valid JSON"),
    ("p.write_text(text.replace('\"semantic\"', '\"dream\"'))\n", "type"),
    ("p.write_text(text.replace('\"coder\"', '\"reviewer\"'))\n", "scope"),
    ("import re\np.write_text(re.sub(r'mem_[0-9A-Z]+', 'mem_01OTHERID0000000000000000', text, count=1))\n", "id"),
])
def test_edit_refuses_an_invalid_record_with_the_reason(store: Path, tmp_path: Path, body: str,
                                                        reason: str) -> None:
    mem = add(store, summary="Deploy to staging first")
    path = store / "agent" / "coder" / f"{mem['id']}.json"
    before = path.read_bytes()
    code, _, err = run(store, "edit", mem["id"], env={"EDITOR": editor(tmp_path, body)})
    assert code == 1 and "was not changed" in err and reason in err, err
    assert path.read_bytes() == before
    assert (store / ".cache" / "edit" / path.name).exists() and str(store / ".cache" / "edit") in err


def test_edit_without_a_change_or_with_a_failing_editor(store: Path, tmp_path: Path) -> None:
    mem = add(store)
    path = store / "agent" / "coder" / f"{mem['id']}.json"
    before = path.stat().st_mtime_ns
    code, out, _ = run(store, "edit", mem["id"], env={"EDITOR": editor(tmp_path, "pass\n")})
    assert code == 0 and "No change to" in out and path.stat().st_mtime_ns == before
    code, _, err = run(store, "edit", mem["id"], env={"EDITOR": editor(tmp_path, "sys.exit(3)\n", "bad")})
    assert code == 1 and "exited with 3; nothing was changed" in err
    code, _, err = run(store, "edit", mem["id"], env={"EDITOR": str(tmp_path / "nope"), "VISUAL": ""})
    assert code == 1 and "cannot run the editor" in err


def test_edit_of_a_markdown_memory(store: Path, tmp_path: Path) -> None:
    mem = add(store, fmt="md", details="Body text here")
    ed = editor(tmp_path, "p.write_text(text.replace('Body text here', 'A better body'))\n")
    code, _, err = run(store, "edit", mem["id"], env={"EDITOR": ed})
    assert code == 0, err
    assert load(store / "agent" / "coder" / f"{mem['id']}.md")["content"]["details"] == "A better body"


# ---------------------------------------------------------------- smaller things


def test_reindex_counts_live_memories(store: Path) -> None:
    add(store)
    add(store, scope_id="reviewer")
    add(store, access_count=0, last_accessed=None, created_at=days_ago(200))
    run(store, "consolidate")
    code, out, _ = run(store, "reindex")
    assert code == 0 and "Reindexed 3 folders: 2 memories (and 1 archived)" in out  # global/ too
    code, out, _ = run(store, "reindex", "--json")
    data = json.loads(out)
    assert data["memories"] == 2 and data["archived"] == 1


def test_add_refuses_a_scope_id_for_global(store: Path) -> None:
    code, _, err = run(store, "add", "--type", "semantic", "--scope", "global", "--scope-id", "foo",
                       "--summary", "x")
    assert code == 1 and "scope global takes no --scope-id (got 'foo')" in err
    assert not list((store / "global").glob("mem_*"))
    code, out, _ = run(store, "add", "--type", "semantic", "--scope", "global", "--scope-id", "global",
                       "--summary", "x")
    assert code == 0 and out.startswith("mem_")


def test_log_is_newest_first_marks_undone_runs_and_counts_right(store: Path) -> None:
    add(store)
    add(store, access_count=0, last_accessed=None, created_at=days_ago(200))
    first = json.loads(run(store, "consolidate", "--json")[1])["run_id"]
    code, out, _ = run(store, "log")
    assert code == 0 and out.startswith("Last 1 run, newest first:")
    undo = json.loads(run(store, "undo", first, "--json")[1])["run_id"]
    code, out, _ = run(store, "log")
    assert out.startswith("Last 2 runs, newest first:")
    assert out.index(undo) < out.index(first) and f"{first}  2026-11-22 00:00  manual  [undone]" in out
    assert f"  undone by {undo}" in out and "[undone]" not in out.split(first)[0]
    entries = json.loads(run(store, "log", "--json")[1])["entries"]
    assert [e["run_id"] for e in entries] == [undo, first] and entries[1]["undone_by"] == undo
    assert entries[0]["undone_by"] is None


def test_status_of_a_new_store_is_not_overdue(store: Path) -> None:
    code, out, _ = run(store, "status", env={"COLUMNS": "200"})
    assert code == 0 and "overdue" not in out.lower()
    assert "Weekly pass ('0 0 * * 0', local time): not run yet" in out
    data = json.loads(run(store, "status", "--json")[1])
    assert data["weekly"]["overdue"] is False and data["weekly"]["never_run"] is True


def test_list_over_a_closed_stdin_and_no_store_env(store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """MEMCLI_STORE alone: hints need no --store, since the environment names the store."""
    monkeypatch.setenv("MEMCLI_STORE", str(store))
    add(store, access_count=0, last_accessed=None, created_at=days_ago(200))
    result = runner.invoke(app, ["consolidate", "--dry-run"], env={"COLUMNS": "200", **os.environ})
    assert result.exit_code == 0 and "Apply with: memcli consolidate" in result.stdout
