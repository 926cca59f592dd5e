"""The git command line, as `memcli sync` uses it: one function a question or an action.

Every call runs `git` in the store's folder with a fixed locale and no pager; a failure is a
`GitError` carrying git's own message. No git library: the command line is the stable
interface, and it is what the team uses by hand too.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path


class GitError(Exception):
    def __init__(self, args: list[str], code: int, output: str) -> None:
        self.code = code
        self.output = output.strip()
        super().__init__(f"git {' '.join(args)} failed ({code}): {self.output or 'no output'}")


def available() -> bool:
    return shutil.which("git") is not None


def run(cwd: Path, *args: str, check: bool = True,
        input: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "LC_ALL": "C", "GIT_PAGER": "cat", "GIT_TERMINAL_PROMPT": "0"}
    done = subprocess.run(["git", *args], cwd=cwd, env=env, input=input, capture_output=True, check=False)
    if check and done.returncode != 0:
        raise GitError(list(args), done.returncode, (done.stderr or done.stdout).decode(errors="replace"))
    return done


def out(cwd: Path, *args: str) -> str:
    return run(cwd, *args).stdout.decode(errors="replace").strip()


def toplevel(cwd: Path) -> Path | None:
    """The repository's top folder, or None when `cwd` is in none."""
    done = run(cwd, "rev-parse", "--show-toplevel", check=False)
    return Path(done.stdout.decode().strip()) if done.returncode == 0 else None


def git_path(cwd: Path, name: str) -> Path:
    """A path inside the repository's git folder (`MERGE_HEAD`, `rebase-merge`, ...)."""
    path = Path(out(cwd, "rev-parse", "--git-path", name))
    return path if path.is_absolute() else cwd / path


def branch(cwd: Path) -> str | None:
    """The checked-out branch, or None on a detached HEAD."""
    done = run(cwd, "symbolic-ref", "-q", "--short", "HEAD", check=False)
    return done.stdout.decode().strip() if done.returncode == 0 else None


def has_commits(cwd: Path) -> bool:
    return run(cwd, "rev-parse", "-q", "--verify", "HEAD", check=False).returncode == 0


def rebase_in_progress(cwd: Path) -> bool:
    return git_path(cwd, "rebase-merge").exists() or git_path(cwd, "rebase-apply").exists()


def merge_in_progress(cwd: Path) -> bool:
    return git_path(cwd, "MERGE_HEAD").exists()


def remotes(cwd: Path) -> list[str]:
    return out(cwd, "remote").split()


def upstream_remote(cwd: Path, name: str) -> str | None:
    """The remote the branch tracks (`branch.<name>.remote`), if any."""
    done = run(cwd, "config", "--get", f"branch.{name}.remote", check=False)
    return done.stdout.decode().strip() or None if done.returncode == 0 else None


def ref_exists(cwd: Path, ref: str) -> bool:
    return run(cwd, "rev-parse", "-q", "--verify", f"{ref}^{{commit}}", check=False).returncode == 0


def is_ancestor(cwd: Path, older: str, newer: str) -> bool:
    return run(cwd, "merge-base", "--is-ancestor", older, newer, check=False).returncode == 0


def set_config(cwd: Path, key: str, value: str) -> bool:
    """Set a repository config value; False when it already had it (nothing written)."""
    done = run(cwd, "config", "--local", "--get", key, check=False)
    if done.returncode == 0 and done.stdout.decode().rstrip("\n") == value:
        return False
    run(cwd, "config", "--local", key, value)
    return True


def hash_object(cwd: Path, data: bytes) -> str:
    """Store bytes as a blob; its id."""
    return run(cwd, "hash-object", "-w", "--stdin", input=data).stdout.decode().strip()


def show_bytes(cwd: Path, spec: str) -> bytes | None:
    """The bytes of `<rev>:<path>` (or `:<stage>:<path>`), None when there is none."""
    done = run(cwd, "show", spec, check=False)
    return done.stdout if done.returncode == 0 else None


def status_paths(cwd: Path) -> list[str]:
    """Paths (relative to `cwd`) with any change, staged or not, untracked included."""
    raw = run(cwd, "status", "--porcelain=v1", "-z", "--untracked-files=all", "--", ".").stdout
    paths, parts, i = [], raw.split(b"\0"), 0
    while i < len(parts):
        item = parts[i]
        if len(item) > 3:
            paths.append(item[3:].decode())
            if item[:1] in (b"R", b"C"):
                i += 1  # the rename's source follows
        i += 1
    prefix = out(cwd, "rev-parse", "--show-prefix")  # the store's folder inside the repository
    return [p[len(prefix):] for p in paths if p.startswith(prefix)]


def unmerged(cwd: Path) -> dict[str, dict[int, str]]:
    """Paths git could not merge: path (relative to `cwd`) -> {stage: blob id} (1 base, 2
    ours, 3 theirs)."""
    raw = run(cwd, "ls-files", "-u", "-z", "--", ".").stdout
    found: dict[str, dict[int, str]] = {}
    for line in raw.split(b"\0"):
        if not line:
            continue
        meta, path = line.split(b"\t", 1)
        _mode, blob, stage = meta.split()
        found.setdefault(path.decode(), {})[int(stage)] = blob.decode()
    return found
