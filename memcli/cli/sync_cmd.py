"""`memcli sync`: share the store through git (SPEC 13)."""

from __future__ import annotations

import sys

import typer

from memcli.cli.common import app, emit_json, notes, opts


@app.command()
def sync(
    ctx: typer.Context,
    remote: str = typer.Option(None, "--remote",
                               help="Remote to sync with (default: the branch's, else origin)."),
) -> None:
    """Share the store through its git repository: commit the store's changes (one commit per
    consolidation run, naming its run id), fetch, merge through memcli's merge drivers (a
    memory changed on both sides keeps one version live and the other beside it, queued for
    review), push, and check the store with doctor. Refuses, changing nothing, without a
    repository, on a detached HEAD or during a rebase or merge; a rejected push keeps every
    commit here. Exits 1 while doctor finds an error.

    Example: memcli sync      memcli sync --remote origin --json
    """
    from memcli.sync import sync as sync_core

    o = opts(ctx)
    result = sync_core.sync(o.open_store(), remote, o.wait)
    if o.json:
        emit_json(result.to_json())
    else:
        notes(result.notes)
        if not o.quiet:
            for subject in result.commits:
                print(f"committed: {subject}")
            for item in result.resolutions:
                beside = f" (other version: {item['kept']})" if item["kept"] else ""
                print(f"resolved {item['path']}: {item['how']}{beside}")
            if result.queued:
                print(f"{result.queued} item(s) queued for review: memcli review list")
            where = f"{result.remote}/{result.branch}" if result.remote else "no remote"
            print(f"Synced with {where}" + ("; pushed" if result.pushed else ""))
        for problem in result.problems:
            sys.stderr.write(f"doctor: {problem}\n")
    if not result.doctor_ok:
        raise typer.Exit(1)


@app.command("merge-driver", hidden=True)
def merge_driver(args: list[str] = typer.Argument(None, metavar="KIND BASE OURS THEIRS PATH")) -> None:
    """The merge driver git runs for memcli's own files (`init` and `sync` register it in the
    repository's config; the fast path serves it, this is its help). KIND is `index` or `ops`.
    Exits 0 with the merged file written over OURS, 1 to leave a conflict to git.

    Example: memcli merge-driver ops %O %A %B %P
    """
    from memcli.sync import drivers

    raise typer.Exit(drivers.run_driver(args or []))
