"""What vouches for a file in a build: `_index.json` entries found without parsing each one,
the same as parsing them (and parsed whole when the layout is another)."""

from __future__ import annotations

import json
from pathlib import Path

from memcli.recall import index as rindex
from memcli.store import memories
from memcli.store.store import Store
from tests.conftest import add


def test_vouchers_are_the_parsed_entries(store: Path) -> None:
    for n in range(12):
        add(store, summary=f'note {n} with "quotes", a \\\\ backslash and größe', tags=["x", f"t{n}"],
            access_count=n, priority="critical" if n == 3 else "normal")
    memories.reindex(Store(store))
    folder = store / "agent" / "coder"
    raw = (folder / "_index.json").read_bytes()
    found = rindex._vouchers(folder)
    assert len(found) == 12 and found == rindex._parsed_vouchers(raw)
    entry = json.loads(raw)["entries"][0]
    assert found[entry["file"]] == (entry["size"], entry["mtime_ns"], entry["id"])


def test_another_layout_is_parsed_and_an_entry_without_a_hash_vouches_for_nothing(store: Path) -> None:
    for n in range(4):
        add(store, summary=f"note {n}")
    memories.reindex(Store(store))
    folder = store / "agent" / "coder"
    data = json.loads((folder / "_index.json").read_bytes())
    expected = rindex._parsed_vouchers((folder / "_index.json").read_bytes())
    (folder / "_index.json").write_text(json.dumps(data, indent=2))  # spaces: not the store's layout
    assert rindex._vouchers(folder) == expected
    del data["entries"][0]["content_hash"]
    (folder / "_index.json").write_text(json.dumps(data))
    assert data["entries"][0]["file"] not in rindex._vouchers(folder)
    assert len(rindex._vouchers(folder)) == 3
    (folder / "_index.json").write_text("{not json")
    assert rindex._vouchers(folder) == {}


def test_signatures_paired_wrong_only_make_files_look_changed(store: Path) -> None:
    """An index edited by hand so that signatures pair with the wrong files (the first entry
    lost its hash, the second holds a second signature): no file is trusted on another's
    word, and a build still indexes every memory as its file says."""
    made = [add(store, summary=f"note {word}") for word in ("alpha", "bravo", "charlie", "delta")]
    memories.reindex(Store(store))
    folder = store / "agent" / "coder"
    raw = (folder / "_index.json").read_bytes()
    data = json.loads(raw)
    entries = data["entries"]
    del entries[0]["content_hash"]
    entries[1]["x"] = {"y": 0, "size": 1, "mtime_ns": 2, "content_hash": "f"}  # a nested signature
    head = raw[:raw.index(b',"entries":[')]
    body = b",".join(json.dumps(e, separators=(",", ":")).encode() for e in entries)
    (folder / "_index.json").write_bytes(head + b',"entries":[' + body + b"]}")
    found = rindex._vouchers(folder)
    assert len(found) == 4  # paired by order
    by_file = {e["file"]: e for e in entries}
    for name, voucher in found.items():
        trusted = rindex._read_trusted(str(folder / name), name, voucher)
        right = (by_file[name].get("content_hash") is not None
                 and voucher == (by_file[name]["size"], by_file[name]["mtime_ns"], by_file[name]["id"]))
        assert (trusted is not None) == right
    from memcli.recall import search

    st = Store(store)
    for mem, word in zip(made, ("alpha", "bravo", "charlie", "delta"), strict=True):
        assert [r.id for r in search.recall(st, word)] == [mem["id"]]


def test_a_name_written_with_an_escape_vouches_for_no_other_file(store: Path) -> None:
    """A file name escaped in the index (`\\u006d` for "m"): read off the bytes as written,
    it names no file, so that file is read through the store's checks; the others stay
    vouched for, and a build still finds every memory."""
    made = [add(store, summary=f"note {word}") for word in ("alpha", "bravo", "charlie")]
    memories.reindex(Store(store))
    folder = store / "agent" / "coder"
    raw = (folder / "_index.json").read_bytes()
    first = json.loads(raw)["entries"][0]["file"]
    (folder / "_index.json").write_bytes(raw.replace(f'"file":"{first}"'.encode(),
                                                     f'"file":"\\u006d{first[1:]}"'.encode(), 1))
    found = rindex._vouchers(folder)
    assert first not in found and len(found) == 3
    assert all(rindex._read_trusted(str(folder / name), name, v) is None for name, v in found.items()
               if not (folder / name).exists()) and sum((folder / name).exists() for name in found) == 2
    from memcli.recall import search

    st = Store(store)
    for mem, word in zip(made, ("alpha", "bravo", "charlie"), strict=True):
        assert [r.id for r in search.recall(st, word)] == [mem["id"]]
