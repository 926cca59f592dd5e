"""`memcli list` and `memcli show` as the fast path serves them: no typer (whose option
parsing imports pydantic, a quarter of a second), rich or numpy. People and agents run them
often, so their start-up is most of what they cost. The typer commands (for `--help`, and
for anything this parser does not take, which typer then explains) render through the same
functions, so the output is the same whichever path served it.
"""

from __future__ import annotations

import sys
from typing import Any

from memcli.cli.fast import FastOpts
from memcli.errors import MemcliError

_LIST_VALUES = {"--scope": "scope", "--scope-id": "scope_id", "--type": "type", "--subtype": "subtype",
                "--since": "since", "--sort": "sort", "--limit": "limit", "--tag": "tag"}
_LIST_FLAGS = {"--archived": "archived"}


def parse_list(args: list[str]) -> dict[str, Any] | None:
    """`list`'s options as typer would read them, or None for anything else (typer then
    gives the usage error, exit 2)."""
    found: dict[str, Any] = {"tag": [], "archived": False, "sort": "folder", "limit": 0}
    i = 0
    while i < len(args):
        name, eq, value = args[i].partition("=")
        if name in _LIST_FLAGS and not eq:
            found[_LIST_FLAGS[name]] = True
        elif name in _LIST_VALUES:
            if not eq:
                if i + 1 >= len(args):
                    return None
                i += 1
                value = args[i]
            key = _LIST_VALUES[name]
            if key == "tag":
                found["tag"].append(value)
            elif key == "limit":
                try:
                    found["limit"] = int(value)
                except ValueError:
                    return None
            else:
                found[key] = value
        else:
            return None
        i += 1
    return found


def list_fast(opts: FastOpts, args: list[str]) -> int | None:
    parsed = parse_list(args)
    if parsed is None:
        return None
    return guarded(opts, lambda: run_list(opts, **parsed))


def show_fast(opts: FastOpts, args: list[str]) -> int | None:
    if len(args) != 1 or args[0].startswith("-"):
        return None
    return guarded(opts, lambda: run_show(opts, args[0]))


def guarded(opts: FastOpts, action: Any) -> int:
    """Errors as `memcli.cli.common` renders them for typer commands."""
    from memcli.cli.output import degrade_streams, emit_json

    degrade_streams()
    try:
        action()
        sys.stdout.flush()
        return 0
    except MemcliError as exc:
        message, code = str(exc), exc.exit_code
    except BrokenPipeError:
        raise  # `memcli.cli.main` answers it: exit 0
    except OSError as exc:  # permissions, a full disk: the user's to fix, not a traceback
        from memcli.cli.output import os_error_message

        message, code = os_error_message(exc), 1
    if opts.json:
        emit_json({"error": message})
    else:
        sys.stderr.write(f"Error: {message}\n")
    return code


def warn(problems: list[Any], quiet: bool = False) -> None:
    """Bad files skipped, on stderr: each names the file and the reason."""
    for problem in problems:
        if quiet and problem.severity != "error":
            continue
        sys.stderr.write(f"{'warning' if problem.severity == 'warning' else 'skipped'}: {problem}\n")


# ---------------------------------------------------------------- list


def run_list(opts: FastOpts, scope: str | None = None, scope_id: str | None = None, type: str | None = None,
             subtype: str | None = None, tag: list[str] | None = None, archived: bool = False,
             since: str | None = None, sort: str = "folder", limit: int = 0) -> None:
    from memcli.cli.output import Progress, emit_json
    from memcli.store import memories
    from memcli.store.model import now
    from memcli.store.store import Store

    if limit < 0:
        raise MemcliError("--limit must be 0 (all) or more")
    flt = memories.ListFilter(scope, scope_id, type, subtype, list(tag or []), archived,
                              memories.parse_since(since, now()) if since else None, sort, limit)
    store = Store.open(opts.store)
    with Progress(opts.json or opts.quiet, min_total=10_000) as progress:
        listing = memories.list_view(store, flt, progress)
    warn(listing.problems, opts.quiet)
    if opts.json:
        emit_json({"memories": listing.entries, "count": len(listing.entries), "matched": listing.matched})
    elif opts.quiet:
        sys.stdout.write("".join(e["id"] + "\n" for e in listing.entries))
    else:
        render_list(listing, archived)


def render_list(listing: Any, archived: bool) -> None:
    """Plain lines, written as they come (100,000 memories print in seconds, not a table
    built in memory): the id never wraps; the summary is cut to the width with an ellipsis."""
    from memcli.cli.output import ellipsize, plural, width
    from memcli.cli.report import pack

    cols = max(width(), 40)
    out = sys.stdout
    for e in listing.entries:
        where = (e.get("from") or e["folder"]) if archived else e["folder"]
        last = (e.get("last_accessed") or "never")[:10]
        uses = f"{plural(int(e.get('access_count') or 0), 'use')}, last {last}"
        kind = f"{e.get('type')}/{e.get('subtype') or '-'}"
        head = "\n    ".join(pack([e["id"], where, kind, uses], cols - 4))
        tags = ", ".join(e.get("tags") or [])
        text = (e.get("summary") or "") + (f" [{tags}]" if tags else "")
        out.write(f"{head}\n  {ellipsize(text, cols - 2)}\n")
    shown = len(listing.entries)
    kind = "archived memories" if archived else "memories"
    tail = f"{shown:,} {kind}" if shown == listing.matched else (
        f"{shown:,} of {listing.matched:,} {kind} (--limit 0 for all)")
    out.write(("\n" if shown else "") + tail + "\n")


# ---------------------------------------------------------------- show


def run_show(opts: FastOpts, mem_id: str) -> None:
    from memcli.cli.output import emit_json
    from memcli.store import memories
    from memcli.store.formats import encode
    from memcli.store.store import Store

    store = Store.open(opts.store)
    mem, folder, record = memories.show_memory(store, memories.resolve_id(store, mem_id))
    if opts.json:
        emit_json({"memory": record, "folder": folder.rel, "path": str(mem.path),
                   "archived": folder.scope == "archive"})
        return
    if not opts.quiet:
        sys.stdout.write(f"{mem.id}  ({folder.rel}, {mem.fmt})\n")
    sys.stdout.write(encode(record, "md").decode().rstrip("\n") + "\n")
