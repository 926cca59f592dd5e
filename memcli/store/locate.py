"""What is a store and where is it (SPEC section 1), with the standard library only.

Hooks run on every session and must start fast, so this module imports nothing but `os`:
it works on path strings. `memcli.store.store` builds its `Path`-based discovery on it.
"""

from __future__ import annotations

import os

OPS_MARKERS = ("state.json", "consolidation-log.json")  # memcli's own files in ops/


def is_store_dir(path: str) -> bool:
    """A store holds `memcli.toml`, or an `ops/` folder with memcli's own state or log in it;
    an `ops/` folder alone (a project's deploy scripts) is not one (SPEC 1)."""
    try:
        if os.path.isfile(os.path.join(path, "memcli.toml")):
            return True
        return any(os.path.isfile(os.path.join(path, "ops", name)) for name in OPS_MARKERS)
    except (OSError, ValueError):  # a folder we may not look into is not a store we can use
        return False


def find_upwards_dir(start: str) -> str | None:
    """The first store at `start` or one of its parents, as git finds a repository."""
    try:
        here = os.path.abspath(os.path.expanduser(start))
    except (OSError, ValueError):
        return None
    while True:
        if is_store_dir(here):
            return here
        parent = os.path.dirname(here)
        if parent == here:
            return None
        here = parent
