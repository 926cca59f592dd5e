"""Synthetic stores for the benchmark: N memories with planted near-duplicates.

Deterministic for a given (n, seed). Memories are spread over agent and team folders and a
few (type, subtype) blocks of a few thousand each, the shape that makes all-pairs comparison
quadratic. A share of them are planted near-duplicates: a copy of another memory of the same
block, reworded (words dropped, swapped, inserted), with the same tags and author.
"""

from __future__ import annotations

import datetime as dt
import random
from pathlib import Path
from typing import Any

import orjson

from memcli.store.model import format_ts, new_memory_id

NOW = dt.datetime(2026, 11, 22, tzinfo=dt.timezone.utc)
_CORE = ("deploy staging production rollback migration schema index query cache redis postgres worker "
         "queue retry timeout latency dashboard alert incident review branch commit merge release "
         "feature flag config secret rotate token vault build pipeline artifact docker image kubernetes "
         "the a to of and in on for with is was we it this that after before then when not").split()


def _vocabulary(size: int, seed: int) -> tuple[list[str], list[float]]:
    """Pseudo-words with Zipfian frequencies: real text shares its common words, rarely the rest."""
    rng = random.Random(seed)
    syllables = [c + v for c in "bcdfghklmnprstvz" for v in "aeiou"]
    words = list(_CORE)
    while len(words) < size:
        words.append("".join(rng.choice(syllables) for _ in range(rng.randint(2, 4))))
    weights = [1 / (rank + 1) ** 1.05 for rank in range(len(words))]
    cumulative, total = [], 0.0
    for w in weights:
        total += w
        cumulative.append(total)
    return words, cumulative


_WORDS, _CUM = _vocabulary(20_000, 11)
TYPES = (("semantic", "fact"), ("procedural", "howto"), ("episodic", "session"), ("working", "note"))


def _text(rng: random.Random) -> str:
    sentences = []
    for _ in range(rng.randint(2, 8)):
        words = rng.choices(_WORDS, cum_weights=_CUM, k=rng.randint(6, 16))
        sentences.append(" ".join(words).capitalize() + ".")
    return " ".join(sentences)


def reword(text: str, rng: random.Random) -> str:
    """A near-duplicate: 2-15% of the words dropped, swapped or inserted, so that planted pairs
    span the whole range above the merge threshold and some fall below it."""
    words = text.split()
    for _ in range(max(1, round(len(words) * rng.uniform(0.02, 0.15)))):
        op = rng.random()
        at = rng.randrange(len(words))
        if op < 0.33 and len(words) > 5:
            del words[at]
        elif op < 0.66:
            words.insert(at, rng.choices(_WORDS, cum_weights=_CUM)[0])
        else:
            other = rng.randrange(len(words))
            words[at], words[other] = words[other], words[at]
    return " ".join(words)


def _folders(n: int) -> list[tuple[str, str]]:
    agents = max(2, n // 12_000)
    return [("agent", f"agent{i}") for i in range(agents)] + [("team", "team0"), ("global", "global")]


def record(rng: random.Random, scope: str, scope_id: str, kind: tuple[str, str], n: int,
           text: str | None = None, tags: list[str] | None = None,
           author: str | None = None) -> dict[str, Any]:
    created = NOW - dt.timedelta(days=rng.uniform(10, 80))
    return {"id": new_memory_id(created, f"bench{n}"), "type": kind[0], "subtype": kind[1], "scope": scope,
            "scope_id": scope_id, "tags": tags if tags is not None else rng.sample(_CORE[:30], 2),
            "priority": "normal", "created_by": author or f"agent:{scope_id}", "consent": False,
            "created_at": format_ts(created), "updated_at": format_ts(created),
            "last_accessed": format_ts(NOW - dt.timedelta(days=rng.uniform(0, 60))),
            "access_count": rng.randint(1, 4), "content": {"summary": text or _text(rng)},
            "supersedes": [], "superseded_by": [], "promoted_to": None, "promoted_from": None}


def generate(root: Path, n: int, *, dup_share: float = 0.02, seed: int = 7) -> list[tuple[str, str]]:
    """Write a store of n memories; returns the planted (original id, near-duplicate id) pairs."""
    rng = random.Random(seed)
    for sub in ("ops", "archive"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    (root / "memcli.toml").write_text("[consolidation]\nindex_pause_ms = 0\nmax_per_run = 0\n")
    folders = _folders(n)
    written: list[dict[str, Any]] = []
    planted: list[tuple[str, str]] = []
    for i in range(n):
        if written and rng.random() < dup_share:
            src = rng.choice(written)
            data = record(rng, src["scope"], src["scope_id"], (src["type"], src["subtype"]), i,
                          reword(src["content"]["summary"], rng), list(src["tags"]), src["created_by"])
            planted.append((src["id"], data["id"]))
        else:
            scope, scope_id = folders[i % len(folders)]
            data = record(rng, scope, scope_id, TYPES[rng.randrange(len(TYPES))], i)
        written.append(data)
        _write(root, data)
    return planted


def _write(root: Path, data: dict[str, Any]) -> None:
    folder = root / "global" if data["scope"] == "global" else root / data["scope"] / data["scope_id"]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{data['id']}.json").write_bytes(orjson.dumps(data, option=orjson.OPT_INDENT_2))


def add_session(root: Path, k: int = 20, *, seed: int = 23, folder: str | None = None,
                minutes_ago: float = 30.0) -> tuple[list[str], list[tuple[str, str]]]:
    """Append k memories to an existing store, as a session would: half of them new, half
    near-duplicates (reworded, same folder, type, subtype, tags and author) of live memories
    already there. They are created in the last `minutes_ago` minutes before NOW. With
    `folder` (e.g. "agent/agent0") all of them go to that folder, else they are spread over
    the folders of randomly picked memories.

    Returns the new ids and the planted (existing id, new near-duplicate id) pairs.
    """
    rng = random.Random(seed)
    existing = _live_records(root, rng, k - k // 2, folder)
    if not existing:
        raise ValueError(f"no live memory to duplicate in {root}")
    folders = sorted({(src["scope"], src["scope_id"]) for src in existing})
    new_ids: list[str] = []
    planted: list[tuple[str, str]] = []
    for i in range(k):
        if i % 2:
            src = existing[(i // 2) % len(existing)]
            data = record(rng, src["scope"], src["scope_id"], (src["type"], src["subtype"]), i,
                          reword(src["content"]["summary"], rng), list(src["tags"]), src["created_by"])
            _make_recent(data, rng, f"session{seed}-{i}", minutes_ago)
            planted.append((src["id"], data["id"]))
        else:
            scope, scope_id = folders[rng.randrange(len(folders))]
            data = record(rng, scope, scope_id, TYPES[rng.randrange(len(TYPES))], i)
            _make_recent(data, rng, f"session{seed}-{i}", minutes_ago)
        new_ids.append(data["id"])
        _write(root, data)
    return new_ids, planted


def _make_recent(data: dict[str, Any], rng: random.Random, id_seed: str, minutes_ago: float) -> None:
    """Give a record a fresh id and timestamps within the last `minutes_ago` minutes."""
    created = NOW - dt.timedelta(minutes=rng.uniform(1, minutes_ago))
    data["id"] = new_memory_id(created, id_seed)
    data["created_at"] = data["updated_at"] = data["last_accessed"] = format_ts(created)
    data["access_count"] = 1


def _live_records(root: Path, rng: random.Random, k: int, folder: str | None = None) -> list[dict[str, Any]]:
    """Up to k distinct live (not superseded) JSON memories of the store (or of one folder),
    picked at random among those older than a week: a fresh memory is protected, and so is
    its fresh duplicate, so the pair would never merge."""
    week_ago = format_ts(NOW - dt.timedelta(days=7))
    bases = [folder] if folder else ["agent/*", "team/*", "global"]
    files = [p for base in bases for p in root.glob(f"{base}/mem_*.json")]
    files.sort()
    rng.shuffle(files)
    picked: list[dict[str, Any]] = []
    for path in files:
        data = orjson.loads(path.read_bytes())
        summary = data.get("content", {}).get("summary")
        old = str(data.get("created_at", "")) < week_ago
        if old and not data.get("superseded_by") and isinstance(summary, str) and summary.split():
            picked.append(data)
            if len(picked) == k:
                break
    return picked
