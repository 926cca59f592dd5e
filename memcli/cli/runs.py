"""Consolidation commands: consolidate, apply, log, stats, review.

Reports are plain text (`memcli.cli.report`); rich is imported for the tables of `stats`
and `review` only, the engine only by the commands that run it."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from memcli.cli.common import Opts, app, emit_json, notes, opts, sub_app

if TYPE_CHECKING:
    from memcli.store.plans import Outcome
    from memcli.store.store import Store

review_app = sub_app("The review queue: pairs a person should look at.")
app.add_typer(review_app, name="review")
ALL_HELP = "Show every action (by default at most a screenful; --json and the log always have all)."


@app.command()
def consolidate(
    ctx: typer.Context,
    trigger: str = typer.Option("manual", "--trigger", metavar="TRIGGER", help=(
        "manual, weekly, daily (a light pass: merge and promote only), session_end or index_overflow.")),
    dry_run: bool = typer.Option(False, "--dry-run", help="Show what a run would do; write nothing."),
    limit: int = typer.Option(None, "--limit", metavar="N", help="Most memories to touch (0 = no limit)."),
    consent: bool = typer.Option(False, "--consent", help="Treat USER memories as consented."),
    llm: bool = typer.Option(None, "--llm/--no-llm", help="Use the LLM helper for this run."),
    plan_out: Path = typer.Option(None, "--plan-out", metavar="FILE",
                                  help="Save the plan to FILE (implies --dry-run)."),
    all_: bool = typer.Option(False, "--all", help=ALL_HELP),
    yes: bool = typer.Option(False, "--yes", "-y", help=(
        "Do not ask before a run that archives more than half of a folder's live memories.")),
) -> None:
    """Run one consolidation pass: merge duplicates, summarise verbose episodic memories,
    promote proven procedures, archive stale entries; log every decision. The report gives
    the counts first, then at most a screenful of actions grouped by kind (--all for every
    one). A run that would move more than half the live memories of a folder to the
    archive is announced on stderr and, on a terminal, waits for a yes (--yes skips it).

    Example: memcli consolidate --dry-run      (then: memcli consolidate)
    """
    from memcli.cli.output import Progress
    from memcli.consolidate import engine
    from memcli.errors import MemcliError

    o = opts(ctx)
    if trigger not in engine.TRIGGERS:
        raise MemcliError(f"unknown trigger {trigger!r} (use one of {', '.join(engine.TRIGGERS)})")
    if limit is not None and limit < 0:
        raise MemcliError("--limit must be 0 (no limit) or more")
    store = o.open_store()
    confirm = None if dry_run or plan_out is not None else _confirmer(store, o, yes)
    with Progress(o.json or o.quiet) as progress:
        outcome = engine.consolidate(store, trigger=trigger, dry_run=dry_run, limit=limit,
                                     consent=consent, llm=llm, wait=o.wait,
                                     progress=_steady(progress, trigger), plan_out=plan_out, confirm=confirm)
    warnings = _archive_warnings(store, outcome) if outcome.dry_run else []
    render_outcome(outcome, o, plan_out, all_, warnings)


def _steady(update: Any, trigger: str) -> Any:
    """One bar a phase that only moves forward: planning (folder by folder), then applying.
    The engine also reports comparing block by block within each folder, which would start
    a bar again at every folder: left out, except in a run planned at once (session_end),
    where it is the planning bar, counted to its end."""
    if update is None:
        return None

    def forward(stage: str, done: int, total: int) -> None:
        if stage == "comparing":
            if trigger != "session_end":
                return
            stage, done = "planning", min(done + 1, total)
        update(stage, done, total)

    return forward


def _folders(store: Store) -> tuple[dict[str, int], dict[str, str]]:
    """Live memories per folder, and each id's folder (from file names: nothing is read)."""
    sizes: dict[str, int] = {}
    where: dict[str, str] = {}
    for folder in store.memory_folders():
        names = store.memory_names(folder)
        sizes[folder.rel] = len(names)
        where.update((n.rsplit(".", 1)[0], folder.rel) for n in names)
    return sizes, where


def _archive_warnings(store: Store, outcome: Outcome) -> list[str]:
    from memcli.cli.report import archive_share

    if not any(a.get("type") in ("archive", "merge") for a in outcome.actions):
        return []
    return archive_share(outcome, *_folders(store))


def _confirmer(store: Store, o: Opts, yes: bool) -> Any:
    """The check a real run passes before it applies: more than half a folder to the
    archive is said on stderr, and on a terminal asked about (unless --yes)."""
    def confirm(preview: Outcome) -> bool:
        warnings = _archive_warnings(store, preview)
        if not warnings:
            return True
        sys.stderr.write("warning: this run moves more than half of a folder's live memories to the "
                         "archive:\n" + "".join(f"  {w}\n" for w in warnings))
        if yes or not interactive():
            return True
        return bool(typer.confirm("Go ahead? (undo puts everything back)", default=False, err=True))

    return confirm


def interactive() -> bool:
    """Whether a person can answer a question (stdin and stderr are a terminal)."""
    return sys.stdin.isatty() and sys.stderr.isatty()


@app.command("apply")
def apply_plan(
    ctx: typer.Context,
    plan_file: Path = typer.Argument(..., metavar="PLAN", help="A plan file from consolidate --plan-out."),
    all_: bool = typer.Option(False, "--all", help=ALL_HELP),
) -> None:
    """Apply exactly a plan saved by `consolidate --plan-out`, after checking every file it
    touches is still as the plan saw it.

    Example: memcli consolidate --plan-out plan.json && memcli apply plan.json
    """
    from memcli.cli.output import Progress
    from memcli.consolidate import history

    o = opts(ctx)
    with Progress(o.json or o.quiet) as progress:
        outcome = history.apply_plan_file(o.open_store(), plan_file, o.wait, progress)
    render_outcome(outcome, o, None, all_)


def render_outcome(outcome: Outcome, o: Opts, plan_out: Path | None, show_all: bool = False,
                   warnings: list[str] | None = None, hints: bool = True, live: bool = True) -> None:
    """The report: title, counts, durations, warnings, then the actions by kind. `live`: the
    run is this command's own, whose wall time the report gives (not a logged run's, which
    `log --run` shows: the log keeps its plan and apply times only)."""
    from memcli.cli import report
    from memcli.cli.output import hint_line, started_ms, width

    wall_ms = started_ms() if live else None
    notes(outcome.notes, o.quiet)  # stderr, also with --json: skipped bad files are always named
    if o.json:
        data = outcome.to_json()
        data["wall_ms"] = wall_ms
        emit_json(data)
        return
    if o.quiet:
        if not outcome.dry_run and outcome.actions:
            sys.stdout.write(outcome.run_id + "\n")  # what a script needs: the run to undo
        return
    cols = width()
    out: list[str] = []
    title = ("Dry run: nothing was written. " if outcome.dry_run else "") + (
        f"Run {outcome.run_id} ({outcome.trigger}) at {outcome.timestamp}")
    out += report.wrap(title, cols)
    out += report.summary_lines(outcome, cols, wall_ms)
    for line in warnings or []:
        out += report.wrap(f"Warning: {line}.", cols)
    if outcome.actions:
        budget = None if show_all else report.screen_budget()
        lines, hidden = report.actions_lines(outcome, cols, budget)
        out += [""] + lines
        if hidden:
            out += report.wrap(f"{hidden:,} actions not shown: --all shows them, --json lists them.", cols)
            if not outcome.dry_run:  # the run is in the log: the command that shows it whole
                out += hint_line("All of them:", o.hint("log", "--run", outcome.run_id, "--all"), cols)
    else:
        out.append("No action: the store is consolidated.")
    if outcome.stats.get("deferred"):
        out += report.wrap(f"{outcome.stats['deferred']:,} action(s) deferred by max_per_run: run "
                           f"{o.hint('consolidate')} again (or pass --limit 0).", cols)
    if hints:
        out += _next_steps(outcome, o, plan_out)
    sys.stdout.write("\n".join(out) + "\n")


def _next_steps(outcome: Outcome, o: Opts, plan_out: Path | None) -> list[str]:
    from memcli.cli.output import hint_line, width

    if plan_out is not None:
        return hint_line(f"Plan saved to {plan_out}; apply it with:", o.hint("apply", str(plan_out)), width())
    if outcome.dry_run and outcome.actions:
        return hint_line("Apply with:", o.hint("consolidate"), width())
    if not outcome.dry_run and outcome.actions:
        return hint_line("Undo with:", o.hint("undo", outcome.run_id), width())
    return []


@app.command("log")
def log_cmd(
    ctx: typer.Context,
    last: int = typer.Option(10, "--last", metavar="N", help="How many recent runs to show (0 = all)."),
    run: str = typer.Option(None, "--run", metavar="RUN_ID",
                            help="Show one run's actions (a prefix is enough)."),
    all_: bool = typer.Option(False, "--all", help="With --run: " + ALL_HELP),
) -> None:
    """Show recent runs from ops/consolidation-log.json, newest first (undone runs are
    marked), or one run's report with --run.

    Example: memcli log --last 5      memcli log --run run_01JD
    """
    from memcli.cli.output import hint_line, plural, width
    from memcli.cli.report import wrap
    from memcli.consolidate import history
    from memcli.store.plans import Outcome

    o = opts(ctx)
    entries = history.recent_runs(o.open_store(), last, run)
    if o.json:
        emit_json({"entries": entries})
        return
    if o.quiet:
        sys.stdout.write("".join(f"{e.get('run_id')}\n" for e in entries))
        return
    shown = [(history.shown_entry(e), e.get("undone_by")) for e in entries]  # hand-edited: shown, no crash
    if run:
        for entry, _ in shown:
            render_outcome(Outcome(entry["run_id"], entry["trigger"], entry["timestamp"],
                                   entry["actions"], entry["stats"]), o, None, all_, hints=False, live=False)
        return
    if not shown:
        print("No run yet: the log is empty.")
        return
    cols = width()
    out = [f"Last {plural(len(shown), 'run')}, newest first:"]
    for e, undone_by in shown:
        when = e["timestamp"][:16].replace("T", " ")
        out.append("")
        out += wrap(f"{e['run_id']}  {when}  {e['trigger']}" + ("  [undone]" if undone_by else ""), cols)
        count = e.get("stats", {}).get("memory_count")
        out += wrap(_did(e) + (f"; {count:,} memories after" if isinstance(count, int) else ""), cols, "  ")
        if undone_by:
            out += wrap(f"undone by {undone_by}", cols, "  ")
    out += [""] + hint_line("One run's actions:", o.hint("log", "--run", "RUN_ID"), cols)
    sys.stdout.write("\n".join(out) + "\n")


_DID = (("memories_merged", "merged"), ("memories_summarized", "summarised"),
        ("memories_promoted", "promoted"), ("memories_archived", "archived"), ("flagged", "flagged"),
        ("skipped", "skipped"), ("deferred", "deferred"))


def _did(entry: dict[str, Any]) -> str:
    stats = entry.get("stats", {})
    parts = [f"{label} {stats[key]}" for key, label in _DID if stats.get(key)]
    others = [a["type"] for a in entry.get("actions", []) if a.get("type") in ("undo", "restore", "capture")]
    return ", ".join(parts + others) or "no change"


@app.command()
def stats(ctx: typer.Context) -> None:
    """Counts by scope and type, runs, actions by type, and the memory count over time.

    Example: memcli stats
    """
    from memcli.consolidate import history

    o = opts(ctx)
    report = history.store_stats(o.open_store())
    for problem in report["problems"]:  # bad files are named, on stderr
        sys.stderr.write(f"skipped: {problem}\n")
    if o.json:
        emit_json(report)
    elif not o.quiet:
        _render_stats(report)


def _render_stats(report: dict[str, Any]) -> None:
    from rich.table import Table

    from memcli.cli.output import console, plural

    table = Table(title=f"{report['memory_count']:,} live memories, {report['archived_count']:,} archived")
    table.add_column("scope")
    types = sorted({t for counts in report["by_scope_type"].values() for t in counts})
    for t in types:
        table.add_column(t, justify="right")
    for scope, counts in sorted(report["by_scope_type"].items()):
        table.add_row(scope, *(f"{counts.get(t, 0):,}" for t in types))
    out = console()
    out.print(table)
    actions = ", ".join(f"{k} {v:,}" for k, v in sorted(report["actions_by_type"].items())) or "none"
    out.print(f"{plural(report['runs'], 'run')}; actions: {actions}", markup=False)
    if report["chart"]:
        out.print("Memory count over time (one bar a run):")
        out.print(report["chart"], markup=False)


@review_app.command("list")
def review_list(ctx: typer.Context, all_: bool = typer.Option(False, "--all", help="Resolved too.")) -> None:
    """List the pairs waiting for a person's decision.

    Example: memcli review list
    """
    from memcli.cli.output import hint_line, plural, width
    from memcli.cli.report import wrap
    from memcli.consolidate import history

    o = opts(ctx)
    items = history.review_items(o.open_store(), all_)
    if o.json:
        emit_json({"items": items})
        return
    if o.quiet:
        sys.stdout.write("".join(f"{i['id']}\n" for i in items))
        return
    if not items:
        print("The review queue is empty.")
        return
    cols = width()
    out = [f"{plural(len(items), 'review item')}:"]
    for i in items:
        reason = i.get("reason", "") + (f" ({i['guard']})" if i.get("guard") else "")
        similarity = f"similarity {i['similarity']}" if i.get("similarity") is not None else ""
        out.append("")
        out += wrap("  ".join(p for p in (i["id"], i.get("status", ""), reason, similarity,
                                          str(i.get("created_at", ""))[:10]) if p), cols)
        out += wrap("  ".join(i.get("memory_ids", [])), cols, "  ")
    out += [""] + hint_line("Look at one:", o.hint("review", "show", "ID"), cols)
    out += hint_line("Decide (or --merge):", o.hint("review", "resolve", "ID", "--keep-both"), cols)
    sys.stdout.write("\n".join(out) + "\n")


@review_app.command("show")
def review_show(ctx: typer.Context, item_id: str = typer.Argument(..., metavar="ID")) -> None:
    """Show one review item: both memories side by side (one after the other in a narrow
    terminal), their similarity, and the guard that spoke (with what it checks), so that a
    person can decide it.

    Example: memcli review show rev_0001      (then: memcli review resolve rev_0001 --keep-both)
    """
    from memcli.consolidate import history

    o = opts(ctx)
    detail = history.review_detail(o.open_store(), item_id)
    if o.json:
        emit_json(detail)
    elif not o.quiet:
        _render_review(detail, o)


def _memory_head(m: dict[str, Any]) -> str:
    return (m.get("missing") or f"{m.get('created_by')}, created {str(m.get('created_at'))[:10]}"
            f"\n{m.get('type')}/{m.get('subtype')}, tags: {', '.join(m.get('tags') or []) or '-'}")


def _render_review(detail: dict[str, Any], o: Opts) -> None:
    from memcli.cli.output import width
    from memcli.cli.report import wrap

    cols = width()
    reason = str(detail.get("reason", ""))
    similarity = detail.get("similarity")
    out = wrap(f"{detail.get('id')} ({detail.get('status', '')}): {reason}"
               + (f", similarity {similarity}" if similarity is not None else "")
               + (f", queued {str(detail.get('created_at', ''))[:10]}" if detail.get("created_at") else ""),
               cols)
    if detail.get("guard"):
        out += wrap(f"Guard: {detail['guard']} - {detail.get('guard_checks', '')}", cols)
    memories = detail.get("memories", [])
    side_by_side = cols >= 100 and len(memories) == 2
    if not side_by_side:
        for m in memories:
            out += ["", m["id"] + (" (archived)" if m.get("archived") else "")]
            for line in _memory_head(m).split("\n") + [""] + str(m.get("text", "")).split("\n"):
                out += wrap(line, cols, "  ") if line else [""]
    sys.stdout.write("\n".join(out) + "\n")
    if side_by_side:
        from rich.table import Table

        from memcli.cli.output import console

        table = Table(show_lines=True, expand=True)
        for m in memories:
            table.add_column(f"{m['id']}{' (archived)' if m.get('archived') else ''}", overflow="fold",
                             ratio=1)
        table.add_row(*(_memory_head(m) for m in memories))
        table.add_row(*(str(m.get("text", "")) for m in memories))
        console().print(table, markup=False)
    out = []
    if "guards_now" in detail:
        now = ", ".join(detail["guards_now"]) or "none"
        out += wrap(f"Now: similarity {detail.get('similarity_now')}; guards that reject the pair: {now}",
                    cols)
    if detail.get("status") == "open":
        from memcli.cli.output import hint_line

        out += hint_line("Decide with (or --merge):",
                         o.hint("review", "resolve", str(detail.get("id")), "--keep-both"), cols)
    if out:
        sys.stdout.write("\n".join(out) + "\n")


@review_app.command("resolve")
def review_resolve(
    ctx: typer.Context,
    item_id: str = typer.Argument(..., metavar="ID"),
    keep_both: bool = typer.Option(False, "--keep-both", help="They are different: keep both."),
    merge: bool = typer.Option(False, "--merge", help="They are the same: merge (newer wins)."),
    redo: bool = typer.Option(False, "--redo", help="An undo's decision: let later runs do it again."),
) -> None:
    """Decide a review item: keep both memories, or merge them (logged and undoable). An
    undo records its decisions here too (`review list --all`): later runs keep its pairs
    apart and do not promote again what it reversed; --merge merges such a pair now, --redo
    lets later runs decide again.

    Example: memcli review resolve rev_0001 --keep-both
    """
    from memcli.consolidate import history
    from memcli.errors import MemcliError

    o = opts(ctx)
    if sum((keep_both, merge, redo)) != 1:
        raise MemcliError("choose exactly one of --keep-both, --merge or --redo")
    decision = "merge" if merge else "redo" if redo else "keep_both"
    result = history.resolve_review(o.open_store(), item_id, decision, o.wait)
    if o.json:
        emit_json(result)
    elif o.quiet:
        if result.get("run_id"):
            print(result["run_id"])
    elif result.get("run_id"):
        print(f"{item_id}: merged in run {result['run_id']}; undo with: {o.hint('undo', result['run_id'])}")
    else:
        print(result["message"])
