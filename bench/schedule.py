"""Benchmark of the ways to run (issue 19): what a timer's idle tick costs, a daily light pass
against a weekly pass, and what the `[llm] command` runner adds to a program's own run time.

    python bench/schedule.py                     # 10,000 memories; section written into bench/RESULTS.md
    python bench/schedule.py --size 1000 --out -  # print only

Every figure is a median of ROUNDS runs with its range, and a ratio to a floor measured in the
same run: a Python process importing memcli for a whole memcli process, the read-and-parse floor of
`bench/run.py` for a pass, and running the fake LLM program directly for the command runner.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

ROUNDS = 5
NOW = "2026-11-22T12:00:00Z"  # a Sunday noon: the weekly (00:00) and daily (10:00) times passed
BEGIN, END = "<!-- schedule:begin -->", "<!-- schedule:end -->"


def memcli() -> list[str]:
    sibling = Path(sys.executable).parent / "memcli"
    return [str(sibling)] if sibling.exists() else [sys.executable, "-m", "memcli"]


def env() -> dict[str, str]:
    out = dict(os.environ, MEMCLI_NOW=NOW, TZ="UTC")
    for name in ("MEMCLI_STORE", "ANTHROPIC_API_KEY", "MEMCLI_CRASH_AT"):
        out.pop(name, None)
    return out


CPU: dict[int, float] = {}  # id of a timed figure -> median CPU seconds (this process and children)


def _cpu() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def timed(run: Callable[[], object], rounds: int = ROUNDS) -> tuple[float, float, float]:
    """(median, min, max) wall seconds of `rounds` calls; the median CPU time (user + system,
    children included: less sensitive to a loaded machine than wall time) goes to CPU."""
    times, cpu = [], []
    for _ in range(rounds):
        started, cpu_started = time.perf_counter(), _cpu()
        run()
        times.append(time.perf_counter() - started)
        cpu.append(_cpu() - cpu_started)
    figure = (statistics.median(times), min(times), max(times))
    CPU[id(figure)] = statistics.median(cpu)
    return figure


def process(*args: str, store: Path | None = None) -> Callable[[], object]:
    argv = memcli() + (["--store", str(store)] if store else []) + list(args)

    def run() -> object:
        proc = subprocess.run(argv, capture_output=True, text=True, env=env(), check=False)
        if proc.returncode != 0:
            raise RuntimeError(f"{argv} failed: {proc.stderr[-2000:]}")
        return proc

    return run


def fmt(figure: tuple[float, float, float]) -> str:
    median, low, high = figure
    return f"{median:.3f} [{low:.3f}-{high:.3f}] | {CPU[id(figure)]:.3f}"


def cpu_ratio(figure: tuple[float, float, float], floor: tuple[float, float, float], what: str) -> str:
    return f"{figure[0] / floor[0]:.1f}x {what} (CPU {CPU[id(figure)] / max(CPU[id(floor)], 1e-9):.1f}x)"


def build(root: Path, size: int) -> None:
    import generate

    generate.generate(root, size)
    (root / "memcli.toml").write_text("[consolidation]\nindex_pause_ms = 0\nmax_per_run = 0\n\n"
                                      '[schedule]\ndaily = ["0 10 * * *", "0 15 * * *"]\n')
    process("--quiet", "consolidate", store=root)()  # a real pass: indices and caches warm
    process("--quiet", "tick", store=root)()  # weekly and daily done: the next ticks are idle


def command_runner(tmp: Path) -> tuple[tuple[float, float, float], tuple[float, float, float]]:
    """The fake LLM program run directly (floor), and through `llm_command.run_command`."""
    from memcli.consolidate.llm_command import run_command

    program = tmp / "fake-llm"
    program.write_text(f"#!{sys.executable}\nimport sys\nsys.stdin.read()\nprint('## What happened\\nx')\n")
    program.chmod(0o755)
    prompt = "A long session. " * 400
    direct = timed(lambda: subprocess.run([str(program)], input=prompt, capture_output=True, text=True,
                                          check=True), ROUNDS * 2)
    runner = timed(lambda: run_command([str(program)], prompt, 60), ROUNDS * 2)
    return direct, runner


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--out", default=str(HERE / "RESULTS.md"), help="RESULTS.md to update, or - to print")
    args = parser.parse_args()
    from run import phase_floor

    with tempfile.TemporaryDirectory(prefix="memcli-schedule-bench-") as work:
        tmp = Path(work)
        store = tmp / "store"
        print(f"generating {args.size:,} memories ...", file=sys.stderr)
        build(store, args.size)
        version = timed(lambda: subprocess.run([sys.executable, "-c", "import memcli"], check=True))
        tick = timed(process("--quiet", "tick", store=store))
        typer_tick = timed(lambda: subprocess.run(
            [sys.executable, "-c", "import sys; from memcli.cli import load_app; load_app()(sys.argv[1:])",
             "--store", str(store), "--quiet", "tick"], env=env(), capture_output=True, check=True))
        status = timed(process("--json", "status", store=store))
        floor = timed(lambda: phase_floor(store), 3)
        daily = timed(process("--json", "consolidate", "--dry-run", "--trigger", "daily", store=store), 3)
        weekly = timed(process("--json", "consolidate", "--dry-run", "--trigger", "weekly", store=store), 3)
        direct, runner = command_runner(tmp)
        shutil.rmtree(store)

    cores = os.cpu_count()
    rows = [
        ("floor: a Python process that imports memcli", fmt(version), ""),
        ("`memcli tick`, nothing due (what a timer pays every 15 min)", fmt(tick),
         cpu_ratio(tick, version, "floor")),
        ("the same tick through the typer application (no fast path)", fmt(typer_tick),
         cpu_ratio(typer_tick, version, "floor")),
        ("`memcli status` (typer)", fmt(status), cpu_ratio(status, version, "floor")),
        ("floor: read + parse every memory file (in process)", fmt(floor), ""),
        ("daily light pass, dry run, warm (whole process)", fmt(daily),
         cpu_ratio(daily, floor, "read floor") + f"; {daily[0] / weekly[0]:.2f}x weekly"),
        ("weekly pass, dry run, warm (whole process)", fmt(weekly), cpu_ratio(weekly, floor, "read floor")),
        ("floor: fake LLM program run directly (16 KB prompt)", fmt(direct), ""),
        ("the same through `[llm] command`'s runner", fmt(runner), cpu_ratio(runner, direct, "direct")),
    ]
    lines = [BEGIN, "## Ways to run: tick, daily passes, `[llm] command` (`python bench/schedule.py`)", "",
             f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {args.size:,} memories "
             "(bench/generate.py), "
             f"{cores} CPUs shared with other work (the machine was loaded: read the ratios, and "
             "the CPU times rather than wall times). Median [range] of 5 runs (3 for passes and the "
             "read floor, 10 for the runner), each a fresh process unless marked. CPU is user + "
             "system time of the process and its children.", "",
             "| figure | wall s, median [range] | CPU s, median | ratio (wall; CPU) |", "|---|---|---|---|"]
    lines += [f"| {a} | {b} | {c} |" for a, b, c in rows]
    lines += ["", "A light pass skips rules 3.2 and 3.4; on a warm store most of a pass is reading the "
              "indices and stating the files, which both kinds do, so the two are close. An idle tick "
              "reads `ops/state.json` and counts each folder's files.", END]
    section = "\n".join(lines) + "\n"
    if args.out == "-":
        print(section)
        return 0
    path = Path(args.out)
    text = path.read_text() if path.exists() else ""
    if BEGIN in text and END in text:
        text = text[:text.index(BEGIN)] + section + text[text.index(END) + len(END) + 1:]
    else:
        text = text.rstrip("\n") + "\n\n" + section
    path.write_text(text)
    print(section)
    return 0


if __name__ == "__main__":
    sys.exit(main())
