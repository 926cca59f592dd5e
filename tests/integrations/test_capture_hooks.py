"""Capture from the hooks (SPEC 12): the SessionEnd background pass captures first; the
PreCompact hook captures in the background; both exit 0 whatever happens."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
from typer.testing import CliRunner

from memcli.capture import capture
from memcli.cli import app
from memcli.integrations import capture_hook, hooks
from tests.conftest import NOW

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.capture_transcript import Transcript  # noqa: E402

runner = CliRunner()


def session(sid: str = "sess-1", turns: int = 1) -> Transcript:
    t = Transcript(sid, "/w/app", "main", "2026-11-20T10:00:00.000Z")
    t.user("Make the build green")
    t.bash("npm run build", "src/a.ts(1,2): error TS2345: Argument", exit_code=2)
    t.edit("/w/app/src/a.ts", "x", "y").bash("npm run build", "built")
    t.say("The build is green again.")
    for n in range(1, turns):
        t.user(f"And task {n}").say(f"Done {n}.")
    return t


def transcript(tmp_path: Path, t: Transcript | None = None, name: str = "sess-1.jsonl") -> Path:
    path = tmp_path / name
    path.write_text((t or session()).jsonl())
    return path


def payload(path: Path | str | None, **fields: Any) -> bytes:
    body: dict[str, Any] = {"session_id": "sess-1", "hook_event_name": "SessionEnd", "reason": "logout", **fields}
    if path is not None:
        body["transcript_path"] = str(path)
    return orjson.dumps(body)


def hook_log(root: Path) -> list[str]:
    path = root / "ops" / hooks.LOG_NAME
    return path.read_text().splitlines() if path.exists() else []


def captured(root: Path) -> list[dict[str, Any]]:
    return [orjson.loads(p.read_bytes()) for p in sorted((root / "agent" / "claude").glob("mem_*.json"))]


def invoke(*args: str, stdin: bytes = b"") -> Any:
    result = runner.invoke(app, list(args), input=stdin)
    assert result.exit_code == 0, (result.stdout, result.stderr, result.exception)
    return result


# ---------------------------------------------------------------- capture_from_hook


def test_capture_from_hook_never_raises(store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert "no transcript_path" in capture.capture_from_hook(store, {})
    assert "not an absolute path" in capture.capture_from_hook(store, {"transcript_path": "rel.jsonl"})
    assert "no such transcript" in capture.capture_from_hook(store, {"transcript_path": str(tmp_path / "x.jsonl")})
    assert "a folder" in capture.capture_from_hook(store, {"transcript_path": str(tmp_path)})
    (store / "memcli.toml").write_text("[capture]\nmin_messages = 'four'\n")
    assert "capture.min_messages must be an integer" in capture.capture_from_hook(
        store, {"transcript_path": str(transcript(tmp_path))})
    monkeypatch.setattr(capture, "capture_transcript", lambda *a, **k: 1 / 0)
    (store / "memcli.toml").write_text("")
    line = capture.capture_from_hook(store, {"transcript_path": str(transcript(tmp_path))})
    assert line.startswith("capture crashed: ZeroDivisionError") and "Traceback" in line


def test_capture_from_hook_is_off_when_disabled_but_by_hand_still_works(store: Path, tmp_path: Path) -> None:
    (store / "memcli.toml").write_text("[consolidation]\nindex_pause_ms = 0\n[capture]\nenabled = false\n")
    path = transcript(tmp_path)
    assert capture.capture_from_hook(store, {"transcript_path": str(path)}) == \
        "capture: off ([capture] enabled = false)"
    assert captured(store) == []
    invoke("--store", str(store), "capture", str(path))
    assert len(captured(store)) == 1


def test_capture_from_hook_writes_the_memory_and_one_line(store: Path, tmp_path: Path) -> None:
    path = transcript(tmp_path)
    line = capture.capture_from_hook(store, {"transcript_path": str(path), "session_id": "hook-id",
                                             "reason": "logout"})
    [mem] = captured(store)
    assert line.startswith(f"capture: session hook-id: created {mem['id']} in agent/claude") and "\n" not in line
    assert mem["source"]["session_id"] == "hook-id" and "Session ended (logout)." in mem["content"]["details"]


# ---------------------------------------------------------------- SessionEnd


def test_session_end_foreground_captures_before_the_pass(store: Path, tmp_path: Path) -> None:
    path = transcript(tmp_path)
    before = path.read_bytes()
    invoke("hook", "session-end", "--store", str(store), "--foreground", stdin=payload(path))
    [mem] = captured(store)
    from memcli.store import log as run_log  # shared log and this machine's quiet runs

    entries = run_log.read_entries(store)
    assert [e["trigger"] for e in entries] == ["capture", "session_end", "weekly"]
    lines = hook_log(store)
    assert any(f"run-background: capture: session sess-1: created {mem['id']}" in x for x in lines)
    assert lines[-1].endswith("run-background: done (ok)")
    assert path.read_bytes() == before


def test_session_end_with_a_missing_transcript_logs_and_goes_on(store: Path, tmp_path: Path) -> None:
    invoke("hook", "session-end", "--store", str(store), "--foreground", stdin=payload(tmp_path / "gone.jsonl"))
    lines = hook_log(store)
    assert any("run-background: capture failed:" in x and "gone.jsonl: no such transcript" in x for x in lines)
    assert lines[-1].endswith("run-background: done (ok)") and captured(store) == []


def test_session_end_without_a_transcript_does_not_capture(store: Path) -> None:
    invoke("hook", "session-end", "--store", str(store), "--foreground", stdin=payload(None))
    assert not any("capture" in x for x in hook_log(store)) and captured(store) == []


def test_session_end_passes_the_transcript_to_the_background_process(
        store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[list[str]] = []

    class FakePopen:
        pid = 4242

        def __init__(self, cmd: list[str], **_: Any) -> None:
            started.append(cmd)

    import subprocess

    monkeypatch.setattr(subprocess, "Popen", FakePopen)
    path = transcript(tmp_path)
    invoke("hook", "session-end", "--store", str(store), stdin=payload(path))
    [cmd] = started
    assert cmd[cmd.index("run-background") + 1:] == ["--transcript", str(path), "--session-id", "sess-1",
                                                     "--reason", "logout"]


def test_run_background_captures_the_transcript_it_is_given(store: Path, tmp_path: Path) -> None:
    path = transcript(tmp_path)
    invoke("--store", str(store), "hook", "run-background", "--transcript", str(path), "--session-id", "bg")
    assert captured(store)[0]["source"]["session_id"] == "bg"


# ---------------------------------------------------------------- PreCompact


def test_pre_compact_foreground_captures_and_session_end_updates_the_same_memory(
        store: Path, tmp_path: Path) -> None:
    path = transcript(tmp_path)
    invoke("hook", "pre-compact", "--store", str(store), "--foreground",
           stdin=payload(path, hook_event_name="PreCompact", trigger="auto"))
    [first] = captured(store)
    assert any(f"pre-compact: capture: session sess-1: created {first['id']}" in x for x in hook_log(store))
    path.write_text(session(turns=3).jsonl())  # the session goes on after the compaction
    invoke("hook", "session-end", "--store", str(store), "--foreground", stdin=payload(path))
    [second] = captured(store)
    assert second["id"] == first["id"] and "And task 2" in second["content"]["details"]


def test_pre_compact_background_start(store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[list[str]] = []

    class FakePopen:
        pid = 77

        def __init__(self, cmd: list[str], **kw: Any) -> None:
            assert kw["start_new_session"] and kw["stdin"] == subprocess.DEVNULL
            started.append(cmd)

    monkeypatch.setattr(capture_hook.subprocess, "Popen", FakePopen)
    path = transcript(tmp_path)
    result = invoke("--json", "hook", "pre-compact", "--store", str(store), stdin=payload(path))
    report = orjson.loads(result.stdout)
    assert report["started"] and report["pid"] == 77 and not report["foreground"]
    [cmd] = started
    assert cmd[cmd.index("capture-background") + 1:] == ["--transcript", str(path), "--session-id", "sess-1"]
    assert captured(store) == []  # nothing captured in the foreground


@pytest.mark.parametrize("stdin", [b"", b"{broken", orjson.dumps({"session_id": "x"})])
def test_pre_compact_without_a_transcript_logs_and_exits_0(store: Path, stdin: bytes) -> None:
    invoke("hook", "pre-compact", "--store", str(store), stdin=stdin)
    assert any("pre-compact: the hook input names no transcript_path" in x for x in hook_log(store))


def test_pre_compact_outside_a_store_exits_0(tmp_path: Path, cwd: Path) -> None:
    result = invoke("hook", "pre-compact", stdin=payload(transcript(tmp_path)))
    assert "no memory store" in result.stderr


def test_capture_background_logs_what_it_did(store: Path, tmp_path: Path) -> None:
    path = transcript(tmp_path)
    invoke("--store", str(store), "hook", "capture-background", "--transcript", str(path), "--session-id", "s9",
           "--bogus")
    assert captured(store)[0]["source"]["session_id"] == "s9"
    assert any("pre-compact: ignored unknown arguments: --bogus" in x for x in hook_log(store))
    invoke("--store", str(store), "hook", "capture-background", "--transcript", str(tmp_path / "no.jsonl"))
    assert "no such transcript" in hook_log(store)[-1]


# ---------------------------------------------------------------- real processes


def run(args: list[str], stdin: bytes, cwd: Path) -> tuple[subprocess.CompletedProcess[bytes], float]:
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "memcli", *args], input=stdin, capture_output=True, cwd=cwd,
                          env={**os.environ, "MEMCLI_NOW": NOW}, timeout=60)
    return proc, time.monotonic() - start


def test_real_pre_compact_returns_fast_and_the_capture_lands(store: Path, tmp_path: Path) -> None:
    path = transcript(tmp_path)
    proc, elapsed = run(["hook", "pre-compact"], payload(path, cwd=str(store)), Path("/"))
    assert proc.returncode == 0, proc.stderr
    assert elapsed < 1.5, f"the hook took {elapsed:.2f}s"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not captured(store):
        time.sleep(0.1)
    assert len(captured(store)) == 1, hook_log(store)


def test_real_pre_compact_with_garbage_exits_0(tmp_path: Path) -> None:
    for stdin in (b"", b"\xff" * 10_000, b'{"transcript_path": 5}'):
        proc, _ = run(["hook", "pre-compact", "--what"], stdin, tmp_path)
        assert proc.returncode == 0


def test_pre_compact_imports_nothing_heavy(store: Path, tmp_path: Path) -> None:
    """The foreground of the hook: no typer, rich or LLM, and not the capture itself."""
    code = ("import sys, io; from memcli.integrations import capture_hook; "
            "capture_hook.spawn_capture = lambda *a, **k: 1; "
            "sys.stdin = io.StringIO(sys.argv[2]); from memcli.cli.fast import dispatch; "
            "assert dispatch(['hook', 'pre-compact', '--store', sys.argv[1]]) == 0; "
            "bad = [m for m in ('typer', 'rich', 'anthropic', 'numpy', 'memcli.capture.capture', "
            "'memcli.capture.transcript', 'memcli.consolidate.engine') if m in sys.modules]; "
            "print(bad)")
    proc = subprocess.run([sys.executable, "-c", code, str(store), payload(transcript(tmp_path)).decode()],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"
