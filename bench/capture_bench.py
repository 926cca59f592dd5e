"""The capture benchmark: fact recall on the sample sessions, no secret in the store, and
the speed and memory of capturing big transcripts.

    python bench/capture_bench.py [--out bench/RESULTS.md] [--mb 10] [--big-mb 200] [--dir /tmp/capture-bench]

1. Recall: each session of bench/capture_samples.py is captured (extractive, no LLM) into a
   fresh store; a fact counts as kept when all its strings appear in the memory's summary
   and details (case and spacing aside), or in the section it names.
2. Secrets: every file the captures wrote is searched for each planted secret.
3. Speed: a synthetic Claude Code transcript of --mb MB (many turns with file reads, command
   output, failures and fixes) is captured in process, three times, against a floor measured
   in the same run: reading the file and parsing every line with orjson (the least any
   capture must do). The whole process (`memcli capture`, start-up included) is timed too.
4. Memory: peak RSS of a `memcli capture` process on the --mb transcript and on a --big-mb
   one (the same turns repeated), against a process that only imports memcli.

The report goes to stdout and replaces the "Capture" section of --out (between its markers).
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import orjson  # noqa: E402

from bench import capture_samples  # noqa: E402
from bench.capture_transcript import Transcript  # noqa: E402

NOW = "2026-11-22T00:00:00Z"
BEGIN, END = "<!-- capture-bench:begin -->", "<!-- capture-bench:end -->"


def normalise(text: str) -> str:
    return " ".join(text.lower().split())


def section_of(details: str, name: str) -> str:
    start = details.find(f"## {name}")
    if start < 0:
        return ""
    end = details.find("\n## ", start + 1)
    return details[start: end if end >= 0 else len(details)]


def fact_kept(fact: dict[str, Any], summary: str, details: str) -> bool:
    where = section_of(details, fact["section"]) if fact.get("section") else f"{summary}\n{details}"
    haystack = normalise(where)
    return all(normalise(s) in haystack for s in fact["all"])


def new_store(base: Path, name: str) -> Path:
    from memcli.store.store import init_store

    root = base / name
    init_store(root)
    (root / "memcli.toml").write_text("[consolidation]\nindex_pause_ms = 0\n", encoding="utf-8")
    return root


# ---------------------------------------------------------------- 1 and 2: recall, secrets


def recall(work: Path) -> dict[str, Any]:
    from memcli.capture import capture
    from memcli.store.store import Store

    made = capture_samples.build()
    folder = work / "transcripts"
    folder.mkdir(parents=True, exist_ok=True)
    committed = ROOT / "bench" / "capture" / "transcripts"
    stale = [n for n, text in made["files"].items()
             if not (committed / n).exists() or (committed / n).read_text(encoding="utf-8") != text]
    rows = []
    secrets_found: list[str] = []
    for name, entry in made["facts"].items():
        if name.startswith("_"):
            continue
        path = folder / entry["file"]
        path.write_text(made["files"][entry["file"]], encoding="utf-8")
        root = new_store(work, f"store-{name}")
        result = capture.capture_transcript(Store(root), path, llm=False)
        mem = next((root / "agent" / "claude").glob("mem_*.json"))
        data = orjson.loads(mem.read_bytes())
        summary, details = data["content"]["summary"], data["content"]["details"]
        kept = [fact_kept(f, summary, details) for f in entry["facts"]]
        missed = [" + ".join(f["all"]) for f, ok in zip(entry["facts"], kept, strict=True) if not ok]
        by_kind: dict[str, list[bool]] = {}
        for f, ok in zip(entry["facts"], kept, strict=True):
            by_kind.setdefault(f["kind"], []).append(ok)
        rows.append({"name": name, "kept": sum(kept), "total": len(kept), "missed": missed,
                     "chars": len(details), "messages": result.messages, "by_kind": by_kind,
                     "bytes": len(made["files"][entry["file"]].encode())})
        for secret in made["facts"]["_secrets"].get(name, []):
            for file in root.rglob("*"):
                if file.is_file() and secret.encode() in file.read_bytes():
                    secrets_found.append(f"{secret[:6]}… in {file.relative_to(root)}")
    kinds: dict[str, list[bool]] = {}
    for row in rows:
        for kind, oks in row["by_kind"].items():
            kinds.setdefault(kind, []).extend(oks)
    planted = sum(len(v) for v in made["facts"]["_secrets"].values())
    return {"rows": rows, "kinds": kinds, "secrets_found": secrets_found, "planted": planted, "stale": stale}


# ---------------------------------------------------------------- 3 and 4: speed, memory


def synthetic(target_bytes: int) -> str:
    """A long Claude Code session: turns of reads, command output, failures and fixes."""
    t = Transcript("00000000-aaaa-4bbb-8ccc-dddddddddddd", "/home/dev/big", "main",
                   "2026-11-01T08:00:00.000Z")
    source = "\n".join(f"def handler_{n}(request):\n    return compute(request, {n})" for n in range(120))
    log = "\n".join(f"2026-11-01 08:{n % 60:02d}:00 INFO worker-{n % 7} processed batch {n} in {n % 90} ms"
                    for n in range(80))
    turn = 0
    size = 0
    while size < target_bytes:
        turn += 1
        t.user(f"Turn {turn}: make handler_{turn % 120} validate its input and keep the tests green.")
        t.read(f"/home/dev/big/app/handlers_{turn % 40}.py", source)
        hit = f"app/handlers_{turn % 40}.py:{turn % 300}:def handler_{turn % 120}(request):"
        t.grep(f"handler_{turn % 120}", hit)
        t.bash(f"tail -80 logs/worker-{turn % 7}.log", log)
        t.edit(f"/home/dev/big/app/handlers_{turn % 40}.py", f"def handler_{turn % 120}(request):",
               f"def handler_{turn % 120}(request):\n    validate(request)")
        if turn % 3 == 0:
            failed = f"tests/test_handlers.py::test_handler_{turn % 120} - ValueError: bad input {turn}"
            t.bash("python -m pytest -q tests/test_handlers.py", f"F....\nE   ValueError: bad input {turn}\n"
                   f"FAILED {failed}\n1 failed, 4 passed in 0.30s", exit_code=1)
            t.say(f"The validator rejects empty payloads in handler_{turn % 120}; allowing them.")
            t.edit(f"/home/dev/big/app/validate_{turn % 10}.py", "if not payload:", "if payload is None:")
        t.bash("python -m pytest -q tests/test_handlers.py", "....." + "\n5 passed in 0.28s")
        t.say(f"Turn {turn} done: handler_{turn % 120} validates its input; tests pass.")
        t.end_turn()
        if turn % 50 == 0:
            t.compact(f"Turns 1-{turn}: handlers validate their input.")
        if turn % 10 == 0:
            size = sum(len(orjson.dumps(r)) + 1 for r in t.records)
    return t.jsonl()


def floor_time(path: Path) -> float:
    """Read the file in 1 MiB chunks and parse every line: what any capture must do."""
    start = time.perf_counter()
    rest = b""
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            lines = (rest + chunk).split(b"\n")
            rest = lines.pop()
            for line in lines:
                if line:
                    orjson.loads(line)
    if rest:
        orjson.loads(rest)
    return time.perf_counter() - start


def capture_time(path: Path, work: Path, n: int) -> float:
    from memcli.capture import capture
    from memcli.store.store import Store

    root = new_store(work, f"speed-{n}")
    start = time.perf_counter()
    capture.capture_transcript(Store(root), path, llm=False)
    return time.perf_counter() - start


def process(args: list[str], env: dict[str, str]) -> tuple[float, int, str]:
    """Wall time, peak RSS (KiB) and stdout of a child process."""
    code = ("import resource, subprocess, sys, time; s = time.perf_counter(); "
            "p = subprocess.run(sys.argv[1:], capture_output=True, text=True); "
            "rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss; "
            "print(time.perf_counter() - s, rss, p.returncode); sys.stderr.write(p.stdout + p.stderr)")
    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env,
                         check=True)
    wall, rss, rc = out.stdout.split()
    if rc != "0":
        raise RuntimeError(f"{args} failed: {out.stderr}")
    return float(wall), int(rss), out.stderr


def speed(work: Path, mb: int, big_mb: int) -> dict[str, Any]:
    text = synthetic(mb * 1024 * 1024)
    path = work / "big.jsonl"
    path.write_text(text, encoding="utf-8")
    size = path.stat().st_size
    floors = [floor_time(path) for _ in range(3)]
    times = [capture_time(path, work, n) for n in range(3)]
    env = {**os.environ, "MEMCLI_NOW": NOW, "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("ANTHROPIC_API_KEY", None)
    memcli = [sys.executable, "-m", "memcli"]
    base_wall, base_rss, _ = process([sys.executable, "-c", "import memcli.capture.capture, "
                                      "memcli.consolidate.engine"], env)
    walls, rss = [], 0
    for n in range(3):
        root = new_store(work, f"proc-{n}")
        wall, peak, _ = process([*memcli, "--store", str(root), "capture", str(path), "--no-llm"], env)
        walls.append(wall)
        rss = max(rss, peak)
    big = work / "huge.jsonl"
    block = text.encode()
    with open(big, "wb") as handle:
        while handle.tell() < big_mb * 1024 * 1024:
            handle.write(block)
    root = new_store(work, "proc-big")
    big_wall, big_rss, _ = process([*memcli, "--store", str(root), "capture", str(big), "--no-llm"], env)
    big_size = big.stat().st_size
    big.unlink()
    return {"bytes": size, "lines": text.count("\n"), "floor": statistics.median(floors),
            "floor_range": (min(floors), max(floors)), "capture": statistics.median(times),
            "capture_range": (min(times), max(times)), "process": statistics.median(walls),
            "base_wall": base_wall, "base_rss": base_rss, "rss": rss, "big_bytes": big_size,
            "big_wall": big_wall, "big_rss": big_rss}


# ---------------------------------------------------------------- the report


def report(rec: dict[str, Any], spd: dict[str, Any]) -> str:
    rows = rec["rows"]
    kept, total = sum(r["kept"] for r in rows), sum(r["total"] for r in rows)
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    lines = [
        BEGIN, "## Capture (issue 15)", "",
        f"`python bench/capture_bench.py`, {stamp}; {os.cpu_count()} CPUs, Python "
        f"{platform.python_version()}; MEMCLI_NOW={NOW}; no LLM. The machine was shared with other "
        "engineers' test runs while this ran: read the times as ratios to the floor measured in the "
        "same run.", "",
        "### Fact recall (extractive)", "",
        f"{len(rows)} sessions written for this benchmark (`bench/capture_samples.py`, transcripts in "
        "`bench/capture/transcripts/`), each with the facts its memory must keep; a fact is kept when "
        "all its strings appear in the memory (an error's fact and its fix: under Key learnings).", "",
        f"The last {len(capture_samples.HELD_OUT)} (`heldout-*`) were written after the capture code "
        "was frozen, to check the heuristics on sessions they were not built on: all their facts were "
        "kept at once; reading their memories showed one wrong statement (an error fixed by a later "
        "`terraform validate && terraform plan` was called unresolved), which led to one general fix "
        "(a passing compound command resolves the errors of each of its parts).", "",
        "| session | transcript | messages | facts kept | details chars | missed |",
        "|---|---:|---:|---:|---:|---|"]
    for r in rows:
        missed = "; ".join(r["missed"]) or "-"
        lines.append(f"| {r['name']} | {r['bytes'] / 1024:.1f} KiB | {r['messages']} | "
                     f"{r['kept']}/{r['total']} | {r['chars']} | {missed} |")
    held = [r for r in rows if r["name"] in capture_samples.HELD_OUT]
    held_kept, held_total = sum(r["kept"] for r in held), sum(r["total"] for r in held)
    lines += [f"| **all** | | | **{kept}/{total} = {kept / total:.1%}** | | |",
              f"| held out (written after the code was frozen) | | | {held_kept}/{held_total} | | |", "",
              "| kind of fact | kept |", "|---|---:|"]
    for kind, oks in sorted(rec["kinds"].items()):
        lines.append(f"| {kind} | {sum(oks)}/{len(oks)} |")
    target = "PASS" if kept / total >= 0.9 else "MISS"
    found = rec["secrets_found"]
    where = f" ({'; '.join(found)})" if found else ""
    lines += ["", f"Target >= 90% extractive: **{target}** ({kept / total:.1%}). How to read it: a fact is a "
              "presence check, and the sessions and their facts were written by the author of the "
              "heuristics; the figure says the memories hold what they must on these sessions, not how "
              "often a statement in a memory is wrong (reading the memories, one was: see above).",
              f"Secrets: {rec['planted']} planted in `migration-with-secrets` (a prompt, `env` output, a "
              "connection error, the agent's answer, an edit); found in the store's files after its "
              f"capture: **{len(found)}**{where}.", ""]
    if rec["stale"]:
        lines += [f"Note: committed transcripts differ from the generator: {', '.join(rec['stale'])} "
                  "(run `python bench/capture_samples.py`).", ""]
    mb = spd["bytes"] / 1024 / 1024
    big_mb = spd["big_bytes"] / 1024 / 1024
    ratio = spd["capture"] / spd["floor"]
    floor_range = f"[{spd['floor_range'][0]:.3f}-{spd['floor_range'][1]:.3f}]"
    capture_range = f"[{spd['capture_range'][0]:.3f}-{spd['capture_range'][1]:.3f}]"
    verdict = "PASS" if spd["capture"] < 1 else "MISS"
    lines += [
        "### Speed and memory", "",
        f"A synthetic Claude Code session of {mb:.1f} MB ({spd['lines']:,} records: file reads, "
        "command output, test failures and fixes, compactions).", "",
        "| measure | value |", "|---|---|",
        f"| floor: read + parse every line (orjson), s (median [range] of 3) | {spd['floor']:.3f} "
        f"{floor_range} |",
        "| capture in process (read, digest, learn secrets, render, mask, write as a logged run), s | "
        f"{spd['capture']:.3f} {capture_range} ({ratio:.1f}x floor) |",
        "| `memcli capture` whole process, start-up included, s (median of 3) | "
        f"{spd['process']:.3f} |",
        f"| a process that only imports memcli (start-up floor), s | {spd['base_wall']:.3f} |",
        f"| peak RSS, `memcli capture` on {mb:.0f} MB | {spd['rss'] / 1024:.0f} MB |",
        f"| peak RSS, `memcli capture` on {big_mb:.0f} MB (the same turns repeated), in "
        f"{spd['big_wall']:.1f} s | {spd['big_rss'] / 1024:.0f} MB |",
        f"| peak RSS, importing memcli only | {spd['base_rss'] / 1024:.0f} MB |", "",
        f"Target: capture of a 10 MB transcript < 1 s: **{verdict}** ({spd['capture']:.2f} s in process). "
        f"Stricter reading, for the record: the whole `memcli capture` process, Python start-up and the "
        f"CLI's imports included, took {spd['process']:.2f} s (a process that only imports memcli: "
        f"{spd['base_wall']:.2f} s on this loaded machine). About half of the in-process time is "
        "showing the masker every line that may hold a secret, so that a secret seen in context "
        "anywhere is masked wherever it reappears. Memory stays flat as the transcript grows: the "
        "file is read in 1 MiB chunks and every list the digest keeps is capped.",
        END]
    return "\n".join(lines) + "\n"


def write_section(out: Path, section: str) -> None:
    text = out.read_text(encoding="utf-8") if out.exists() else ""
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        tail = rest.split(END, 1)[1].lstrip("\n")
        text = head + section + ("\n" + tail if tail else "")
    else:
        text = text.rstrip("\n") + "\n\n" + section
    out.write_text(text, encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "RESULTS.md")
    parser.add_argument("--mb", type=int, default=10)
    parser.add_argument("--big-mb", type=int, default=200)
    parser.add_argument("--dir", type=Path, default=None)
    args = parser.parse_args(argv)
    os.environ["MEMCLI_NOW"] = NOW
    os.environ.pop("ANTHROPIC_API_KEY", None)
    work = args.dir or Path(tempfile.mkdtemp(prefix="capture-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        rec = recall(work)
        print(f"recall done: {sum(r['kept'] for r in rec['rows'])}/{sum(r['total'] for r in rec['rows'])}",
              file=sys.stderr)
        spd = speed(work, args.mb, args.big_mb)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    section = report(rec, spd)
    print(section)
    write_section(args.out, section)
    return 0


if __name__ == "__main__":
    sys.exit(main())
