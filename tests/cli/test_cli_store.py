"""Everyday commands through the CLI: exit codes, output, JSON purity, the quick check."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from rapidfuzz import fuzz
from rapidfuzz.utils import default_process
from typer.testing import CliRunner

from memcli.cli import app
from tests.conftest import add, assert_invariants, load, record, write_memory

runner = CliRunner()
BASE = ("Run the database migrations on staging first, check the error dashboards for ten minutes, "
        "then promote the same build to production with the deploy script")


def run(*args: str, store: Path | None = None, input: str | None = None) -> tuple[int, str, str]:
    argv = (["--store", str(store)] if store else []) + list(args)
    result = runner.invoke(app, argv, input=input)
    return result.exit_code, result.stdout, result.stderr


def add_args(summary: str, *extra: str) -> list[str]:
    return ["add", "--type", "procedural", "--subtype", "deployment", "--scope", "agent",
            "--scope-id", "coder", "--tag", "deploy", "--summary", summary, *extra]


def test_init_creates_a_store(tmp_path: Path) -> None:
    code, out, _ = run("init", str(tmp_path / "s"))
    assert code == 0 and "Created" in out
    assert (tmp_path / "s" / "memcli.toml").is_file() and (tmp_path / "s" / "ops").is_dir()
    code, out, _ = run("init", str(tmp_path / "s"))
    assert code == 0 and "Already a store" in out


def test_outside_a_store_every_command_says_run_init(cwd: Path) -> None:
    for argv in (["list"], ["show", "mem_x"], ["consolidate"], ["stats"], ["access", "mem_x"]):
        code, _, err = run(*argv)
        assert code == 1 and "run `memcli init`" in err, argv


def test_usage_error_exits_2(store: Path) -> None:
    code, _, _ = run("add", "--bogus", store=store)
    assert code == 2


def test_add_prints_the_id_and_writes_the_file(store: Path) -> None:
    code, out, _ = run(*add_args(BASE), store=store)
    mem_id = out.strip()
    assert code == 0 and mem_id.startswith("mem_") and len(mem_id) == 30
    data = load(store / "agent" / "coder" / f"{mem_id}.json")
    assert data["created_by"] == "agent:coder" and data["tags"] == ["deploy"]
    assert data["created_at"] == "2026-11-22T00:00:00Z"
    assert_invariants(store)


def test_add_markdown_with_details_from_stdin(store: Path) -> None:
    code, out, _ = run(*add_args("short", "--format", "md", "--details", "-"), store=store,
                       input="A long body\nover lines\n")
    path = store / "agent" / "coder" / f"{out.strip()}.md"
    assert code == 0 and load(path)["content"]["details"] == "A long body\nover lines"


def test_author_defaults(store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _, out, _ = run("add", "--type", "semantic", "--scope", "global", "--summary", "s", store=store)
    assert load(store / "global" / f"{out.strip()}.json")["created_by"] == "USER"
    monkeypatch.setenv("MEMCLI_AUTHOR", "agent:bot")
    _, out, _ = run("add", "--type", "semantic", "--scope", "global", "--summary", "t", store=store)
    assert load(store / "global" / f"{out.strip()}.json")["created_by"] == "agent:bot"


@pytest.mark.parametrize(("flag", "value", "message"), [
    ("--type", "dream", "unknown type"),
    ("--priority", "urgent", "unknown priority"),
    ("--format", "xml", "unknown format"),
])
def test_add_bad_values_exit_1(store: Path, flag: str, value: str, message: str) -> None:
    args = add_args("x")
    if flag in args:
        args[args.index(flag) + 1] = value
    else:
        args += [flag, value]
    code, _, err = run(*args, store=store)
    assert code == 1 and message in err
    assert not (store / "agent").exists()


def test_add_needs_scope_id_for_agent_scope(store: Path) -> None:
    code, _, err = run("add", "--type", "semantic", "--scope", "agent", "--summary", "s", store=store)
    assert code == 1 and "--scope-id is required" in err


def _similarity(a: str, b: str) -> float:
    return fuzz.token_sort_ratio(default_process(a), default_process(b)) / 100


def test_quick_check_at_or_above_095_updates_the_existing_memory(
        store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = run(*add_args(BASE, "--tag", "prod", "--tag", "db", "--tag", "ci", "--tag", "ops"),
                store=store)[1].strip()
    near = BASE.replace("ten minutes", "ten minute")
    assert _similarity(BASE, near) >= 0.95
    monkeypatch.setenv("MEMCLI_NOW", "2026-11-23T00:00:00Z")
    tags = ["--tag", "prod", "--tag", "db", "--tag", "ci", "--tag", "ops", "--tag", "new"]
    code, out, err = run(*add_args(near, *tags), store=store)  # tags 5/6 > 0.80
    assert code == 0 and out.strip() == first and "updated it" in err
    files = list((store / "agent" / "coder").glob("mem_*"))
    data = load(files[0])
    assert len(files) == 1 and data["tags"] == ["deploy", "prod", "db", "ci", "ops", "new"]
    assert data["updated_at"] == "2026-11-23T00:00:00Z" and data["content"]["summary"] == BASE


def test_quick_check_between_085_and_095_writes_and_flags(store: Path) -> None:
    first = run(*add_args(BASE), store=store)[1].strip()
    similar = BASE.replace("check the error dashboards for ten minutes", "watch the error dashboards for a while")
    assert 0.85 <= _similarity(BASE, similar) < 0.95
    code, out, _ = run(*add_args(similar), store=store)
    assert code == 0 and out.strip() != first
    state = json.loads((store / "ops" / "state.json").read_text())
    assert state["flagged"][0]["ids"] == [first, out.strip()]
    assert state["flagged"][0]["reason"] == "similar_on_save"


def test_quick_check_below_085_is_a_plain_write(store: Path) -> None:
    run(*add_args(BASE), store=store)
    other = "Rotate the API keys every quarter and store them in the vault, never in the repository"
    assert _similarity(BASE, other) < 0.85
    run(*add_args(other), store=store)
    assert len(list((store / "agent" / "coder").glob("mem_*"))) == 2
    assert not (store / "ops" / "state.json").exists()


@pytest.mark.parametrize(("extra", "reason"), [
    (["--created-by", "agent:other"], "different_authors"),
    (["--priority", "critical"], "protected"),
])
def test_quick_check_never_updates_across_authors_or_protection(
        store: Path, extra: list[str], reason: str) -> None:
    first = run(*add_args(BASE), store=store)[1].strip()
    code, out, _ = run(*add_args(BASE, *extra), store=store)
    assert code == 0 and out.strip() != first
    flagged = json.loads((store / "ops" / "state.json").read_text())["flagged"]
    assert [f["reason"] for f in flagged] == [reason]


def test_quick_check_guard_keeps_a_contradiction(store: Path) -> None:
    run(*add_args("The request timeout of the billing API is 30 seconds"), store=store)
    code, out, err = run(*add_args("The request timeout of the billing API is 60 seconds"), store=store)
    assert len(list((store / "agent" / "coder").glob("mem_*"))) == 2
    assert "guard:" in json.loads((store / "ops" / "state.json").read_text())["flagged"][0]["reason"]


def test_show_and_json_output_is_only_json(store: Path) -> None:
    data = add(store, "md", details="body")
    code, out, _ = run("show", data["id"], "--json", store=store)
    parsed = json.loads(out)
    assert code == 0 and parsed["memory"] == data and parsed["archived"] is False
    code, out, _ = run("show", data["id"], store=store)
    assert data["id"] in out and "body" in out


def test_show_missing_and_bad_ids(store: Path) -> None:
    code, out, _ = run("show", "mem_nothere", "--json", store=store)
    assert code == 1 and json.loads(out) == {"error": "no memory mem_nothere in this store (see `memcli list`)"}
    code, _, err = run("show", "../../etc/passwd", store=store)
    assert code == 1 and "bad memory id" in err


def test_list_filters(store: Path) -> None:
    a = add(store, tags=["deploy", "staging"])
    b = add(store, type="procedural", subtype="deployment", tags=["deploy"])
    c = add(store, scope="team", scope_id="backend")
    def ids(*argv: str) -> list[str]:
        code, out, _ = run("list", "--json", *argv, store=store)
        assert code == 0
        return sorted(m["id"] for m in json.loads(out)["memories"])
    assert ids() == sorted([a["id"], b["id"], c["id"]])
    assert ids("--scope", "team") == [c["id"]]
    assert ids("--scope", "agent", "--scope-id", "coder", "--type", "procedural") == [b["id"]]
    assert ids("--subtype", "deployment") == [b["id"]]
    assert ids("--tag", "deploy", "--tag", "staging") == [a["id"]]
    assert ids("--archived") == []


def test_list_reports_bad_files_on_stderr_and_exits_0(store: Path) -> None:
    good = add(store)
    (store / "agent" / "coder" / "mem_bad.json").write_text("{")
    code, out, err = run("list", "--json", store=store)
    assert code == 0 and [m["id"] for m in json.loads(out)["memories"]] == [good["id"]]
    assert "agent/coder/mem_bad.json: not valid JSON" in err


def test_common_options_after_the_command(store: Path) -> None:
    add(store)
    code, out, _ = run("list", "--json", "--store", str(store))
    assert code == 0 and json.loads(out)["count"] == 1


def test_access_counts_a_use(store: Path) -> None:
    data = add(store, access_count=2)
    code, out, _ = run("access", data["id"], "--json", store=store)
    assert code == 0 and json.loads(out) == {"id": data["id"], "access_count": 3,
                                             "last_accessed": "2026-11-22T00:00:00Z"}
    assert_invariants(store)


def test_reindex_rebuilds_every_index(store: Path) -> None:
    add(store)
    add(store, scope="team", scope_id="backend")
    code, out, _ = run("reindex", "--json", store=store)
    assert code == 0 and json.loads(out)["folders"] == {"agent/coder": 1, "team/backend": 1, "global": 0,
                                                        "archive": 0}
    assert_invariants(store)


def test_lock_held_exits_75(store: Path) -> None:
    code = ("import sys; from filelock import FileLock\n"
            f"l = FileLock({str(store / 'ops' / '.lock')!r}); l.acquire(); print('held', flush=True)\n"
            "sys.stdin.read()\n")
    holder = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        code_, _, err = run(*add_args("x", "--wait", "0.1"), store=store)
        assert code_ == 75 and "locked by another memcli process" in err
    finally:
        holder.communicate("")


def test_real_subprocess_entry_point(store: Path) -> None:
    write_memory(store, record())
    env = {**os.environ, "MEMCLI_NOW": "2026-11-22T00:00:00Z"}
    result = subprocess.run([sys.executable, "-m", "memcli", "--store", str(store), "list", "--json"],
                            capture_output=True, text=True, env=env)
    assert result.returncode == 0 and json.loads(result.stdout)["count"] == 1
    result = subprocess.run([sys.executable, "-m", "memcli", "--help"], capture_output=True, text=True)
    assert result.returncode == 0 and "consolidate" in result.stdout


def test_list_is_newest_first_within_each_folder(store: Path) -> None:
    old = add(store, created_at="2026-01-01T00:00:00Z")
    new = add(store, created_at="2026-06-01T00:00:00Z")
    team = add(store, scope="team", scope_id="backend")
    _, out, _ = run("list", "--json", store=store)
    assert [m["id"] for m in json.loads(out)["memories"]] == [new["id"], old["id"], team["id"]]


def test_reindex_reports_duplicate_ids_and_keeps_going(store: Path) -> None:
    data = add(store)
    write_memory(store, {**data, "scope": "team", "scope_id": "backend"})
    other = add(store)
    code, out, err = run("reindex", "--json", store=store)
    assert code == 0 and json.loads(out)["folders"]["agent/coder"] == 2
    assert f"agent/coder/{data['id']}.json: duplicate id" in err
    assert f"team/backend/{data['id']}.json: duplicate id" in err
    assert other["id"] not in err
    assert_invariants(store)


def test_add_names_a_broken_neighbour_by_path_and_goes_on(store: Path) -> None:
    write_memory(store, record(type="procedural", subtype="deployment", tags=["deploy"], summary=BASE))
    bad = store / "agent" / "coder" / "mem_bad.json"
    bad.write_text("{broken")
    code, out, err = run(*add_args(BASE + " today"), store=store)
    assert code == 0 and out.strip().startswith("mem_")
    assert "agent/coder/mem_bad.json: not valid JSON" in err and bad.read_text() == "{broken"


def _index_entries(store: Path) -> list[dict[str, object]]:
    return list(json.loads((store / "agent" / "coder" / "_index.json").read_text())["entries"])


def test_add_splices_its_entry_into_an_index_that_matched_the_folder(
        store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from memcli.store.store import Store

    for n in range(5):
        run(*add_args(f"fact {n} about rack {n * 31}"), store=store)
    before = _index_entries(store)
    calls: list[str] = []
    with monkeypatch.context() as patch:
        patch.setattr(Store, "refresh_index", lambda self, folder: calls.append(folder.rel))
        code, out, _ = run(*add_args("a new fact about the cooling of rack 7"), store=store)
    assert code == 0 and calls == []  # spliced, no rescan
    after = _index_entries(store)
    assert [e["id"] for e in after] == sorted([*(e["id"] for e in before), out.strip()])
    saved = (store / "agent" / "coder" / "_index.json").read_bytes()
    s = Store(store)
    s.save_index(s.folder("agent", "coder"), s.scan(s.folder("agent", "coder"), load=False).entries)
    rebuilt = (store / "agent" / "coder" / "_index.json").read_bytes()
    assert saved == rebuilt  # byte for byte what a rebuild writes
    assert_invariants(store)


def test_add_rebuilds_an_index_that_had_drifted(store: Path) -> None:
    run(*add_args("a fact about rack 1"), store=store)
    dropped = write_memory(store, record(summary="dropped in by hand"))
    code, out, _ = run(*add_args("a new fact about the cooling of rack 7"), store=store)
    assert code == 0
    ids = {e["id"] for e in _index_entries(store)}
    assert dropped.stem in ids and out.strip() in ids
    assert_invariants(store)
