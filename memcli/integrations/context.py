"""Putting memories into an agent's context (SPEC 11): Claude Code's SessionStart and
UserPromptSubmit hooks.

`session_start` prints a briefing of the agent's most useful memories (critical and
protected first, then by use, then the most recent), at most `[recall] briefing_chars`;
`prompt` prints the up to `[recall] prompt_limit` memories that recall ranks above
`[recall] min_score` for the prompt, leaving out those this session already has. Both print
`{"hookSpecificOutput": {"hookEventName": ..., "additionalContext": TEXT}}` or nothing,
record a use for each memory put in (once per session), append one line per injection to
`ops/recall-log.jsonl`, and never fail the session: every problem goes to `ops/hook.log` and
the exit code is 0. Neither takes more than `[recall] hook_budget_ms` from the process's start:
the work runs in a thread the hook stops waiting for at the budget (it then prints nothing).

The briefing needs no search index (`memcli.recall.briefing` reads the folders' indices
when there is none yet), so the first session of a store gets one; a prompt does need it.
When it is missing or behind the files, the hook starts a detached `memcli hook recall-warm`
that builds it for the prompts that follow; the prompt hook prints nothing until it exists.

Start-up is most of a hook's cost: this module and what it imports on the way to an answer
use the standard library's cheaper parts, `tantivy`, and memcli's lean read path
(`memcli.recall.place`, `.index`, `.search`, `.briefing`, `.uses`); the store's machinery
(`memcli.store.store`, `memcli.config`, yaml, orjson) is imported only when the search
index must be synced or the settings read again (a test checks the modules of a hook).
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time

from memcli.integrations import hooks

TYPE_CHECKING = False
if TYPE_CHECKING:
    import subprocess
    from typing import IO, Any

    from memcli.recall.place import Place

LOG_NAME = "recall-log.jsonl"
MAX_PROMPT = 20_000
_children: list[subprocess.Popen[bytes]] = []


class HookRequest:
    """The fields of Claude Code's hook JSON that these hooks use."""

    __slots__ = ("session_id", "cwd", "prompt", "source", "notes")

    def __init__(self) -> None:
        self.session_id: str | None = None
        self.cwd: str | None = None
        self.prompt: str | None = None
        self.source: str | None = None
        self.notes: list[str] = []


class Injection:
    """What a hook puts into the session: the text and the memories in it."""

    __slots__ = ("event", "text", "ids")

    def __init__(self, event: str, text: str, ids: list[str]) -> None:
        self.event = event
        self.text = text
        self.ids = ids

    def output(self) -> str:
        import json

        return json.dumps({"hookSpecificOutput": {"hookEventName": self.event,
                                                  "additionalContext": self.text}})


def started_at() -> float:
    """When this process started, on the monotonic clock (Linux: /proc); else now."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        with open("/proc/self/stat", "rb") as handle:
            fields = handle.read().rsplit(b")", 1)[1].split()
        with open("/proc/uptime", "rb") as handle:
            uptime = float(handle.read().split()[0])
        age = uptime - int(fields[19]) / os.sysconf("SC_CLK_TCK")
        if 0 <= age < 60:
            return time.monotonic() - age
    return time.monotonic()


def parse_request(raw: bytes, truncated: bool) -> HookRequest:
    """The fields of the hook JSON that these hooks use; anything else ignored. The standard
    library's parser, behind the session-end hook's nesting check."""
    import json

    req = HookRequest()
    if truncated or not raw.strip():
        if truncated:
            req.notes.append("hook input too large; ignored it")
        return req
    if hooks._too_deep(raw):
        req.notes.append("hook input nests too deep; ignored it")
        return req
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        req.notes.append("hook input is not JSON; ignored it")
        return req
    if not isinstance(data, dict):
        req.notes.append("hook input is not a JSON object; ignored it")
        return req
    for name, limit in (("session_id", 300), ("cwd", 4096), ("source", 100)):
        value = data.get(name)
        if isinstance(value, str) and len(value) <= limit and "\x00" not in value:
            setattr(req, name, value)
    prompt = data.get("prompt")
    if isinstance(prompt, str):
        req.prompt = prompt[:MAX_PROMPT]
    return req


# ---------------------------------------------------------------- the two hooks


def run_hook(event: str, explicit: str | None, stream: IO[Any] | None, agent: str | None,
             out: IO[str], start: float | None = None) -> Injection | None:
    """Serve one hook: `event` is "SessionStart" or "UserPromptSubmit". Prints the
    injection (or nothing) to `out` within the budget; never raises."""
    start = started_at() if start is None else start
    try:
        opened = _open(event, explicit, stream)
    except Exception:  # noqa: BLE001 - a hook never fails the session
        return None
    if opened is None:
        return None
    place, request = opened
    root = place.root
    deadline = start + place.recall["hook_budget_ms"] / 1000
    box: dict[str, Any] = {}

    def work() -> None:
        try:
            box["result"] = _inject(event, place, request, agent, box)
        except Exception as exc:  # a hook never fails the session: logged below
            why = f"{type(exc).__name__}: {hooks.clean(exc, 300)}"
            hooks.log(root, f"{event}: failed ({why}); printed nothing")

    worker = threading.Thread(target=work, daemon=True)
    worker.start()
    while worker.is_alive() and time.monotonic() < deadline:
        worker.join(max(deadline - time.monotonic(), 0.001))
    if worker.is_alive() or time.monotonic() > deadline:  # over budget: print nothing
        hooks.log(root, f"{event}: over the {int((deadline - start) * 1000)} ms budget; printed nothing "
                        "(and started `memcli hook recall-warm` to bring the search index in line)")
        _spawn_warm(root)
        return None
    injection = box.get("result")
    if injection is not None:
        with contextlib.suppress(OSError, ValueError):
            out.write(injection.output() + "\n")
            out.flush()
        _record(root, request, injection)
    if box.get("warm"):
        _spawn_warm(root)
    return injection  # type: ignore[no-any-return]


def _open(event: str, explicit: str | None, stream: IO[Any] | None) -> tuple[Place, HookRequest] | None:
    """The hook's input and the store with its settings (the budget is one of them)."""
    from memcli.recall.place import Place

    request = parse_request(*hooks.read_input(stream, timeout=0.1))
    root, _looked, _notes = hooks.find_store_dir(explicit, request.cwd)
    if root is None:
        return None
    for note in request.notes:
        hooks.log(root, f"{event}: {note}")
    try:
        return Place.open(root), request
    except Exception as exc:  # bad settings: said in the log, nothing printed
        hooks.log(root, f"{event}: {hooks.clean(exc, 300)}; printed nothing")
        return None


def _inject(event: str, place: Place, request: HookRequest, agent: str | None,
            box: dict[str, Any]) -> Injection | None:
    from pathlib import Path

    from memcli.recall import index as rindex
    from memcli.recall import uses
    from memcli.recall.place import is_valid_scope_id

    root = place.root
    agent = agent or place.recall["agent"] or "claude"
    if not is_valid_scope_id(agent):
        hooks.log(root, f"{event}: bad agent id {hooks.clean(agent)!r}; printed nothing")
        return None
    session = uses.clean_session(request.session_id)
    had = uses.used_in_session(Path(root), session) if session else set()
    if event == "SessionStart":
        source: list[str] = []
        ids, text = briefing(place, agent, place.recall["briefing_chars"], had, source)
        box["warm"] = source == ["folder-indices"]  # build the search index for the prompts
    else:
        if rindex.current(Path(root)) is None:  # a first build may take seconds: not in the session's time
            box["warm"] = True
            return None
        ids, text = _prompt_context(place, request.prompt or "", agent, had)
    if not ids:
        return None
    return Injection(event, text, ids)


def briefing(place: Place, agent: str, limit: int, skip: set[str] | None = None,
             source: list[str] | None = None) -> tuple[list[str], str]:
    """The agent's most useful memories as lines of text, at most `limit` characters."""
    from pathlib import Path

    from memcli.recall import briefing as rbrief
    from memcli.recall import uses

    rels = place.view(agent)
    if not rels:
        return [], ""
    rows = rbrief.most_useful(place, rels, skip or set(), uses.pending(Path(place.root)), source)
    head = f"Memories from memcli for agent {agent} (most useful first; the `recall` tool finds more):"
    lines: list[str] = []
    ids: list[str] = []
    used = len(head)
    for row in rows:
        line = f"\n- {_line(row)}"
        if used + len(line) > limit:
            break
        lines.append(line)
        ids.append(row["id"])
        used += len(line)
    return ids, head + "".join(lines) if ids else ""


def _prompt_context(place: Place, prompt: str, agent: str, had: set[str]) -> tuple[list[str], str]:
    from memcli.recall import search

    limit, min_score = place.recall["prompt_limit"], place.recall["min_score"]
    if limit == 0 or not prompt.strip():
        return [], ""
    try:
        results = search.recall(place, prompt, agent, limit=limit + len(had))
    except search.EmptyQueryError:
        return [], ""
    picked = [r for r in results if r.score > min_score and r.id not in had][:limit]
    if not picked:
        return [], ""
    rows = [{"id": r.id, "summary": r.summary, "type": r.type, "subtype": r.subtype,
             "folder": r.path.rsplit("/", 1)[0]} for r in picked]
    head = "Memories from memcli that may help with this prompt:"
    text = head + "".join(f"\n- {_line(row)}" for row in rows)
    return [r.id for r in picked], text


def _line(row: dict[str, Any]) -> str:
    summary = " ".join(str(row.get("summary") or "").split())[:300]
    kind = f"{row.get('type')}/{row.get('subtype')}" if row.get("subtype") else str(row.get("type"))
    return f"[{row['id']}] ({kind}, {row.get('folder')}) {summary}"


def _record(root: str, request: HookRequest, injection: Injection) -> None:
    """Uses for what was put in, and one line in ops/recall-log.jsonl. Never raises."""
    from pathlib import Path

    from memcli.recall import uses

    try:
        moment = uses.now()
        uses.record(Path(root), injection.ids, request.session_id, moment)
        append_log(Path(root), {"timestamp": uses.format_ts(moment), "session_id": request.session_id,
                                "event": injection.event, "memory_ids": injection.ids})
    except Exception as exc:
        hooks.log(root, f"{injection.event}: could not record the uses ({hooks.clean(exc, 200)})")


def append_log(root: Any, line: dict[str, Any]) -> None:
    import json

    from memcli.store import fsops

    path = root / "ops" / LOG_NAME
    if not path.exists():
        fsops.ensure_parent(path)
        with contextlib.suppress(FileExistsError):
            fsops.write_new(path, b"")
    fsops.append(path, json.dumps(line, separators=(",", ":")).encode() + b"\n")


def _spawn_warm(root: str) -> None:
    """Bring the search index in line in a detached process (nobody waits for it)."""
    import subprocess

    with contextlib.suppress(OSError):
        cmd = [sys.executable, "-m", "memcli", "--store", str(root), "hook", "recall-warm"]
        _children.append(subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                          stderr=subprocess.DEVNULL, cwd=root, start_new_session=True,
                                          close_fds=True))


def warm(root: Any) -> None:
    """`memcli hook recall-warm`: build or sync the search index for every live folder."""
    from memcli.recall import index as rindex
    from memcli.store.store import Store

    store = Store(root)
    try:
        rindex.ready(store, [f.rel for f in store.memory_folders()], [], wait=60)
    except Exception as exc:
        hooks.log(root, f"recall-warm: failed ({hooks.clean(exc, 300)})")
