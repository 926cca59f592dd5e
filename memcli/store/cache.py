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
