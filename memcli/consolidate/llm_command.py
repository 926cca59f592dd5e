"""The LLM through any program (`[llm] command`, SPEC 5 and 9): the prompt on stdin, the
answer on stdout, as `claude -p` (Claude Code's print mode) works, so that no API key is needed.

`CommandClient` is an `llm.LLMClient` whose transport is a program instead of the Messages
API, so every guard rail of the API path holds unchanged: texts are masked before the prompt
is built, the run's call budget is checked before each call, answers are parsed the same way,
and a failure is a SKIP (pairs) or the extractive summary, never a failed run.

The program runs without a shell (`[llm] command` is split as a shell would split it, or
given as a list), its arguments passed exactly, in the store folder, in a session of its own.
What can go wrong is bounded: a program that does not exist or cannot be run, exits non-zero,
is killed, writes more than `MAX_OUTPUT_BYTES` or does not finish within `timeout_s` (its whole
process group is killed) fails that call with a short reason. Every failure but a first
timeout ends LLM use for the rest of the run, since every further call would most likely
fail the same way; the caller reports it once.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memcli.consolidate.llm import MAX_TIMEOUTS, LLMClient
from memcli.secrets import redact

# An answer is a few thousand characters (a summary, ten pair decisions); a program that
# writes more is broken or hostile, and is stopped rather than read into memory.
MAX_OUTPUT_BYTES = 1_000_000
# What is kept of the program's stderr for the notice: its tail, secrets redacted.
STDERR_TAIL_BYTES = 4096
NOTICE_STDERR_CHARS = 200
# After the program exits, how long its stdout may stay open (a child it left behind).
EXIT_GRACE_S = 2.0
# Set in the program's environment. A memcli started under it (a hook of the session that
# `claude -p` runs, ending) does not call the command again: no loop of sessions.
NESTED_ENV = "MEMCLI_IN_LLM_COMMAND"


class CommandFailed(Exception):
    """A call that produced no answer. `reason` is a short code for the log; `detail` says
    what happened for the notice (secret-free: stderr is redacted)."""

    def __init__(self, reason: str, detail: str, disable: bool = True) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail
        self.disable = disable


@dataclass
class _TextBlock:
    text: str
    type: str = "text"


class _Answer:
    """The program's stdout shaped as a Messages API response, for `llm.response_text`."""

    stop_reason = "end_turn"

    def __init__(self, text: str) -> None:
        self.content = [_TextBlock(text)]


class CommandClient(LLMClient):
    """One run's access to the LLM through a program, with the run's budget and kill switch."""

    def __init__(self, *, argv: Sequence[str], max_calls: int, timeout_s: float,
                 cwd: Path | None = None, batch_size: int = 10) -> None:
        """Keep the program's argv; nothing runs until the first call."""
        super().__init__(api_key="", model="command", max_calls=max_calls, timeout_s=timeout_s,
                         batch_size=batch_size)
        if not argv:
            raise ValueError("argv must name a program")
        self.argv = tuple(argv)
        self.cwd = cwd
        self.failures: list[CommandFailed] = []

    def __repr__(self) -> str:
        """Show the program and the budget."""
        return (f"CommandClient(program={self.argv[0]!r}, calls_made={self.calls_made}, "
                f"max_calls={self.max_calls}, disabled_reason={self.disabled_reason!r})")

    @property
    def program(self) -> str:
        return self.argv[0]

    def _create(self, system: str, prompt: str) -> Any:
        """One call: the instructions and the (masked) prompt on stdin, the answer on stdout."""
        return _Answer(run_command(self.argv, f"{system}\n\n{prompt}\n", self.timeout_s, cwd=self.cwd))

    def _on_error(self, exc: Exception) -> str:
        """Timeouts count as on the API path (two in a row end LLM use); any other failure of
        the program ends it at once."""
        if not isinstance(exc, CommandFailed):
            return f"client_error_{type(exc).__name__}"
        self.failures.append(exc)
        if exc.reason == "timeout":
            self._timeouts += 1
            if self._timeouts >= MAX_TIMEOUTS:
                self.disabled_reason = "repeated_timeouts"
        elif exc.disable:
            self.disabled_reason = exc.reason
        return exc.reason


def run_command(argv: Sequence[str], text: str, timeout_s: float, *, cwd: Path | None = None,
                max_output: int = MAX_OUTPUT_BYTES) -> str:
    """Run `argv` (no shell) with `text` on stdin and return its stdout, decoded as UTF-8.

    Raises `CommandFailed` when the program cannot start, exits non-zero or by a signal,
    writes more than `max_output` bytes, or is not done within `timeout_s`; its process
    group is killed on the way out whatever happened.
    """
    name = argv[0]
    env = {**os.environ, NESTED_ENV: "1"}
    try:
        proc = subprocess.Popen(list(argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, cwd=cwd, env=env, start_new_session=True,
                                close_fds=True)
    except FileNotFoundError:
        raise CommandFailed("command_not_found", f"`{name}` was not found (is it on PATH?)") from None
    except PermissionError:
        raise CommandFailed("command_not_executable", f"`{name}` is not executable") from None
    except OSError as exc:
        raise CommandFailed("command_failed_to_start", f"`{name}` could not start ({exc.strerror})") from None
    try:
        data = text.encode("utf-8", errors="replace")
        out, err = _exchange(proc, data, time.monotonic() + timeout_s, max_output, name, timeout_s)
    finally:
        _kill_group(proc)
    code = proc.returncode
    if code != 0:
        how = f"exit status {code}" if code > 0 else f"killed by signal {-code}"
        reason = f"command_exit_{code}" if code > 0 else f"command_signal_{-code}"
        raise CommandFailed(reason, f"`{name}` failed ({how}){_stderr_note(err)}")
    return out.decode("utf-8", errors="replace")


def _exchange(proc: subprocess.Popen[bytes], data: bytes, deadline: float, max_output: int, name: str,
              timeout_s: float) -> tuple[bytes, bytes]:
    """Write stdin and read stdout and stderr at once (none can then block the others),
    within the deadline and the output cap. Returns (stdout, stderr tail)."""
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    out, err = bytearray(), bytearray()
    pending = memoryview(data)
    exited_at: float | None = None
    with selectors.DefaultSelector() as sel:
        os.set_blocking(proc.stdin.fileno(), False)
        sel.register(proc.stdin, selectors.EVENT_WRITE)
        sel.register(proc.stdout, selectors.EVENT_READ)
        sel.register(proc.stderr, selectors.EVENT_READ)
        while sel.get_map():
            current = time.monotonic()
            if current >= deadline:
                raise CommandFailed("timeout", f"`{name}` gave no answer within {timeout_s:g} s",
                                    disable=False)
            if exited_at is None and proc.poll() is not None:
                exited_at = current
            if exited_at is not None and current - exited_at > EXIT_GRACE_S:
                break  # it exited, but something it started holds its output open
            for key, _ in sel.select(min(deadline - current, 0.25)):
                if key.fileobj is proc.stdin:
                    pending = _write_some(sel, proc, pending)
                    continue
                chunk = os.read(key.fd, 65536)
                if not chunk:
                    sel.unregister(key.fileobj)
                    continue
                if key.fileobj is proc.stdout:
                    out += chunk
                    if len(out) > max_output:
                        raise CommandFailed("output_too_large",
                                            f"`{name}` wrote more than {max_output:,} bytes")
                else:
                    err += chunk
                    del err[:-STDERR_TAIL_BYTES]
    try:
        proc.wait(timeout=max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        raise CommandFailed("timeout", f"`{name}` gave no answer within {timeout_s:g} s",
                            disable=False) from None
    return bytes(out), bytes(err)


def _write_some(sel: selectors.BaseSelector, proc: subprocess.Popen[bytes],
                pending: memoryview) -> memoryview:
    """Write what the pipe takes now; close stdin when all is written or the program
    stopped reading (it may answer without reading everything)."""
    assert proc.stdin is not None
    try:
        written = os.write(proc.stdin.fileno(), pending[:65536])
        pending = pending[written:]
    except BlockingIOError:
        return pending
    except (BrokenPipeError, ConnectionResetError):
        pending = pending[:0]
    if not pending:
        sel.unregister(proc.stdin)
        with contextlib.suppress(OSError):
            proc.stdin.close()
    return pending


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """End the program and anything it started, and close the pipes."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    for pipe in (proc.stdin, proc.stdout, proc.stderr):
        if pipe is not None:
            with contextlib.suppress(OSError):
                pipe.close()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5)


def _stderr_note(err: bytes) -> str:
    """The last line the program wrote to stderr, redacted and cut, for the notice."""
    lines = [line.strip() for line in err.decode("utf-8", errors="replace").splitlines() if line.strip()]
    if not lines:
        return ""
    last = redact(lines[-1])
    if len(last) > NOTICE_STDERR_CHARS:
        last = last[:NOTICE_STDERR_CHARS] + "…"
    return f": {last}"
