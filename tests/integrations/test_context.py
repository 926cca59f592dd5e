"""The context hooks (SPEC 11) with the JSON Claude Code sends."""

from __future__ import annotations

import io
import json
import os
import subprocess
import time
from pathlib import Path

from memcli.integrations import context
from memcli.recall import index as rindex
from memcli.store.store import Store
from tests import forked
from tests.conftest import NOW, add, load
from tests.recall.helpers import fold


def configure(store: Path, extra: str = "") -> None:
    """A generous budget: these tests check what is printed, not this loaded machine's speed
    (the budget itself is tested in-process below, and measured in bench/recall.py)."""
    (store / "memcli.toml").write_text((store / "memcli.toml").read_text()
                                       + "\n[recall]\nhook_budget_ms = 20000\n" + extra)


def start_json(store: Path, session: str = "sess-1") -> str:
    return json.dumps({"session_id": session, "transcript_path": "/tmp/t.jsonl", "cwd": str(store),
                       "hook_event_name": "SessionStart", "source": "startup"})


def prompt_json(store: Path, prompt: str, session: str = "sess-1") -> str:
    return json.dumps({"session_id": session, "transcript_path": "/tmp/t.jsonl", "cwd": str(store),
                       "hook_event_name": "UserPromptSubmit", "prompt": prompt})


def hook(store: Path, name: str, stdin: str, *extra: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "MEMCLI_NOW": NOW}
    return forked.run(["hook", name, *extra], input=stdin, timeout=60, env=env, cwd=cwd or store)


def warm(store: Path) -> None:
    st = Store(store)
    rindex.ready(st, [f.rel for f in st.memory_folders()], [])


def log_lines(store: Path) -> list[dict]:
    path = store / "ops" / "recall-log.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def test_session_start_briefing(store: Path) -> None:
    configure(store, 'agent = "coder"\n')
    critical = add(store, summary="Never push to main directly", priority="critical", access_count=0)
    used = add(store, summary="Run tests with make test-fast", access_count=9)
    rare = add(store, summary="The old CI was Travis", access_count=1)
    add(store, summary="Other agent's note", scope_id="writer", access_count=50)
    warm(store)
    proc = hook(store, "session-start", start_json(store))
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)["hookSpecificOutput"]
    assert out["hookEventName"] == "SessionStart"
    text = out["additionalContext"]
    assert text.index(critical["id"]) < text.index(used["id"]) < text.index(rare["id"])
    assert "Other agent" not in text and len(text) <= 2000
    assert log_lines(store)[-1]["memory_ids"] == [critical["id"], used["id"], rare["id"]]
    assert log_lines(store)[-1]["session_id"] == "sess-1" and log_lines(store)[-1]["event"] == "SessionStart"
    fold(store)
    assert load(store / "agent" / "coder" / f"{used['id']}.json")["access_count"] == 10


def test_briefing_chars_and_agent_option(store: Path) -> None:
    configure(store, "briefing_chars = 200\n")
    for n in range(10):
        add(store, summary=f"Writer fact number {n} about the style guide", scope_id="writer", access_count=n + 1)
    warm(store)
    out = json.loads(hook(store, "session-start", start_json(store), "--agent", "writer").stdout)
    text = out["hookSpecificOutput"]["additionalContext"]
    assert len(text) <= 200 and "Writer fact number 9" in text
    assert hook(store, "session-start", start_json(store)).stdout == ""  # agent claude: nothing of its own


def test_prompt_injects_relevant_memories_once_per_session(store: Path) -> None:
    configure(store)
    mem = add(store, summary="Staging deploys need the VPN up first", tags=["deploy"], scope_id="claude")
    add(store, summary="The cafeteria closes at three", scope_id="claude")
    warm(store)
    proc = hook(store, "prompt", prompt_json(store, "how do I deploy to staging?"))
    out = json.loads(proc.stdout)["hookSpecificOutput"]
    assert out["hookEventName"] == "UserPromptSubmit"
    assert mem["id"] in out["additionalContext"] and "cafeteria" not in out["additionalContext"]
    assert hook(store, "prompt", prompt_json(store, "deploy to staging again")).stdout == ""  # already given
    assert mem["id"] in hook(store, "prompt", prompt_json(store, "deploy staging", "sess-2")).stdout
    assert [line["memory_ids"] for line in log_lines(store)] == [[mem["id"]], [mem["id"]]]
    assert hook(store, "prompt", prompt_json(store, "what is the weather")).stdout == ""
    assert hook(store, "prompt", prompt_json(store, "the of and")).stdout == ""


def test_min_score_and_prompt_limit(store: Path) -> None:
    configure(store, "prompt_limit = 1\nmin_score = 1000.0\n")
    add(store, summary="Staging deploys need the VPN", scope_id="claude")
    warm(store)
    assert hook(store, "prompt", prompt_json(store, "staging deploys vpn")).stdout == ""


def test_hooks_fail_open(store: Path, tmp_path: Path) -> None:
    for stdin in ("", "not json", "[1,2]", json.dumps({"prompt": 5, "session_id": ["x"]})):
        for name in ("session-start", "prompt"):
            proc = hook(store, name, stdin)
            assert proc.returncode == 0 and "Traceback" not in proc.stderr
    nowhere = tmp_path / "empty"
    nowhere.mkdir()
    proc = hook(nowhere, "prompt", prompt_json(nowhere, "deploy"), cwd=nowhere)
    assert proc.returncode == 0 and proc.stdout == ""
    (store / "memcli.toml").write_text("[recall]\nlimit = 'many'\n")
    proc = hook(store, "prompt", prompt_json(store, "deploy"))
    assert proc.returncode == 0 and proc.stdout == ""
    assert "recall.limit" in (store / "ops" / "hook.log").read_text()
    proc = hook(store, "session-start", start_json(store), "--bogus", "--agent", "../x")
    assert proc.returncode == 0


def test_first_hook_builds_the_index_in_the_background(store: Path) -> None:
    configure(store)
    add(store, summary="Staging deploys need the VPN", scope_id="claude")
    assert rindex.current(store) is None
    proc = hook(store, "prompt", prompt_json(store, "staging vpn"))
    assert proc.returncode == 0 and proc.stdout == ""
    deadline = time.monotonic() + 30
    while rindex.current(store) is None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert rindex.current(store) is not None


def test_over_budget_prints_nothing(store: Path, monkeypatch) -> None:
    add(store, summary="Staging deploys need the VPN", scope_id="claude")
    warm(store)

    def slow(*args, **kwargs):
        time.sleep(1.0)
        return None

    monkeypatch.setattr(context, "_inject", slow)  # the work itself overruns the 300 ms budget
    monkeypatch.setattr(context, "_spawn_warm", lambda root: None)
    out = io.StringIO()
    started = time.monotonic()
    got = context.run_hook("UserPromptSubmit", str(store), io.StringIO(prompt_json(store, "staging")), None, out,
                           start=started)
    assert got is None and out.getvalue() == "" and time.monotonic() - started < 0.6


def test_first_session_gets_its_briefing_without_a_search_index(store: Path) -> None:
    """No search index yet: the briefing comes from the folders' `_index.json` entries (and
    files dropped in by hand), pending uses counted; the index is then built in the background."""
    import shutil

    from memcli.recall import uses
    from memcli.store import memories

    configure(store, 'agent = "coder"\n')
    critical = add(store, summary="Never push to main directly", priority="critical", access_count=0)
    used = add(store, summary="Run tests with make test-fast", access_count=2)
    other = add(store, summary="The old CI was Travis", access_count=3)
    memories.reindex(Store(store))
    shutil.rmtree(store / ".cache", ignore_errors=True)
    hand = add(store, summary="Hand-dropped note: the VPN needs 2FA", access_count=1)  # no entry yet
    add(store, summary="Other agent's note", scope_id="writer", access_count=50)
    uses.record(store, [used["id"]] * 1, "earlier-session", uses.now())
    uses.record(store, [used["id"]], "another-session", uses.now())  # 2 + 2 pending > 3
    assert rindex.current(store) is None
    proc = hook(store, "session-start", start_json(store))
    text = json.loads(proc.stdout)["hookSpecificOutput"]["additionalContext"]
    assert text.index(critical["id"]) < text.index(used["id"]) < text.index(other["id"]) < text.index(hand["id"])
    assert "Other agent" not in text
    assert log_lines(store)[-1]["memory_ids"] == [critical["id"], used["id"], other["id"], hand["id"]]
    deadline = time.monotonic() + 30
    while rindex.current(store) is None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert rindex.current(store) is not None  # built for the prompts that follow
