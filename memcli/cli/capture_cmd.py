"""`memcli capture` (a session transcript becomes an episodic memory), and the typer faces of
`memcli hook pre-compact` and `memcli hook capture-background` (the fast path serves both)."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from memcli.cli.common import app, emit_json, notes, opts
from memcli.cli.fast import FastOpts
from memcli.cli.integrations import hook_app


@app.command("capture")
def capture_cmd(
    ctx: typer.Context,
    transcript: Path = typer.Argument(..., metavar="TRANSCRIPT",
                                      help="The session's JSONL transcript (read, never changed)."),
    agent: str = typer.Option(None, "--agent", help="The agent whose folder gets the memory "
                              "(default: [recall] agent, else claude)."),
    session_id: str = typer.Option(None, "--session-id", help="The session's id, when the transcript "
                                   "does not say (default: the id it names, else its file name)."),
    llm: bool = typer.Option(None, "--llm/--no-llm", help="Let the LLM write the memory (default: "
                             "[llm] enabled)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Show the memory; write nothing."),
) -> None:
    """Turn one agent session's transcript into an episodic memory in agent/ID/ (subtype
    session, tags session and captured): its summary is the session's first request, its
    details say what happened, who was involved, the outcome and the key learnings (errors
    met and what fixed them). Secrets are masked. Reads Claude Code's JSONL transcripts,
    Codex CLI session rollouts and a minimal JSONL shape (see the README). Capturing the
    same session again updates its memory; each capture is a logged run that `memcli undo`
    takes back. A session with no request, or fewer than [capture] min_messages messages,
    is skipped.

    Example: memcli capture ~/.claude/projects/-home-me-webapp/3f2c9a10-....jsonl --agent coder
    """
    from memcli.capture import capture

    o = opts(ctx)
    result = capture.capture_transcript(o.open_store(), transcript, agent=agent, llm=llm, wait=o.wait,
                                        session_id=session_id, dry_run=dry_run)
    if o.json:
        emit_json(result.as_dict())
        return
    notes(result.notes)
    if o.quiet:
        if result.memory_id and not dry_run:
            print(result.memory_id)
        return
    if result.action in ("skipped", "unchanged", "protected"):
        print(f"{result.action.capitalize()}: {result.reason}.")
        return
    if dry_run and result.record is not None:
        print(f"Dry run: nothing was written. Would {result.action.removeprefix('would_')} "
              f"{result.memory_id} in {Path(result.path or '').parent}:\n")
        print(result.record["content"]["summary"] + "\n")
        print(result.record["content"]["details"])
        return
    print(f"{result.action.capitalize()} {result.memory_id} in {Path(result.path or '').parent} "
          f"(session {result.session_id}, {result.messages} messages, {result.method}).")
    print(f"Show it with: {o.hint('show', str(result.memory_id))}")
    print(f"Undo with: {o.hint('undo', str(result.run_id))}")


@hook_app.command("pre-compact", context_settings={"ignore_unknown_options": True,
                                                   "allow_extra_args": True})
def pre_compact_cmd(ctx: typer.Context) -> None:
    """For Claude Code's PreCompact hook: read the hook JSON on stdin and capture the session's
    transcript (as `memcli capture` does) in a detached background process, before the
    history leaves the context; the session's later capture updates the same memory. Returns
    at once and always exits 0; problems go to ops/hook.log. With --foreground the capture
    runs here (debugging).

    Example: echo '{"transcript_path": "/home/me/.claude/projects/p/s.jsonl"}' | memcli hook pre-compact
    """
    from memcli.cli import capturemain

    o = opts(ctx)
    capturemain.pre_compact(FastOpts(o.store, o.json, o.quiet, o.wait), list(ctx.args))


@hook_app.command("capture-background", hidden=True, context_settings={"ignore_unknown_options": True,
                                                                       "allow_extra_args": True})
def capture_background_cmd(ctx: typer.Context) -> None:
    """Internal: the capture that `hook pre-compact` starts, logging to ops/hook.log.

    Example: memcli --store /abs/store hook capture-background --transcript /abs/s.jsonl --session-id s
    """
    from memcli.cli import capturemain

    o = opts(ctx)
    capturemain.capture_background(FastOpts(o.store, o.json, o.quiet, o.wait), list(ctx.args))
    sys.stdout.flush()
