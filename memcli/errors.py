"""Domain exceptions. Each message says what went wrong and what to do next.

The CLI turns every `MemcliError` into `Error: <message>` and its `exit_code`,
in one place (`memcli.cli.common`). Nothing a user can cause raises anything else.
"""

from __future__ import annotations


class MemcliError(Exception):
    """Base of every error a user can act on; exit code 1 unless a subclass says otherwise."""

    exit_code = 1


class NoStoreError(MemcliError):
    def __init__(self, path: object) -> None:
        super().__init__(f"no memory store at {path} (run `memcli init`)")


class ConfigError(MemcliError):
    """A setting in memcli.toml has the wrong type or value; the message names the key."""


class NotFoundError(MemcliError):
    """A memory, run or review item that the user named does not exist."""


class BadRecordError(MemcliError):
    """A memory file that cannot be read as a valid record; carries the path and reasons."""

    def __init__(self, path: object, reasons: list[str]) -> None:
        self.path = str(path)
        self.reasons = reasons
        super().__init__(f"{path}: {'; '.join(reasons)}")


class LockTimeoutError(MemcliError):
    """The store lock was still held by another writer when `--wait` ran out."""

    exit_code = 75

    def __init__(self, lock_path: object, wait: float) -> None:
        super().__init__(
            f"the store is locked by another memcli process ({lock_path}); gave up after "
            f"{wait:g}s. Try again later or pass a longer --wait"
        )


class UndoRefusedError(MemcliError):
    """`undo` would overwrite changes made after the run."""


class PlanMismatchError(MemcliError):
    """`apply PLAN` found the store no longer matches the reviewed plan."""


class UnsafePathError(MemcliError, OSError):
    """A path memcli would write through is a symlink, not a real folder, or leads out of the
    store: refused before anything changes. Also an OSError, so that code which treats any
    file-system failure as "could not write" (a fail-open hook log) treats this one so too."""

    def __init__(self, message: str) -> None:
        MemcliError.__init__(self, message)

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class OpsFileError(MemcliError):
    """A file under ops/ (log, state, review queue) that memcli cannot read or would not be
    able to write back: the command refuses to start, naming the file and the fix."""


class SyncRefusedError(MemcliError):
    """`memcli sync` cannot go on (no repository, a detached HEAD, a rebase or merge under
    way, a rejected push): nothing was lost, and the message says what to do."""
