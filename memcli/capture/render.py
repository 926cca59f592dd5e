"""A session digest as a memory's text (SPEC 12): the summary (the first request, one line),
the details under four headings, and a short timeline. Extractive and deterministic: the
same transcript always gives the same text.

Every piece of the transcript is masked (`mask`, the store's secret masker) before it is
clipped, so a secret can never be cut into an unrecognisable fragment, and the whole text
is redacted once more at the end. The details fit in `max_chars`: each line has a priority,
and the least important lines go first (each list says how many it left out).
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from memcli.capture import commands as cmds
from memcli.capture.learnings import ErrorEvent
from memcli.capture.session import Request, Session
from memcli.secrets import redact

HEADINGS = ("What happened", "Who was involved", "Outcome", "Key learnings")
Mask = Callable[[str], str]

SUMMARY_CHARS = 200
REQUEST_CHARS = 240
COMMAND_CHARS = 160
EXCERPT_CHARS = 200
ANSWER_CHARS = 400
MAX_LEARNINGS = 8
TIMELINE_ENTRIES = 12
_PARTIAL_PLACEHOLDER = re.compile(r"\[\[MEMCLI_SECRET_\d*\]?$|\[\[MEMCLI_SECRE?T?_?$|\[\[MEMCLI_?$|\[\[?$")
_FENCE = re.compile(r"```.*?(?:```|$)", re.DOTALL)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9`\"'(\[])")


# ---------------------------------------------------------------- text helpers


def clip(text: str, limit: int) -> str:
    """At most `limit` characters, cut at a word boundary, never inside a placeholder."""
    if len(text) <= limit:
        return text
    cut = text[: max(limit - 1, 1)]
    space = cut.rfind(" ")
    if space > limit * 0.6:
        cut = cut[:space]
    cut = _PARTIAL_PLACEHOLDER.sub("", cut.rstrip())
    return cut.rstrip(" ,;:-") + "…"


def one_line(text: str) -> str:
    return " ".join(text.split())


def gist(text: str, limit: int) -> str:
    """The first sentences of a (Markdown) text, in one line, up to `limit` characters."""
    text = _FENCE.sub(" ", text)
    lines = [re.sub(r"^\s*(?:#{1,6}\s*|[-*+]\s+|\d+[.)]\s+|>\s*)", "", ln) for ln in text.splitlines()]
    flat = one_line(" ".join(ln for ln in lines if ln.strip())).replace("**", "")
    out = ""
    for sentence in _SENTENCE_END.split(flat):
        candidate = f"{out} {sentence}".strip()
        if len(candidate) > limit:
            return out if out else clip(sentence, limit)
        out = candidate
    return out


def code(text: str) -> str:
    """A command in backticks (backticks inside it would end the span early)."""
    return f"`{text.replace('`', chr(39))}`"


def display_path(path: str, cwd: str | None) -> str:
    if cwd and path.startswith(cwd.rstrip("/") + "/"):
        return path[len(cwd.rstrip("/")) + 1:]
    return path


def _time(value: str | None) -> dt.datetime | None:
    if not value:
        return None
    try:
        parsed = dt.datetime.fromisoformat(value.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        return None
    if parsed.tzinfo is None:
        return parsed.replace(tzinfo=dt.timezone.utc)
    return parsed.astimezone(dt.timezone.utc)


# ---------------------------------------------------------------- lines with priorities


@dataclass
class Line:
    text: str
    priority: int  # 0 is kept longest
    group: str = ""  # lines of one list: a dropped one is counted under the list


@dataclass
class Section:
    lines: list[Line] = field(default_factory=list)

    def add(self, text: str, priority: int, group: str = "") -> None:
        if text:
            self.lines.append(Line(text, priority, group))


def fit(sections: dict[str, Section], max_chars: int) -> str:
    """The four sections within `max_chars`, least important lines dropped first (the
    latest of equal priority first); each list says how many of its lines it left out."""
    dropped: dict[str, int] = {}
    while True:
        text = _render(sections, dropped)
        if len(text) < max_chars:
            return text
        victim = _least_important(sections)
        if victim is None:
            return _shorten(sections, dropped, max_chars)
        section, line = victim
        section.lines.remove(line)
        if line.group:
            dropped[line.group] = dropped.get(line.group, 0) + 1


def _shorten(sections: dict[str, Section], dropped: dict[str, int], max_chars: int) -> str:
    """Only lines that must stay are left and they are still too long: cut the longest ones
    (a tight `max_details_chars`), so that every section keeps its heading and its start."""
    while True:
        text = _render(sections, dropped)
        excess = len(text) - max_chars + 1
        if excess <= 0:
            return text
        longest = max((line for sec in sections.values() for line in sec.lines), key=lambda ln: len(ln.text),
                      default=None)
        if longest is None or len(longest.text) <= 40:
            return clip(text, max_chars - 1)
        longest.text = clip(longest.text, max(40, len(longest.text) - excess))


def _least_important(sections: dict[str, Section]) -> tuple[Section, Line] | None:
    best: tuple[Section, Line] | None = None
    for section in sections.values():
        for line in section.lines:
            if line.priority > 0 and (best is None or line.priority >= best[1].priority):
                best = (section, line)
    return best


def _render(sections: dict[str, Section], dropped: dict[str, int]) -> str:
    parts = []
    for heading in HEADINGS:
        lines: list[str] = []
        section = sections[heading]
        for n, line in enumerate(section.lines):
            lines.append(line.text)
            following = section.lines[n + 1].group if n + 1 < len(section.lines) else None
            last_of_group = line.group and following != line.group
            if last_of_group and dropped.get(line.group):
                lines.append(f"- … and {dropped[line.group]} more")
        parts.append(f"## {heading}\n" + ("\n".join(lines) if lines else "(nothing recorded)"))
    return "\n\n".join(parts)


# ---------------------------------------------------------------- the memory's text


@dataclass
class Rendered:
    summary: str
    details: str
    timeline: list[dict[str, str]]


def render(session: Session, mask: Mask, max_chars: int, agent: str) -> Rendered:
    r = _Renderer(session, mask)
    sections = {"What happened": r.what_happened(), "Who was involved": r.who(agent),
                 "Outcome": r.outcome(), "Key learnings": r.learnings()}
    details = redact(fit(sections, max_chars))
    return Rendered(redact(r.summary()), details, r.timeline())


class _Renderer:
    def __init__(self, session: Session, mask: Mask) -> None:
        self.s = session
        self._mask = mask
        self._cache: dict[str, str] = {}

    def m(self, text: str) -> str:
        """The masked text (each distinct piece masked once)."""
        found = self._cache.get(text)
        if found is None:
            found = self._cache[text] = self._mask(text) if text else ""
        return found

    def path(self, path: str) -> str:
        return self.m(display_path(path, self.s.cwd))

    def cmd(self, text: str) -> str:
        return code(clip(one_line(self.m(_first_line(text))), COMMAND_CHARS))

    # ------------------------------------------------------------ summary

    def summary(self) -> str:
        first = next((r for r in self.s.all_requests if r.kind != "feedback"), None)
        if first is None:
            return f"Session {self.s.session_ids[0] if self.s.session_ids else ''}".strip()
        return clip(one_line(_FENCE.sub(" ", self.m(first.text))), SUMMARY_CHARS)

    # ------------------------------------------------------------ What happened

    def what_happened(self) -> Section:
        s, out = self.s, Section()
        requests = s.all_requests
        if len(requests) == 1 and s.request_count == 1:
            out.add("Request: " + self._request(requests[0]), 0)
            self._answer(out, requests[0], 1)
        else:
            out.add(f"Requests ({s.request_count}):", 0)
            for n, req in enumerate(requests):
                label = n + 1 if n < len(s.requests) else s.request_count - (len(requests) - n) + 1
                if n == len(s.requests) and s.request_count > len(requests):
                    out.add(f"- … {s.request_count - len(requests)} more requests", 0)
                out.add(f"{label}. {self._request(req)}", 0 if n < 3 else 2 if n < 10 else 3, "requests")
                self._answer(out, req, 2 if n < 5 else 4)
        self._files(out)
        self._commands(out)
        self._delegated(out)
        if s.plan:
            out.add("Plan approved: " + clip(gist(self.m(s.plan), 300), 300), 3)
        if s.web:
            out.add("Looked up: " + "; ".join(clip(one_line(self.m(w)), 100) for w in s.web[:5]), 4)
        if s.compactions:
            out.add(f"Context compacted {len(s.compactions)} time{'s' if len(s.compactions) > 1 else ''}.", 4)
        if s.reads:
            out.add(f"Read or searched {s.reads} time{'s' if s.reads > 1 else ''}.", 5)
        return out

    def _request(self, req: Request) -> str:
        prefixes = {"feedback": "(refusing a tool call) ", "queued": "(while the agent worked) "}
        prefix = prefixes.get(req.kind, "")
        suffix = " [interrupted]" if req.interrupted else ""
        return prefix + clip(one_line(self.m(req.text)), REQUEST_CHARS) + suffix

    def _answer(self, out: Section, req: Request, priority: int) -> None:
        """The gist of how the agent closed each request's turn (the last one is the
        Outcome's final answer): a question's answer, or a piece of work's result."""
        if not req.answer or req is self.s.last_request:
            return
        if req.tools == 0:
            out.add("   Answer: " + gist(self.m(req.answer), 300), priority)
        else:
            out.add("   Result: " + gist(self.m(req.answer), 200), priority + 2)

    def _files(self, out: Section) -> None:
        files = list(self.s.files.values())
        if not files:
            return
        out.add(f"Files changed ({len(files)}):", 1)
        for change in sorted(files, key=lambda c: (c.delegated, c.step)):
            ops = ", ".join(change.ops) + (f" ×{change.count}" if change.count > 1 else "")
            who = ", by a sub-agent" if change.delegated else ""
            out.add(f"- {self.path(change.path)} ({ops}{who})", 2 if not change.delegated else 3, "files")

    def _commands(self, out: Section) -> None:
        commands = list(self.s.commands.values())
        if not commands:
            return
        distinct = sum(1 for c in commands if c.count)
        runs = self.s.command_runs
        out.add(f"Commands run ({runs} run{'s' if runs != 1 else ''}, {distinct} distinct):", 1)
        for entry in sorted(commands, key=lambda c: c.step):
            notes = []
            if entry.count > 1:
                notes.append(f"×{entry.count}")
            if entry.failures:
                notes.append(f"failed {entry.failures}" + (", last passed" if entry.last_ok else ""))
            if entry.delegated:
                notes.append("by a sub-agent")
            if entry.by_user:
                notes.append("typed by the user")
            if entry.refused:
                notes.append("refused by the user")
            important = entry.kind in ("test", "check", "build", "vcs", "install") or entry.failures
            priority = 2 if important else 4 if entry.kind == "readonly" or entry.delegated else 3
            out.add(f"- {self.cmd(entry.text)}" + (f" ({', '.join(notes)})" if notes else ""), priority,
                    "commands")

    def _delegated(self, out: Section) -> None:
        agents = self.s.subagents
        if not agents:
            return
        out.add(f"Delegated to sub-agents ({self.s.subagent_count}):", 2)
        for agent in agents:
            what = clip(one_line(self.m(agent.description or agent.prompt)), 160)
            result = gist(self.m(agent.result), 200) if agent.result else ""
            status = " (failed)" if agent.failed else ""
            out.add(f"- {agent.kind}: {what}{status}" + (f" → {result}" if result else ""), 3, "agents")

    # ------------------------------------------------------------ Who was involved

    def who(self, agent: str) -> Section:
        s, out = self.s, Section()
        harness = {"claude-code": "Claude Code", "codex": "Codex CLI"}.get(s.kind, "")
        tool = f"{harness} {s.versions[0]}".strip() if harness and s.versions else harness
        facts = [f for f in (s.models and f"model {', '.join(s.models[:3])}", tool) if f]
        out.add(f"The user and the agent `{agent}`" + (f" ({'; '.join(facts)})" if facts else "") + ".", 0)
        where = []
        if s.cwd:
            where.append(f"in {self.m(s.cwd)}")
        if s.branches:
            where.append("on branch " + ", ".join(self.m(b) for b in s.branches[:3]))
        if where:
            out.add("Working " + " ".join(where) + ".", 0)
        if s.subagents:
            kinds: dict[str, int] = {}
            for sub in s.subagents:
                kinds[sub.kind] = kinds.get(sub.kind, 0) + 1
            listed = ", ".join(k + (f" ×{n}" if n > 1 else "") for k, n in kinds.items())
            out.add(f"Sub-agents: {listed}.", 1)
        if s.mcp_servers:
            out.add("MCP servers used: " + ", ".join(self.m(x) for x in s.mcp_servers) + ".", 2)
        return out

    # ------------------------------------------------------------ Outcome

    def outcome(self) -> Section:
        s, out = self.s, Section()
        last = s.last_request
        if s.last_text:
            quiet = not s.commands and not s.files
            out.add("Final answer: " + gist(self.m(s.last_text), 700 if quiet else ANSWER_CHARS), 0)
        checks = self._last_checks()
        if checks:
            out.add("Last runs: " + "; ".join(checks) + ".", 0)
        if s.commits:
            out.add("Committed: " + "; ".join(clip(one_line(self.m(c)), 120) for c in s.commits[:5]) + ".", 0)
        if s.pushes:
            out.add("Pushed to the remote.", 1)
        if s.pull_requests:
            out.add("Pull request: " + ", ".join(self.m(u) for u in s.pull_requests[:3]) + ".", 0)
        unresolved = [e for e in s.errors if not e.resolved_by and not e.changed_to and not e.delegated
                      and not self._passed_later(e)]
        if unresolved:
            failing = [f"{self.cmd(e.command)}: {clip(one_line(self.m(e.excerpt)), 120)}"
                       for e in unresolved[-3:]]
            out.add("Still failing at the end: " + "; ".join(failing), 1)
        if last is not None and last.interrupted:
            out.add("The user interrupted the last request.", 1)
        if s.todos:
            done = [t for st, t in s.todos if st == "completed"]
            open_ = [t for st, t in s.todos if st != "completed"]
            text = f"Todo list: {len(done)} of {len(s.todos)} done"
            if open_:
                text += "; open: " + "; ".join(clip(one_line(self.m(t)), 80) for t in open_[:3])
            out.add(text + ".", 2)
        span = self._span()
        if span:
            out.add(span, 3)
        if s.end_reason:
            out.add(f"Session ended ({self.m(s.end_reason)}).", 4)
        return out

    def _last_checks(self) -> list[str]:
        """The last status of each test, check and build command, in order of last run."""
        last: dict[str, tuple[int, str, bool]] = {}
        for entry in self.s.commands.values():
            if entry.kind in ("test", "check", "build") and entry.last_ok is not None and not entry.delegated:
                seen = last.get(entry.key)
                if seen is None or entry.step >= seen[0]:
                    last[entry.key] = (entry.step, entry.text, entry.last_ok)
        ordered = sorted(last.values())[-4:]
        return [f"{self.cmd(text)} {'passed' if ok else 'failed'}" for _, text, ok in ordered]

    def _passed_later(self, error: ErrorEvent) -> bool:
        return any(c.last_ok and c.step > error.step and error.key in cmds.command_keys(c.text)
                   for c in self.s.commands.values())

    def _span(self) -> str:
        start, end = _time(self.s.started), _time(self.s.ended)
        count = f"{self.s.request_count} request{'s' if self.s.request_count != 1 else ''}, " \
                f"{self.s.messages} messages"
        if start is None or end is None:
            return f"Session: {count}."
        minutes = max(int((end - start).total_seconds() // 60), 0)
        length = f"{minutes // 60} h {minutes % 60} min" if minutes >= 60 else f"{minutes} min"
        return f"Session: {start:%Y-%m-%d %H:%M}–{end:%H:%M} UTC ({length}), {count}."

    # ------------------------------------------------------------ Key learnings

    def learnings(self) -> Section:
        s, out = self.s, Section()
        errors = sorted(s.errors, key=lambda e: (e.delegated, e.step))
        for n, error in enumerate(errors):
            priority = 0 if n < 3 and not error.delegated else 1 if n < MAX_LEARNINGS else 3
            out.add("- " + self._lesson(error), priority, "learnings")
        if not errors:
            retried = f" ({s.quiet_failures} tool call{'s' if s.quiet_failures > 1 else ''} retried)" \
                if s.quiet_failures else ""
            out.add(f"No command failed{retried}.", 0)
        return out

    def _lesson(self, e: ErrorEvent) -> str:
        what = self.cmd(e.command) if e.tool.lower() not in ("shell",) or e.command else code(e.tool)
        text = f"{what} failed" + (f" (×{e.repeats + 1})" if e.repeats else "")
        if e.delegated:
            text += " in a sub-agent"
        if e.excerpt:
            text += f": {clip(one_line(self.m(e.excerpt)), EXCERPT_CHARS)}"
        text = text.rstrip(".") + "."
        if e.diagnosis:
            text += f" Diagnosis: {gist(self.m(e.diagnosis), 220)}"
        fix = self._fix(e)
        if e.resolved_by:
            how = f"Fixed by {fix}; then " if fix else "Then "
            text += f" {how}{self.cmd(e.resolved_by)} passed."
        elif e.changed_to:
            how = f"After {fix}, it " if fix else "It then "
            text += f" {how}failed differently: {clip(one_line(self.m(e.changed_to)), 120)}"
        elif self._passed_later(e):
            text += f" Fixed by {fix}; it passed later." if fix else " It passed later."
        else:
            text += f" Tried {fix}; not resolved in the session." if fix else " Not resolved in the session."
        return text

    def _fix(self, e: ErrorEvent) -> str:
        """What changed after an error: `editing a, b and running `c``."""
        parts = []
        if e.fix_files:
            parts.append("editing " + ", ".join(self.path(p) for p in e.fix_files[:4]))
        if e.fix_commands:
            parts.append("running " + ", ".join(self.cmd(c) for c in e.fix_commands[:3]))
        return " and ".join(parts)

    # ------------------------------------------------------------ timeline

    def timeline(self) -> list[dict[str, str]]:
        s = self.s
        events: list[tuple[str, str]] = []
        if s.started:
            events.append((s.started, "session started"))
        for req in s.all_requests:
            if req.at:
                events.append((req.at, "request: " + clip(one_line(self.m(req.text)), 120)))
        for at in s.compactions:
            if at:
                events.append((at, "context compacted"))
        stamped = sorted(((t, e) for t, e in ((_time(at), ev) for at, ev in events) if t is not None),
                         key=lambda pair: pair[0])  # stable: the session starts before its first request
        if len(stamped) > TIMELINE_ENTRIES - 1:
            stamped = stamped[: TIMELINE_ENTRIES // 2] + stamped[-(TIMELINE_ENTRIES // 2 - 1):]
        out = [{"at": f"{t:%Y-%m-%dT%H:%M:%SZ}", "event": redact(e)} for t, e in stamped]
        end = _time(s.ended)
        if end is not None and (not out or out[-1]["at"] != f"{end:%Y-%m-%dT%H:%M:%SZ}" or len(out) == 1):
            out.append({"at": f"{end:%Y-%m-%dT%H:%M:%SZ}", "event": "last activity"})
        return out


def _first_line(command: str) -> str:
    lines = [ln for ln in command.strip().splitlines() if ln.strip()]
    return (lines[0] + (" …" if len(lines) > 1 else "")) if lines else ""


def material(session: Session, mask: Mask, extractive: str, limit: int = 24_000) -> str:
    """What the LLM reads to write the memory (masked): the extractive details, then the
    conversation's own words (requests, answers, diagnoses, sub-agents' reports)."""
    r = _Renderer(session, mask)
    parts = [f"Session digest (extractive):\n{extractive}", "\nThe conversation, condensed:"]
    for n, req in enumerate(session.all_requests):
        parts.append(f"[request {n + 1}] {clip(one_line(r.m(req.text)), 1200)}")
        if req.answer:
            parts.append(f"[agent's answer] {clip(one_line(r.m(req.answer)), 1200)}")
    for error in session.errors[:20]:
        if error.diagnosis:
            parts.append(f"[after {clip(one_line(r.m(error.command)), 120)} failed] "
                         f"{clip(one_line(r.m(error.diagnosis)), 600)}")
    for agent in session.subagents[:10]:
        if agent.result:
            parts.append(f"[sub-agent {agent.kind} reported] {clip(one_line(r.m(agent.result)), 800)}")
    text = "\n".join(parts)
    return redact(text if len(text) <= limit else clip(text, limit))

