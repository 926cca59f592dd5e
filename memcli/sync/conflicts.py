"""What git could not merge, resolved without loss (SPEC 13).

Git leaves each such path with up to three versions (1 base, 2 ours, 3 theirs). memcli's
own files merge through the drivers' functions; a memory file changed on both sides keeps
one version live and the other beside it under a new id, queued for review; an archived
memory both sides wrote keeps both names, the second `<id>@<run_id>-<hash>`, with its run's
manifest pointing at it; two different pre-images under one name both stay. Every choice
depends on the versions alone, so two clones resolving the same conflict agree. A path that
is none of these (a person's own file) is not guessed at: the merge is given up whole.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from memcli.consolidate import review
from memcli.store import fsops, log, paths
from memcli.store.formats import decode, encode
from memcli.store.model import format_ts, new_memory_id, now, parse_ts, sha256
from memcli.store.store import Store
from memcli.sync import drivers, git

OPS_FILES = ("consolidation-log.json", "review-queue.json", "state.json")


@dataclass
class Resolution:
    path: str
    how: str  # "driver", "kept_both", "kept_changed", "archive_renamed", "pre_image_kept", "index"
    kept: str | None = None  # the path of the version kept beside, if any

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "how": self.how, "kept": self.kept}


@dataclass
class Resolved:
    resolutions: list[Resolution] = field(default_factory=list)
    review: list[dict[str, Any]] = field(default_factory=list)
    unresolved: list[str] = field(default_factory=list)


def resolve(store: Store, unmerged: dict[str, dict[int, str]]) -> Resolved:
    """Resolve every unmerged path on disk and in git's index; `unresolved` names the paths
    that are not memcli's (nothing was done for them: the caller gives the merge up)."""
    result = Resolved()
    result.unresolved = sorted(p for p in unmerged if kind_of(p) is None)
    if result.unresolved:
        return result
    root = store.root
    versions = {p: {s: git.show_bytes(root, f":{s}:./{p}") for s in (1, 2, 3) if s in stages}
                for p, stages in unmerged.items()}
    manifests: dict[str, str] = {}  # archive path -> its new name (for the run manifests)
    for rel in sorted(unmerged):
        v = versions[rel]
        base, ours, theirs = v.get(1), v.get(2), v.get(3)
        kind = kind_of(rel)
        if kind == "ops":
            merged = drivers.merge_bytes("ops", Path(rel).name, base or b"", ours or b"{}", theirs or b"{}")
            _put(store, rel, merged)
            result.resolutions.append(Resolution(rel, "driver"))
        elif kind == "index":
            _put(store, rel, ours or theirs)  # rebuilt from the merged files right after
            result.resolutions.append(Resolution(rel, "index"))
        elif kind == "memory":
            _memory(store, rel, ours, theirs, result)
        elif kind == "archived":
            _archived(store, rel, ours, theirs, result, manifests)
        else:
            _pre_image(store, rel, ours, theirs, result)
    _fix_manifests(store, manifests)
    return result


def kind_of(rel: str) -> str | None:
    """What an unmerged store path is, or None when it is not memcli's to resolve."""
    name = rel.rsplit("/", 1)[-1]
    if rel in (f"ops/{n}" for n in OPS_FILES) or (rel.startswith("ops/log/") and (
            log.MONTH_FILE.match(name) or name == f"{log.UNDATED}.json")):
        return "ops"  # the log's month files (ops/log/<YYYY-MM>.json) merge as the log does
    if name == "_index.json" and paths.folder_problem(rel.rpartition("/")[0]) is None:
        return "index"
    if rel.startswith("archive/runs/") and ".." not in rel.split("/"):
        return "pre_image"
    if paths.file_problem(rel) is None:
        return "archived" if rel.startswith("archive/") else "memory"
    return None


def _put(store: Store, rel: str, data: bytes | None) -> None:
    path = store.root / rel
    if data is None:
        if path.exists():
            fsops.unlink(path)
        return
    fsops.ensure_parent(path)
    fsops.write_replace(path, data) if path.exists() else fsops.write_new(path, data)


def _fmt(rel: str) -> str:
    return "md" if rel.endswith(".md") else "json"


def live_first(a: bytes, b: bytes, fmt: str) -> tuple[bytes, bytes]:
    """Of two versions of one memory, (the one that stays live, the one kept beside): the
    later `updated_at`, then the smaller content hash. Order-free, so clones agree."""
    def stamp(raw: bytes) -> str:
        try:
            return str(decode(raw, fmt).get("updated_at", ""))
        except ValueError:
            return ""  # unreadable: never preferred over a readable version
    sa, sb = stamp(a), stamp(b)
    if sa != sb:
        first = a if sa > sb else b
    else:
        first = a if sha256(a) <= sha256(b) else b
    return (first, b if first is a else a)


def kept_id(mem_id: str, raw: bytes, fmt: str) -> str:
    """The id of the version kept beside: derived from the memory and that version, so that
    two clones keeping the same version name it the same."""
    try:
        moment = parse_ts(str(decode(raw, fmt).get("updated_at")))[0]
    except (ValueError, TypeError):
        moment = now()
    return new_memory_id(moment, f"{mem_id}|{sha256(raw)}")


def _memory(store: Store, rel: str, ours: bytes | None, theirs: bytes | None, result: Resolved) -> None:
    folder, _, name = rel.rpartition("/")
    mem_id, fmt = name.rsplit(".", 1)[0], _fmt(rel)
    if ours is None and theirs is None:  # both sides moved it away (git saw two renames)
        _put(store, rel, None)
        result.resolutions.append(Resolution(rel, "removed_on_both_sides"))
        return
    if ours is None or theirs is None:  # changed on one side, removed (archived) on the other
        _put(store, rel, ours if ours is not None else theirs)
        result.resolutions.append(Resolution(rel, "kept_changed"))
        result.review.append(_item([mem_id], "changed_and_removed"))
        return
    live, other = live_first(ours, theirs, fmt)
    new_id = kept_id(mem_id, other, fmt)
    try:
        record = decode(other, fmt)
        record["id"] = new_id
        beside_bytes = encode(record, fmt)
    except ValueError:
        beside_bytes = other  # unreadable: kept as it is (doctor names it), never dropped
    beside = f"{folder}/{new_id}.{fmt}"
    _put(store, rel, live)
    _put(store, beside, beside_bytes)
    result.resolutions.append(Resolution(rel, "kept_both", beside))
    result.review.append(_item([mem_id, new_id], "changed_on_both_sides"))


def _archived(store: Store, rel: str, ours: bytes | None, theirs: bytes | None, result: Resolved,
              manifests: dict[str, str]) -> None:
    if ours is None or theirs is None:
        _put(store, rel, ours if ours is not None else theirs)
        result.resolutions.append(Resolution(rel, "kept_changed"))
        return
    fmt = _fmt(rel)
    first, second = sorted((ours, theirs), key=lambda raw: (_run_of(raw, fmt), sha256(raw)))
    mem_id = rel.rsplit("/", 1)[-1].split("@")[0].rsplit(".", 1)[0]
    run = _run_of(second, fmt) or "run_merged"
    new = f"archive/{mem_id}@{run}-{sha256(second)[:8]}.{fmt}"
    _put(store, rel, first)
    _put(store, new, second)
    manifests[f"{_run_of(second, fmt)}|{rel}"] = new
    result.resolutions.append(Resolution(rel, "archive_renamed", new))


def _run_of(raw: bytes, fmt: str) -> str:
    try:
        run = decode(raw, fmt).get("archive_run_id")
    except ValueError:
        return ""
    return str(run) if paths.is_run_id(run) else ""


def _fix_manifests(store: Store, moved: dict[str, str]) -> None:
    """The run that archived a renamed file finds it under its new name (undo reads this)."""
    for key, new in moved.items():
        run, _, old = key.partition("|")
        if not run:
            continue
        path = store.root / "archive" / "runs" / run / "manifest.json"
        try:
            data = orjson.loads(fsops.read_bytes(path))
        except (OSError, ValueError):
            continue
        files = data.get("files", []) if isinstance(data, dict) else []
        changed = False
        for entry in files:
            if isinstance(entry, dict) and entry.get("path") == old:
                entry["path"] = new
                changed = True
        if changed:
            fsops.write_replace(path, orjson.dumps(data, option=orjson.OPT_INDENT_2))


def _pre_image(store: Store, rel: str, ours: bytes | None, theirs: bytes | None, result: Resolved) -> None:
    if ours is None or theirs is None or ours == theirs:
        _put(store, rel, ours if ours is not None else theirs)
        result.resolutions.append(Resolution(rel, "pre_image_kept"))
        return
    first, second = sorted((ours, theirs), key=sha256)
    stem, dot, ext = rel.rpartition(".")
    beside = f"{stem}@{sha256(second)[:8]}.{ext}" if dot else f"{rel}@{sha256(second)[:8]}"
    _put(store, rel, first)
    _put(store, beside, second)
    result.resolutions.append(Resolution(rel, "pre_image_kept", beside))


def _item(ids: list[str], reason: str) -> dict[str, Any]:
    return {"memory_ids": ids, "reason": reason, "run_id": None, "created_at": format_ts(now())}


def queue(store: Store, resolved: Resolved) -> int:
    return review.add_items(store.root, resolved.review)
