"""What a run plans with: its options, a memory as the simulated store holds it, the result
of planning, and the trigger and rule names."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from memcli.store.model import Memory
from memcli.store.planned import Ticket
from memcli.store.plans import Plan
from memcli.store.sigcache import SigCache
from memcli.store.store import Folder, Problem, Stamp

TRIGGERS = ("manual", "weekly", "daily", "session_end", "index_overflow")
ALL_RULES = ("merge", "summarize", "promote", "archive")  # 3.1 to 3.4
# A light pass (SPEC 6) runs only these rules, never the LLM; every other trigger runs all four.
LIGHT_RULES = {"daily": ("merge", "promote")}
WHOLE_STORE = ("manual", "weekly", "daily")  # triggers that cover every folder when not narrowed
DISCOVERY_FLOOR = 0.60  # SPEC 9: pairs from here up to content_similarity may go to the LLM
Progress = Callable[[str, int, int], None]
# (details, max_chars) -> (summary, method) ; the LLM path plugs in here
Summarizer = Callable[[str, int], tuple[str, str]]


@dataclass(slots=True)
class Live:
    """A memory as the simulated store holds it during planning."""

    mem: Memory
    folder: Folder
    rel: str  # path relative to the store
    run_hash: str | None
    changed: bool  # since the last run (SPEC 1): in scope for session_end
    sig: bytes | None = None  # MinHash signature, from the folder's cache or computed
    key: tuple[str, str, str] = ("", "", "")  # newest-first sort key (created, updated, id)


@dataclass
class RunOptions:
    trigger: str = "manual"
    limit: int | None = None
    consent: bool = False
    folders: list[Folder] | None = None
    summarizer: Summarizer | None = None
    judge: Any = None  # llm.LLMClient-like; grey-zone pairs (SPEC 9)
    masker: Any = None
    progress: Progress | None = None
    warm_caches: bool = False  # a real run: leave caches that cover what it rewrites
    # whether the plan carries the bytes it would write (a real run, --plan-out); a bare dry
    # run only reports, and so need not read a memory just to make its archive record
    records: bool = True


@dataclass
class Planning:
    """Everything `plan` learned: the plan plus the problems it met on the way."""

    plan: Plan
    problems: list[Problem] = field(default_factory=list)
    sigs: dict[str, SigCache] = field(default_factory=dict)  # folder -> content hash -> sig
    refresh: dict[str, list[str]] | None = None  # session_end: folder -> files read or gone
    listings: dict[str, Stamp] | None = None  # session_end: folder -> stamp vouching for its names
    pairs: dict[str, tuple[str, Any]] = field(default_factory=dict)  # folder -> (params, PairCache)
    state_extra: dict[str, Any] = field(default_factory=dict)  # more for ops/state.json (LLM calls)
    vectors: Any = None  # semantic.VectorCache to save after a real run, or None
    planned: dict[str, Ticket] = field(default_factory=dict)  # folder -> entries of the files read
