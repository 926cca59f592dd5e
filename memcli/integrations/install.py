"""`memcli install cron` (SPEC section 4), and what every installer shares: the absolute,
quoted memcli command (`memcli_executable`, `sq`). `install claude` is `claude.py`.

The crontab belongs to the user, so the installer merges instead of writing: every other
line is kept, installing twice changes nothing the second time, and uninstalling removes
only memcli's line.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from memcli.errors import MemcliError

CRON_MARKER = "# memcli-weekly"


def sq(text: str) -> str:
    """Single-quote for sh, always (shlex.quote leaves plain paths bare; cron lines and
    hook commands read better and compare more reliably when they are always quoted)."""
    return "'" + text.replace("'", "'\"'\"'") + "'"


# ---------------------------------------------------------------- cron


def memcli_executable() -> str:
    """The memcli that is running now, as an absolute, quoted command: cron's PATH is
    minimal and rarely holds a virtualenv's bin folder."""
    sibling = Path(sys.executable).absolute().parent / "memcli"
    if sibling.is_file() and os.access(sibling, os.X_OK):
        return sq(str(sibling))
    found = shutil.which("memcli")
    if found:
        return sq(str(Path(found).absolute()))
    return f"{sq(str(Path(sys.executable).absolute()))} -m memcli"


def cron_line(store_root: Path, schedule: str, executable: str | None = None) -> str:
    """The weekly crontab line for a store, ending with our marker comment."""
    fields = schedule.split()
    if len(fields) != 5 and not (len(fields) == 1 and fields[0].startswith("@")):
        raise MemcliError(f"[schedule] weekly = {schedule!r} has {len(fields)} fields; a crontab "
                          "line needs 5 (minute hour day-of-month month day-of-week)")
    root = str(store_root.resolve())
    if "\n" in root or "\r" in root:
        raise MemcliError("the store path holds a line break; it cannot go into a crontab")
    log_path = sq(str(Path(root) / "ops" / "cron.log"))
    program = f"{executable or memcli_executable()} --store {sq(root)}"
    cmd = f"cd {sq(root)} && {program} consolidate --trigger weekly --quiet >> {log_path} 2>&1"
    if _shared(Path(root)):  # a team's store (SPEC 13): the weekly line shares the pass too
        cmd = (f"cd {sq(root)} && ({program} consolidate --trigger weekly --quiet && {program} sync --quiet)"
               f" >> {log_path} 2>&1")

    return f"{' '.join(fields)} {cmd.replace('%', chr(92) + '%')} {CRON_MARKER}"  # cron: % is a newline


def _shared(root: Path) -> bool:
    """A git repository with a remote: `memcli sync` has somewhere to push."""
    from memcli.sync import git

    return git.available() and git.toplevel(root) is not None and bool(git.remotes(root))


def is_our_cron_line(line: str, store_root: Path) -> bool:
    """Our marker and this store: each store keeps its own weekly line."""
    flag = f"--store {sq(str(store_root.resolve()))}".replace("%", "\\%")
    return line.rstrip().endswith(CRON_MARKER) and flag in line


def merge_cron(lines: list[str], line: str | None, store_root: Path) -> list[str]:
    """The table with our line for this store replaced (in place) or appended; `line`
    None removes it. Every other line is kept as it was."""
    result: list[str] = []
    placed = False
    for existing in lines:
        if not is_our_cron_line(existing, store_root):
            result.append(existing)
        elif line is not None and not placed:
            result.append(line)
            placed = True
    if line is not None and not placed:
        result.append(line)
    return result


def crontab_argv() -> list[str]:
    """`crontab`, or `$MEMCLI_CRONTAB` (tests point it at a fake that keeps a temp file)."""
    return shlex.split(os.environ.get("MEMCLI_CRONTAB") or "crontab")


def read_crontab() -> list[str]:
    proc = _run_crontab(["-l"], None)
    if proc.returncode != 0:
        if "no crontab" in proc.stderr.lower():
            return []
        raise MemcliError(f"`crontab -l` failed (exit {proc.returncode}): {proc.stderr.strip()}")
    return proc.stdout.splitlines()


def write_crontab(lines: list[str]) -> None:
    proc = _run_crontab(["-"], "".join(f"{line}\n" for line in lines))
    if proc.returncode != 0:
        raise MemcliError(f"`crontab -` failed (exit {proc.returncode}): {proc.stderr.strip()}")


def _run_crontab(args: list[str], text: str | None) -> subprocess.CompletedProcess[str]:
    argv = crontab_argv() + args
    try:
        return subprocess.run(argv, input=text, capture_output=True, text=True, timeout=30)
    except FileNotFoundError as exc:
        raise MemcliError(f"{argv[0]} not found: install cron, or add the line that "
                          "`memcli install cron` prints to your scheduler by hand") from exc
    except subprocess.TimeoutExpired as exc:
        raise MemcliError(f"{argv[0]} did not answer within 30 s") from exc


def apply_cron(store_root: Path, line: str, remove: bool = False) -> str:
    """Put our line into the user's crontab (or take it out); returns what happened."""
    before = read_crontab()
    after = merge_cron(before, None if remove else line, store_root)
    if after == before:
        return "absent" if remove else "unchanged"
    write_crontab(after)
    if remove:
        return "removed"
    return "replaced" if any(is_our_cron_line(x, store_root) for x in before) else "added"
