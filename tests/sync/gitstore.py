"""Real git repositories for the sync tests: a bare remote and clones of one store."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from memcli.cli import app
from tests.conftest import TOML

GIT_ENV = {"GIT_AUTHOR_NAME": "Test", "GIT_AUTHOR_EMAIL": "test@example.com",
           "GIT_COMMITTER_NAME": "Test", "GIT_COMMITTER_EMAIL": "test@example.com",
           "GIT_CONFIG_NOSYSTEM": "1"}
runner = CliRunner()


def git(cwd: Path, *args: str, check: bool = True) -> str:
    done = subprocess.run(["git", "-c", "init.defaultBranch=main", *args], cwd=cwd, capture_output=True,
                          text=True, env={**os.environ, **GIT_ENV})
    if check and done.returncode != 0:
        raise AssertionError(f"git {' '.join(args)}: {done.stderr}")
    return done.stdout


def memcli(store: Path, *args: str) -> tuple[int, str]:
    result = runner.invoke(app, ["--store", str(store), *args])
    return result.exit_code, result.stdout + result.stderr


def sync(store: Path, *args: str) -> tuple[int, dict[str, Any]]:
    code, out = memcli(store, "--json", "sync", *args)
    start = out.find("{")
    return code, json.loads(out[start:]) if start >= 0 else {"raw": out}


def team(tmp_path: Path, clones: int = 2) -> tuple[Path, list[Path]]:
    """A bare remote holding a fresh store, and `clones` clones of it (drivers registered by
    each clone's first sync)."""
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    first = tmp_path / "c0"
    git(tmp_path, "init", "-q", str(first))
    assert memcli(first, "init", str(first))[0] == 0
    (first / "memcli.toml").write_text(TOML)
    git(first, "remote", "add", "origin", str(remote))
    code, out = sync(first)
    assert code == 0, out
    stores = [first]
    for n in range(1, clones):
        clone = tmp_path / f"c{n}"
        git(tmp_path, "clone", "-q", str(remote), str(clone))
        stores.append(clone)
    return remote, stores


def status(store: Path) -> str:
    return git(store, "status", "--porcelain", "--untracked-files=all")
