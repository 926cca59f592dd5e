"""`memcli llm trust|untrust`: approve, on this machine, the store's `[llm] command`
(see `memcli.consolidate.llm_trust` for why a shared setting needs a local approval)."""

from __future__ import annotations

import typer

from memcli.cli.common import app, emit_json, opts, sub_app

llm_app = sub_app("The optional LLM: approve its command on this machine.")
app.add_typer(llm_app, name="llm")


@llm_app.command("trust")
def trust_cmd(ctx: typer.Context) -> None:
    """Approve the store's `[llm] command` on this machine, as it reads now. memcli.toml may
    come from a shared repository: a command runs only once someone here approved it, and a
    changed command needs approving again. Look at what it runs before you approve it.

    Example: memcli llm trust
    """
    from memcli.consolidate import llm_trust
    from memcli.errors import ConfigError
    from memcli.store.model import format_ts, now

    o = opts(ctx)
    store = o.open_store()
    argv = store.settings.llm.command
    if not argv:
        raise ConfigError(f"{store.root / 'memcli.toml'}: no [llm] command to approve "
                          "(set `command` in its [llm] section first)")
    added = llm_trust.trust(store.root, argv, format_ts(now()))
    if o.json:
        emit_json({"command": list(argv), "digest": llm_trust.command_digest(argv), "new": added})
    elif not o.quiet:
        typer.echo(("Approved on this machine: " if added else "Already approved here: ") + repr(list(argv)))


@llm_app.command("untrust")
def untrust_cmd(ctx: typer.Context) -> None:
    """Withdraw every approval of an `[llm] command` on this machine; later runs are
    rule-based (or use the API key) until `memcli llm trust` again.

    Example: memcli llm untrust
    """
    from memcli.consolidate import llm_trust

    o = opts(ctx)
    count = llm_trust.untrust(o.open_store().root)
    if o.json:
        emit_json({"withdrawn": count})
    elif not o.quiet:
        typer.echo(f"Withdrew {count} approval(s).")
