"""Where a benchmark ran: the machine, the memcli revision, the file system (fsync costs
depend on it). Shared by the benchmark scripts' reports."""

from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path


def machine(root: Path) -> str:
    """nproc, RAM, Python, OS and the memcli revision."""
    mem_kb = 0
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem_kb = int(line.split()[1])
    except OSError:
        pass
    return (f"{os.cpu_count()} CPUs, {mem_kb / 1024 / 1024:.1f} GiB RAM, Python "
            f"{platform.python_version()}, {platform.system()} {platform.release()}, "
            f"memcli {revision(root)}, {c_loops()}")


def c_loops() -> str:
    """Which of memcli's optional C loops this install runs (see the README's "Choices")."""
    from memcli.consolidate import candidates
    from memcli.store import scanning

    built = [name for name, found in (("signing", candidates._signing), ("lstat", scanning._lstat)) if found]
    return f"C loops: {', '.join(built) or 'none (MEMCLI_PURE, or no compiler at install)'}"


def revision(root: Path) -> str:
    """git short hash of the checkout, '+dirty' when memcli/ has uncommitted changes."""
    def git(*args: str) -> str:
        proc = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=False)
        return proc.stdout.strip() if proc.returncode == 0 else ""

    head = git("rev-parse", "--short", "HEAD") or "unknown"
    return head + ("+dirty" if git("status", "--porcelain", "memcli") else "")


def filesystem(path: Path) -> str:
    """Filesystem type holding `path` (fsync costs depend on it)."""
    best, kind = "", "unknown"
    try:
        for line in Path("/proc/mounts").read_text().splitlines():
            _, mount, fstype, *_ = line.split()
            if str(path.resolve()).startswith(mount) and len(mount) > len(best):
                best, kind = mount, fstype
    except OSError:
        pass
    return kind
