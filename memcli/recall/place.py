"""The store as the read path sees it: its root, the settings recall uses, its live folders
and an agent's view, without the store's machinery (`memcli.store.store` and
`memcli.config` cost a hook process about 70 ms of imports; a prompt hook has 300 ms in all).

Settings come from `.cache/recall/settings.json`, the `[recall]` and `[teams]` values that
`memcli.config` checked the last time `memcli.toml` was read, kept with the file's size,
mtime, inode and ctime: while those match (and the file was over a second old when it was
read, so an edit in the same timestamp tick cannot hide), the cache stands for the file;
otherwise the file is read and checked again (a bad value raises `ConfigError` naming the
key, as everywhere). The `Store` itself is made only when a caller needs it (a sync or a
rebuild of the search index, reading a memory file).
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from memcli.store.store import Store

RECALL_KEYS = ("agent", "limit", "briefing_chars", "prompt_limit", "min_score", "hook_budget_ms")
CACHE_VERSION = 1
TRUST_AGE_NS = 1_000_000_000
SETTINGS_NAME = "settings.json"


class Place:
    """A store root with its recall settings; `store()` gives the full `Store` on demand."""

    __slots__ = ("root", "recall", "teams", "default_team", "_store")

    def __init__(self, root: str, recall: dict[str, Any], teams: dict[str, str], default_team: str,
                 store: Store | None = None) -> None:
        self.root = root
        self.recall = recall
        self.teams = teams
        self.default_team = default_team
        self._store = store

    @classmethod
    def of(cls, store: Store) -> Place:
        """The place of a Store already open (its settings as loaded)."""
        settings = store.settings
        recall = {key: getattr(settings.recall, key) for key in RECALL_KEYS}
        return cls(str(store.root), recall, dict(settings.teams), settings.default_team, store)

    @classmethod
    def open(cls, root: str) -> Place:
        """The place at `root` (a store), its settings from the cache when it still stands
        for memcli.toml. Raises ConfigError for bad settings, as `Store(root)` does."""
        data = _cached_settings(root)
        return cls(root, data["recall"], data["teams"], data["default_team"])

    def store(self) -> Store:
        if self._store is None:
            from memcli.store.store import Store

            self._store = Store(_path(self.root))
        return self._store

    def team_for(self, agent: str) -> str:
        return self.teams.get(agent, self.default_team)

    def live(self) -> list[str]:
        """Every live memory folder (store-relative), in `Store.memory_folders` order."""
        found: list[str] = []
        for scope in ("agent", "team"):
            base = os.path.join(self.root, scope)
            try:
                names = sorted(os.listdir(base))
            except OSError:
                continue
            for name in names:
                path = os.path.join(base, name)
                if is_valid_scope_id(name) and os.path.isdir(path) and not os.path.islink(path):
                    found.append(f"{scope}/{name}")
        if os.path.isdir(os.path.join(self.root, "global")):
            found.append("global")
        return found

    def view(self, agent: str | None) -> list[str]:
        """The folders `agent` sees (SPEC 10): its own, its team's and global; every live
        folder without an agent."""
        from memcli.errors import MemcliError

        live = self.live()
        if agent is None:
            return live
        if not is_valid_scope_id(agent):
            raise MemcliError(f"bad agent id {agent!r} (letters, digits, '.', '_', '-')")
        wanted = [f"agent/{agent}", f"team/{self.team_for(agent)}", "global"]
        return [rel for rel in wanted if rel in live]


def is_valid_scope_id(name: str) -> bool:
    """The rule of `memcli.store.store.is_valid_scope_id` (a test keeps them equal)."""
    return bool(name) and len(name) <= 100 and name not in (".", "..") and all(
        c.isalnum() or c in "._-" for c in name) and not name.startswith(".")


def _path(root: str) -> Any:
    from pathlib import Path

    return Path(root)


# ---------------------------------------------------------------- the settings cache


def _toml_key(root: str) -> list[int] | None:
    try:
        st = os.stat(os.path.join(root, "memcli.toml"))
    except OSError:
        return None
    return [st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns]


def _cache_path(root: str) -> str:
    return os.path.join(root, ".cache", "recall", SETTINGS_NAME)


def _cached_settings(root: str) -> dict[str, Any]:
    """The cached settings while they stand for memcli.toml; else the file read and checked
    again (and cached when it can be trusted)."""
    import json

    key = _toml_key(root)
    if key is not None:
        try:
            with open(_cache_path(root), "rb") as handle:
                data = json.loads(handle.read())
            if isinstance(data, dict) and data.get("version") == CACHE_VERSION and data.get("key") == key \
                    and isinstance(data.get("recall"), dict) and isinstance(data.get("teams"), dict) \
                    and set(data["recall"]) == set(RECALL_KEYS) and isinstance(data.get("default_team"), str):
                return data
        except (OSError, ValueError):
            pass
    return _read_and_cache(root, key)


def _read_and_cache(root: str, key: list[int] | None) -> dict[str, Any]:
    import time

    from memcli.config import load_settings

    settings = load_settings(_path(root))  # raises ConfigError, naming the key
    data = {"version": CACHE_VERSION, "key": key,
            "recall": {k: getattr(settings.recall, k) for k in RECALL_KEYS},
            "teams": dict(settings.teams), "default_team": settings.default_team}
    if key is not None and time.time_ns() - key[1] > TRUST_AGE_NS:
        _save(root, data)
    return data


def _save(root: str, data: dict[str, Any]) -> None:
    """Write the cache (never fails the caller: it is only a cache)."""
    import json

    from memcli.store.cache import cache_dir

    try:
        folder = cache_dir(_path(root), "recall", create=True)
        tmp = folder / f".{SETTINGS_NAME}.{os.getpid()}.tmp"
        tmp.write_text(json.dumps(data))
        os.replace(tmp, folder / SETTINGS_NAME)
    except (OSError, ValueError):
        pass


def discover(explicit: str | None) -> str:
    """`memcli.store.store.discover` on path strings: `--store`, else `MEMCLI_STORE` (each
    must be a store itself), else the current folder or its nearest parent that is one."""
    from memcli.errors import NoStoreError
    from memcli.store.locate import find_upwards_dir, is_store_dir

    named = explicit or os.environ.get("MEMCLI_STORE")
    if named:
        root = os.path.expanduser(named)
        if not is_store_dir(root):
            raise NoStoreError(_path(root))
        return os.path.realpath(root)
    cwd = os.getcwd()
    found = find_upwards_dir(cwd)
    if found is None:
        raise NoStoreError(_path(cwd))
    return os.path.realpath(found)
