"""Reading transcripts (SPEC 12): Claude Code's JSONL, the Codex CLI rollout and the minimal
generic shape, as a bounded stream; bad lines skipped, never a crash, never a hang."""

from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from memcli.capture import commands as cmds
from memcli.capture import transcript
from memcli.capture.session import Session

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.capture_transcript import Transcript  # noqa: E402


def session_of(tmp_path: Path, text: str | bytes, name: str = "s.jsonl") -> Session:
    path = tmp_path / name
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return transcript.read_session(path)


def lines(*records: dict[str, Any]) -> str:
    return "".join(json.dumps(r) + "\n" for r in records)


def basic() -> Transcript:
    t = Transcript("sess-1", "/w/app", "main", "2026-11-20T10:00:00.000Z")
    t.user("Fix the failing date test")
    t.bash("pytest -q tests/test_dates.py", "E   AssertionError: assert 1 == 2\n1 failed", exit_code=1)
    t.say("The parser drops the zone.")
    t.edit("/w/app/src/dates.py", "a", "b")
    t.bash("pytest -q tests/test_dates.py", "3 passed")
    t.say("Fixed the parser; the tests pass.")
    return t


# ---------------------------------------------------------------- Claude Code


def test_claude_session_digest(tmp_path: Path) -> None:
    s = session_of(tmp_path, basic().jsonl())
    assert s.kind == "claude-code" and s.session_ids == ["sess-1"] and s.cwd == "/w/app"
    assert s.branches == ["main"] and s.models and s.versions == ["2.1.197"]
    assert [r.text for r in s.requests] == ["Fix the failing date test"]
    assert s.messages == 9  # 1 prompt, 4 assistant messages with a tool call or text... and 3 results
    command = s.commands["pytest -q tests/test_dates.py"]
    assert (command.count, command.failures, command.last_ok, command.kind) == (2, 1, True, "test")
    assert list(s.files) == ["/w/app/src/dates.py"] and s.files["/w/app/src/dates.py"].ops == ["edited"]
    [error] = s.errors
    assert error.excerpt == "E   AssertionError: assert 1 == 2"
    assert error.diagnosis == "The parser drops the zone."
    assert error.fix_files == ["/w/app/src/dates.py"] and error.resolved_by == "pytest -q tests/test_dates.py"
    assert s.last_text == "Fixed the parser; the tests pass."
    assert s.started == "2026-11-20T10:00:00.000Z" and s.ended and s.ended > s.started


def test_one_api_message_split_over_records_counts_once(tmp_path: Path) -> None:
    t = Transcript("s", "/w", "", "2026-11-20T10:00:00.000Z")
    t.user("hi")
    t.say("Let me look.", thinking="hmm")  # two records (thinking, text), one message id
    assert session_of(tmp_path, t.jsonl()).messages == 2


def test_what_is_not_a_request(tmp_path: Path) -> None:
    t = Transcript("s", "/w", "", "2026-11-20T10:00:00.000Z")
    t.user("Real request")
    base = {"type": "user", "sessionId": "s", "timestamp": "2026-11-20T10:00:05Z"}
    for content in ("<local-command-stdout>ok</local-command-stdout>", "<system-reminder>x</system-reminder>",
                    "<task-notification>done</task-notification>", "Caveat: The messages below were generated",
                    "<command-name>/clear</command-name>\n<command-args></command-args>"):
        t.raw({**base, "message": {"role": "user", "content": content}})
    t.raw({**base, "isMeta": True, "message": {"role": "user", "content": "meta text"}})
    t.compact("The summary of the earlier conversation.")
    t.raw({"type": "attachment", "attachment": {"type": "queued_command", "prompt": "<task-notification>x",
                                                "commandMode": "task-notification"}})
    t.raw({"type": "attachment", "attachment": {"type": "queued_command", "prompt": "bot text",
                                                "origin": {"kind": "task-notification"}}})
    s = session_of(tmp_path, t.jsonl())
    assert [r.text for r in s.requests] == ["Real request"] and len(s.compactions) == 1


def test_what_is_a_request(tmp_path: Path) -> None:
    t = Transcript("s", "/w", "", "2026-11-20T10:00:00.000Z")
    t.command("/review", "PR 12")
    t.refused("rm -rf build", "Keep the build folder, delete only dist/")
    t.queued("and run the linter too")
    t.raw({"type": "user", "message": {"role": "user", "content": [{"type": "text", "text": "block text"}]}})
    s = session_of(tmp_path, t.jsonl())
    assert [(r.text, r.kind) for r in s.requests] == [
        ("/review PR 12", "command"), ("Keep the build folder, delete only dist/", "feedback"),
        ("and run the linter too", "queued"), ("block text", "prompt")]
    assert s.commands["rm -rf build"].refused == 1 and not s.errors  # a refusal is no error


def test_interruption_marks_the_turn(tmp_path: Path) -> None:
    t = Transcript("s", "/w", "", "2026-11-20T10:00:00.000Z")
    t.user("do it").interrupt().user("never mind")
    s = session_of(tmp_path, t.jsonl())
    assert [(r.text, r.interrupted) for r in s.requests] == [("do it", True), ("never mind", False)]


def test_sidechain_work_is_delegated_not_requested(tmp_path: Path) -> None:
    t = Transcript("s", "/w", "", "2026-11-20T10:00:00.000Z")
    t.user("Rename foo")

    def work(x: Transcript) -> None:
        x.bash("rg -n foo", "a.py:1:foo", side=True)
        x.bash("make check", "boom", exit_code=2, side=True)
        x.edit("/w/b.py", "foo", "bar", side=True)

    t.task("Explore", "Find foo", "Find every foo", work, "Found foo in a.py")
    s = session_of(tmp_path, t.jsonl())
    assert [r.text for r in s.requests] == ["Rename foo"]
    assert s.commands["rg -n foo"].delegated and s.files["/w/b.py"].delegated
    [agent] = s.subagents
    assert (agent.kind, agent.description, agent.result) == ("Explore", "Find foo", "Found foo in a.py")
    assert [e.delegated for e in s.errors] == [True]
    assert s.last_text == ""  # a sub-agent's words are not the session's answer


def test_subagent_transcripts_beside_the_session_are_read(tmp_path: Path) -> None:
    main = Transcript("s", "/w", "", "2026-11-20T10:00:00.000Z")
    main.user("Go")
    side = Transcript("s", "/w", "", "2026-11-20T10:00:10.000Z")
    side.user("the sub-agent's prompt")
    side.bash("npm run build", "ok")
    folder = tmp_path / "s" / "subagents"
    folder.mkdir(parents=True)
    (folder / "agent-a1.jsonl").write_text(side.jsonl())
    s = session_of(tmp_path, main.jsonl())
    assert [r.text for r in s.requests] == ["Go"] and s.commands["npm run build"].delegated


def test_failed_write_is_taken_back(tmp_path: Path) -> None:
    t = Transcript("s", "/w", "", "2026-11-20T10:00:00.000Z")
    t.user("edit")
    t.failed_edit("/w/a.py", "x", "y")
    s = session_of(tmp_path, t.jsonl())
    assert s.files == {} and s.quiet_failures == 1 and not s.errors


def test_write_of_a_new_file_is_created(tmp_path: Path) -> None:
    t = Transcript("s", "/w", "", "2026-11-20T10:00:00.000Z")
    t.user("write").write("/w/new.py", "x = 1\n").write("/w/old.py", "y\n", create=False)
    s = session_of(tmp_path, t.jsonl())
    assert s.files["/w/new.py"].ops == ["created"] and s.files["/w/old.py"].ops == ["written"]


def test_same_failure_again_is_one_error_a_different_one_moves_it_on(tmp_path: Path) -> None:
    t = Transcript("s", "/w", "", "2026-11-20T10:00:00.000Z")
    t.user("x")
    t.bash("pytest", "E   KeyError: 'a'", exit_code=1).bash("pytest", "E   KeyError: 'a'", exit_code=1)
    t.edit("/w/a.py", "1", "2")
    t.bash("pytest", "E   TypeError: b", exit_code=1)
    t.edit("/w/b.py", "1", "2").bash("pytest", "ok")
    first, second = session_of(tmp_path, t.jsonl()).errors
    assert first.repeats == 1 and first.changed_to == "E   TypeError: b" and first.fix_files == ["/w/a.py"]
    assert second.resolved_by == "pytest" and second.fix_files == ["/w/b.py"]


def test_a_compound_command_that_passes_resolves_the_error_of_its_part(tmp_path: Path) -> None:
    t = Transcript("s", "/w", "", "2026-11-20T10:00:00.000Z")
    t.user("x").bash("terraform plan", "Error: Unsupported argument", exit_code=1)
    t.edit("/w/main.tf", "a", "b").bash("docker ps", "ok").bash("terraform validate && terraform plan", "ok")
    [error] = session_of(tmp_path, t.jsonl()).errors
    assert error.resolved_by == "terraform validate && terraform plan" and error.fix_commands == []


def test_readonly_failures_are_not_errors(tmp_path: Path) -> None:
    t = Transcript("s", "/w", "", "2026-11-20T10:00:00.000Z")
    t.user("x").bash("grep -rn nothing src", "", exit_code=1).bash("ls missing", "No such file", exit_code=2)
    s = session_of(tmp_path, t.jsonl())
    assert not s.errors and s.commands["ls missing"].failures == 1


def test_commits_pushes_and_pull_requests(tmp_path: Path) -> None:
    t = Transcript("s", "/w", "", "2026-11-20T10:00:00.000Z")
    t.user("ship")
    t.bash("git add -A && git commit -m \"$(cat <<'EOF'\nShip it\n\nbody\nEOF\n)\"", "no git output")
    t.bash("git commit -m 'Second'", "[main 1a2b3c4] Second one\n 1 file changed")
    t.bash("git push", "ok").bash("gh pr create --fill", "https://github.com/a/b/pull/7\n")
    s = session_of(tmp_path, t.jsonl())
    assert s.commits == ["Ship it", "Second one (1a2b3c4)"] and s.pushes == 1
    assert s.pull_requests == ["https://github.com/a/b/pull/7"]


def test_todos_plan_web_and_mcp(tmp_path: Path) -> None:
    t = Transcript("s", "/w", "", "2026-11-20T10:00:00.000Z")
    t.user("x").todos([("completed", "a"), ("pending", "b")])
    t.tool("ExitPlanMode", {"plan": "1. Do a\n2. Do b"}, "ok")
    t.tool("WebFetch", {"url": "https://docs.example.com/x", "prompt": "p"}, "page")
    t.tool("mcp__github__create_issue", {"title": "t"}, "boom", error=True)
    s = session_of(tmp_path, t.jsonl())
    assert s.todos == [("completed", "a"), ("pending", "b")] and s.plan.startswith("1. Do a")
    assert s.web == ["https://docs.example.com/x"] and s.mcp_servers == ["github"]
    assert [e.tool for e in s.errors] == ["mcp__github__create_issue"]


# ---------------------------------------------------------------- bad input


def test_bad_lines_are_skipped_and_counted(tmp_path: Path) -> None:
    good = basic().jsonl()
    bad = (b"not json\n" + b"[1, 2]\n" + b"\xff\xfe binary\n" + b'{"type": "brand-new-type"}\n'
           + b'{"no": "type"}\n' + b"\n   \n" + b'{"type":"user","message":{"content":{"a":1}}}\n'
           + b'{"type":"assistant","message":{"content":[{"type":"tool_use","name":5,"input":[1]}]}}\n'
           + b'{"type":"user","message":"x","toolUseResult":5}\n' + b"[" * 5000 + b"\n")
    s = session_of(tmp_path, bad + good.encode() + b'{"type":"user","message":{"content":"cut off')
    assert [r.text for r in s.requests] == ["Fix the failing date test"]
    assert s.skipped["not JSON"] == 4 and s.skipped["not a JSON object"] == 1
    assert s.skipped["record without a type"] == 1 and s.skipped["unknown record type 'brand-new-type'"] == 1


def test_a_line_over_the_cap_is_skipped_not_held(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(transcript, "MAX_LINE", 2000)
    monkeypatch.setattr(transcript, "CHUNK", 512)
    huge = json.dumps({"type": "user", "message": {"content": "x" * 50_000}})
    text = huge + "\n" + basic().jsonl() + huge  # one in the middle of a chunk, one at the end
    s = session_of(tmp_path, text)
    assert [r.text for r in s.requests] == ["Fix the failing date test"] and s.skipped["line too long"] == 2


@pytest.mark.parametrize("chunk", [1, 7, 64, 4096])
def test_chunk_boundaries_do_not_change_the_digest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   chunk: int) -> None:
    text = basic().jsonl()
    whole = session_of(tmp_path, text, "a.jsonl")
    monkeypatch.setattr(transcript, "CHUNK", chunk)
    cut = session_of(tmp_path, text, "b.jsonl")
    assert (cut.messages, cut.lines, list(cut.commands), [r.text for r in cut.requests]) == \
           (whole.messages, whole.lines, list(whole.commands), [r.text for r in whole.requests])


def test_missing_folder_and_fifo_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(transcript.TranscriptError, match="no such transcript"):
        transcript.read_session(tmp_path / "nope.jsonl")
    with pytest.raises(transcript.TranscriptError, match="a folder"):
        transcript.read_session(tmp_path)
    if not hasattr(os, "mkfifo"):
        return
    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)
    errors: list[BaseException] = []
    thread = threading.Thread(target=lambda: _expect_error(fifo, errors), daemon=True)
    thread.start()
    thread.join(5)
    assert not thread.is_alive(), "reading a FIFO hung"
    assert errors and "not a regular file" in str(errors[0])


def _expect_error(path: Path, errors: list[BaseException]) -> None:
    try:
        transcript.read_session(path)
    except transcript.TranscriptError as exc:
        errors.append(exc)


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root reads any file")
def test_unreadable_transcript_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text(basic().jsonl())
    path.chmod(0)
    with pytest.raises(transcript.TranscriptError, match="cannot read the transcript"):
        transcript.read_session(path)


def test_reads_only_what_was_there_when_it_began(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text(basic().jsonl())
    real = transcript._lines

    def growing(fd: int, size: int) -> Any:
        with open(path, "a") as handle:  # the session writes more while we read
            handle.write(json.dumps({"type": "user", "message": {"content": "later"}}) + "\n")
        yield from real(fd, size)

    monkeypatch.setattr(transcript, "_lines", growing)
    assert [r.text for r in transcript.read_session(path).requests] == ["Fix the failing date test"]


# ---------------------------------------------------------------- Codex CLI and the generic shape


def codex_lines() -> str:
    def rec(kind: str, payload: dict[str, Any], at: str = "2026-11-21T13:00:00.000Z") -> dict[str, Any]:
        return {"timestamp": at, "type": kind, "payload": payload}

    ask = "Fix the race"
    return lines(
        rec("session_meta", {"id": "cx-1", "cwd": "/w/api", "cli_version": "0.63.0", "git": {"branch": "dev"}}),
        rec("response_item", {"type": "message", "role": "user", "content": [
            {"type": "input_text", "text": "<environment_context>cwd</environment_context>"}]}),
        rec("turn_context", {"cwd": "/w/api", "model": "gpt-5-codex"}),
        rec("response_item", {"type": "message", "role": "user", "content": [{"type": "input_text", "text": ask}]}),
        rec("event_msg", {"type": "user_message", "message": ask}),
        rec("response_item", {"type": "function_call", "name": "shell", "call_id": "c1",
                              "arguments": json.dumps({"command": ["bash", "-lc", "go test -race ./..."]})}),
        rec("response_item", {"type": "function_call_output", "call_id": "c1", "output": json.dumps(
            {"output": "WARNING: DATA RACE\nFAIL", "metadata": {"exit_code": 1}})}),
        rec("event_msg", {"type": "agent_message", "message": "Get writes under a read lock."}),
        rec("response_item", {"type": "message", "role": "assistant", "content": [
            {"type": "output_text", "text": "Get writes under a read lock."}]}),
        rec("response_item", {"type": "custom_tool_call", "call_id": "c2", "name": "apply_patch", "input":
                              "*** Begin Patch\n*** Update File: pkg/lru.go\n*** Add File: pkg/lru_test.go\n"
                              "*** Delete File: pkg/old.go\n*** End Patch"}),
        rec("response_item", {"type": "custom_tool_call_output", "call_id": "c2", "output": "Success."}),
        rec("response_item", {"type": "function_call", "name": "exec_command", "call_id": "c3",
                              "arguments": json.dumps({"cmd": "go test -race ./..."})}),
        rec("event_msg", {"type": "exec_command_end", "call_id": "c3", "exit_code": 0, "aggregated_output": "ok"}),
        rec("response_item", {"type": "function_call_output", "call_id": "c3", "output": "Exit code: 1\nlate copy"}),
        rec("event_msg", {"type": "exec_command_end", "call_id": "c9", "command": ["bash", "-lc", "make lint"],
                          "exit_code": 2, "aggregated_output": "lint.go:3: error: unused"}),
        rec("event_msg", {"type": "patch_apply_end", "call_id": "c8", "success": True,
                          "changes": {"/w/api/README.md": {"update": {}}}}),
        rec("compacted", {"message": "summary"}),
        rec("event_msg", {"type": "task_complete", "last_agent_message": "Done: Get takes the write lock."},
            "2026-11-21T13:05:00.000Z"))


def test_codex_rollout(tmp_path: Path) -> None:
    s = session_of(tmp_path, codex_lines())
    assert s.kind == "codex" and s.session_ids == ["cx-1"] and s.cwd == "/w/api" and s.branches == ["dev"]
    assert s.models == ["gpt-5-codex"] and s.versions == ["0.63.0"]
    assert [r.text for r in s.requests] == ["Fix the race"]  # the context message and the echo dropped
    race = s.commands["go test -race ./..."]
    assert (race.count, race.failures, race.last_ok) == (2, 1, True)  # exec_command_end wins over the copy
    assert s.commands["make lint"].failures == 1
    assert {p: c.ops for p, c in s.files.items()} == {"pkg/lru.go": ["edited"], "pkg/lru_test.go": ["created"],
                                                      "pkg/old.go": ["deleted"], "/w/api/README.md": ["edited"]}
    first = s.errors[0]
    assert first.excerpt == "WARNING: DATA RACE" and first.diagnosis == "Get writes under a read lock."
    assert first.resolved_by == "go test -race ./..." and "pkg/lru.go" in first.fix_files
    assert len(s.compactions) == 1 and s.last_text == "Done: Get takes the write lock."


def test_generic_role_shape(tmp_path: Path) -> None:
    text = lines(
        {"role": "system", "content": "You are helpful."},
        {"role": "user", "content": "Deploy the docs", "session_id": "g-1", "timestamp": "2026-11-20T10:00:00Z"},
        {"role": "assistant", "content": "Building.", "tool_calls": [
            {"id": "t1", "type": "function", "function": {"name": "bash", "arguments": '{"command": "mkdocs build"}'}},
            {"id": "t2", "type": "function", "function": {"name": "write_file", "arguments": "not json"}}]},
        {"role": "tool", "tool_call_id": "t1", "content": "ERROR - Config value: 'nav'", "is_error": True},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t3", "name": "Write",
                                           "input": {"file_path": "mkdocs.yml"}}]},
        {"role": "tool", "tool_call_id": "t3", "content": "ok"},
        {"role": "assistant", "content": "Fixed the nav; the docs build."})
    s = session_of(tmp_path, text)
    assert s.kind == "jsonl" and s.session_ids == ["g-1"] and [r.text for r in s.requests] == ["Deploy the docs"]
    assert s.commands["mkdocs build"].failures == 1 and "mkdocs.yml" in s.files
    assert s.errors[0].excerpt == "ERROR - Config value: 'nav'" and s.messages == 6


# ---------------------------------------------------------------- commands and their output


@pytest.mark.parametrize("command, key, kind", [
    ("python -m pytest -q tests/x.py", "pytest", "test"),
    ("cd /w && uv run pytest", "pytest", "test"),
    ("FOO=1 npm test -- csv", "npm test", "test"),
    ("npm run build", "npm run build", "build"),
    ("yarn run lint", "yarn run lint", "check"),
    ("npx eslint src", "eslint", "check"),
    ("go test ./...", "go test", "test"),
    ("cargo clippy -- -D warnings", "cargo clippy", "check"),
    ("git commit -am x", "git commit", "vcs"),
    ("git status", "git status", "readonly"),
    ("gh pr create --fill", "gh pr", "vcs"),
    ("pip install pyyaml", "pip install", "install"),
    ("grep -rn foo src | head", "grep", "readonly"),
    ("sudo systemctl restart nginx", "systemctl restart", "other"),
    ("./scripts/deploy.sh staging", "deploy.sh", "other"),
    ("python manage.py migrate", "python manage.py", "other"),
    ("make db", "make db", "build"),
    ("", "", "other"),
])
def test_command_key_and_kind(command: str, key: str, kind: str) -> None:
    assert cmds.command_key(command) == key
    assert cmds.command_kind(key) == kind


@pytest.mark.parametrize("output, line", [
    ("collected 3\nE   AssertionError: x\nFAILED t.py::a - AssertionError: x\n1 failed", "FAILED t.py::a - AssertionError: x"),
    ("Traceback (most recent call last):\n  File x\nKeyError: 'a'\n", "KeyError: 'a'"),
    ("src/a.ts(1,2): error TS2345: Argument", "src/a.ts(1,2): error TS2345: Argument"),
    ("thread 'main' panicked at src/a.rs:3:5:\nindex out of bounds", "thread 'main' panicked at src/a.rs:3:5: index out of bounds"),
    ("--- FAIL: TestX (0.00s)\n    x_test.go:4: want 1, got 2\nFAIL", "x_test.go:4: want 1, got 2"),
    ("  ● sum › adds\n    expect(received)", "● sum › adds"),
    ("/w/a.ts\n  3:10  error  'x' is unused  no-unused-vars\n✖ 1 problem", "3:10  error  'x' is unused  no-unused-vars"),
    ("npm ERR! code ERESOLVE\nnpm ERR! more", "npm ERR! code ERESOLVE"),
    ("Exit code 1\nsomething odd happened", "something odd happened"),
    ("", ""),
])
def test_error_line(output: str, line: str) -> None:
    assert cmds.error_line(output) == line


def test_error_line_of_a_huge_output_looks_at_its_ends() -> None:
    output = "E   ValueError: first\n" + "noise\n" * 200_000 + "last line"
    assert cmds.error_line(output) == "E   ValueError: first"
