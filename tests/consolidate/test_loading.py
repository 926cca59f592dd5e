"""Loading a full run's folders (`memcli.consolidate.loading`): the helper's load of a folder
(`_load_ahead`) gives the planner's memories, in the same order, and takes the index entries
without comparing them with the files only when they list exactly the folder's files with
every field a run plans from."""

from __future__ import annotations

import datetime as dt
import json
import os
import sys
from pathlib import Path
from typing import Any

from memcli.consolidate import planner
from memcli.consolidate.plantypes import RunOptions
from memcli.store import memories
from memcli.store.store import Store

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import generate  # noqa: E402

NOW = dt.datetime(2026, 11, 22, tzinfo=dt.timezone.utc)


def _store(tmp_path: Path) -> Store:
    root = tmp_path / "s"
    generate.generate(root, 400, shape="huge", dup_share=0.08)
    (root / "memcli.toml").write_text("[consolidation]\nindex_pause_ms = 0\nmax_per_run = 0\n")
    memories.reindex(Store(root))
    return Store(root)


def _loaded(store: Store, ahead: bool) -> tuple[bool | None, list[tuple[Any, ...]], bool]:
    """(what `_load_ahead` returned, or None for `_load_folder`), the memories loaded, and
    whether the load read any memory from its file."""
    plan = planner.Planner(store, RunOptions(trigger="manual"), NOW)
    listings: dict[str, list[str]] = {}
    twins = store.duplicate_ids(listings)
    folder = store.memory_folders()[0]
    blind = plan._load_ahead(folder, twins, listings[folder.rel]) if ahead else None
    if not ahead:
        plan._load_folder(folder, twins, listings[folder.rel])
    got = [(i.mem.id, i.mem.content_hash, i.key, i.rel, i.mem.size, i.mem.mtime_ns, i.mem.facts.get("tags"),
            i.mem.content) for i in plan._all_loaded]
    read = plan._read_files
    plan._close_files()
    return blind, got, read


def _index(store: Store) -> Path:
    return store.memory_folders()[0].path / "_index.json"


def test_the_helpers_load_is_the_planners_and_blind_where_the_index_lists_the_files(tmp_path: Path) -> None:
    store = _store(tmp_path)
    blind, theirs, _ = _loaded(store, True)
    _, mine, read = _loaded(store, False)
    assert blind is True and theirs == mine and not read


def test_a_file_changed_since_indexed_is_read_by_the_planner_and_not_seen_by_a_blind_load(
        tmp_path: Path) -> None:
    store = _store(tmp_path)
    path = sorted(store.memory_folders()[0].path.glob("mem_*.json"))[2]
    record = json.loads(path.read_text())
    record["content"]["summary"] = "changed by hand after the index was written"
    path.write_text(json.dumps(record))
    blind, theirs, _ = _loaded(store, True)
    _, mine, read = _loaded(store, False)
    assert blind is True and read  # (the helper's findings in this folder then go unused)
    assert [m[0] for m in theirs] == [m[0] for m in mine] and theirs != mine
    os.utime(path, ns=(1, 1))  # touched: the same bytes' hash, another mtime
    assert _loaded(store, False)[2]


def test_a_folder_whose_index_does_not_list_its_files_plainly_is_loaded_as_the_planner_does(
        tmp_path: Path) -> None:
    store = _store(tmp_path)
    saved = json.loads(_index(store).read_bytes())
    folder = store.memory_folders()[0].path
    extra = folder / "mem_01ZZZZZZZZZZZZZZZZZZZZZZZZ.json"
    first = sorted(folder.glob("mem_*.json"))[0]
    record = json.loads(first.read_text())
    record["id"] = extra.stem
    extra.write_text(json.dumps(record))  # a file the index does not list
    blind, theirs, _ = _loaded(store, True)
    assert blind is False and theirs == _loaded(store, False)[1]
    extra.unlink()
    for edit in ({"tags": [[1]]}, {"size": "12"}, {"content_hash": ""}, {"id": "not an id"}):
        entries = [dict(e) for e in saved["entries"]]
        entries[1].update(edit)
        _index(store).write_text(json.dumps({**saved, "entries": entries}))
        blind, theirs, _ = _loaded(store, True)
        assert blind is False, edit
        assert theirs == _loaded(store, False)[1], edit
    _index(store).write_text("{broken")
    blind, theirs, _ = _loaded(store, True)
    assert blind is False and theirs == _loaded(store, False)[1]
    _index(store).unlink()
    assert _loaded(store, True)[0] is False
