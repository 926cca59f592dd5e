"""Helpers for the recall tests."""

from __future__ import annotations

from pathlib import Path

from memcli.store.store import Store


def fold(root: Path) -> list[str]:
    """Take the store lock as any writing command does: pending uses get folded."""
    store = Store(root)
    with store.writing(5) as notes:
        return notes
