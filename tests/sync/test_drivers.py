"""The merge drivers: pure three-way unions (the same result whichever side is "ours"), and
git calling `memcli merge-driver` for real."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from memcli.sync import drivers
from tests.sync.gitstore import git


def entry(run: str, at: str, **more: object) -> dict:
    return {"run_id": run, "timestamp": at, "trigger": "manual", "actions": [], **more}


def test_the_log_keeps_every_run_of_both_sides_once_in_time_order() -> None:
    base = {"entries": [entry("run_A", "2026-11-01T00:00:00Z")]}
    ours = {"entries": base["entries"] + [entry("run_C", "2026-11-03T00:00:00Z")]}
    theirs = {"entries": base["entries"] + [entry("run_B", "2026-11-02T00:00:00Z"),
                                            entry("run_C", "2026-11-03T00:00:00Z", stats={"duration_ms": 9})]}
    merged = drivers.merge_log(base, ours, theirs)
    assert [e["run_id"] for e in merged["entries"]] == ["run_A", "run_B", "run_C"]
    assert merged == drivers.merge_log(base, theirs, ours)  # the same in the other clone


def test_review_items_unite_by_pair_a_decided_one_wins_and_ids_stay_distinct() -> None:
    item = {"id": "rev_0001", "memory_ids": ["mem_a", "mem_b"], "reason": "both_changed", "status": "open",
            "created_at": "2026-11-01T00:00:00Z"}
    base = {"items": [item]}
    ours = {"items": [{**item, "status": "resolved", "resolution": "keep"},
                      {"id": "rev_0002", "memory_ids": ["mem_c", "mem_d"], "reason": "guard",
                       "created_at": "2026-11-02T00:00:00Z"}]}
    theirs = {"items": [item, {"id": "rev_0002", "memory_ids": ["mem_e", "mem_f"], "reason": "guard",
                               "created_at": "2026-11-03T00:00:00Z"}]}
    merged = drivers.merge_queue(base, ours, theirs)
    assert [(i["id"], i["memory_ids"][0], i.get("status")) for i in merged["items"]] == [
        ("rev_0001", "mem_a", "resolved"), ("rev_0002", "mem_c", None), ("rev_0003", "mem_e", None)]
    assert merged == drivers.merge_queue(base, theirs, ours)


def test_state_takes_the_later_run_per_trigger_and_keeps_pairs_looked_at_dropped() -> None:
    base = {"runs": {"weekly": {"run_id": "run_A", "at": "2026-11-01T00:00:00Z"}},
            "flagged": [{"ids": ["mem_a", "mem_b"]}, {"ids": ["mem_c", "mem_d"]}]}
    ours = {"runs": {"weekly": {"run_id": "run_B", "at": "2026-11-08T00:00:00Z"}},
            "last_success": {"run_id": "run_B", "at": "2026-11-08T00:00:00Z", "trigger": "weekly"},
            "flagged": [{"ids": ["mem_c", "mem_d"]}]}  # ours looked at a|b
    theirs = {"runs": {"weekly": {"run_id": "run_A", "at": "2026-11-01T00:00:00Z"},
                       "daily": {"run_id": "run_C", "at": "2026-11-09T00:00:00Z"}},
              "last_success": {"run_id": "run_C", "at": "2026-11-09T00:00:00Z", "trigger": "daily"},
              "flagged": [{"ids": ["mem_a", "mem_b"]}, {"ids": ["mem_c", "mem_d"]}, {"ids": ["mem_e", "mem_f"]}]}
    merged = drivers.merge_state(base, ours, theirs)
    assert merged["runs"] == {"daily": theirs["runs"]["daily"], "weekly": ours["runs"]["weekly"]}
    assert merged["last_success"]["run_id"] == "run_C"
    assert merged["flagged"] == [{"ids": ["mem_c", "mem_d"]}, {"ids": ["mem_e", "mem_f"]}]
    assert merged == drivers.merge_state(base, theirs, ours)


def test_an_index_unites_entries_by_file_and_keeps_removals() -> None:
    def idx(*files: str) -> dict:
        return {"version": 1, "scope": "agent", "scope_id": "coder", "entry_count": len(files),
                "updated_at": "2026-11-01T00:00:00Z",
                "entries": [{"id": f.split(".")[0], "file": f} for f in files]}
    merged = drivers.merge_index(idx("mem_a.json", "mem_b.json"), idx("mem_a.json", "mem_c.json"),
                                 idx("mem_a.json", "mem_b.json", "mem_d.json"))
    assert [e["file"] for e in merged["entries"]] == ["mem_a.json", "mem_c.json", "mem_d.json"]
    assert merged["entry_count"] == 3


def test_an_index_merge_keeps_each_entry_whole_with_its_cached_lengths() -> None:
    """Cached fields (`sort_len`, pair search's sorted-text length) go with their entry: kept
    whole from one side, never mixed; and they are trusted only while the file's size and
    mtime match, which a checkout changes (`sync` rebuilds the index right after)."""
    def idx(*entries: dict) -> dict:
        return {"version": 1, "entry_count": len(entries), "entries": list(entries)}

    a = {"id": "mem_a", "file": "mem_a.json", "size": 10, "mtime_ns": 1, "text_len": 9, "sort_len": 7}
    a_old = {"id": "mem_a", "file": "mem_a.json", "size": 12, "mtime_ns": 2, "text_len": 11}
    b = {"id": "mem_b", "file": "mem_b.json", "size": 5, "mtime_ns": 3, "text_len": 4, "sort_len": 4}
    merged = drivers.merge_index(idx(), idx(a, b), idx(a_old))
    assert merged["entries"] in ([a, b], [a_old, b]) and merged["entry_count"] == 2
    assert merged == drivers.merge_index(idx(), idx(a_old), idx(a, b))


def test_a_file_of_the_wrong_shape_is_left_to_git(tmp_path: Path) -> None:
    paths = []
    for name, data in (("base", {}), ("ours", {"entries": "x"}), ("theirs", {"entries": []})):
        path = tmp_path / name
        path.write_bytes(orjson.dumps(data))
        paths.append(str(path))
    done = subprocess.run([sys.executable, "-m", "memcli", "merge-driver", "ops", *paths,
                           "ops/consolidation-log.json"], capture_output=True, text=True)
    assert done.returncode == 1 and "entries" in done.stderr
    assert json.loads(Path(paths[1]).read_text()) == {"entries": "x"}  # untouched


@pytest.mark.parametrize("argv", [[], ["bogus", "a", "b", "c", "d"]])
def test_a_malformed_call_is_a_usage_error(argv: list[str]) -> None:
    done = subprocess.run([sys.executable, "-m", "memcli", "merge-driver", *argv], capture_output=True, text=True)
    assert done.returncode == 2 and "usage" in done.stderr


def test_git_runs_the_driver_on_the_log(tmp_path: Path) -> None:
    """Plain `git merge`, no memcli sync: the log of two branches is united by the driver."""
    from memcli.sync import gitfiles

    repo = tmp_path / "repo"
    git(tmp_path, "init", "-q", str(repo))
    (repo / "ops").mkdir()
    gitfiles.write_files(repo)
    gitfiles.register_drivers(repo)
    path = repo / "ops" / "consolidation-log.json"

    def write(*entries: dict) -> None:
        path.write_bytes(orjson.dumps({"entries": list(entries)}, option=orjson.OPT_INDENT_2) + b"\n")

    write(entry("run_A", "2026-11-01T00:00:00Z"))
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    git(repo, "checkout", "-qb", "other")
    write(entry("run_A", "2026-11-01T00:00:00Z"), entry("run_B", "2026-11-02T00:00:00Z"))
    git(repo, "commit", "-qam", "B")
    git(repo, "checkout", "-q", "main")
    write(entry("run_A", "2026-11-01T00:00:00Z"), entry("run_C", "2026-11-03T00:00:00Z"))
    git(repo, "commit", "-qam", "C")
    git(repo, "merge", "-q", "--no-edit", "other")
    assert [e["run_id"] for e in json.loads(path.read_text())["entries"]] == ["run_A", "run_B", "run_C"]


def test_the_logs_month_files_merge_as_the_log_does() -> None:
    base = orjson.dumps({"entries": [entry("run_A", "2026-11-01T00:00:00Z")]})
    ours = orjson.dumps({"entries": [entry("run_A", "2026-11-01T00:00:00Z"), entry("run_C", "2026-11-03T00:00:00Z")]})
    theirs = orjson.dumps({"entries": [entry("run_A", "2026-11-01T00:00:00Z"), entry("run_B", "2026-11-02T00:00:00Z")]})
    merged = orjson.loads(drivers.merge_bytes("ops", "2026-11.json", base, ours, theirs))
    assert [e["run_id"] for e in merged["entries"]] == ["run_A", "run_B", "run_C"]
    with pytest.raises(ValueError):
        drivers.merge_bytes("ops", "notes.json", base, ours, theirs)  # not one of memcli's files
