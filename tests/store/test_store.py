"""The store: discovery, reading with bad input, the index as a cache, atomic writes, the lock."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memcli.errors import LockTimeoutError, NoStoreError
from memcli.store import fsops, index
from memcli.store.store import Store, discover, init_store, is_store
from tests import sweep
from tests.conftest import add, assert_invariants, record, write_memory


def test_discovery_order(tmp_path: Path, store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    other = tmp_path / "other"
    (other / "ops").mkdir(parents=True)
    (other / "ops" / "state.json").write_text("{}")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(NoStoreError, match="run `memcli init`"):
        discover(None)
    monkeypatch.setenv("MEMCLI_STORE", str(other))
    assert discover(None) == other.resolve()
    assert discover(str(store)) == store.resolve()  # --store wins over the environment


def test_a_folder_with_only_memcli_toml_is_a_store(tmp_path: Path) -> None:
    (tmp_path / "memcli.toml").write_text("")
    assert discover(str(tmp_path)) == tmp_path.resolve()


@pytest.mark.parametrize("marker", ["state.json", "consolidation-log.json"])
def test_an_ops_folder_with_memcli_files_is_a_store(tmp_path: Path, marker: str) -> None:
    (tmp_path / "ops").mkdir()
    (tmp_path / "ops" / marker).write_text("{}")
    assert is_store(tmp_path)


def test_an_ops_folder_of_other_files_is_not_a_store(tmp_path: Path) -> None:
    (tmp_path / "ops").mkdir()
    (tmp_path / "ops" / "deploy.sh").write_text("echo deploy\n")
    (tmp_path / "ops" / "hook.log").write_text("")
    assert not is_store(tmp_path)
    with pytest.raises(NoStoreError):
        discover(str(tmp_path))


def test_discovery_walks_up_from_a_subfolder(store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    deep = store / "agent" / "coder" / "nested"
    deep.mkdir(parents=True)
    monkeypatch.chdir(deep)
    monkeypatch.delenv("MEMCLI_STORE", raising=False)
    assert discover(None) == store.resolve()


def test_discovery_takes_the_nearest_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "memcli.toml").write_text("")
    inner = tmp_path / "project"
    (inner / "sub").mkdir(parents=True)
    (inner / "memcli.toml").write_text("")
    monkeypatch.chdir(inner / "sub")
    monkeypatch.delenv("MEMCLI_STORE", raising=False)
    assert discover(None) == inner.resolve()


def test_named_store_is_not_searched_upwards(store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--store and MEMCLI_STORE name the store itself: a subfolder of one is refused."""
    with pytest.raises(NoStoreError):
        discover(str(store / "agent"))
    monkeypatch.setenv("MEMCLI_STORE", str(store / "agent"))
    with pytest.raises(NoStoreError):
        discover(None)


def test_init_makes_a_store_of_a_folder_with_an_unrelated_ops(tmp_path: Path) -> None:
    (tmp_path / "ops").mkdir()
    (tmp_path / "ops" / "deploy.sh").write_text("echo deploy\n")
    assert init_store(tmp_path) is True
    assert (tmp_path / "memcli.toml").is_file() and (tmp_path / "ops" / "deploy.sh").read_text() == "echo deploy\n"
    assert init_store(tmp_path) is False  # now it is one: a second init changes nothing


def test_scan_reads_both_formats(store: Path) -> None:
    a = add(store, "json")
    b = add(store, "md", details="long text")
    scan = Store(store).scan(Store(store).folder("agent", "coder"))
    assert set(scan.memories) == {a["id"], b["id"]} and scan.problems == []
    assert scan.memories[b["id"]].content["details"] == "long text"


def test_hand_dropped_file_is_found_and_gone_file_reported(store: Path) -> None:
    s = Store(store)
    folder = s.folder("agent", "coder")
    first = add(store)
    s.refresh_index(folder)
    dropped = add(store)  # written by hand after the index
    (folder.path / f"{first['id']}.json").unlink()  # and one file removed by hand
    scan = s.scan(folder, load=False)
    assert [e["id"] for e in scan.entries] == [dropped["id"]]
    assert scan.drift
    assert [(p.code, p.path) for p in scan.problems] == [("index_gone", f"agent/coder/{first['id']}.json")]
    s.refresh_index(folder)
    assert_invariants(store)
    assert not s.scan(folder, load=False).drift


def test_index_entry_reused_only_while_size_and_mtime_match(store: Path) -> None:
    s = Store(store)
    folder = s.folder("agent", "coder")
    data = add(store)
    s.refresh_index(folder)
    path = folder.path / f"{data['id']}.json"
    data["tags"] = ["changed"]
    path.write_bytes(orjson.dumps(data))
    entry = s.scan(folder, load=False).entries[0]
    assert entry["tags"] == ["changed"]


def _both_ways(s: Store, monkeypatch: pytest.MonkeyPatch) -> tuple[object, object]:
    """scan(load=False) as it runs, and with the whole-list check off (one file at a time)."""
    from memcli.store import scanning as scanning_module

    folder = s.folder("agent", "coder")
    fast = s.scan(folder, load=False)
    with monkeypatch.context() as patch:
        patch.setattr(scanning_module, "_all_trusted", lambda *args: False)
        slow = s.scan(folder, load=False)
    return ((fast.entries, set(fast.memories), fast.drift, fast.run_hashes),
            (slow.entries, set(slow.memories), slow.drift, slow.run_hashes))


@pytest.mark.parametrize("damage", ["none", "mtime", "no_text_len", "bad_id", "reordered", "extra_file",
                                    "count"])
def test_whole_list_check_of_index_entries_gives_what_the_file_by_file_check_gives(
        store: Path, monkeypatch: pytest.MonkeyPatch, damage: str) -> None:
    s = Store(store)
    folder = s.folder("agent", "coder")
    mems = [add(store, summary=f"fact {n}") for n in range(4)]
    s.refresh_index(folder)
    saved = orjson.loads((folder.path / index.INDEX_NAME).read_bytes())
    entries = saved["entries"]
    if damage == "mtime":
        os.utime(folder.path / entries[1]["file"], ns=(1, 1))
    elif damage == "no_text_len":
        del entries[2]["text_len"]
    elif damage == "bad_id":
        entries[0]["id"] = "not an id"
    elif damage == "reordered":
        entries.reverse()
    elif damage == "extra_file":
        add(store, summary="dropped in by hand")
    elif damage == "count":
        saved["entry_count"] = 99
    (folder.path / index.INDEX_NAME).write_bytes(orjson.dumps(saved))
    fast, slow = _both_ways(s, monkeypatch)
    assert fast == slow
    assert len(fast[0]) == len(mems) + (damage == "extra_file")  # type: ignore[index]


def test_unreadable_index_is_reported_and_rebuilt(store: Path) -> None:
    s = Store(store)
    add(store)
    folder = s.folder("agent", "coder")
    (folder.path / "_index.json").write_text("{broken")
    scan = s.refresh_index(folder)
    assert scan.problems[0].code == "index_unreadable"
    assert index.load(folder.path)["entry_count"] == 1


@pytest.mark.parametrize(("content", "reason"), [
    (b"{oops", "not valid JSON"),
    (b"\xff\xff\xff", "not UTF-8"),
    (orjson.dumps({**record(id="mem_x"), "type": "dream"}), "unknown type"),
])
def test_bad_file_reported_untouched_rest_read(store: Path, content: bytes, reason: str) -> None:
    good = add(store)
    bad = store / "agent" / "coder" / "mem_x.json"
    bad.write_bytes(content)
    scan = Store(store).scan(Store(store).folder("agent", "coder"))
    assert list(scan.memories) == [good["id"]]
    assert scan.problems[0].path == "agent/coder/mem_x.json" and reason in scan.problems[0].reason
    assert bad.read_bytes() == content


def test_symlink_and_oversized_files_are_not_read(store: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside.json"
    outside.write_bytes(orjson.dumps(record(id="mem_out")))
    folder = store / "agent" / "coder"
    folder.mkdir(parents=True)
    (folder / "mem_out.json").symlink_to(outside)
    big = folder / "mem_big.json"
    with big.open("wb") as handle:
        handle.truncate(10 * 1024 * 1024 + 1)
    scan = Store(store).scan(Store(store).folder("agent", "coder"))
    assert {p.code for p in scan.problems} == {"symlink", "too_large"}
    assert scan.memories == {}


def test_duplicate_ids_across_folders_are_left_out(store: Path) -> None:
    data = add(store)
    write_memory(store, {**data, "scope": "team", "scope_id": "backend"})
    scan = Store(store).scan_all()
    assert scan.memories() == []
    assert sorted(p.code for p in scan.problems) == ["duplicate_id", "duplicate_id"]


def test_scope_must_match_folder(store: Path) -> None:
    data = record(scope_id="reviewer")
    (store / "agent" / "coder").mkdir(parents=True)
    (store / "agent" / "coder" / f"{data['id']}.json").write_bytes(orjson.dumps(data))
    scan = Store(store).scan(Store(store).folder("agent", "coder"))
    assert "does not match its folder agent/coder" in scan.problems[0].reason


def test_bad_scope_ids_are_never_paths(store: Path) -> None:
    with pytest.raises(Exception, match="bad scope id"):
        Store(store).folder("agent", "../../etc")


def test_write_new_never_overwrites(tmp_path: Path) -> None:
    target = tmp_path / "a.json"
    fsops.write_new(target, b"one")
    with pytest.raises(FileExistsError):
        fsops.write_new(target, b"two")
    assert target.read_bytes() == b"one" and list(tmp_path.iterdir()) == [target]


def test_write_replace_is_atomic_and_leaves_no_tmp(tmp_path: Path) -> None:
    target = tmp_path / "a.json"
    fsops.write_replace(target, b"one")
    fsops.write_replace(target, b"two")
    assert target.read_bytes() == b"two" and list(tmp_path.iterdir()) == [target]


def test_crash_at_makes_the_process_end_before_the_nth_change(tmp_path: Path) -> None:
    code = ("from pathlib import Path; from memcli.store import fsops; import sys\n"
            f"fsops.write_replace(Path({str(tmp_path)!r}) / 'a', b'1')\n"
            f"fsops.write_replace(Path({str(tmp_path)!r}) / 'b', b'2')\n")
    env = {**os.environ, "MEMCLI_CRASH_AT": "3"}
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True)
    assert result.returncode == 70
    assert (tmp_path / "a").read_bytes() == b"1" and not (tmp_path / "b").exists()


def _hold_lock(store: Path) -> subprocess.Popen[str]:
    code = ("import sys, time; from filelock import FileLock\n"
            f"lock = FileLock({str(store / 'ops' / '.lock')!r}); lock.acquire()\n"
            "print('held', flush=True); sys.stdin.read()\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


def test_second_writer_waits_then_gives_up(store: Path) -> None:
    holder = _hold_lock(store)
    try:
        with pytest.raises(LockTimeoutError) as info, Store(store).lock(0.2):
            pass
        assert info.value.exit_code == 75
    finally:
        holder.communicate("")
    with Store(store).lock(0.2):  # released: the next writer gets in
        pass


def test_lock_of_a_killed_process_does_not_block(store: Path) -> None:
    holder = _hold_lock(store)
    holder.kill()
    holder.wait()
    assert (store / "ops" / ".lock").exists()
    with Store(store).lock(0.5):
        pass


def _usual_nested_and_too_deep(store: Path) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """Three memories for the reading tests: a usual record, one with more brackets than
    MAX_DEPTH that nests shallowly (the full read's depth walk), and one nested too deep."""
    from memcli.store.formats import MAX_DEPTH

    usual = add(store, summary="usual record")
    nested = add(store, content={"summary": "many lists", "steps": [[n] for n in range(MAX_DEPTH + 5)]})
    deep: object = "x"
    for _ in range(MAX_DEPTH + 2):
        deep = [deep]
    too_deep = add(store, content={"summary": "nested too deep", "x": deep})
    return usual, nested, too_deep


def test_the_quick_read_of_a_planned_memory_falls_back_on_anything_unusual(store: Path) -> None:
    """`Store._read_record` (a cold pass's read of a memory planned from its index entry)
    reads the usual file in one call; a record with many brackets, a file swapped for a link,
    a FIFO, a record that is not an object or not JSON take the full read, which gives the
    same record or None (a memory then planned as gone), never an error."""
    from memcli.store.memories import reindex

    usual, nested, too_deep = _usual_nested_and_too_deep(store)
    others = {kind: add(store, summary=kind) for kind in ("link", "fifo", "list", "json")}
    s = Store(store)
    reindex(s)
    folder = s.folder("agent", "coder")
    where = store / "agent" / "coder"
    assert s._read_record(folder, f"{usual['id']}.json") == usual
    assert s._read_record(folder, f"{nested['id']}.json") == nested  # the full read's depth walk
    assert s._read_record(folder, f"{too_deep['id']}.json") is None
    link = where / f"{others['link']['id']}.json"
    link.unlink()
    link.symlink_to(where / f"{usual['id']}.json")
    fifo = where / f"{others['fifo']['id']}.json"
    fifo.unlink()
    os.mkfifo(fifo)
    (where / f"{others['list']['id']}.json").write_bytes(orjson.dumps([others["list"]]))
    (where / f"{others['json']['id']}.json").write_text('{"id": ')
    for kind in others:
        assert s._read_record(folder, f"{others[kind]['id']}.json") is None, kind
    assert s._read_record(folder, "mem_gone.json") is None



@pytest.mark.parametrize("through", ["path", "folder", "closed folder", "folder gone"])
def test_the_inline_read_with_the_listed_size_gives_what_the_full_way_gives(store: Path, through: str) -> None:
    """`_read_record(folder, name, size, files)`, the inline read of the usual file (the size
    it was listed with), opened by path or relative to its folder (`FolderFiles`; by path
    once closed, or when the folder cannot be opened): the same answer as the way without a
    size for every kind of file: the record, or None for one nested too deep, a link (never
    followed), a FIFO, a folder, not an object, not JSON, another id, content not an
    object, a file grown or shrunk since it was listed, a file gone."""
    from memcli.store.memories import reindex
    from memcli.store.reading import FolderFiles

    usual, nested, too_deep = _usual_nested_and_too_deep(store)
    kinds = ("link", "fifo", "folder", "list", "json", "other id", "content", "details", "grown", "shrunk")
    others = {kind: add(store, summary=kind) for kind in kinds}
    s = Store(store)
    reindex(s)
    folder = s.folder("agent", "coder")
    where = store / "agent" / "coder"
    sizes = {p.name: p.stat().st_size for p in where.iterdir()}

    def name(record: dict[str, Any]) -> str:
        return f"{record['id']}.json"

    link = where / name(others["link"])
    link.unlink()
    link.symlink_to(where / name(usual))
    os.unlink(where / name(others["fifo"]))
    os.mkfifo(where / name(others["fifo"]))
    os.unlink(where / name(others["folder"]))
    (where / name(others["folder"])).mkdir()
    replaced = {"list": [others["list"]], "other id": {**others["other id"], "id": "mem_other"},
                "content": {**others["content"], "content": "text"},
                "details": {**others["details"], "content": {"details": 3}}}
    for kind, value in replaced.items():
        (where / name(others[kind])).write_bytes(orjson.dumps(value))
    (where / name(others["json"])).write_text('{"id": ')
    grown = where / name(others["grown"])
    grown.write_bytes(grown.read_bytes() + b" ")
    shrunk = where / name(others["shrunk"])
    shrunk.write_bytes(orjson.dumps(others["shrunk"]))
    files = None if through == "path" else FolderFiles(where if through != "folder gone" else where / "gone")
    if through == "closed folder":
        assert files is not None
        files.close()
    expected = {name(usual): usual, name(nested): nested, name(too_deep): None,
                **{name(r): None for k, r in others.items() if k not in ("grown", "shrunk")},
                name(others["grown"]): others["grown"], name(others["shrunk"]): others["shrunk"]}
    for file, wanted in expected.items():
        assert s._read_record(folder, file) == wanted, file  # (the way without a size)
        assert s._read_record(folder, file, sizes[file], files) == wanted, file
    assert s._read_record(folder, "mem_gone.json", 300, files) is None
    if files is not None:
        files.close()


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts open files through /proc")
def test_folder_files_open_relative_to_the_folder_until_closed(store: Path) -> None:
    """`FolderFiles` opens the folder on its first read and each file relative to it, never
    following a link to the file; once closed, it holds nothing open and opens by path."""
    from memcli.store.reading import FolderFiles

    where = store / "agent" / "coder"
    where.mkdir(parents=True)
    (where / "a.json").write_bytes(b"{}")
    (where / "link.json").symlink_to(where / "a.json")
    files = FolderFiles(where)
    held = len(os.listdir("/proc/self/fd"))
    fd = files.open("a.json")
    assert os.read(fd, 10) == b"{}"
    os.close(fd)
    assert len(os.listdir("/proc/self/fd")) == held + 1  # the folder, held for the next read
    with pytest.raises(OSError):
        files.open("link.json")
    files.close()
    assert len(os.listdir("/proc/self/fd")) == held
    fd = files.open("a.json")  # by path now
    os.close(fd)
    assert len(os.listdir("/proc/self/fd")) == held
    files.close()  # (twice: nothing to close)


def test_the_quick_read_with_the_listed_size_needs_no_fstat_and_falls_back_otherwise(
        store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`_read_plain(path, size)`: a file of the size it was listed with is read in one call,
    with no fstat; one that grew or shrank by a byte since is read the fstat way (its bytes
    as they are now); a FIFO, a folder, a link, a file gone give None (the full read then
    says what it is); so does a size that is not a size."""
    from memcli.store import reading

    where = store / "agent" / "coder"
    where.mkdir(parents=True)
    (where / "plain.json").write_bytes(b'{"a": 1}')
    (where / "empty.json").write_bytes(b"")
    os.mkfifo(where / "fifo.json")
    (where / "folder.json").mkdir()
    (where / "link.json").symlink_to(where / "plain.json")
    fstats: list[int] = []
    monkeypatch.setattr(reading.os, "fstat", lambda fd, _f=os.fstat: fstats.append(fd) or _f(fd))
    path = str(where / "plain.json")
    assert reading._read_plain(path, 8) == b'{"a": 1}' and fstats == []
    assert reading._read_plain(path, 7) == b'{"a": 1}' and len(fstats) == 1  # grown by a byte since
    assert reading._read_plain(path, 9) == b'{"a": 1}' and len(fstats) == 2  # shrunk by a byte since
    assert reading._read_plain(str(where / "empty.json"), 0) == b""  # (the fstat way: nothing to parse)
    for name in ("fifo.json", "folder.json", "link.json", "gone.json"):
        assert reading._read_plain(str(where / name), 8) is None, name
    assert reading._read_plain(path, "8") == b'{"a": 1}'  # type: ignore[arg-type]  (the fstat way)
    assert reading._read_plain(path, -1) == b'{"a": 1}'  # (the fstat way)


_ODD_IDS = ["mem_a", "mem_B-9_x", "mem_" + "z" * 64, "mem_" + "z" * 65, "mem_", "mem_a\n", "mem_a\nmem_b",
            "mem_a b", "mem_é", "x_a", "", None, 3, ["mem_a"], "mem_a\r"]
_ODD_FACTS = [0, 3, -1, True, None, "2", 1.0, [], ["x"], ["x", 1], [["x"]], {}]


@settings(max_examples=sweep.scale(75, 300), deadline=None)
@given(st.lists(st.sampled_from(_ODD_IDS), max_size=6))
def test_checking_a_folders_ids_at_once_passes_only_valid_ids(ids: list[object]) -> None:
    from memcli.store.entries import ids_ok as _ids_ok
    from memcli.store.model import is_valid_id

    ok = _ids_ok(ids)
    assert not ok or all(is_valid_id(i) for i in ids)
    assert ok == all(is_valid_id(i) and "\n" not in str(i) for i in ids)  # stricter only on a newline


@settings(max_examples=300, deadline=None)
@given(st.lists(st.fixed_dictionaries({}, optional={k: st.sampled_from(_ODD_FACTS)
                                                    for k in ("access_count", "details_len", "tags")}),
                max_size=5))
def test_checking_a_folders_facts_at_once_is_checking_each_entry(entries: list[dict[str, object]]) -> None:
    from memcli.store.entries import facts_ok as _facts_ok

    def one(e: dict[str, object]) -> bool:
        tags = e.get("tags")
        return (type(e.get("access_count")) is int and type(e.get("details_len")) is int
                and type(tags) is list and all(type(t) is str for t in tags))

    assert _facts_ok(entries) == all(one(e) for e in entries)


def test_a_planned_memory_read_for_its_text_checks_the_rest_when_its_record_is_needed(
        store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A memory planned from its index entry is read once: for its text only the id and the
    content are checked (the rules read every other field from the entry); its whole record
    is checked when `data` is asked for, as a full read would: a timestamp without a zone is
    a warning (the record is used), a scope that names another folder or an unknown priority
    make the memory one whose file went bad (its hash then no file's, its record the entry)."""
    from memcli.store.memories import reindex
    from memcli.store.model import VANISHED

    mems = {kind: add(store, summary=f"the {kind} one") for kind in ("usual", "zoneless", "moved", "odd")}
    s = Store(store)
    reindex(s)
    folder = s.folder("agent", "coder")
    where = store / "agent" / "coder"
    scan = s.scan(folder, load=False, entries=False, compare=False)
    planned = {m.id: m for m in s.planned(folder, scan.entries)}
    edits = {"zoneless": {"created_at": mems["zoneless"]["created_at"].rstrip("Z")},
             "moved": {"scope_id": "reviewer"}, "odd": {"priority": "urgent"}}
    for kind, change in edits.items():  # same size or not: the entry is trusted from here on
        (where / f"{mems[kind]['id']}.json").write_bytes(orjson.dumps({**mems[kind], **change}))
    reads: list[str] = []
    original = Store._read_in

    def spy(self: Store, folder: Any, name: str, problems: Any, path: Any = None) -> Any:
        reads.append(name)
        return original(self, folder, name, problems, path)

    monkeypatch.setattr(Store, "_read_in", spy)
    for kind, mem in mems.items():
        planned_mem = planned[mem["id"]]
        assert planned_mem.content == mem["content"], kind  # the text, from the file
    assert reads == []  # every one read the quick way, for its text
    assert planned[mems["usual"]["id"]].data == mems["usual"] and reads == []
    assert planned[mems["zoneless"]["id"]].data["created_at"] == edits["zoneless"]["created_at"]
    for kind in ("moved", "odd"):
        mem = planned[mems[kind]["id"]]
        assert mem.data == mem.facts and mem.content_hash == VANISHED, kind
    assert sorted(reads) == sorted(f"{mems[k]['id']}.json" for k in edits)  # the full read, once each
    assert all(planned[m["id"]].content_hash != VANISHED for m in (mems["usual"], mems["zoneless"]))


@pytest.mark.parametrize(("change", "usable"), [
    ({}, True), ({"id": "mem_other"}, False), ({"content": "text"}, False),
    ({"content": {"summary": "s", "details": 3}}, False), ({"content": {"summary": "s", "timeline": "t"}}, False),
    ({"content": {"summary": "s", "timeline": [], "details": ""}}, True), ({"content": {}}, True),
    ({"priority": "urgent", "scope_id": "elsewhere"}, True),  # the entry's, not the text's: checked later
])
def test_what_a_record_read_for_its_text_must_be(change: dict[str, object], usable: bool) -> None:
    from memcli.store.model import content_usable

    data = {**record(id="mem_a"), **change}
    assert content_usable(data, "mem_a") == usable
    assert not content_usable([data], "mem_a") and not content_usable(data, "mem_b")
