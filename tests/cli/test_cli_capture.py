"""`memcli capture` through the CLI: output, JSON, dry run, errors, and the README's example."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from typer.testing import CliRunner

from memcli.cli import app
from tests.conftest import all_files

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import capture_samples  # noqa: E402

runner = CliRunner()
SAMPLES = ROOT / "bench" / "capture" / "transcripts"


def run(store: Path, *args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, ["--store", str(store), *args])
    return result.exit_code, result.stdout, result.stderr


def test_capture_prints_what_it_did_and_how_to_undo(store: Path) -> None:
    code, out, _ = run(store, "capture", str(SAMPLES / "fix-failing-test.jsonl"), "--agent", "coder")
    assert code == 0
    mem_id = re.search(r"Created (mem_\w+) in agent/coder", out)
    run_id = re.search(r"Undo with: memcli --store \S+ undo (run_\w+)", out)
    assert mem_id and run_id and "session 7c1e4d2a-5b8f-4e21-9d3c-1a2b3c4d5e6f, 17 messages, extractive" in out
    code, out, _ = run(store, "log")
    assert code == 0 and "capture" in out
    code, out, _ = run(store, "capture", str(SAMPLES / "fix-failing-test.jsonl"), "--agent", "coder")
    assert code == 0 and out.startswith("Unchanged:")
    code, out, _ = run(store, "undo", run_id.group(1))
    assert code == 0 and not list((store / "agent" / "coder").glob("mem_*"))


def test_capture_json(store: Path) -> None:
    code, out, _ = run(store, "--json", "capture", str(SAMPLES / "question-no-tools.jsonl"))
    data = json.loads(out)
    assert code == 0 and data["action"] == "created" and data["method"] == "extractive"
    assert set(data) == {"action", "session_id", "memory_id", "path", "run_id", "method", "reason", "messages",
                         "requests", "notes"}
    assert data["path"] == f"agent/claude/{data['memory_id']}.json" and data["requests"] == 2


def test_dry_run_shows_the_memory_and_writes_nothing(store: Path) -> None:
    before = all_files(store)
    code, out, _ = run(store, "capture", str(SAMPLES / "chase-incident.jsonl"), "--dry-run")
    assert code == 0 and out.startswith("Dry run: nothing was written. Would create mem_")
    assert "## Key learnings" in out and "OOMKilled" in out
    code, out, _ = run(store, "--json", "capture", str(SAMPLES / "chase-incident.jsonl"), "--dry-run")
    data = json.loads(out)
    assert data["action"] == "would_create" and data["record"]["subtype"] == "session"
    assert all_files(store) == before


def test_quiet_prints_the_id_only(store: Path) -> None:
    code, out, _ = run(store, "--quiet", "capture", str(SAMPLES / "broken-build.jsonl"))
    assert code == 0 and re.fullmatch(r"mem_\w+\n", out)


def test_a_skipped_session_is_not_an_error(store: Path, tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text('{"type":"user","message":{"content":"hi"}}\n{"type":"assistant","message":{"content":"yo"}}\n')
    code, out, _ = run(store, "capture", str(path))
    assert code == 0 and out.startswith("Skipped: 2 message(s), fewer than [capture] min_messages (4)")


def test_missing_transcript_exits_1_naming_it(store: Path, tmp_path: Path) -> None:
    code, _, err = run(store, "capture", str(tmp_path / "gone.jsonl"))
    assert code == 1 and f"Error: {tmp_path / 'gone.jsonl'}: no such transcript" in err
    code, out, _ = run(store, "--json", "capture", str(tmp_path / "gone.jsonl"))
    assert code == 1 and "no such transcript" in json.loads(out)["error"]


def test_skipped_lines_are_noted_on_stderr(store: Path, tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text("oops\n" + (SAMPLES / "fix-failing-test.jsonl").read_text())
    code, _, err = run(store, "capture", str(path))
    assert code == 0 and "note: skipped 1 of" in err and "1 not JSON" in err


def test_help_lists_capture_and_the_pre_compact_hook() -> None:
    assert "capture" in runner.invoke(app, ["--help"]).stdout
    assert "pre-compact" in runner.invoke(app, ["hook", "--help"]).stdout
    help_text = runner.invoke(app, ["capture", "--help"]).stdout
    assert "Example: memcli capture" in help_text and "--dry-run" in help_text


def test_committed_samples_match_their_generator() -> None:
    made = capture_samples.build()
    for name, text in made["files"].items():
        assert (SAMPLES / name).read_text(encoding="utf-8") == text, f"run python bench/capture_samples.py ({name})"


def test_the_readme_shows_a_real_capture(store: Path) -> None:
    """The captured memory the README shows is exactly what capture writes for that sample."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    match = re.search(r"<!-- capture-example:begin -->\n```json\n(.*?)\n```\n<!-- capture-example:end -->",
                      readme, re.DOTALL)
    assert match, "the README's capture example is missing"
    shown = json.loads(match.group(1))
    code, out, _ = run(store, "--json", "capture", str(SAMPLES / "fix-failing-test.jsonl"), "--dry-run")
    record = json.loads(out)["record"]
    assert code == 0
    for key in ("type", "subtype", "scope", "scope_id", "tags", "created_by", "content", "source"):
        assert shown[key] == record[key], key
    details = re.search(r"<!-- capture-details:begin -->\n```markdown\n(.*?)\n```\n<!-- capture-details:end -->",
                        readme, re.DOTALL)
    assert details and details.group(1) == record["content"]["details"]


def test_the_readmes_minimal_jsonl_shape_is_captured(store: Path, tmp_path: Path) -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    match = re.search(r"<!-- capture-jsonl:begin -->\n```jsonl\n(.*?)\n```\n<!-- capture-jsonl:end -->",
                      readme, re.DOTALL)
    assert match, "the README's minimal JSONL example is missing"
    path = tmp_path / "other-harness.jsonl"
    path.write_text(match.group(1) + "\n")
    code, out, _ = run(store, "--json", "capture", str(path), "--dry-run")
    record = json.loads(out)["record"]
    details = record["content"]["details"]
    assert code == 0 and record["source"] == {"kind": "jsonl", "session_id": "s-42", "messages": 6}
    assert record["content"]["summary"] == "Fix the failing test"
    assert "`pytest -q` (failed 1)" in details and "src/a.py (edited)" in details
    assert "AssertionError" in details and "the parser keeps the time zone" in details
