"""Integrations: `hook session-end`, `install claude`, `install cron`, `tick`, `status`."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from memcli.cli import hookmain
from memcli.cli.common import Opts, app, emit_json, opts
from memcli.cli.fast import FastOpts
from memcli.integrations import hooks, install, schedule
from memcli.store.model import now, ts_or_none
from memcli.store.store import discover, is_store

console = Console()
hook_app = typer.Typer(no_args_is_help=True, help="Commands that agent hooks call.")
install_app = typer.Typer(no_args_is_help=True,
                          help="Connect memcli to Claude Code and to cron.")
app.add_typer(hook_app, name="hook")
app.add_typer(install_app, name="install")


# ---------------------------------------------------------------- hook


@hook_app.command("session-end", context_settings={"ignore_unknown_options": True,
                                                   "allow_extra_args": True})
def session_end_cmd(ctx: typer.Context) -> None:
    """For an agent's SessionEnd hook: read the hook JSON on stdin (optional), start the
    session_end consolidation and then `tick` in a detached background process, return at
    once. Always exits 0, even for arguments it does not know; problems go to ops/hook.log
    and stderr. With --foreground the pass runs here and the command waits (debugging).

    Example: echo '{"cwd": "/work/project"}' | memcli hook session-end
    """
    o = opts(ctx)
    hookmain.session_end(FastOpts(o.store, o.json, o.quiet, o.wait), list(ctx.args))


@hook_app.command("run-background", hidden=True)
def run_background_cmd(ctx: typer.Context) -> None:
    """Internal: the pass that `hook session-end` starts (session_end consolidation, then
    tick), logging everything to ops/hook.log.

    Example: memcli --store /abs/store hook run-background
    """
    o = opts(ctx)
    root = Path(o.store or os.getcwd())
    if is_store(root):
        hooks.run_pass(root.resolve(), o.wait)


# ---------------------------------------------------------------- install claude


@install_app.command("claude")
def install_claude_cmd(
    ctx: typer.Context,
    project: Annotated[Path | None, typer.Option(
        "--project", help="The project folder (default: .).")] = None,
    user: bool = typer.Option(False, "--user", help="Install for every project (~/.claude)."),
    uninstall: bool = typer.Option(False, "--uninstall", help="Remove what memcli installed."),
) -> None:
    """Install the /memcli and /memory slash commands in .claude/commands/ and merge a
    SessionEnd hook (`memcli hook session-end`) into .claude/settings.json, keeping every
    other setting and hook. Running it twice changes nothing; --uninstall removes only
    memcli's hook and its unedited command files.

    Example: memcli --store ~/agent-memory install claude --project ~/code/webapp
    """
    o = opts(ctx)
    target = install.claude_target(project, user)
    if uninstall:
        report = install.uninstall_claude(target)
    else:
        report = install.install_claude(_install_store(o.store, target), target)
    _render_claude(report, o, uninstall)


def _install_store(explicit: str | None, target: install.ClaudeTarget) -> Path:
    """--store, else $MEMCLI_STORE, else the project folder if it is a store, else ."""
    if not explicit and not os.environ.get("MEMCLI_STORE") and target.project is not None \
            and is_store(target.project):
        return target.project
    return discover(explicit)


def _render_claude(report: install.ClaudeReport, o: Opts, uninstall: bool) -> None:
    for note in report.notes:
        sys.stderr.write(f"note: {note}\n")
    if o.json:
        emit_json(report.as_dict())
        return
    if o.quiet:
        return
    hook = "" if uninstall else f": {report.command}"
    print(f"{report.settings}: SessionEnd hook {report.settings_action}{hook}")
    for path, action in report.files.items():
        print(f"{path}: {action}")
    if not uninstall:
        print("In Claude Code, type /memcli consolidate (or /memcli stats, /memcli consolidate "
              "--dry-run); /memory works too unless Claude Code's built-in /memory takes it.")


# ---------------------------------------------------------------- install cron


@install_app.command("cron")
def install_cron_cmd(
    ctx: typer.Context,
    apply: bool = typer.Option(False, "--apply", help="Add the line to your crontab."),
    uninstall: bool = typer.Option(False, "--uninstall", help="Remove it from your crontab."),
) -> None:
    """Print the weekly crontab line for this store (schedule.weekly in memcli.toml,
    default Sunday 00:00 local time), raw. With --apply, add it to your crontab, keeping every other line;
    applying again replaces memcli's line for this store instead of adding another.

    Example: memcli --store ~/agent-memory install cron --apply
    """
    o = opts(ctx)
    store = o.open_store()
    line = install.cron_line(store.root, store.settings.schedule.weekly)
    action = install.apply_cron(store.root, line, uninstall) if apply or uninstall else None
    if o.json:
        emit_json({"line": line, "action": action})
        return
    if not uninstall:
        sys.stdout.write(line + "\n")  # raw: no rich wrapping or markup, pasteable as is
    if action and not o.quiet:
        sys.stderr.write(f"crontab: memcli's weekly line for this store {action}\n")


# ---------------------------------------------------------------- tick


@app.command("tick")
def tick_cmd(
    ctx: typer.Context,
    dry_run: bool = typer.Option(False, "--dry-run", help="Only say what is due."),
) -> None:
    """Run whatever is due: the weekly pass if its last scheduled time was missed (the
    machine was off), and an index_overflow pass for folders holding more memory files
    than the consolidation.index_overflow setting (100) and more than at their last such
    pass. A second tick right after runs nothing.

    Example: memcli tick --dry-run
    """
    o = opts(ctx)
    result = schedule.run_tick(o.open_store(), o.wait, dry_run)
    if o.json:
        emit_json(result.as_dict())
    elif not o.quiet:
        _render_tick(result)


def _render_tick(result: schedule.TickResult) -> None:
    if result.dry_run:
        due = (["weekly pass"] if result.weekly_due else []) + [
            f"index_overflow for {rel}" for rel in result.overflow_due]
        print("Due: " + ", ".join(due) if due else "Nothing due.")
        return
    if not result.runs:
        print("Nothing due.")
    for run in result.runs:
        where = f" ({', '.join(run.folders)})" if run.folders else ""
        counts = ", ".join(f"{k} {v}" for k, v in run.stats.items() if isinstance(v, int) and v)
        print(f"{run.trigger}{where}: {run.run_id}" + (f" - {counts}" if counts else ""))


# ---------------------------------------------------------------- status


@app.command("status")
def status_cmd(ctx: typer.Context) -> None:
    """When each trigger last ran, when the weekly pass is due next (and whether it is
    overdue), each folder's index size, and the review queue's length.

    Example: memcli status --json
    """
    o = opts(ctx)
    data = schedule.collect_status(o.open_store(), now())
    if o.json:
        emit_json(data)
    elif not o.quiet:
        _render_status(data)


def _local(stamp: str | None) -> str:
    moment = ts_or_none(stamp)
    return moment.astimezone().strftime("%Y-%m-%d %H:%M %Z") if moment else "never"


def _render_status(data: dict[str, Any]) -> None:
    runs = Table(title=f"Store {data['store']}")
    for col in ("trigger", "last run (local time)", "run id"):
        runs.add_column(col)
    for trigger, run in data["runs"].items():
        runs.add_row(trigger, _local(run.get("at")) if run else "never", (run or {}).get("run_id", "-"))
    console.print(runs)
    weekly = data["weekly"]
    state = "[bold red]overdue[/] (memcli tick runs it)" if weekly["overdue"] else "up to date"
    console.print(f"Weekly pass ({weekly['cron']!r}, local time): {state}; "
                  f"next {_local(weekly['next'])}", highlight=False)
    _render_indexes(data)
    queue = data["review_queue"]
    console.print(f"Review queue: {queue['open']} open ({queue['total']} in all)"
                  + (" - see `memcli review list`" if queue["open"] else ""), highlight=False)
    for journal_file in data.get("pending_runs", []):
        console.print(f"[bold red]An interrupted run is waiting to be recovered[/] ({journal_file}): "
                      "the next writing command, or `memcli doctor --fix`, finishes or rolls it back",
                      highlight=False)


def _render_indexes(data: dict[str, Any]) -> None:
    table = Table(title=f"Indexes (overflow: over {data['index_overflow']} files)")
    for col in ("folder", "index entries", "files", "note"):
        table.add_column(col, justify="right" if col in ("index entries", "files") else "left")
    for row in data["indexes"]:
        flag = "overflow due" if row["folder"] in data["overflow_due"] else (
            "over threshold" if row["over_threshold"] else "")
        entries = "-" if row["entries"] is None else str(row["entries"])
        table.add_row(row["folder"], entries, str(row["files"]), flag)
    console.print(table)
