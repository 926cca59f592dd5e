"""Everyday commands: init, add, show, list, access, reindex."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from memcli.cli.common import app, emit_json, notes, opts, warn
from memcli.errors import MemcliError
from memcli.store import memories
from memcli.store.model import encode, now
from memcli.store.store import init_store
from memcli.sync import gitfiles

console = Console()


@app.command()
def init(ctx: typer.Context, path: Path = typer.Argument(Path("."), help="Folder to make a store.")) -> None:
    """Create a store: memcli.toml, archive/, ops/ and global/, and the .gitignore and
    .gitattributes a store shared through git needs (in a git repository, memcli's merge
    drivers are registered in its config too). On an existing store, adds what is missing.

    Example: memcli init ~/agent-memory
    """
    o = opts(ctx)
    created = init_store(path.expanduser())
    prepared = gitfiles.prepare(path.expanduser())
    root = str(path.expanduser().resolve())
    if o.json:
        emit_json({"store": root, "created": created, "git_files": prepared.written,
                   "merge_drivers": prepared.drivers})
    elif not o.quiet:
        print(f"{'Created' if created else 'Already a store:'} {root}")
        if created:
            print("Next: memcli --store " + root + " add --type semantic --subtype fact "
                  "--scope agent --scope-id coder --summary '...'")


@app.command()
def add(
    ctx: typer.Context,
    type_: str = typer.Option(..., "--type", help="episodic, semantic, procedural or working."),
    subtype: str = typer.Option("", "--subtype", help="Free text, e.g. deployment."),
    scope: str = typer.Option(..., "--scope", help="agent, team or global."),
    scope_id: str = typer.Option("", "--scope-id", help="The agent or team id (not for global)."),
    tag: list[str] = typer.Option([], "--tag", help="A tag; repeat for more."),
    priority: str = typer.Option("normal", "--priority", help="critical, high, normal or low."),
    created_by: str = typer.Option(None, "--created-by", help="Author (default $MEMCLI_AUTHOR)."),
    summary: str = typer.Option("", "--summary", help="One-line summary."),
    details: str = typer.Option(None, "--details", help="Long text, or - to read stdin."),
    fmt: str = typer.Option("json", "--format", help="File format: json or md."),
) -> None:
    """Write a memory and print its id. A near-identical memory already there is updated
    instead (its id is printed); a similar one is flagged for the next run.

    Example: memcli add --type procedural --subtype deployment --scope agent --scope-id coder
    --tag deploy --summary "Deploy to staging before production."
    """
    o = opts(ctx)
    if scope != "global" and not scope_id:
        raise MemcliError(f"--scope-id is required for scope {scope!r}")
    store = o.open_store()
    text = sys.stdin.read() if details == "-" else details
    new = memories.NewMemory(type_, subtype, scope, scope_id or "global", list(tag), priority,
                             created_by or _default_author(scope, scope_id), summary, text, fmt)
    with store.writing(o.wait) as recovered:
        result = memories.add_memory(store, new, now())
    notes(recovered)
    warn(result.problems, o.quiet)
    _render_add(result, o.json, o.quiet)


def _default_author(scope: str, scope_id: str) -> str:
    return os.environ.get("MEMCLI_AUTHOR") or (f"agent:{scope_id}" if scope == "agent" else "USER")


def _render_add(result: memories.AddResult, as_json: bool, quiet: bool) -> None:
    if as_json:
        emit_json({"id": result.id, "path": result.path, "action": result.action,
                   "similar_to": result.similar_to, "similarity": result.similarity,
                   "flagged": result.flag_reason})
        return
    print(result.id)
    if quiet or result.similar_to is None:
        return
    if result.action == "updated":
        sys.stderr.write(f"near-identical to {result.similar_to} "
                         f"({result.similarity:.2f}): updated it instead of adding a copy\n")
    else:
        sys.stderr.write(f"similar to {result.similar_to} ({result.similarity:.2f}, "
                         f"{result.flag_reason}): flagged for the next consolidation\n")


@app.command()
def show(ctx: typer.Context, mem_id: str = typer.Argument(..., metavar="ID")) -> None:
    """Show one memory, live or archived.

    Example: memcli show mem_01JD3Z7Q9K8V5T2N4M6P0R1S3A
    """
    o = opts(ctx)
    mem, folder, record = memories.show_memory(o.open_store(), mem_id)
    if o.json:
        emit_json({"memory": record, "folder": folder.rel, "path": str(mem.path),
                   "archived": folder.scope == "archive"})
        return
    console.print(f"[bold]{mem.id}[/bold]  ({folder.rel}, {mem.fmt})", highlight=False)
    console.print(encode(record, "md").decode(), markup=False, highlight=False)


@app.command("list")
def list_(
    ctx: typer.Context,
    scope: str = typer.Option(None, "--scope", help="agent, team or global."),
    scope_id: str = typer.Option(None, "--scope-id", help="An agent or team id."),
    type_: str = typer.Option(None, "--type", help="Memory type."),
    subtype: str = typer.Option(None, "--subtype", help="Memory subtype."),
    tag: list[str] = typer.Option([], "--tag", help="Only memories with this tag (repeatable)."),
    archived: bool = typer.Option(False, "--archived", help="List the archive instead."),
) -> None:
    """List memories, newest first within each folder.

    Example: memcli list --scope agent --scope-id coder --type procedural --json
    """
    o = opts(ctx)
    flt = memories.ListFilter(scope, scope_id, type_, subtype, list(tag), archived)
    entries, problems = memories.list_memories(o.open_store(), flt)
    warn(problems, o.quiet)
    if o.json:
        emit_json({"memories": entries, "count": len(entries)})
        return
    _render_list(entries, archived)


def _render_list(entries: list[dict[str, Any]], archived: bool) -> None:
    table = Table(title=f"{len(entries)} {'archived ' if archived else ''}memories", show_lines=True)
    table.add_column("id, folder, kind", no_wrap=True)
    table.add_column("uses", no_wrap=True)
    table.add_column("summary [tags]", ratio=1)
    for e in entries:
        where = (e.get("from") or e["folder"]) if archived else e["folder"]
        tags = ", ".join(e.get("tags") or [])
        table.add_row(f"{e['id']}\n{where}\n{e.get('type')}/{e.get('subtype') or '-'}",
                      f"{e.get('access_count', 0)}\n{(e.get('last_accessed') or 'never')[:10]}",
                      (e.get("summary") or "") + (f" [{tags}]" if tags else ""))
    console.print(table, markup=False)


@app.command()
def access(
    ctx: typer.Context,
    mem_id: str = typer.Argument(..., metavar="ID"),
    session: str = typer.Option(None, "--session", help="Count it once within this session id."),
) -> None:
    """Record a use of a memory: access_count + 1, last_accessed = now. Recorded at once
    (never waits for a running consolidation) and folded into the file by the next command
    that holds the store lock; every reader counts it from now on.

    Example: memcli access mem_01JD3Z7Q9K8V5T2N4M6P0R1S3A
    """
    o = opts(ctx)
    result = memories.access_memory(o.open_store(), mem_id, now(), session)
    if o.json:
        emit_json({k: result[k] for k in ("id", "access_count", "last_accessed")})
    elif not o.quiet:
        print(f"{result['id']}: access_count {result['access_count']}"
              + ("" if result["recorded"] else " (already counted in this session)"))


@app.command()
def reindex(ctx: typer.Context) -> None:
    """Rebuild every folder's _index.json (and the archive's) from the memory files.

    Example: memcli reindex
    """
    o = opts(ctx)
    store = o.open_store()
    with store.writing(o.wait) as recovered:
        result = memories.reindex(store)
    from memcli.recall import index as recall_index

    recall_index.after_run(store, list(result.folders))
    notes(recovered)
    warn(result.problems, o.quiet)
    if o.json:
        emit_json({"folders": result.folders, "problems": [str(p) for p in result.problems]})
    elif not o.quiet:
        total = sum(result.folders.values())
        print(f"Reindexed {len(result.folders)} folders, {total} memories"
              + (f"; {len(result.problems)} problem(s) above" if result.problems else ""))

