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
import compileall
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
    from memcli.store.formats import encode
    from memcli.store.model import new_memory_id, parse_ts

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
        content = data["content"]
        out[data["id"]] = (content["summary"], content.get("details", ""), " ".join(data["tags"]))
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
    con.execute("create virtual table d using fts5(id unindexed, summary, details, tags, "
                "tokenize='porter unicode61')")
    con.executemany("insert into d values (?,?,?,?)", [(i, *docs[i]) for i in docs])

    def search(query: str, k: int) -> list[str]:
        words = [w for w in RAW_TOKEN.findall(query) if not is_stop(w)]
        pieces = [p for w in words for p in re.findall(r"[^\W_]+", w) if not is_stop(p)]
        if not pieces:
            return []
        match = " OR ".join('"' + p.replace('"', "") + '"' for p in pieces)
        rows = con.execute("select id, bm25(d, 0, 2.0, 1.0, 1.5) as r from d where d match ? "
                           "order by r limit ?",
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
            short = zip(recall_set.HOLDOUT_SHORT, parts["held out"], strict=True)
            parts["held out, short"] = [(q, w) for q, (_, w) in short]
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

QUERIES = ["deploy staging production", "rollback migration schema", "redis cache timeout",
           "kubernetes docker image build", "token vault secret rotate", "incident review alert dashboard",
           "worker queue retry latency", "feature flag config", "postgres index query",
           "merge release branch"]
PROMPT = ("the worker queue keeps timing out after the redis upgrade, how did we fix the retry latency "
          "last time?")


def _read_floor(store: Path) -> tuple[float, float]:
    """Reading and parsing every live memory file: (wall, CPU) seconds."""
    wall, cpu = time.perf_counter(), time.process_time()
    for pattern in ("agent/*/mem_*.json", "team/*/mem_*.json", "global/mem_*.json"):
        for path in store.glob(pattern):
            orjson.loads(path.read_bytes())
    return time.perf_counter() - wall, time.process_time() - cpu


def _process(argv: list[str], stdin: str = "", cwd: Path | None = None, printed: list[int] | None = None
             ) -> tuple[float, float]:
    """One whole process: (wall, CPU of the process) seconds (CPU from its rusage). With
    `printed`, the number of bytes it printed is appended (a hook past its budget prints
    nothing: a time without a briefing is no success)."""
    started = time.perf_counter()
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=cwd,
                            stdout=subprocess.PIPE if printed is not None else subprocess.DEVNULL,
                            env={**os.environ, "MEMCLI_NOW": ""})
    assert proc.stdin is not None
    proc.stdin.write(stdin.encode())
    proc.stdin.close()
    if printed is not None:
        assert proc.stdout is not None
        printed.append(len(proc.stdout.read()))
    _pid, _status, usage = os.wait4(proc.pid, 0)
    proc.returncode = 0
    return time.perf_counter() - started, usage.ru_utime + usage.ru_stime


def _interleaved(runs: dict[str, Any], rounds: int) -> dict[str, dict[str, float]]:
    """Each named process `rounds` times, one of each in turn (so that the machine's load
    falls on all alike); median wall and CPU of each."""
    walls: dict[str, list[float]] = {name: [] for name in runs}
    cpus: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(rounds):
        for name, run in runs.items():
            wall, cpu = run()
            walls[name].append(wall)
            cpus[name].append(cpu)
    return {name: {"wall": statistics.median(walls[name]), "cpu": statistics.median(cpus[name]),
                   "wall_p90": sorted(walls[name])[int(0.9 * (len(walls[name]) - 1))]} for name in runs}


def _in_process(fn: Any, repeat: int) -> dict[str, float]:
    walls, cpus = [], []
    for _ in range(repeat):
        wall, cpu = time.perf_counter(), time.process_time()
        fn()
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return {"wall": statistics.median(walls), "cpu": statistics.median(cpus)}


def speed(src: Path, rounds: int = 15) -> dict[str, Any]:
    """The speed figures on a copy of the store `src` (made by bench/generate.py)."""
    from memcli.recall import index as rindex
    from memcli.recall import search
    from memcli.store import memories
    from memcli.store.model import parse_ts
    from memcli.store.store import Store

    os.environ["MEMCLI_NOW"] = NOW
    # An installed package has its bytecode: with PYTHONDONTWRITEBYTECODE set (or a tree just
    # edited), each process would compile memcli's changed modules again (15-30 ms of CPU).
    compileall.compile_dir(str(ROOT / "memcli"), quiet=1)
    work = Path(tempfile.mkdtemp(prefix="memcli-recall-"))
    store_dir = work / "s"
    shutil.copytree(src, store_dir)
    out_notes: list[str] = []
    if not any(store_dir.glob("*/*/_index.json")):  # bench/generate.py writes none; memcli always does
        fresh = Store(store_dir)
        with fresh.writing(60):
            memories.reindex(fresh)
        out_notes.append("folder indices written first (`memcli reindex`), as every store memcli writes has")
    with (store_dir / "memcli.toml").open("a") as handle:
        handle.write('\n[recall]\nagent = "agent0"\n')
    old = time.time() - 60  # files written a minute ago: folder stamps and the settings cache are trusted
    folders = [p for p in store_dir.glob("*/*") if p.is_dir()]
    for path in [store_dir / "memcli.toml", *folders, store_dir / "global"]:
        os.utime(path, (old, old))
    count = sum(1 for pattern in ("*/*/mem_*.json", "global/mem_*.json") for _ in store_dir.glob(pattern))
    out: dict[str, Any] = {"memories": count, "load_before": os.getloadavg(), "notes": out_notes}
    floors = [_read_floor(store_dir) for _ in range(3)]
    out["read_floor"] = {"wall": statistics.median(f[0] for f in floors),
                         "cpu": statistics.median(f[1] for f in floors)}
    store = Store(store_dir)
    builds = []
    for _ in range(2):
        wall, cpu = time.perf_counter(), time.process_time()
        with rindex.writing(store_dir, 60):
            rindex.rebuild(store, [])
        builds.append((time.perf_counter() - wall, time.process_time() - cpu))
    out["build"] = {"wall": min(b[0] for b in builds), "cpu": min(b[1] for b in builds)}
    search.recall(store, "warm up", None, 5)
    everyone = [_in_process(lambda q=q: search.recall(store, q, None, 5), 3)["wall"] for q in QUERIES]
    own = [_in_process(lambda q=q: search.recall(store, q, "agent0", 5), 3)["wall"] for q in QUERIES]
    out["query_ms"] = statistics.median(everyone) * 1000
    out["query_agent_ms"] = statistics.median(own) * 1000
    out["query_prompt_ms"] = _in_process(lambda: search.recall(store, PROMPT, "agent0", 3), 5)["wall"] * 1000

    memcli = str(Path(sys.executable).absolute().parent / "memcli")
    hook = [memcli, "--store", str(store_dir), "hook"]
    sessions = iter(range(10_000))
    start_in = lambda: orjson.dumps({"session_id": f"b{next(sessions)}", "cwd": str(store_dir),  # noqa: E731
                                     "hook_event_name": "SessionStart", "source": "startup"}).decode()
    prompt_in = lambda: orjson.dumps({"session_id": f"b{next(sessions)}", "cwd": str(store_dir),  # noqa: E731
                                      "hook_event_name": "UserPromptSubmit", "prompt": PROMPT}).decode()
    queries = iter(QUERIES * 100)
    runs = {
        "floor": lambda: _process([sys.executable, "-c", "pass"]),
        "recall": lambda: _process([memcli, "--store", str(store_dir), "recall", next(queries),
                                    "--agent", "agent0"]),
        "prompt": lambda: _process([*hook, "prompt"], prompt_in()),
        "session-start": lambda: _process([*hook, "session-start"], start_in()),
        "mcp": lambda: _mcp_first_answer(memcli, store_dir),
    }
    _interleaved(runs, 1)  # warm the page cache and the settings cache
    out["processes"] = _interleaved(runs, rounds)
    out["rounds"] = rounds
    out["cold"] = _cold_briefings(store_dir, hook, start_in, rounds)

    adds = []
    moment = parse_ts(NOW)[0]
    st = Store(store_dir)
    folder = st.folder("agent", "agent0")
    # the index in line before the adds; a cold briefing above may have started a build of the
    # index in the background: wait for it (the recall says so rather than wait for a build)
    deadline = time.monotonic() + 600
    while True:
        try:
            search.recall(st, "zanzibar", "agent0", 1)
            break
        except rindex.IndexUnusable:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
    for n in range(9):
        new = memories.NewMemory("semantic", "fact", "agent", "agent0", ["bench"], "normal", "agent:agent0",
                                 f"Benchmark note {n} about zanzibar queues")
        with st.writing(5):
            result = memories._add(st, new, moment, lambda f, name: None)
        wall, cpu = time.perf_counter(), time.process_time()
        with rindex.keeping_current(st) as note:
            note(folder, Path(result.path).name)
        adds.append((time.perf_counter() - wall, time.process_time() - cpu))
    out["add_keep_current_ms"] = statistics.median(a[0] for a in adds) * 1000

    docs = {}
    for path in [*store_dir.glob("*/*/mem_*.json"), *store_dir.glob("global/mem_*.json")]:
        data = orjson.loads(path.read_bytes())
        docs[data["id"]] = (data["content"].get("summary", ""), data["content"].get("details", "") or "",
                            " ".join(data.get("tags") or []))
    wall = time.perf_counter()
    fsearch = fts5(docs, str(work / "fts.sqlite"))
    out["fts5_build_s"] = time.perf_counter() - wall
    out["fts5_query_ms"] = statistics.median(_in_process(lambda q=q: fsearch(q, 5), 1)["wall"]
                                             for q in QUERIES) * 1000
    out["load_after"] = os.getloadavg()
    shutil.rmtree(work, ignore_errors=True)
    return out


def _cold_briefings(store: Path, hook: list[str], start_in: Any, rounds: int) -> dict[str, Any]:
    """`hook session-start` with no search index yet (a store's first session: the briefing
    from the folders' `_index.json`), each run after the floor: first as Claude Code runs it
    (the 300 ms budget: a run past it prints nothing, so the runs that printed are counted),
    then with the budget lifted, for the time a whole briefing takes. The index lock is held
    meanwhile, so the background build each run starts gives up at once (a build competing
    with the next runs would time the machine, not the briefing)."""
    from filelock import FileLock

    base = store / ".cache" / "recall"
    for old in base.glob("gen-*"):
        shutil.rmtree(old, ignore_errors=True)
    (base / "current").unlink(missing_ok=True)
    toml = store / "memcli.toml"
    settings = toml.read_text()
    out: dict[str, Any] = {"rounds": rounds}
    with FileLock(str(base / ".lock")):
        for phase, extra in (("budget", ""), ("whole", "hook_budget_ms = 60000\n")):
            toml.write_text(settings + extra)  # (a [recall] table is last: see speed())
            _process([*hook, "session-start"], start_in())  # untimed: the settings cache
            floors: list[tuple[float, float]] = []
            hooks: list[tuple[float, float]] = []
            printed: list[int] = []
            for _ in range(rounds):
                floors.append(_process([sys.executable, "-c", "pass"]))
                hooks.append(_process([*hook, "session-start"], start_in(), printed=printed))
            out[phase] = {"floor": {"wall": _med(floors, 0), "cpu": _med(floors, 1)},
                          "hook": {"wall": _med(hooks, 0), "cpu": _med(hooks, 1),
                                   "wall_max": max(h[0] for h in hooks)},
                          "printed": sum(1 for n in printed if n > 0)}
        toml.write_text(settings)
        _process([*hook, "session-start"], start_in())
    return out


def _med(pairs: list[tuple[float, float]], i: int) -> float:
    return statistics.median(p[i] for p in pairs)


def _mcp_first_answer(memcli: str, store: Path) -> tuple[float, float]:
    """`memcli mcp` until its answer to Claude Code's first request (server/discover), then
    closed: (wall to the answer, CPU of the whole process)."""
    probe = {"jsonrpc": "2.0", "id": 1, "method": "server/discover",
             "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}}
    started = time.perf_counter()
    proc = subprocess.Popen([memcli, "--store", str(store), "mcp"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(orjson.dumps(probe) + b"\n")
    proc.stdin.flush()
    proc.stdout.readline()
    answered = time.perf_counter() - started
    proc.stdin.close()
    _pid, _status, usage = os.wait4(proc.pid, 0)
    proc.returncode = 0
    return answered, usage.ru_utime + usage.ru_stime


def report(qualities: list[dict[str, Any]], s: dict[str, Any] | None) -> str:
    lines = ["## Recall (bench/recall.py)", "",
             f"`python bench/recall.py{' --speed STORE' if s else ''}`, "
             f"{time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC. Quality on bench/recall_set.py (agent "
             "`coder`'s view), hit@k = the memory a query is about is among the first k.", "",
             "| set, queries | memories | ranking | hit@1 | hit@5 |", "|---|---|---|---|---|"]
    labels = {("v1", "tuning"): "v1 (first work: 20 hand-written + 80 templated distractors), "
                                "100 agent questions",
              ("v2", "tuning"): "v2, the same 100 agent questions (tuning part)",
              ("v2", "held out"): "v2, 60 held-out prompts (typed into the agent)",
              ("v2", "held out, short"): "v2, 60 held-out short questions (to the `recall` tool)"}
    for q in qualities:
        for part, figures in q["parts"].items():
            for name in ("memcli", "plain BM25", "SQLite FTS5 (porter)"):
                h1, h5 = figures[name]
                label = labels[(q["version"], part)]
                lines.append(f"| {label} | {q['memories']} | {name} | {h1:.2f} | {h5:.2f} |")
    if s:
        lines += _speed_lines(s)
    return "\n".join(lines) + "\n"


def _speed_lines(s: dict[str, Any]) -> list[str]:
    p, floor, read = s["processes"], s["processes"]["floor"], s["read_floor"]
    load = f"load average {s['load_before'][0]:.1f} before, {s['load_after'][0]:.1f} after"

    def proc(name: str) -> str:
        f = p[name]
        return (f"{f['wall']:.3f} s (p90 {f['wall_p90']:.3f}); {f['wall'] / floor['wall']:.1f}x | "
                f"{f['cpu']:.3f} s; {f['cpu'] / floor['cpu']:.1f}x")

    return ["", f"Speed on a bench/generate.py store of {s['memories']:,} memories, {os.cpu_count()} CPUs "
            f"shared with other work ({load}): read the ratios to the floors of the same run, and the CPU "
            f"times, which the load moves less. Whole processes: median of {s['rounds']} runs each, "
            "interleaved with the floor, run as Claude Code runs them (console script by absolute path, "
            "hook JSON on stdin)." + "".join(f" Note: {n}." for n in s.get("notes", [])), "",
            "| figure | target | wall (ratio to its floor) | CPU (ratio) |", "|---|---|---|---|",
            f"| floor: read + parse every memory file | | {read['wall']:.2f} s | {read['cpu']:.2f} s |",
            f"| index build from scratch | <= 2x the read floor | {s['build']['wall']:.2f} s; "
            f"{s['build']['wall'] / read['wall']:.1f}x | {s['build']['cpu']:.2f} s; "
            f"{s['build']['cpu'] / read['cpu']:.1f}x |",
            f"| median query in process, every folder | <= 20 ms | {s['query_ms']:.1f} ms | |",
            f"| median query in process, agent0's view | <= 20 ms | {s['query_agent_ms']:.1f} ms | |",
            f"| query in process, a 20-word prompt | | {s['query_prompt_ms']:.1f} ms | |",
            f"| keeping the index current on `add` | <= 5 ms | {s['add_keep_current_ms']:.2f} ms | |",
            f"| floor: `python -c pass` | | {floor['wall']:.3f} s | {floor['cpu']:.3f} s |",
            f"| `memcli recall` (agent0) | <= 0.25 s (idle machine) | {proc('recall')} |",
            f"| `memcli hook prompt` | <= 0.3 s | {proc('prompt')} |",
            f"| `memcli hook session-start` | <= 0.3 s | {proc('session-start')} |",
            f"| `memcli mcp`: first answer (server/discover) | ~1.5 s (Claude Code's wait) | {proc('mcp')} |",
            _cold_line(s["cold"]),
            f"| SQLite FTS5, same texts: build | | {s['fts5_build_s']:.2f} s; "
            f"{s['fts5_build_s'] / read['wall']:.1f}x | |",
            f"| SQLite FTS5, same texts: median query | | {s['fts5_query_ms']:.1f} ms | |"]


def _cold_line(cold: dict[str, Any]) -> str:
    lines = []
    labels = {"budget": "as run (300 ms budget)", "whole": "budget lifted: the whole briefing"}
    for phase, label in labels.items():
        f, h, n = cold[phase]["floor"], cold[phase]["hook"], cold["rounds"]
        lines.append(f"| `memcli hook session-start`, no search index yet (first session), {label}; "
                     f"median of {n}, max; printed a briefing: {cold[phase]['printed']} of {n} | <= 0.3 s | "
                     f"{h['wall']:.3f} s (max {h['wall_max']:.3f}); {h['wall'] / f['wall']:.1f}x | "
                     f"{h['cpu']:.3f} s; {h['cpu'] / f['cpu']:.1f}x |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--speed", type=Path, help="a store made by bench/generate.py (100,000 memories)")
    parser.add_argument("--rounds", type=int, default=15, help="runs of each whole process (default 15)")
    parser.add_argument("--out", type=Path, help="write the section into this RESULTS.md (its own markers)")
    args = parser.parse_args()
    qualities = [quality("v1"), quality("v2")]
    s = speed(args.speed, args.rounds) if args.speed else None
    section = report(qualities, s)
    print(section)
    if args.out:
        from bench import sections

        sections.write(args.out, "recall", section)
    return 0


if __name__ == "__main__":
    sys.exit(main())
