"""`memcli sync` with real git: commits per run, merges through the drivers, a memory changed
on both sides kept twice, archive names that collide kept both, and every refusal."""

from __future__ import annotations

import json
from pathlib import Path

import orjson

from memcli.consolidate import engine
from memcli.store import log
from memcli.store.store import Store
from tests.conftest import add, days_ago, load, write_memory
from tests.sync.gitstore import git, memcli, status, sync, team

DUP = "Restart the payments worker after every config change to the staging cluster"


def live_ids(store: Path) -> list[str]:
    return sorted(p.stem for folder in ("agent", "team", "global") for p in (store / folder).rglob("mem_*")
                  if p.suffix in (".json", ".md"))


def test_init_writes_git_files_and_registers_drivers(tmp_path: Path) -> None:
    _, (a, b) = team(tmp_path)
    ignore = (a / ".gitignore").read_text()
    assert "/.cache/" in ignore and "/ops/*" in ignore and "!/ops/consolidation-log.json" in ignore
    assert "_index.json merge=memcli-index" in (a / ".gitattributes").read_text()
    driver = git(a, "config", "--get", "merge.memcli-ops.driver")
    assert "-m memcli merge-driver ops %O %A %B %P" in driver and driver.startswith("/")
    assert git(b, "config", "--get", "merge.memcli-ops.driver", check=False) == ""  # a fresh clone: not yet
    assert sync(b)[0] == 0
    assert git(b, "config", "--get", "merge.memcli-index.driver").strip() == \
        git(a, "config", "--get", "merge.memcli-index.driver").strip()


def test_a_second_run_at_the_same_moment_changes_no_tracked_file(tmp_path: Path) -> None:
    _, (a, _b) = team(tmp_path)
    add(a, summary=DUP)
    add(a, summary=DUP + ".")
    add(a, summary="old and never used", access_count=0, last_accessed=days_ago(200))
    engine.consolidate(Store(a))
    assert sync(a)[0] == 0 and status(a) == ""
    out = engine.consolidate(Store(a))
    assert out.actions == [] and status(a) == ""  # logged in ops/local/, which git ignores
    assert [e["run_id"] for e in log.read_entries(a)][-1] == out.run_id


def test_each_run_is_one_commit_naming_its_run_id(tmp_path: Path) -> None:
    _, (a, _b) = team(tmp_path)
    first = add(a, summary=DUP)
    add(a, summary=DUP + ".")
    one = engine.consolidate(Store(a))
    add(a, summary="old and never used", access_count=0, last_accessed=days_ago(200))
    two = engine.consolidate(Store(a))
    code, result = sync(a)
    assert code == 0, result
    subjects = git(a, "log", "--format=%s").splitlines()
    assert [s for s in subjects if s.startswith("memcli run")] == [
        f"memcli run {two.run_id} (manual): 1 archived", f"memcli run {one.run_id} (manual): 1 merged"]
    files = git(a, "show", "--name-only", "--format=", f":/memcli run {one.run_id}").split()
    assert f"archive/runs/{one.run_id}/manifest.json" in files
    assert any(f.startswith("archive/mem_") for f in files) and any(first["id"] in f for f in files)
    assert not any(two.run_id in f for f in files)  # the later run's files are in its own commit
    commit = git(a, "rev-parse", f":/memcli run {one.run_id}").strip()
    log_then = json.loads(git(a, "show", f"{commit}:ops/consolidation-log.json"))
    assert [e["run_id"] for e in log_then["entries"]] == [one.run_id]
    assert status(a) == ""


def test_a_memory_changed_on_both_sides_stays_live_once_and_the_other_is_kept_and_queued(tmp_path: Path) -> None:
    _, (a, b) = team(tmp_path)
    mem = add(a, summary="the deploy key lives in the vault")
    assert sync(a)[0] == 0 and sync(b)[0] == 0
    write_memory(a, {**mem, "content": {"summary": "the deploy key lives in vault A"}, "updated_at": days_ago(2)})
    write_memory(b, {**mem, "content": {"summary": "the deploy key lives in vault B"}, "updated_at": days_ago(1)})
    assert sync(a)[0] == 0
    code, result = sync(b)
    assert code == 0 and result["doctor_ok"], result
    [resolved] = result["resolutions"]
    assert resolved["how"] == "kept_both" and result["queued_for_review"] == 1
    assert load(b / "agent" / "coder" / f"{mem['id']}.json")["content"]["summary"].endswith("vault B")  # later
    kept = load(b / resolved["kept"])
    assert kept["content"]["summary"].endswith("vault A") and kept["id"] != mem["id"]
    assert sync(a)[0] == 0
    assert live_ids(a) == live_ids(b) == sorted([mem["id"], kept["id"]])
    queue = json.loads((a / "ops" / "review-queue.json").read_text())["items"]
    assert [i["reason"] for i in queue] == ["changed_on_both_sides"]
    assert status(a) == status(b) == ""
    assert memcli(a, "doctor")[0] == 0


def test_runs_in_two_clones_both_stay_in_the_log_and_archive_names_that_collide_are_both_kept(
        tmp_path: Path, monkeypatch) -> None:
    _, (a, b) = team(tmp_path)
    old = add(a, summary="an old note nobody reads", access_count=0, last_accessed=days_ago(200))
    assert sync(a)[0] == 0 and sync(b)[0] == 0
    write_memory(b, {**old, "tags": ["edited-in-b"]})  # the two clones archive different versions
    runs = []
    for clone, moment in ((a, "2026-11-22T00:00:00Z"), (b, "2026-11-22T01:00:00Z")):
        monkeypatch.setenv("MEMCLI_NOW", moment)
        runs.append(engine.consolidate(Store(clone)).run_id)
    assert sync(a)[0] == 0
    code, result = sync(b)
    assert code == 0 and result["doctor_ok"], result
    hows = {r["path"].split("/")[0] + ":" + r["how"] for r in result["resolutions"]}
    assert hows == {"agent:removed_on_both_sides", "archive:archive_renamed", "archive:pre_image_kept"}, hows
    assert result["queued_for_review"] == 0
    assert sync(a)[0] == 0
    for clone in (a, b):
        assert sorted(e["run_id"] for e in log.read_entries(clone)) == sorted(runs)
        names = sorted(p.name for p in (clone / "archive").glob("mem_*"))
        assert len(names) == 2 and all(n.startswith(old["id"]) for n in names)
    [renamed] = [r["kept"] for r in result["resolutions"] if r["how"] == "archive_renamed"]
    run = load(a / renamed)["archive_run_id"]
    manifest = orjson.loads((a / "archive" / "runs" / run / "manifest.json").read_bytes())
    assert renamed in [f["path"] for f in manifest["files"]]  # undo finds it under its new name
    code, out = memcli(a, "undo", run)
    assert code == 0, out
    assert (a / "agent" / "coder" / f"{old['id']}.json").exists()


def test_refused_outside_a_repository(store: Path) -> None:
    code, out = memcli(store, "sync")
    assert code == 1 and "not in a git repository" in out


def test_refused_on_a_detached_head(tmp_path: Path) -> None:
    _, (a, _b) = team(tmp_path)
    git(a, "checkout", "-q", "--detach")
    add(a, summary="written while detached")
    before = status(a)
    code, out = memcli(a, "sync")
    assert code == 1 and "HEAD is detached" in out and status(a) == before


def test_refused_during_a_rebase(tmp_path: Path) -> None:
    _, (a, _b) = team(tmp_path)
    (a / "notes.txt").write_text("one\n")
    git(a, "add", "notes.txt")
    git(a, "commit", "-qm", "one")
    git(a, "checkout", "-q", "-b", "other", "HEAD~1")
    (a / "notes.txt").write_text("two\n")
    git(a, "add", "notes.txt")
    git(a, "commit", "-qm", "two")
    git(a, "rebase", "main", check=False)  # conflicts: the rebase stops half-way
    code, out = memcli(a, "sync")
    assert code == 1 and "rebase is in progress" in out


def test_a_rejected_push_keeps_every_commit_here(tmp_path: Path) -> None:
    remote, (a, _b) = team(tmp_path)
    hook = remote / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\necho 'no pushes today' >&2\nexit 1\n")
    hook.chmod(0o755)
    mem = add(a, summary="kept even though the push fails")
    code, out = memcli(a, "sync")
    assert code == 1 and "refused the push" in out and "Nothing was lost" in out
    assert f"agent/coder/{mem['id']}.json" in git(a, "show", "--name-only", "--format=", "HEAD")
    assert status(a) == ""


def test_an_unknown_remote_is_refused(tmp_path: Path) -> None:
    _, (a, _b) = team(tmp_path)
    code, out = memcli(a, "sync", "--remote", "nowhere")
    assert code == 1 and "no remote named 'nowhere'" in out


def test_a_conflict_in_a_file_memcli_does_not_own_gives_the_merge_up(tmp_path: Path) -> None:
    _, (a, b) = team(tmp_path)
    for clone, text in ((a, "alpha\n"), (b, "beta\n")):
        (clone / "NOTES.txt").write_text(text)
    assert sync(a)[0] == 0
    head = git(b, "rev-parse", "HEAD")
    code, out = memcli(b, "sync")
    assert code == 1 and "NOTES.txt" in out and "merge by hand" in out
    assert (b / "NOTES.txt").read_text() == "beta\n"
    assert git(b, "rev-parse", "HEAD^") == head  # its own change committed, the merge given up
    assert not (b / ".git" / "MERGE_HEAD").exists()


def test_the_timer_tick_syncs_after_its_daily_or_weekly_pass(tmp_path: Path) -> None:
    from memcli.integrations import schedule

    remote, (a, b) = team(tmp_path)
    mem = add(a, summary="shared by the timer, not by hand")
    result = schedule.run_tick(Store(a))
    assert [r.trigger for r in result.runs][:1] == ["weekly"]  # never run: the weekly pass is due
    assert result.sync is not None and result.sync["ok"] and result.sync["pushed"], result.sync
    assert f"agent/coder/{mem['id']}.json" in git(remote, "ls-tree", "-r", "--name-only", "main")
    assert sync(b)[0] == 0 and (b / "agent" / "coder" / f"{mem['id']}.json").exists()
    assert schedule.run_tick(Store(a)).sync is None  # nothing due: no pass, no sync


def test_a_tick_in_a_store_without_a_remote_does_not_sync(store: Path) -> None:
    from memcli.integrations import schedule

    git(store, "init", "-q")
    assert schedule.run_tick(Store(store)).sync is None


def test_the_cron_line_of_a_shared_store_syncs_after_the_weekly_pass(tmp_path: Path, store: Path) -> None:
    from memcli.integrations import install

    _, (a, _b) = team(tmp_path)
    line = install.cron_line(a, "0 0 * * 0", executable="/bin/memcli")
    assert "consolidate --trigger weekly --quiet && /bin/memcli --store" in line and "sync --quiet)" in line
    assert "sync" not in install.cron_line(store, "0 0 * * 0", executable="/bin/memcli")  # not shared


def test_journals_locks_caches_and_machine_local_files_are_never_shared(tmp_path: Path) -> None:
    _, (a, _b) = team(tmp_path)
    local = ["ops/journal-run_X.json", "ops/.lock", "ops/.tick.lock", "ops/uses.jsonl", "ops/hook.log",
             "ops/cron.log", "ops/local/state.json", ".cache/folders/agent/coder/_lastrun.bin",
             "agent/coder/.mem_A.json.1a2b3c4d.tmp"]
    shared = ["ops/consolidation-log.json", "ops/review-queue.json", "ops/state.json", "ops/log/2026-11.json",
              "agent/coder/mem_A.json",
              "agent/coder/_index.json", "archive/runs/run_X/manifest.json", "memcli.toml"]
    for rel in local + shared:
        (a / rel).parent.mkdir(parents=True, exist_ok=True)
        (a / rel).write_text("{}")
    ignored = git(a, "check-ignore", *local, *shared, check=False).split()
    assert sorted(ignored) == sorted(local)
