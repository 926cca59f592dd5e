"""The audit log and its rotation (SPEC 7): the live file stays small, every run stays readable."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from memcli.cli import app
from memcli.store import log
from memcli.store.store import Store

runner = CliRunner()


def entry(n: int, month: str = "2026-10") -> dict[str, Any]:
    return {"run_id": f"run_{n:04d}", "timestamp": f"{month}-{1 + n % 28:02d}T00:00:00Z",
            "trigger": "session_end", "actions": [], "stats": {"memory_count": n}}


@pytest.fixture
def small(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(log, "LIVE_MAX", 5)
    monkeypatch.setattr(log, "LIVE_KEEP", 3)


def live_ids(root: Path) -> list[str]:
    return [e["run_id"] for e in log.read_live(root)]


def test_split_keeps_the_newest_and_groups_the_rest_by_month() -> None:
    entries: list[Any] = [entry(1, "2026-09"), "junk", entry(2, "2026-10"), entry(3), {"run_id": "x"}, entry(4)]
    kept, moved = log.split_for_rotation(entries, keep=2)
    assert kept == ["junk", {"run_id": "x"}, entry(4)]
    assert moved == {"2026-09": [entry(1, "2026-09")], "2026-10": [entry(2), entry(3)]}


def test_split_below_keep_moves_nothing() -> None:
    entries = [entry(i) for i in range(3)]
    assert log.split_for_rotation(entries, keep=3) == (entries, {})
    assert log.split_for_rotation(entries, keep=4) == (entries, {})


def test_month_of_entries_without_a_timestamp_is_undated() -> None:
    assert log.month_of({"timestamp": "2026-11-22T00:00:00Z"}) == "2026-11"
    assert log.month_of({}) == log.UNDATED
    assert log.month_of({"timestamp": 7}) == log.UNDATED


def test_the_live_file_never_passes_its_limit_and_no_run_is_lost(store: Path, small: None) -> None:
    for n in range(5):
        log.append(store, entry(n))
    assert live_ids(store) == [f"run_{n:04d}" for n in range(5)]  # at the limit: nothing moved
    assert not log.rotated_dir(store).exists()
    log.append(store, entry(5))  # one above: down to LIVE_KEEP
    assert live_ids(store) == ["run_0003", "run_0004", "run_0005"]
    moved = json.loads((store / "ops" / "log" / "2026-10.json").read_bytes())["entries"]
    assert [e["run_id"] for e in moved] == ["run_0000", "run_0001", "run_0002"]
    for n in range(6, 40):
        log.append(store, entry(n, "2026-11" if n >= 20 else "2026-10"))
        assert len(log.read_live(store)) <= 5
    ids = [e["run_id"] for e in log.read_entries(store)]
    assert ids == [f"run_{n:04d}" for n in range(40)]  # every run, once, oldest first
    assert sorted(p.name for p in log.month_files(store)) == ["2026-10.json", "2026-11.json"]


def test_find_run_reaches_moved_runs_and_a_moved_run_is_not_logged_again(store: Path, small: None) -> None:
    for n in range(12):
        log.append(store, entry(n))
    assert "run_0000" not in live_ids(store)
    assert log.find_run(store, "run_0000") == entry(0)
    assert log.find_run(store, "run_9999") is None
    log.append(store, entry(0))  # a recovered run replayed: already in a month file
    assert [e["run_id"] for e in log.read_entries(store)].count("run_0000") == 1
    assert "run_0000" not in live_ids(store)


def test_a_move_cut_short_is_read_once_and_healed_by_the_next(store: Path, small: None) -> None:
    for n in range(5):
        log.append(store, entry(n))
    # a crash after the month file was written, before the live file was: runs in both
    (store / "ops" / "log").mkdir()
    (store / "ops" / "log" / "2026-10.json").write_text(json.dumps({"entries": [entry(0), entry(1)]}))
    assert [e["run_id"] for e in log.read_entries(store)] == [f"run_{n:04d}" for n in range(5)]
    log.append(store, entry(5))
    months = json.loads((store / "ops" / "log" / "2026-10.json").read_bytes())["entries"]
    assert [e["run_id"] for e in months] == ["run_0000", "run_0001", "run_0002"]
    assert live_ids(store) == ["run_0003", "run_0004", "run_0005"]


def test_undated_entries_move_to_their_own_file(store: Path, small: None) -> None:
    log.append(store, {"run_id": "run_old", "trigger": "weekly", "actions": []})
    for n in range(5):
        log.append(store, entry(n))
    assert (store / "ops" / "log" / "undated.json").exists()
    assert log.read_entries(store)[0]["run_id"] == "run_old"


def test_a_broken_month_file_never_stops_a_run_and_doctor_names_it(store: Path, small: None) -> None:
    (store / "ops" / "log").mkdir(parents=True)
    bad = store / "ops" / "log" / "2026-10.json"
    bad.write_text('{"entries": "x"}')
    for n in range(8):
        log.append(store, entry(n))
    assert len(log.read_live(store)) == 8  # nothing moved into a file memcli cannot read
    assert bad.read_text() == '{"entries": "x"}'
    result = runner.invoke(app, ["--store", str(store), "--json", "doctor"])
    found = json.loads(result.stdout)
    problems = found.get("problems", found.get("findings", []))
    assert any(p["code"] == "ops_unreadable" and p["path"].endswith("ops/log/2026-10.json") for p in problems)


def test_memcli_log_and_stats_read_moved_runs(store: Path, small: None) -> None:
    for n in range(9):
        log.append(store, entry(n))
    out = runner.invoke(app, ["--store", str(store), "--json", "stats"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout)["runs"] == 9
    out = runner.invoke(app, ["--store", str(store), "--json", "log", "--last", "0"])
    assert out.exit_code == 0, out.output
    text = out.stdout
    assert "run_0000" in text and "run_0008" in text


def test_a_linked_ops_log_folder_is_never_written_through(store: Path, small: None, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (store / "ops" / "log").symlink_to(outside)
    Store(store)  # as every command does: the store confines memcli's writes to itself
    for n in range(5):
        log.append(store, entry(n))
    log.append(store, entry(5))  # the move is refused; the run is still logged, live
    assert list(outside.iterdir()) == []
    assert live_ids(store) == [f"run_{n:04d}" for n in range(6)]


def test_a_run_ids_month_is_the_month_its_entry_is_moved_to() -> None:
    import datetime as dt

    from memcli.store.model import format_ts, new_run_id

    for moment in (dt.datetime(2026, 11, 30, 23, 59, 59, 999000, tzinfo=dt.timezone.utc),
                   dt.datetime(2026, 12, 1, 0, 0, tzinfo=dt.timezone.utc),
                   dt.datetime(1999, 1, 1, 5, tzinfo=dt.timezone(dt.timedelta(hours=8)))):
        assert log.id_month(new_run_id(moment)) == log.month_of({"timestamp": format_ts(moment)})
    for not_ulid in ("run_0000", "run_old", "mem_01JD3Z7Q9K8V5T2N4M6P0R1S3A", "run_01JD3Z7Q9K8V5T2N4M6P0R1S3", "run_01JD3Z7Q9U8V5T2N4M6P0R1S3A"):
        assert log.id_month(not_ulid) is None


def test_run_taken_reads_only_the_files_that_can_hold_the_run(store: Path, small: None) -> None:
    import datetime as dt

    from memcli.store.model import new_run_id

    rid = new_run_id(dt.datetime(2026, 10, 5, tzinfo=dt.timezone.utc))
    folder = store / "ops" / "log"
    folder.mkdir(parents=True)
    assert not log.run_taken(store, rid)
    # a month file of another month is never read: even one naming the id (not where memcli puts it)
    (folder / "2026-09.json").write_text(json.dumps({"entries": [{"run_id": rid}]}))
    assert not log.run_taken(store, rid)
    assert log.find_run(store, rid) == {"run_id": rid}  # (reading a run's entry still looks everywhere)
    for name in ("2026-10.json", "undated.json"):  # its own month, and entries without a timestamp
        (folder / name).write_text(json.dumps({"entries": [{"run_id": rid}]}))
        assert log.run_taken(store, rid)
        (folder / name).write_text(json.dumps({"entries": [{"run_id": "run_other"}]}))
        assert not log.run_taken(store, rid)
    # an id spelled with JSON escapes is still found (the bytes alone would miss it)
    escaped = '{"entries": [{"run_id": "\\u0072' + rid[1:] + '"}]}'
    (folder / "2026-10.json").write_text(escaped)
    assert log.run_taken(store, rid)
    (folder / "2026-10.json").write_text('{"entries": "x"}')  # broken: holds no run, stops nothing
    assert not log.run_taken(store, rid)
    log.append(store, {"run_id": rid, "timestamp": "2026-10-05T00:00:00Z", "actions": []})  # the live file
    assert log.run_taken(store, rid)
    quiet = new_run_id(dt.datetime(2026, 10, 6, tzinfo=dt.timezone.utc))
    log.append(store, {"run_id": quiet, "timestamp": "2026-10-06T00:00:00Z", "actions": []}, quiet=True)
    assert log.run_taken(store, quiet)  # this machine's quiet runs too
    # an id that names no moment: every month file is looked at
    (folder / "2026-09.json").write_text(json.dumps({"entries": [{"run_id": "run_old"}]}))
    assert log.run_taken(store, "run_old") and not log.run_taken(store, "run_older")


def big_entry(n: int) -> dict[str, Any]:
    """An entry with what JSON can hold: nesting, empty containers, escapes, non-ASCII text."""
    return {"run_id": f"run_{n:04d}", "timestamp": f"2026-10-{1 + n % 28:02d}T00:00:00Z", "trigger": "manual",
            "actions": [{"type": "merge", "source_ids": ["mem_a", "mem_b"], "why": "line\nbreak \"quoted\" \u00e9t\u00e9"},
                        {"type": "flag", "memory_ids": [], "extra": {}}, {"nested": [[1, 2.5, None, True], {"k": []}]}],
            "stats": {"memory_count": n}}


def parses(monkeypatch: pytest.MonkeyPatch, root: Path) -> list[str]:
    from memcli.store import opsfiles

    seen: list[str] = []
    real = opsfiles.read_json
    monkeypatch.setattr(opsfiles, "read_json", lambda path, default: seen.append(str(path)) or real(path, default))
    return seen


def test_appending_to_the_marked_bytes_writes_what_a_full_rewrite_writes(store: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    import orjson

    log.append(store, big_entry(0))  # no mark yet: parsed (nothing there), written whole, marked
    seen = parses(monkeypatch, store)
    for n in range(1, 6):
        log.append(store, big_entry(n))
    assert str(log.log_path(store)) not in seen  # every later append: the bytes, no parse
    whole = orjson.dumps({"entries": [big_entry(n) for n in range(6)]}, option=orjson.OPT_INDENT_2) + b"\n"
    assert log.log_path(store).read_bytes() == whole
    assert log.as_written(store) is not None
    log.append(store, big_entry(3))  # a recovered run logged already: not twice
    assert log.log_path(store).read_bytes() == whole


def test_a_log_changed_since_it_was_marked_is_read_as_json(store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for n in range(2):
        log.append(store, entry(n))
    path = log.log_path(store)
    edited = json.loads(path.read_text())
    edited["entries"].append("a note by hand")
    edited["zz_after"] = [{"kept": True}]  # entries no longer last: the bytes cannot be appended to
    path.write_text(json.dumps(edited))
    assert log.as_written(store) is None
    seen = parses(monkeypatch, store)
    log.append(store, entry(2))
    assert seen.count(str(path)) == 1
    data = json.loads(path.read_text())
    assert data["zz_after"] == [{"kept": True}] and data["entries"][-2:] == ["a note by hand", entry(2)]
    assert log.as_written(store) is not None  # marked again, but not appendable: read as JSON again
    log.append(store, entry(3))
    assert seen.count(str(path)) == 2
    assert [e["run_id"] for e in log.read_live(store) if isinstance(e, dict)] == [f"run_{n:04d}" for n in range(4)]


@pytest.mark.parametrize("damage", [b"", b"{", b'{"sha256": 1, "entries": 1}', b'{"sha256": "00", "entries": 1}',
                                    b'{"entries": "x"}', b"[]"])
def test_a_missing_or_damaged_mark_only_costs_a_parse(store: Path, damage: bytes) -> None:
    log.append(store, entry(0))
    mark = store / ".cache" / "log" / "live.json"
    mark.write_bytes(damage)
    assert log.as_written(store) is None
    log.append(store, entry(1))
    assert live_ids(store) == ["run_0000", "run_0001"] and log.as_written(store) is not None


def test_a_full_live_file_is_appended_to_in_full_and_moves_entries_out(store: Path, small: None,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    for n in range(5):
        log.append(store, entry(n))
    seen = parses(monkeypatch, store)
    log.append(store, entry(5))  # one above LIVE_MAX: the move needs the parse
    assert seen.count(str(log.log_path(store))) == 1
    log.append(store, entry(6))  # room again: the bytes
    assert seen.count(str(log.log_path(store))) == 1
    assert live_ids(store) == ["run_0003", "run_0004", "run_0005", "run_0006"]


def test_a_run_a_month_file_holds_is_not_appended_to_the_bytes(store: Path, small: None) -> None:
    log.append(store, entry(0, "2026-11"))
    (store / "ops" / "log").mkdir()
    (store / "ops" / "log" / "2026-10.json").write_text(json.dumps({"entries": [entry(1)]}))
    log.append(store, entry(1))  # moved out already (a recovered run): not logged again
    assert live_ids(store) == ["run_0000"]


def test_preflight_takes_a_marked_log_as_it_is_and_still_refuses_a_broken_one(store: Path) -> None:
    from memcli.errors import OpsFileError
    from memcli.store import opsfiles

    log.append(store, entry(0))
    opsfiles.preflight(store)
    log.log_path(store).write_text('{"entries": "not a list"}')
    with pytest.raises(OpsFileError):
        opsfiles.preflight(store)


def test_the_marked_bytes_are_hashed_once_a_file_and_the_mark_follows_from_that_hash(
        store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import hashlib
    import os

    for n in range(3):
        log.append(store, big_entry(n))
    path, mark = log.log_path(store), store / ".cache" / "log" / "live.json"
    assert json.loads(mark.read_bytes())["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    hashed: list[int] = []

    class Counting:
        def sha256(self, data: Any = b"") -> Any:
            hashed.append(len(data))
            return hashlib.sha256(data)

    monkeypatch.setattr(log, "hashlib", Counting())
    log._hashed.clear()  # (a new process)
    assert log.as_written(store) is not None and log.as_written(store) is not None
    assert len(hashed) == 1  # the same file, unchanged: hashed once (the preflight, then the append)
    log.append(store, big_entry(3))
    assert len(hashed) == 1  # the new mark's hash goes on from the one of the bytes kept
    assert json.loads(mark.read_bytes())["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    raw = path.read_bytes()  # the same size, another byte, another mtime: hashed again, and refused
    path.write_bytes(raw.replace(b"run_0001", b"run_0009"))
    os.utime(path, ns=(os.stat(path).st_atime_ns, os.stat(path).st_mtime_ns + 1))
    assert log.as_written(store) is None and len(hashed) == 2
    log.append(store, big_entry(4))  # parsed, written whole, marked
    assert log.as_written(store) is not None
    assert [e["run_id"] for e in log.read_live(store)] == ["run_0000", "run_0009", "run_0002", "run_0003", "run_0004"]


def _appended_whole(store: Path, count: int) -> bytes:
    import orjson

    return orjson.dumps({"entries": [big_entry(n) for n in range(count)]}, option=orjson.OPT_INDENT_2) + b"\n"


@pytest.mark.parametrize("kernel_copy", [True, False])
def test_the_bytes_kept_by_an_append_are_copied_from_the_very_file_read(
        store: Path, monkeypatch: pytest.MonkeyPatch, kernel_copy: bool) -> None:
    from memcli.store import fsops

    monkeypatch.setattr(fsops, "_copy_range", kernel_copy and hasattr(os, "copy_file_range"))
    log.append(store, big_entry(0))
    spans: list[int] = []
    real = fsops.Span.copy_to

    def counted(span: fsops.Span, dst: int) -> None:
        spans.append(span.length)
        real(span, dst)

    monkeypatch.setattr(fsops.Span, "copy_to", counted)
    for n in range(1, 4):
        log.append(store, big_entry(n))
    assert len(spans) == 3 and all(length > 0 for length in spans)
    assert log.log_path(store).read_bytes() == _appended_whole(store, 4)


def test_a_log_replaced_or_written_in_place_after_it_was_read_is_appended_to_from_the_bytes_read(
        store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Replaced by the same bytes (another file): joined from the bytes read, no span. Written
    in place while its bytes are copied: that copy is dropped, and joined as well."""
    from memcli.store import fsops

    log.append(store, big_entry(0))
    path = log.log_path(store)
    real_as_written = log._as_written

    def then_replaced(root: Path) -> Any:
        found = real_as_written(root)
        copy = path.with_name("copy")
        copy.write_bytes(path.read_bytes())
        os.replace(copy, path)  # the same bytes, another inode
        return found

    monkeypatch.setattr(log, "_as_written", then_replaced)
    spans: list[int] = []
    real_copy = fsops.Span.copy_to

    def counted(span: fsops.Span, dst: int) -> None:
        spans.append(1)
        real_copy(span, dst)

    monkeypatch.setattr(fsops.Span, "copy_to", counted)
    log.append(store, big_entry(1))
    assert spans == [] and path.read_bytes() == _appended_whole(store, 2)
    monkeypatch.setattr(log, "_as_written", real_as_written)

    def edited_meanwhile(span: fsops.Span, dst: int) -> None:
        spans.append(2)
        with open(path, "ab") as handle:  # in place, by a hand
            handle.write(b" ")
        real_copy(span, dst)

    monkeypatch.setattr(fsops.Span, "copy_to", edited_meanwhile)
    log.append(store, big_entry(2))
    assert spans == [2] and path.read_bytes() == _appended_whole(store, 3)
    assert [p.name for p in path.parent.iterdir() if p.name.endswith(fsops.TMP_SUFFIX)] == []
