"""Everyday commands: init, add, show, edit, list, access, reindex.

The core is imported inside each command: `memcli --help` never loads it, and `show` and
`list` load only the store."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from memcli.cli.common import app, emit_json, notes, opts, warn
from memcli.cli.fast import FastOpts

if TYPE_CHECKING:
    from memcli.store import memories

ID_HELP = "A memory id, or a unique prefix of one (mem_01JD3Z, or 01JD3Z)."


@app.command()
def init(ctx: typer.Context, path: Path = typer.Argument(Path("."), help="Folder to make a store.")) -> None:
    """Create a store: memcli.toml, archive/, ops/ and global/, and the .gitignore and
    .gitattributes a store shared through git needs (in a git repository, memcli's merge
    drivers are registered in its config too). On an existing store, adds what is missing.

    Example: memcli init ~/agent-memory
    """
    from memcli.cli.output import hint
    from memcli.store.store import init_store
    from memcli.sync import gitfiles

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
            print("Next: " + hint(root, "add --type semantic --subtype fact --scope agent "
                                        "--scope-id coder --summary '...'"))


@app.command()
def add(
    ctx: typer.Context,
    type_: str = typer.Option(..., "--type", metavar="TYPE",
                              help="episodic, semantic, procedural or working."),
    subtype: str = typer.Option("", "--subtype", metavar="SUBTYPE", help="Free text, e.g. deployment."),
    scope: str = typer.Option(..., "--scope", metavar="SCOPE", help="agent, team or global."),
    scope_id: str = typer.Option("", "--scope-id", metavar="ID",
                                 help="The agent or team id (required for those; none for global)."),
    tag: list[str] = typer.Option([], "--tag", metavar="TAG", help="A tag; repeat for more."),
    priority: str = typer.Option("normal", "--priority", metavar="PRIORITY",
                                 help="critical, high, normal or low."),
    created_by: str = typer.Option(None, "--created-by", metavar="WHO",
                                   help="Author (default $MEMCLI_AUTHOR)."),
    summary: str = typer.Option("", "--summary", metavar="TEXT", help="One-line summary."),
    details: str = typer.Option(None, "--details", metavar="TEXT", help="Long text, or - to read stdin."),
    fmt: str = typer.Option("json", "--format", metavar="FORMAT", help="File format: json or md."),
) -> None:
    """Write a memory and print its id. A near-identical memory already there is updated
    instead (its id is printed); a similar one is flagged for the next run.

    Example: memcli add --type procedural --subtype deployment --scope agent --scope-id coder
    --tag deploy --summary "Deploy to staging before production."
    """
    from memcli.errors import MemcliError
    from memcli.store import memories
    from memcli.store.model import now

    o = opts(ctx)
    if scope != "global" and not scope_id:
        raise MemcliError(f"--scope-id is required for scope {scope!r}")
    if scope == "global" and scope_id not in ("", "global"):
        raise MemcliError(f"scope global takes no --scope-id (got {scope_id!r}): leave it out, or use "
                          "--scope agent or --scope team")
    store = o.open_store()
    text = sys.stdin.read() if details == "-" else details
    new = memories.NewMemory(type_, subtype, scope, scope_id or "global", list(tag), priority,
                             created_by or _default_author(scope, scope_id), summary, text, fmt)
    with store.writing(o.wait) as recovered:
        result = memories.add_memory(store, new, now())
    notes(recovered, o.quiet)
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
def show(ctx: typer.Context, mem_id: str = typer.Argument(..., metavar="ID", help=ID_HELP)) -> None:
    """Show one memory, live or archived, as Markdown with its fields in front matter.

    Example: memcli show mem_01JD3Z7Q      (a unique prefix of the id is enough)
    """
    from memcli.cli import readmain

    o = opts(ctx)
    readmain.run_show(FastOpts(o.store, o.json, o.quiet, o.wait), mem_id)


@app.command()
def edit(ctx: typer.Context, mem_id: str = typer.Argument(..., metavar="ID", help=ID_HELP)) -> None:
    """Edit a memory's file in $VISUAL or $EDITOR (else vi). On save the record is checked
    (it must parse, meet the contract, keep its id and its folder's scope) and its indexes
    are brought up to date, so a hand edit leaves nothing stale for `doctor`. An invalid
    record is refused with the reason and the file is left as it was; what you wrote is
    kept in the store's .cache/edit/ for you to fix.

    Example: EDITOR=nano memcli edit mem_01JD3Z7Q
    """
    import shlex
    import subprocess

    from memcli.errors import BadRecordError, MemcliError
    from memcli.store import fsops, memories
    from memcli.store.cache import cache_dir

    o = opts(ctx)
    store = o.open_store()
    mem, folder, _ = memories.show_memory(store, memories.resolve_id(store, mem_id))
    if folder.scope == "archive":
        raise MemcliError(f"{mem.id} is archived; bring it back first: {o.hint('restore', mem.id)}")
    original = fsops.read_bytes(mem.path)
    draft = cache_dir(store.root, "edit", create=True) / mem.path.name
    fsops.write_replace(draft, original)
    editor = os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi"
    try:
        done = subprocess.run([*shlex.split(editor), str(draft)], check=False)
    except OSError as exc:
        raise MemcliError(f"cannot run the editor {editor!r} ({exc.strerror}); set $EDITOR") from None
    if done.returncode != 0:
        raise MemcliError(f"the editor {editor!r} exited with {done.returncode}; nothing was changed")
    raw = draft.read_bytes()
    try:
        result = memories.save_edit(store, mem.id, mem.content_hash, raw, o.wait)
    except BadRecordError as exc:
        raise MemcliError(f"{exc.path} was not changed: {'; '.join(exc.reasons)}. Your edit is kept in "
                          f"{draft}; fix it there and copy it over, or run edit again") from None
    draft.unlink()
    if o.json:
        emit_json({"id": result.id, "path": result.path, "changed": result.changed})
    elif not o.quiet:
        print(f"{'Saved' if result.changed else 'No change to'} {result.path}"
              + (" (checked and reindexed)" if result.changed else ""))


@app.command("list")
def list_(
    ctx: typer.Context,
    scope: str = typer.Option(None, "--scope", metavar="SCOPE", help="agent, team or global."),
    scope_id: str = typer.Option(None, "--scope-id", metavar="ID", help="An agent or team id."),
    type_: str = typer.Option(None, "--type", metavar="TYPE",
                              help="episodic, semantic, procedural or working."),
    subtype: str = typer.Option(None, "--subtype", metavar="SUBTYPE", help="Memory subtype."),
    tag: list[str] = typer.Option([], "--tag", metavar="TAG",
                                  help="Only memories with this tag (repeatable)."),
    archived: bool = typer.Option(False, "--archived", help="List the archive instead."),
    since: str = typer.Option(None, "--since", metavar="WHEN",
                              help="Only memories created since: 2026-11-01, 2026-11-01T08:00Z, 7d, 12h."),
    sort: str = typer.Option("folder", "--sort", metavar="ORDER",
                             help="folder (folders in order, newest first in each), created, updated, "
                                  "accessed or uses (newest, most used first)."),
    limit: int = typer.Option(0, "--limit", metavar="N", help="Show at most N memories (0 = all)."),
) -> None:
    """List memories: two lines each (id, folder, kind, uses; the summary). Over 10,000
    memories, a progress bar on a terminal while the folders are read.

    Example: memcli list --scope agent --scope-id coder --sort accessed --limit 20
    """
    from memcli.cli import readmain

    o = opts(ctx)
    readmain.run_list(FastOpts(o.store, o.json, o.quiet, o.wait), scope, scope_id, type_, subtype, list(tag),
                      archived, since, sort, limit)


@app.command()
def access(
    ctx: typer.Context,
    mem_id: str = typer.Argument(..., metavar="ID", help=ID_HELP),
    session: str = typer.Option(None, "--session", metavar="SESSION",
                                help="Count it once within this session id."),
) -> None:
    """Record a use of a memory: access_count + 1, last_accessed = now. Recorded at once
    (never waits for a running consolidation) and folded into the file by the next command
    that holds the store lock; every reader counts it from now on.

    Example: memcli access mem_01JD3Z7Q9K8V5T2N4M6P0R1S3A
    """
    from memcli.store import memories
    from memcli.store.model import now

    o = opts(ctx)
    store = o.open_store()
    result = memories.access_memory(store, memories.resolve_id(store, mem_id), now(), session)
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
    from memcli.cli.output import Progress, plural
    from memcli.recall import index as recall_index
    from memcli.store import memories

    o = opts(ctx)
    store = o.open_store()
    with store.writing(o.wait) as recovered, Progress(o.json or o.quiet) as progress:
        result = memories.reindex(store, progress)
    recall_index.after_run(store, list(result.folders))
    notes(recovered, o.quiet)
    warn(result.problems, o.quiet)
    if o.json:
        emit_json({"folders": result.folders, "memories": result.live, "archived": result.archived,
                   "problems": [str(p) for p in result.problems]})
    elif not o.quiet:
        print(f"Reindexed {plural(len(result.folders) - 1, 'folder')}: {plural(result.live, 'memory')}"
              f" (and {result.archived:,} archived)"
              + (f"; {plural(len(result.problems), 'problem')} above" if result.problems else ""))

