"""`memcli recall` and the context hooks as the fast path serves them (no typer, rich or
numpy: agents run them on every prompt). The typer commands of the same names call these
too, so `--help` lists them."""

from __future__ import annotations

import sys

from memcli.cli.fast import FastOpts
from memcli.errors import MemcliError

TYPE_CHECKING = False  # argparse, typing and orjson are not on a hook's path
if TYPE_CHECKING:
    from typing import Any


def recall(opts: FastOpts, args: list[str]) -> int:
    """`memcli recall QUERY [--agent ID] [--limit K] [--session ID]` (see `memcli recall --help`)."""
    import argparse

    class Usage(Exception):
        pass

    class Parser(argparse.ArgumentParser):
        def error(self, message: str) -> Any:  # a usage error: exit 2, said once
            raise Usage(message)

    parser = Parser(prog="memcli recall", add_help=False)
    parser.add_argument("query", nargs="*")
    parser.add_argument("--agent")
    parser.add_argument("--limit", type=int)
    parser.add_argument("--session")
    try:
        ns = parser.parse_args(args)
    except Usage as exc:
        sys.stderr.write(f"Usage: memcli recall QUERY [--agent ID] [--limit K] [--session ID] [--json]\n"
                         f"Error: {exc}\n")
        return 2
    return run_recall(opts, " ".join(ns.query), ns.agent, ns.limit, ns.session)


def run_recall(opts: FastOpts, query: str, agent: str | None, limit: int | None, session: str | None) -> int:
    import json
    from pathlib import Path

    from memcli.recall import search, uses
    from memcli.recall.place import Place, discover

    try:
        place = Place.open(discover(opts.store))
        problems: list[Any] = []
        wanted = limit if limit is not None else place.recall["limit"]
        results = search.recall(place, query, agent, wanted, problems)
        uses.record(Path(place.root), [r.id for r in results], session, uses.now())
    except MemcliError as exc:
        return _fail(opts, str(exc), exc.exit_code)
    except OSError as exc:
        return _fail(opts, f"{exc.strerror or exc} ({exc.filename or ''})".strip(" ()"), 1)
    for problem in problems:
        if not (opts.quiet and problem.severity != "error"):
            sys.stderr.write(f"{'warning' if problem.severity == 'warning' else 'skipped'}: {problem}\n")
    if opts.json:
        sys.stdout.write(json.dumps({"query": query, "results": [r.as_dict() for r in results]},
                                    indent=2, ensure_ascii=False) + "\n")
    elif not results:
        if not opts.quiet:
            sys.stderr.write("No memory matches; try other words, or drop --agent to search every folder.\n")
    else:
        for n, r in enumerate(results, 1):
            where = r.scope if r.scope == "global" else f"{r.scope}/{r.scope_id}"
            kind = f"{r.type}/{r.subtype}" if r.subtype else r.type
            sys.stdout.write(f"{n}. {r.id}  ({where}, {kind}, score {r.score:.2f})\n   {r.summary}\n")
    return 0


def mcp(opts: FastOpts, args: list[str]) -> int | None:
    """`memcli mcp`: the MCP server on stdio (memcli.integrations.mcp_server). Served here
    so that it answers its first requests before typer would even be imported."""
    if args:
        return None  # typer says what is wrong with them
    from pathlib import Path

    from memcli.integrations import mcp_server
    from memcli.recall.place import discover

    try:
        root = discover(opts.store)
    except MemcliError as exc:
        return _fail(opts, str(exc), exc.exit_code)
    try:
        mcp_server.serve(Path(root), opts.wait)
    except ImportError as exc:  # a broken install: say what is missing
        return _fail(opts, f"the MCP server needs the `mcp` package ({exc}); reinstall memcli", 1)
    except KeyboardInterrupt:
        return 130
    return 0


def _fail(opts: FastOpts, message: str, code: int) -> int:
    if opts.json:
        import json

        sys.stdout.write(json.dumps({"error": message}) + "\n")
    else:
        sys.stderr.write(f"Error: {message}\n")
    return code


def _hook_agent(args: list[str]) -> str | None:
    """`--agent ID` or `--agent=ID`, read by hand: a hook never exits on its arguments."""
    for n, arg in enumerate(args):
        if arg == "--agent" and n + 1 < len(args):
            return args[n + 1]
        if arg.startswith("--agent="):
            return arg.split("=", 1)[1]
    return None


def session_start(opts: FastOpts, args: list[str]) -> int:
    """Claude Code's SessionStart hook (SPEC 11); always exits 0."""
    return _hook("SessionStart", opts, args)


def prompt(opts: FastOpts, args: list[str]) -> int:
    """Claude Code's UserPromptSubmit hook (SPEC 11); always exits 0."""
    return _hook("UserPromptSubmit", opts, args)


def _hook(event: str, opts: FastOpts, args: list[str]) -> int:
    try:
        from memcli.integrations import context

        context.run_hook(event, opts.store, sys.stdin, _hook_agent(args), sys.stdout)
    except BaseException:  # noqa: BLE001 - a hook never fails the session
        pass
    return 0


def recall_warm(opts: FastOpts, args: list[str]) -> int:
    """Internal: build or sync the search index (what an over-budget hook starts)."""
    from pathlib import Path

    from memcli.store.store import is_store

    try:
        if opts.store and is_store(Path(opts.store)):
            from memcli.integrations import context

            context.warm(Path(opts.store).resolve())
    except Exception:  # noqa: BLE001 - nobody is waiting for this process
        pass
    return 0
