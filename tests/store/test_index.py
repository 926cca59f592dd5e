"""The index's fast paths: splicing a few entries, the binary last-run snapshot, the
signature cache's appends. Each must give what the slow, obvious path gives."""

from __future__ import annotations

import os
import time
from array import array
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memcli.consolidate import engine
from memcli.store import index, journal, lastrun, opsfiles
from memcli.store.model import parse_ts
from memcli.store.store import STAMP_AGE_NS, Store
from tests import sweep
from tests.conftest import NOW, add, assert_invariants, days_ago, write_memory

MOMENT = parse_ts(NOW)[0]
DUP = "Restart the payments worker after every config change to the staging cluster"


def cached(store: Path, rel: str) -> Path:
    """Where a memory folder's caches live: under .cache/, never beside the memories."""
    return store / ".cache" / "folders" / rel


def entry(mem_id: str, file: str, n: int) -> dict[str, Any]:
    return {"id": mem_id, "file": file, "type": "semantic", "subtype": "fact", "tags": [f"t{n}", 'q"uote'],
            "summary": f'{{"id":"mem_fake","file":"x"}} {n}', "size": n, "mtime_ns": n * 7,
            "content_hash": f"{n:064x}", "run_hash": f"{n:064x}"}


ids = st.sampled_from([f"mem_{c}" for c in "ABCDEFGH"])
files = st.tuples(ids, st.sampled_from(["json", "md", "@run_1.json", "@run_2.md"])).map(
    lambda t: (t[0], t[0] + (t[1] if t[1].startswith("@") else "." + t[1])))


@settings(max_examples=sweep.scale(37, 150), deadline=None)
@given(before=st.dictionaries(files.map(lambda t: t[1]), ids, max_size=12),
       changes=st.dictionaries(files.map(lambda t: t[1]), st.integers(0, 50) | st.none(), max_size=6))
def test_splice_writes_what_a_full_rewrite_writes(tmp_path_factory: pytest.TempPathFactory,
                                                  before: dict[str, str], changes: dict[str, int | None]) -> None:
    folder = tmp_path_factory.mktemp("splice")
    old = {name: entry(name.split("@")[0].split(".")[0], name, n) for n, name in enumerate(sorted(before))}
    index.save(folder, index.build("archive", "archive", list(old.values()), MOMENT))
    expected = dict(old)
    for name, n in changes.items():
        if n is None:
            expected.pop(name, None)
        else:
            expected[name] = entry(name.split("@")[0].split(".")[0], name, 100 + n)
    seen: dict[str, Any] = {}

    def update(name: str, previous: dict[str, Any] | None) -> dict[str, Any] | None:
        seen[name] = previous
        return expected.get(name)

    assert index.splice(folder, "archive", "archive", MOMENT, update, list(changes))
    assert seen == {name: old.get(name) for name in changes}  # each old entry handed over as it was
    full = tmp_path_factory.mktemp("full")
    index.save(full, index.build("archive", "archive", [expected[k] for k in sorted(expected)], MOMENT))
    assert (folder / index.INDEX_NAME).read_bytes() == (full / index.INDEX_NAME).read_bytes()


@pytest.mark.parametrize("picked", [[0, 1], [999, 1000, 1001], [2998, 2999], [0, 1500, 2999]])
def test_splice_of_a_large_index_finds_first_middle_and_last_entries(tmp_path: Path, picked: list[int]) -> None:
    """A binary search over the bytes: entries of every length, the first and last ones."""
    names = [f"mem_{n:05d}.json" for n in range(0, 6000, 2)]  # 3,000 entries, even numbers
    old = {name: {**entry(name[:-5], name, n), "summary": "x" * (n % 97)} for n, name in enumerate(names)}
    index.save(tmp_path, index.build("agent", "coder", list(old.values()), MOMENT))
    expected = dict(old)
    changes = [names[k] for k in picked] + [f"mem_{n:05d}.json" for n in (-1, 1, 2999, 6001)]  # new ones too
    for k, name in enumerate(changes):
        if k % 3 == 1 and name in expected:
            expected.pop(name)  # a removal
        else:
            expected[name] = entry(name.split(".")[0], name, 9000 + k)
    assert index.splice(tmp_path, "agent", "coder", MOMENT, lambda name, _: expected.get(name), changes)
    full = tmp_path / "full"
    full.mkdir()
    index.save(full, index.build("agent", "coder", [expected[k] for k in sorted(expected)], MOMENT))
    assert (tmp_path / index.INDEX_NAME).read_bytes() == (full / index.INDEX_NAME).read_bytes()


def test_splice_leaves_an_index_in_another_layout_alone(tmp_path: Path) -> None:
    pretty = orjson.dumps(index.build("agent", "coder", [entry("mem_A", "mem_A.json", 1)], MOMENT),
                          option=orjson.OPT_INDENT_2)
    (tmp_path / index.INDEX_NAME).write_bytes(pretty)
    assert not index.splice(tmp_path, "agent", "coder", MOMENT, lambda n, o: None, ["mem_A.json"])
    assert (tmp_path / index.INDEX_NAME).read_bytes() == pretty
    assert not index.splice(tmp_path / "missing", "agent", "coder", MOMENT, lambda n, o: None, ["x.json"])


# ---------------------------------------------------------------- through a session_end run


def full_index(store: Path, rel: str) -> list[dict[str, Any]]:
    """What a rebuild from the files gives for the folder (run hashes as the index has them)."""
    s = Store(store)
    folder = s.folder_by_rel(rel)
    assert folder is not None
    return s.scan(folder, load=True).entries


def test_session_end_updates_indices_as_a_rebuild_would(store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    old = add(store, summary=DUP, created_at=days_ago(40))
    for n in range(30):
        add(store, summary=f"fact number {n} about the {n * 7} servers in rack {n % 5}")
    add(store, summary="never used", access_count=0, tags=["old"])  # archived: archive/ gets an index
    engine.consolidate(Store(store))
    new = add(store, summary=DUP + " again", created_at=days_ago(10))
    hand = add(store, summary="a hand-written note that stays", created_at=days_ago(9))
    rebuilt: list[str] = []
    monkeypatch.setattr(journal, "_reindex_folder", lambda s, rel, **kw: rebuilt.append(rel))
    out = engine.consolidate(Store(store), trigger="session_end")
    assert rebuilt == []  # every index was spliced, none rebuilt
    monkeypatch.undo()
    assert [a["type"] for a in out.actions] == ["merge"] and out.actions[0]["source_ids"] == [old["id"], new["id"]]
    assert_invariants(store)
    for rel in ("agent/coder", "archive"):
        saved = orjson.loads((store / rel / index.INDEX_NAME).read_bytes())["entries"]
        assert saved == full_index(store, rel), rel
    entries = {e["id"]: e for e in orjson.loads((store / "agent/coder" / index.INDEX_NAME).read_bytes())["entries"]}
    assert entries[hand["id"]]["run_hash"] == entries[hand["id"]]["content_hash"]
    snap = lastrun.load_lastrun(cached(store, "agent/coder"))
    assert snap is not None and snap.names == sorted(p.name for p in (store / "agent" / "coder").glob("mem_*"))


def test_session_end_rereads_a_same_size_edit_as_new_as_the_snapshot(store: Path) -> None:
    data = add(store, summary="kept", access_count=3)
    engine.consolidate(Store(store))
    folder = store / "agent" / "coder"
    path = folder / f"{data['id']}.json"
    written = os.stat(cached(store, "agent/coder") / lastrun.LASTRUN_NAME).st_mtime_ns
    before = path.stat()
    write_memory(store, {**data, "access_count": 0})  # "3" -> "0": same size
    assert path.stat().st_size == before.st_size
    os.utime(path, ns=(written, written))  # within the same timestamp tick as the snapshot
    out = engine.consolidate(Store(store), trigger="session_end")
    assert [a["memory_id"] for a in out.actions] == [data["id"]]


def test_session_end_with_an_index_in_another_layout_rebuilds_it(store: Path) -> None:
    add(store, summary=DUP, created_at=days_ago(40))
    engine.consolidate(Store(store))
    path = store / "agent" / "coder" / index.INDEX_NAME
    path.write_bytes(orjson.dumps(orjson.loads(path.read_bytes()), option=orjson.OPT_INDENT_2))
    add(store, summary=DUP + " again", created_at=days_ago(10))
    engine.consolidate(Store(store), trigger="session_end")
    assert_invariants(store)
    assert orjson.loads(path.read_bytes())["entries"] == full_index(store, "agent/coder")


def age_folder(folder: Path, seconds: float = 3600) -> int:
    """Set the folder's mtime back, as if no file had come or gone there for a while."""
    stamp = time.time_ns() - int(seconds * 1e9)
    os.utime(folder, ns=(stamp, stamp))
    return stamp


def listings(store: Path) -> dict[str, Any]:
    return dict(opsfiles.read_state(store).get("listings", {}))


def test_session_end_lists_a_folder_again_only_when_its_mtime_moved(
        store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kept = add(store, summary="a fact that stays where it is")
    engine.consolidate(Store(store))
    folder = store / "agent" / "coder"
    engine.consolidate(Store(store), trigger="session_end")
    assert "agent/coder" not in listings(store)  # changed a moment ago: no stamp yet
    stamp = age_folder(folder)
    engine.consolidate(Store(store), trigger="session_end")
    written = os.stat(cached(store, "agent/coder") / lastrun.LASTRUN_NAME).st_mtime_ns
    assert listings(store)["agent/coder"] == [stamp, written]
    listed: list[str] = []
    real_listdir = os.listdir
    monkeypatch.setattr(os, "listdir", lambda p=".": listed.append(str(p)) or real_listdir(p))
    out = engine.consolidate(Store(store), trigger="session_end")
    assert str(folder) not in listed and out.actions == []
    assert listings(store)["agent/coder"] == [stamp, written]  # still vouched for
    new = add(store, summary=DUP, created_at=days_ago(40))  # files came: the folder's mtime moved
    add(store, summary=DUP + " again", created_at=days_ago(10))
    out = engine.consolidate(Store(store), trigger="session_end")
    assert str(folder) in listed
    assert [a["type"] for a in out.actions] == ["merge"] and new["id"] in out.actions[0]["source_ids"]
    assert kept["id"] not in str(out.actions)
    assert "agent/coder" not in listings(store)  # its snapshot was rewritten
    assert_invariants(store)


def test_session_end_drops_a_file_removed_by_hand_from_index_and_snapshot(
        store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file deleted by hand, nothing else changed in its folder: the pass drops its entry
    and its snapshot row (the index lists the folder's files again), and a later pass can
    vouch for the folder's listing again instead of listing it on every pass."""
    kept = add(store, summary="a fact that stays where it is")
    gone = add(store, summary="a note someone deletes by hand")
    other = add(store, scope_id="tester", created_by="agent:tester", summary="a memory of another agent")
    engine.consolidate(Store(store))
    folder = store / "agent" / "coder"
    (folder / f"{gone['id']}.json").unlink()
    age_folder(folder)
    out = engine.consolidate(Store(store), trigger="session_end")
    assert out.actions == []
    assert_invariants(store)  # the index lists exactly the files left
    snap = lastrun.load_lastrun(cached(store, "agent/coder"))
    assert snap is not None and snap.names == [f"{kept['id']}.json"]
    assert "agent/coder" not in listings(store)  # its snapshot was rewritten
    age_folder(folder)
    engine.consolidate(Store(store), trigger="session_end")
    assert "agent/coder" in listings(store)  # its names are the snapshot's again: vouched for
    listed: list[str] = []
    real_listdir = os.listdir
    monkeypatch.setattr(os, "listdir", lambda p=".": listed.append(str(p)) or real_listdir(p))
    engine.consolidate(Store(store), trigger="session_end")
    assert str(folder) not in listed
    assert (store / "agent" / "tester" / f"{other['id']}.json").exists()
    assert_invariants(store)


def test_session_end_takes_a_touched_file_as_unchanged_once(store: Path) -> None:
    """A file whose mtime moved but whose content did not: read again once, its entry and
    snapshot row take the new mtime, and the next pass does not read it again."""
    add(store, summary="a fact")
    touched = add(store, summary="a note an editor saved unchanged")
    engine.consolidate(Store(store))
    path = store / "agent" / "coder" / f"{touched['id']}.json"
    later = os.stat(path).st_mtime_ns + 5_000_000_000
    os.utime(path, ns=(later, later))
    out = engine.consolidate(Store(store), trigger="session_end")
    assert out.actions == []
    snap = lastrun.load_lastrun(cached(store, "agent/coder"))
    assert snap is not None and snap.mtimes[snap.row(path.name)] == later
    entries = orjson.loads((path.parent / index.INDEX_NAME).read_bytes())["entries"]
    assert [e["mtime_ns"] for e in entries if e["file"] == path.name] == [later]
    assert_invariants(store)


def test_session_end_keeps_the_row_of_a_changed_file_it_did_not_cover(store: Path) -> None:
    """The snapshot rows of a folder a pass did not cover change only where the content did
    not: a file changed since the last run keeps its row (its run hash), so it stays in scope."""
    add(store, summary="a fact")
    edited = add(store, summary="a note edited by hand")
    engine.consolidate(Store(store))
    folder = store / "agent" / "coder"
    snap = lastrun.load_lastrun(cached(store, "agent/coder"))
    assert snap is not None
    row_hash = snap.content_hash(snap.row(f"{edited['id']}.json"))  # type: ignore[arg-type]
    from memcli.store import journal as journal_module

    fresh = [{"file": f"{edited['id']}.json", "content_hash": "0" * 64, "size": 1, "mtime_ns": 1,
              "type": "semantic", "subtype": "x"}]
    journal_module._update_uncovered_rows(folder, snap, [f"{edited['id']}.json"], fresh,
                                          cached(store, "agent/coder"))
    again = lastrun.load_lastrun(cached(store, "agent/coder"))
    assert again is not None and again.content_hash(again.row(f"{edited['id']}.json")) == row_hash  # type: ignore[arg-type]


def test_session_end_keeps_no_stamp_for_a_folder_changed_just_before_its_listing(store: Path) -> None:
    add(store, summary="a fact")
    engine.consolidate(Store(store))
    folder = store / "agent" / "coder"
    age_folder(folder, seconds=STAMP_AGE_NS / 1e9 / 2)
    engine.consolidate(Store(store), trigger="session_end")
    assert "agent/coder" not in listings(store)


def test_a_stale_or_damaged_stamp_is_no_stamp(store: Path) -> None:
    add(store, summary="a fact")
    engine.consolidate(Store(store))
    folder = store / "agent" / "coder"
    mtime = os.stat(folder).st_mtime_ns
    state = opsfiles.read_state(store)
    for saved in ([mtime, 1], "junk", [mtime], [str(mtime), 1]):  # another snapshot's, or not a stamp
        state["listings"] = {"agent/coder": saved}
        opsfiles.write_state(store, state)
        new = add(store, summary=f"a note written by hand {saved!r}")
        os.utime(folder, ns=(mtime, mtime))  # as if the new file had not moved it
        out = engine.consolidate(Store(store), dry_run=True, trigger="session_end")
        assert out.stats["memory_count"] == len(list(folder.glob("mem_*"))), saved
        new_path = folder / f"{new['id']}.json"
        new_path.rename(folder.parent / new_path.name)  # out of the folder again
        os.utime(folder, ns=(mtime, mtime))


def test_the_file_list_by_difference_with_the_snapshot_is_memory_names(store: Path) -> None:
    kept = [add(store) for _ in range(3)]
    engine.consolidate(Store(store))
    s = Store(store)
    folder = s.folder("agent", "coder")
    snap = lastrun.load_lastrun(folder.cache())
    assert snap is not None and s._names_since(folder, snap, None)[0] == s.memory_names(folder) == snap.names
    (folder.path / "notes.txt").write_text("not a memory")
    (folder.path / ".hidden.json").write_text("{}")
    add(store)
    assert s._names_since(folder, snap, None)[0] == s.memory_names(folder) != snap.names
    (folder.path / f"{kept[0]['id']}.json").unlink()  # a file gone: the plain listing is used
    assert s._names_since(folder, snap, None)[0] == s.memory_names(folder)


def test_a_memory_planned_from_its_entry_whose_file_goes_bad_is_skipped(store: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Planned from its index entry, the file is read only when the archive needs it; broken
    by then, the action carries a hash no file has, so applying it skips it and the file is
    left as it is, while the rest of the run goes on."""
    stale = add(store, summary="never used", access_count=0, tags=["old"])
    other = add(store, summary="never used either", access_count=0, tags=["older"])
    from memcli.store.memories import reindex

    reindex(Store(store))
    path = store / "agent" / "coder" / f"{stale['id']}.json"
    real_read = Store._read_record

    def read(self: Store, folder: Any, name: str, *size: Any) -> Any:
        if name == path.name:
            path.write_text("{broken")  # gone bad between the scan and the read
        return real_read(self, folder, name, *size)

    monkeypatch.setattr(Store, "_read_record", read)
    planning = engine.plan(Store(store), engine.RunOptions(), engine.now())
    monkeypatch.undo()
    assert {a.log["memory_id"] for a in planning.plan.actions} == {stale["id"], other["id"]}
    out = engine.apply(Store(store), planning)
    assert {(a["type"], a["memory_id"]) for a in out.actions} == {
        ("skip", stale["id"]), ("archive", other["id"])}
    assert path.read_text() == "{broken"
    assert not (store / "archive" / path.name).exists()


def _planned(root: Path) -> dict[str, Any]:
    """The memories of agent/coder planned from their index entries, by id."""
    s = Store(root)
    folder = next(f for f in s.memory_folders() if f.rel == "agent/coder")
    scan = s.scan(folder, load=False, entries=False, compare=False)
    return {m.id: m for m in s.planned(folder, [e for e in scan.entries if e["id"] not in scan.memories])}


def test_a_planned_memory_reads_the_record_a_full_read_gives(store: Path) -> None:
    """The quick read of a planned memory's file gives the record the full read gives: for the
    usual record (quick path), a markdown file and a timestamp without a zone (full path),
    and none, the memory's hash then no file's, for a file that went bad or names another
    scope since the index entry was written."""
    from memcli.store.memories import reindex
    from memcli.store.model import VANISHED

    usual = add(store, summary="usual record")
    md = add(store, "md", summary="markdown record")
    zoneless = add(store, summary="no zone")
    moved = add(store, summary="claims another folder")
    broken = add(store, summary="goes bad")
    reindex(Store(store))
    planned = _planned(store)  # files changed after the scan, before the reads
    assert len(planned) == 5
    where = store / "agent" / "coder"
    raw = orjson.loads((where / f"{zoneless['id']}.json").read_bytes())
    raw["created_at"] = raw["created_at"].replace("Z", "").replace("+00:00", "")
    (where / f"{zoneless['id']}.json").write_bytes(orjson.dumps(raw))
    raw = orjson.loads((where / f"{moved['id']}.json").read_bytes())
    (where / f"{moved['id']}.json").write_bytes(orjson.dumps({**raw, "scope_id": "reviewer"}))
    (where / f"{broken['id']}.json").write_text("{broken")
    s = Store(store)
    folder = next(f for f in s.memory_folders() if f.rel == "agent/coder")
    for mem in (usual, md, zoneless):
        mem_id = mem["id"]
        name = planned[mem_id].name
        assert planned[mem_id].data == s.read_memory(where / name, folder).data
        assert planned[mem_id].content_hash != VANISHED
    assert "+" not in planned[zoneless["id"]].data["created_at"]
    for mem in (moved, broken):
        assert planned[mem["id"]].data == planned[mem["id"]].facts
        assert planned[mem["id"]].content_hash == VANISHED


@pytest.mark.parametrize("indexed", [False, True])
def test_reindexing_a_covered_folder_gives_every_entry_its_run_hash_and_keeps_no_record(
        store: Path, indexed: bool) -> None:
    """A real run re-indexes the folders it covered: from entries made by its own scan (no
    index yet: edited in place) or from the saved index's own entries (copied), the same
    index either way; the scan keeps only entries, not the records it read."""
    for n in range(4):
        add(store, summary=f"note {n} on rack {n}", created_at=days_ago(40 - n))
    s = Store(store)
    folder = s.folder("agent", "coder")
    if indexed:
        s.refresh_index(folder)
        before = orjson.loads((store / "agent/coder" / index.INDEX_NAME).read_bytes())["entries"]
        assert all(e.get("run_hash") is None for e in before)
    scan = s.scan(folder, load=False, keep=False)
    assert scan.memories == {} and len(scan.entries) == 4
    assert s.scan(folder, load=False).entries == scan.entries  # keep=False changes nothing else
    hashes = journal._reindex_folder(s, "agent/coder", refresh_run_hash=True)
    saved = orjson.loads((store / "agent/coder" / index.INDEX_NAME).read_bytes())
    assert hashes == {e["content_hash"] for e in saved["entries"]} and saved["entry_count"] == 4
    assert all(e["run_hash"] == e["content_hash"] for e in saved["entries"])
    assert [{k: v for k, v in e.items() if k != "run_hash"} for e in saved["entries"]] == [
        {k: v for k, v in e.items() if k != "run_hash"} for e in full_index(store, "agent/coder")]
    snap = lastrun.load_lastrun(cached(store, "agent/coder"))
    assert snap is not None and len(snap.names) == 4


def _scan_since_as_before(s: Store, folder: Any, snap: lastrun.Snapshot) -> tuple[list[int], list[str]] | None:
    """`kept` and `reread` as scan_since made them with a test a row (before `_rows_but`);
    None when no listed file differs and none is gone (a file gone alone changes no memory,
    but its index entry and snapshot row go: it is read again, as gone)."""
    names = s.memory_names(folder)
    stats = [os.lstat(folder.path / n) if (folder.path / n).exists() else None for n in names]
    differ = {n for n, st_ in zip(names, stats, strict=True) if st_ is None or not snap.trusted(
        snap.row(n) if snap.row(n) is not None else 0, st_.st_size, st_.st_mtime_ns) or snap.row(n) is None}
    present = set(names) - differ
    if not differ and set(snap.names) <= present:
        return None
    return [i for i, n in enumerate(snap.names) if n in present], sorted(differ | (set(snap.names) - present))


@pytest.mark.parametrize("change", ["none", "added", "edited_first", "edited_last", "gone_first", "gone_last",
                                    "added_and_gone", "added_and_edited", "everything"])
def test_scan_since_keeps_exactly_the_rows_of_files_unchanged(store: Path, change: str) -> None:
    mems = [add(store, summary=f"note {n} about {n * 7} things") for n in range(6)]
    engine.consolidate(Store(store))
    s = Store(store)
    folder = s.folder("agent", "coder")
    snap = lastrun.load_lastrun(folder.cache())
    assert snap is not None and len(snap.names) == 6
    by_name = sorted(f"{m['id']}.json" for m in mems)
    first, last = folder.path / by_name[0], folder.path / by_name[-1]
    if change in ("added", "added_and_gone", "added_and_edited", "everything"):
        add(store, summary="a note written in this session")
    if change == "added_and_edited":
        add(store, summary="another note of this session")
        os.utime(folder.path / by_name[3], ns=(time.time_ns(), time.time_ns()))
    if change in ("edited_first", "everything"):
        first.write_bytes(first.read_bytes().replace(b"note 0", b"NOTE 0").replace(b"note", b"Note", 1))
    if change in ("edited_last", "everything"):
        os.utime(last, ns=(time.time_ns(), time.time_ns()))
    if change in ("gone_first", "added_and_gone"):
        first.unlink()
    if change in ("gone_last", "everything"):
        os.unlink(folder.path / by_name[2])
    scan = s.scan_since(folder, snap)
    before = _scan_since_as_before(s, folder, snap)
    if before is None:
        assert change == "none"
        assert scan.reread is None and scan.kept == [] and scan.count == len(s.memory_names(folder))
        return
    assert (scan.kept, scan.reread) == before
    assert scan.count == len(s.memory_names(folder))


def test_files_added_and_a_problem_give_the_problems_of_the_names_in_order(store: Path) -> None:
    """Files only added: the snapshot's names and the new ones are stat'ed apart; with a
    problem among them, the scan (problems in name order) is that of the whole listing."""
    mems = [add(store, summary=f"note {n} about {n * 7} things") for n in range(4)]
    engine.consolidate(Store(store))
    s = Store(store)
    folder = s.folder("agent", "coder")
    snap = lastrun.load_lastrun(folder.cache())
    assert snap is not None
    new = add(store, summary="a note written in this session")
    names, _, added = s._names_since(folder, snap, None)
    assert added == [f"{new['id']}.json"] and names == sorted(snap.names + added)
    clean = s.scan_since(folder, snap)
    assert clean.reread == added and clean.problems == [] and clean.count == 5
    first = sorted(f"{m['id']}.json" for m in mems)[0]
    os.rename(folder.path / first, folder.path / "mem_zz_moved.json")
    os.symlink(folder.path / "mem_zz_moved.json", folder.path / first)  # a snapshot file now a link
    os.symlink(folder.path / "mem_zz_moved.json", folder.path / "mem_00_link.json")  # a link added
    scan = s.scan_since(folder, snap)
    listed = s._scan_since_listed(folder, snap, s.memory_names(folder), None)
    found = [(p.path, p.code) for p in scan.problems]
    assert found == [(p.path, p.code) for p in listed.problems]
    assert [path for path, code in found if code == "symlink"] == [
        f"agent/coder/{n}" for n in sorted(["mem_00_link.json", first])]
    assert (scan.reread, scan.kept, scan.count) == (listed.reread, listed.kept, listed.count)


def test_rows_but_leaves_out_exactly_the_rows_named() -> None:
    from memcli.store.scanning import _rows_but

    names = [f"mem_{n:02d}.json" for n in range(5)]
    snap = lastrun.Snapshot(names, array("q"), array("q"), b"", array("H"), [], 0)
    assert _rows_but(snap, set()) == [0, 1, 2, 3, 4]
    assert _rows_but(snap, {"mem_00.json", "mem_04.json"}) == [1, 2, 3]
    assert _rows_but(snap, {"mem_02.json", "mem_03.json", "not_a_row.json"}) == [0, 1, 4]
    assert _rows_but(snap, set(names)) == []


