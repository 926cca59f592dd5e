"""Synthetic stores for the benchmark: N memories with planted near-duplicates.

    python bench/generate.py DIR N [--shape huge|small|long|mix] [--seed 7]

Deterministic for a given (n, shape, seed). A share of the memories are planted
near-duplicates: a restatement of another memory of the same block (sentences reordered, words
replaced, inflected, added or dropped, facts kept; see :func:`reword`), with the same tags and
author. Shapes (``SHAPES``):

- ``huge``: a few agent folders of about 12,000 and four (type, subtype) blocks each: a few
  blocks of thousands, the shape that makes all-pairs comparison quadratic;
- ``small``: agent folders of 500 memories and 40 (type, subtype) blocks, about 12 memories a
  block; summaries of 2 to 6 sentences, details of up to 12;
- ``long``: the huge shape with details of 10 to 40 sentences on every memory;
- ``mix``: agent, team and global folders of uneven sizes (teams shared by several agents),
  blocks of every size, ages from a day to two years, some details, some memories never used.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import random
import re
import sys
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script from a checkout
    sys.path.insert(0, str(ROOT))

from memcli.store.model import format_ts, new_memory_id  # noqa: E402

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


SHAPES = ("huge", "small", "long", "mix")
# the small shape: 4 types x 10 subtypes = 40 blocks a folder
SUBTYPES = tuple(f"s{k}" for k in range(10))
SMALL_FOLDER = 500


def _text(rng: random.Random, low: int = 2, high: int = 8) -> str:
    sentences = []
    for _ in range(rng.randint(low, high)):
        words = rng.choices(_WORDS, cum_weights=_CUM, k=rng.randint(6, 16))
        sentences.append(" ".join(words).capitalize() + ".")
    return " ".join(sentences)


# Words a restatement adds or drops without changing what is said.
_FILLERS = ("the", "a", "also", "still", "just")
# Core words carry what the guards compare (negation, order, roles, the lexicon's contrasts):
# a restatement keeps them where they are.
_KEPT = frozenset(_CORE) - set(_FILLERS)


def reword(text: str, rng: random.Random) -> str:
    """A near-duplicate that restates ``text``: now and then its sentences in another order,
    and 3-35% of its words edited the way a restatement edits them, each edit at least two
    words from the next: a word replaced by another that no guard knows (as by a synonym), a
    word inflected, a filler word added or dropped, a word dropped. What the guards compare
    stays put: no two words trade places (a swapped role), no negation, order word or core
    term is touched, and no run of new words appears (an added clause). The planted pairs span
    the range above the merge threshold, and some fall below it."""
    sentences = [s for s in re.split(r"(?<=\.)\s+", text) if s]
    if len(sentences) > 1 and rng.random() < 0.3:
        moved = sentences.pop(rng.randrange(len(sentences)))
        sentences.insert(rng.randrange(len(sentences) + 1), moved)
    words = " ".join(sentences).split()
    wanted = max(1, round(len(words) * rng.uniform(0.03, 0.35)))
    chosen: list[int] = []
    for at in sorted(rng.sample(range(len(words)), min(wanted, len(words)))):
        if not chosen or at - chosen[-1] >= 2:
            chosen.append(at)
    for at in reversed(chosen):  # from the end: an insertion does not move the edits still to make
        words[at:at + 1] = _restated(words[at], rng, len(words) > 5)
    lower = [at for at, word in enumerate(words) if word[:1].islower()]
    if words == " ".join(sentences).split() and lower:  # every edit kept its word: add a filler
        words.insert(rng.choice(lower), rng.choice(_FILLERS))
    return " ".join(words)


def _restated(token: str, rng: random.Random, may_drop: bool) -> list[str]:
    """What one word of a text becomes in a restatement (see :func:`reword`)."""
    word = token.rstrip(".")
    end = token[len(word):]
    capital = word[:1].isupper()
    op = rng.random()
    if word.lower() in _FILLERS:
        return [] if op < 0.5 and may_drop and not end and not capital else [token]
    if word.lower() in _KEPT:
        return [rng.choice(_FILLERS), token] if op < 0.3 and not capital else [token]
    if op < 0.45 and not capital:  # (a capital after "a." may read as a name: keep those)
        synonym = rng.choices(_WORDS, cum_weights=_CUM)[0]
        while synonym in _KEPT or synonym in _FILLERS:
            synonym = rng.choices(_WORDS, cum_weights=_CUM)[0]
        return [synonym + end]
    if op < 0.7:
        return [(word[:-1] if word.endswith("s") else word + "s") + end]
    if op < 0.85 and may_drop and not end and not capital:
        return []
    return [token] if capital else [rng.choice(_FILLERS), token]


def _folders(n: int, shape: str = "huge") -> list[tuple[str, str]]:
    if shape == "small":
        return [("agent", f"agent{i}") for i in range(max(1, n // SMALL_FOLDER))]
    if shape == "mix":  # uneven: folder k gets a share ~ 1/(k+1) (see _pick_folder)
        agents = max(4, n // 2_000)
        return ([("agent", f"agent{i}") for i in range(agents)]
                + [("team", f"team{i}") for i in range(max(1, agents // 8))] + [("global", "global")])
    agents = max(2, n // 12_000)
    return [("agent", f"agent{i}") for i in range(agents)] + [("team", "team0"), ("global", "global")]


def _kind(rng: random.Random, shape: str) -> tuple[str, str]:
    """The (type, subtype) block of a new memory."""
    kind = TYPES[rng.randrange(len(TYPES))]
    if shape == "small":
        return kind[0], SUBTYPES[rng.randrange(len(SUBTYPES))]
    if shape == "mix":  # a few large blocks and a tail of small ones
        return kind[0], SUBTYPES[min(int(rng.expovariate(0.6)), len(SUBTYPES) - 1)]
    return kind


def _content(rng: random.Random, shape: str) -> dict[str, Any]:
    if shape == "small":
        content = {"summary": _text(rng, 2, 6)}
        if rng.random() < 0.6:
            content["details"] = _text(rng, 1, 12)
        return content
    if shape == "long":
        return {"summary": _text(rng, 2, 4), "details": _text(rng, 10, 40)}
    if shape == "mix":
        content = {"summary": _text(rng)}
        if rng.random() < 0.3:
            content["details"] = _text(rng, 2, 20)
        return content
    return {"summary": _text(rng)}


def _pick_folder(rng: random.Random, folders: list[tuple[str, str]], i: int, shape: str) -> tuple[str, str]:
    if shape != "mix":
        return folders[i % len(folders)]
    at = min(int(rng.paretovariate(1.2)) - 1, len(folders) - 1)  # a heavy head, a long tail
    return folders[(at * 7919) % len(folders)]


def _age(rng: random.Random, data: dict[str, Any], shape: str) -> None:
    """The mix shape: ages from a day to two years, some memories never used."""
    if shape != "mix":
        return
    days = rng.choice((rng.uniform(1, 30), rng.uniform(10, 120), rng.uniform(60, 730)))
    created = NOW - dt.timedelta(days=days)
    data["created_at"] = data["updated_at"] = format_ts(created)
    if rng.random() < 0.1:
        data["access_count"], data["last_accessed"] = 0, None
    else:
        data["last_accessed"] = format_ts(min(NOW, created + dt.timedelta(days=rng.uniform(0, 90))))


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


CHUNK = 50_000  # memories a worker writes with one random stream (see generate)


def generate(root: Path, n: int, *, dup_share: float = 0.02, seed: int = 7,
             shape: str = "huge", jobs: int = 1) -> list[tuple[str, str]]:
    """Write a store of n memories; returns the planted (original id, near-duplicate id) pairs.

    The memories are made in chunks of CHUNK, each from its own random stream (the first from
    `seed` itself, so a store of up to CHUNK memories is what it always was), and a planted
    near-duplicate restates a memory of its own chunk: the store depends on (n, shape, seed)
    only, never on `jobs`, the number of processes writing the chunks side by side."""
    if shape not in SHAPES:
        raise ValueError(f"unknown shape {shape!r}: one of {', '.join(SHAPES)}")
    for sub in ("ops", "archive"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    (root / "memcli.toml").write_text("[consolidation]\nindex_pause_ms = 0\nmax_per_run = 0\n")
    for scope, scope_id in _folders(n, shape):  # made once here, not checked file by file
        (root / "global" if scope == "global" else root / scope / scope_id).mkdir(parents=True, exist_ok=True)
    chunks = [(root, n, start, min(n, start + CHUNK), dup_share, seed, shape)
              for start in range(0, n, CHUNK)]
    if jobs <= 1 or len(chunks) == 1:
        return [pair for chunk in chunks for pair in _chunk(*chunk)]
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(max_workers=jobs) as pool:
        return [pair for found in pool.map(_chunk_args, chunks) for pair in found]


def _chunk_args(args: tuple[Any, ...]) -> list[tuple[str, str]]:
    return _chunk(*args)


def _chunk(root: Path, n: int, start: int, stop: int, dup_share: float, seed: int,
           shape: str) -> list[tuple[str, str]]:
    """Write memories start..stop-1 of a store of n (see generate)."""
    rng = random.Random(seed if start == 0 else f"{seed}:{start}")
    folders = _folders(n, shape)
    written: list[dict[str, Any]] = []
    planted: list[tuple[str, str]] = []
    for i in range(start, stop):
        if written and rng.random() < dup_share:
            src = rng.choice(written)
            data = record(rng, src["scope"], src["scope_id"], (src["type"], src["subtype"]), i,
                          reword(src["content"]["summary"], rng), list(src["tags"]), src["created_by"])
            if "details" in src["content"]:
                data["content"]["details"] = reword(src["content"]["details"], rng)
            planted.append((src["id"], data["id"]))
        else:
            scope, scope_id = _pick_folder(rng, folders, i, shape)
            data = record(rng, scope, scope_id, _kind(rng, shape), i)
            data["content"] = _content(rng, shape)
            _age(rng, data, shape)
        if len(written) < 200_000 or rng.random() < 0.05:  # sources to restate: bounded memory
            written.append(data)
        elif written:
            written[rng.randrange(len(written))] = data
        _write(root, data, made=True)
    return planted


def _write(root: Path, data: dict[str, Any], made: bool = False) -> None:
    """One memory file, written directly (a benchmark store, not a store in use); `made`:
    its folder exists already."""
    folder = root / "global" if data["scope"] == "global" else root / data["scope"] / data["scope_id"]
    if not made:
        folder.mkdir(parents=True, exist_ok=True)
    with open(f"{folder}/{data['id']}.json", "wb") as out:
        out.write(orjson.dumps(data, option=orjson.OPT_INDENT_2))


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


def main(argv: list[str] | None = None) -> int:
    """Write a store of N memories of a shape into DIR (created), print the planted pairs' count."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0],
                                     epilog="shapes: " + ", ".join(SHAPES))
    parser.add_argument("dir", type=Path, help="where to write the store (must not hold one)")
    parser.add_argument("n", type=int, help="how many memories")
    parser.add_argument("--shape", choices=SHAPES, default="huge", help="store shape (default huge)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--dup-share", type=float, default=0.02, help="share of planted near-duplicates")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                        help="processes writing chunks side by side (the store is the same for any)")
    args = parser.parse_args(argv)
    if (args.dir / "memcli.toml").exists():
        parser.error(f"{args.dir} already holds a store")
    planted = generate(args.dir, args.n, dup_share=args.dup_share, seed=args.seed, shape=args.shape,
                       jobs=args.jobs)
    print(f"{args.n} memories ({args.shape}) in {args.dir}; {len(planted)} planted near-duplicate pairs")
    return 0


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


if __name__ == "__main__":
    sys.exit(main())
