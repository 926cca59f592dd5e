"""What a store needs to live in git (SPEC 13): `.gitignore`, `.gitattributes`, and the merge
drivers registered in the repository's config.

Shared: the memory folders (memories and `_index.json`), `archive/`, `memcli.toml`, the three
JSON files of `ops/` (log, review queue, state) and the log's month files (`ops/log/`). Never
shared: `.cache/`, the locks, a run's journal (a planted journal would act on every clone),
temporary files, and everything else under `ops/` (pending uses, hook and cron logs,
`ops/local/`): they describe one machine.
"""

from __future__ import annotations

import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path

from memcli.store import fsops
from memcli.sync import git

SHARED_OPS = ("consolidation-log.json", "review-queue.json", "state.json")
GITIGNORE = """\
# memcli: machine-local files, never shared (SPEC 13)
/.cache/
/ops/*
""" + "".join(f"!/ops/{name}\n" for name in SHARED_OPS) + """\
!/ops/log/
.*.tmp
"""
# Memory files never merge line by line (a half-merged JSON record is no record): git leaves
# both versions and `memcli sync` keeps both. memcli's own files merge through its drivers.
GITATTRIBUTES = """\
# memcli: how git merges a store (SPEC 13)
/agent/**/*.json -merge
/agent/**/*.md -merge
/team/**/*.json -merge
/team/**/*.md -merge
/global/*.json -merge
/global/*.md -merge
/archive/** -merge
_index.json merge=memcli-index
""" + "".join(f"/ops/{name} merge=memcli-ops\n" for name in SHARED_OPS) + """\
/ops/log/*.json merge=memcli-ops
"""
DRIVERS = {"memcli-index": ("index", "memcli: regenerate a folder index"),
           "memcli-ops": ("ops", "memcli: unite log, review queue and state by id")}


@dataclass
class Prepared:
    written: list[str] = field(default_factory=list)  # files written or completed
    drivers: bool = False  # the merge drivers were (re)registered
    repository: bool = False  # the store is inside a git repository


def driver_command(kind: str) -> str:
    """The command git runs for a driver: this very interpreter by absolute path, so that it
    works from a venv nobody activated (and git's own environment)."""
    return f"{shlex.quote(sys.executable)} -m memcli merge-driver {kind} %O %A %B %P"


def write_files(root: Path) -> list[str]:
    """Write `.gitignore` and `.gitattributes`, or add the lines missing from ones already
    there (a person's own lines stay). Returns the names written."""
    written = []
    for name, text in ((".gitignore", GITIGNORE), (".gitattributes", GITATTRIBUTES)):
        path = root / name
        try:
            old = fsops.read_bytes(path).decode()
        except FileNotFoundError:
            old = None
        if old is None:
            fsops.write_new(path, text.encode())
            written.append(name)
            continue
        have = set(old.splitlines())
        missing = [line for line in text.splitlines() if line not in have and not line.startswith("#")]
        if missing:
            joined = old + ("" if old.endswith("\n") or not old else "\n") + "\n".join(missing) + "\n"
            fsops.write_replace(path, joined.encode())
            written.append(name)
    return written


def register_drivers(root: Path) -> bool:
    """Name memcli's merge drivers in the repository's config (local, never global). True
    when something was written."""
    changed = False
    for name, (kind, label) in DRIVERS.items():
        changed |= git.set_config(root, f"merge.{name}.name", label)
        changed |= git.set_config(root, f"merge.{name}.driver", driver_command(kind))
    return changed


def prepare(root: Path) -> Prepared:
    """Everything git needs from a store: the two files, and the drivers when the store is
    already in a repository (`sync` registers them again in a fresh clone)."""
    result = Prepared(written=write_files(root))
    if git.available() and git.toplevel(root) is not None:
        result.repository = True
        result.drivers = register_drivers(root)
    return result
