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
