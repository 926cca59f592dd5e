"""`memcli recall`, the search index and uses (SPEC 10), at their edges."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from memcli.consolidate import engine, undo
from memcli.recall import index as rindex
from memcli.recall import search
from memcli.store import memories
from memcli.store.model import parse_ts
from memcli.store.store import Store
from tests import forked
from tests.conftest import NOW, add, assert_invariants, days_ago, load
from tests.recall.helpers import fold

MOMENT = parse_ts(NOW)[0]


def cli(store: Path, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "MEMCLI_NOW": NOW}
    return forked.run(["--store", str(store), *args], input=stdin, timeout=120, env=env)


def ids(results: list[search.Result]) -> list[str]:
    return [r.id for r in results]


def test_view_of_an_agent_and_of_everyone(store: Path) -> None:
    own = add(store, summary="Staging deploys use make deploy-staging", scope_id="coder")
    team = add(store, summary="Staging deploys need the VPN", scope="team", scope_id="backend")
    other_team = add(store, summary="Staging deploys are frozen on Fridays", scope="team", scope_id="team")
    glob = add(store, summary="Staging deploys are announced in #ops", scope="global", scope_id="global")
    other = add(store, summary="Staging deploys by hand are forbidden", scope_id="writer")
    st = Store(store)
    seen = set(ids(search.recall(st, "staging deploys", "coder", 10)))
    assert seen == {own["id"], team["id"], glob["id"]}  # coder's team is backend ([teams])
    everyone = set(ids(search.recall(st, "staging deploys", None, 10)))
    assert everyone == {own["id"], team["id"], other_team["id"], glob["id"], other["id"]}
    assert set(ids(search.recall(st, "staging deploys", "writer", 10))) == {other["id"], other_team["id"], glob["id"]}


def test_ranking_identifiers_stemming_versions_tags(store: Path) -> None:
    camel = add(store, summary="getUserName reads the profile cache", tags=["code"])
    snake = add(store, summary="Call refresh_token_cache after login", tags=["auth"])
    path = add(store, summary="The retry loop lives in src/worker/queue_runner.py")
    version = add(store, summary="Pinned numpy to v2.3.1 because 2.4 broke parsing")
    stem = add(store, summary="Deployment failed when the migrations were running")
    tag = add(store, summary="Ask Dana before touching it", tags=["billing"])
    add(store, summary="Unrelated note about lunch plans")
    st = Store(store)

    def top(query: str) -> str:
        return search.recall(st, query, "coder", 1)[0].id

    assert top("user name") == camel["id"]
    assert top("getUserName") == camel["id"]
    assert top("refresh_token_cache") == snake["id"]
    assert top("token cache") == snake["id"]
    assert top("queue_runner.py") == path["id"]
    assert top("where is the queue runner") == path["id"]
    assert top("numpy 2.3") == version["id"]
    assert top("what happened with the deploy while migrating") == stem["id"]
    assert top("billing") == tag["id"]


def test_ties_by_priority_then_recency(store: Path) -> None:
    old = add(store, summary="rotate the signing key", updated_at=days_ago(50), tags=["k"])
    new = add(store, summary="rotate the signing key", updated_at=days_ago(10), tags=["k"])
    high = add(store, summary="rotate the signing key", updated_at=days_ago(90), tags=["k"], priority="high")
    assert ids(search.recall(Store(store), "signing key rotation", "coder", 3)) == [high["id"], new["id"], old["id"]]


@pytest.mark.parametrize("query", ["", "   ", "the of and", "how do I", "what is it?"])
def test_empty_or_stop_words_only_exit_1(store: Path, query: str) -> None:
    add(store, summary="anything")
    with pytest.raises(search.EmptyQueryError):
        search.recall(Store(store), query)
    proc = cli(store, "recall", query)
    assert proc.returncode == 1 and "nothing to search for" in proc.stderr
    proc = cli(store, "recall", query, "--json")
    assert proc.returncode == 1 and "error" in json.loads(proc.stdout)


@pytest.mark.slow
def test_cli_json_shape_and_uses_once_per_session(store: Path) -> None:
    mem = add(store, summary="Use the blue-green switch for releases", access_count=3)
    proc = cli(store, "recall", "blue green releases", "--agent", "coder", "--json", "--session", "s1")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["query"] == "blue green releases"
    assert [r["id"] for r in out["results"]] == [mem["id"]]
    assert out["results"][0]["path"] == f"agent/coder/{mem['id']}.json"
    cli(store, "recall", "blue green", "--session", "s1")  # same session: not counted again
    cli(store, "recall", "releases switch", "--session", "s2")
    cli(store, "recall", "releases switch")  # no session: counts
    show = json.loads(cli(store, "show", mem["id"], "--json").stdout)
    assert show["memory"]["access_count"] == 6  # pending uses count before they are folded
    assert load(store / "agent" / "coder" / f"{mem['id']}.json")["access_count"] == 3  # not folded yet
    fold(store)
    assert load(store / "agent" / "coder" / f"{mem['id']}.json")["access_count"] == 6
    assert load(store / "agent" / "coder" / f"{mem['id']}.json")["last_accessed"] == NOW
    assert not (store / "ops" / "uses.jsonl").exists() or (store / "ops" / "uses.jsonl").stat().st_size == 0
    cli(store, "recall", "blue green", "--session", "s1")  # still the same session after the fold
    fold(store)
    assert load(store / "agent" / "coder" / f"{mem['id']}.json")["access_count"] == 6
    assert_invariants(store)


def test_text_output_and_no_match(store: Path) -> None:
    mem = add(store, summary="Kafka consumer lag alerts page the on-call")
    proc = cli(store, "recall", "kafka lag")
    assert proc.returncode == 0 and mem["id"] in proc.stdout and "Kafka consumer lag" in proc.stdout
    proc = cli(store, "recall", "zebra")
    assert proc.returncode == 0 and proc.stdout == "" and "No memory matches" in proc.stderr


def test_broken_file_named_and_skipped(store: Path) -> None:
    good = add(store, summary="Redis eviction policy is allkeys-lru")
    (store / "agent" / "coder" / "mem_broken.json").write_text("{nope")
    for _ in range(2):  # named on every recall, also once the index knows it is bad
        proc = cli(store, "recall", "redis eviction")
        assert proc.returncode == 0 and good["id"] in proc.stdout
        assert "agent/coder/mem_broken.json" in proc.stderr


def test_build_trusts_only_entries_that_still_match(store: Path) -> None:
    """A file its `_index.json` entry vouches for (same size and mtime) is only parsed when
    the index is built; a file changed since its entry is read with every check again."""
    good = add(store, summary="Redis eviction is allkeys-lru")
    changed = add(store, summary="Redis maxmemory is four gigabytes")
    memories.reindex(Store(store))  # entries for both
    path = store / "agent" / "coder" / f"{changed['id']}.json"
    bad = json.loads(path.read_text())
    bad["created_at"] = "not a time"  # bad input the store's checks refuse
    path.write_text(json.dumps(bad))
    st = Store(store)
    problems: list = []
    with rindex.writing(store):
        rindex.rebuild(st, problems)
    assert [p.path for p in problems] == [f"agent/coder/{changed['id']}.json"]
    assert ids(search.recall(st, "redis eviction maxmemory", limit=5)) == [good["id"]]


@pytest.mark.slow
def test_archived_never_recalled_and_forget_restore(store: Path) -> None:
    mem = add(store, summary="The staging database is pg-stage-2")
    st = Store(store)
    assert ids(search.recall(st, "staging database")) == [mem["id"]]
    proc = cli(store, "forget", mem["id"])
    assert proc.returncode == 0, proc.stderr
    assert load(store / "archive" / f"{mem['id']}.json")["archive_reason"] == "forgotten"
    assert search.recall(Store(store), "staging database") == []
    assert cli(store, "restore", mem["id"]).returncode == 0
    assert ids(search.recall(Store(store), "staging database")) == [mem["id"]]
    assert cli(store, "forget", "mem_missing").returncode == 1
    assert cli(store, "forget", mem["id"], "--reason", "   ").returncode == 1


def test_forget_is_undoable(store: Path) -> None:
    mem = add(store, summary="Build cache lives on the NAS")
    outcome = memories.forget_memory(Store(store), mem["id"], "moved", 5)
    assert not (store / "agent" / "coder" / f"{mem['id']}.json").exists()
    undo.undo_run(Store(store), outcome.run_id)
    assert (store / "agent" / "coder" / f"{mem['id']}.json").exists()
    assert ids(search.recall(Store(store), "build cache NAS")) == [mem["id"]]
    assert_invariants(store)


def test_index_follows_every_write(store: Path) -> None:
    st = Store(store)
    first = add(store, summary="Grafana dashboards live in the ops repo")
    assert ids(search.recall(st, "grafana dashboards")) == [first["id"]]
    # add: queued for the index, found by the next search
    with st.writing(5):
        result = memories.add_memory(st, memories.NewMemory("semantic", "fact", "agent", "coder", ["x"], "normal",
                                                            "agent:coder", "Grafana alerts go to the pager"), MOMENT)
    assert (rindex.current(store) is not None)
    assert result.id in ids(search.recall(st, "grafana alerts pager"))
    # a file dropped by hand, and one edited by hand
    hand = add(store, summary="Flamegraphs are made with py-spy")
    assert ids(search.recall(st, "flamegraphs")) == [hand["id"]]
    path = store / "agent" / "coder" / f"{hand['id']}.json"
    data = load(path)
    data["content"]["summary"] = "Profiles are made with perf"
    path.write_text(json.dumps(data))
    assert search.recall(st, "flamegraphs") == []
    assert ids(search.recall(st, "profiles perf")) == [hand["id"]]
    path.unlink()
    assert search.recall(st, "profiles perf") == []


def test_index_after_a_run_and_its_undo(store: Path) -> None:
    stale = add(store, summary="Jenkins job names start with ci-", access_count=0, last_accessed=None)
    st = Store(store)
    assert ids(search.recall(st, "jenkins job names")) == [stale["id"]]
    outcome = engine.consolidate(Store(store))
    assert outcome.stats["memories_archived"] == 1
    assert search.recall(Store(store), "jenkins job names") == []
    undo.undo_run(Store(store), outcome.run_id)
    assert ids(search.recall(Store(store), "jenkins job names")) == [stale["id"]]


@pytest.mark.parametrize("damage", ["garbage_current", "truncate_meta", "remove_tantivy", "bad_folders", "bad_rows"])
def test_corrupt_index_is_rebuilt(store: Path, damage: str) -> None:
    mem = add(store, summary="Secrets rotate every ninety days")
    st = Store(store)
    assert ids(search.recall(st, "secrets rotate")) == [mem["id"]]
    gen = rindex.current(store)
    assert gen is not None
    if damage == "garbage_current":
        (store / ".cache" / "recall" / "current").write_text("../../etc")
    elif damage == "truncate_meta":
        (gen.tantivy_dir / "meta.json").write_text('{"segm')
    elif damage == "remove_tantivy":
        for p in gen.tantivy_dir.iterdir():
            p.unlink()
    elif damage == "bad_folders":
        (gen.path / "folders.json").write_bytes(b"\x00\x01")
    else:
        for p in (gen.path / "rows").iterdir():
            p.write_text("[")
        (store / "agent" / "coder" / "touch.txt").write_text("moves the folder's mtime")
    assert ids(search.recall(Store(store), "secrets rotate")) == [mem["id"]]
    proc = cli(store, "recall", "secrets rotate")
    assert proc.returncode == 0 and "Traceback" not in proc.stderr and mem["id"] in proc.stdout


def test_recall_takes_no_store_lock(store: Path) -> None:
    mem = add(store, summary="Nightly backups run at 02:00 UTC")
    st = Store(store)
    with st.lock(5):  # a consolidation holding the lock for a long time
        proc = cli(store, "--wait", "0", "recall", "nightly backups", "--session", "x")
        assert proc.returncode == 0 and mem["id"] in proc.stdout
        proc = cli(store, "--wait", "0", "access", mem["id"])
        assert proc.returncode == 0
    fold(store)
    assert load(store / "agent" / "coder" / f"{mem['id']}.json")["access_count"] == 3


def test_lean_start_up(store: Path) -> None:
    """Once the search index and the settings cache stand for the files, `recall` and the
    hooks import neither the CLI's libraries nor the store's machinery."""
    add(store, summary="Lean imports matter for hooks")
    past = os.stat(store / "memcli.toml").st_mtime - 10  # as if written a while ago: trusted
    for path in (store / "memcli.toml", store / "agent" / "coder", store / "global"):
        os.utime(path, (past, past))
    code = (f"import sys, runpy\nsys.argv = ['memcli', '--store', {str(store)!r}] + sys.argv[1:]\n"
            "from memcli.cli.fast import dispatch\nimport io, contextlib\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n    dispatch(sys.argv[1:])\n"
            "heavy = [m for m in ('typer', 'rich', 'numpy', 'click', 'rapidfuzz', 'yaml', 'orjson', 'filelock', 'secrets',\n"
            "                     'dataclasses', 'memcli.config', 'memcli.store.store', 'memcli.store.model',\n"
            "                     'memcli.recall.documents')\n"
            "         if m in sys.modules]\n"
            "print(','.join(heavy) or 'none')\n")
    runs = ((["recall", "lean imports"], ""), (["hook", "session-start"], '{"session_id": "a"}'),
            (["hook", "prompt"], '{"session_id": "b", "prompt": "lean imports for hooks"}'))
    for n, (argv, stdin) in enumerate([runs[0], *runs]):  # the first builds the index and the cache
        proc = subprocess.run([sys.executable, "-c", code, *argv], input=stdin, capture_output=True, text=True,
                              timeout=60, env={**os.environ, "MEMCLI_NOW": ""})
        if n:
            assert proc.stdout.strip().splitlines()[-1] == "none", (argv, proc.stdout, proc.stderr)


def test_scope_id_and_id_rules_match_the_store() -> None:
    """The lean read path keeps its own copies of two rules of the store: they agree."""
    from memcli.recall import place, uses
    from memcli.store import model
    from memcli.store import store as store_mod

    for name in ("coder", "a.b-c_1", "", ".", "..", ".hidden", "x" * 100, "x" * 101, "a/b", "é", "a b"):
        assert place.is_valid_scope_id(name) == store_mod.is_valid_scope_id(name), name
    assert uses._ID_RE.pattern == model.ID_RE.pattern


def _vouched_store(store: Path, summary: str) -> tuple[Store, Path, dict[str, Any]]:
    """A store whose index vouches for the coder folder (its mtime older than a second)."""
    first = add(store, summary=summary)
    folder = store / "agent" / "coder"
    past = os.stat(folder).st_mtime - 10
    os.utime(folder, (past, past))
    st = Store(store)
    assert ids(search.recall(st, summary)) == [first["id"]]
    gen = rindex.current(store)
    assert gen is not None and gen.folders["agent/coder"]["stamp"] == os.stat(folder).st_mtime_ns
    return st, folder, first


def _add_note(st: Store, summary: str) -> memories.AddResult:
    with st.writing(5):
        return memories.add_memory(st, memories.NewMemory("semantic", "fact", "agent", "coder", ["x"], "normal",
                                                          "agent:coder", summary), MOMENT)


def test_an_add_appends_its_document_and_stamp_and_replaces_nothing(store: Path) -> None:
    st, folder, _first = _vouched_store(store, "Grafana dashboards live in the ops repo")
    gen = rindex.current(store)
    assert gen is not None
    folders_json = gen.path / "folders.json"
    before = (folders_json.read_bytes(), os.stat(folders_json).st_ino)
    result = _add_note(st, "Grafana alerts go to the pager")
    assert (folders_json.read_bytes(), os.stat(folders_json).st_ino) == before  # not replaced
    lines = [json.loads(line) for line in (gen.path / "pending.jsonl").read_bytes().splitlines()]
    assert [line.get("key") for line in lines] == [f"agent/coder/{result.id}.json", None]
    assert lines[1] == {"folder": "agent/coder", "stamp": os.stat(folder).st_mtime_ns, "bad": False}
    # read with the generation: the folder is vouched for, with documents pending
    seen = rindex.current(store)
    assert seen is not None and seen.folders["agent/coder"]["stamp"] == os.stat(folder).st_mtime_ns
    assert rindex.open_current(store, ["agent/coder"], [], pending_ok=True) is not None
    assert rindex.open_current(store, ["agent/coder"], []) is None  # a plain reader commits first
    assert result.id in ids(search.recall(st, "grafana alerts pager"))
    assert (gen.path / "pending.jsonl").read_bytes() == b""
    saved = json.loads(folders_json.read_bytes())["folders"]["agent/coder"]
    assert saved["stamp"] == os.stat(folder).st_mtime_ns  # the stamp kept when pending was emptied
    assert rindex.open_current(store, ["agent/coder"], []) is not None


@pytest.mark.parametrize("damage", ["stamp_torn", "torn_write_then_another"])
def test_a_torn_pending_line_never_vouches_for_a_lost_document(store: Path, damage: str) -> None:
    st, folder, _first = _vouched_store(store, "Grafana dashboards live in the ops repo")
    gen = rindex.current(store)
    assert gen is not None
    old_stamp = gen.folders["agent/coder"]["stamp"]
    pending = gen.path / "pending.jsonl"
    if damage == "stamp_torn":  # a crash in the middle of the add's one write
        result = _add_note(st, "Grafana alerts go to the pager")
        pending.write_bytes(pending.read_bytes()[:-20])
    else:  # a crash tore a write to another folder; the next add's document runs into it
        pending.write_bytes(b'{"key":"team/backend/mem_x.json","folder":"team/backend","summ')
        result = _add_note(st, "Grafana alerts go to the pager")
        assert pending.read_bytes().count(b"\n") == 2  # the torn line and this document, then the stamp
    seen = rindex.current(store)
    assert seen is not None and seen.folders["agent/coder"]["stamp"] == old_stamp  # no stamp applied
    assert rindex.open_current(store, ["agent/coder"], [], pending_ok=True) is None
    # the next search lists the folder again: nothing written is missed
    assert result.id in ids(search.recall(st, "grafana alerts pager", "coder", 5))
    assert pending.read_bytes() == b""


def test_stamp_lines_alone_are_kept_and_emptied(store: Path) -> None:
    st, folder, first = _vouched_store(store, "Grafana dashboards live in the ops repo")
    gen = rindex.current(store)
    assert gen is not None
    stamp = gen.folders["agent/coder"]["stamp"]
    (gen.path / "pending.jsonl").write_bytes(json.dumps({"folder": "agent/coder", "stamp": stamp,
                                                         "bad": False}).encode() + b"\n")
    assert ids(search.recall(st, "grafana dashboards")) == [first["id"]]
    assert (gen.path / "pending.jsonl").read_bytes() == b""
    assert rindex.open_current(store, ["agent/coder"], []) is not None
