"""`memcli hook pre-compact` and `memcli hook capture-background` as the fast path serves them
(no typer): flags read by hand, the core called, the report rendered. Exit code 0 always."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from memcli.cli.fast import FastOpts
from memcli.cli.hookmain import say, start_hook
from memcli.integrations import capture_hook, hooks


def pre_compact(opts: FastOpts, args: list[str]) -> int:
    """For Claude Code's PreCompact hook (see `memcli hook pre-compact --help`)."""
    report = start_hook(capture_hook.pre_compact, opts, args)
    for note in report.notes:
        say(sys.stderr, f"memcli hook: {note}\n")
    if opts.json:
        import orjson

        say(sys.stdout, orjson.dumps(report.as_dict(), option=orjson.OPT_INDENT_2).decode() + "\n")
    elif not opts.quiet and report.started:
        where = "in this process" if report.foreground else f"in the background (pid {report.pid})"
        say(sys.stderr, f"memcli hook: capture {'ran' if report.foreground else 'started'} {where} "
                        f"for {report.store}; log: ops/{hooks.LOG_NAME}\n")
    return 0


def capture_background(opts: FastOpts, args: list[str]) -> int:
    """Internal: the capture `hook pre-compact` starts; everything goes to ops/hook.log."""
    fields, rest = capture_hook.parse_field_args(args)
    root = Path(opts.store or os.getcwd())
    try:
        from memcli.store.store import is_store

        if is_store(root):
            if rest:
                unknown = hooks.clean(" ".join(rest))
                hooks.log(root.resolve(), f"pre-compact: ignored unknown arguments: {unknown}")
            capture_hook.capture_background(root.resolve(), fields, opts.wait, "pre-compact")
    except Exception:  # nobody is watching and capture_from_hook already logs its own failures
        pass
    return 0
