"""The benchmark harness (bench/run.py) end to end at a tiny size, and its helpers."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import generate  # noqa: E402
from bench import run as bench_run  # noqa: E402

MRPC_SAMPLE = (
    "\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
    "1\t1\t2\tThe cat sat on the mat today.\tToday the cat sat on the mat.\n"
    "0\t3\t4\tShares rose 5 percent on Monday.\tShares fell 7 percent on Tuesday.\n"
    "1\t5\t6\tHe said the plan would work.\tHe said that the plan would work.\n"
    "0\t7\t8\tThe court did not rule on the case.\tThe court ruled on the case.\n"
)


@pytest.mark.slow
def test_harness_end_to_end(tmp_path: Path) -> None:
    mrpc = tmp_path / "mrpc"
    mrpc.mkdir()
    for split in ("train", "test"):
        (mrpc / f"msr_paraphrase_{split}.txt").write_text(MRPC_SAMPLE, encoding="utf-8")
    out, raw = tmp_path / "RESULTS.md", tmp_path / "results.json"
    others = "## Notes by hand\n\n<!-- recall:begin -->\n## Recall\nfigures\n<!-- recall:end -->\n"
    out.write_text(others)
    # one shape, one round of each repeated phase (MEMCLI_BENCH_ROUNDS): the harness, not its
    # figures; every phase is a process of its own. Several shapes in one report: below.
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "run.py"), "--sizes", "300", "--shapes", "small",
         "--dir", str(tmp_path / "work"), "--out", str(out), "--json-out", str(raw), "--mrpc-data", str(mrpc)],
        capture_output=True, text=True, timeout=300, check=False, env={**os.environ, "MEMCLI_BENCH_ROUNDS": "1"})
    assert proc.returncode == 0, proc.stderr
    written = out.read_text()
    # its own section, between its markers, at the top; the others' kept as they were
    assert written.startswith("<!-- run:begin -->\n") and written.endswith("\n" + others)
    report = written[len("<!-- run:begin -->\n"):written.index("<!-- run:end -->")]
    assert proc.stdout.strip() == report.strip()
    for label, _ in bench_run.ROWS:
        # (rounds of this process's defaults as the harness's MEMCLI_BENCH_ROUNDS=1 gives them)
        label = label.replace(f"of {bench_run.FLOOR_ROUNDS})", "of {floors})").replace(
            f"of {bench_run.ROUNDS})", "of 1)").replace("of {floors})", "of 3)")
        assert f"| {label} " in report, label
    for label in (*bench_run.TARGET_LABELS, *bench_run.STRICT_LABELS):
        assert f"| {label} " in report, label
    assert "| test " in report and "false-merge rate on label-0" in report
    assert "| small 300 " in report and "| memcli --help " in report
    everything = json.loads(raw.read_text())
    assert [(f["shape"], f["n"]) for f in everything["sizes"]] == [("small", 300)]
    for clock in ("wall", "cpu"):  # the fast path's --help is close to a bare start: no order asserted
        assert set(everything["startup"][clock]) == {"python -c pass", "memcli --help", "memcli list", "memcli show ID"}
        assert min(everything["startup"][clock].values()) > 0
    figures = everything["sizes"][0]
    recall = figures["recall"]
    assert recall["qualifying"] > 0
    assert isinstance(recall["recall"], float) and 0.0 <= recall["recall"] <= 1.0
    assert not math.isnan(figures["phases"]["floor"]["seconds"])
    assert set(figures["phases"]) == set(bench_run.PHASE_ORDER)
    assert figures["phases"]["floor"]["files"] == 300
    assert figures["dry_run_wrote"] == []
    # the dry runs' rounds (each the same first run: a dry run leaves the store as it was)
    assert figures["phases"]["dry_cold"]["same_plan"] is True
    assert figures["phases"]["dry_indexed"]["same_plan"] is True
    assert re.search(r"\| every round of each dry run planned the same groups +\| yes +\|", report)
    assert not (tmp_path / "work" / "small-n300").exists()  # removed without --keep

    # several shapes in one report: a column each, in the order given
    huge = {**figures, "shape": "huge"}
    huge["phases"] = {**figures["phases"], "floor": {**figures["phases"]["floor"], "seconds": 1e6}}
    args = bench_run.parse_args(["--dir", str(tmp_path / "work"), "--mrpc-data", str(mrpc)])
    both = bench_run.render([huge, figures], everything["mrpc"], args, everything["startup"])
    assert "--shapes huge,small`" in both
    header = next(line for line in both.splitlines() if "| huge 300 " in line)
    assert header.index("| huge 300 ") < header.index("| small 300 ")
    assert bench_run.render([figures], everything["mrpc"], args, everything["startup"]) != both


def test_harness_skips_missing_mrpc(tmp_path: Path) -> None:
    args = bench_run.parse_args(["--mrpc-data", str(tmp_path / "none")])
    assert bench_run.mrpc_figures(args.mrpc_data) == {}
    assert "MRPC skipped" in bench_run.mrpc_section({}, args.mrpc_data)


def test_rounds_of_a_dry_run_report_whether_they_planned_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    """A repeated dry run: the median round's time, the first round's merges (not every
    round's added up), and `same_plan` false as soon as one round grouped differently."""
    plans = iter([[["a", "b"]], [["b", "a"]], [["a", "b"]], [["a", "b"]], [["a", "c"]], [["a", "b"]]])
    times = iter([0.3, 0.1, 0.2, 0.3, 0.1, 0.2])

    def phase(name: str, store: Path) -> dict[str, object]:
        return {"phase": name, "seconds": next(times), "cpu_s": 0.1, "process_s": 0.2, "peak_mb": 10.0,
                "merges": next(plans)}

    monkeypatch.setattr(bench_run, "run_phase", phase)
    monkeypatch.setattr(bench_run, "ROUNDS", 3)
    same = bench_run.run_rounds("dry_cold", Path("/nowhere"), same=True)
    assert same["same_plan"] is True and same["merges"] == [["a", "b"]]
    assert same["seconds"] == 0.2 and same["rounds"] == [0.3, 0.1, 0.2]
    differ = bench_run.run_rounds("dry_indexed", Path("/nowhere"), same=True)
    assert differ["same_plan"] is False and differ["merges"] == [["a", "b"]]


def test_paired_rounds_divide_each_round_by_the_floors_read_around_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """With `paired`, a floor is read before each round and after the last, in that order, on
    the paired store; each round's ratio is over the mean of its two floors, and a target is
    judged by their median (the unpaired ratio shown beside it)."""
    calls: list[tuple[str, Path]] = []
    times = {"floor": iter([0.3, 0.3, 0.4, 0.4]), "dry_indexed": iter([0.9, 1.2, 1.0])}

    def phase(name: str, store: Path) -> dict[str, object]:
        calls.append((name, store))
        return {"phase": name, "seconds": next(times[name]), "cpu_s": 0.1, "process_s": 0.2, "peak_mb": 10.0}

    monkeypatch.setattr(bench_run, "run_phase", phase)
    found = bench_run.run_rounds("dry_indexed", Path("/run"), rounds=3, paired=Path("/generated"))
    assert calls == [("floor", Path("/generated")), ("dry_indexed", Path("/run"))] * 3 + [
        ("floor", Path("/generated"))]
    assert found["paired_floors"] == [0.3, 0.3, 0.4, 0.4]
    assert found["paired_x"] == pytest.approx([3.0, 1.2 / 0.35, 2.5])
    res = {"phases": {"floor": {"seconds": 0.25, "cpu_s": 0.1}, "dry_indexed": found}}
    assert bench_run.paired_x(res, "dry_indexed") == pytest.approx(3.0)
    assert bench_run.target_x(res, "dry_indexed") == pytest.approx(3.0)  # not 1.0 / 0.25 = 4.0
    assert "; paired 3.00x [2.50-3.43]" in bench_run.timed_x("dry_indexed")(res)
    unpaired = {"phases": {"floor": {"seconds": 0.25, "cpu_s": 0.1},
                           "dry_indexed": {k: v for k, v in found.items() if not k.startswith("paired")}}}
    assert bench_run.paired_x(unpaired, "dry_indexed") is None
    assert bench_run.target_x(unpaired, "dry_indexed") == pytest.approx(4.0)
    assert "paired" not in bench_run.timed_x("dry_indexed")(unpaired)


def test_pair_helpers() -> None:
    merges = [["a", "b", "c"], ["x", "y"]]
    assert bench_run.merged_pairs(merges) == {frozenset(p) for p in (("a", "b"), ("a", "c"), ("b", "c"),
                                                                      ("x", "y"))}
    cluster = bench_run.clusters([("a", "b"), ("b", "c"), ("x", "z")])
    assert cluster["a"] == cluster["c"] != cluster["x"]
    assert bench_run.changed_memories({"type": "merge", "source_ids": ["a", "b", "c"]}) == 3
    assert bench_run.changed_memories({"type": "promote"}) == 2
    assert bench_run.changed_memories({"type": "keep_separate"}) == 0


def test_generate_shapes_and_its_command_line(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "generate.py"), "--help"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0 and "--shape" in proc.stdout and "small" in proc.stdout
    generate.generate(tmp_path / "small", 1000, shape="small")
    folders = sorted(p.name for p in (tmp_path / "small" / "agent").iterdir())
    assert folders == ["agent0", "agent1"]
    records = [orjson.loads(p.read_bytes()) for p in (tmp_path / "small").glob("agent/agent0/*.json")]
    blocks = {(r["type"], r["subtype"]) for r in records}
    assert 30 <= len(blocks) <= 40 and len(records) >= 480  # 40 blocks of about 12
    assert any("details" in r["content"] for r in records)
    generate.generate(tmp_path / "mix", 1000, shape="mix")
    assert (tmp_path / "mix" / "team").is_dir() and (tmp_path / "mix" / "global").is_dir()
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "generate.py"), str(tmp_path / "mix"), "5"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 2 and "already holds a store" in proc.stderr


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("mem_*.json")}


def test_generate_in_chunks_is_the_same_store_for_any_number_of_processes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    generate.generate(tmp_path / "whole", 300, shape="small", dup_share=0.1)
    monkeypatch.setattr(generate, "CHUNK", 120)  # three chunks: 120, 120, 60
    alone = generate.generate(tmp_path / "alone", 300, shape="small", dup_share=0.1)
    side_by_side = generate.generate(tmp_path / "two", 300, shape="small", dup_share=0.1, jobs=2)
    assert alone == side_by_side and _files(tmp_path / "alone") == _files(tmp_path / "two")
    assert len(_files(tmp_path / "two")) == 300
    # the first chunk is the store a single stream writes; the later ones come from their own
    first = {name for name in _files(tmp_path / "whole")}
    assert len(first & set(_files(tmp_path / "two"))) >= 120 and first != set(_files(tmp_path / "two"))
    ids = {name.rsplit("/", 1)[-1][:-5] for name in _files(tmp_path / "two")}
    assert all(a in ids and b in ids for a, b in alone)  # each restates a memory of the store


def test_add_session_writes_near_duplicates(tmp_path: Path) -> None:
    generate.generate(tmp_path, 200)
    new_ids, planted = generate.add_session(tmp_path, 6, folder="agent/agent0")
    assert len(new_ids) == 6 and len(planted) == 3
    paths = bench_run.id_paths(tmp_path)
    for old_id, new_id in planted:
        old, new = (orjson.loads(paths[i].read_bytes()) for i in (old_id, new_id))
        assert paths[new_id].parent == paths[old_id].parent == tmp_path / "agent" / "agent0"
        assert (old["type"], old["subtype"], old["tags"], old["created_by"]) == \
            (new["type"], new["subtype"], new["tags"], new["created_by"])
        assert new["created_at"] > old["created_at"]
    assert all(i in paths for i in new_ids)


def test_planted_near_duplicates_are_restatements_no_guard_objects_to() -> None:
    # The planted-duplicate recall measures the candidate search: a planted pair that scores
    # above the threshold is one the rule merges, so no guard may object to it (a word swap
    # is a swapped role; an added run of words is a clause).
    import random

    from memcli.consolidate.guards import guard_rejects

    rng = random.Random(3)
    scores = []
    for _ in range(400):
        text = generate._text(rng)
        restated = generate.reword(text, rng)
        assert restated != text
        score = bench_run.pair_score({"content": {"summary": text}}, {"content": {"summary": restated}})
        scores.append(score)
        if score > bench_run.THRESHOLD:
            assert guard_rejects(text, restated) is None, (text, restated)
        # a restatement keeps the negations and order words where they were
        for word in ("not", "before", "after"):
            assert text.split().count(word) == restated.split().count(word)
    assert min(scores) < 0.9 and max(scores) > 0.97  # a range of similarities, not copies
