"""The fast path: commands that agents run on every session or prompt, served without
typer, rich or numpy (a bare interpreter start is about 20 ms; typer alone adds 70).

`dispatch(argv)` returns an exit code when it served the command, or None to hand the
arguments to the typer application (every command's `--help`, every other command). Common options
are accepted before or after the command name, as everywhere (`memcli.cli.common`).
A route is `(command words) -> "module:function"`; the function takes the parsed common
options and the remaining arguments and returns the exit code (or None to hand the command
to typer after all). The longest matching route wins. Its module is imported only when the
route is taken.
"""

from __future__ import annotations

import importlib

ROUTES: dict[tuple[str, ...], str] = {
    ("hook", "session-end"): "memcli.cli.hookmain:session_end",
    ("hook", "run-background"): "memcli.cli.hookmain:run_background",
    ("hook", "session-start"): "memcli.cli.recallmain:session_start",
    ("hook", "prompt"): "memcli.cli.recallmain:prompt",
    ("hook", "recall-warm"): "memcli.cli.recallmain:recall_warm",
    ("recall",): "memcli.cli.recallmain:recall",
    ("mcp",): "memcli.cli.recallmain:mcp",
    ("hook",): "memcli.cli.hookmain:unknown_hook",  # any other hook: exit 0 (hooks fail open)
    ("tick",): "memcli.cli.tickmain:tick",
    ("list",): "memcli.cli.readmain:list_fast",  # typer's option parsing imports pydantic
    ("show",): "memcli.cli.readmain:show_fast",
    ("hook", "pre-compact"): "memcli.cli.capturemain:pre_compact",
    ("hook", "capture-background"): "memcli.cli.capturemain:capture_background",
    ("merge-driver",): "memcli.cli.syncmain:merge_driver",  # git runs it once a merged file
}
_VALUE_OPTIONS = ("--store", "--wait")
_FLAG_OPTIONS = ("--json", "--quiet")
_HELP = ("--help", "-h")


class FastOpts:
    """The common options (a plain class: `dataclasses` alone costs a hook 8 ms)."""

    __slots__ = ("store", "json", "quiet", "wait", "wait_given")

    def __init__(self, store: str | None = None, json: bool = False, quiet: bool = False,
                 wait: float = 10.0, wait_given: bool = False) -> None:
        self.store = store
        self.json = json
        self.quiet = quiet
        self.wait = wait
        self.wait_given = wait_given


def split_common(argv: list[str]) -> tuple[FastOpts, list[str]] | None:
    """The common options and the rest, or None when an option is malformed (typer then
    gives the usage error)."""
    opts = FastOpts()
    rest: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            rest += argv[i:]
            break
        name, eq, value = arg.partition("=")
        if arg in _FLAG_OPTIONS:
            setattr(opts, arg[2:], True)
        elif name in _VALUE_OPTIONS:
            if not eq:
                if i + 1 >= len(argv):
                    return None
                value = argv[i + 1]
                i += 1
            if name == "--store":
                opts.store = value
            else:
                try:
                    opts.wait = float(value)
                except ValueError:
                    return None
                opts.wait_given = True
        else:
            rest.append(arg)
        i += 1
    return opts, rest


def version() -> int:
    """`memcli --version`: memcli's version and the store format it reads and writes."""
    import sys
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    from memcli.store.index import INDEX_VERSION

    try:
        mine = installed("memcli")
    except PackageNotFoundError:  # run from a source tree that was never installed
        mine = "unknown"
    sys.stdout.write(f"memcli {mine} (store format {INDEX_VERSION})\n")
    return 0


def dispatch(argv: list[str]) -> int | None:
    parsed = split_common(argv)
    if parsed is None:
        return None
    opts, rest = parsed
    if rest in ([], ["--help"]):  # the top-level help (a bare `memcli` too): typer's text
        from memcli.cli.tophelp import serve

        return serve()
    if any(arg in _HELP for arg in argv):
        return None
    if rest == ["--version"]:
        return version()
    for words, target in sorted(ROUTES.items(), key=lambda route: -len(route[0])):  # longest first
        if tuple(rest[:len(words)]) == words:
            module, _, func = target.partition(":")
            handler = getattr(importlib.import_module(module), func)
            code = handler(opts, rest[len(words):])
            return None if code is None else int(code)  # None: not served here after all
    return None
