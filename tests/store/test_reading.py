"""Reading a planned memory's text without keeping its record (`reading.peeked_content`): the
content a full read gives, the memory left unread, and a file gone bad settling the memory
as `content` settles it."""

from __future__ import annotations

from pathlib import Path

from memcli.store.memories import reindex
from memcli.store.model import VANISHED
from memcli.store.reading import peeked_content
from memcli.store.store import Store
from tests.conftest import add


def _planned(store: Path) -> tuple[Store, list]:  # type: ignore[type-arg]
    s = Store.open(str(store))
    folder = next(f for f in s.memory_folders() if f.rel == "agent/coder")
    return s, s.planned(folder, s.scan(folder, load=False).entries)


def test_a_peek_gives_the_content_and_keeps_no_record(store: Path) -> None:
    for n in range(3):
        add(store, summary=f"Rotate the signing key of service {n} every ninety days", details=f"Step {n}.")
    reindex(Store.open(str(store)))
    s, mems = _planned(store)
    for mem in mems:
        full = s.read_memory(mem.path, next(f for f in s.memory_folders() if f.rel == "agent/coder"))
        assert peeked_content(mem) == full.content
        assert mem._data is None  # not kept: read again when needed
        assert mem.content == full.content and mem.data == full.data
        assert peeked_content(mem) is mem.content  # read already: its own record's


def test_a_peek_at_a_file_gone_bad_settles_the_memory_as_content_does(store: Path) -> None:
    kept = add(store, summary="Rotate the signing key every ninety days")
    broken = add(store, summary="The staging database is backed up nightly")
    gone = add(store, summary="Deploys go out on Tuesdays")
    reindex(Store.open(str(store)))
    _, mems = _planned(store)  # (planned, then the files go bad: as while a run plans)
    by_id = {m.id: m for m in mems}
    folder = store / "agent" / "coder"
    size = (folder / f"{broken['id']}.json").stat().st_size
    (folder / f"{broken['id']}.json").write_text("{" * (size - 1) + "x")  # the same size, not JSON
    (folder / f"{gone['id']}.json").unlink()
    assert peeked_content(by_id[kept["id"]]) == kept["content"]
    for mem_id in (broken["id"], gone["id"]):
        assert peeked_content(by_id[mem_id]) == {} == by_id[mem_id].content
        assert by_id[mem_id].content_hash == VANISHED


def test_a_memory_read_from_its_file_is_its_content(store: Path) -> None:
    data = add(store, summary="Rotate the signing key every ninety days")
    s = Store.open(str(store))
    folder = next(f for f in s.memory_folders() if f.rel == "agent/coder")
    mem = s.read_memory(folder.path / f"{data['id']}.json", folder)
    assert peeked_content(mem) is mem.content
