"""`python -m memcli ARGS` in its own process, without paying for the interpreter each time.

Most tests that need a real process (a crash is `os._exit`, a segfault is a signal, a hang is
a timeout, a lock belongs to a process) do not need a fresh interpreter: starting one and
importing typer, numpy and rapidfuzz costs about half a second of CPU, and the suite starts
hundreds. A zygote imports memcli once and forks one child per command; the child takes the
command's environment, working folder and standard streams, and runs `memcli/__main__.py` as
`python -m memcli` would. Each child starts from the zygote's state, which has only imported
modules and never run a command. The variables an interpreter reads once at start-up
(`PYTHON*`, `LANG`, `LC_*`) get a zygote of their own, started with them; `TZ` is set in the
child (`time.tzset()`, as a fresh interpreter's start-up does: memcli reads the local zone at
call time, never at import), so a zone of its own costs no zygote (about a second of CPU).

A call whose environment asks for `PYTHONPROFILEIMPORTTIME` is about what a command imports,
which a zygote has imported already: `run` starts a real interpreter for it. Tests of the
entry point on PATH and of a shell pipeline keep `subprocess`.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ZYGOTE = r"""
import json, os, runpy, signal, sys, time
import memcli, memcli.cli, memcli.cli.fast
memcli.cli.load_app()  # typer, rich and every command module
import frontmatter, numpy, rapidfuzz.process, filelock, orjson, tantivy  # imported lazily by commands
from memcli.consolidate import engine, guards, similar, summary, undo
from memcli.recall import briefing, index, search, uses
from memcli.store import doctor, fsops
from memcli.integrations import context, hooks
import importlib, pkgutil, typer._adapters  # typer's coercion brings pydantic on a command's first parse
for found in pkgutil.walk_packages(memcli.__path__, "memcli."):  # every module, so no child imports one
    if not found.name.endswith("__main__"):
        importlib.import_module(found.name)
# what commands import on first use: rich's rendering, the schedule's date parsing, metadata
for name in ("rich.console", "rich.table", "rich.markup", "rich.text", "rich.align", "rich.padding",
             "rich.pager", "rich.highlighter", "rich.box", "rich.themes", "rich._emoji_codes",
             "rich._unicode_data", "croniter", "dateutil.tz", "importlib.metadata", "importlib.resources",
             "email.utils", "csv", "argparse", "typer._click._textwrap", "typer._click.decorators",
             "pydantic.plugin._loader"):
    try:
        importlib.import_module(name)
    except ImportError:  # another version of a library: its child imports what it needs
        pass
# the typer app's click command, built once (a real process builds it once too, ~30 ms)
import typer.main
APP, BUILD = memcli.cli.load_app(), typer.main.get_command
COMMAND = BUILD(APP)
typer.main.get_command = lambda app: COMMAND if app is APP else BUILD(app)
MAIN = os.path.join(os.path.dirname(memcli.__file__), "__main__.py")
import gc
gc.freeze()  # what is imported stays out of every child's collections (and its pages shared)
channel = os.fdopen(os.dup(1), "w")
for line in sys.stdin:
    req = json.loads(line)
    sys.stdout.flush(); sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        os.close(channel.fileno())
        os.chdir(req["cwd"])
        os.environ.clear()
        os.environ.update(req["env"])
        time.tzset()  # the command's TZ, as an interpreter started with it reads it
        stdin = os.open(req["stdin"], os.O_RDONLY)
        if req["closed_pipe"]:  # a reader that left before the first byte: every write fails
            gone, out = os.pipe()
            os.close(gone)
        else:
            out = os.open(req["out"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        err = os.open(req["err"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(stdin, 0); os.dup2(out, 1); os.dup2(err, 2)
        for fd in (stdin, out, err):
            os.close(fd)
        os.setsid()  # its own group, as a subprocess would be: a timeout kills the lot
        sys.argv = [MAIN, *req["argv"]]
        code = 0
        try:
            runpy.run_path(MAIN, run_name="__main__")
        except SystemExit as exc:
            if exc.code is None or isinstance(exc.code, int):
                code = exc.code or 0
            else:  # sys.exit("message"), as the interpreter reports it
                print(exc.code, file=sys.stderr)
                code = 1
        except BaseException:
            import traceback
            traceback.print_exc()
            code = 1
        try:
            sys.stdout.flush()
        except BrokenPipeError:
            pass
        sys.stderr.flush()
        os._exit(code)
    deadline = time.monotonic() + req["timeout"]
    status = None
    cpu = 0.0
    delay = 0.0005
    while True:
        done, raw, usage = os.wait4(pid, os.WNOHANG)
        if done:
            status = os.waitstatus_to_exitcode(raw)
            cpu = usage.ru_utime + usage.ru_stime
            break
        if time.monotonic() > deadline:
            try:
                os.killpg(pid, 9)
            except ProcessLookupError:
                pass
            os.waitpid(pid, 0)
            break
        time.sleep(delay)
        delay = min(delay * 2, 0.01)
    channel.write(json.dumps({"status": status, "cpu": cpu}) + "\n")
    channel.flush()
"""

# read once, when an interpreter starts (TZ is read again by each child: `time.tzset()`)
_STARTING = ("PYTHON", "LANG", "LC_")
_Key = tuple[tuple[str, str], ...]
_idle: dict[_Key, list[subprocess.Popen[str]]] = {}  # zygotes free for the next command
_every: list[subprocess.Popen[str]] = []
children_cpu = [0.0]  # CPU seconds of every forked command so far (for measuring the suite)
_lock = threading.Lock()


@atexit.register
def _close() -> None:
    """End the zygotes with the test process (their CPU time then counts as its own)."""
    for zygote in _every:
        if zygote.stdin is not None:
            zygote.stdin.close()
    for zygote in _every:
        try:
            zygote.wait(timeout=10)
        except subprocess.TimeoutExpired:
            zygote.kill()


@contextlib.contextmanager
def _zygote(env: dict[str, str]) -> Iterator[subprocess.Popen[str]]:
    """A free zygote for an interpreter started with `env`'s start-up variables, for one
    command (threads running commands at once each get their own)."""
    key = tuple(sorted((k, v) for k, v in env.items() if k.startswith(_STARTING)))
    with _lock:
        free = _idle.setdefault(key, [])
        zygote = free.pop() if free else None
    if zygote is None or zygote.poll() is not None:
        zygote = subprocess.Popen([sys.executable, "-c", ZYGOTE], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True,
                                  env={k: v for k, v in env.items() if k != "MEMCLI_CRASH_AT"})
        with _lock:
            _every.append(zygote)
    yield zygote  # an error half-way leaves the protocol out of step: that zygote is not reused
    with _lock:
        _idle[key].append(zygote)


def run(argv: list[str], *, env: dict[str, str] | None = None, cwd: str | Path | None = None,
        input: str | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """Like `subprocess.run([sys.executable, "-m", "memcli", *argv], capture_output=True,
    text=True, ...)`: the same exit code (negative for a signal), stdout and stderr; a hang
    raises `subprocess.TimeoutExpired` once the child is killed."""
    env = dict(os.environ if env is None else env)
    if "PYTHONPROFILEIMPORTTIME" in env:
        return subprocess.run([sys.executable, "-m", "memcli", *argv], capture_output=True, text=True,
                              env=env, cwd=cwd, input=input, timeout=timeout)
    out, err, status = _forked(argv, env, cwd, (input or "").encode(), timeout, closed_pipe=False)
    return _completed(argv, status, out.decode(errors="replace"), err.decode(errors="replace"), timeout)


def run_bytes(argv: list[str], *, env: dict[str, str] | None = None, closed_pipe: bool = False,
              timeout: float = 60) -> subprocess.CompletedProcess[bytes]:
    """`run` with stdout and stderr as bytes (as a stream's encoding wrote them); with
    `closed_pipe`, stdout is a pipe whose reader is already gone."""
    env = dict(os.environ if env is None else env)
    out, err, status = _forked(argv, env, None, b"", timeout, closed_pipe=closed_pipe)
    return _completed(argv, status, out, err, timeout)


def _completed(argv: list[str], status: int | None, out: Any, err: Any, timeout: float) -> Any:
    args = [sys.executable, "-m", "memcli", *argv]
    if status is None:
        raise subprocess.TimeoutExpired(args, timeout, output=out, stderr=err)
    return subprocess.CompletedProcess(args, status, out, err)


def _forked(argv: list[str], env: dict[str, str], cwd: str | Path | None, stdin: bytes, timeout: float,
            closed_pipe: bool) -> tuple[bytes, bytes, int | None]:
    with tempfile.TemporaryDirectory(prefix="memcli-forked-") as scratch:
        files = {name: os.path.join(scratch, name) for name in ("in", "out", "err")}
        Path(files["in"]).write_bytes(stdin)
        Path(files["out"]).write_bytes(b"")
        request = {"argv": argv, "env": env, "cwd": str(cwd or os.getcwd()), "stdin": files["in"],
                   "out": files["out"], "err": files["err"], "timeout": timeout, "closed_pipe": closed_pipe}
        with _zygote(env) as zygote:
            assert zygote.stdin is not None and zygote.stdout is not None
            zygote.stdin.write(json.dumps(request) + "\n")
            zygote.stdin.flush()
            reply = zygote.stdout.readline()
        if not reply:
            raise RuntimeError("the test zygote died")
        answer = json.loads(reply)
        children_cpu[0] += answer["cpu"]
        return Path(files["out"]).read_bytes(), Path(files["err"]).read_bytes(), answer["status"]
