"""The one rule for paths (SPEC 8): nothing memcli writes, moves or removes resolves outside
the store.

Paths that come from files (a run's journal, an undo manifest, a saved plan) are checked here
before anything is done with them: a store-relative path, with no `..`, no absolute or empty
part, naming a memory file (`<id>.json` or `<id>.md`, in the archive also `<id>@<run_id>.<ext>`)
in a memory folder (`agent/<id>`, `team/<id>`, `global` or `archive`), and no component on
the way that is a symlink or not a real folder. `fsops` refuses a link on the way again at
the moment of each change; checking first refuses the whole file before anything changes.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path
from typing import Any

from memcli.store.formats import nesting_depth
from memcli.store.model import ID_RE

RUN_ID_RE = re.compile(r"^run_[0-9A-Za-z_-]{1,64}$")
SHA256_RE = re.compile(r"^[0-9a-f]{64}$")
_ARCHIVED_NAME = re.compile(r"^(mem_[0-9A-Za-z_-]{1,64})(?:@run_[0-9A-Za-z_-]{1,64})?\.(?:json|md)$")
MAX_FILE_DEPTH = 32  # journals, manifests and plans nest a few levels; far more is not ours


def is_run_id(value: Any) -> bool:
    return isinstance(value, str) and bool(RUN_ID_RE.match(value))


def folder_problem(rel: Any) -> str | None:
    """Why `rel` is not a memory folder of a store (`agent/<id>`, `team/<id>`, `global`,
    `archive`), or None."""
    from memcli.store.store import is_valid_scope_id

    if not isinstance(rel, str):
        return f"{rel!r} is not a folder path"
    parts = rel.split("/")
    if parts in (["global"], ["archive"]):
        return None
    if len(parts) == 2 and parts[0] in ("agent", "team") and is_valid_scope_id(parts[1]):
        return None
    return f"{rel!r} is not a memory folder of the store (agent/<id>, team/<id>, global or archive)"


def file_problem(rel: Any) -> str | None:
    """Why `rel` is not the store-relative path of a memory file, or None (no disk access)."""
    if not isinstance(rel, str) or not rel:
        return f"{rel!r} is not a path"
    if "\\" in rel or "\0" in rel or rel.startswith("/") or Path(rel).is_absolute():
        return f"{rel!r} is not a relative path inside the store"
    folder, _, name = rel.rpartition("/")
    if not folder or ".." in rel.split("/"):
        return f"{rel!r} leads out of the memory folders"
    problem = folder_problem(folder)
    if problem:
        return problem
    if folder == "archive":
        ok = _ARCHIVED_NAME.match(name) is not None
    else:
        stem, dot, ext = name.rpartition(".")
        ok = bool(dot) and ext in ("json", "md") and ID_RE.match(stem) is not None
    return None if ok else f"{rel!r} does not name a memory file (<id>.json or <id>.md)"


def link_problem(root: Path, rel: str) -> str | None:
    """Why a folder on the way to `rel` (store-relative) is unsafe to write through: a
    symlink, or not a folder. Folders that do not exist yet are fine (they will be made)."""
    probe = str(root)
    parts = rel.split("/")[:-1]
    for depth, part in enumerate(parts):
        probe = os.path.join(probe, part)
        try:
            mode = os.lstat(probe).st_mode
        except FileNotFoundError:
            return None
        except OSError as exc:
            return f"{'/'.join(parts[:depth + 1])} cannot be looked at ({exc.strerror})"
        if stat.S_ISLNK(mode):
            return f"{'/'.join(parts[:depth + 1])} is a symlink; memcli never writes through links"
        if not stat.S_ISDIR(mode):
            return f"{'/'.join(parts[:depth + 1])} is not a folder"
    return None


def path_problem(root: Path, rel: Any) -> str | None:
    """Why memcli must not write, move or remove the store-relative path `rel`, or None."""
    return file_problem(rel) or link_problem(root, rel)


def too_deep(data: Any) -> bool:
    return nesting_depth(data, MAX_FILE_DEPTH) > MAX_FILE_DEPTH


def is_hash(value: Any, none_ok: bool = True) -> bool:
    """A sha256 hex digest as memcli writes them (or None, when allowed)."""
    return (value is None and none_ok) or (isinstance(value, str) and SHA256_RE.match(value) is not None)


def str_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)
