"""Run reports at any size: counts first, a screenful of actions grouped by kind (--all for
every one), a warning and a confirmation before archiving most of a folder, honest
durations, what was protected and why, progress on a terminal, hints that work as pasted."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memcli.cli import app, runs
from memcli.cli.output import Progress
from memcli.cli.report import actions_lines
from memcli.store import memories
from memcli.store.plans import Outcome
from memcli.store.store import Store
from tests.conftest import add, days_ago

runner = CliRunner()
DEMO = Path(__file__).resolve().parents[2] / "fixtures" / "demo-store"


def run(store: Path, *args: str, env: dict[str, str] | None = None,
        input: str | None = None) -> tuple[int, str, str]:
    result = runner.invoke(app, ["--store", str(store), *args], env=env, input=input)
    return result.exit_code, result.stdout, result.stderr


def demo(tmp_path: Path) -> Path:
    root = tmp_path / "demo"
    shutil.copytree(DEMO, root)
    return root


def stale(store: Path, n: int, folder: str = "coder") -> list[str]:
    return [add(store, scope_id=folder, access_count=0, last_accessed=None, created_at=days_ago(200))["id"]
            for _ in range(n)]


def used(store: Path, n: int, folder: str = "coder") -> list[str]:
    return [add(store, scope_id=folder)["id"] for _ in range(n)]


# ---------------------------------------------------------------- the report


def test_counts_come_before_any_action(tmp_path: Path) -> None:
    code, out, _ = run(demo(tmp_path), "consolidate", "--dry-run")
    lines = out.splitlines()
    first_kind = next(n for n, line in enumerate(lines) if line.startswith(("merge (", "archive (")))
    would = next(n for n, line in enumerate(lines) if line.startswith("Would: "))
    assert code == 0 and would < first_kind
    assert "merge 10 memories into others, summarise 3, promote 5, archive 8 stale" in out.replace("\n", " ")


def test_a_screenful_by_default_every_action_with_all(tmp_path: Path) -> None:
    store = demo(tmp_path)
    plan = json.loads(run(store, "consolidate", "--dry-run", "--json")[1])
    code, out, _ = run(store, "consolidate", "--dry-run", env={"LINES": "24", "COLUMNS": "80"})
    assert code == 0 and len(out.splitlines()) <= 24
    assert "actions not shown: --all shows them" in out
    for kind in ("merge (8):", "keep apart (3):", "summarise (3):", "promote (5):", "archive (8):"):
        assert kind in out  # every kind is there, with its count, however little room
    code, out, _ = run(store, "consolidate", "--dry-run", "--all", env={"LINES": "24", "COLUMNS": "80"})
    ids = {i for a in plan["actions"] for i in a.get("source_ids", []) + a.get("memory_ids", [])
           + [a.get("memory_id")] if i}
    assert code == 0 and all(i in out for i in ids) and "not shown" not in out
    assert len(plan["actions"]) == 27  # --json always has every action


def test_the_log_keeps_every_action_and_log_run_all_shows_them(tmp_path: Path) -> None:
    store = demo(tmp_path)
    done = json.loads(run(store, "consolidate", "--json")[1])
    entry = json.loads(run(store, "log", "--run", done["run_id"][:12], "--json")[1])["entries"][0]
    assert len(entry["actions"]) == len(done["actions"]) == 27
    code, out, _ = run(store, "log", "--run", done["run_id"], "--all", env={"LINES": "24"})
    assert code == 0 and all(a.get("memory_id", "") in out for a in done["actions"])
    code, short, _ = run(store, "log", "--run", done["run_id"], env={"LINES": "24"})
    assert code == 0 and "--all shows them" in short and len(short.splitlines()) < len(out.splitlines())


def test_everything_fits_so_everything_is_shown_at_length(store: Path) -> None:
    stale(store, 1)
    used(store, 3)
    code, out, _ = run(store, "consolidate", "--dry-run")
    assert code == 0 and "archive (1):" in out and "actions not shown" not in out and "never used" in out


def test_shares_give_every_kind_room() -> None:
    actions = [{"type": "archive", "memory_id": f"mem_{n:026d}", "reason": "stale"} for n in range(50)]
    actions.append({"type": "promote", "memory_id": "mem_" + "P" * 26, "result_id": "mem_" + "Q" * 26})
    outcome = Outcome("run_x", "manual", "2026-11-22T00:00:00Z", actions, {}, whys=["stale"] * 50 + ["used"])
    lines, hidden = actions_lines(outcome, 80, 20)
    assert len(lines) <= 20 and "promote (1):" in lines and any("mem_" + "P" * 26 in line for line in lines)
    assert hidden == 50 - sum(1 for line in lines if line.startswith("  mem_0"))
    lines, hidden = actions_lines(outcome, 80, None)
    assert hidden == 0 and len([line for line in lines if line.startswith("  mem_")]) == 51


# ---------------------------------------------------------------- archiving most of a folder


def test_a_dry_run_warns_when_more_than_half_a_folder_would_go(store: Path) -> None:
    stale(store, 3)
    used(store, 2)  # 3 of 5: more than half
    stale(store, 2, "reviewer")
    used(store, 2, "reviewer")  # 2 of 4: exactly half, no warning
    code, out, _ = run(store, "consolidate", "--dry-run")
    assert code == 0 and "Warning: agent/coder: 3 of 5 live memories would go to the archive." in out
    assert "agent/reviewer" not in out.split("Warning")[1].split("\n")[0]
    assert out.count("Warning:") == 1


def test_a_real_run_off_a_terminal_warns_and_goes_ahead(store: Path) -> None:
    ids = stale(store, 3)
    used(store, 1)
    code, _, err = run(store, "consolidate")
    assert code == 0 and "warning: this run moves more than half" in err and "3 of 4" in err
    assert all((store / "archive" / f"{i}.json").exists() for i in ids)


@pytest.mark.parametrize(("answer", "applied"), [("n\n", False), ("y\n", True), ("\n", False)])
def test_on_a_terminal_it_asks_first(store: Path, monkeypatch: pytest.MonkeyPatch, answer: str,
                                     applied: bool) -> None:
    monkeypatch.setattr(runs, "interactive", lambda: True)
    ids = stale(store, 2)
    used(store, 1)
    code, _, err = run(store, "consolidate", input=answer)
    assert "Go ahead?" in err
    assert all((store / "archive" / f"{i}.json").exists() for i in ids) is applied
    if not applied:
        assert code == 1 and "cancelled: no memory, index or log was changed" in err
        assert not (store / "ops" / "consolidation-log.json").exists()


def test_yes_skips_the_question_and_half_or_less_never_asks(store: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runs, "interactive", lambda: True)
    stale(store, 2)
    used(store, 1)
    code, _, err = run(store, "consolidate", "--yes")
    assert code == 0 and "Go ahead?" not in err and "warning: this run moves" in err
    stale(store, 1, "reviewer")
    used(store, 1, "reviewer")
    code, _, err = run(store, "consolidate")
    assert code == 0 and "Go ahead?" not in err and "warning" not in err


# ---------------------------------------------------------------- durations, protection


def test_durations_are_plan_apply_and_wall(tmp_path: Path) -> None:
    store = demo(tmp_path)
    dry = json.loads(run(store, "consolidate", "--dry-run", "--json")[1])
    stats = dry["stats"]
    assert stats["plan_ms"] > 0 and stats["apply_ms"] == 0 and stats["duration_ms"] == stats["plan_ms"]
    assert dry["wall_ms"] >= stats["duration_ms"]
    real = json.loads(run(store, "consolidate", "--json")[1])["stats"]
    assert real["plan_ms"] > 0 and real["apply_ms"] > 0
    assert real["duration_ms"] == real["plan_ms"] + real["apply_ms"]
    code, out, _ = run(store, "log", "--run", json.loads(run(store, "log", "--json")[1])["entries"][0]["run_id"])
    assert code == 0 and "Time: plan " in out and ", apply " in out
    assert ", wall " not in out  # (the log keeps no wall time: not the `log` command's own)
    code, out, _ = run(store, "consolidate", "--dry-run")
    assert "(dry run), wall " in out


def test_a_report_says_how_many_were_protected_and_why(store: Path) -> None:
    add(store, priority="critical", access_count=0, last_accessed=None, created_at=days_ago(300))
    add(store, tags=["permanent"], access_count=0, last_accessed=None, created_at=days_ago(300))
    add(store, created_at=days_ago(2))  # younger than 7 days
    add(store, created_at=days_ago(8))  # just older: not protected
    add(store, created_by="USER", scope="global", scope_id="global")
    data = json.loads(run(store, "consolidate", "--dry-run", "--json")[1])
    assert data["protected"] == {"critical": 1, "fresh": 1, "permanent": 1, "user_without_consent": 1}
    assert data["stats"]["protected"] == 4
    code, out, _ = run(store, "consolidate", "--dry-run")
    text = out.replace("\n", " ")
    assert "4 protected (" in text and all(f"1 {why}" in text for why in (
        "priority critical", "tag permanent", "USER without consent", "younger than min_age_days"))
    with_consent = json.loads(run(store, "consolidate", "--dry-run", "--consent", "--json")[1])
    assert with_consent["protected"] == {"critical": 1, "fresh": 1, "permanent": 1}


# ---------------------------------------------------------------- progress


def test_progress_draws_only_on_a_terminal_and_above_its_threshold(monkeypatch: pytest.MonkeyPatch) -> None:
    with Progress(silent=False) as update:  # stderr is not a terminal under pytest
        assert update is None
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    with Progress(silent=True) as update:  # --json or --quiet
        assert update is None
    bar = Progress(silent=False, min_total=10_000)
    with bar as update:
        update("listing memories", 50, 9_999)
        assert bar.bar is None  # a short list draws nothing (rich is not even imported for it)
        update("listing memories", 5_000, 10_000)
        assert bar.bar is not None and bar.tasks["listing memories"] is not None


def test_the_core_reports_progress_for_list_reindex_apply_and_undo(store: Path) -> None:
    stale(store, 40)
    used(store, 3, "reviewer")
    seen: list[tuple[str, int, int]] = []

    def note(stage: str, done: int, total: int) -> None:
        seen.append((stage, done, total))

    memories.list_view(Store(store), memories.ListFilter(), note)
    assert seen[-1] == ("listing memories", 43, 43)
    seen.clear()
    memories.reindex(Store(store), note)
    assert seen and all(stage == "reindexing" for stage, _, _ in seen) and seen[-1][2] == 43
    seen.clear()
    from memcli.consolidate import engine, undo

    outcome = engine.consolidate(Store(store), limit=0, progress=note)
    applying = [s for s in seen if s[0] == "applying"]
    assert applying and applying[-1][1] == applying[-1][2] == 80  # 40 archives: 2 files each
    seen.clear()
    undo.undo_run(Store(store), outcome.run_id, progress=note)
    assert [s for s in seen if s[0] == "applying"][-1][1] > 0


# ---------------------------------------------------------------- hints


def _venv_memcli() -> Path:
    found = Path(sys.executable).parent / "memcli"
    if not found.exists():
        pytest.skip("no memcli script next to this interpreter")
    return found


@pytest.mark.slow
def test_hints_name_the_program_when_memcli_is_not_on_path(tmp_path: Path) -> None:
    """The README installs into .venv without activating it: the hints must still work."""
    store = demo(tmp_path)
    program = _venv_memcli()
    env = {**os.environ, "MEMCLI_NOW": "2026-11-22T00:00:00Z", "PATH": "/usr/bin:/bin", "COLUMNS": "200"}
    done = subprocess.run([str(program), "--store", str(store), "consolidate"], capture_output=True, text=True,
                          env=env, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    undo_line = next(line for line in done.stdout.splitlines() if line.startswith("Undo with:"))
    command = undo_line.removeprefix("Undo with:").split()
    assert command[:3] == [str(program), "--store", str(store)] and command[3] == "undo"
    again = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path)
    assert again.returncode == 0 and again.stdout.startswith("Undid run_")  # pasted as printed, it works
    on_path = {**env, "PATH": f"{program.parent}:/usr/bin:/bin"}
    done = subprocess.run([str(program), "--store", str(store), "consolidate", "--dry-run"],
                          capture_output=True, text=True, env=on_path, timeout=120, cwd=tmp_path)
    assert f"Apply with: memcli --store {store} consolidate" in done.stdout


@pytest.mark.slow
def test_hints_for_python_m_memcli(tmp_path: Path) -> None:
    store = demo(tmp_path)
    done = subprocess.run([sys.executable, "-m", "memcli", "--store", str(store), "consolidate", "--dry-run"],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path,
                          env={**os.environ, "MEMCLI_NOW": "2026-11-22T00:00:00Z", "COLUMNS": "200"})
    assert f"Apply with: {sys.executable} -m memcli --store {store} consolidate" in done.stdout


def test_hints_keep_a_relative_store_as_an_absolute_one(store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stale(store, 1)
    used(store, 3)
    monkeypatch.chdir(store.parent)
    result = runner.invoke(app, ["--store", "store", "consolidate"], env={"COLUMNS": "200"})
    assert result.exit_code == 0 and f"Undo with: memcli --store {store} undo run_" in result.stdout


def test_the_run_bars_only_move_forward() -> None:
    seen: list[tuple[str, int, int]] = []
    forward = runs._steady(lambda stage, done, total: seen.append((stage, done, total)), "manual")
    for folder in range(2):  # a full run: comparing restarts in every folder, planning counts folders
        for block in range(4):
            forward("comparing", block, 4)
        forward("planning", folder + 1, 2)
    forward("applying", 10, 10)
    assert seen == [("planning", 1, 2), ("planning", 2, 2), ("applying", 10, 10)]
    seen.clear()
    forward = runs._steady(lambda stage, done, total: seen.append((stage, done, total)), "session_end")
    for block in range(3):  # session_end: blocks of the whole run, counted to the end
        forward("comparing", block, 3)
    assert seen[-1] == ("planning", 3, 3)
    assert runs._steady(None, "manual") is None


def test_an_undo_of_a_big_run_names_a_few_decisions_and_counts_the_rest(tmp_path: Path) -> None:
    store = demo(tmp_path)
    run_id = json.loads(run(store, "consolidate", "--json")[1])["run_id"]
    code, out, _ = run(store, "undo", run_id[:14], env={"COLUMNS": "80"})
    decisions = json.loads(run(store, "log", "--json")[1])["entries"][0]["actions"]
    count = sum(1 for a in decisions if a.get("type") == "decision")
    assert code == 0 and count > 5 and f"; and {count - 5} more." in " ".join(out.split())
    assert all(len(line) <= 80 or any(len(w) > 45 for w in line.split()) for line in out.splitlines())
    assert f"memcli --store {store} review list --all" in out and "To reverse it:" in out
