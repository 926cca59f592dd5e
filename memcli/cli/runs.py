"""Consolidation commands: consolidate, apply, log, stats, review."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from memcli.cli.common import app, emit_json, notes, opts
from memcli.consolidate import engine, history
from memcli.errors import MemcliError
from memcli.store.model import Outcome

console = Console()
err_console = Console(stderr=True)
review_app = typer.Typer(help="The review queue: pairs a person should look at.", no_args_is_help=True)
app.add_typer(review_app, name="review")


@app.command()
def consolidate(
    ctx: typer.Context,
    trigger: str = typer.Option("manual", "--trigger", help=(
        "manual, weekly, daily (a light pass: merge and promote only), session_end or index_overflow.")),
    dry_run: bool = typer.Option(False, "--dry-run", help="Show what a run would do; write nothing."),
    limit: int = typer.Option(None, "--limit", help="Most memories to touch (0 = no limit)."),
    consent: bool = typer.Option(False, "--consent", help="Treat USER memories as consented."),
    llm: bool = typer.Option(None, "--llm/--no-llm", help="Use the LLM helper for this run."),
    plan_out: Path = typer.Option(None, "--plan-out", help="Save the plan to FILE (implies --dry-run)."),
) -> None:
    """Run one consolidation pass: merge duplicates, summarise verbose episodic memories,
    promote proven procedures, archive stale entries; log every decision.

    Example: memcli consolidate --dry-run      (then: memcli consolidate)
    """
    o = opts(ctx)
    if trigger not in engine.TRIGGERS:
        raise MemcliError(f"unknown trigger {trigger!r} (use one of {', '.join(engine.TRIGGERS)})")
    if limit is not None and limit < 0:
        raise MemcliError("--limit must be 0 (no limit) or more")
    store = o.open_store()
    with _progress(o.json or o.quiet) as progress:
        outcome = engine.consolidate(store, trigger=trigger, dry_run=dry_run, limit=limit,
                                     consent=consent, llm=llm, wait=o.wait, progress=progress,
                                     plan_out=plan_out)
    render_outcome(outcome, o.json, o.quiet, plan_out)


@app.command("apply")
def apply_plan(ctx: typer.Context, plan_file: Path = typer.Argument(..., metavar="PLAN")) -> None:
    """Apply exactly a plan saved by `consolidate --plan-out`, after checking every file it
    touches is still as the plan saw it.

    Example: memcli consolidate --plan-out plan.json && memcli apply plan.json
    """
    o = opts(ctx)
    outcome = history.apply_plan_file(o.open_store(), plan_file, o.wait)
    render_outcome(outcome, o.json, o.quiet, None)


class _progress:
    """A rich progress bar on a terminal for long runs; nothing for scripts."""

    def __init__(self, silent: bool) -> None:
        self.enabled = not silent and sys.stderr.isatty()
        self.bar: Any = None
        self.tasks: dict[str, Any] = {}

    def __enter__(self) -> Any:
        if not self.enabled:
            return None
        from rich.progress import Progress

        self.bar = Progress(console=err_console, transient=True)
        self.bar.start()
        return self.update

    def update(self, stage: str, done: int, total: int) -> None:
        if stage not in self.tasks:
            self.tasks[stage] = self.bar.add_task(stage, total=total)
        self.bar.update(self.tasks[stage], completed=done, total=total)

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.stop()


def render_outcome(outcome: Outcome, as_json: bool, quiet: bool, plan_out: Path | None) -> None:
    notes(outcome.notes)  # stderr, also with --json: skipped bad files are always named
    if as_json:
        emit_json(outcome.to_json())
        return
    if quiet:
        return
    title = ("Dry run: nothing was written. " if outcome.dry_run else "") + (
        f"Run {outcome.run_id} ({outcome.trigger}) at {outcome.timestamp}")
    console.print(title, style="bold", highlight=False, markup=False, soft_wrap=True)
    _actions_table(outcome)
    _stats_table(outcome)
    if plan_out is not None:
        print(f"Plan saved to {plan_out}; apply it with: memcli apply {plan_out}")
    elif outcome.dry_run and outcome.actions:
        print("Apply with: memcli consolidate")
    elif not outcome.dry_run and outcome.actions:
        print(f"Undo with: memcli undo {outcome.run_id}")


def _actions_table(outcome: Outcome) -> None:
    if not outcome.actions:
        console.print("No action: the store is consolidated.")
        return
    table = Table(show_lines=True)
    table.add_column("action", no_wrap=True)
    table.add_column("memories", no_wrap=True, min_width=30)
    table.add_column("why", overflow="fold", ratio=1)
    whys = outcome.whys + [""] * (len(outcome.actions) - len(outcome.whys))
    for action, why in zip(outcome.actions, whys, strict=False):
        table.add_row(action["type"], _ids(action), why or action.get("reason", ""))
    console.print(table)


def _ids(action: dict[str, Any]) -> str:
    """One id a line: ids are 30 characters and would wrap mid-id in a narrow terminal."""
    ids = action.get("source_ids") or action.get("memory_ids") or [action.get("memory_id")]
    lines = [str(i) for i in ids if i != action.get("result_id")]
    return "\n".join(lines + ([f"-> {action['result_id']}"] if action.get("result_id") else []))


def _stats_table(outcome: Outcome) -> None:
    table = Table(title="Summary", show_header=False)
    table.add_column("what")
    table.add_column("count", justify="right")
    for key, value in outcome.stats.items():
        table.add_row(key.replace("_", " "), str(value))
    console.print(table)
    if outcome.stats.get("deferred"):
        console.print(f"{outcome.stats['deferred']} action(s) deferred by max_per_run: run "
                      "`memcli consolidate` again (or pass --limit 0).", highlight=False)


@app.command("log")
def log_cmd(
    ctx: typer.Context,
    last: int = typer.Option(10, "--last", help="How many recent runs to show."),
    run: str = typer.Option(None, "--run", help="Show one run's actions."),
) -> None:
    """Show recent runs from ops/consolidation-log.json, or one run's actions.

    Example: memcli log --last 5      memcli log --run run_01JD...
    """
    o = opts(ctx)
    entries = history.recent_runs(o.open_store(), last, run)
    if o.json:
        emit_json({"entries": entries})
        return
    if run:
        for entry in entries:
            render_outcome(Outcome(entry["run_id"], entry["trigger"], entry["timestamp"],
                                   entry.get("actions", []), entry.get("stats", {})), False, False, None)
        return
    table = Table(title=f"Last {len(entries)} runs")
    table.add_column("run", no_wrap=True)
    table.add_column("when, trigger", no_wrap=True)
    table.add_column("what it did", ratio=1)
    for e in entries:
        when = e["timestamp"][:16].replace("T", " ")
        count = e.get("stats", {}).get("memory_count")
        table.add_row(e["run_id"], f"{when}\n{e['trigger']}",
                      _did(e) + (f"; {count} memories after" if count is not None else ""))
    console.print(table)


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
    o = opts(ctx)
    report = history.store_stats(o.open_store())
    if o.json:
        emit_json(report)
        return
    _render_stats(report)


def _render_stats(report: dict[str, Any]) -> None:
    table = Table(title=f"{report['memory_count']} live memories, {report['archived_count']} archived")
    table.add_column("scope")
    types = sorted({t for counts in report["by_scope_type"].values() for t in counts})
    for t in types:
        table.add_column(t, justify="right")
    for scope, counts in sorted(report["by_scope_type"].items()):
        table.add_row(scope, *(str(counts.get(t, 0)) for t in types))
    console.print(table)
    actions = ", ".join(f"{k} {v}" for k, v in sorted(report["actions_by_type"].items())) or "none"
    console.print(f"Runs: {report['runs']}   Actions: {actions}", highlight=False)
    if report["chart"]:
        console.print("Memory count over time (one bar a run):", highlight=False)
        console.print(report["chart"], markup=False, highlight=False)


@review_app.command("list")
def review_list(ctx: typer.Context, all_: bool = typer.Option(False, "--all", help="Resolved too.")) -> None:
    """List the pairs waiting for a person's decision.

    Example: memcli review list
    """
    o = opts(ctx)
    items = history.review_items(o.open_store(), all_)
    if o.json:
        emit_json({"items": items})
        return
    if not items:
        console.print("The review queue is empty.")
        return
    table = Table(title=f"{len(items)} review item(s)")
    for col in ("id", "status", "memories", "reason", "similarity", "since"):
        table.add_column(col, overflow="fold")
    for i in items:
        reason = i.get("reason", "") + (f" ({i['guard']})" if i.get("guard") else "")
        table.add_row(i["id"], i.get("status", ""), " / ".join(i.get("memory_ids", [])), reason,
                      str(i.get("similarity", "")), str(i.get("created_at", ""))[:10])
    console.print(table)
    console.print("Resolve with: memcli review resolve ID --keep-both | --merge", highlight=False)


@review_app.command("show")
def review_show(ctx: typer.Context, item_id: str = typer.Argument(..., metavar="ID")) -> None:
    """Show one review item: both memories side by side, their similarity, and the guard that
    spoke (with what it checks), so that a person can decide it.

    Example: memcli review show rev_0001      (then: memcli review resolve rev_0001 --keep-both)
    """
    o = opts(ctx)
    detail = history.review_detail(o.open_store(), item_id)
    if o.json:
        emit_json(detail)
        return
    _render_review(detail)


def _render_review(detail: dict[str, Any]) -> None:
    reason = str(detail.get("reason", ""))
    similarity = detail.get("similarity")
    head = (f"{detail.get('id')} ({detail.get('status', '')}): {reason}"
            + (f", similarity {similarity}" if similarity is not None else "")
            + (f", queued {str(detail.get('created_at', ''))[:10]}" if detail.get("created_at") else ""))
    console.print(head, style="bold", highlight=False, markup=False)
    if detail.get("guard"):
        console.print(f"Guard: {detail['guard']} - {detail.get('guard_checks', '')}", highlight=False,
                      markup=False)
    table = Table(show_lines=True, expand=True)
    memories = detail.get("memories", [])
    for mem in memories:
        where = " (archived)" if mem.get("archived") else ""
        table.add_column(f"{mem['id']}{where}", overflow="fold", ratio=1)
    rows = [lambda m: m.get("missing") or f"{m.get('created_by')}, created {str(m.get('created_at'))[:10]}"
            f"\n{m.get('type')}/{m.get('subtype')}, tags: {', '.join(m.get('tags') or []) or '-'}",
            lambda m: m.get("text", "")]
    for row in rows:
        table.add_row(*(row(m) for m in memories))
    if memories:
        console.print(table)
    if "guards_now" in detail:
        now = ", ".join(detail["guards_now"]) or "none"
        console.print(f"Now: similarity {detail.get('similarity_now')}; guards that reject the pair: {now}",
                      highlight=False, markup=False)
    if detail.get("status") == "open":
        console.print(f"Decide with: memcli review resolve {detail.get('id')} --keep-both | --merge",
                      highlight=False, markup=False)


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
    o = opts(ctx)
    if sum((keep_both, merge, redo)) != 1:
        raise MemcliError("choose exactly one of --keep-both, --merge or --redo")
    decision = "merge" if merge else "redo" if redo else "keep_both"
    result = history.resolve_review(o.open_store(), item_id, decision, o.wait)
    if o.json:
        emit_json(result)
    elif not o.quiet:
        console.print(result["message"], highlight=False)
