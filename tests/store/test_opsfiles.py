"""Ops files read once a process while provably unchanged (`opsfiles.read_json_shared`)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import orjson
import pytest

from memcli.consolidate import engine
from memcli.errors import OpsFileError
from memcli.store import log, opsfiles
from memcli.store.store import Store
from tests.conftest import add


@pytest.fixture(autouse=True)
def _fresh(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(opsfiles, "_parsed", {})


@pytest.fixture
def settled(monkeypatch: pytest.MonkeyPatch) -> None:
    """Files count as last changed long before they are read (without waiting a second)."""
    monkeypatch.setattr(opsfiles, "_SETTLED_NS", -10**12)


def write_log(store: Path, entries: list[dict[str, Any]]) -> Path:
    path = log.log_path(store)
    path.write_bytes(orjson.dumps({"entries": entries}, option=orjson.OPT_INDENT_2) + b"\n")
    return path


def an_entry(run_id: str) -> dict[str, Any]:
    return {"run_id": run_id, "timestamp": "2026-11-20T00:00:00Z", "trigger": "manual", "actions": []}


def test_a_settled_file_is_parsed_once(store: Path, settled: None) -> None:
    path = write_log(store, [an_entry("run_a")])
    first = opsfiles.read_json_shared(path, {})
    assert first == {"entries": [an_entry("run_a")]}
    assert opsfiles.read_json_shared(path, {}) is first  # the same parse


def test_a_file_changed_since_is_read_again(store: Path, settled: None) -> None:
    path = write_log(store, [an_entry("run_a")])
    first = opsfiles.read_json_shared(path, {})
    write_log(store, [an_entry("run_b")])  # rewritten in place: the same inode, a new size
    assert opsfiles.read_json_shared(path, {})["entries"][0]["run_id"] == "run_b"
    assert first["entries"][0]["run_id"] == "run_a"


def test_an_edit_keeping_size_and_mtime_is_seen(store: Path, settled: None) -> None:
    """Same inode, size and mtime (set back by hand): the ctime still moves."""
    path = write_log(store, [an_entry("run_a")])
    st = os.stat(path)
    opsfiles.read_json_shared(path, {})
    with open(path, "r+b") as handle:
        edited = handle.read().replace(b"run_a", b"run_z")
        handle.seek(0)
        handle.write(edited)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert os.stat(path).st_size == st.st_size and os.stat(path).st_mtime_ns == st.st_mtime_ns
    assert opsfiles.read_json_shared(path, {})["entries"][0]["run_id"] == "run_z"


def test_a_file_changed_moments_before_its_read_is_not_kept(store: Path) -> None:
    """The racy case: a change within the same timestamp tick after the read would keep
    every stat field, so a file changed less than _SETTLED_NS before its read is read again."""
    path = write_log(store, [an_entry("run_a")])  # just now
    first = opsfiles.read_json_shared(path, {})
    second = opsfiles.read_json_shared(path, {})
    assert first == second and first is not second


def test_a_missing_file_is_the_default_and_forgets_the_parse(store: Path, settled: None) -> None:
    path = write_log(store, [an_entry("run_a")])
    opsfiles.read_json_shared(path, {})
    path.unlink()
    assert opsfiles.read_json_shared(path, {"entries": []}) == {"entries": []}
    assert str(path) not in opsfiles._parsed


def test_a_broken_file_is_still_an_error(store: Path, settled: None) -> None:
    path = write_log(store, [])
    path.write_text('{"entries": 3}')
    with pytest.raises(OpsFileError, match="'entries' must be a list"):
        opsfiles.read_json_shared(path, {})
    with pytest.raises(OpsFileError):
        opsfiles.preflight(store)


def test_append_leaves_the_shared_parse_as_it_was(store: Path, settled: None) -> None:
    path = write_log(store, [an_entry("run_a")])
    shared = opsfiles.read_json_shared(path, {})
    log.append(store, an_entry("run_b"))
    assert shared == {"entries": [an_entry("run_a")]}
    assert [e["run_id"] for e in log.read_live(store)] == ["run_a", "run_b"]
    log.append(store, an_entry("run_b"))  # logged already: not twice
    assert [e["run_id"] for e in log.read_live(store)] == ["run_a", "run_b"]


def test_find_run_hands_out_a_copy(store: Path, settled: None) -> None:
    write_log(store, [an_entry("run_a")])
    found = log.find_run(store, "run_a")
    assert found is not None
    found["actions"].append("changed by a caller")
    assert log.find_run(store, "run_a") == an_entry("run_a")


def test_preflight_checks_the_write_back_once_a_parse(store: Path, settled: None,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    write_log(store, [an_entry("run_a")])
    opsfiles.preflight(store)
    calls: list[Any] = []
    real = opsfiles.orjson.dumps

    def counting(*args: Any, **kwargs: Any) -> bytes:
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(opsfiles.orjson, "dumps", counting)
    opsfiles.preflight(store)
    assert [a for a in calls if a and a[0]] == []  # the log not serialised again (the missing files: `{}`)


@pytest.mark.parametrize("marked", [True, False])
def test_a_run_parses_its_log_once_or_not_at_all(store: Path, settled: None, monkeypatch: pytest.MonkeyPatch,
                                                 marked: bool) -> None:
    """The run id's check, the preflight and the append share one parse of the log; none at
    all while the log is as this machine's last append wrote it (its mark in .cache/)."""
    for _ in range(2):
        add(store, content={"summary": "the deploy script lives in tools/deploy.sh"})
    assert engine.consolidate(Store(store)).actions  # a merge: logged in the shared log
    add(store, content={"summary": "second"})
    if not marked:
        (store / ".cache" / "log" / "live.json").unlink()
    parsed: list[str] = []
    real = opsfiles.read_json

    def counting(path: Path, default: dict[str, Any]) -> dict[str, Any]:
        parsed.append(str(path))
        return real(path, default)

    monkeypatch.setattr(opsfiles, "read_json", counting)
    engine.consolidate(Store(store), trigger="session_end")
    assert parsed.count(str(log.log_path(store))) == (0 if marked else 1)
    assert [e["trigger"] for e in log.read_entries(store)] == ["manual", "session_end"]
