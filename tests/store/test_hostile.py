"""Hostile input never escapes the store, never crashes it, never wedges it (issue 13, SPEC 8).

One test per case the issue reproduced by hand, and per path rule. Each plants the hostile
file next to a store where a run has real work to do, runs the commands that used to fail,
and checks: no write outside the store (a snapshot of the store's parent folder), no
traceback or hang, the bad file named and left as it was, the rest of the work done.
Cases that crashed the interpreter (a segfault) or hung run in a subprocess with a timeout.
"""

from __future__ import annotations

import errno
import json
import os
import stat
import subprocess
from pathlib import Path
from typing import Any

import orjson
import pytest
from typer.testing import CliRunner, Result

from memcli.cli import app
from memcli.errors import UnsafePathError
from memcli.store import fsops, journal, log
from memcli.store.formats import encode
from memcli.store.model import sha256
from memcli.store.store import Store
from tests import forked
from tests.conftest import NOW, add, days_ago, load, record, write_memory

runner = CliRunner()
DUP = "Run the database migrations on staging first then deploy the build to production"
ROOT = os.geteuid() == 0 if hasattr(os, "geteuid") else False
needs_permissions = pytest.mark.skipif(ROOT, reason="root reads a chmod 000 file anyway")
posix_only = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs and symlinks: POSIX only")


# ---------------------------------------------------------------- helpers


def cli(store: Path, *args: str, **kwargs: Any) -> Result:
    return runner.invoke(app, ["--store", str(store), *args], **kwargs)


def proc(store: Path, *args: str, stdin: str | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """A real process: a segfault is exit -11 here, not a dead test run; a hang a timeout."""
    env = {**os.environ, "MEMCLI_NOW": NOW}
    return forked.run(["--store", str(store), *args], input=stdin, timeout=timeout, env=env)


def no_traceback(result: Result | subprocess.CompletedProcess[str]) -> None:
    if isinstance(result, Result):
        assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
        text = result.stdout + result.stderr
    else:
        assert result.returncode in (0, 1), (result.returncode, result.stderr)
        text = result.stdout + result.stderr
    assert "Traceback" not in text, text


def tree(base: Path, skip: Path | None = None) -> dict[str, Any]:
    """Everything under `base` (but `skip`): each path with its kind, mode and bytes or link
    target. Compared before and after, it shows any write outside the store."""
    out: dict[str, Any] = {}
    for dirpath, dirs, files in os.walk(base):
        for name in dirs + files:
            path = Path(dirpath) / name
            if skip is not None and (path == skip or skip in path.parents):
                continue
            st = os.lstat(path)
            if stat.S_ISLNK(st.st_mode):
                value: Any = ("link", os.readlink(path))
            elif stat.S_ISREG(st.st_mode):
                value = ("file", stat.S_IMODE(st.st_mode), path.read_bytes() if st.st_mode & 0o400 else None)
            else:
                value = ("other", stat.S_IFMT(st.st_mode))
            out[str(path.relative_to(base))] = value
    return out


def good_work(store: Path) -> dict[str, str]:
    """A stale memory to archive and a duplicate pair to merge, in agent/coder."""
    stale = add(store, summary="an old fact nobody used", access_count=0, tags=["old"], subtype="misc")
    older = add(store, summary=DUP, tags=["deploy"], created_at=days_ago(50), subtype="deploy")
    newer = add(store, summary=DUP + " now", tags=["deploy"], created_at=days_ago(40), subtype="deploy")
    return {"stale": stale["id"], "older": older["id"], "newer": newer["id"]}


def work_done(store: Path, work: dict[str, str]) -> bool:
    return (store / "archive" / f"{work['stale']}.json").exists() and \
        load(store / "archive" / f"{work['older']}.json")["superseded_by"] == [work["newer"]]


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A folder next to the store, with a file in it: nothing may change here."""
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "victim.json").write_text('{"precious": true}\n')
    return folder


def doctor_problems(store: Path) -> list[dict[str, Any]]:
    result = cli(store, "--json", "doctor")
    no_traceback(result)
    return json.loads(result.stdout)["problems"]


# ---------------------------------------------------------------- one rule for paths


@posix_only
@pytest.mark.parametrize("name", ["agent", "team", "global", "archive", "ops", ".cache"])
def test_a_top_level_folder_that_is_a_symlink_is_refused(store: Path, tmp_path: Path, outside: Path,
                                                         name: str) -> None:
    work = good_work(store)
    add(store, summary="a team fact nobody used", access_count=0, scope="team", scope_id="backend")
    add(store, summary="a global fact nobody used", access_count=0, scope="global", scope_id="global")
    (store / ".cache").mkdir()
    real = outside / f"real-{name.strip('.')}"
    (store / name).rename(real)
    (store / name).symlink_to(real, target_is_directory=True)
    before = tree(tmp_path)
    for args in (["consolidate"], ["list"], ["reindex"], ["access", work["newer"]], ["--json", "stats"]):
        result = cli(store, *args)
        no_traceback(result)
        assert result.exit_code == 1, (args, result.stdout)
        assert f"{name}: is a symlink" in result.stdout + result.stderr
    assert tree(tmp_path) == before  # not even a lock file behind the link
    problems = doctor_problems(store)
    assert {"code": "unsafe_folder", "path": name} in [{k: p[k] for k in ("code", "path")} for p in problems]
    assert tree(tmp_path) == before


@posix_only
def test_a_top_level_folder_that_is_not_a_folder_is_refused(store: Path) -> None:
    good_work(store)
    (store / "global").rmdir()
    (store / "global").write_text("not a folder")
    result = cli(store, "consolidate")
    assert result.exit_code == 1 and "global: is a file, not a real folder" in result.stdout + result.stderr
    assert (store / "global").read_text() == "not a folder"


@posix_only
def test_a_lock_file_that_is_a_symlink_is_refused_never_truncated(store: Path, outside: Path) -> None:
    good_work(store)
    (store / "ops" / ".lock").symlink_to(outside / "victim.json")
    before = (outside / "victim.json").read_bytes()
    result = cli(store, "add", "--type", "semantic", "--scope", "global", "--summary", "a new fact")
    no_traceback(result)
    assert result.exit_code == 1 and "ops/.lock: is a symlink" in result.stdout + result.stderr
    assert (outside / "victim.json").read_bytes() == before


def _plant_journal(store: Path, run_id: str, data: dict[str, Any], name: str | None = None) -> Path:
    path = store / "ops" / (name or f"journal-{run_id}.json")
    path.write_bytes(orjson.dumps({"run_id": run_id, **data}))
    return path


def test_a_planted_journal_with_dotdot_paths_never_touches_outside(store: Path, tmp_path: Path,
                                                                   outside: Path) -> None:
    """Rolling back a journal moves files it "created" aside and writes pre-images back: with
    `../` in its paths, the next `add` or `access` moved or overwrote files outside."""
    work = good_work(store)
    victim = (outside / "victim.json").read_bytes()
    run_id = "run_01JPLANTEDJOURNAL0000000000"
    _plant_journal(store, run_id, {"phase": "applying", "files": [
        {"path": "../outside/victim.json", "kind": "create", "expect": None, "after": sha256(victim)},
        {"path": "../outside/other.json", "kind": "write", "expect": None, "after": None}]})
    evil = store / "archive" / "runs" / "outside" / "other.json"  # where that journal's pre-image resolves
    evil.parent.mkdir(parents=True)
    evil.write_text("overwritten from the store")
    committed = "run_01JPLANTEDCOMMITTED00000000"
    _plant_journal(store, committed, {"phase": "committed", "folders": ["../outside"], "covered": [],
                                      "refresh": {"agent/coder": ["../../../outside/victim.json"]}})
    _plant_journal(store, "../../outside/x", {"phase": "applying", "files": []}, name="journal-bad.json")
    before = tree(tmp_path, skip=store)
    for args in (["add", "--type", "semantic", "--scope", "global", "--summary", "a new fact"],
                 ["access", work["newer"]], ["consolidate"], ["doctor", "--fix"]):
        result = cli(store, *args)
        no_traceback(result)
        # doctor reports it in its own list; access never looks at journals (it only appends a
        # pending use, without the store lock: SPEC 10)
        assert "left in place, never acted on" in result.stderr or args[0] in ("doctor", "access"), (
            args, result.stderr)
    assert tree(tmp_path, skip=store) == before
    assert not (outside / "other.json").exists()
    assert work_done(store, work)  # the run went on
    problems = doctor_problems(store)
    invalid = sorted(p["path"] for p in problems if p["code"] == "journal_invalid")
    assert invalid == sorted([f"ops/journal-{run_id}.json", f"ops/journal-{committed}.json",
                              "ops/journal-bad.json"])


@posix_only
def test_apply_refuses_a_plan_that_writes_through_a_symlinked_folder(store: Path, tmp_path: Path,
                                                                      outside: Path) -> None:
    work = good_work(store)
    plan = tmp_path / "plan.json"
    assert cli(store, "consolidate", "--plan-out", str(plan)).exit_code == 0
    (store / "agent" / "coder").rename(outside / "coder")
    (store / "agent" / "coder").symlink_to(outside / "coder", target_is_directory=True)
    before = tree(tmp_path)
    result = cli(store, "apply", str(plan))
    no_traceback(result)
    assert result.exit_code == 1
    assert "agent/coder is a symlink" in result.stdout + result.stderr
    assert tree(tmp_path) == before
    assert (outside / "coder" / f"{work['stale']}.json").exists()


@pytest.mark.parametrize("bad", [
    {"path": "../outside/victim.json"}, {"path": "/etc/passwd"}, {"path": "agent/coder/../../../x.json"},
    {"path": "ops/state.json"}, {"path": "archive/runs/run_1/x.json"}, {"path": "agent/coder/notes.txt"},
    {"path": 7}, {"kind": "chmod"}, {"data": [1, 2]}])
def test_apply_refuses_a_plan_with_a_path_or_an_op_memcli_does_not_own(store: Path, tmp_path: Path,
                                                                         outside: Path, bad: dict[str, Any]) -> None:
    good_work(store)
    plan = tmp_path / "plan.json"
    assert cli(store, "consolidate", "--plan-out", str(plan)).exit_code == 0
    raw = json.loads(plan.read_text())
    raw["actions"][0]["ops"][0].update(bad)
    plan.write_text(json.dumps(raw))
    before = tree(tmp_path)
    result = cli(store, "apply", str(plan))
    no_traceback(result)
    assert result.exit_code == 1 and "refused, nothing was changed" in result.stdout + result.stderr
    assert tree(tmp_path) == before


@pytest.mark.parametrize("plan", [
    {"run_id": "../../x", "trigger": "manual", "at": NOW, "actions": []},
    {"run_id": "run_1", "trigger": "manual", "at": NOW, "actions": [1]},
    {"run_id": "run_1", "trigger": "manual", "at": NOW, "actions": [{"type": "x", "log": {}, "ops": "no"}]},
    {"run_id": "run_1", "trigger": "manual", "at": "0001-01-01T00:00:00+14:00", "actions": []},
    [1, 2], "x"])
def test_apply_refuses_a_file_that_is_not_a_plan(store: Path, tmp_path: Path, plan: Any) -> None:
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan))
    before = tree(tmp_path)
    result = cli(store, "apply", str(path))
    no_traceback(result)
    assert result.exit_code == 1 and str(path) in result.stdout + result.stderr
    assert tree(tmp_path) == before


@posix_only
def test_undo_refuses_a_manifest_path_through_a_symlinked_folder(store: Path, tmp_path: Path,
                                                                 outside: Path) -> None:
    work = good_work(store)
    result = cli(store, "--json", "consolidate")
    run_id = json.loads(result.stdout)["run_id"]
    (store / "agent" / "coder").rename(outside / "coder")
    (store / "agent" / "coder").symlink_to(outside / "coder", target_is_directory=True)
    before = tree(tmp_path)
    result = cli(store, "undo", run_id)
    no_traceback(result)
    assert result.exit_code == 1 and "agent/coder is a symlink" in result.stdout + result.stderr
    assert tree(tmp_path) == before
    assert not (outside / "coder" / f"{work['stale']}.json").exists()


def test_undo_refuses_a_manifest_that_names_paths_outside(store: Path, tmp_path: Path) -> None:
    good_work(store)
    run_id = json.loads(cli(store, "--json", "consolidate").stdout)["run_id"]
    manifest = store / "archive" / "runs" / run_id / "manifest.json"
    raw = json.loads(manifest.read_text())
    raw["files"][0]["path"] = "../outside/victim.json"
    manifest.write_text(json.dumps(raw))
    result = cli(store, "undo", run_id)
    no_traceback(result)
    assert result.exit_code == 1 and "names a path memcli does not own" in result.stdout + result.stderr


@posix_only
def test_a_promotion_into_a_symlinked_folder_is_skipped_and_the_run_goes_on(store: Path, tmp_path: Path,
                                                                            outside: Path) -> None:
    work = good_work(store)
    proc_id = add(store, type="procedural", subtype="review", tags=["review"], access_count=6,
                  summary="Always ask for two reviewers on schema changes")["id"]
    (store / "team").mkdir()
    (outside / "backend").mkdir()
    (store / "team" / "backend").symlink_to(outside / "backend", target_is_directory=True)
    before = tree(tmp_path, skip=store)
    result = cli(store, "--json", "consolidate")
    no_traceback(result)
    assert result.exit_code == 0, result.stdout
    skips = [a for a in json.loads(result.stdout)["actions"] if a["type"] == "skip"]
    assert [(s["memory_id"], s["reason"]) for s in skips] == [(proc_id, "unsafe_path")]
    assert "team/backend is a symlink" in result.stderr
    assert tree(tmp_path, skip=store) == before
    assert work_done(store, work)
    assert "promoted_to" not in load(store / "agent" / "coder" / f"{proc_id}.json") or \
        load(store / "agent" / "coder" / f"{proc_id}.json")["promoted_to"] is None


@posix_only
def test_fsops_never_follows_a_symlink_below_a_store_root(store: Path, tmp_path: Path, outside: Path) -> None:
    fsops.confine(store)
    (store / "agent").mkdir()
    (store / "agent" / "coder").symlink_to(outside, target_is_directory=True)
    before = tree(tmp_path, skip=store)
    link = store / "agent" / "coder"
    attempts = [lambda: fsops.write_new(link / "x.json", b"{}"),
                lambda: fsops.write_replace(link / "victim.json", b"{}"),
                lambda: fsops.unlink(link / "victim.json"),
                lambda: fsops.append(link / "victim.json", b"more"),
                lambda: fsops.mkdir(link / "sub"),
                lambda: fsops.move(link / "victim.json", store / "archive" / "victim.json"),
                lambda: fsops.write_new(store / "archive" / ".." / "agent" / "coder" / "y.json", b"{}")]
    for attempt in attempts:
        with pytest.raises(UnsafePathError):
            attempt()
    assert tree(tmp_path, skip=store) == before


def test_fsops_counts_every_change_as_before(store: Path) -> None:
    """MEMCLI_CRASH_AT counts changes: the crash tests depend on exactly these numbers."""
    fsops.confine(store)
    start = fsops.change_count()
    fsops.mkdir(store / "agent" / "coder")  # two folders missing: two changes
    assert fsops.change_count() - start == 2
    fsops.write_new(store / "agent" / "coder" / "a.json", b"1")  # temp file, link, unlink
    assert fsops.change_count() - start == 5
    fsops.write_replace(store / "agent" / "coder" / "a.json", b"2")  # temp file, rename
    assert fsops.change_count() - start == 7
    fsops.move(store / "agent" / "coder" / "a.json", store / "archive" / "a.json")  # link, unlink
    assert fsops.change_count() - start == 9
    fsops.unlink(store / "archive" / "a.json")
    assert fsops.change_count() - start == 10


def test_a_rewritten_file_keeps_its_mode(store: Path) -> None:
    work = good_work(store)
    keeper = store / "agent" / "coder" / f"{work['newer']}.json"
    other = add(store, summary="a private fact", tags=["p"], subtype="p")
    private = store / "agent" / "coder" / f"{other['id']}.json"
    keeper.chmod(0o600)
    private.chmod(0o640)
    assert cli(store, "access", other["id"]).exit_code == 0
    assert stat.S_IMODE(private.stat().st_mode) == 0o640
    assert cli(store, "consolidate").exit_code == 0  # the merge rewrites the keeper
    assert load(keeper)["supersedes"] == [work["older"]]
    assert stat.S_IMODE(keeper.stat().st_mode) == 0o600


# ---------------------------------------------------------------- parsing with bounds


def _deep_yaml(store: Path, depth: int) -> str:
    rel = "agent/coder/mem_DEEPYAML.md"
    text = f"---\nid: mem_DEEPYAML\ntype: semantic\ncreated_at: '{days_ago(60)}'\ncontent:\n  x: "
    (store / rel).write_text(text + "[" * depth + "]" * depth + "\n---\n\nbody\n")
    return rel


def _alias_bomb(store: Path, _depth: int = 0) -> str:
    rel = "agent/coder/mem_BOMB.md"
    lines = ["---", "id: mem_BOMB", "type: semantic", f"created_at: '{days_ago(60)}'", "content:",
             "  a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    for prev, name in zip("abcdefgh", "bcdefghi", strict=True):
        lines.append(f"  {name}: &{name} [" + ", ".join([f"*{prev}"] * 9) + "]")
    (store / rel).write_text("\n".join(lines) + "\n---\n")
    assert (store / rel).stat().st_size < 1024
    return rel


@pytest.mark.parametrize(("plant", "depth"), [(_deep_yaml, 100_000), (_deep_yaml, 3_000), (_alias_bomb, 0)],
                         ids=["yaml-100000-deep", "yaml-3000-deep", "alias-bomb"])
@pytest.mark.slow
def test_a_pathological_front_matter_is_bad_input_for_every_command(store: Path, tmp_path: Path,
                                                                    plant: Any, depth: int) -> None:
    work = good_work(store)
    rel = plant(store, depth)
    raw = (store / rel).read_bytes()
    before = tree(tmp_path, skip=store)
    commands = [["list"], ["stats"], ["reindex"], ["consolidate"],
                ["add", "--type", "semantic", "--scope", "agent", "--scope-id", "coder", "--summary", "new"],
                ["access", work["newer"]], ["doctor"]]
    for args in commands:
        result = proc(store, *args, timeout=30)  # a hang is a failure, a segfault exit -11
        no_traceback(result)
        assert result.returncode == (1 if args == ["doctor"] else 0), (args, result.stderr)
        if args[0] != "access":  # (access touches one memory: it names no other file)
            assert rel in result.stdout + result.stderr, (args, result.stderr)
    assert (store / rel).read_bytes() == raw
    assert tree(tmp_path, skip=store) == before
    assert work_done(store, work)


@pytest.mark.parametrize("depth", [70, 300, 900])
@pytest.mark.parametrize("fmt", ["json", "md"])
def test_a_deeply_nested_record_is_bad_input(store: Path, depth: int, fmt: str) -> None:
    """orjson reads 1,024 levels but writes 254: a record between was read, then crashed the
    run that archived it. A record is bounded at 64 levels."""
    work = good_work(store)
    data = record(access_count=0, tags=["deep"], subtype="deep", summary="deep")  # stale: archived by a run
    data["content"]["nested"] = "@NESTED@"
    path = store / "agent" / "coder" / f"{data['id']}.{fmt}"
    text = encode(data, fmt).decode()
    placeholder = next(p for p in ('"@NESTED@"', "'@NESTED@'") if p in text)
    path.write_text(text.replace(placeholder, "[" * depth + '"x"' + "]" * depth))
    raw = path.read_bytes()
    result = cli(store, "consolidate")
    no_traceback(result)
    assert result.exit_code == 0
    assert path.name in result.stderr and "nested more than 64 levels" in result.stderr
    assert path.read_bytes() == raw
    assert work_done(store, work)


@pytest.mark.parametrize("stamp", ["0001-01-01T00:00:00+14:00", "9999-12-31T23:00:00-14:00"])
def test_a_timestamp_out_of_range_is_bad_input(store: Path, stamp: str) -> None:
    work = good_work(store)
    bad = add(store, summary="out of range", created_at=stamp, updated_at=stamp, access_count=0, tags=["t"])
    path = store / "agent" / "coder" / f"{bad['id']}.json"
    raw = path.read_bytes()
    for args in (["list"], ["consolidate"], ["doctor"], ["show", bad["id"]]):
        result = cli(store, *args)
        no_traceback(result)
        assert "out of range" in result.stdout + result.stderr, args
    assert cli(store, "doctor").exit_code == 1
    assert cli(store, "show", bad["id"]).exit_code == 1  # named, with the reason
    hook = proc(store, "hook", "session-end", "--foreground", stdin=json.dumps({"session_id": "s"}))
    no_traceback(hook)
    assert "crashed" not in (store / "ops" / "hook.log").read_text()
    assert path.read_bytes() == raw
    assert work_done(store, work)


def test_timestamps_before_year_1000_are_written_with_four_digits() -> None:
    import datetime as dt

    from memcli.store.model import format_ts, parse_ts

    moment = dt.datetime(1, 1, 1, tzinfo=dt.timezone.utc)
    assert format_ts(moment) == "0001-01-01T00:00:00Z"
    assert parse_ts(format_ts(moment))[0] == moment


@posix_only
@pytest.mark.parametrize("rel", ["agent/coder/mem_FIFO.json", "agent/coder/mem_FIFO.md", "archive/mem_FIFO.json",
                                 "agent/coder/_index.json", "agent/coder/_minhash.bin",
                                 "agent/coder/_lastrun.bin", "agent/coder/_pairs.json"])
@pytest.mark.slow
def test_a_fifo_is_never_opened_blocking(store: Path, rel: str) -> None:
    """A FIFO named like a memory (or like one of memcli's own files) hung doctor and reindex
    forever, with the store lock held."""
    work = good_work(store)
    (store / "archive").mkdir(exist_ok=True)
    os.mkfifo(store / rel)
    for args in (["doctor"], ["reindex"], ["list"], ["consolidate"], ["doctor", "--fix"]):
        result = proc(store, *args, timeout=30)
        no_traceback(result)
        named = args[0] in ("doctor", "reindex") or not rel.startswith("archive/")  # (only they read it)
        if rel.rsplit("/", 1)[1].startswith("mem_") and named:
            assert rel in result.stdout + result.stderr, (args, result.stderr)
    assert work_done(store, work)
    if rel.rsplit("/", 1)[1].startswith("mem_"):
        assert stat.S_ISFIFO(os.lstat(store / rel).st_mode)  # left as it was


@posix_only
@pytest.mark.parametrize("rel", ["ops/state.json", "ops/consolidation-log.json", "ops/review-queue.json",
                                 "memcli.toml"])
def test_a_fifo_in_place_of_a_settings_or_ops_file_is_an_error_not_a_hang(store: Path, rel: str) -> None:
    good_work(store)
    (store / "ops" / "state.json").write_text("{}")  # a store also without its memcli.toml
    if (store / rel).exists():
        (store / rel).unlink()
    os.mkfifo(store / rel)
    result = proc(store, "consolidate", timeout=30)
    no_traceback(result)
    assert result.returncode == 1 and rel in result.stderr and "not a regular file" in result.stderr
    assert stat.S_ISFIFO(os.lstat(store / rel).st_mode)


def test_an_index_entry_that_is_not_an_object_makes_an_unreadable_index(store: Path) -> None:
    work = good_work(store)
    index = store / "agent" / "coder" / "_index.json"
    index.write_text('{"entries": [1]}')
    for args in (["doctor"], ["list"], ["--json", "stats"], ["access", work["newer"]], ["reindex"]):
        result = cli(store, *args)
        no_traceback(result)
        assert result.exit_code == (1 if args == ["doctor"] else 0), (args, result.stdout)
    entries = json.loads(index.read_text())["entries"]  # rebuilt from the files
    assert sorted(e["id"] for e in entries) == sorted(work.values())
    assert cli(store, "doctor").exit_code == 0


# ---------------------------------------------------------------- ops files that never wedge the store


WRONG_SHAPES = {
    "log-entries-a-string": ("ops/consolidation-log.json", {"entries": "x"}),
    "state-runs-a-string": ("ops/state.json", {"runs": "x"}),
    "state-last-success-a-list": ("ops/state.json", {"last_success": [1]}),
    "state-flagged-not-objects": ("ops/state.json", {"flagged": [1]}),
    "queue-items-an-object": ("ops/review-queue.json", {"items": {}}),
    "queue-item-ids-not-strings": ("ops/review-queue.json", {"items": [{"memory_ids": [1, 2]}]}),
    "log-not-an-object": ("ops/consolidation-log.json", [1, 2]),
    "state-too-deep-to-write-back": ("ops/state.json", {"x": json.loads("[" * 300 + "]" * 300)}),
    "log-too-deep-to-read": ("ops/consolidation-log.json", None),
}


@pytest.mark.parametrize("case", sorted(WRONG_SHAPES))
def test_an_ops_file_of_the_wrong_shape_stops_a_run_before_any_change(store: Path, case: str) -> None:
    rel, data = WRONG_SHAPES[case]
    work = good_work(store)
    raw = (b"{\"entries\": " + b"[" * 2000 + b"]" * 2000 + b"}") if data is None else json.dumps(data).encode()
    (store / rel).write_bytes(raw)
    memories = {p.name: p.read_bytes() for p in (store / "agent" / "coder").iterdir()}
    for _ in range(2):  # and the next run the same: nothing is wedged half-way
        result = cli(store, "consolidate")
        no_traceback(result)
        assert result.exit_code == 1, result.stdout
        message = result.stdout + result.stderr
        assert rel in message and "fix the file or move it aside" in message and "nothing was changed" in message
        assert not list((store / "ops").glob("journal-*"))
        assert {p.name: p.read_bytes() for p in (store / "agent" / "coder").iterdir()} == memories
    assert (store / rel).read_bytes() == raw
    assert rel in [p["path"] for p in doctor_problems(store) if p["code"] == "ops_unreadable"]
    (store / rel).unlink()  # the fix: move it aside
    assert cli(store, "consolidate").exit_code == 0
    assert work_done(store, work)


def test_a_log_entry_without_its_fields_is_shown_not_a_crash(store: Path) -> None:
    good_work(store)
    assert cli(store, "consolidate").exit_code == 0
    path = store / "ops" / "consolidation-log.json"
    data = json.loads(path.read_text())
    data["entries"] += [{"run_id": "run_HANDWRITTEN"}, {"stats": "x", "actions": [1, "a", {"type": 3}]}, 7]
    path.write_text(json.dumps(data))
    for args in (["log"], ["log", "--run", "run_HANDWRITTEN"], ["stats"], ["--json", "log"]):
        result = cli(store, *args)
        no_traceback(result)
        assert result.exit_code == 0, (args, result.stdout)


def _fail_log_append(monkeypatch: pytest.MonkeyPatch) -> None:
    def full_disk(root: Path, entry: dict[str, Any], quiet: bool = False) -> None:
        raise OSError(errno.ENOSPC, "No space left on device", str(root / "ops" / "consolidation-log.json"))

    monkeypatch.setattr(log, "append", full_disk)


def test_a_run_whose_recording_fails_is_reported_as_done_and_finished_by_recovery(
        store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    work = good_work(store)
    with monkeypatch.context() as patch:
        _fail_log_append(patch)
        result = cli(store, "--json", "consolidate")
    no_traceback(result)
    assert result.exit_code == 0  # the run happened: not "Error ... exit 1"
    run_id = json.loads(result.stdout)["run_id"]
    assert f"run {run_id} made all its changes, but recording it failed (No space left on device)" in result.stderr
    assert "the next memcli command (or `memcli doctor --fix`) finishes recording it" in result.stderr
    assert work_done(store, work)
    assert json.loads((store / "ops" / f"journal-{run_id}.json").read_text())["phase"] == "committed"
    status = cli(store, "status")
    assert "An interrupted run is waiting to be recovered" in status.stdout
    assert f"journal-{run_id}.json" in json.loads(cli(store, "--json", "status").stdout)["pending_runs"][0]
    following = cli(store, "reindex")
    assert following.exit_code == 0 and f"finished interrupted run {run_id}" in following.stderr
    assert [e["run_id"] for e in log.read_entries(store)] == [run_id]
    undo = cli(store, "undo", run_id)  # and it can be undone like any run
    assert undo.exit_code == 0, undo.stdout


def test_an_undo_whose_recording_fails_is_reported_as_done(store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    good_work(store)
    run_id = json.loads(cli(store, "--json", "consolidate").stdout)["run_id"]
    with monkeypatch.context() as patch:
        _fail_log_append(patch)
        result = cli(store, "undo", run_id)
    no_traceback(result)
    assert result.exit_code == 0 and "recording it failed" in result.stderr
    assert cli(store, "reindex").exit_code == 0
    assert [e["trigger"] for e in log.read_entries(store)] == ["manual", "undo"]


def test_a_full_disk_when_committing_rolls_the_run_back(store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    work = good_work(store)
    before = {p.name: p.read_bytes() for p in (store / "agent" / "coder").iterdir() if p.name.startswith("mem_")}
    real = fsops.write_replace

    def fail_on_commit(path: Path, data: bytes) -> None:
        if path.name.startswith("journal-"):
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        real(path, data)

    monkeypatch.setattr(fsops, "write_replace", fail_on_commit)
    result = cli(store, "consolidate")
    no_traceback(result)
    assert result.exit_code == 1 and "No space left on device" in result.stderr
    monkeypatch.undo()
    after = {p.name: p.read_bytes() for p in (store / "agent" / "coder").iterdir() if p.name.startswith("mem_")}
    assert after == before and not list((store / "ops").glob("journal-*"))
    assert not (store / "archive" / f"{work['stale']}.json").exists()


def test_status_mentions_a_run_waiting_to_be_recovered(store: Path) -> None:
    good_work(store)
    _plant_journal(store, "run_01JWAITING000000000000000", {"phase": "applying", "files": []})
    result = cli(store, "status")
    assert result.exit_code == 0 and "An interrupted run is waiting to be recovered" in result.stdout
    assert cli(store, "reindex").exit_code == 0
    assert "waiting to be recovered" not in cli(store, "status").stdout


# ---------------------------------------------------------------- narrow failures


@posix_only
@needs_permissions
def test_an_unreadable_memory_a_rule_wants_is_skipped_and_the_run_goes_on(store: Path) -> None:
    work = good_work(store)
    locked = add(store, summary="stale and unreadable", access_count=0, tags=["l"], subtype="l")
    assert cli(store, "reindex").exit_code == 0  # its index entry is trusted: planned unread
    path = store / "agent" / "coder" / f"{locked['id']}.json"
    path.chmod(0)
    try:
        for args in (["consolidate"], ["list"], ["doctor"]):
            result = cli(store, *args)
            no_traceback(result)
            assert result.exit_code == (1 if args == ["doctor"] else 0), (args, result.stdout)
        assert work_done(store, work)
        assert stat.S_IMODE(path.stat().st_mode) == 0 and not (store / "archive" / path.name).exists()
    finally:
        path.chmod(0o644)


@posix_only
@needs_permissions
def test_an_unreadable_folder_is_bad_input_for_that_folder_only(store: Path) -> None:
    work = good_work(store)
    other = add(store, summary="in a folder nobody may read", access_count=0, scope_id="other")
    folder = store / "agent" / "other"
    folder.chmod(0)
    try:
        commands = [["list"], ["--json", "stats"], ["status"], ["reindex"], ["consolidate"],
                    ["add", "--type", "semantic", "--scope", "global", "--summary", "new"],
                    ["access", work["newer"]], ["doctor"], ["doctor", "--fix"]]
        for args in commands:
            result = cli(store, *args)
            no_traceback(result)
            assert result.exit_code == (1 if args[0] == "doctor" else 0), (args, result.stdout)
            if args[0] in ("list", "reindex", "consolidate", "doctor"):
                assert "agent/other" in result.stdout + result.stderr, args
        assert work_done(store, work)
    finally:
        folder.chmod(0o755)
    assert (folder / f"{other['id']}.json").exists()


@posix_only
@needs_permissions
def test_os_error_messages_keep_their_closing_parenthesis(store: Path) -> None:
    (store / "ops").chmod(0o500)
    try:
        result = cli(store, "add", "--type", "semantic", "--scope", "global", "--summary", "x")
    finally:
        (store / "ops").chmod(0o755)
    assert result.exit_code == 1
    assert result.stderr.strip().endswith(f"({store / 'ops' / '.lock'})"), result.stderr


def test_os_error_message_shape() -> None:
    from memcli.cli.common import os_error_message

    assert os_error_message(PermissionError(13, "Permission denied", "/x/y")) == "Permission denied (/x/y)"
    assert os_error_message(OSError(28, "No space left on device")) == "No space left on device"


def test_doctor_finds_one_id_stored_as_json_and_md_in_a_folder(store: Path) -> None:
    data = record()
    write_memory(store, data, "json")
    write_memory(store, data, "md")
    problems = [p for p in doctor_problems(store) if p["code"] == "duplicate_id"]
    assert sorted(p["path"] for p in problems) == [f"agent/coder/{data['id']}.json", f"agent/coder/{data['id']}.md"]


def test_a_store_is_refused_only_by_what_is_wrong_with_it(store: Path) -> None:
    """The layout check looks at the top-level folders only: a normal store opens."""
    good_work(store)
    assert Store(store).layout_problems() == []
    assert journal.pending(Store(store)) == []


@pytest.mark.parametrize(("field", "value"), [("tags", [[1]]), ("tags", "abc"), ("access_count", "x"),
                                              ("details_len", "x"), ("access_count", None)])
def test_an_index_entry_with_facts_of_the_wrong_type_is_not_trusted(store: Path, field: str, value: Any) -> None:
    """An index entry whose size and mtime match its file is trusted without reading the file;
    one whose cached facts have the wrong types crashed planning and `list`."""
    work = good_work(store)
    assert cli(store, "reindex").exit_code == 0
    index = store / "agent" / "coder" / "_index.json"
    data = json.loads(index.read_text())
    for entry in data["entries"]:
        entry[field] = value
    index.write_text(json.dumps(data))
    for args in (["list"], ["consolidate", "--dry-run"], ["consolidate"]):
        result = cli(store, *args)
        no_traceback(result)
        assert result.exit_code == 0, (args, result.stdout)
    assert work_done(store, work)
    assert cli(store, "doctor").exit_code == 0  # the run rewrote the index from the files
