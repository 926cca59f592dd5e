"""The planner's per-memory bookkeeping, written inline for a full pass (it runs for every
memory of the store), checked against the rules spelled out: staleness (3.4), the protected
counts (SPEC 2), the (type, subtype) blocks of 3.1, and the archive names a run picks."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import pytest

from memcli.consolidate import planbase, rules
from memcli.consolidate.planner import plan
from memcli.consolidate.plantypes import RunOptions
from memcli.store.memories import reindex
from memcli.store.model import Memory, now
from memcli.store.store import Store
from tests.conftest import NOW_DT, add, days_ago


def _archived(store: Path) -> set[str]:
    out = plan(Store(store), RunOptions(records=False), now())
    return {a.log["memory_id"] for a in out.plan.actions if a.type == "archive"}


@pytest.mark.parametrize("indexed", [False, True])
def test_staleness_at_its_edges_is_the_rule(store: Path, indexed: bool) -> None:
    """Used exactly stale_after_days (90) ago: not stale; a second more: stale. Never used:
    stale. A stamp with an offset, a future stamp and no last_accessed take the rule's own
    path; an undo's recorded use keeps a memory live (tested in test_decisions)."""
    second = 1 / 86400
    cases = {
        "at_cutoff": add(store, access_count=2, last_accessed=days_ago(90), tags=["a"]),
        "past_cutoff": add(store, access_count=2, last_accessed=days_ago(90 + second), tags=["b"]),
        "before_cutoff": add(store, access_count=2, last_accessed=days_ago(90 - second), tags=["c"]),
        "never_used": add(store, access_count=0, last_accessed=days_ago(1), tags=["d"]),
        "offset_old": add(store, access_count=1, last_accessed="2026-08-01T00:00:00+02:00", tags=["e"]),
        "offset_recent": add(store, access_count=1, last_accessed="2026-11-01T00:00:00+02:00", tags=["f"]),
        "future": add(store, access_count=1, last_accessed="2027-01-01T00:00:00Z", tags=["g"]),
        "no_stamp": add(store, access_count=1, last_accessed=None, created_at=days_ago(200),
                        updated_at=days_ago(100), tags=["h"]),
    }
    if indexed:
        reindex(Store(store))
    cfg = Store(store).settings.consolidation
    expected = {m["id"] for m in cases.values()
                if rules.is_stale(Memory(m, None, "json"), NOW_DT, cfg)}
    assert {name for name, m in cases.items() if m["id"] in expected} == {
        "past_cutoff", "never_used", "offset_old", "no_stamp"}
    assert _archived(store) == expected


def test_the_protected_counts_are_the_rule_over_every_memory(store: Path) -> None:
    """Each memory taking part counts once, under its first reason; superseded and archived
    records take part in no rule and are not counted."""
    add(store, priority="critical", tags=["permanent"])
    add(store, tags=["permanent", "protected"])
    add(store, tags=["protected"])
    add(store, created_by="USER", tags=["u"])
    add(store, created_by="USER", consent=True, tags=["u2"])
    add(store, subtype="decision", tags=["d"])
    add(store, created_at=days_ago(3), tags=["f"])
    add(store, created_at=days_ago(7), tags=["f7"])  # exactly min_age_days old: not fresh
    add(store, priority="critical", superseded_by=["mem_other"], tags=["s"])
    add(store, priority="critical", archived_at=days_ago(1), tags=["z"])
    add(store, tags=["plain"])
    for indexed in (False, True):
        if indexed:
            reindex(Store(store))
        out = plan(Store(store), RunOptions(records=False), now())
        s = Store(store)
        mems = [m for f in s.memory_folders() for m in s.scan(f).memories.values()]
        cfg = s.settings.consolidation
        expected = Counter(r for m in mems if rules.takes_part(m)
                           and (r := rules.protection_reason(m, NOW_DT, cfg)) is not None)
        assert out.plan.protected == dict(sorted(expected.items()))
        assert expected == {"critical": 1, "permanent": 1, "protected_tag": 1, "user_without_consent": 1,
                            "decision": 1, "fresh": 1}


DUP = "Rotate the staging keys every Monday before the deploy window opens"


def _merged(store: Path) -> list[set[str]]:
    out = plan(Store(store), RunOptions(records=False), now())
    return [set(a.log["source_ids"]) for a in out.plan.actions if a.type == "merge"]


def test_blocks_are_type_and_subtype_with_a_missing_subtype_as_empty(store: Path) -> None:
    """A missing subtype and an empty one are one block (merged); another subtype, another
    type, or an archived or superseded record is not in the block."""
    a = add(store, summary=DUP, created_at=days_ago(50), subtype="", tags=["k"])
    b = add(store, summary=DUP + ".", created_at=days_ago(40), tags=["k"])
    del b["subtype"]
    (store / "agent" / "coder" / f"{b['id']}.json").write_bytes(__import__("orjson").dumps(b))
    add(store, summary=DUP + "!", created_at=days_ago(45), subtype="other", tags=["k"])
    add(store, summary=DUP + "?", created_at=days_ago(44), type="episodic", subtype="", tags=["k"])
    add(store, summary=DUP + ";", created_at=days_ago(43), subtype="", superseded_by=["mem_x"], tags=["k"])
    for indexed in (False, True):
        if indexed:
            reindex(Store(store))
        assert _merged(store) == [{a["id"], b["id"]}]


def _archive_ops(store: Path) -> list[str]:
    out = plan(Store(store), RunOptions(records=False), now())
    return sorted(op.path for a in out.plan.actions if a.type == "archive" for op in a.ops
                  if op.kind == "create")


def test_archive_names_are_the_same_whether_archive_is_listed_or_stat_per_name(
        store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A name already in archive/ takes the run id (`id@run.json`); a link to nothing there
    does not count as taken. A run lists archive/ once after `ARCHIVE_STATS` names: the names
    picked are the same with the listing as with a stat per name, before and after it."""
    stale = [add(store, access_count=0, tags=[f"t{n}"]) for n in range(8)]
    ids = sorted(m["id"] for m in stale)
    (store / "archive" / f"{ids[0]}.json").write_text("{}")  # taken before the listing
    (store / "archive" / f"{ids[6]}.json").write_text("{}")  # taken after it
    os.symlink(store / "nowhere", store / "archive" / f"{ids[7]}.json")  # a link to nothing
    reindex(Store(store))
    monkeypatch.setattr(planbase, "ARCHIVE_STATS", 1000)
    one_by_one = _archive_ops(store)
    listed: list[str] = []
    monkeypatch.setattr(planbase.os, "listdir", lambda p, _l=os.listdir: listed.append(p) or _l(p))
    monkeypatch.setattr(planbase, "ARCHIVE_STATS", 2)
    assert _archive_ops(store) == one_by_one
    assert [p for p in listed if Path(p).name == "archive"] == [store / "archive"]  # once
    taken = {p for p in one_by_one if "@" in p}
    assert {p.split("/")[1].split("@")[0] for p in taken} == {ids[0], ids[6]}
    assert f"archive/{ids[7]}.json" in one_by_one


def test_archive_names_without_an_archive_folder(store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stale = [add(store, access_count=0, tags=[f"t{n}"]) for n in range(4)]
    (store / "archive").rmdir()
    monkeypatch.setattr(planbase, "ARCHIVE_STATS", 1)
    assert _archive_ops(store) == sorted(f"archive/{m['id']}.json" for m in stale)


@pytest.mark.parametrize("kind", ["file", "dangling_link"])
def test_a_promoted_copy_never_takes_an_id_archive_already_starts_with(store: Path, kind: str) -> None:
    """The copy's id is the first of a fixed sequence not taken by this run or by any name in
    archive/ starting with it (an archived copy `id@run.json`, even a link to nothing), as a
    glob of archive/ finds; archive/ is listed once, not globbed per promotion."""
    from memcli.store.model import new_memory_id

    mem = add(store, type="procedural", subtype="howto", access_count=50, tags=["p"])
    seed = f"{mem['id']}>team"
    first, second = (new_memory_id(NOW_DT, f"{seed}#{n}") for n in (0, 1))

    def result() -> str:
        out = plan(Store(store), RunOptions(records=False), now())
        return next(a.log["result_id"] for a in out.plan.actions if a.type == "promote")

    assert result() == first
    taken = store / "archive" / f"{first}@run_01.json"
    if kind == "file":
        taken.write_text("{}")
    else:
        os.symlink(store / "nowhere", taken)
    assert result() == second
    taken.unlink()
    (store / "archive" / f"{first[:-1]}.json").write_text("{}")  # a name the id does not start
    other = "Y" if first.endswith("Z") else "Z"  # (a last character the id does not have)
    (store / "archive" / f"{first[:-1]}{other}.json").write_text("{}")  # nor is the id a prefix of
    assert result() == first


def test_after_planning_the_collector_runs_again_with_the_plan_in_the_oldest_generation(store: Path) -> None:
    """Planning pauses the cycle collector; afterwards it is on again, nothing is left frozen,
    and the plan (which lives to the end of the run) is in the oldest generation, not walked
    by the next young collections. A process that froze objects itself keeps them frozen; one
    that had the collector off keeps it off."""
    import gc

    add(store, access_count=0, tags=["s"])
    assert gc.isenabled() and gc.get_freeze_count() == 0
    out = plan(Store(store), RunOptions(records=False), now())
    assert gc.isenabled() and gc.get_freeze_count() == 0
    assert any(o is out.plan for o in gc.get_objects(generation=2))
    frozen = [[n] for n in range(10)]  # kept alive, frozen below
    gc.freeze()
    try:
        plan(Store(store), RunOptions(records=False), now())
        assert gc.isenabled() and gc.get_freeze_count() > 0
        assert not any(o is frozen for o in gc.get_objects())  # still frozen (in no generation)
        gc.disable()
        plan(Store(store), RunOptions(records=False), now())
        assert not gc.isenabled()
    finally:
        gc.enable()
        gc.unfreeze()
