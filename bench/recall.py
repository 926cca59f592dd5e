"""Recall benchmark: ranking quality on bench/recall_set.py, and speed at 100,000 memories.

    python bench/recall.py                       # quality only
    python bench/recall.py --speed /tmp/rb/n100000 [--out bench/RESULTS.md]

Quality: hit@1 and hit@5 of memcli's ranking, of plain BM25 (k1 1.2, b 0.75, lowercase \\w+
tokens of summary + details + tags, no stemming, no stop words) and of SQLite FTS5 (porter
tokenizer, bm25 with the same field weights as memcli) on the same texts and queries.
Speed (on a store made by bench/generate.py): each figure beside a floor measured in the same
run (reading and parsing every memory file), as the other benchmarks do. The section of
bench/RESULTS.md between the recall markers is replaced; the rest is left alone.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import orjson  # noqa: E402

from bench import recall_set  # noqa: E402

NOW = "2026-11-22T00:00:00Z"
BEGIN, END = "<!-- recall:begin -->", "<!-- recall:end -->"


def rows_of(version: str) -> tuple[list[tuple[str, str, list[str], str | None]], int]:
    """The memories of a set version as (summary, details, tags, query or None), and how many
    of the queries are held out (the last ones)."""
    targets = [(s, d, t, q) for s, d, t, q in recall_set.TARGETS]
    if version == "v1":
        return targets + [(s, "", t, None) for s, t in recall_set.distractors_v1()], 0
    holdout = [(s, d, t, q) for s, d, t, q in recall_set.HOLDOUT]
    return targets + holdout + [(s, d, t, None) for s, d, t in recall_set.DISTRACTORS_V2], len(holdout)


def make_store(root: Path, version: str = "v2") -> list[tuple[str, str]]:
    """The set as a store (agent coder); returns (query, wanted id) pairs, held-out last."""
    from memcli.store.model import encode, new_memory_id, parse_ts

    moment = parse_ts(NOW)[0]
    folder = root / "agent" / "coder"
    folder.mkdir(parents=True)
    for sub in ("ops", "archive", "global"):
        (root / sub).mkdir()
    (root / "memcli.toml").write_text("[consolidation]\nindex_pause_ms = 0\n")
    pairs: list[tuple[str, str]] = []
    rows, _held = rows_of(version)
    for n, (summary, details, tags, query) in enumerate(rows):
        mem_id = new_memory_id(moment, f"recall{n}")
        content = {"summary": summary, **({"details": details} if details else {})}
        data = {"id": mem_id, "type": "semantic", "subtype": "fact", "scope": "agent", "scope_id": "coder",
                "tags": tags, "priority": "normal", "created_by": "agent:coder", "consent": False,
                "created_at": NOW, "updated_at": NOW, "last_accessed": None, "access_count": 0,
                "content": content, "supersedes": [], "superseded_by": [], "promoted_to": None,
                "promoted_from": None}
        (folder / f"{mem_id}.json").write_bytes(encode(data, "json"))
        if query:
            pairs.append((query, mem_id))
    return pairs


def _docs(root: Path) -> dict[str, tuple[str, str, str]]:
    out = {}
    for path in sorted((root / "agent" / "coder").glob("mem_*.json")):
        data = orjson.loads(path.read_bytes())
        out[data["id"]] = (data["content"]["summary"], data["content"].get("details", ""), " ".join(data["tags"]))
    return out


def plain_bm25(docs: dict[str, tuple[str, str, str]]) -> Any:
    tok = re.compile(r"\w+")
    ids = list(docs)
    tfs = [Counter(tok.findall(" ".join(docs[i]).lower())) for i in ids]
    lengths = [sum(tf.values()) for tf in tfs]
    avg = sum(lengths) / len(lengths)
    df: Counter[str] = Counter(t for tf in tfs for t in tf)
    n = len(ids)

    def search(query: str, k: int) -> list[str]:
        terms = set(tok.findall(query.lower()))
        scores = []
        for i, tf in enumerate(tfs):
            s = 0.0
            for t in terms:
                if t in tf:
                    idf = math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5))
                    s += idf * tf[t] * 2.2 / (tf[t] + 1.2 * (0.25 + 0.75 * lengths[i] / avg))
            scores.append((s, i))
        scores.sort(reverse=True)
        return [ids[i] for s, i in scores[:k] if s > 0]

    return search


def fts5(docs: dict[str, tuple[str, str, str]], path: str = ":memory:") -> Any:
    from memcli.recall.text import RAW_TOKEN, is_stop

    con = sqlite3.connect(path)
    con.execute("create virtual table d using fts5(id unindexed, summary, details, tags, tokenize='porter unicode61')")
    con.executemany("insert into d values (?,?,?,?)", [(i, *docs[i]) for i in docs])

    def search(query: str, k: int) -> list[str]:
        words = [w for w in RAW_TOKEN.findall(query) if not is_stop(w)]
        pieces = [p for w in words for p in re.findall(r"[^\W_]+", w) if not is_stop(p)]
        if not pieces:
            return []
        match = " OR ".join('"' + p.replace('"', "") + '"' for p in pieces)
        rows = con.execute("select id, bm25(d, 0, 2.0, 1.0, 1.5) as r from d where d match ? order by r limit ?",
                           (match, k)).fetchall()
        return [r[0] for r in rows]

    return search


def hits(search: Any, pairs: list[tuple[str, str]]) -> tuple[float, float]:
    h1 = h5 = 0
    for query, wanted in pairs:
        found = search(query, 5)
        h1 += bool(found) and found[0] == wanted
        h5 += wanted in found
    return h1 / len(pairs), h5 / len(pairs)


def quality(version: str = "v2") -> dict[str, Any]:
    """hit@1 and hit@5 of each ranking on one version of the set (for v2: the tuning
    queries and the held-out ones apart)."""
    from memcli.recall import search
    from memcli.store.store import Store

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "store"
        os.environ["MEMCLI_NOW"] = NOW
        pairs = make_store(root, version)
        held = rows_of(version)[1]
        docs = _docs(root)
        store = Store(root)

        def ours(query: str, k: int) -> list[str]:
            try:
                return [r.id for r in search.recall(store, query, "coder", k)]
            except search.EmptyQueryError:
                return []

        parts = {"tuning": pairs[:len(pairs) - held]}
        if held:
            parts["held out"] = pairs[len(pairs) - held:]
            parts["held out, short"] = [(q, w) for q, (_, w) in zip(recall_set.HOLDOUT_SHORT, parts["held out"],
                                                                   strict=True)]
        rankings = {"memcli": ours, "plain BM25": plain_bm25(docs), "SQLite FTS5 (porter)": fts5(docs)}
        return {"version": version, "memories": len(docs),
                "parts": {part: {"queries": len(ps), **{name: hits(fn, ps) for name, fn in rankings.items()}}
                          for part, ps in parts.items()}}


def misses(version: str = "v2", part: str = "tuning") -> list[tuple[str, str, list[str]]]:
    """The queries memcli misses at 5 (query, wanted summary, summaries returned): for
    looking at the tuning part only."""
    from memcli.recall import search
    from memcli.store.store import Store

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "store"
        os.environ["MEMCLI_NOW"] = NOW
        pairs = make_store(root, version)
        held = rows_of(version)[1]
        pairs = pairs[:len(pairs) - held] if part == "tuning" else pairs[len(pairs) - held:]
        docs = _docs(root)
        store = Store(root)
        out = []
        for query, wanted in pairs:
            got = [r.id for r in search.recall(store, query, "coder", 5)]
            if wanted not in got:
                out.append((query, docs[wanted][0], [docs[g][0] for g in got]))
        return out


# ---------------------------------------------------------------- speed


def _floor(store: Path) -> float:
    started = time.perf_counter()
    for path in store.glob("*/*/mem_*.json"):
        orjson.loads(path.read_bytes())
    for path in store.glob("global/mem_*.json"):
        orjson.loads(path.read_bytes())
    return time.perf_counter() - started


def _proc(args: list[str], stdin: str = "") -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "memcli", *args], input=stdin, capture_output=True, text=True,
                   env={**os.environ, "MEMCLI_NOW": NOW}, check=False)
    return time.perf_counter() - started


def speed(src: Path) -> dict[str, Any]:
    from memcli.recall import index as rindex
    from memcli.recall import search
    from memcli.store import memories
    from memcli.store.model import parse_ts
    from memcli.store.store import Store

    os.environ["MEMCLI_NOW"] = NOW
    work = Path(tempfile.mkdtemp(prefix="memcli-recall-"))
    store_dir = work / "s"
    shutil.copytree(src, store_dir)
    out: dict[str, Any] = {"memories": sum(1 for _ in store_dir.glob("**/mem_*.json"))}
    floors = [_floor(store_dir) for _ in range(3)]
    out["floor_s"] = statistics.median(floors)
    store = Store(store_dir)
    started = time.perf_counter()
    with rindex.writing(store_dir, 60):
        rindex.rebuild(store, [])
    out["build_s"] = time.perf_counter() - started
    queries = ["deploy staging production", "rollback migration schema", "redis cache timeout",
               "kubernetes docker image build", "token vault secret rotate", "incident review alert dashboard",
               "worker queue retry latency", "feature flag config", "postgres index query", "merge release branch"]
    times = []
    for _ in range(3):
        for query in queries:
            t = time.perf_counter()
            search.recall(store, query, None, 5)
            times.append(time.perf_counter() - t)
    out["query_median_ms"] = statistics.median(times) * 1000
    out["query_agent_median_ms"] = statistics.median(
        [_timed(lambda q=q: search.recall(store, q, "agent0", 5)) for q in queries]) * 1000
    procs = [_proc(["--store", str(store_dir), "recall", q, "--agent", "agent0"]) for q in queries[:5]]
    out["recall_process_s"] = statistics.median(procs)
    hook_in = orjson.dumps({"session_id": "bench", "cwd": str(store_dir), "hook_event_name": "UserPromptSubmit",
                            "prompt": "how do we rotate the vault token"}).decode()
    (store_dir / "memcli.toml").write_text((store_dir / "memcli.toml").read_text() + "\n[recall]\nagent = \"agent0\"\n")
    out["prompt_hook_process_s"] = statistics.median(
        [_proc(["--store", str(store_dir), "hook", "prompt"], hook_in) for _ in range(5)])
    adds = []
    moment = parse_ts(NOW)[0]
    st = Store(store_dir)
    folder = st.folder("agent", "agent0")
    for n in range(5):
        new = memories.NewMemory("semantic", "fact", "agent", "agent0", ["bench"], "normal", "agent:agent0",
                                 f"Benchmark note {n} about zanzibar queues")
        path_holder: list[str] = []
        with st.writing(5):
            result = memories._add(st, new, moment, lambda f, name: path_holder.append(name))
        t = time.perf_counter()
        with rindex.keeping_current(st) as note:
            note(folder, Path(result.path).name)
        adds.append(time.perf_counter() - t)
    out["add_keep_current_ms"] = statistics.median(adds) * 1000
    docs = {}
    for path in store_dir.glob("**/mem_*.json"):
        if "archive" in path.parts:
            continue
        data = orjson.loads(path.read_bytes())
        docs[data["id"]] = (data["content"].get("summary", ""), data["content"].get("details", "") or "",
                            " ".join(data.get("tags") or []))
    t = time.perf_counter()
    fsearch = fts5(docs, str(work / "fts.sqlite"))
    out["fts5_build_s"] = time.perf_counter() - t
    out["fts5_query_median_ms"] = statistics.median([_timed(lambda q=q: fsearch(q, 5)) for q in queries]) * 1000
    shutil.rmtree(work, ignore_errors=True)
    return out


def _timed(fn: Any) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def report(q: dict[str, Any], s: dict[str, Any] | None) -> str:
    lines = [BEGIN, "## Recall (bench/recall.py)", "",
             f"Quality on bench/recall_set.py: {q['memories']} memories, {q['queries']} queries phrased as an "
             "agent asks (not copied from the memory).", "",
             "| ranking | hit@1 | hit@5 |", "|---|---|---|"]
    for name in ("memcli", "plain BM25", "SQLite FTS5 (porter)"):
        h1, h5 = q[name]
        lines.append(f"| {name} | {h1:.2f} | {h5:.2f} |")
    if s:
        f = s["floor_s"]
        lines += ["", f"Speed on a bench/generate.py store of {s['memories']:,} memories (machine shared and "
                  "loaded while measured; ratios to the floor of the same run):", "",
                  "| figure | value | target |", "|---|---|---|",
                  f"| floor: read + parse every memory file | {f:.2f} s | |",
                  f"| index build from scratch (tantivy) | {s['build_s']:.2f} s ({s['build_s'] / f:.1f}x floor) "
                  "| <= 2x floor |",
                  f"| median query in process, every folder | {s['query_median_ms']:.1f} ms | <= 20 ms |",
                  f"| median query in process, one agent's view | {s['query_agent_median_ms']:.1f} ms | <= 20 ms |",
                  f"| `memcli recall` whole process (median of 5) | {s['recall_process_s']:.3f} s | <= 0.25 s |",
                  f"| `memcli hook prompt` whole process (median of 5) | {s['prompt_hook_process_s']:.3f} s "
                  "| <= 0.3 s |",
                  f"| keeping the index current on `add` | {s['add_keep_current_ms']:.2f} ms | <= 5 ms |",
                  f"| SQLite FTS5, same texts: build | {s['fts5_build_s']:.2f} s ({s['fts5_build_s'] / f:.1f}x floor) | |",
                  f"| SQLite FTS5, same texts: median query | {s['fts5_query_median_ms']:.1f} ms | |"]
    lines.append(END)
    return "\n".join(lines) + "\n"


def write_section(out: Path, section: str) -> None:
    text = out.read_text() if out.exists() else ""
    if BEGIN in text and END in text:
        text = text[:text.index(BEGIN)] + section + text[text.index(END) + len(END) + 1:]
    else:
        text = text.rstrip("\n") + "\n\n" + section
    out.write_text(text)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--speed", type=Path, help="a store made by bench/generate.py (e.g. 100,000 memories)")
    parser.add_argument("--out", type=Path, help="write the section into this RESULTS.md")
    args = parser.parse_args()
    q = quality()
    s = speed(args.speed) if args.speed else None
    section = report(q, s)
    print(section)
    if args.out:
        write_section(args.out, section)
    return 0


if __name__ == "__main__":
    sys.exit(main())
