"""Capture (SPEC 12): one episodic memory per session, idempotent, masked, undoable, bounded."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from memcli.capture import capture, transcript
from memcli.capture import render as capture_render
from memcli.config import settings_from_dict
from memcli.consolidate import undo
from memcli.errors import ConfigError, LockTimeoutError, MemcliError
from memcli.store import log
from memcli.store.store import Store
from tests.conftest import NOW, all_files, assert_invariants, load
from tests.llm_server import FakeAnthropic, Reply, error_body, fake_anthropic

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import capture_samples  # noqa: E402
from bench.capture_transcript import Transcript  # noqa: E402

HEADINGS = ["## What happened", "## Who was involved", "## Outcome", "## Key learnings"]


def session(turns: int = 1, sid: str = "sess-1") -> Transcript:
    t = Transcript(sid, "/w/app", "fix/dates", "2026-11-20T10:00:00.000Z")
    t.user("Fix the failing date test in tests/test_dates.py")
    t.bash("python -m pytest -q tests/test_dates.py", "E   AssertionError: assert 1 == 2\n1 failed", exit_code=1)
    t.say("The parser drops the time zone.")
    t.edit("/w/app/src/dates.py", "a", "b")
    t.bash("python -m pytest -q tests/test_dates.py", "3 passed")
    t.say("Fixed: the parser keeps the zone; 3 tests pass.")
    for n in range(1, turns):
        t.user(f"Also handle case {n}")
        t.edit(f"/w/app/src/case{n}.py", "x", "y")
        t.say(f"Handled case {n}.")
    return t


def write(tmp_path: Path, t: Transcript | str, name: str = "t.jsonl") -> Path:
    path = tmp_path / name
    path.write_text(t if isinstance(t, str) else t.jsonl())
    return path


def run(store: Path, path: Path, **kw: Any) -> capture.CaptureResult:
    return capture.capture_transcript(Store(store), path, **kw)


def memories(store: Path, agent: str = "claude") -> list[dict[str, Any]]:
    return [load(p) for p in sorted((store / "agent" / agent).glob("mem_*"))]


# ---------------------------------------------------------------- the memory


def test_capture_writes_one_episodic_memory(store: Path, tmp_path: Path) -> None:
    result = run(store, write(tmp_path, session()))
    assert result.action == "created" and result.method == "extractive" and result.run_id
    [mem] = memories(store)
    assert (mem["type"], mem["subtype"], mem["scope"], mem["scope_id"]) == ("episodic", "session", "agent", "claude")
    assert mem["tags"] == ["session", "captured"] and mem["created_by"] == "agent:claude"
    assert mem["source"] == {"kind": "claude-code", "session_id": "sess-1", "messages": result.messages}
    assert mem["content"]["summary"] == "Fix the failing date test in tests/test_dates.py"
    details = mem["content"]["details"]
    assert [h for h in HEADINGS if h in details] == HEADINGS
    assert [details.index(h) for h in HEADINGS] == sorted(details.index(h) for h in HEADINGS)
    assert "src/dates.py (edited)" in details and "`python -m pytest -q tests/test_dates.py`" in details
    assert "AssertionError: assert 1 == 2" in details and "Fixed by editing src/dates.py" in details
    assert mem["created_at"] == mem["updated_at"] == NOW and mem["access_count"] == 0
    assert mem["content"]["timeline"][0] == {"at": "2026-11-20T10:00:00Z", "event": "session started"}
    assert mem["id"] == result.memory_id and result.path == f"agent/claude/{result.memory_id}.json"
    assert_invariants(store)


def test_summary_is_the_first_request_in_one_line(store: Path, tmp_path: Path) -> None:
    t = Transcript("s", "/w", "", "2026-11-20T10:00:00.000Z")
    t.user("  Please refactor\n\nthe   billing module " + "and more words " * 40)
    t.say("ok").user("second").say("done")
    run(store, write(tmp_path, t))
    summary = memories(store)[0]["content"]["summary"]
    assert summary.startswith("Please refactor the billing module") and "\n" not in summary
    assert len(summary) <= capture_render.SUMMARY_CHARS


def test_agent_option_and_default(store: Path, tmp_path: Path) -> None:
    run(store, write(tmp_path, session()), agent="coder")
    assert memories(store, "coder")[0]["created_by"] == "agent:coder"
    with pytest.raises(MemcliError, match="bad agent id"):
        run(store, write(tmp_path, session()), agent="../x")


def test_same_transcript_gives_the_same_text(store: Path, tmp_path: Path) -> None:
    path = write(tmp_path, capture_samples.feature_across_files()[0])
    first = run(store, path, dry_run=True).record
    second = run(store, path, dry_run=True).record
    assert first == second and first is not None


def test_details_are_capped_and_say_what_they_left_out(store: Path, tmp_path: Path) -> None:
    t = session(turns=300)
    for n in range(300):
        t.bash(f"./tools/check-{n}.sh --strict", "ok")
    run(store, write(tmp_path, t))
    details = memories(store)[0]["content"]["details"]
    cap = Store(store).settings.capture.max_details_chars
    assert len(details) < cap and [h for h in HEADINGS if h in details] == HEADINGS
    assert "more" in details and "Fix the failing date test" in details and "src/dates.py" in details


def test_the_smallest_details_cap_keeps_the_four_sections(store: Path, tmp_path: Path) -> None:
    (store / "memcli.toml").write_text("[consolidation]\nindex_pause_ms = 0\n[capture]\nmax_details_chars = 500\n")
    run(store, write(tmp_path, capture_samples.long_session()[0]))
    details = memories(store)[0]["content"]["details"]
    assert len(details) < 500 and [h for h in HEADINGS if h in details] == HEADINGS
    assert "Add rate limiting" in details  # the first request is the last thing to go


# ---------------------------------------------------------------- one memory per session


def test_capturing_again_changes_nothing(store: Path, tmp_path: Path) -> None:
    path = write(tmp_path, session())
    run(store, path)
    before = all_files(store)
    again = run(store, path)
    assert again.action == "unchanged" and again.run_id is None
    assert all_files(store) == before


def test_a_resumed_session_updates_the_same_memory(store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = run(store, write(tmp_path, session(turns=1)))
    mem_path = store / first.path  # type: ignore[operator]
    data = load(mem_path)
    data.update(priority="high", tags=[*data["tags"], "billing"], access_count=3)
    mem_path.write_bytes(orjson.dumps(data))
    monkeypatch.setenv("MEMCLI_NOW", "2026-11-23T09:00:00Z")
    second = run(store, write(tmp_path, session(turns=3)))
    assert second.action == "updated" and second.memory_id == first.memory_id
    [mem] = memories(store)
    assert mem["priority"] == "high" and mem["tags"] == ["session", "captured", "billing"] and mem["access_count"] == 3
    assert mem["created_at"] == NOW and mem["updated_at"] == "2026-11-23T09:00:00Z"
    assert "Also handle case 2" in mem["content"]["details"] and mem["source"]["messages"] == second.messages
    assert [e["trigger"] for e in log.read_entries(store)] == ["capture", "capture"]
    assert_invariants(store)


def test_a_shorter_transcript_never_overwrites_a_longer_capture(store: Path, tmp_path: Path) -> None:
    run(store, write(tmp_path, session(turns=3)))
    before = all_files(store)
    result = run(store, write(tmp_path, session(turns=1), "short.jsonl"))
    assert result.action == "unchanged" and "longer transcript" in result.reason
    assert all_files(store) == before


def test_sessions_are_told_apart_by_id(store: Path, tmp_path: Path) -> None:
    run(store, write(tmp_path, session(sid="a"), "a.jsonl"))
    run(store, write(tmp_path, session(sid="b"), "b.jsonl"))
    assert sorted(m["source"]["session_id"] for m in memories(store)) == ["a", "b"]


def test_the_hooks_session_id_wins_and_names_the_memory(store: Path, tmp_path: Path) -> None:
    path = write(tmp_path, session(sid="from-file"))
    run(store, path, session_id="from-hook")
    assert memories(store)[0]["source"]["session_id"] == "from-hook"
    assert run(store, path, session_id="from-hook").action == "unchanged"


def test_a_resumed_session_under_a_new_id_finds_its_memory(store: Path, tmp_path: Path) -> None:
    run(store, write(tmp_path, session(sid="old")))
    t = session(turns=2, sid="old")
    t.session_id = "new"  # Claude Code continues the file under the new session's id
    t.user("more work under the new id").say("done")
    result = run(store, write(tmp_path, t, "new.jsonl"))
    assert result.action == "updated" and len(memories(store)) == 1


def test_a_protected_session_memory_is_left_alone(store: Path, tmp_path: Path) -> None:
    first = run(store, write(tmp_path, session()))
    data = load(store / first.path)  # type: ignore[operator]
    data["tags"].append("permanent")
    (store / first.path).write_bytes(orjson.dumps(data))  # type: ignore[operator]
    before = all_files(store)
    result = run(store, write(tmp_path, session(turns=2)))
    assert result.action == "protected" and all_files(store) == before


def test_a_session_file_without_an_id_is_known_by_its_name(store: Path, tmp_path: Path) -> None:
    text = "".join(json.dumps({"role": r, "content": c}) + "\n" for r, c in
                   [("user", "Question one"), ("assistant", "Answer one"), ("user", "Question two"),
                    ("assistant", "Answer two")])
    run(store, write(tmp_path, text, "chat-42.jsonl"))
    assert memories(store)[0]["source"] == {"kind": "jsonl", "session_id": "chat-42", "messages": 4}


# ---------------------------------------------------------------- trivial sessions


def small(messages: int) -> Transcript:
    t = Transcript("tiny", "/w", "", "2026-11-20T10:00:00.000Z")
    t.user("hello")
    for n in range(messages - 1):
        t.say(f"reply {n}")
    return t


@pytest.mark.parametrize("messages, action", [(3, "skipped"), (4, "created"), (5, "created")])
def test_min_messages_edge(store: Path, tmp_path: Path, messages: int, action: str) -> None:
    result = run(store, write(tmp_path, small(messages)))
    assert result.action == action and result.messages == messages
    assert len(memories(store)) == (action == "created")
    if action == "skipped":
        assert "fewer than [capture] min_messages (4)" in result.reason and not (store / "ops" / "consolidation-log.json").exists()


def test_min_messages_setting(store: Path, tmp_path: Path) -> None:
    (store / "memcli.toml").write_text("[consolidation]\nindex_pause_ms = 0\n[capture]\nmin_messages = 2\n")
    assert run(store, write(tmp_path, small(2))).action == "created"


def test_no_request_from_the_user_is_skipped(store: Path, tmp_path: Path) -> None:
    t = Transcript("s", "/w", "", "2026-11-20T10:00:00.000Z")
    t.raw({"type": "user", "isMeta": True, "message": {"role": "user", "content": "meta"}})
    for n in range(6):
        t.say(f"text {n}")
    result = run(store, write(tmp_path, t))
    assert result.action == "skipped" and result.reason == "no request from the user in the transcript"


def test_an_empty_or_garbage_transcript_is_skipped_not_an_error(store: Path, tmp_path: Path) -> None:
    assert run(store, write(tmp_path, "")).action == "skipped"
    result = run(store, write(tmp_path, "garbage\n{\n[]\n", "g.jsonl"))
    assert result.action == "skipped" and "skipped 3 of 3 transcript line(s)" in result.notes[0]


@pytest.mark.parametrize("raw, message", [
    ({"enabled": "yes"}, "capture.enabled must be true or false"),
    ({"min_messages": -1}, "capture.min_messages must be in"),
    ({"min_messages": 2.5}, "capture.min_messages must be an integer"),
    ({"max_details_chars": 100}, "capture.max_details_chars must be in"),
    ({"agent": "x"}, "unknown key capture.agent"),
])
def test_capture_settings_are_checked(raw: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        settings_from_dict({"capture": raw})


def test_capture_settings_defaults() -> None:
    cfg = settings_from_dict({}).capture
    assert (cfg.enabled, cfg.min_messages, cfg.max_details_chars) == (True, 4, 4000)


# ---------------------------------------------------------------- the transcript is only read


def test_the_transcript_is_never_written_to(store: Path, tmp_path: Path) -> None:
    path = write(tmp_path, capture_samples.with_subagent()[0])
    before, stat = path.read_bytes(), path.stat()
    run(store, path)
    run(store, path)
    assert path.read_bytes() == before and path.stat().st_mtime_ns == stat.st_mtime_ns
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["store", "t.jsonl"])


def test_missing_transcript_is_an_error_naming_it(store: Path, tmp_path: Path) -> None:
    with pytest.raises(transcript.TranscriptError, match=r"nope\.jsonl: no such transcript"):
        run(store, tmp_path / "nope.jsonl")
    assert not (store / "agent").exists()


# ---------------------------------------------------------------- secrets


SECRETS = capture_samples.SECRETS


def secret_session() -> Transcript:
    """Secrets everywhere a transcript can hold them."""
    t, _ = capture_samples.migration_with_secrets()
    t.user(f"Also: password={SECRETS[0]} and key {SECRETS[5]}")
    t.bash(f"curl -H 'Authorization: Bearer {SECRETS[4]}' https://api.example.com/{SECRETS[3]}",
           f"error: token {SECRETS[2]} rejected", exit_code=1)
    t.say(f"The token {SECRETS[2]} was rejected; AWS key {SECRETS[3]}.")
    t.edit(f"/home/max/app/config/{SECRETS[3]}.env", "a", "b")
    t.tool("Task", {"subagent_type": "x", "description": f"use {SECRETS[5]}", "prompt": SECRETS[1]},
           f"report with password={SECRETS[0]}")
    t.todos([("pending", f"rotate {SECRETS[5]}")])
    t.tool("WebFetch", {"url": f"https://x.example.com/?token={SECRETS[2]}"}, "page")
    return t


def assert_no_secret(root: Path) -> None:
    for path in root.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            for secret in SECRETS[:6]:
                assert secret.encode() not in data, f"{secret[:6]}… leaked into {path.relative_to(root)}"


def test_no_planted_secret_reaches_any_file_of_the_store(store: Path, tmp_path: Path) -> None:
    result = run(store, write(tmp_path, secret_session()), session_id=SECRETS[3])  # an id shaped like a key
    assert result.action == "created"
    assert_no_secret(store)
    details = memories(store)[0]["content"]["details"]
    assert "[[MEMCLI_SECRET_" in details and "password authentication failed" in details
    assert memories(store)[0]["source"]["session_id"].startswith("sha256:")
    longer = secret_session().user(f"one more thing: {SECRETS[1]}").say("done")
    assert run(store, write(tmp_path, longer, "again.jsonl"), session_id=SECRETS[3]).action == "updated"
    assert_no_secret(store)


def test_no_secret_in_the_hook_log(store: Path, tmp_path: Path) -> None:
    path = write(tmp_path, secret_session(), f"{SECRETS[2]}.jsonl")
    line = capture.capture_from_hook(store, {"transcript_path": str(path), "session_id": SECRETS[3]})
    missing = capture.capture_from_hook(store, {"transcript_path": str(tmp_path / f"{SECRETS[5]}.jsonl")})
    assert line.startswith("capture: session sha256:") and missing.startswith("capture failed:")
    assert SECRETS[2] not in line + missing and SECRETS[5] not in missing
    assert_no_secret(store)


# ---------------------------------------------------------------- a logged run: undo, lock, crash


def test_a_capture_is_a_logged_run_that_undo_takes_back(store: Path, tmp_path: Path) -> None:
    created = run(store, write(tmp_path, session()))
    [entry] = log.read_entries(store)
    assert entry["trigger"] == "capture" and entry["actions"] == [
        {"type": "capture", "memory_id": created.memory_id, "session_id": "sess-1", "result": "created",
         "method": "extractive"}]
    assert entry["stats"]["memory_count"] == 1
    updated = run(store, write(tmp_path, session(turns=2), "longer.jsonl"))
    undo.undo_run(Store(store), updated.run_id or "")  # the update: earlier bytes back
    assert "Also handle case 1" not in memories(store)[0]["content"]["details"]
    undo.undo_run(Store(store), created.run_id or "")  # the creation: archived as undone
    assert memories(store) == []
    archived = load(next((store / "archive").glob(f"{created.memory_id}*")))
    assert archived["archive_reason"] == "undone"
    assert_invariants(store)


def test_capture_waits_for_the_lock(store: Path, tmp_path: Path) -> None:
    path = write(tmp_path, session())
    with Store(store).lock(1), pytest.raises(LockTimeoutError):
        run(store, path, wait=0)
    assert not (store / "agent").exists()


@pytest.mark.slow
def test_a_capture_killed_at_any_write_is_recovered(store: Path, tmp_path: Path) -> None:
    """MEMCLI_CRASH_AT=N stops the capture just before its Nth file-system change; the next
    writing command finishes or rolls it back: the memory is there whole, or not at all.
    Every N of the k changes a capture makes (a sample by default: tests/sweep.py), each in
    a process of its own (tests/forked.py)."""
    from memcli.store import fsops
    from tests import forked, sweep

    path = write(tmp_path, session())
    expected = run(store, path, dry_run=True).record
    start = fsops.change_count()
    run(store, path)
    k = fsops.change_count() - start
    assert k > 3
    failed = []
    for crash_at in sweep.points(1, k + 1):
        _reset(store)
        # the interpreter's start-up variables kept: the zygote of every other forked command
        env = {**{k: v for k, v in os.environ.items() if k.startswith(("PYTHON", "LANG", "LC_"))},
               "MEMCLI_NOW": NOW, "MEMCLI_CRASH_AT": str(crash_at), "PATH": "/usr/bin:/bin"}
        proc = forked.run(["--store", str(store), "capture", str(path)], env=env, cwd=ROOT, timeout=60)
        if crash_at == k + 1:
            assert proc.returncode == 0, proc.stderr
            assert len(memories(store)) == 1
            continue
        if proc.returncode != 70:
            failed.append((crash_at, proc.returncode, proc.stderr[-300:]))
            continue
        with Store(store).writing(1):  # the next writing command recovers
            pass
        live = memories(store)
        assert len(live) <= 1 and all(m["content"] == expected["content"] for m in live)  # type: ignore[index]
        assert_invariants(store)
        assert run(store, path).action in ("created", "unchanged") and len(memories(store)) == 1
    assert not failed, f"crash points of {k} ({sweep.label()}) that did not crash: {failed}"


def _reset(store: Path) -> None:
    import shutil

    for sub in ("agent", "archive", "ops", ".cache"):  # (.cache: caches a run leaves, e.g. the log's mark)
        shutil.rmtree(store / sub, ignore_errors=True)
    for sub in ("archive", "ops"):
        (store / sub).mkdir()


# ---------------------------------------------------------------- the LLM


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeAnthropic]:
    with fake_anthropic() as state:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key-not-secret")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", state.url)
        yield state


LLM_TEXT = ("## What happened\nThe agent fixed the date parser after a failing test.\n\n## Who was involved\n"
            "The user and agent claude.\n\n## Outcome\nTests pass; token [[MEMCLI_SECRET_1]] noted. Also "
            f"{SECRETS[4]}.\n\n## Key learnings\nThe parser dropped the time zone.")


@pytest.mark.slow
def test_the_llm_writes_the_memory_when_on(store: Path, tmp_path: Path, server: FakeAnthropic) -> None:
    server.push_text(LLM_TEXT)
    result = run(store, write(tmp_path, secret_session()), llm=True)
    assert result.method == "llm"
    details = memories(store)[0]["content"]["details"]
    assert details.startswith("## What happened\nThe agent fixed the date parser")
    assert SECRETS[4] not in details  # even a secret the LLM made up is masked
    [request] = server.requests
    for secret in SECRETS[:6]:
        assert secret not in request.raw  # nothing secret left the machine
    assert_no_secret(store)
    assert log.read_entries(store)[0]["actions"][0]["method"] == "llm"


def test_the_same_transcript_again_makes_no_llm_call(store: Path, tmp_path: Path, server: FakeAnthropic) -> None:
    server.push_text(LLM_TEXT)
    path = write(tmp_path, session())
    assert run(store, path, llm=True).method == "llm"
    again = run(store, path, llm=True)
    assert again.action == "unchanged" and "already holds a capture of these" in again.reason
    assert len(server.requests) == 1


def test_the_llm_setting_turns_it_on(store: Path, tmp_path: Path, server: FakeAnthropic) -> None:
    (store / "memcli.toml").write_text("[consolidation]\nindex_pause_ms = 0\n[llm]\nenabled = true\n")
    server.push_text(LLM_TEXT)
    assert run(store, write(tmp_path, session())).method == "llm"
    assert run(store, write(tmp_path, session(sid="other"), "o.jsonl"), llm=False).method == "extractive"


@pytest.mark.parametrize("reply", [Reply(500, error_body("api_error")), Reply(200, {"bad": "shape"}),
                                   Reply(200, "not json at all")])
def test_a_failed_llm_falls_back_to_the_extractive_text(store: Path, tmp_path: Path, server: FakeAnthropic,
                                                         reply: Reply) -> None:
    server.push(reply)
    path = write(tmp_path, session())
    expected = run(store, path, llm=False, dry_run=True).record
    result = run(store, path, llm=True)
    assert result.method == "extractive" and any("extractive" in n for n in result.notes)
    assert expected is not None and memories(store)[0]["content"] == expected["content"]


def test_an_llm_budget_of_zero_makes_no_call(store: Path, tmp_path: Path, server: FakeAnthropic) -> None:
    (store / "memcli.toml").write_text("[consolidation]\nindex_pause_ms = 0\n[llm]\nmax_calls_per_run = 0\n")
    result = run(store, write(tmp_path, session()), llm=True)
    assert result.method == "extractive" and server.requests == []


def test_llm_on_without_a_key_is_a_notice(store: Path, tmp_path: Path) -> None:
    result = run(store, write(tmp_path, session()), llm=True)
    assert result.method == "extractive" and any("ANTHROPIC_API_KEY" in n for n in result.notes)
