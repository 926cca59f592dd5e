"""The typer application, its common options, and the one place errors become exit codes.

Nothing here imports rich or the core beyond the errors: `memcli --help` and completion stay
fast, and each command imports what it needs when it runs.
"""

from __future__ import annotations

import errno
import inspect
import os
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import typer
from typer.core import TyperCommand, TyperGroup

try:  # typer >= 0.20 carries its own copy of click: its exceptions are the ones raised
    from typer import _click as click  # type: ignore[attr-defined,unused-ignore]
except ImportError:  # pragma: no cover  (older typer uses click itself)
    import click  # type: ignore[no-redef,unused-ignore]

from memcli.cli.output import degrade_streams, emit_json, os_error_message, start_clock
from memcli.errors import MemcliError

if TYPE_CHECKING:
    from memcli.store.store import Problem, Store

# Common options are accepted before or after the command name (SPEC section 4): they are
# moved in front of the command before click parses, so every command gets them for free.
_VALUE_OPTIONS = ("--store", "--wait")
_FLAG_OPTIONS = ("--json", "--quiet")
COMMON_HELP = (
    ("--store PATH", "The store folder (else $MEMCLI_STORE, else this folder or a parent)."),
    ("--json", "Machine output: only JSON on stdout, errors too ({\"error\": ...})."),
    ("--quiet", "Only what a script needs on stdout (ids); no tables, hints or notes."),
    ("--wait SECONDS", "How long to wait for the store lock (default 10; then exit 75)."),
)


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


def wants_json(args: list[str]) -> bool:
    return "--json" in args[:args.index("--")] if "--" in args else "--json" in args


class MemcliCommand(TyperCommand):
    """A command whose --help also lists the common options, which it accepts too, and
    keeps its examples as written (click would reflow them into one paragraph)."""

    def format_help_text(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        paragraphs = inspect.cleandoc(self.help or "").split("\n\n")
        # click leaves a paragraph alone when it starts with \b: examples are commands to paste
        self.help = "\n\n".join("\b\n" + p if p.startswith("Example") and not p.startswith("\b") else p
                                for p in paragraphs)
        super().format_help_text(ctx, formatter)

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        readable_metavars(self)
        super().format_options(ctx, formatter)
        common_section(formatter)


def common_section(formatter: click.HelpFormatter) -> None:
    with formatter.section("Common options (before or after the command)"):
        formatter.write_dl(list(COMMON_HELP))


def readable_metavars(cmd: click.Command) -> None:
    """Help that reads `--agent AGENT` and `RUN_ID`, not typer's `--agent <str>` and
    `RUN_ID <str>`: an option without a metavar is named after itself; an argument's name
    says enough."""
    for param in cmd.params:
        if param.param_type_name == "argument":
            param.display_type_rich = lambda ctx: None  # type: ignore[attr-defined,method-assign,unused-ignore]
        elif not getattr(param, "is_flag", False) and param.metavar is None:
            param.metavar = (param.name or "value").upper()


class MemcliSubGroup(TyperGroup):
    """`memcli review`, `hook`, `install`: their commands list the common options too."""

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        super().format_options(ctx, formatter)
        common_section(formatter)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return _with_common_help(super().get_command(ctx, cmd_name))


def _with_common_help(cmd: click.Command | None) -> click.Command | None:
    if type(cmd) is TyperCommand:  # typer's own class: give it the common options section
        cmd.__class__ = MemcliCommand
    return cmd


class MemcliGroup(TyperGroup):
    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        return super().parse_args(ctx, hoist_common_options(list(args)))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return _with_common_help(super().get_command(ctx, cmd_name))

    def main(self, args: Any = None, prog_name: str | None = None, complete_var: str | None = None,
             standalone_mode: bool = True, windows_expand_args: bool = True, **extra: Any) -> Any:
        """Click's main, with memcli's exit rules: a usage error is JSON under --json (exit
        2); a reader that leaves early (`| head -1`) is not a failure (exit 0); output that
        the stream cannot encode is replaced, never a traceback."""
        degrade_streams()
        start_clock()
        argv = list(sys.argv[1:] if args is None else args)
        try:
            code = super().main(argv, prog_name, complete_var, standalone_mode=False,
                                windows_expand_args=windows_expand_args, **extra)
            sys.stdout.flush()
        except click.exceptions.NoArgsIsHelpError as exc:  # `memcli review`: its help, not an error
            if wants_json(argv):
                emit_json({"error": "missing command (see --help)"})
                code = 2
            else:
                sys.stdout.write(exc.format_message() + "\n")
                code = 0
        except click.exceptions.ClickException as exc:
            if wants_json(argv):
                emit_json({"error": exc.format_message()})
            else:
                exc.show()
            code = exc.exit_code
        except typer.Abort:
            sys.stderr.write("Aborted.\n")
            code = 1
        except BrokenPipeError:
            code = closed_pipe()
        except OSError as exc:
            if exc.errno != errno.EPIPE:
                raise
            code = closed_pipe()
        except SystemExit as exc:
            # typer's own main answers a broken pipe (in --help, --version) with exit 1,
            # after wrapping the streams so that their last flush stays quiet
            if exc.code != 1 or type(sys.stdout).__name__ != "PacifyFlushWrapper":
                raise
            code = closed_pipe()
        code = code if isinstance(code, int) else 0
        if not standalone_mode:
            return code
        sys.exit(code)

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except MemcliError as exc:
            fail(ctx, str(exc), exc.exit_code)
        except BrokenPipeError:
            raise typer.Exit(closed_pipe()) from None  # before typer's main calls it a failure
        except OSError as exc:  # permissions, a full disk: the user's to fix, not a traceback
            if exc.errno == errno.EPIPE:
                raise typer.Exit(closed_pipe()) from None
            fail(ctx, os_error_message(exc), 1)


def closed_pipe() -> int:
    """The reader of stdout left (`memcli list | head -1`): what was done is done and what
    it read was right, so exit 0; stdout goes to /dev/null so that the interpreter's last
    flush does not fail again."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):  # not a real file (a test's buffer): nothing to redirect
        pass
    return 0


def fail(ctx: Any, message: str, code: int) -> None:
    opts = ctx.obj if isinstance(ctx.obj, Opts) else None
    if opts is not None and opts.json:
        emit_json({"error": message})
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
        from memcli.store.store import Store

        return Store.open(self.store, check=check)

    def hint(self, *words: str) -> str:
        """A next command to paste: this program, this --store, then `words`."""
        from memcli.cli.output import hint

        return hint(self.store, *words)


app = typer.Typer(
    cls=MemcliGroup,
    invoke_without_command=True,
    add_completion=True,
    rich_markup_mode=None,  # click's plain help: no rich import for --help
    pretty_exceptions_enable=False,
    help="Keep a plain-file memory store for AI agents healthy: merge duplicates, summarise "
    "verbose logs, promote proven procedures, archive stale entries, log and undo every run.",
)


def sub_app(help_text: str) -> typer.Typer:
    """A command group (`review`, `hook`, `install`) whose commands list the common options."""
    return typer.Typer(cls=MemcliSubGroup, no_args_is_help=True, help=help_text,
                       rich_markup_mode=None, pretty_exceptions_enable=False)


def _version(value: bool) -> None:
    if not value:
        return
    from memcli.cli.fast import version  # the fast path serves `memcli --version`; the same text

    raise typer.Exit(version())


@app.callback()
def common(
    ctx: typer.Context,
    store: str = typer.Option(None, "--store", metavar="PATH",
                              help="The store folder (else $MEMCLI_STORE, else . or a parent)."),
    json_out: bool = typer.Option(False, "--json", help="Machine output: only JSON on stdout."),
    quiet: bool = typer.Option(False, "--quiet", help="Only what a script needs (ids); no tables or hints."),
    wait: float = typer.Option(10.0, "--wait", metavar="SECONDS", help="Seconds to wait for the store lock."),
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                 help="Print memcli's version and its store format version."),
) -> None:
    """Keep a plain-file memory store for AI agents healthy: merge duplicates, summarise
    verbose logs, promote proven procedures, archive stale entries, log and undo every run.

    Start with: memcli --store PATH init, then memcli --help for each command.
    """
    ctx.obj = Opts(store, json_out, quiet, wait)
    if ctx.invoked_subcommand is None:  # bare `memcli`: the help, and that is not an error
        sys.stdout.write(ctx.get_help() + "\n")
        raise typer.Exit(0)


def opts(ctx: typer.Context) -> Opts:
    obj = ctx.find_root().obj
    return obj if isinstance(obj, Opts) else Opts()


def warn(problems: list[Problem], quiet: bool = False) -> None:
    """Bad files skipped, on stderr: each names the file and the reason."""
    for problem in problems:
        if quiet and problem.severity != "error":
            continue
        sys.stderr.write(f"{'warning' if problem.severity == 'warning' else 'skipped'}: {problem}\n")


def notes(messages: list[str], quiet: bool = False) -> None:
    """What memcli did on its own (a recovered run, a fallback), on stderr (not with --quiet)."""
    if quiet:
        return
    for message in messages:
        sys.stderr.write(f"note: {message}\n")
