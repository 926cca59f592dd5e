"""Bad input next to good memories: reported by path, left byte-identical, the run goes on.

Each bad file is planted in a store where a run has real work to do (a stale memory to
archive, a duplicate pair to merge). The run exits 0, names every bad file on stderr, does
its work, leaves each bad file exactly as it was, and writes nothing outside the store.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from memcli.cli import app
from memcli.store.formats import encode
from tests.conftest import add, days_ago, load, record, write_memory

runner = CliRunner()
TEN_MB = 10 * 1024 * 1024
DUP = "Run the database migrations on staging first then deploy the build to production"


def plant_broken_json(store: Path, outside: Path) -> list[str]:
    (store / "agent" / "coder" / "mem_BROKENJSON.json").write_text('{"id": "mem_BROKENJSON", "type": ')
    return ["agent/coder/mem_BROKENJSON.json"]


def plant_broken_front_matter(store: Path, outside: Path) -> list[str]:
    (store / "agent" / "coder" / "mem_BROKENFM.md").write_text("---\nid: mem_BROKENFM\ntags: [unclosed\n---\n\nbody\n")
    return ["agent/coder/mem_BROKENFM.md"]


def plant_non_utf8(store: Path, outside: Path) -> list[str]:
    raw = encode(record(id="mem_LATIN1"), "json")
    assert b'"subtype": "fact"' in raw
    bad = raw.replace(b'"subtype": "fact"', b'"subtype": "caf\xe9"')  # Latin-1, not UTF-8
    (store / "agent" / "coder" / "mem_LATIN1.json").write_bytes(bad)
    return ["agent/coder/mem_LATIN1.json"]


def plant_id_not_matching_name(store: Path, outside: Path) -> list[str]:
    data = record(id="mem_SOMEONEELSE", access_count=0)  # stale: a run would archive it if it used it
    (store / "agent" / "coder" / "mem_NAMEDWRONG.json").write_bytes(encode(data, "json"))
    return ["agent/coder/mem_NAMEDWRONG.json"]


def plant_id_with_a_path(store: Path, outside: Path) -> list[str]:
    data = record(id="../../../outside/x", access_count=0)
    (store / "agent" / "coder" / "mem_PATHID.json").write_bytes(encode(data, "json"))
    return ["agent/coder/mem_PATHID.json"]


def plant_symlink_outside(store: Path, outside: Path) -> list[str]:
    target = outside / "target.json"
    target.write_bytes(encode(record(id="mem_LINKOUT", access_count=0), "json"))
    (store / "agent" / "coder" / "mem_LINKOUT.json").symlink_to(target)
    return ["agent/coder/mem_LINKOUT.json"]


def plant_symlink_inside(store: Path, outside: Path) -> list[str]:
    data = record(access_count=0, scope_id="elsewhere")  # stale: archived by the run from its own folder
    real = write_memory(store, data)
    link = store / "agent" / "coder" / f"{data['id']}.json"
    link.symlink_to(real)
    return [f"agent/coder/{data['id']}.json"]


def plant_too_large(store: Path, outside: Path) -> list[str]:
    head = encode(record(id="mem_HUGE", access_count=0), "json")[:-2] + b', "pad": "'
    with open(store / "agent" / "coder" / "mem_HUGE.json", "wb") as handle:
        handle.write(head)
        handle.write(b" " * (TEN_MB + 1 - len(head) - 2))
        handle.write(b'"}')
    assert (store / "agent" / "coder" / "mem_HUGE.json").stat().st_size == TEN_MB + 1
    return ["agent/coder/mem_HUGE.json"]


def plant_duplicate_id(store: Path, outside: Path) -> list[str]:
    data = record(access_count=0)  # stale in both places: neither copy may be archived
    write_memory(store, data)
    write_memory(store, {**data, "scope_id": "other"})
    return [f"agent/coder/{data['id']}.json", f"agent/other/{data['id']}.json"]


PLANTS: dict[str, Callable[[Path, Path], list[str]]] = {
    "broken_json": plant_broken_json,
    "broken_front_matter": plant_broken_front_matter,
    "non_utf8": plant_non_utf8,
    "id_not_matching_name": plant_id_not_matching_name,
    "id_with_a_path": plant_id_with_a_path,
    "symlink_outside": plant_symlink_outside,
    "symlink_inside": plant_symlink_inside,
    "too_large": plant_too_large,
    "duplicate_id": plant_duplicate_id,
}


def good_work(store: Path) -> dict[str, Any]:
    """Memories a run will act on: a stale one, and a duplicate pair to merge."""
    stale = add(store, summary="an old fact nobody used", access_count=0, tags=["old"], subtype="misc")
    older = add(store, summary=DUP, tags=["deploy"], created_at=days_ago(50), subtype="deploy")
    newer = add(store, summary=DUP + " now", tags=["deploy"], created_at=days_ago(40), subtype="deploy")
    return {"stale": stale["id"], "older": older["id"], "newer": newer["id"]}


def outside_files(base: Path, store: Path) -> dict[str, bytes]:
    """Every file under the store's parent that is not in the store, with its bytes."""
    return {str(p.relative_to(base)): p.read_bytes() for p in base.rglob("*")
            if p.is_file() and not p.is_symlink() and store not in p.parents}


def raw_bytes(store: Path, rels: list[str]) -> dict[str, tuple[bool, bytes | str]]:
    out: dict[str, tuple[bool, bytes | str]] = {}
    for rel in rels:
        path = store / rel
        out[rel] = (path.is_symlink(), os.readlink(path) if path.is_symlink() else path.read_bytes())
    return out


@pytest.mark.parametrize("kind", sorted(PLANTS))
def test_bad_input_is_reported_left_alone_and_the_run_goes_on(store: Path, tmp_path: Path, kind: str) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    work = good_work(store)
    bad = PLANTS[kind](store, outside)
    before_bad = raw_bytes(store, bad)
    before_outside = outside_files(tmp_path, store)
    result = runner.invoke(app, ["--store", str(store), "consolidate"])
    assert result.exit_code == 0, result.stderr
    for rel in bad:
        assert rel in result.stderr, f"{rel} not reported: {result.stderr}"
    assert raw_bytes(store, bad) == before_bad
    assert outside_files(tmp_path, store) == before_outside
    assert not (tmp_path / "outside" / "x").exists() and not (tmp_path.parent / "outside").exists()
    assert (store / "archive" / f"{work['stale']}.json").exists()
    assert load(store / "archive" / f"{work['older']}.json")["superseded_by"] == [work["newer"]]


def test_a_future_timestamp_never_makes_a_memory_stale(store: Path) -> None:
    future = add(store, summary="used in the future", last_accessed="2031-01-01T00:00:00Z", access_count=2)
    old_future = add(store, summary="created in the future", created_at="2030-05-01T00:00:00Z",
                     last_accessed=None, access_count=0, tags=["f"])
    work = good_work(store)
    before = {m["id"]: (store / "agent" / "coder" / f"{m['id']}.json").read_bytes() for m in (future, old_future)}
    result = runner.invoke(app, ["--store", str(store), "consolidate"])
    assert result.exit_code == 0
    for mem_id, raw in before.items():
        assert (store / "agent" / "coder" / f"{mem_id}.json").read_bytes() == raw
    assert (store / "archive" / f"{work['stale']}.json").exists()


def test_a_timestamp_without_a_zone_is_read_as_utc(store: Path) -> None:
    naive = add(store, summary="no zone and stale", access_count=0, created_at="2026-06-01T00:00:00",
                updated_at="2026-06-01T00:00:00")
    result = runner.invoke(app, ["--store", str(store), "consolidate"])
    assert result.exit_code == 0
    assert (store / "archive" / f"{naive['id']}.json").exists()  # used like any other memory
    checked = runner.invoke(app, ["--store", str(store), "doctor"])
    assert checked.exit_code == 0  # a warning, not an error
    assert f"warning no_timezone       archive/{naive['id']}.json: 'created_at' has no time zone" in checked.stdout


def test_consolidate_warns_about_a_timestamp_without_a_zone(store: Path) -> None:
    naive = add(store, summary="no zone", created_at="2026-06-01T00:00:00")
    result = runner.invoke(app, ["--store", str(store), "consolidate"])
    assert f"agent/coder/{naive['id']}.json" in result.stderr and "no time zone" in result.stderr


def test_bad_input_is_warned_about_on_stderr_with_json_too(store: Path, tmp_path: Path) -> None:
    good_work(store)
    bad = plant_broken_json(store, tmp_path)
    result = runner.invoke(app, ["--store", str(store), "--json", "consolidate"])
    assert result.exit_code == 0
    assert bad[0] in result.stderr


def test_bad_input_in_a_real_process(store: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    work = good_work(store)
    bad = [rel for plant in PLANTS.values() for rel in plant(store, outside)]
    before_bad = raw_bytes(store, bad)
    before_outside = outside_files(tmp_path, store)
    result = subprocess.run([sys.executable, "-m", "memcli", "--store", str(store), "consolidate"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert all(rel in result.stderr for rel in bad)
    assert raw_bytes(store, bad) == before_bad
    assert outside_files(tmp_path, store) == before_outside
    assert (store / "archive" / f"{work['stale']}.json").exists()
    doctor = subprocess.run([sys.executable, "-m", "memcli", "--store", str(store), "doctor"],
                            capture_output=True, text=True, timeout=60)
    assert doctor.returncode == 1  # bad input is an error for doctor until a person deals with it
    assert all(rel in doctor.stdout for rel in bad)


def test_a_file_swapped_for_a_symlink_after_planning_is_left_alone(store: Path, tmp_path: Path) -> None:
    """Between `--plan-out` and `apply`, a planned memory becomes a symlink to a copy of
    itself: the hash read through the link would match, but memcli never follows links."""
    work = good_work(store)
    plan = tmp_path / "plan.json"
    assert runner.invoke(app, ["--store", str(store), "consolidate", "--plan-out", str(plan)]).exit_code == 0
    path = store / "agent" / "coder" / f"{work['stale']}.json"
    copy = tmp_path / "copy.json"
    copy.write_bytes(path.read_bytes())
    path.unlink()
    path.symlink_to(copy)
    result = runner.invoke(app, ["--store", str(store), "--json", "apply", str(plan)])
    assert result.exit_code == 0, result.stdout
    skips = [a for a in json.loads(result.stdout)["actions"] if a["type"] == "skip"]
    assert [s["memory_id"] for s in skips] == [work["stale"]]
    assert path.is_symlink() and os.readlink(path) == str(copy)
    assert not (store / "archive" / f"{work['stale']}.json").exists()
    assert load(store / "archive" / f"{work['older']}.json")["superseded_by"] == [work["newer"]]
