"""A property: whatever hostile tree a store holds, no command writes outside it, none ends in a
traceback or hangs, and every bad file is reported (issue 13, SPEC 8).

Hypothesis builds random stores: good memories next to symlinks (to files and folders outside,
and inside), FIFOs, folders named like memories, odd names, malformed files of every kind the
issue found (broken JSON, nesting past the bounds, YAML alias bombs, timestamps out of range,
non-UTF-8, ids that do not match or could be paths), indices and ops files of the wrong shape,
and top-level folders that are links or files. Then every command runs on it, in process under
a watchdog (a hang fails the test instead of stalling it).
"""

from __future__ import annotations

import json
import os
import signal
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner, Result

from memcli.cli import app
from memcli.store.formats import encode
from tests import sweep
from tests.conftest import TOML, days_ago, record
from tests.store.test_hostile import tree

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo") or not hasattr(signal, "SIGALRM"),
                                reason="FIFOs, symlinks and the watchdog: POSIX only")
runner = CliRunner()
FOLDERS = ("agent/coder", "agent/reviewer", "team/backend", "global", "archive")
TOP = ("agent", "team", "global", "archive", "ops", ".cache")

# kind -> whether doctor must report the planted path as a problem
KINDS = {
    "good": False, "good_md": False, "broken_json": True, "broken_yaml": True, "deep_json": True,
    "deep_yaml": True, "alias_bomb": True, "bad_timestamp": True, "non_utf8": True, "wrong_id": True,
    "path_id": True, "fifo": True, "link_outside_file": True, "link_outside_dir": True,
    "link_inside": True, "dir_like_memory": True, "odd_name": False, "not_a_memory_name": False,
    "index_wrong_shape": False, "index_fifo": False,
}
ODD_NAMES = ("mem_ä.json", "mem_a b.json", "mem_\n.json", "mem_" + "x" * 70 + ".json", "mem_.md", "mem_x..json")


@st.composite
def plants(draw: st.DrawFn) -> list[tuple[str, str, int]]:
    items = draw(st.lists(st.tuples(st.sampled_from(FOLDERS), st.sampled_from(sorted(KINDS)),
                                    st.integers(0, 10_000)), min_size=1, max_size=10))
    return items


@st.composite
def hostile_tops(draw: st.DrawFn) -> list[tuple[str, str]]:
    return draw(st.lists(st.tuples(st.sampled_from(TOP), st.sampled_from(["link", "file"])),
                         max_size=1, unique_by=lambda t: t[0]))


@st.composite
def ops_files(draw: st.DrawFn) -> dict[str, Any]:
    choices = {"state.json": [{"runs": "x"}, {"flagged": [1]}, {"runs": {}}],
               "consolidation-log.json": [{"entries": "x"}, {"entries": [{"run_id": 1}, 7]}],
               "review-queue.json": [{"items": {}}, {"items": [{"memory_ids": [1]}]}]}
    return {name: draw(st.sampled_from(values)) for name, values in choices.items()
            if draw(st.booleans()) and draw(st.booleans())}


def _memory(folder: str, n: int, **fields: Any) -> dict[str, Any]:
    scope, _, scope_id = folder.partition("/")
    base = {"scope": scope, "scope_id": scope_id or "global"} if scope != "archive" else {}
    return record(**{"summary": f"fact number {n} about deploys", "tags": [f"t{n % 3}"],
                     "access_count": n % 2, **base, **fields})


def plant(root: Path, outside: Path, folder: str, kind: str, n: int, at: int) -> tuple[str, str | None]:
    """Put item number `at` in `folder`; returns (its path, the id of a good memory or None)."""
    where = root / folder
    where.mkdir(parents=True, exist_ok=True)
    if kind in ("good", "good_md"):
        data = _memory(folder, n)
        fmt = "md" if kind == "good_md" else "json"
        (where / f"{data['id']}.{fmt}").write_bytes(encode(data, fmt))
        return f"{folder}/{data['id']}.{fmt}", data["id"] if folder != "archive" else None
    name = f"mem_H{at}{kind.replace('_', '')}"
    path = where / f"{name}.json"
    data = _memory(folder, n, id=name)
    if kind == "broken_json":
        path.write_text('{"id": "' + name + '", "type": ')
    elif kind == "broken_yaml":
        path = path.with_suffix(".md")
        path.write_text(f"---\nid: {name}\ntags: [unclosed\n---\n\nbody\n")
    elif kind == "deep_json":
        text = encode({**data, "content": {"summary": "@@"}}, "json").decode()
        path.write_text(text.replace('"@@"', "[" * (65 + n % 900) + "]" * (65 + n % 900)))
    elif kind == "deep_yaml":
        path = path.with_suffix(".md")
        depth = 65 + n % 3000
        path.write_text(f"---\nid: {name}\ntype: semantic\ncreated_at: '{days_ago(9)}'\ncontent:\n  x: "
                        + "[" * depth + "]" * depth + "\n---\n")
    elif kind == "alias_bomb":
        path = path.with_suffix(".md")
        lines = [f"id: {name}", "type: semantic", f"created_at: '{days_ago(9)}'", "content:",
                 "  a: &a [x, x, x, x, x, x, x, x, x]"]
        lines += [f"  {b}: &{b} [" + ", ".join([f"*{a}"] * 9) + "]" for a, b in zip("abcdefg", "bcdefgh",
                                                                                  strict=True)]
        path.write_text("---\n" + "\n".join(lines) + "\n---\n")
    elif kind == "bad_timestamp":
        stamp = ("0001-01-01T00:00:00+14:00", "9999-12-31T23:00:00-14:00", "2026-02-30T00:00:00Z")[n % 3]
        path.write_bytes(encode({**data, "created_at": stamp}, "json"))
    elif kind == "non_utf8":
        path.write_bytes(encode(data, "json").replace(b"fact", b"f\xe9ct", 1))
    elif kind == "wrong_id":
        path.write_bytes(encode({**data, "id": "mem_SOMEBODYELSE"}, "json"))
    elif kind == "path_id":
        path.write_bytes(encode({**data, "id": "../../outside/x"}, "json"))
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "link_outside_file":
        (outside / f"{name}.json").write_bytes(encode(data, "json"))
        path.symlink_to(outside / f"{name}.json")
    elif kind == "link_outside_dir":
        path.symlink_to(outside, target_is_directory=True)
    elif kind == "link_inside":
        path.symlink_to(root / "memcli.toml")
    elif kind == "dir_like_memory":
        path.mkdir()
    elif kind == "odd_name":
        path = where / ODD_NAMES[n % len(ODD_NAMES)].replace("mem_", f"mem_{at}", 1)
        path.write_bytes(encode(data, "json"))
    elif kind == "not_a_memory_name":
        path = where / (f"notes{at}.txt", f"_other{at}.json", f".hidden{at}.json")[n % 3]
        path.write_text("not a memory")
    elif kind == "index_wrong_shape":
        path = where / "_index.json"
        if os.path.lexists(path):
            return str(path.relative_to(root)), None
        path.write_text(('{"entries": [1]}', '{"entries": "x"}', "[]", "{")[n % 4])
    elif kind == "index_fifo":
        path = where / "_index.json"
        if not os.path.lexists(path):
            os.mkfifo(path)
    return str(path.relative_to(root)), None


@contextmanager
def watchdog(seconds: int) -> Iterator[None]:
    def hung(signum: int, frame: Any) -> None:
        raise TimeoutError(f"a command ran over {seconds} s: a hang")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def cli(root: Path, *args: str) -> Result:
    result = runner.invoke(app, ["--store", str(root), *args])
    assert result.exception is None or isinstance(result.exception, SystemExit), (args, repr(result.exception))
    assert result.exit_code in (0, 1), (args, result.exit_code, result.stdout)
    assert "Traceback" not in result.stdout + result.stderr, (args, result.stderr)
    return result


@pytest.mark.slow
# 10 random hostile trees a run by default, 25 with MEMCLI_FULL_SWEEPS=1 (tests/sweep.py)
@settings(max_examples=sweep.scale(10, 25), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plants(), hostile_tops(), ops_files())
def test_no_hostile_tree_escapes_crashes_hangs_or_goes_unreported(
        items: list[tuple[str, str, int]], tops: list[tuple[str, str]], ops: dict[str, Any]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        root, outside = base / "store", base / "outside"
        for sub in ("ops", "archive", "global"):
            (root / sub).mkdir(parents=True)
        (root / "memcli.toml").write_text(TOML)
        outside.mkdir()
        (outside / "victim.json").write_text('{"precious": true}')
        planted = [(kind, *plant(root, outside, folder, kind, n, at)) for at, (folder, kind, n) in enumerate(items)]
        for name, ops_data in ops.items():
            (root / "ops" / name).write_text(json.dumps(ops_data))
        for top, how in tops:
            target = outside / f"real-{top.strip('.')}"
            if (root / top).exists():
                (root / top).rename(target)
            else:
                target.mkdir()
            if how == "link":
                (root / top).symlink_to(target, target_is_directory=True)
            else:
                (root / top).write_text("not a folder")
        unsafe = {top for top, _ in tops}
        before = tree(base, skip=root)
        good = [mem_id for _, _, mem_id in planted if mem_id]

        with watchdog(120):
            report = json.loads(cli(root, "--json", "doctor").stdout)
            reported = {p["path"] for p in report["problems"]}
            for kind, rel, _ in planted:
                top = rel.split("/", 1)[0]
                if top in unsafe:
                    assert top in reported, (top, report)
                elif KINDS[kind]:
                    assert rel in reported, (kind, rel, report)
            outcome = cli(root, "--json", "consolidate")
            for args in (["reindex"], ["list"], ["stats"], ["status"], ["log"],
                         ["add", "--type", "semantic", "--scope", "global", "--summary", "added fact"]):
                cli(root, *args)
            if good:
                cli(root, "access", good[0])
            if outcome.exit_code == 0:
                cli(root, "undo", json.loads(outcome.stdout)["run_id"])
            cli(root, "doctor", "--fix")

        assert tree(base, skip=root) == before  # nothing outside the store changed
        if not unsafe:
            for mem_id in good:  # nothing lost: live or archived
                assert list(root.glob(f"*/*/{mem_id}.*")) + list(root.glob(f"*/{mem_id}*")), mem_id
        for kind, rel, _ in planted:
            if kind == "fifo" and rel.split("/", 1)[0] not in unsafe:
                assert stat.S_ISFIFO(os.lstat(root / rel).st_mode)  # left as it was
