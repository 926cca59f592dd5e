"""SPEC 3.6: an undo is a decision. Later runs keep apart what it split, do not promote again
what it un-promoted, and count what it brought back from `stale` as used at the undo, until
a person says otherwise (`review resolve ... --merge` / `--redo`)."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from memcli.cli import app
from memcli.consolidate import decisions, review
from memcli.errors import OpsFileError
from memcli.store import log
from memcli.store.model import format_ts
from tests.conftest import NOW_DT, add, assert_invariants, days_ago

runner = CliRunner()
TEXT = "Before deploying the web app to staging, turn the office VPN on and export the API token"


def run(store: Path, *args: str, now: dt.datetime | None = None) -> tuple[int, str, str]:
    env = {"MEMCLI_NOW": format_ts(now)} if now else None
    result = runner.invoke(app, ["--store", str(store), *args], env=env)
    return result.exit_code, result.stdout, result.stderr


def run_json(store: Path, *args: str, now: dt.datetime | None = None) -> dict[str, Any]:
    code, out, err = run(store, "--json", *args, now=now)
    assert code == 0, (out, err)
    return json.loads(out)  # type: ignore[no-any-return]


def types(outcome: dict[str, Any]) -> list[str]:
    return [a["type"] for a in outcome["actions"]]


def live(store: Path) -> set[str]:
    return {p.stem for p in store.glob("agent/*/mem_*")} | {p.stem for p in store.glob("team/*/mem_*")}


def duplicates(store: Path, n: int = 2) -> list[str]:
    """n duplicates in agent/coder, oldest first, same author."""
    ids = []
    for k in range(n):
        data = add(store, summary=TEXT + "." * k, created_at=days_ago(60 - k), tags=["deploy", "staging"])
        ids.append(data["id"])
    return ids


def later(seconds: float = 2) -> dt.datetime:
    return NOW_DT + dt.timedelta(seconds=seconds)


# ---------------------------------------------------------------- merges


def test_an_undone_merge_is_not_redone_by_the_next_run(store: Path) -> None:
    older, newer = duplicates(store)
    merged = run_json(store, "consolidate")
    assert types(merged) == ["merge"]
    undone = run_json(store, "undo", merged["run_id"])
    assert [a for a in undone["actions"] if a["type"] == "decision"] == [
        {"type": "decision", "decision": "keep_apart", "memory_ids": [older, newer]}]
    again = run_json(store, "consolidate", now=later())
    assert again["actions"] == [{"type": "keep_separate", "memory_ids": [older, newer],
                                 "reason": "undo_decision"}]
    assert {older, newer} <= live(store)
    assert_invariants(store)


def test_the_sessions_own_session_end_pass_does_not_redo_the_undo(store: Path) -> None:
    """The issue: `/memcli undo RUN` redone two seconds later by the same session's SessionEnd."""
    older, newer = duplicates(store)
    first = run_json(store, "consolidate", "--trigger", "session_end")
    assert types(first) == ["merge"]
    run_json(store, "undo", first["run_id"], now=later(1))
    code, _, _ = run(store, "hook", "session-end", "--foreground", now=later(2))
    assert code == 0
    entries = log.read_entries(store)
    assert [e["trigger"] for e in entries] == ["session_end", "undo", "session_end", "weekly"]
    assert all(a["type"] != "merge" for e in entries[2:] for a in e["actions"])
    assert {older, newer} <= live(store)


def test_every_pair_of_a_merged_group_stays_apart(store: Path) -> None:
    ids = duplicates(store, 3)
    merged = run_json(store, "consolidate")
    assert merged["actions"][0]["source_ids"] == ids
    run_json(store, "undo", merged["run_id"])
    again = run_json(store, "consolidate", now=later())
    assert "merge" not in types(again)
    assert set(ids) <= live(store)


def test_a_dry_run_shows_the_pair_kept_apart(store: Path) -> None:
    duplicates(store)
    run_json(store, "undo", run_json(store, "consolidate")["run_id"])
    preview = run_json(store, "consolidate", "--dry-run", now=later())
    assert [(a["type"], a.get("reason")) for a in preview["actions"]] == [("keep_separate", "undo_decision")]


def test_review_resolve_merge_merges_the_pair_now(store: Path) -> None:
    older, newer = duplicates(store)
    run_json(store, "undo", run_json(store, "consolidate")["run_id"])
    items = run_json(store, "review", "list", "--all")["items"]
    assert [(i["reason"], i["status"], i["resolution"], i["memory_ids"]) for i in items] == [
        ("undone_merge", "resolved", "undo", [older, newer])]
    assert run_json(store, "review", "list")["items"] == []  # a decision, not a question
    result = run_json(store, "review", "resolve", items[0]["id"], "--merge")
    assert result["resolution"] == "merge" and older not in live(store)


def test_redo_lets_the_next_run_merge_again(store: Path) -> None:
    older, _ = duplicates(store)
    run_json(store, "undo", run_json(store, "consolidate")["run_id"])
    item = run_json(store, "review", "list", "--all")["items"][0]
    run_json(store, "review", "resolve", item["id"], "--redo")
    assert types(run_json(store, "consolidate", now=later())) == ["merge"]
    assert older not in live(store)


def test_keep_both_keeps_the_pair_apart_for_good(store: Path) -> None:
    duplicates(store)
    run_json(store, "undo", run_json(store, "consolidate")["run_id"])
    item = run_json(store, "review", "list", "--all")["items"][0]
    run_json(store, "review", "resolve", item["id"], "--keep-both")
    assert "merge" not in types(run_json(store, "consolidate", now=later()))
    code, _, err = run(store, "review", "resolve", item["id"], "--redo")
    assert code == 1 and "already resolved (keep_both)" in err


def test_redo_is_only_for_an_undos_decisions(store: Path) -> None:
    review.add_items(store, [{"memory_ids": ["mem_a", "mem_b"], "reason": "both_changed"}])
    code, _, err = run(store, "review", "resolve", "rev_0001", "--redo")
    assert code == 1 and "--redo only lifts those" in err
    code, _, err = run(store, "review", "resolve", "rev_0001", "--redo", "--merge")
    assert code == 1 and "exactly one" in err


def test_undoing_the_undo_lifts_its_decisions_and_undoing_that_restores_them(store: Path) -> None:
    older, newer = duplicates(store)
    run_id = run_json(store, "consolidate")["run_id"]
    undo_id = run_json(store, "undo", run_id)["run_id"]
    assert decisions.load(store).keeps_apart(older, newer)
    redo_id = run_json(store, "undo", undo_id)["run_id"]  # the merge is back
    assert not decisions.load(store).keeps_apart(older, newer) and older not in live(store)
    assert not [a for a in run_json(store, "undo", redo_id)["actions"] if a["type"] == "decision"]
    assert decisions.load(store).keeps_apart(older, newer)  # the first undo is in force again
    assert "merge" not in types(run_json(store, "consolidate", now=later()))


def test_each_undo_records_its_own_decisions(store: Path) -> None:
    duplicates(store)
    first = run_json(store, "consolidate")["run_id"]
    undo_one = run_json(store, "undo", first)["run_id"]
    item = run_json(store, "review", "list", "--all")["items"][0]
    run_json(store, "review", "resolve", item["id"], "--merge")
    merge_run = log.read_entries(store)[-1]["run_id"]  # the review's merge is a run of its own
    undo_two = run_json(store, "undo", merge_run)["run_id"]
    items = run_json(store, "review", "list", "--all")["items"]
    assert [(i["undo_run"], i["resolution"]) for i in items] == [(undo_one, "merge"), (undo_two, "undo")]
    assert "merge" not in types(run_json(store, "consolidate", now=later()))


# ---------------------------------------------------------------- promotions and stale


def test_an_undone_promotion_is_not_made_again_until_redo(store: Path) -> None:
    original = add(store, type="procedural", subtype="deployment", access_count=5)["id"]
    promoted = run_json(store, "consolidate")
    assert types(promoted) == ["promote"]
    undone = run_json(store, "undo", promoted["run_id"])
    assert {"type": "decision", "decision": "no_promote", "memory_ids": [original]} in undone["actions"]
    assert "promote" not in types(run_json(store, "consolidate", now=later()))
    item = next(i for i in run_json(store, "review", "list", "--all")["items"] if i["reason"] == "undone_promote")
    assert item["to_scope"] == "team"
    code, _, err = run(store, "review", "resolve", item["id"], "--merge")
    assert code == 1 and "--redo lifts it" in err
    run_json(store, "review", "resolve", item["id"], "--redo")
    assert types(run_json(store, "consolidate", now=later(3))) == ["promote"]


def test_a_memory_brought_back_from_stale_counts_as_used_at_the_undo(store: Path) -> None:
    stale = add(store, access_count=0)["id"]
    archived = run_json(store, "consolidate")
    assert archived["actions"] == [{"type": "archive", "memory_id": stale, "reason": "stale"}]
    undo_at = later(5)
    run_json(store, "undo", archived["run_id"], now=undo_at)
    assert stale in live(store)
    assert run_json(store, "consolidate", now=undo_at + dt.timedelta(days=89))["actions"] == []
    expired = run_json(store, "consolidate", now=undo_at + dt.timedelta(days=90, seconds=1))
    assert expired["actions"] == [{"type": "archive", "memory_id": stale, "reason": "stale"}]


def test_the_undo_says_what_later_runs_will_not_do(store: Path) -> None:
    older, newer = duplicates(store)
    run_id = run_json(store, "consolidate")["run_id"]
    code, out, _ = run(store, "undo", run_id)
    assert code == 0
    out = " ".join(out.split())  # wrapped to the terminal's width
    assert f"Later runs will not redo it: {older} and {newer} are kept apart" in out
    assert f"memcli --store {store} review resolve ID --merge" in out


# ---------------------------------------------------------------- pure parts


def test_from_undone_reads_every_kind_of_action() -> None:
    entry = {"run_id": "run_r", "actions": [
        {"type": "merge", "source_ids": ["mem_a", "mem_b", "mem_k"], "result_id": "mem_k"},
        {"type": "update", "memory_id": "mem_n", "source_ids": ["mem_o"], "method": "llm"},
        {"type": "promote", "memory_id": "mem_p", "result_id": "mem_q", "to_scope": "team"},
        {"type": "archive", "memory_id": "mem_s", "reason": "stale"},
        {"type": "keep_separate", "memory_ids": ["mem_x", "mem_y"], "reason": "different_authors"},
        {"type": "skip", "memory_id": "mem_z", "reason": "modified_during_run"},
        {"type": "summarize", "memory_id": "mem_t", "method": "extractive"},
        "garbage", {"type": "merge", "source_ids": "not a list"},
    ]}
    items = decisions.from_undone(entry, "run_u", "2026-11-22T00:00:00Z")
    assert [(i["reason"], i["memory_ids"]) for i in items] == [
        ("undone_merge", ["mem_a", "mem_b"]), ("undone_merge", ["mem_a", "mem_k"]),
        ("undone_merge", ["mem_b", "mem_k"]), ("undone_merge", ["mem_o", "mem_n"]),
        ("undone_promote", ["mem_p"]), ("undone_archive", ["mem_s"])]
    assert all(i["undo_run"] == "run_u" and i["undone_run"] == "run_r" and i["resolution"] == "undo"
               for i in items)
    assert decisions.from_undone(None, "run_u", "x") == []
    assert decisions.from_undone({"run_id": "run_v", "actions": [{"type": "undo", "run_id": "run_r"}]},
                                 "run_w", "x") == []


@pytest.mark.parametrize("days, used", [(0, True), (89.99, True), (90, True), (90.0001, False), (-1, True)])
def test_counts_as_used_until_stale_after_days(days: float, used: bool) -> None:
    at = NOW_DT - dt.timedelta(days=days)
    assert decisions.counts_as_used(at, NOW_DT, 90) is used


def test_a_broken_decision_item_is_ignored(store: Path) -> None:
    """Items of the right shape whose content is wrong (a run not in the log, a time that does
    not parse) decide nothing."""
    items = [
        {"memory_ids": ["mem_a"], "reason": "undone_merge", "resolution": "undo", "undo_run": "run_x"},
        {"memory_ids": ["mem_b"], "reason": "undone_archive", "resolution": "undo", "undo_run": "run_x",
         "created_at": "not a time"}]
    (store / "ops" / "review-queue.json").write_text(json.dumps({"items": items}))
    found = decisions.load(store)
    assert (found.apart, found.no_promote, found.used) == (set(), set(), {})


@pytest.mark.parametrize("memory_ids", [[7], "mem_c"])
def test_a_queue_of_the_wrong_shape_is_refused_not_guessed(store: Path, memory_ids: Any) -> None:
    item = {"memory_ids": memory_ids, "reason": "undone_promote", "resolution": "undo", "undo_run": "run_x"}
    (store / "ops" / "review-queue.json").write_text(json.dumps({"items": [item]}))
    with pytest.raises(OpsFileError, match="review-queue.json"):
        decisions.load(store)
