"""Capture: a session transcript becomes one episodic memory (SPEC 12).

`capture_transcript` reads the transcript as a stream (`transcript`), digests it
(`session`), writes the memory's text (`render`, or the LLM when it is on,
falling back to that text), masks every secret, and writes the memory to the agent's
folder as a logged run with trigger `capture`: the same journaled, locked, atomic path as a
consolidation run, so `memcli undo RUN_ID` takes a capture back (a memory it created moves
to the archive, a memory it updated gets its earlier bytes back).

One memory per session: the memory is found again by `source.session_id`, and capturing
the session again (after it was resumed, or at SessionEnd after a PreCompact capture)
updates it. A transcript that is shorter than what the memory was made from (fewer
messages) never overwrites it, and the same text again changes nothing (no run).

`capture_from_hook` is what the hooks call: it never raises and returns one line for
`ops/hook.log`.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
import traceback
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memcli.capture import render as capture_render
from memcli.capture import transcript
from memcli.capture.session import Session
from memcli.config import Settings
from memcli.errors import MemcliError
from memcli.secrets import Masker, contains_secret, redact
from memcli.store.formats import encode
from memcli.store.model import Memory, format_ts, new_memory_id, new_run_id, now, sha256
from memcli.store.plans import Action, FileOp, Plan
from memcli.store.store import Folder, Store, is_valid_scope_id

SUBTYPE = "session"
TAGS = ("session", "captured")
_SAFE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")


@dataclass
class CaptureResult:
    """What a capture did: `action` is created, updated, unchanged, skipped or protected
    (and with --dry-run: would_create, would_update)."""

    action: str
    session_id: str | None = None
    memory_id: str | None = None
    path: str | None = None
    run_id: str | None = None
    method: str | None = None
    reason: str = ""
    messages: int = 0
    requests: int = 0
    notes: list[str] = field(default_factory=list)
    record: dict[str, Any] | None = None

    def as_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        if out["record"] is None:
            del out["record"]
        return out

    def line(self) -> str:
        """One line for people and for ops/hook.log."""
        sid = self.session_id or "-"
        if self.action in ("skipped", "unchanged", "protected"):
            return f"session {sid}: {self.action} ({self.reason})"
        where = f" {self.memory_id} in {Path(self.path or '').parent}" if self.memory_id else ""
        run = f"; undo with: memcli undo {self.run_id}" if self.run_id else ""
        return (f"session {sid}: {self.action.replace('_', ' ')}{where} ({self.messages} messages, "
                f"{self.requests} request{'s' if self.requests != 1 else ''}, {self.method}){run}")


# ---------------------------------------------------------------- settings and masking


def default_agent(settings: Settings) -> str:
    """The agent whose folder a capture goes to when none is named: `[recall] agent` (SPEC
    11, read only if that section exists), else `claude`."""
    recall = getattr(settings, "recall", None)
    agent = getattr(recall, "agent", None)
    return agent if isinstance(agent, str) and agent else "claude"


def mask_for_store(masker: Masker, text: str) -> str:
    """The one place capture masks text before it is written to the store (SPEC 9's masker;
    the placeholders stay in the memory: the secrets themselves never reach a file)."""
    return masker.mask(text)


def safe_session_id(value: str) -> str:
    """A session id as the store keeps it: ids that are plain tokens as they are; anything
    else (or anything shaped like a secret) as a hash of it, so no odd text reaches a file."""
    value = value.strip()
    if _SAFE_ID.match(value) and not contains_secret(value):
        return value
    return "sha256:" + sha256(value.encode("utf-8", "replace"))[:32]


# ---------------------------------------------------------------- capture


def capture_transcript(store: Store, path: Path, *, agent: str | None = None, llm: bool | None = None,
                       wait: float = 10.0, session_id: str | None = None, end_reason: str | None = None,
                       dry_run: bool = False) -> CaptureResult:
    """Capture the session in the transcript at `path` into agent `agent`'s folder."""
    agent = agent or default_agent(store.settings)
    if not is_valid_scope_id(agent):
        raise MemcliError(f"bad agent id {agent!r} (letters, digits, '.', '_', '-')")
    cfg = store.settings.capture
    masker = Masker()  # one per capture: the same secret gets the same placeholder throughout
    session = transcript.read_session(path, end_reason, learn=lambda text: mask_for_store(masker, text))
    ids = _session_ids(session, session_id, path)
    result = CaptureResult("skipped", ids[0], messages=session.messages, requests=session.request_count,
                           notes=_read_notes(session))
    if session.request_count == 0:
        result.reason = "no request from the user in the transcript"
        return result
    if session.messages < cfg.min_messages:
        result.reason = (f"{session.messages} message(s), fewer than [capture] min_messages "
                         f"({cfg.min_messages})")
        return result
    moment = now()
    folder = store.folder("agent", agent)
    source = {"kind": session.kind, "session_id": ids[0], "messages": session.messages}
    existing = _find_session_memory(store, folder, ids)  # looked for again under the lock
    if existing is not None and _kept_as_is(store, existing, source, moment, result):
        return result  # before any rendering or LLM call: nothing would be written
    rendered = capture_render.render(session, lambda t: mask_for_store(masker, t), cfg.max_details_chars,
                                     agent)
    result.method = "extractive"
    if _llm_wanted(store, llm):
        rendered.details, result.method = _llm_details(store, session, masker, rendered.details, llm,
                                                       result.notes)
    if dry_run:
        planned = _planned_record(store, folder, existing, rendered, source, agent, moment, ids[0])
        result.action = "would_update" if existing is not None else "would_create"
        result.memory_id, result.record = planned["id"], planned
        result.path = store.rel(existing.path) if existing else f"{folder.rel}/{planned['id']}.json"
        return result
    with store.writing(wait) as recovered:
        result.notes += recovered
        return _write(store, folder, ids, rendered, source, agent, moment, result)


def _session_ids(session: Session, hint: str | None, path: Path) -> list[str]:
    """The session's id first (the hook's, else the last one the transcript names, else the
    file's name), then any other id the transcript names (a resumed session's earlier id)."""
    ordered = ([hint] if hint else []) + list(reversed(session.session_ids)) + [path.stem]
    seen: list[str] = []
    for value in ordered:
        safe = safe_session_id(value) if value and value.strip() else ""
        if safe and safe not in seen:
            seen.append(safe)
    return seen[:16]


def _read_notes(session: Session) -> list[str]:
    skipped = sum(session.skipped.values())
    if not skipped:
        return []
    common = sorted(session.skipped.items(), key=lambda kv: -kv[1])[:4]
    what = ", ".join(f"{n} {reason}" for reason, n in common)
    return [f"skipped {skipped} of {session.lines} transcript line(s): {what}"]


# ---------------------------------------------------------------- the LLM (optional)


def _llm_wanted(store: Store, flag: bool | None) -> bool:
    return store.settings.llm.enabled if flag is None else flag


def _llm_details(store: Store, session: Session, masker: Masker, extractive: str, flag: bool | None,
                 notes: list[str]) -> tuple[str, str]:
    """The details written by the LLM (SPEC 9: masked text out, budget, timeout), else the
    extractive ones. What the LLM sees is already masked for the store, and what it writes is
    masked again: its placeholders are never turned back into secrets."""
    from memcli.consolidate import llm_bridge

    hooks: Any = _LlmHooks()
    notes += llm_bridge.attach(store, hooks, flag if flag is not None else True)
    if hooks.summarizer is None:
        return extractive, "extractive"
    material = capture_render.material(session, lambda t: mask_for_store(masker, t), extractive)
    text, method = hooks.summarizer(material, store.settings.capture.max_details_chars)
    if method != "llm":
        error = getattr(hooks.judge, "last_error", None)
        notes.append(f"the LLM did not write the memory ({error or 'no answer'}); wrote the extractive one")
        return extractive, "extractive"
    return redact(mask_for_store(masker, text)), "llm"


@dataclass
class _LlmHooks:
    """What `llm_bridge.attach` fills in (it was made for a run's options)."""

    summarizer: Any = None
    judge: Any = None
    masker: Any = None


# ---------------------------------------------------------------- the memory


def _find_session_memory(store: Store, folder: Folder, ids: list[str]) -> Memory | None:
    """The live memory of this session in the agent's folder (by `source.session_id`; the
    first id wins, then the most recently updated)."""
    if not folder.path.is_dir():
        return None
    scan = store.scan(folder, load=False)
    best: tuple[int, str, Memory] | None = None
    for entry in scan.entries:
        if entry.get("subtype") != SUBTYPE and "captured" not in (entry.get("tags") or []):
            continue
        mem = store.read_quietly(folder.path / str(entry["file"]), folder)
        source = mem.data.get("source") if mem is not None else None
        if mem is None or not isinstance(source, dict) or source.get("session_id") not in ids:
            continue
        rank = (-ids.index(source["session_id"]), str(mem.data.get("updated_at") or ""))
        if best is None or rank > best[:2]:
            best = (*rank, mem)
    return best[2] if best else None


def _planned_record(store: Store, folder: Folder, existing: Memory | None, rendered: capture_render.Rendered,
                    source: dict[str, Any], agent: str, moment: dt.datetime, sid: str) -> dict[str, Any]:
    stamp = format_ts(moment)
    text = {"summary": rendered.summary, "details": rendered.details, "timeline": rendered.timeline}
    if existing is not None:
        data = dict(existing.data)
        data["content"] = {**existing.content, **text}
        found = data.get("source")
        old_source: dict[str, Any] = found if isinstance(found, dict) else {}
        data["source"] = {**old_source, **source, "session_id": old_source.get("session_id", sid)}
        data["tags"] = list(dict.fromkeys([*existing.tags, *TAGS]))
        data["updated_at"] = stamp
        return data
    return {"id": _new_id(store, folder, moment, f"capture:{agent}:{sid}"), "type": "episodic",
            "subtype": SUBTYPE, "scope": "agent", "scope_id": agent, "tags": list(TAGS),
            "priority": "normal", "created_by": f"agent:{agent}", "consent": False, "created_at": stamp,
            "updated_at": stamp, "last_accessed": None, "access_count": 0, "content": text,
            "source": source, "supersedes": [], "superseded_by": [], "promoted_to": None,
            "promoted_from": None}


def _new_id(store: Store, folder: Folder, moment: dt.datetime, seed: str) -> str:
    """A ULID derived from the session (a dry run shows the id the capture will write), or a
    random one when that id is taken anywhere (e.g. by an archived capture of the session)."""
    mem_id = new_memory_id(moment, seed)
    taken = [folder.path / f"{mem_id}.json", folder.path / f"{mem_id}.md",
             store.archive / f"{mem_id}.json", store.archive / f"{mem_id}.md"]
    if any(p.exists() for p in taken) or any(store.archive.glob(f"{mem_id}@*")):
        return new_memory_id(moment)
    return mem_id


def _write(store: Store, folder: Folder, ids: list[str], rendered: capture_render.Rendered,
           source: dict[str, Any], agent: str, moment: dt.datetime, result: CaptureResult) -> CaptureResult:
    """Under the lock: find the session's memory, and create or update it as a logged run."""
    from memcli.consolidate import engine

    existing = _find_session_memory(store, folder, ids)
    if existing is not None and _kept_as_is(store, existing, source, moment, result):
        return result
    data = _planned_record(store, folder, existing, rendered, source, agent, moment, ids[0])
    result.memory_id = str(data["id"])
    if existing is not None:
        result.path = store.rel(existing.path)
        if {**data, "updated_at": existing.data.get("updated_at")} == existing.data:
            result.action, result.reason = "unchanged", f"{existing.id} already holds this capture"
            return result
        op = FileOp("write", result.path, sha256(existing.path.read_bytes()), encode(data, existing.fmt))
        result.action = "updated"
    else:
        result.path = f"{folder.rel}/{data['id']}.json"
        op = FileOp("create", result.path, None, encode(data, "json"))
        result.action = "created"
    log = {"type": "capture", "memory_id": result.memory_id, "session_id": data["source"]["session_id"],
           "result": result.action, "method": result.method}
    action = Action("capture", log, f"session {data['source']['session_id']} ({source['messages']} messages) "
                    f"{result.action} as {result.memory_id}", touches=[result.memory_id], ops=[op],
                    folders=[folder.rel])
    plan = Plan(new_run_id(moment), "capture", format_ts(moment), [action],
                memory_count=_live_count(store) + (result.action == "created"))
    outcome = engine.apply(store, engine.Planning(plan))
    result.run_id = outcome.run_id
    if not any(a.get("type") == "capture" for a in outcome.actions):
        result.action, result.reason = "skipped", f"{result.path} changed while it was being captured"
    return result


def _kept_as_is(store: Store, existing: Memory, source: dict[str, Any], moment: dt.datetime,
                result: CaptureResult) -> bool:
    """True (and the result says why) when the session's memory must not be rewritten: a
    person protected it, or it was made from as many messages or more (the same transcript
    again, or a longer one than this)."""
    from memcli.consolidate import rules

    result.memory_id, result.path = existing.id, store.rel(existing.path)
    reason = rules.protection_reason(existing, moment, dataclasses.replace(
        store.settings.consolidation, min_age_days=0))
    if reason:
        result.action, result.reason = "protected", f"{existing.id} is protected ({reason}); left as it is"
        return True
    found = existing.data.get("source")
    old = int((found if isinstance(found, dict) else {}).get("messages") or 0)
    if old > int(source["messages"]):
        result.action = "unchanged"
        result.reason = f"{existing.id} was captured from a longer transcript ({old} messages); left as it is"
        return True
    if old == int(source["messages"]):
        result.action = "unchanged"
        result.reason = f"{existing.id} already holds a capture of these {old} messages"
        return True
    result.memory_id = result.path = None
    return False


def _live_count(store: Store) -> int:
    return sum(len(store.memory_names(folder)) for folder in store.memory_folders())


# ---------------------------------------------------------------- from a hook


def capture_from_hook(root: Path, fields: Mapping[str, str | None], wait: float = 60.0) -> str:
    """Capture the session a hook names (`transcript_path`, `session_id`, `reason`): one line
    for ops/hook.log. Never raises; off when `[capture] enabled = false`."""
    try:
        store = Store(root)
        if not store.settings.capture.enabled:
            return "capture: off ([capture] enabled = false)"
        raw = fields.get("transcript_path")
        if not raw:
            return "capture: the hook input names no transcript_path; nothing to capture"
        path = Path(raw)
        if not path.is_absolute():
            return f"capture: transcript_path {_clean(raw)!r} is not an absolute path; not captured"
        result = capture_transcript(store, path, session_id=fields.get("session_id"),
                                    end_reason=fields.get("reason"), wait=wait)
        notes = "".join(f"; {_clean(n, 200)}" for n in result.notes)
        return "capture: " + _clean(result.line(), 600) + notes
    except MemcliError as exc:
        return f"capture failed: {_clean(str(exc), 600)}"
    except Exception as exc:  # a bug: the traceback is what a report needs; the hook still exits 0
        return f"capture crashed: {_clean(repr(exc), 300)}\n{redact(traceback.format_exc())}"


def _clean(value: object, size: int = 300) -> str:
    text = redact(str(value))[:size]
    return "".join(c if c.isprintable() else "?" for c in text)
