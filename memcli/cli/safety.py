"""Safety commands: undo, restore, doctor."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import typer

from memcli.cli.common import Opts, app, emit_json, opts

if TYPE_CHECKING:
    from memcli.store import doctor as doctor_core
    from memcli.store.plans import Outcome


@app.command()
def undo(ctx: typer.Context, run_id: str = typer.Argument(
        ..., metavar="RUN_ID", help="The run to reverse (a unique prefix is enough; see memcli log).")
        ) -> None:
    """Reverse a whole run from its pre-images: every memory it rewrote, moved or created is
    put back exactly as it was; memories it created move to the archive (reason `undone`).
    The undo is itself a logged run (trigger `undo`) that can be undone. It is also a
    decision: later runs keep the pairs it split apart, do not promote again what it
    un-promoted, and count what it brought back from `stale` as used now (see `review list
    --all`; `review resolve ID --merge` or `--redo` to change your mind). Refused, naming
    each file, when a file changed since that run; refused for a run already undone.

    Example: memcli undo run_01JD3Z7Q9K8V5T2N4M6P0R1S3A      (run ids: memcli log)
    """
    from memcli.cli.output import Progress
    from memcli.consolidate import history
    from memcli.consolidate import undo as undo_core
    from memcli.store import log

    o = opts(ctx)
    store = o.open_store()
    run_id = history.resolve_run_id(run_id, [str(e.get("run_id")) for e in log.read_entries(store.root)],
                                    missing_ok=True)  # undo says why an unknown run cannot be undone
    with Progress(o.json or o.quiet) as progress:
        outcome = undo_core.undo_run(store, run_id, o.wait, progress)
    _render(outcome, o, _undo_message(outcome, run_id, o))


SHOWN = 5  # decisions an undo lists by name; `review list --all` has every one


def _undo_message(outcome: Outcome, run_id: str, o: Opts) -> str:
    """What was put back, then (a few by name, the rest counted) what later runs will not
    redo, wrapped to the terminal; the commands to change one's mind on lines of their own."""
    from memcli.cli.output import hint_line, plural, width
    from memcli.cli.report import wrap

    cols = width()
    restored = next(a["files_restored"] for a in outcome.actions if a.get("type") == "undo")
    archived = [a["memory_id"] for a in outcome.actions if a.get("reason") == "undone"]
    text = f"Undid {run_id}: {plural(restored, 'file')} put back as they were"
    if archived:
        text += f"; {plural(len(archived), 'memory')} it created moved to the archive ({', '.join(archived)})"
    lines = wrap(text, cols)
    decided = [w.removeprefix("later runs: ") for a, w in zip(outcome.actions, outcome.whys, strict=False)
               if a.get("type") == "decision"]
    if decided and not o.json:
        more = f"; and {len(decided) - SHOWN} more" if len(decided) > SHOWN else ""
        lines += wrap("Later runs will not redo it: " + "; ".join(decided[:SHOWN]) + more + ".", cols)
        lines += hint_line("To change your mind, see:", o.hint("review", "list", "--all"), cols)
        lines += hint_line("then (a pair; or --redo):", o.hint("review", "resolve", "ID", "--merge"), cols)
    return "\n".join(lines)


@app.command()
def restore(ctx: typer.Context, mem_id: str = typer.Argument(
        ..., metavar="ID", help="An archived memory's id (a unique prefix is enough).")) -> None:
    """Bring one archived memory back to the folder it left. It counts as a use
    (access_count + 1, last_accessed = now), so the next run does not archive it again as
    stale. Logged as a run (trigger `restore`) that `memcli undo` can reverse.

    Example: memcli restore mem_01JD3Z7Q9K8V5T2N4M6P0R1S3A      (ids: memcli list --archived)
    """
    from memcli.consolidate import undo as undo_core
    from memcli.store import memories

    o = opts(ctx)
    store = o.open_store()
    mem_id = memories.resolve_id(store, mem_id, missing_ok=True)  # restore says what it could not find
    outcome = undo_core.restore_memory(store, mem_id, o.wait)
    action = next(a for a in outcome.actions if a.get("type") == "restore")
    _render(outcome, o, f"Restored {mem_id} to {action['to']}")


def _render(outcome: Outcome, o: Opts, message: str) -> None:
    if not o.quiet:
        for note in outcome.notes:  # stderr, so that --json output stays pure
            sys.stderr.write(f"note: {note}\n")
    if outcome.stats.get("skipped"):
        sys.stderr.write("warning: some files changed while running; see "
                         f"`{o.hint('log', '--run', outcome.run_id)}`\n")
    if o.json:
        emit_json(outcome.to_json())
    elif o.quiet:
        print(outcome.run_id)
    else:
        from memcli.cli.output import hint_line, width

        print(f"{message} (run {outcome.run_id})")
        print("\n".join(hint_line("To reverse it:", o.hint("undo", outcome.run_id), width())))


@app.command()
def doctor(
    ctx: typer.Context,
    fix: bool = typer.Option(False, "--fix", help="Repair what needs no guessing; report the rest."),
) -> None:
    """Check every invariant of the store and report each problem with a code, its path and
    a severity. Exits 1 while an error remains (warnings alone exit 0). Without --fix it
    writes nothing and takes no lock; --fix finishes or rolls back an interrupted run,
    removes temporary files and rebuilds indices from the files.

    Example: memcli doctor      memcli doctor --fix      memcli doctor --json
    """
    from memcli.store import doctor as doctor_core

    o = opts(ctx)
    store = o.open_store(check=False)  # an unsafe layout is reported, not refused (--fix refuses it)
    report = doctor_core.repair(store, o.wait) if fix else doctor_core.diagnose(store)
    if o.json:
        emit_json(report.to_json())
    else:
        _render_report(report, o)
    if not report.ok:
        raise typer.Exit(1)


def _render_report(report: doctor_core.Report, o: Opts) -> None:
    quiet = o.quiet
    for note in report.notes:
        sys.stderr.write(f"fixed: {note}\n")
    shown = [p for p in report.problems if not quiet or (p.severity == "error" and not p.fixed)]
    for p in shown:
        status = " [fixed]" if p.fixed else ""
        print(f"{p.severity:<7} {p.code:<17} {p.path}: {p.message}{status}")
    if quiet:
        return
    errors = sum(1 for p in report.problems if p.severity == "error" and not p.fixed)
    warnings = sum(1 for p in report.problems if p.severity == "warning")
    fixed = sum(1 for p in report.problems if p.fixed)
    if not report.problems:
        print("No problem found.")
    else:
        print(f"{errors} error(s) left, {warnings} warning(s), {fixed} fixed"
              + ("" if report.ok else f"; run `{o.hint('doctor', '--fix')}` for what can be repaired"))
