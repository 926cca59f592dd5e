"""How long Claude Code waits for memcli's SessionEnd hook: the whole `memcli hook
session-end` process, against a bare `python -c pass` measured in the same run.

    python bench/hook_bench.py [--samples 31] [--size 3000] [--dir /tmp/memcli-hook-bench]
                               [--out bench/RESULTS.md]

A store of --size memories is generated (bench/generate.py). Each sample runs, one after the
other: `python -c pass` (the floor: the same interpreter, site and all), then the hook exactly
as Claude Code runs it (the venv's console script by absolute path, the hook JSON on stdin,
cwd elsewhere), then waits, untimed, until the hook's detached background pass has logged
that it is done, so that pass never competes with the next sample. `hook, no store` is the
hook run where no store is found (it starts nothing). The order of floor and hook alternates
between samples. Targets (issue 14): median <= 0.15 s on an idle machine, and <= 3x the
floor's median. With --out, the "Hook start-up" section of that file is replaced (or added).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import generate  # noqa: E402

SECTION = "## Hook start-up (bench/hook_bench.py)"
TARGET_S = 0.15
TARGET_RATIO = 3.0


def timed(argv: list[str], stdin: bytes, cwd: Path) -> float:
    start = time.perf_counter()
    proc = subprocess.run(argv, input=stdin, cwd=cwd, capture_output=True, timeout=60)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{argv} exited {proc.returncode}: {proc.stderr.decode(errors='replace')}")
    return elapsed


def done_count(store: Path) -> int:
    path = store / "ops" / "hook.log"
    return path.read_text(errors="replace").count("run-background: done") if path.exists() else 0


def wait_done(store: Path, count: int, seconds: float = 120.0) -> None:
    deadline = time.monotonic() + seconds
    while done_count(store) < count:
        if time.monotonic() > deadline:
            raise SystemExit(f"the background pass did not finish within {seconds:.0f} s")
        time.sleep(0.05)


def measure(samples: int, size: int, work: Path) -> dict[str, object]:
    python = sys.executable
    memcli = str(Path(python).absolute().parent / "memcli")
    if work.exists():
        shutil.rmtree(work)
    store, elsewhere = work / "store", work / "elsewhere"
    elsewhere.mkdir(parents=True)
    generate.generate(store, size)
    env_note = {k: os.environ.get(k) for k in ("MEMCLI_NOW",)}
    payload = json.dumps({"session_id": "bench", "hook_event_name": "SessionEnd", "reason": "other",
                          "cwd": str(store)}).encode()
    nowhere = json.dumps({"session_id": "bench", "cwd": str(elsewhere)}).encode()
    floor: list[float] = []
    hook: list[float] = []
    no_store: list[float] = []
    load_before = os.getloadavg()
    timed([python, "-c", "pass"], b"", elsewhere)  # warm the page cache for both programs
    timed([memcli, "hook", "session-end"], nowhere, elsewhere)
    for n in range(samples):
        pair = [("floor", [python, "-c", "pass"], b""), ("hook", [memcli, "hook", "session-end"], payload)]
        for name, argv, stdin in (pair if n % 2 == 0 else pair[::-1]):
            before = done_count(store)
            (floor if name == "floor" else hook).append(timed(argv, stdin, elsewhere))
            if name == "hook":
                wait_done(store, before + 1)
        no_store.append(timed([memcli, "hook", "session-end"], nowhere, elsewhere))
    return {"floor": floor, "hook": hook, "no_store": no_store, "size": size, "samples": samples,
            "load_before": load_before, "load_after": os.getloadavg(), "env": env_note}


def summary(values: list[float]) -> tuple[float, float]:
    ordered = sorted(values)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, int(len(ordered) * 0.9))]


def report(data: dict[str, object]) -> str:
    floor_med, floor_p90 = summary(data["floor"])  # type: ignore[arg-type]
    hook_med, hook_p90 = summary(data["hook"])  # type: ignore[arg-type]
    none_med, none_p90 = summary(data["no_store"])  # type: ignore[arg-type]
    ratio = hook_med / floor_med
    load_a, load_b = data["load_before"], data["load_after"]  # type: ignore[misc]
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    verdict_s = "PASS" if hook_med <= TARGET_S else "MISS"
    verdict_r = "PASS" if ratio <= TARGET_RATIO else "MISS"
    rows = [("`python -c pass` (floor)", floor_med, floor_p90, 1.0),
            (f"`memcli hook session-end` in a {data['size']:,}-memory store (starts the pass)",
             hook_med, hook_p90, ratio),
            ("`memcli hook session-end`, no store found", none_med, none_p90, none_med / floor_med)]
    lines = [SECTION, "",
             f"`python bench/hook_bench.py --samples {data['samples']} --size {data['size']}`, {stamp}. "
             f"Python {platform.python_version()}, {os.cpu_count()} CPUs; 1-minute load average "
             f"{load_a[0]:.2f} before, {load_b[0]:.2f} after (a shared machine: other work ran meanwhile). "
             "The whole process as Claude Code runs it (console script by absolute path, hook JSON "
             f"on stdin), {data['samples']} samples each, floor and hook alternating; the detached "
             "background pass finishes (untimed) before the next sample.", "",
             "| process | median, s | p90, s | x floor (median) |", "|---|---|---|---|"]
    lines += [f"| {name} | {med:.3f} | {p90:.3f} | {x:.1f}x |" for name, med, p90, x in rows]
    lines += ["", f"- median <= {TARGET_S} s: {verdict_s} ({hook_med:.3f} s)",
              f"- median <= {TARGET_RATIO:.0f}x the floor of the same run: {verdict_r} ({ratio:.1f}x)"]
    return "\n".join(lines) + "\n"


def write_section(path: Path, section: str) -> None:
    text = path.read_text() if path.exists() else ""
    start = text.find(SECTION)
    if start < 0:
        text = text.rstrip("\n") + "\n\n" + section
    else:
        # the section ends at the next heading or at another benchmark's marker
        after = start + len(SECTION)
        ends = [i for i in (text.find("\n## ", after), text.find("\n<!-- ", after)) if i >= 0]
        end = min(ends) if ends else -1
        text = text[:start] + section + ("" if end < 0 else "\n" + text[end + 1:])
    path.write_text(text)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=31)
    parser.add_argument("--size", type=int, default=3000)
    parser.add_argument("--dir", type=Path, default=Path("/tmp/memcli-hook-bench"))
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--json-out", type=Path, default=None)
    args = parser.parse_args(argv)
    data = measure(args.samples, args.size, args.dir)
    section = report(data)
    print(section)
    if args.out:
        write_section(args.out, section)
    if args.json_out:
        args.json_out.write_text(json.dumps(data, indent=2))
    shutil.rmtree(args.dir, ignore_errors=True)


if __name__ == "__main__":
    main()
