"""`memcli sync`: share the store through git (SPEC 13)."""

from __future__ import annotations

import sys

import typer

from memcli.cli.common import app, emit_json, notes, opts
from memcli.sync import sync as sync_core


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
