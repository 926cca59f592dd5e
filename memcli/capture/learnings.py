"""The errors a session met and what fixed them (SPEC 12, "Key learnings").

An error is a command (or a tool that is not a file tool) that failed; a command that only
looks around (grep finding nothing, `test -f`) is not one. While it is open, the files
edited and the commands that change something are recorded as its fix, and the agent's
first words after it as its diagnosis. It is settled when the same command passes (a
command line passes each of its parts: `terraform validate && terraform plan` settles a
failed `terraform plan`), or when the same command fails differently (what was done moved it
on to another error). The same failure again is one error, repeated.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from memcli.capture import commands as cmds

MAX_ERRORS = 60
MAX_OPEN_ERRORS = 20  # errors still waiting for what fixes them
MAX_FIX_ITEMS = 6  # files or commands recorded as the fix of one error
MAX_EXCERPT = 1000
MAX_DIAGNOSIS = 1500
_FIX_KINDS = ("other", "install", "vcs", "build")  # commands that change something


@dataclass
class ErrorEvent:
    """A command (or tool) that failed, and what happened next."""

    step: int
    tool: str
    command: str  # the command line or the tool's target
    key: str
    excerpt: str  # the output line that names the error
    delegated: bool = False
    repeats: int = 0  # the same failure again, before anything fixed it
    diagnosis: str = ""  # the agent's first words after the failure
    fix_files: list[str] = field(default_factory=list)
    fix_commands: list[str] = field(default_factory=list)
    resolved_by: str | None = None  # the later run of the same command that passed
    changed_to: str | None = None  # the same command failed differently next (a step forward)


class ErrorTracker:
    """Follows each error from its failure to what settled it, in bounded memory."""

    def __init__(self, errors: list[ErrorEvent]) -> None:
        self.errors = errors  # the session's list: kept up to MAX_ERRORS
        self.count = 0  # every failure, kept or not
        self._open: list[ErrorEvent] = []  # waiting for a fix, oldest first
        self._undiagnosed: list[ErrorEvent] = []

    def failed(self, step: int, tool: str, target: str, key: str, output: str, delegated: bool) -> None:
        excerpt = cmds.error_line(output)[:MAX_EXCERPT]
        self.count += 1
        for error in self._open:
            if error.key == key and error.delegated == delegated:
                if error.excerpt == excerpt:
                    error.repeats += 1  # the same failure again: still the same error
                    return
                error.changed_to = excerpt  # what was done since moved it on to another error
                self._settle(error)
                break
        error = ErrorEvent(step, tool, target, key, excerpt, delegated)
        if len(self.errors) < MAX_ERRORS:
            self.errors.append(error)
            self._open.append(error)
            if len(self._open) > MAX_OPEN_ERRORS:
                self._open.pop(0)
            self._undiagnosed.append(error)

    def passed(self, text: str, key: str, kind: str, delegated: bool) -> None:
        """A command passed: it settles the open errors of each of its parts, and a command
        that changes something counts as part of the other open errors' fix."""
        keys = set(cmds.command_keys(text)) | {key}
        fixes = kind in _FIX_KINDS and "commit" not in cmds.vcs_steps(text)
        for error in list(self._open):
            if error.delegated != delegated:
                continue
            if error.key in keys:
                error.resolved_by = text
                self._settle(error)
            elif fixes and len(error.fix_commands) < MAX_FIX_ITEMS and text not in error.fix_commands:
                error.fix_commands.append(text)

    def text(self, text: str, delegated: bool) -> None:
        """The agent wrote: its first words after a failure are that failure's diagnosis."""
        for error in self._undiagnosed:
            if error.delegated == delegated:
                error.diagnosis = text[:MAX_DIAGNOSIS]
        self._undiagnosed = [e for e in self._undiagnosed if e.delegated != delegated]

    def new_turn(self) -> None:
        """The user asked something new: the agent's next words are about that."""
        self._undiagnosed = [e for e in self._undiagnosed if e.delegated]

    def file_changed(self, path: str, delegated: bool) -> None:
        for error in self._open:
            if error.delegated == delegated and path not in error.fix_files \
                    and len(error.fix_files) < MAX_FIX_ITEMS:
                error.fix_files.append(path)

    def file_unchanged(self, path: str) -> None:
        """A file recorded as changed was not (the tool call failed)."""
        for error in self._open:
            if path in error.fix_files:
                error.fix_files.remove(path)

    def _settle(self, error: ErrorEvent) -> None:
        """Settled: no longer open, and a later text is about other things."""
        self._open = [e for e in self._open if e is not error]
        self._undiagnosed = [e for e in self._undiagnosed if e is not error]
