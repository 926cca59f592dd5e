"""Plans: one structure, four uses. A dry run renders a Plan, apply executes it, the log
records its actions, undo reverses it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from memcli.store.model import sha256


@dataclass
class FileOp:
    """One file change of an action. `expect` is the sha256 the file must have just before
    (None: the path must not exist); the action is skipped when it does not."""

    kind: str  # "write" (rewrite in place), "create" (new name), "remove" (after pre-imaging)
    path: str  # relative to the store
    expect: str | None
    data: bytes | None = None  # the new bytes for write/create

    @property
    def after(self) -> str | None:
        return sha256(self.data) if self.data is not None else None

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "path": self.path, "expect": self.expect,
                "data": self.data.decode() if self.data is not None else None}

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> FileOp:
        data = raw.get("data")
        return cls(str(raw["kind"]), str(raw["path"]), raw.get("expect"),
                   data.encode() if isinstance(data, str) else None)


@dataclass
class Action:
    """One decision of a run: what the log records, why, and the file changes it makes."""

    type: str  # merge, summarize, promote, archive, keep_separate, flag (skip: at apply)
    log: dict[str, Any]  # the entry as SPEC section 7 shapes it
    why: str  # one line for people
    touches: list[str] = field(default_factory=list)  # memory ids counted by max_per_run
    ops: list[FileOp] = field(default_factory=list)
    review: dict[str, Any] | None = None  # an item for ops/review-queue.json
    folders: list[str] = field(default_factory=list)  # folders whose index it changes

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type, "log": self.log, "why": self.why, "touches": self.touches,
                "ops": [op.to_json() for op in self.ops], "review": self.review,
                "folders": self.folders}

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> Action:
        return cls(raw["type"], raw["log"], raw.get("why", ""), list(raw.get("touches", [])),
                   [FileOp.from_json(o) for o in raw.get("ops", [])], raw.get("review"),
                   list(raw.get("folders", [])))


@dataclass
class Plan:
    run_id: str
    trigger: str
    at: str  # the run's moment, as written into records
    actions: list[Action] = field(default_factory=list)
    deferred: list[Action] = field(default_factory=list)
    covered: list[str] = field(default_factory=list)  # folders whose run_hash the run refreshes
    flagged_done: list[list[str]] = field(default_factory=list)  # on-save pairs looked at
    notes: list[str] = field(default_factory=list)
    memory_count: int = 0
    protected: dict[str, int] = field(default_factory=dict)  # memories the rules left alone, by reason
    plan_ms: int = 0  # how long planning took

    def to_json(self) -> dict[str, Any]:
        return {"version": 1, "run_id": self.run_id, "trigger": self.trigger, "at": self.at,
                "actions": [a.to_json() for a in self.actions],
                "deferred": [a.to_json() for a in self.deferred], "covered": self.covered,
                "flagged_done": self.flagged_done, "notes": self.notes,
                "memory_count": self.memory_count}

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> Plan:
        return cls(str(raw["run_id"]), str(raw["trigger"]), str(raw["at"]),
                   [Action.from_json(a) for a in raw.get("actions", [])],
                   [Action.from_json(a) for a in raw.get("deferred", [])],
                   list(raw.get("covered", [])), list(raw.get("flagged_done", [])),
                   list(raw.get("notes", [])), int(raw.get("memory_count", 0)))


@dataclass
class Outcome:
    """What a run did: the log entry's actions and stats, plus what people need to see."""

    run_id: str
    trigger: str
    timestamp: str
    actions: list[dict[str, Any]]
    stats: dict[str, Any]
    dry_run: bool = False
    deferred: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    whys: list[str] = field(default_factory=list)
    protected: dict[str, int] = field(default_factory=dict)  # by reason (SPEC 2); the total is in stats

    def to_json(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "trigger": self.trigger, "timestamp": self.timestamp,
                "dry_run": self.dry_run, "actions": self.actions, "stats": self.stats,
                "protected": self.protected, "deferred": self.deferred, "notes": self.notes}
