"""`memcli tick` as the fast path serves it (no typer, rich or numpy): systemd and launchd
timers run it every 15 minutes, and most of those ticks find nothing due, so its start-up is
most of what they cost. The typer command (`memcli tick`, for `--help`) renders through the
same functions. The engine is imported only when a pass is due."""

from __future__ import annotations

import sys

from memcli.cli.fast import FastOpts
from memcli.errors import MemcliError
from memcli.integrations import schedule


def tick(opts: FastOpts, args: list[str]) -> int:
    """Run whatever is due (see `memcli tick --help`)."""
    if any(arg != "--dry-run" for arg in args):
        return _typer()  # an unknown option: the typer application says what is wrong (exit 2)
    from memcli.store.store import Store

    try:
        result = schedule.run_tick(Store.open(opts.store), opts.wait, "--dry-run" in args)
    except MemcliError as exc:
        return _fail(opts, str(exc), exc.exit_code)
    except OSError as exc:  # permissions, a full disk: the user's to fix, not a traceback
        return _fail(opts, f"{exc.strerror or exc} ({exc.filename or ''})".strip(" ()"), 1)
    render(result, opts.json, opts.quiet)
    return 0


def render(result: schedule.TickResult, json: bool, quiet: bool) -> None:
    if json:
        import orjson

        sys.stdout.write(orjson.dumps(result.as_dict(), option=orjson.OPT_INDENT_2).decode() + "\n")
    elif not quiet:
        sys.stdout.write("".join(f"{line}\n" for line in lines(result)))


def lines(result: schedule.TickResult) -> list[str]:
    if result.dry_run:
        due = (["weekly pass"] if result.weekly_due else []) + (
            ["daily light pass"] if result.daily_due else []) + [
            f"index_overflow for {rel}" for rel in result.overflow_due]
        return ["Due: " + ", ".join(due) if due else "Nothing due."]
    if not result.runs:
        return ["Nothing due."]
    out = []
    for run in result.runs:
        where = f" ({', '.join(run.folders)})" if run.folders else ""
        counts = ", ".join(f"{k} {v}" for k, v in run.stats.items() if isinstance(v, int) and v)
        out.append(f"{run.trigger}{where}: {run.run_id}" + (f" - {counts}" if counts else ""))
    if result.sync is not None:
        shared = result.sync
        pushed = f"pushed to {shared.get('remote')}" if shared.get("pushed") else "not pushed"
        out.append(f"sync: {shared['error']}" if "error" in shared else
                   f"sync: {shared['commits']} commit(s), {pushed}"
                   + ("" if shared["ok"] else "; doctor: " + "; ".join(shared["problems"])))
    return out


def _fail(opts: FastOpts, message: str, code: int) -> int:
    """As `memcli.cli.common.fail` does for typer commands."""
    if opts.json:
        import orjson

        sys.stdout.write(orjson.dumps({"error": message}).decode() + "\n")
    else:
        sys.stderr.write(f"Error: {message}\n")
    return code


def _typer() -> int:
    from memcli.cli import load_app

    try:
        load_app()(sys.argv[1:], prog_name="memcli")
    except SystemExit as done:
        return done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
    return 0
