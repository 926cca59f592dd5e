"""Recall commands: recall, mcp, forget, and the context hooks (SPEC 10 and 11). The fast
path (`memcli.cli.recallmain`) serves `recall` and the hooks; these typer commands exist so
that `--help` lists them, and call the same handlers."""

from __future__ import annotations

import sys

import typer

from memcli.cli.common import app, emit_json, opts
from memcli.cli.fast import FastOpts
from memcli.cli.integrations import hook_app


@app.command("recall")
def recall_cmd(
    ctx: typer.Context,
    query: list[str] = typer.Argument(None, metavar="QUERY", help="What the memory is about."),
    agent: str = typer.Option(None, "--agent", help="This agent's view: its folder, team's, global."),
    limit: int = typer.Option(None, "--limit", help="How many results (default [recall] limit, 5)."),
    session: str = typer.Option(None, "--session", help="Count each memory once within this session id."),
) -> None:
    """Find the memories an agent would want for QUERY, best first (its own folder, its
    team's and global with --agent; every live folder without). Each result counts as a use
    (once per --session). Handles code identifiers (snake_case, CamelCase, paths, versions),
    word forms and tags. An empty query, or one of only common words, exits 1.

    Example: memcli recall "how do we deploy to staging" --agent coder --json
    """
    from memcli.cli import recallmain

    o = opts(ctx)
    code = recallmain.run_recall(FastOpts(o.store, o.json, o.quiet, o.wait), " ".join(query or []),
                                 agent, limit, session)
    raise typer.Exit(code)


@app.command("mcp")
def mcp_cmd(ctx: typer.Context) -> None:
    """Serve the Model Context Protocol on stdio, with the tools recall, remember, show and
    forget (SPEC 10). One connection is one session: a memory counts once per connection.

    Example (Claude Code's .mcp.json): {"mcpServers": {"memcli": {"command": "memcli",
    "args": ["--store", "/home/you/agent-memory", "mcp"]}}}
    """
    o = opts(ctx)
    from memcli.integrations import mcp_server

    mcp_server.serve(o.open_store().root, o.wait)


@app.command("forget")
def forget_cmd(
    ctx: typer.Context,
    mem_id: str = typer.Argument(..., metavar="ID", help="A memory id, or a unique prefix of one."),
    reason: str = typer.Option(None, "--reason", metavar="TEXT", help="Why (default: forgotten)."),
) -> None:
    """Archive a memory on purpose (archive reason `forgotten`, or --reason). Logged as a run
    (trigger `forget`) that `memcli undo` reverses; `memcli restore ID` brings it back.

    Example: memcli forget mem_01JD3Z7Q9K8V5T2N4M6P0R1S3A --reason "wrong: staging moved"
    """
    from memcli.store import memories

    o = opts(ctx)
    store = o.open_store()
    mem_id = memories.resolve_id(store, mem_id)
    outcome = memories.forget_memory(store, mem_id, reason, o.wait)
    if not o.quiet:
        for note in outcome.notes:
            sys.stderr.write(f"note: {note}\n")
    if o.json:
        emit_json(outcome.to_json())
    elif o.quiet:
        print(outcome.run_id)
    else:
        print(f"Forgot {mem_id} (archived; run {outcome.run_id}; to bring it back: "
              f"{o.hint('restore', mem_id)})")


_HOOK_SETTINGS = {"ignore_unknown_options": True, "allow_extra_args": True}


@hook_app.command("session-start", context_settings=_HOOK_SETTINGS)
def session_start_cmd(ctx: typer.Context) -> None:
    """For Claude Code's SessionStart hook: read the hook JSON on stdin and print a briefing
    of the agent's most useful memories as additionalContext (at most [recall]
    briefing_chars). Agent: --agent ID, else [recall] agent, else claude. Always exits 0,
    within [recall] hook_budget_ms; uses and ops/recall-log.jsonl record what it put in.

    Example: echo '{"session_id": "s1", "cwd": "'$PWD'"}' | memcli hook session-start --agent coder
    """
    from memcli.cli import recallmain

    o = opts(ctx)
    raise typer.Exit(recallmain.session_start(FastOpts(o.store, o.json, o.quiet, o.wait), list(ctx.args)))


@hook_app.command("prompt", context_settings=_HOOK_SETTINGS)
def prompt_cmd(ctx: typer.Context) -> None:
    """For Claude Code's UserPromptSubmit hook: read the hook JSON (its `prompt`) on stdin
    and print, as additionalContext, the up to [recall] prompt_limit memories recall ranks
    above [recall] min_score for it (none this session already has), or nothing. Always
    exits 0, within [recall] hook_budget_ms.

    Example: echo '{"session_id": "s1", "prompt": "how do I deploy?"}' | memcli hook prompt
    """
    from memcli.cli import recallmain

    o = opts(ctx)
    raise typer.Exit(recallmain.prompt(FastOpts(o.store, o.json, o.quiet, o.wait), list(ctx.args)))
