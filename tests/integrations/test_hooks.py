"""The session-end hook: fast, detached, and exit 0 whatever it is given."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
from typer.testing import CliRunner

from memcli.cli import app
from memcli.integrations import hooks
from tests.conftest import add, days_ago

runner = CliRunner()
STAMPED = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ ")


@pytest.fixture
def spawned(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Record background starts instead of starting processes from the test runner."""
    calls: list[Path] = []

    def fake(root: str, wait: float, capture: Any = None) -> int:
        calls.append(Path(root))
        return 4242

    monkeypatch.setattr(hooks, "spawn_background", fake)
    return calls


def hook(*args: str, stdin: bytes | str = b"", env: dict[str, str] | None = None) -> Any:
    result = runner.invoke(app, ["hook", "session-end", *args], input=stdin, env=env)
    assert result.exit_code == 0, (result.exit_code, result.stdout, result.stderr, result.exception)
    return result


def hook_log(root: Path) -> list[str]:
    path = root / "ops" / hooks.LOG_NAME
    return path.read_text().splitlines() if path.exists() else []


def payload(**fields: Any) -> bytes:
    base = {"session_id": "s-1", "transcript_path": "/tmp/t.jsonl", "hook_event_name": "SessionEnd",
            "reason": "prompt_input_exit"}
    return orjson.dumps({**base, **fields})


# ---------------------------------------------------------------- reading the input


def test_parse_takes_the_known_string_fields() -> None:
    info = hooks.parse_input(payload(cwd="/work/p"), False)
    assert (info.session_id, info.cwd, info.reason, info.notes) == ("s-1", "/work/p", "prompt_input_exit", [])


@pytest.mark.parametrize("raw, note", [
    (b"", None),
    (b"  \n", None),
    (b"{not json", "not JSON"),
    (b"\xff\xfe\x00binary", "not JSON"),
    (b"[1, 2]", "not a JSON object"),
    (b"[" * 100_000, "not JSON"),
    (orjson.dumps({"cwd": 5, "session_id": ["x"], "reason": {"a": None}}), "not a short string"),
    (orjson.dumps({"cwd": "/x\u0000y"}), "not a short string"),
    (orjson.dumps({"cwd": "/" + "a" * 10_000}), "not a short string"),
])
def test_parse_never_raises(raw: bytes, note: str | None) -> None:
    info = hooks.parse_input(raw, False)
    assert info.cwd is None
    if note is None:
        assert not info.notes
    else:
        assert any(note in n for n in info.notes), info.notes


def test_parse_ignores_truncated_input() -> None:
    assert "over" in hooks.parse_input(b"{}", True).notes[0]


def test_read_caps_the_input() -> None:
    raw, more = hooks.read_input(io.BytesIO(b"x" * 50), limit=10)
    assert (raw, more) == (b"x" * 10, True)


def test_read_does_not_block_on_a_pipe_left_open() -> None:
    read_end, write_end = os.pipe()
    try:
        os.write(write_end, b'{"cwd": "/x"')
        start = time.monotonic()
        with os.fdopen(read_end, "rb", closefd=False) as stream:
            raw, more = hooks.read_input(stream, timeout=0.2)
        assert time.monotonic() - start < 1.0
        assert (raw, more) == (b'{"cwd": "/x"', False)
    finally:
        os.close(read_end)
        os.close(write_end)


def test_read_skips_a_terminal_and_a_missing_stdin() -> None:
    class Tty(io.BytesIO):
        def isatty(self) -> bool:
            return True

    assert hooks.read_input(Tty(b"{}")) == (b"", False)
    assert hooks.read_input(None) == (b"", False)


# ---------------------------------------------------------------- the command, exit 0 always


def test_hook_starts_the_background_pass_for_the_hook_cwd(store: Path, spawned: list[Path],
                                                          cwd: Path) -> None:
    result = hook(stdin=payload(cwd=str(store)))
    assert spawned == [store.resolve()]
    assert "started in the background (pid 4242)" in result.stderr
    lines = hook_log(store)
    assert lines and all(STAMPED.match(line) for line in lines)
    assert "session-end: start (session s-1, reason prompt_input_exit" in lines[0]


def test_store_option_and_env_win_over_the_hook_cwd(store: Path, tmp_path: Path,
                                                    spawned: list[Path]) -> None:
    other = tmp_path / "other"
    (other / "ops").mkdir(parents=True)
    hook("--store", str(store), stdin=payload(cwd=str(other)))
    hook(stdin=payload(cwd=str(other)), env={"MEMCLI_STORE": str(store)})
    assert spawned == [store.resolve(), store.resolve()]


HOSTILE = [
    b"",
    b"{broken",
    b"\x00\x01\x02\xff" * 1000,
    b"[" * 200_000,
    b"x" * (hooks.MAX_INPUT + 10),
    orjson.dumps({"cwd": 12, "session_id": None, "reason": [1, {"a": 2}]}),
    orjson.dumps({"cwd": "/nonexistent/folder"}),
    orjson.dumps({"cwd": "relative/path"}),
    orjson.dumps("just a string"),
    orjson.dumps({"cwd": "/tmp", "session_id": "\x1b[31mred\x07" * 50}),
]


@pytest.mark.parametrize("stdin", HOSTILE)
def test_hostile_input_still_exits_0_and_uses_the_current_store(
        stdin: bytes, store: Path, spawned: list[Path], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(store)
    hook(stdin=stdin)
    # A session cwd with no store in it (/tmp) falls back to the hook's own folder (SPEC 1).
    assert spawned == [store.resolve()]
    assert "\x1b" not in "".join(hook_log(store))


def test_hook_cwd_pointing_at_a_file_falls_back_to_the_current_folder(
        store: Path, spawned: list[Path], monkeypatch: pytest.MonkeyPatch) -> None:
    memo = store / "ops" / "state.json"
    memo.write_text("{}")
    monkeypatch.chdir(store)
    hook(stdin=payload(cwd=str(memo)))
    assert spawned == [store.resolve()]


def test_a_session_in_a_subfolder_finds_the_project_store(
        store: Path, cwd: Path, spawned: list[Path]) -> None:
    """The store is the project folder and the session moved into a subfolder of it."""
    sub = store / "src" / "deep"
    sub.mkdir(parents=True)
    hook(stdin=payload(cwd=str(sub)))
    assert spawned == [store.resolve()]


def test_claude_project_dir_is_tried_after_the_session_cwd(
        store: Path, cwd: Path, tmp_path: Path, spawned: list[Path]) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    hook(stdin=payload(cwd=str(elsewhere)), env={"CLAUDE_PROJECT_DIR": str(store)})
    assert spawned == [store.resolve()]


def test_an_unrelated_ops_folder_is_never_written_to(
        tmp_path: Path, cwd: Path, spawned: list[Path]) -> None:
    project = tmp_path / "webapp"
    (project / "ops").mkdir(parents=True)
    (project / "ops" / "deploy.sh").write_text("echo hi\n")
    result = hook(stdin=payload(cwd=str(project)))
    assert spawned == [] and "no memory store" in result.stderr
    assert sorted(p.name for p in (project / "ops").iterdir()) == ["deploy.sh"]


def test_outside_a_store_exits_0_with_a_note(cwd: Path, spawned: list[Path]) -> None:
    result = hook(stdin=payload(cwd=str(cwd)))
    assert spawned == [] and "no memory store" in result.stderr
    assert hook("--store", "/nonexistent/store").stderr.count("no memory store") == 1


def test_unknown_arguments_are_noted_not_fatal(store: Path, spawned: list[Path]) -> None:
    result = hook("--store", str(store), "--bogus", "extra", "-x")
    assert "ignored unknown arguments: --bogus extra -x" in result.stderr
    assert spawned and any("unknown arguments" in line for line in hook_log(store))


def test_json_output(store: Path, spawned: list[Path]) -> None:
    result = hook("--store", str(store), "--json", stdin=b"{oops")
    data = orjson.loads(result.stdout)
    assert data["started"] and data["pid"] == 4242 and data["store"] == str(store.resolve())
    assert "not JSON" in data["notes"][0]


def test_an_unexpected_failure_is_still_exit_0(store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(root: str, wait: float, capture: Any = None) -> int:
        raise RuntimeError("fork failed")

    monkeypatch.setattr(hooks, "spawn_background", boom)
    assert "fork failed" in hook("--store", str(store)).stderr


def test_foreground_runs_the_pass_inline(store: Path) -> None:
    add(store, created_at=days_ago(1))
    hook("--store", str(store), "--foreground")
    from memcli.store import log as run_log  # shared log and this machine's quiet runs

    assert [e["trigger"] for e in run_log.read_entries(store)] == ["session_end", "weekly"]  # then tick
    assert hook_log(store)[-1].endswith("run-background: done (ok)")


def test_foreground_with_broken_settings_logs_and_exits_0(store: Path) -> None:
    (store / "memcli.toml").write_text("[consolidation]\nmax_per_run = 'many'\n")
    hook("--store", str(store), "--foreground")
    failures = [line for line in hook_log(store) if "failed" in line]
    assert len(failures) == 2 and "max_per_run" in failures[0]


# ---------------------------------------------------------------- real processes


def run_hook(stdin: bytes, cwd: Path, *args: str, env: dict[str, str] | None = None,
             ) -> tuple[subprocess.CompletedProcess[bytes], float]:
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "memcli", "hook", "session-end", *args], input=stdin,
                          capture_output=True, cwd=cwd, env={**os.environ, **(env or {})}, timeout=30)
    return proc, time.monotonic() - start


def big_store(root: Path, n: int = 3000) -> None:
    """n small JSON memories in 30 folders of 100, a day old (protected: the run is quick
    to check and changes nothing); weekly already done so the tick has nothing due."""
    for i in range(n):
        folder = root / "agent" / f"agent{i % 30}"
        folder.mkdir(parents=True, exist_ok=True)
        data = {"id": f"mem_{i:06d}", "type": "semantic", "subtype": f"s{i % 7}",
                "scope": "agent", "scope_id": f"agent{i % 30}", "tags": [f"t{i}"],
                "created_by": f"agent:agent{i % 30}", "created_at": days_ago(1),
                "content": {"summary": f"memory {i} about topic {i * 7919 % 1000}"}}
        (folder / f"mem_{i:06d}.json").write_bytes(orjson.dumps(data))
    state = {"runs": {"weekly": {"run_id": "run_x", "at": "2026-11-22T00:00:00Z"}}}
    (root / "ops" / "state.json").write_bytes(orjson.dumps(state))


def wait_for(predicate: Any, seconds: float = 20.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return False


def test_hook_returns_fast_on_a_big_store_and_the_background_run_lands(store: Path) -> None:
    big_store(store)
    proc, elapsed = run_hook(payload(cwd=str(store)), Path("/"))
    assert proc.returncode == 0, proc.stderr
    assert elapsed < 1.5, f"the hook took {elapsed:.2f}s"
    from memcli.store import log as run_log  # shared log and this machine's quiet runs

    def session_end_logged() -> bool:
        try:
            return any(e["trigger"] == "session_end" for e in run_log.read_entries(store))
        except Exception:  # being written right now
            return False

    assert wait_for(session_end_logged), hook_log(store)
    assert wait_for(lambda: any("run-background: done" in x for x in hook_log(store))), hook_log(store)
    assert hook_log(store)[-1].endswith("done (ok)"), hook_log(store)


@pytest.mark.parametrize("stdin", [b"", b"\xff" * (2 * hooks.MAX_INPUT), b'{"cwd": ["x"]}'])
def test_real_hook_outside_a_store_exits_0(tmp_path: Path, stdin: bytes) -> None:
    proc, elapsed = run_hook(stdin, tmp_path)
    assert proc.returncode == 0 and b"no memory store" in proc.stderr
    assert elapsed < 1.5


def test_real_hook_with_unknown_flags_exits_0(tmp_path: Path) -> None:
    proc, _ = run_hook(b"", tmp_path, "--nope", "--foreground=maybe")
    assert proc.returncode == 0, proc.stderr


def test_hook_imports_nothing_heavy(tmp_path: Path) -> None:
    proc, _ = run_hook(b"", tmp_path, env={"PYTHONPROFILEIMPORTTIME": "1"})
    modules = {line.split("|")[-1].strip() for line in proc.stderr.decode().splitlines() if "|" in line}
    assert not {"anthropic", "httpx", "memcli.consolidate.llm_bridge"} & modules


# ---------------------------------------------------------------- lean start-up


HEAVY = {"typer", "click", "rich", "numpy", "yaml", "orjson", "frontmatter", "filelock", "rapidfuzz",
         "croniter", "memcli.config", "memcli.store.store", "memcli.store.model", "memcli.store.fsops",
         "dataclasses", "typing", "anthropic"}


def imported(proc: subprocess.CompletedProcess[bytes]) -> set[str]:
    return {line.split("|")[-1].strip() for line in proc.stderr.decode().splitlines() if "|" in line}


def test_the_hook_process_imports_only_what_it_needs(store: Path, tmp_path: Path) -> None:
    """No typer, rich, numpy, yaml (nor orjson, typing, dataclasses: milliseconds each);
    the engine is imported by the background pass only."""
    outside, _ = run_hook(b"", tmp_path, env={"PYTHONPROFILEIMPORTTIME": "1"})
    inside, _ = run_hook(payload(cwd=str(store)), tmp_path, env={"PYTHONPROFILEIMPORTTIME": "1"})
    assert outside.returncode == inside.returncode == 0
    assert "memcli.integrations.hooks" in imported(inside)
    assert not HEAVY & imported(outside), HEAVY & imported(outside)
    assert not HEAVY & imported(inside), HEAVY & imported(inside)
    assert wait_for(lambda: any("run-background: done" in x for x in hook_log(store)))


# ---------------------------------------------------------------- ops/hook.log


def test_the_log_rotates_past_its_cap(store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hooks, "LOG_MAX_BYTES", 1000)
    for n in range(100):
        assert hooks.log(store, f"line {n} " + "x" * 40)
    current, old = store / "ops" / "hook.log", store / "ops" / "hook.log.1"
    assert old.exists() and current.stat().st_size <= 1000 + 100 and old.stat().st_size <= 1000 + 100
    assert current.read_text().splitlines()[-1].endswith("line 99 " + "x" * 40)
    assert all(STAMPED.match(line) for line in current.read_text().splitlines() + old.read_text().splitlines())


def test_concurrent_writers_rotate_once_and_keep_lines_whole(store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    monkeypatch.setattr(hooks, "LOG_MAX_BYTES", 4000)
    errors: list[BaseException] = []

    def writer(k: int) -> None:
        try:
            for n in range(200):
                assert hooks.log(store, f"writer {k} line {n}")
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    lines = [line for name in ("hook.log.1", "hook.log") for line in (store / "ops" / name).read_text().splitlines()]
    assert lines and all(re.match(r"^\S+Z info \[\d+\] writer \d line \d+$", line) for line in lines)
    assert (store / "ops" / "hook.log").stat().st_size <= 4000 + 60


def test_the_log_is_never_written_through_a_symlink(store: Path, tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.txt"
    target.write_text("keep me\n")
    (store / "ops" / "hook.log").symlink_to(target)
    assert hooks.log(store, "hello") is False
    assert target.read_text() == "keep me\n"


def test_a_log_that_cannot_be_written_does_not_fail_the_hook(store: Path, spawned: list[Path]) -> None:
    (store / "ops" / "hook.log").mkdir()
    result = hook("--store", str(store))
    assert spawned == [store.resolve()] and result.exit_code == 0


def test_levels_and_multi_line_messages(store: Path) -> None:
    hooks.log(store, "first\nsecond", "error")
    lines = hook_log(store)
    assert len(lines) == 2 and all(" error [" in line for line in lines)
    assert lines[0].endswith("first") and lines[1].endswith("second")


# ---------------------------------------------------------------- bad input, each a clear line


def test_a_missing_session_cwd_is_noted_in_the_log(store: Path, spawned: list[Path], cwd: Path) -> None:
    result = hook(stdin=payload(cwd="/nonexistent/folder"), env={"CLAUDE_PROJECT_DIR": str(store)})
    assert spawned == [store.resolve()]
    assert "the session's cwd '/nonexistent/folder' is not an existing folder" in result.stderr
    assert any(" warn " in line and "/nonexistent/folder" in line for line in hook_log(store))


def test_an_oversized_payload_is_a_log_line(store: Path, spawned: list[Path], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(store)
    hook(stdin=b"{" + b" " * hooks.MAX_INPUT + b"}")
    assert spawned and any("over 1048576 bytes" in line for line in hook_log(store))


def test_a_named_folder_that_is_not_a_store_is_left_untouched(tmp_path: Path, spawned: list[Path]) -> None:
    project = tmp_path / "webapp"
    (project / "ops").mkdir(parents=True)
    result = hook("--store", str(project), stdin=payload(cwd=str(project)))
    assert spawned == [] and f"no memory store at {project}" in result.stderr
    assert list((project / "ops").iterdir()) == []


@pytest.mark.parametrize("raw, deep", [
    (b"[" * 65, True), (b"[" * 64 + b"]" * 64, False), (b'{"a": "' + b"[" * 500 + b'"}', False),
    (b'{"a": "\\"' + b"[" * 100 + b'"}', False), (b"[]" * 1000, False), (b"{" * 70, True),
])
def test_nesting_is_checked_before_parsing(raw: bytes, deep: bool) -> None:
    assert hooks._too_deep(raw) is deep


def test_an_unknown_hook_exits_0_with_a_note(store: Path, tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "memcli", "--store", str(store), "hook", "no-such-hook"],
                          input=b"{}", capture_output=True, timeout=60)
    assert proc.returncode == 0 and b"not a hook this memcli knows" in proc.stderr
    assert proc.stdout == b""  # stdout of a SessionStart/UserPromptSubmit hook reaches the model
    assert any("no-such-hook" in line and " warn " in line for line in hook_log(store))
    usage = subprocess.run([sys.executable, "-m", "memcli", "hook"], capture_output=True, timeout=60)
    assert b"session-end" in usage.stdout


def test_the_start_line_is_written_before_the_pass_is_started(store: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """A hook cancelled while starting the pass still leaves a trace for `memcli status`."""
    def killed(root: str, wait: float) -> int:
        raise KeyboardInterrupt  # what a cancel looks like from inside

    monkeypatch.setattr(hooks, "spawn_background", killed)
    with pytest.raises(KeyboardInterrupt):
        hooks.session_end(str(store), None)
    assert "session-end: start (session -" in hook_log(store)[-1]
