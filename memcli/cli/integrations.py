"""Integrations: `hook session-end`, `install claude|cron|systemd|launchd`, `tick`, `status`."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from memcli.cli.common import Opts, app, emit_json, opts, sub_app
from memcli.cli.fast import FastOpts

if TYPE_CHECKING:
    from memcli.integrations import claude

hook_app = sub_app("Commands that agent hooks call.")
install_app = sub_app("Connect memcli to Claude Code, cron, systemd and launchd.")
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
    from memcli.cli import hookmain

    o = opts(ctx)
    hookmain.session_end(FastOpts(o.store, o.json, o.quiet, o.wait), list(ctx.args))


@hook_app.command("run-background", hidden=True)
def run_background_cmd(
    ctx: typer.Context,
    transcript: str = typer.Option(None, "--transcript", help="Capture this transcript first."),
    session_id: str = typer.Option(None, "--session-id"),
    reason: str = typer.Option(None, "--reason"),
) -> None:
    """Internal: the pass that `hook session-end` starts (capture of the transcript it names,
    session_end consolidation, then tick), logging everything to ops/hook.log.

    Example: memcli --store /abs/store hook run-background --transcript /abs/session.jsonl
    """
    from memcli.cli import hookmain
    from memcli.integrations import hooks as hook_core

    o = opts(ctx)
    hookmain.run_background(FastOpts(o.store, o.json, o.quiet, o.wait),
                            hook_core.capture_args({"transcript_path": transcript, "session_id": session_id,
                                                "reason": reason}))


# ---------------------------------------------------------------- install claude


@install_app.command("claude")
def install_claude_cmd(
    ctx: typer.Context,
    project: Annotated[Path | None, typer.Option(
        "--project", help="The project folder (default: .).")] = None,
    user: bool = typer.Option(False, "--user", help="Install for every project (~/.claude)."),
    memory_command: bool = typer.Option(
        False, "--memory-command",
        help="Also install /memory. It hides Claude Code's built-in /memory (CLAUDE.md files)."),
    uninstall: bool = typer.Option(False, "--uninstall", help="Remove exactly what memcli installed."),
) -> None:
    """Connect this store to Claude Code: the SessionStart, UserPromptSubmit and SessionEnd
    hooks (each with a timeout), the `memcli mcp` server with its tools allowed, and the
    /memcli command. Everything calls this memcli by its absolute path. A project install
    keeps machine paths in .claude/settings.local.json (not committed) and registers the
    server in .mcp.json; --user writes ~/.claude/settings.json and ~/.claude.json. Every
    other setting is kept; running it twice changes nothing; --uninstall removes exactly
    what memcli added.

    Example: memcli --store ~/agent-memory install claude --project ~/code/webapp
    """
    from memcli.integrations import claude

    o = opts(ctx)
    target = claude.claude_target(project, user)
    if uninstall:
        report = claude.uninstall_claude(target)
    else:
        report = claude.install_claude(_install_store(o.store, target), target, memory_command)
    _render_claude(report, o, uninstall)


def _install_store(explicit: str | None, target: claude.ClaudeTarget) -> Path:
    """--store, else $MEMCLI_STORE, else the project folder if it is a store, else the
    store around the current folder."""
    from memcli.store.store import discover, is_store

    if not explicit and not os.environ.get("MEMCLI_STORE") and target.project is not None \
            and is_store(target.project):
        return target.project
    return discover(explicit)


def _render_files(report: Any, o: Opts, warnings: Sequence[str] = ()) -> bool:
    """Notes and warnings on stderr, then the report as JSON or the files it touched; True
    when the caller has more to print (not --json, not --quiet)."""
    for note in report.notes:
        sys.stderr.write(f"note: {note}\n")
    for warning in warnings:
        sys.stderr.write(f"warning: {warning}\n")
    if o.json:
        emit_json(report.as_dict())
        return False
    if o.quiet:
        return False
    for path, action in report.files.items():
        print(f"{path}: {action}")
    return True


def _render_claude(report: claude.ClaudeReport, o: Opts, uninstall: bool) -> None:
    if not _render_files(report, o, report.warnings):
        return
    if uninstall:
        print("memcli's hooks, MCP server and commands are gone from Claude Code "
              f"({'user settings' if report.target == 'user' else report.target}).")
        return
    for event, command in report.hooks.items():
        print(f"hook {event}: {command}")
    print("In Claude Code: /memcli (status), /memcli consolidate --dry-run, /memcli stats, "
          "/memcli review list. Check the hooks with: memcli status")


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
    from memcli.integrations import install

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


# ---------------------------------------------------------------- install systemd / launchd


@install_app.command("systemd")
def install_systemd_cmd(
    ctx: typer.Context,
    apply: bool = typer.Option(False, "--apply", help="Also run systemctl: reload, enable and start."),
    uninstall: bool = typer.Option(False, "--uninstall", help="Stop, disable and remove memcli's units."),
) -> None:
    """Write a systemd user timer and service (~/.config/systemd/user/, or under
    $XDG_CONFIG_HOME) that run `memcli tick` for this store every 15 minutes; tick runs the
    weekly and daily passes when due. Persistent=true: a run missed while the machine was off
    happens at the next boot. A file there that memcli did not write is never overwritten;
    installing again changes nothing; --uninstall removes only memcli's files.

    Example: memcli --store ~/agent-memory install systemd --apply
    """
    from memcli.integrations import timers

    o = opts(ctx)
    root = o.open_store().root
    report = timers.uninstall_systemd(root) if uninstall else timers.install_systemd(root, apply)
    _render_timer(report, o)


@install_app.command("launchd")
def install_launchd_cmd(
    ctx: typer.Context,
    apply: bool = typer.Option(False, "--apply", help="Also load it with launchctl (bootstrap)."),
    uninstall: bool = typer.Option(False, "--uninstall", help="Unload and remove memcli's agent."),
) -> None:
    """Write a launchd user agent (~/Library/LaunchAgents/) that runs `memcli tick` for this
    store at log-in and every 15 minutes (once on wake for times missed asleep); tick runs
    the weekly and daily passes when due. A file there that memcli did not write is never
    overwritten; installing again changes nothing; --uninstall removes only memcli's file.

    Example: memcli --store ~/agent-memory install launchd --apply
    """
    from memcli.integrations import timers

    o = opts(ctx)
    root = o.open_store().root
    report = timers.uninstall_launchd(root) if uninstall else timers.install_launchd(root, apply)
    _render_timer(report, o)


def _render_timer(report: Any, o: Opts) -> None:
    if not _render_files(report, o):
        return
    for command in report.ran:
        print(f"ran: {command}")
    if report.todo:
        print("To start it (or run this again with --apply):")
        for command in report.todo:
            print(f"  {command}")
    if report.check:
        print("Check that it works:")
        for command in report.check:
            print(f"  {command}")


# ---------------------------------------------------------------- tick


@app.command("tick")
def tick_cmd(
    ctx: typer.Context,
    dry_run: bool = typer.Option(False, "--dry-run", help="Only say what is due."),
) -> None:
    """Run whatever is due: the weekly pass if its last scheduled time was missed (the
    machine was off), else a daily light pass if one of its times was missed (schedule.daily;
    once however many were missed), and an index_overflow pass for folders holding more memory files
    than the consolidation.index_overflow setting (100) and more than at their last such
    pass. A second tick right after runs nothing.

    Example: memcli tick --dry-run
    """
    from memcli.cli import tickmain  # the fast path serves `memcli tick`; this is its --help twin
    from memcli.integrations import schedule

    o = opts(ctx)
    tickmain.render(schedule.run_tick(o.open_store(), o.wait, dry_run), o.json, o.quiet)


# ---------------------------------------------------------------- status


@app.command("status")
def status_cmd(ctx: typer.Context) -> None:
    """When each trigger last ran, when the weekly pass and the daily light passes are due
    next (and whether one is overdue: a scheduled time missed since the last pass; a new
    store's first pass is "not run yet"), each folder's index size, the review queue's
    length, and the health of what runs unattended: the last hook start and its result, the
    last error in ops/hook.log, the last weekly (cron) run and what ops/cron.log says.

    Example: memcli status --json
    """
    from memcli.integrations import health, schedule
    from memcli.store import opsfiles
    from memcli.store.model import now

    o = opts(ctx)
    store = o.open_store()
    data = schedule.collect_status(store, now())
    data["health"] = health.collect(store.root, opsfiles.read_state(store.root))
    if o.json:
        emit_json(data)
    elif not o.quiet:
        _render_status(data, o)


def _local(stamp: str | None) -> str:
    from memcli.store.model import ts_or_none

    moment = ts_or_none(stamp)
    return moment.astimezone().strftime("%Y-%m-%d %H:%M %Z") if moment else "never"


def _pass_state(data: dict[str, Any], o: Opts) -> str:
    if data.get("overdue"):
        return f"overdue ({o.hint('tick')} runs it)"
    if data.get("never_run"):
        return f"not run yet ({o.hint('tick')} runs the first one)"
    return "up to date"


def _render_status(data: dict[str, Any], o: Opts) -> None:
    """Plain lines wrapped to the terminal, never a cut id (log text is shown as it is)."""
    from memcli.cli.output import width
    from memcli.cli.report import wrap

    cols = width()
    out = [f"Store: {data['store']}"]  # one line however long: a path to copy
    out.append("Last runs (local time):")
    for trigger, run in data["runs"].items():
        out += wrap(f"{trigger:<15} {_local(run.get('at')) if run else 'never'}"
                    + (f"  {run['run_id']}" if run and run.get("run_id") else ""), cols, "  ")
    weekly = data["weekly"]
    out += wrap(f"Weekly pass ({weekly['cron']!r}, local time): {_pass_state(weekly, o)}; "
                f"next {_local(weekly['next'])}", cols)
    daily = data["daily"]
    if not daily["cron"]:
        out.append("Daily light passes: none ([schedule] daily = [])")
    else:
        crons = ", ".join(repr(c) for c in daily["cron"])
        out += wrap(f"Daily light passes ({crons}, local time): {_pass_state(daily, o)}; "
                    f"next {_local(daily['next'])}", cols)
    out += _indexes_lines(data, cols)
    queue = data["review_queue"]
    out += wrap(f"Review queue: {queue['open']} open ({queue['total']} in all)"
                + (f" - see {o.hint('review', 'list')}" if queue["open"] else ""), cols)
    for journal_file in data.get("pending_runs", []):
        out += wrap(f"An interrupted run is waiting to be recovered ({journal_file}): the next writing "
                    f"command, or {o.hint('doctor', '--fix')}, finishes or rolls it back", cols)
    out += _health_lines(data["health"], cols)
    sys.stdout.write("\n".join(out) + "\n")


def _health_lines(data: dict[str, Any], cols: int) -> list[str]:
    """Lines as they are, not wrapped: they quote ops/hook.log and ops/cron.log."""
    hooks = data["hooks"]
    start = hooks["last_start"]
    from memcli.cli.report import wrap

    out = (wrap("Hooks: no hook has run yet (ops/hook.log is empty or missing)", cols) if start is None else
           [f"Hooks: last start {_local(start['at'])} ({start['event']}): {hooks['result']['message']}"])
    error = hooks["last_error"]
    line = f"Last hook error: {_local(error['at'])}: {error['message']}" if error else "Last hook error: none"
    out.append(line + (f" ({hooks['warnings']} warning(s) in ops/hook.log)" if hooks["warnings"] else ""))
    scheduled = data["scheduled"]
    weekly = scheduled["weekly"]
    line = (f"Scheduled runs: the weekly pass last ran {_local(weekly.get('at'))} ({weekly.get('run_id')})"
            if weekly else "Scheduled runs: no weekly pass yet")
    cron = scheduled["cron_log"]
    if cron:
        line += f"; ops/cron.log last written {_local(cron['modified'])}"
        if cron["last_line"]:
            return out + [line + f", last line: {cron['last_line']}"]
    return out + wrap(line, cols)


def _indexes_lines(data: dict[str, Any], cols: int) -> list[str]:
    """One line a folder: entries, files, a note; the folder's name never cut."""
    rows = data["indexes"]
    name = max([len(r["folder"]) for r in rows] + [6])
    out = [f"Indexes (overflow: over {data['index_overflow']} files):",
           f"  {'folder':<{name}}  {'entries':>7}  {'files':>7}"]
    for row in rows:
        flag = "overflow due" if row["folder"] in data["overflow_due"] else (
            "over threshold" if row["over_threshold"] else "")
        entries = "-" if row["entries"] is None else f"{row['entries']:,}"
        line = f"  {row['folder']:<{name}}  {entries:>7}  {row['files']:>7,}"
        out.append(line + ("  " + flag if flag and len(line) + 2 + len(flag) <= cols else ""))
        if flag and len(line) + 2 + len(flag) > cols:
            out.append(f"    {flag}")
    return out
