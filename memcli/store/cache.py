"""`.cache/`: the one place for derived state (SPEC 1). Everything here is rebuilt from the
memory files when missing, stale or corrupt; it is never the truth and git ignores it.

Callers name what they keep by a sub-path (`cache_dir(root, "recall")`); this module owns
where that lives, so that the store's own folders hold memories and their indices only.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from memcli.store import fsops

CACHE_NAME = ".cache"


def cache_root(root: Path) -> Path:
    return root / CACHE_NAME


def cache_dir(root: Path, *parts: str, create: bool = False) -> Path:
    """The folder for one kind of derived state, made on demand. `.cache` itself must be a
    real folder: a symlink there would take memcli's writes out of the store."""
    base = cache_root(root)
    folder = base.joinpath(*parts)
    if create:
        try:
            st = os.lstat(base)
        except FileNotFoundError:
            st = None
        if st is not None and not stat.S_ISDIR(st.st_mode):
            raise OSError(f"{base} is not a real folder; move it aside and memcli rebuilds it")
        if not folder.is_dir():
            fsops.mkdir(folder)
    return folder


# ---------------------------------------------------------------- per-folder caches
# What a run keeps per memory folder (signatures, similar pairs, the last-run snapshot) lives
# at `.cache/folders/<folder rel path>/`, not beside the memories: a memory folder holds its
# memories and `_index.json` only (SPEC 1), so that it diffs and merges as its memories alone.

FOLDERS = "folders"
LEGACY_NAMES = ("_minhash.bin", "_pairs.json", "_lastrun.bin")  # where older memcli kept them


def store_root(folder_path: Path, rel: str) -> Path:
    """The store a memory folder belongs to, from its path and store-relative name."""
    return folder_path.parents[rel.count("/")]


def folder_cache(folder_path: Path, rel: str, create: bool = False) -> Path:
    """The cache folder of the memory folder `rel` (made on demand when `create`)."""
    return cache_dir(store_root(folder_path, rel), FOLDERS, *rel.split("/"), create=create)


def migrate_folder_caches(root: Path, folders: list[tuple[Path, str]]) -> int:
    """Move caches an older memcli left beside the memories into `.cache/folders/...` (the
    first writing command does this once); returns how many files moved. A cache already in
    its new place wins: the old copy is only a cache, so it is removed."""
    moved = 0
    for path, rel in folders:
        for name in LEGACY_NAMES:
            old = path / name
            try:
                st = os.lstat(old)
            except OSError:
                continue
            if not stat.S_ISREG(st.st_mode):
                continue  # a link or anything else there is left alone (doctor reports it)
            target = folder_cache(path, rel, create=True) / name
            if target.exists():
                fsops.unlink(old)
            else:
                fsops.move(old, target)
            moved += 1
    return moved
