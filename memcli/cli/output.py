"""What every command prints through: JSON, rich consoles, hints, progress bars.

Rich is imported only when a command draws a table or a bar (never for `--help`, `--json`
or the hooks). Output degrades instead of failing: on a stream whose encoding is not
UTF-8, JSON escapes what it cannot carry (`\\u2026`), text replaces it, and rich draws its
boxes in ASCII; a reader that leaves early (`| head -1`) is handled in `common.MemcliGroup`.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
import time
from typing import Any

import orjson

_CONSOLES: dict[bool, Any] = {}
_STARTED = [time.monotonic(), 0.0]  # when the command began; whether `main` said so


def start_clock(at: float | None = None) -> None:
    """The command began `at` (the entry point's first moment), else now; once set from the
    entry point, later calls (each `MemcliGroup.main`) keep it."""
    if at is not None:
        _STARTED[:] = [at, 1.0]
    elif not _STARTED[1]:
        _STARTED[0] = time.monotonic()


def started_ms() -> int:
    """Milliseconds since the command began: the wall time a report owns up to."""
    return int((time.monotonic() - _STARTED[0]) * 1000)


def utf8(stream: Any) -> bool:
    """Whether `stream` can carry any text (its encoding is a UTF one)."""
    encoding = (getattr(stream, "encoding", None) or "").lower().replace("-", "").replace("_", "")
    return encoding.startswith("utf")


def degrade_streams() -> None:
    """On a stream that cannot encode every character (PYTHONIOENCODING=ascii, a Latin-1
    locale), replace what it cannot carry instead of dying with a UnicodeEncodeError."""
    for stream in (sys.stdout, sys.stderr):
        if not utf8(stream) and hasattr(stream, "reconfigure"):
            try:
                stream.reconfigure(errors="replace")
            except (ValueError, OSError):  # a detached or closed stream: nothing to change
                pass


def os_error_message(exc: OSError) -> str:
    """`Permission denied (/path/to/file)`: the reason, then the file when there is one."""
    reason = exc.strerror or str(exc)
    return f"{reason} ({exc.filename})" if exc.filename else reason


def emit_json(data: Any) -> None:
    """Indented JSON on stdout; `\\uXXXX` escapes where stdout is not UTF-8 (still exact)."""
    if utf8(sys.stdout):
        text = orjson.dumps(data, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS).decode()
    else:
        import json

        text = json.dumps(orjson.loads(orjson.dumps(data, option=orjson.OPT_NON_STR_KEYS)),
                          indent=2, ensure_ascii=True)
    sys.stdout.write(text + "\n")


def console(stderr: bool = False) -> Any:
    """A rich console for stdout (or stderr), made on first use and bound to the stream of
    the moment (tests swap sys.stdout per call)."""
    from rich.console import Console

    class _Console(Console):
        def on_broken_pipe(self) -> None:
            # rich would exit 1; a reader that left is not a failure (`common.closed_pipe`)
            raise BrokenPipeError

    stream = sys.stderr if stderr else sys.stdout
    cached = _CONSOLES.get(stderr)
    if cached is None or cached.file is not stream:
        cached = _Console(file=stream, stderr=stderr, highlight=False)
        _CONSOLES[stderr] = cached
    return cached


def width() -> int:
    """The terminal's width in columns (COLUMNS when set), 80 when unknown."""
    return shutil.get_terminal_size((80, 24)).columns


def ellipsize(text: str, limit: int) -> str:
    """`text` cut to at most `limit` characters, ending with an ellipsis when cut ("..."
    where stdout is not UTF-8)."""
    text = " ".join(text.split())
    mark = "…" if utf8(sys.stdout) else "..."
    if not utf8(sys.stdout):
        text = text.replace("…", "...")
    return text if len(text) <= limit else text[:max(limit - len(mark), 0)].rstrip() + mark


def plural(count: int, word: str, many: str | None = None) -> str:
    """`1 run`, `2 runs`, `1 memory`, `3 memories`."""
    if count == 1:
        return f"{count} {word}"
    return f"{count:,} {many or (word[:-1] + 'ies' if word.endswith('y') else word + 's')}"


# ---------------------------------------------------------------- hints

_PROGRAM: list[str] = ["memcli"]


def set_program(argv0: str) -> None:
    """Remember how memcli was invoked, for the hints it prints: `memcli` when that name on
    PATH is this program, else its absolute path (a venv that was never activated)."""
    if not argv0 or argv0.endswith(("__main__.py", "-c")):
        _PROGRAM[:] = [sys.executable, "-m", "memcli"]
        return
    found = shutil.which("memcli")
    path = os.path.abspath(argv0) if os.sep in argv0 else (shutil.which(argv0) or argv0)
    if found and os.path.realpath(found) == os.path.realpath(path):
        _PROGRAM[:] = ["memcli"]
    else:
        _PROGRAM[:] = [path]


def hint_line(label: str, command: str, cols: int) -> list[str]:
    """`Apply with: COMMAND` on one line, or the command on a line of its own when the two
    do not fit: a command is never wrapped, so that it pastes as it is."""
    if len(label) + 1 + len(command) <= cols:
        return [f"{label} {command}"]
    return [label, f"  {command}"]


def hint(store: str | None, *words: str) -> str:
    """A command line the user can paste as is: this program, the `--store` the command was
    run with (absolute), then `words` (each quoted when needed)."""
    parts = list(_PROGRAM)
    if store:
        parts += ["--store", os.path.abspath(os.path.expanduser(store))]
    return " ".join(shlex.quote(p) for p in parts) + ("" if not words else " " + " ".join(words))


# ---------------------------------------------------------------- progress


class Progress:
    """A rich progress bar on stderr, on a terminal only, and never with --json or --quiet:
    `with Progress(silent) as update: update(stage, done, total)`. `update` is None when
    there is nothing to draw, so callers pass it on as the core's optional callback. A stage
    whose total is under `min_total` draws nothing (a short list needs no bar)."""

    def __init__(self, silent: bool, min_total: int = 0) -> None:
        self.enabled = not silent and sys.stderr.isatty()
        self.min_total = min_total
        self.bar: Any = None
        self.tasks: dict[str, Any] = {}

    def __enter__(self) -> Any:
        return self.update if self.enabled else None

    def update(self, stage: str, done: int, total: int) -> None:
        if total < self.min_total:
            return
        if self.bar is None:  # rich is imported when there is a bar to draw, not before
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self.bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                TimeElapsedColumn(), console=console(stderr=True), transient=True)
            self.bar.start()
        if stage not in self.tasks:
            self.tasks[stage] = self.bar.add_task(stage, total=total)
        self.bar.update(self.tasks[stage], completed=done, total=total)

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.stop()
