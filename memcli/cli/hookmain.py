"""`memcli hook ...` as the fast path serves it (no typer): read flags by hand, call the
core, render. A hook never fails the agent: whatever happens, the exit code is 0."""

from __future__ import annotations

import os
import sys

from memcli.integrations import hooks

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import IO

    from memcli.cli.fast import FastOpts


def session_end(opts: FastOpts, args: list[str]) -> int:
    """For an agent's SessionEnd hook (see `memcli hook session-end --help`)."""
    render(start_hook(hooks.session_end, opts, args), opts)
    return 0


def start_hook(start: Callable[..., hooks.HookReport], opts: FastOpts, args: list[str]) -> hooks.HookReport:
    """Run a hook that starts a background pass: `start(store, stdin, foreground, wait,
    extra)`. Flags are read by hand (a parse error would exit 2, and a hook must always exit
    0), and any failure becomes a report, never an exception."""
    foreground = "--foreground" in args
    extra = [arg for arg in args if arg != "--foreground"]
    wait = opts.wait if foreground else max(opts.wait, hooks.BACKGROUND_WAIT_S)
    try:
        return start(opts.store, sys.stdin, foreground, wait, extra)
    except Exception as exc:  # the agent must never see the hook fail: report, exit 0
        return hooks.HookReport(None, False, ok=False, notes=[f"hook failed: {exc!r}"])


def run_background(opts: FastOpts, args: list[str]) -> int:
    """Internal: the pass `hook session-end` starts, served without typer (it runs after
    every session, so its start-up is worth keeping small too)."""
    root = opts.store or os.getcwd()
    if hooks.is_store_dir(root):
        capture = None
        if args:  # the session to capture first (`--transcript`, `--session-id`, `--reason`)
            from memcli.integrations.capture_hook import parse_field_args

            fields, rest = parse_field_args(args)
            capture = fields if fields.get("transcript_path") else None
            if rest:
                hooks.log(root, f"run-background: ignored unknown arguments: {hooks.clean(' '.join(rest))}",
                          "warn")
        hooks.run_pass(os.path.realpath(root), opts.wait, capture)
    return 0


def unknown_hook(opts: FastOpts, args: list[str]) -> int | None:
    """`memcli hook NAME` for a NAME this memcli does not know (settings written by a newer
    memcli, a typo): exit 0 with a note, never the usage error (exit 2) that would make
    Claude Code block a prompt. Options and `memcli hook` alone go to typer (its help)."""
    if not args or args[0].startswith("-"):
        return None
    name = hooks.clean(args[0], 60)
    note = f"{name!r} is not a hook this memcli knows (see `memcli hook --help`); ignored it, exit 0"
    found, _, _ = hooks.find_store_dir(opts.store, None)
    if found is not None:
        hooks.log(found, f"hook {name}: {note}", "warn")
    say(sys.stderr, f"memcli hook: {note}\n")
    return 0


def render(report: hooks.HookReport, opts: FastOpts) -> None:
    for note in report.notes:
        say(sys.stderr, f"memcli hook: {note}\n")
    if opts.json:
        import json

        say(sys.stdout, json.dumps(report.as_dict(), indent=2) + "\n")
    elif not opts.quiet and report.started:
        where = "in this process" if report.foreground else f"in the background (pid {report.pid})"
        say(sys.stderr, f"memcli hook: session_end pass {'ran' if report.foreground else 'started'} "
                        f"{where} for {report.store}; log: ops/{hooks.LOG_NAME}\n")


def say(stream: IO[str], text: str) -> None:
    """Write, tolerating a reader that already went away (the hook's caller may have
    given up on it): a broken pipe must not turn exit 0 into a traceback."""
    try:
        stream.write(text)
        stream.flush()
    except (OSError, ValueError):
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), stream.fileno())
        except (OSError, ValueError):
            pass
