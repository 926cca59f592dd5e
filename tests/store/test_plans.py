"""Plans as data (`plans`): a plan written out (`--plan-out`, the journal) reads back as the
same plan, and a file change knows the hash it leaves."""

from __future__ import annotations

import dataclasses
import hashlib

import orjson

from memcli.store.plans import Action, FileOp, Plan


def _plan() -> Plan:
    merge = Action("merge", {"type": "merge", "source_ids": ["mem_a", "mem_b"]}, "restates mem_a",
                   touches=["mem_a", "mem_b"], folders=["agent/coder", "archive"],
                   ops=[FileOp("write", "agent/coder/mem_a.json", "1" * 64, '{"id": "mem_a", "é": 1}'.encode()),
                        FileOp("create", "archive/mem_b.json", None, b'{"id": "mem_b"}'),
                        FileOp("remove", "agent/coder/mem_b.json", "2" * 64)])
    flag = Action("flag", {"type": "flag"}, "both edited", review={"pair": ["mem_c", "mem_d"]})
    return Plan("run_01JD3Z7Q9K8V5T2N4M6P0R1S3A", "weekly", "2026-11-22T00:00:00Z", [merge, flag],
                deferred=[Action("archive", {"type": "archive"}, "stale", touches=["mem_e"])],
                covered=["agent/coder"], flagged_done=[["mem_c", "mem_d"]], notes=["a note"],
                memory_count=12, protected={"consent": 2}, plan_ms=40)


def test_a_plan_written_out_reads_back_as_the_same_plan() -> None:
    plan = _plan()
    back = Plan.from_json(orjson.loads(orjson.dumps(plan.to_json())))
    # what it was found to protect and how long planning took are the run's report, not the plan
    assert back == dataclasses.replace(plan, protected={}, plan_ms=0)
    assert back.actions[0].ops[0].data == '{"id": "mem_a", "é": 1}'.encode()


def test_a_file_change_knows_the_hash_it_leaves() -> None:
    write, create, remove = _plan().actions[0].ops
    assert write.after == hashlib.sha256(write.data or b"").hexdigest()
    assert create.after == hashlib.sha256(b'{"id": "mem_b"}').hexdigest()
    assert remove.after is None and remove.to_json()["data"] is None


def test_a_change_read_back_without_bytes_has_none() -> None:
    op = FileOp.from_json({"kind": "remove", "path": "agent/coder/mem_b.json", "expect": "2" * 64, "data": 7})
    assert op.data is None and op.after is None
    assert Action.from_json({"type": "flag", "log": {}}) == Action("flag", {}, "")
