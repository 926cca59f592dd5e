"""A run's report as people read it, at any size: the summary and counts first, then at most
a screenful of actions grouped by kind (every action with `--all`; the full list is always in
`--json` and the log). Plain text wrapped to the terminal: an id is never split across lines,
and nothing here needs rich or more than ASCII.
"""

from __future__ import annotations

import shutil
import sys
import textwrap
from collections.abc import Iterable
from typing import Any

from memcli.cli.output import ellipsize, plural

# Kinds in the order a run applies them (SPEC 3), with how a heading names them.
KINDS = (("merge", "merge"), ("flag", "flag for review"), ("keep_separate", "keep apart"),
         ("summarize", "summarise"), ("promote", "promote"), ("archive", "archive"),
         ("skip", "skipped"))
PROTECTED_WHY = {"critical": "priority critical", "permanent": "tag permanent",
                 "protected_tag": "tag protected", "user_without_consent": "USER without consent",
                 "decision": "semantic decision", "fresh": "younger than min_age_days"}
HEAD_LINES = 12  # the summary, durations, hints: what a screen keeps besides the actions


def wrap(text: str, width: int, indent: str = "") -> list[str]:
    """`text` wrapped to `width` columns; words (ids) are never broken, a long one overflows."""
    return textwrap.wrap(text, width=max(width, 20), initial_indent=indent, subsequent_indent=indent,
                         break_long_words=False, break_on_hyphens=False) or [indent.rstrip()]


def summary_lines(outcome: Any, width: int, wall_ms: int | None = None) -> list[str]:
    """What the run did (or would do), in counts, before any list."""
    stats = outcome.stats
    verb = "Would" if outcome.dry_run else "Did"
    did = [f"merge {plural(stats.get('memories_merged', 0), 'memory')} into others"
           if stats.get("memories_merged") else "",
           f"summarise {stats['memories_summarized']}" if stats.get("memories_summarized") else "",
           f"promote {stats['memories_promoted']}" if stats.get("memories_promoted") else "",
           f"archive {stats['memories_archived']} stale" if stats.get("memories_archived") else "",
           f"flag {stats['flagged']} for review" if stats.get("flagged") else ""]
    did = [d for d in did if d]
    lines = wrap(f"{verb}: {', '.join(did)}." if did else f"{verb}: nothing to change.", width)
    counted = [f"{stats['memory_count']:,} memories after the run" if "memory_count" in stats else ""]
    if "protected" in stats:
        why = ", ".join(f"{n:,} {PROTECTED_WHY.get(r, r)}" for r, n in
                        sorted(getattr(outcome, "protected", {}).items(), key=lambda kv: -kv[1]))
        counted.append(f"{stats['protected']:,} protected" + (f" ({why})" if why else ""))
    if stats.get("skipped"):
        counted.append(f"{stats['skipped']:,} skipped (changed during the run)")
    if stats.get("deferred"):
        counted.append(f"{stats['deferred']:,} deferred by max_per_run")
    lines += wrap("; ".join(c for c in counted if c) + ".", width)
    if "plan_ms" in stats:
        lines += wrap(f"Time: plan {_secs(stats['plan_ms'])}, apply {_secs(stats.get('apply_ms', 0))}"
                      + (" (dry run)" if outcome.dry_run else "")
                      + (f", wall {_secs(wall_ms)}" if wall_ms else "")
                      + ".", width)
    elif "duration_ms" in stats:
        lines += [f"Time: {_secs(stats['duration_ms'])}."]
    return lines


def _secs(ms: int | float) -> str:
    return f"{ms / 1000:.2f} s" if ms < 10_000 else f"{ms / 1000:.1f} s"


def _ids(action: dict[str, Any]) -> list[str]:
    ids = action.get("source_ids") or action.get("memory_ids") or [action.get("memory_id")]
    return [str(i) for i in (ids if isinstance(ids, list) else [ids]) if i and i != action.get("result_id")]


def pack(tokens: list[str], width: int, indent: str = "") -> list[str]:
    """Tokens (an id, or "-> id") two spaces apart, as many to a line as fit; a token is
    never split, so an id too long for the line overflows it whole."""
    lines: list[str] = []
    line = ""
    for token in tokens:
        if line and len(indent) + len(line) + 2 + len(token) > width:
            lines.append(indent + line)
            line = token
        else:
            line = f"{line}  {token}" if line else token
    return lines + ([indent + line] if line else [])


def action_lines(action: dict[str, Any], why: str, width: int, full: bool = True) -> list[str]:
    """One action: its ids (each whole, as many to a line as fit), then why, indented: all
    of it (`full`), or its first line cut to the width."""
    tokens = _ids(action)
    if action.get("result_id"):
        tokens.append(f"-> {action['result_id']}")
    lines = pack(tokens, width, "  ")
    parts = [p.strip() for p in (why or str(action.get("reason") or "")).split("\n") if p.strip()]
    if not full:
        return lines + ([f"      {ellipsize(parts[0], max(width - 6, 10))}"] if parts else [])
    for part in parts:
        lines += wrap(part, width, "      ")
    return lines


def group(outcome: Any) -> dict[str, list[tuple[dict[str, Any], str]]]:
    """Actions by kind, in rule order; each with its why."""
    whys = list(outcome.whys) + [""] * (len(outcome.actions) - len(outcome.whys))
    groups: dict[str, list[tuple[dict[str, Any], str]]] = {}
    for action, why in zip(outcome.actions, whys, strict=False):
        groups.setdefault(str(action.get("type")), []).append((action, why))
    order = [k for k, _ in KINDS if k in groups] + sorted(k for k in groups if k not in dict(KINDS))
    return {k: groups[k] for k in order}


def actions_lines(outcome: Any, width: int, budget: int | None) -> tuple[list[str], int]:
    """The actions grouped by kind, within `budget` lines (None: all). Every kind gets its
    heading and a share of the budget; what does not fit is counted. Returns the lines and
    how many actions were left out."""
    groups = group(outcome)
    names = dict(KINDS)
    rendered = {k: [action_lines(a, w, width) for a, w in items] for k, items in groups.items()}
    full = sum(len(r) for items in rendered.values() for r in items) + len(rendered)
    if budget is not None and full > budget:
        rendered = {k: [action_lines(a, w, width, full=False) for a, w in items]  # the short form
                    for k, items in groups.items()}
    else:
        budget = None  # everything fits at full length
    if budget is None:
        shares = {k: len(items) for k, items in rendered.items()}
    else:
        shares = _shares({k: [len(r) for r in items] for k, items in rendered.items()}, budget)
    lines: list[str] = []
    hidden = 0
    for kind, items in rendered.items():
        lines.append(f"{names.get(kind, kind)} ({len(items):,}):")
        for item in items[:shares[kind]]:
            lines += item
        left = len(items) - shares[kind]
        if left > 0:
            hidden += left
            lines.append(f"  ... and {plural(left, 'more ' + names.get(kind, kind) + ' action')}")
    return lines, hidden


def _shares(sizes: dict[str, list[int]], budget: int) -> dict[str, int]:
    """How many actions of each kind fit in `budget` lines: round-robin, one action of each
    kind at a time, so that no kind crowds out the others."""
    room = budget - len(sizes)  # a heading each
    room -= sum(1 for items in sizes.values() if sum(items) > room // max(len(sizes), 1))  # "... and N more"
    shares = dict.fromkeys(sizes, 0)
    moved = True
    while moved:
        moved = False
        for kind, items in sizes.items():
            n = shares[kind]
            if n < len(items) and items[n] <= room:
                room -= items[n]
                shares[kind] = n + 1
                moved = True
    return shares


def screen_budget() -> int:
    """Lines of actions that fit on one screen with the summary around them. Not on a
    terminal (a pager, a file), a screen counts 50 lines unless LINES says otherwise."""
    fallback = 50 if not sys.stdout.isatty() else 24
    return max(shutil.get_terminal_size((80, fallback)).lines - HEAD_LINES, 12)


def archive_share(outcome: Any, folder_sizes: dict[str, int], folder_of: dict[str, str]) -> list[str]:
    """Folders where the run would move more than half the live memories to the archive
    (stale or merged away): a warning line each."""
    moved: dict[str, int] = {}
    for action in outcome.actions:
        if action.get("type") == "archive":
            ids: Iterable[Any] = [action.get("memory_id")]
        elif action.get("type") == "merge":
            ids = [i for i in action.get("source_ids") or [] if i != action.get("result_id")]
        else:
            continue
        for mem_id in ids:
            rel = folder_of.get(str(mem_id))
            if rel is not None:
                moved[rel] = moved.get(rel, 0) + 1
    return [f"{rel}: {n:,} of {folder_sizes[rel]:,} live memories would go to the archive"
            for rel, n in sorted(moved.items()) if folder_sizes.get(rel) and n * 2 > folder_sizes[rel]]
