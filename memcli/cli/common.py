"""The typer application, its common options, and the one place errors become exit codes."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Any

import orjson
import typer
from typer.core import TyperGroup

from memcli.errors import MemcliError
from memcli.store.store import Problem, Store

# Common options are accepted before or after the command name (SPEC section 4): they are
# moved in front of the command before click parses, so every command gets them for free.
_VALUE_OPTIONS = ("--store", "--wait")
_FLAG_OPTIONS = ("--json", "--quiet")


def hoist_common_options(args: list[str]) -> list[str]:
    """Move `--store X`, `--wait X`, `--json` and `--quiet` in front of the command."""
    front: list[str] = []
    rest: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            rest += args[i:]
            break
        name = arg.split("=", 1)[0]
        if arg in _FLAG_OPTIONS:
            front.append(arg)
        elif name in _VALUE_OPTIONS and "=" in arg:
            front.append(arg)
        elif arg in _VALUE_OPTIONS and i + 1 < len(args):
            front += [arg, args[i + 1]]
            i += 1
        else:
            rest.append(arg)
        i += 1
    return front + rest


class MemcliGroup(TyperGroup):
    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        return super().parse_args(ctx, hoist_common_options(list(args)))

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except MemcliError as exc:
            fail(ctx, str(exc), exc.exit_code)
        except BrokenPipeError:  # `memcli list | head`: the reader left; nothing to report
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            raise typer.Exit(0) from None
        except OSError as exc:  # permissions, a full disk: the user's to fix, not a traceback
            fail(ctx, os_error_message(exc), 1)


def os_error_message(exc: OSError) -> str:
    """`Permission denied (/path/to/file)`: the reason, then the file when there is one."""
    reason = exc.strerror or str(exc)
    return f"{reason} ({exc.filename})" if exc.filename else reason


def fail(ctx: Any, message: str, code: int) -> None:
    opts = ctx.obj if isinstance(ctx.obj, Opts) else None
    if opts is not None and opts.json:
        sys.stdout.write(orjson.dumps({"error": message}).decode() + "\n")
    else:
        sys.stderr.write(f"Error: {message}\n")
    raise typer.Exit(code)


@dataclass
class Opts:
    store: str | None = None
    json: bool = False
    quiet: bool = False
    wait: float = 10.0

    def open_store(self, check: bool = True) -> Store:
        """The store; `check=False` (doctor only) opens one whose layout is unsafe, to report it."""
        return Store.open(self.store, check=check)


app = typer.Typer(
    cls=MemcliGroup,
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode="markdown",  # reflows docstring paragraphs into the terminal's width
    help="Keep a plain-file memory store for AI agents healthy: merge duplicates, summarise "
    "verbose logs, promote proven procedures, archive stale entries, log and undo every run.",
)


@app.callback()
def common(
    ctx: typer.Context,
    store: str = typer.Option(None, "--store", help="The store folder (else $MEMCLI_STORE, else .)."),
    json_out: bool = typer.Option(False, "--json", help="Machine output: only JSON on stdout."),
    quiet: bool = typer.Option(False, "--quiet", help="Print only what a script needs."),
    wait: float = typer.Option(10.0, "--wait", help="Seconds to wait for the store lock."),
) -> None:
    """memcli: consolidate an AI agents' plain-file memory store, safely and reversibly."""
    ctx.obj = Opts(store, json_out, quiet, wait)


def opts(ctx: typer.Context) -> Opts:
    return ctx.obj if isinstance(ctx.obj, Opts) else Opts()


def emit_json(data: Any) -> None:
    sys.stdout.write(orjson.dumps(data, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS).decode()
                     + "\n")


def warn(problems: list[Problem], quiet: bool = False) -> None:
    """Bad files skipped, on stderr: each names the file and the reason."""
    for problem in problems:
        if quiet and problem.severity != "error":
            continue
        sys.stderr.write(f"{'warning' if problem.severity == 'warning' else 'skipped'}: {problem}\n")


def notes(messages: list[str]) -> None:
    """What memcli did on its own (a recovered run, a fallback), on stderr."""
    for message in messages:
        sys.stderr.write(f"note: {message}\n")
