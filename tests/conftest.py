"""Shared fixtures: a store in tmp_path, a memory factory, and store invariants."""

from __future__ import annotations

import datetime as dt
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from memcli.store.formats import encode
from memcli.store.model import format_ts, new_memory_id, parse_ts

NOW = "2026-11-22T00:00:00Z"
NOW_DT = parse_ts(NOW)[0]
TOML = """\
[consolidation]
index_pause_ms = 0

[teams]
default_team = "team"
coder = "backend"
"""


def days_ago(days: float) -> str:
    return format_ts(NOW_DT - dt.timedelta(days=days))


@pytest.fixture(autouse=True)
def _clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test runs at a fixed moment, with no LLM key from the developer's shell."""
    monkeypatch.setenv("MEMCLI_NOW", NOW)
    monkeypatch.delenv("MEMCLI_STORE", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("MEMCLI_CRASH_AT", raising=False)
    monkeypatch.delenv("MEMCLI_AUTHOR", raising=False)


@pytest.fixture
def store(tmp_path: Path) -> Path:
    """An empty store with index_pause_ms = 0."""
    root = tmp_path / "store"
    for sub in ("ops", "archive", "global"):
        (root / sub).mkdir(parents=True)
    (root / "memcli.toml").write_text(TOML)
    return root


_counter = [0]


def record(**fields: Any) -> dict[str, Any]:
    """A valid record, 60 days old and recently used unless told otherwise."""
    _counter[0] += 1
    created = fields.pop("created_at", days_ago(60))
    data: dict[str, Any] = {
        "id": fields.pop("id", None) or new_memory_id(_moment(created), f"t{_counter[0]}"),
        "type": "semantic", "subtype": "fact", "scope": "agent", "scope_id": "coder",
        "tags": ["x"], "priority": "normal", "created_by": "agent:coder", "consent": False,
        "created_at": created,
        "updated_at": fields.pop("updated_at", created if isinstance(created, str) and created.endswith("Z")
                                 else days_ago(60)),
        "last_accessed": days_ago(5), "access_count": 1,
        "content": {"summary": fields.pop("summary", _gibberish(_counter[0]))},
        "supersedes": [], "superseded_by": [], "promoted_to": None, "promoted_from": None,
    }
    details = fields.pop("details", None)
    if details is not None:
        data["content"]["details"] = details
    data.update(fields)
    return data


def _gibberish(n: int) -> str:
    """A unique summary unlike any other, so that factory records are never duplicates."""
    import hashlib

    letters = "".join(chr(97 + b % 26) for b in hashlib.sha256(str(n).encode()).digest())
    return " ".join(letters[i:i + 8] for i in range(0, 32, 8))


def _moment(value: object) -> dt.datetime:
    try:
        return parse_ts(str(value))[0]
    except ValueError:
        return NOW_DT


def write_memory(root: Path, data: dict[str, Any], fmt: str = "json") -> Path:
    """Put a record where its scope says, as a hand-written file would be."""
    scope = data.get("scope", "agent")
    folder = root / "global" if scope == "global" else root / scope / data.get("scope_id", "coder")
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{data['id']}.{fmt}"
    path.write_bytes(encode(data, fmt))
    return path


def add(root: Path, fmt: str = "json", **fields: Any) -> dict[str, Any]:
    data = record(**fields)
    write_memory(root, data, fmt)
    return data


def _entries(folder: str, descend: Any = None) -> Iterator[os.DirEntry[str]]:
    """Every entry under `folder`, in the order `Path(folder).rglob("*")` gives them (a
    folder's entries, then each sub-folder's; symbolic links to folders not followed), without
    pathlib's parsing of every path: the checks below walk the store after each step of the
    stateful and crash sweeps. `descend(path)` says whether to go into a sub-folder."""
    try:
        with os.scandir(folder) as found:
            entries = list(found)
    except (FileNotFoundError, NotADirectoryError, PermissionError):
        return
    subfolders = []
    for entry in entries:
        yield entry
        try:
            is_dir = entry.is_dir(follow_symlinks=False)
        except OSError:
            is_dir = False
        if is_dir and (descend is None or descend(entry.path)):
            subfolders.append(entry.path)
    for path in subfolders:
        yield from _entries(path, descend)


def snapshot(root: Path) -> dict[str, bytes]:
    """Every memory file's bytes, by path relative to the store (indices, caches and ops aside)."""
    base = os.path.join(root, "")
    tops = {base + top for top in ("agent", "team", "global")}
    out: dict[str, bytes] = {}
    for entry in _entries(str(root), lambda folder: os.path.dirname(folder) != str(root) or folder in tops):
        rel = entry.path[len(base):]
        if rel.split(os.sep, 1)[0] in ("agent", "team", "global") and not entry.name.startswith("_") \
                and entry.is_file():
            with open(entry.path, "rb") as file:
                out[rel] = file.read()
    return out


def all_files(root: Path) -> dict[str, bytes]:
    base = os.path.join(root, "")
    out: dict[str, bytes] = {}
    for entry in _entries(str(root)):
        if entry.is_file():
            with open(entry.path, "rb") as file:
                out[entry.path[len(base):]] = file.read()
    return out


def ids_everywhere(root: Path) -> dict[str, list[str]]:
    """id -> places (live folders and archive) holding a file for it."""
    base = os.path.join(root, "")
    archive = os.path.join(root, "archive")
    found: dict[str, list[str]] = {}
    # pre-images under archive/runs (anything deeper than archive/X) are not memories
    for entry in _entries(str(root), lambda folder: os.path.dirname(folder) != archive):
        if entry.name.startswith("mem_"):
            found.setdefault(Path(entry.name).stem.split("@")[0], []).append(entry.path[len(base):])
    return found


def assert_invariants(root: Path) -> None:
    """No temporary file or journal left; every index lists exactly its folder's files."""
    leftovers = [str(p) for p in root.rglob("*.tmp")] + [str(p) for p in (root / "ops").glob("journal-*")]
    assert not leftovers, leftovers
    for index_path in root.rglob("_index.json"):
        folder = index_path.parent
        index = orjson.loads(index_path.read_bytes())
        files = sorted(p.name for p in folder.iterdir()
                       if p.suffix in (".json", ".md") and not p.name.startswith(("_", ".")))
        assert sorted(e["file"] for e in index["entries"]) == files, folder
        assert index["entry_count"] == len(index["entries"])


def load(path: Path) -> dict[str, Any]:
    from memcli.store.formats import decode

    return decode(path.read_bytes(), "md" if path.suffix == ".md" else "json")


@pytest.fixture
def cwd(tmp_path: Path) -> Iterator[Path]:
    old = os.getcwd()
    os.chdir(tmp_path)
    try:
        yield tmp_path
    finally:
        os.chdir(old)




def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto`: one worker more than the cores (up to 4 cores; then one a core). Many tests
    wait on a child process (memcli, git, node, the MCP server) or a pipe part of their time,
    and a third worker fills that: on 2 cores the suite took 111, 131 and 123 s with 3 workers
    against 118, 155 and 137 s with 2, run alternately (2026-11-23, lead)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return cores + 1 if cores <= 4 else cores


def pytest_configure(config: pytest.Config) -> None:
    """Temporary folders in memory (tmpfs) when the machine has one: a test's store is
    throwaway, and its runs' fsyncs cost milliseconds each on a disk (about a tenth of the
    suite's time). MEMCLI_TEST_TMP=disk keeps them on the disk."""
    import tempfile

    config.addinivalue_line("markers", "slow: a test slower than about 3 s (still run by default)")
    shm = "/dev/shm"
    if os.environ.get("MEMCLI_TEST_TMP") != "disk" and os.path.isdir(shm) and os.access(shm, os.W_OK):
        tempfile.tempdir = shm
    if not hasattr(config, "workerinput"):
        if sys.dont_write_bytecode:
            _compile_once()
        if getattr(config.option, "numprocesses", None):  # workers to come (not with -n 0)
            _rewrite_tests_once(config)
    _build_the_cli_once()


def _build_the_cli_once() -> None:
    """`CliRunner.invoke(app, ...)` turns the typer app into a click command on every call:
    the signatures and type hints of some forty commands, about 30 ms, most of an in-process
    command's time in the ~1,000 the suite runs. The app is the same all run long (commands
    register at import), so each app's command is built once; a click command is made to be
    invoked again (each invocation gets a fresh context). A real `memcli` builds it once per
    process anyway."""
    import typer.main
    import typer.testing

    built: dict[int, tuple[Any, Any]] = {}
    build = typer.main.get_command

    def get_command(typer_app: Any) -> Any:
        if id(typer_app) not in built:  # the app is kept with its command: its id stays its own
            built[id(typer_app)] = (typer_app, build(typer_app))
        return built[id(typer_app)][1]

    typer.testing._get_command = get_command  # type: ignore[attr-defined]


def _compile_once() -> None:
    """Bytecode for memcli and bench/, written once before the workers start. Under
    PYTHONDONTWRITEBYTECODE nothing writes it, and the suite starts a few hundred interpreters
    (real commands, zygotes, hooks run by Claude Code, benchmark phases) that would each
    compile every memcli module they import again: about 0.6 s of CPU here against 0.1-0.3 s
    in each of them. `compileall` writes the usual `__pycache__` files (ignored by git),
    checked against their sources by Python like any others."""
    import compileall
    import re

    root = Path(__file__).resolve().parents[1]
    for package in ("memcli", "bench"):
        compileall.compile_dir(str(root / package), quiet=2)
    # the tests' helper modules too (the test modules themselves are pytest's: below)
    compileall.compile_dir(str(root / "tests"), quiet=2, rx=re.compile(r"(^|/)(test_[^/]*|conftest)\.py$"))


def _rewrite_tests_once(config: pytest.Config) -> None:
    """Each worker collects the whole suite, and pytest rewrites the asserts of every test
    module it has no cache for: about 7 s of CPU a worker, most of its collection. Under
    PYTHONDONTWRITEBYTECODE it keeps nothing, so every worker of every run pays it; otherwise
    every worker of a fresh checkout does. Its cache (`__pycache__/*.pyc` tagged pytest, keyed
    by a hash of the source, so never stale) is read even when bytecode is not written, so it
    is written here, once, before the workers start, split between a process a core; a module
    cached already is not rewritten. This uses pytest's own rewriting functions: with a pytest
    that has other ones, nothing is cached and each worker rewrites as before."""
    from fnmatch import fnmatch

    try:
        from _pytest.assertion import rewrite

        state = config.stash[rewrite.assertstate_key]
        patterns = [*config.getini("python_files"), "conftest.py"]
        todo = []
        for path in Path(__file__).resolve().parent.rglob("*.py"):
            pyc = rewrite.get_cache_dir(path) / (path.name[:-3] + rewrite.PYC_TAIL)
            if any(fnmatch(path.name, p) for p in patterns) and rewrite._read_pyc(path, pyc) is None:
                todo.append((path.stat().st_size, path, pyc))
        todo.sort(reverse=True)  # the biggest first, dealt in turn: shares of about one size

        def rewrite_share(share: list[tuple[int, Path, Path]]) -> None:
            for _size, path, pyc in share:
                try:
                    source_hash, code = rewrite._rewrite_test(path, config)
                except Exception:  # a syntax error: the workers report it as usual
                    continue
                pyc.parent.mkdir(exist_ok=True)
                rewrite._write_pyc(state, code, source_hash, pyc)

        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        shares = max(1, min(cores, len(todo) // 8))
        children = []
        for k in range(1, shares):  # forked before the workers (and any thread) start
            pid = os.fork()
            if pid == 0:
                try:
                    rewrite_share(todo[k::shares])
                finally:
                    os._exit(0)  # a share not written is rewritten by the workers, as before
            children.append(pid)
        rewrite_share(todo[0::shares])
        for pid in children:
            os.waitpid(pid, 0)
    except (AttributeError, ImportError, KeyError, TypeError):  # another pytest: workers rewrite
        return


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The modules that talk to the loopback Messages API through the Anthropic SDK in process
    first, then the tests marked slow, then the rest in collection order. `--dist worksteal`
    hands each worker one contiguous share of this order and a worker that runs out steals
    from the end of another's share: the slow tests near the start of the first share are
    never the last ones left (the workers finish together), and the SDK modules at its very
    start run in that worker before any stealing, so only it imports the SDK (about 2.5 s of
    CPU in each worker that does)."""
    def order(item: pytest.Item) -> tuple[bool, bool]:
        module = getattr(item, "module", None)
        return not hasattr(module, "fake_anthropic"), item.get_closest_marker("slow") is None

    items.sort(key=order)


def record_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the memory files a run reads through the index's lazy path
    (`Store._read_record`), in order, filled in as it reads them."""
    from memcli.store.store import Store

    names: list[str] = []
    original = Store._read_record

    def spy(self: Store, folder: Any, name: str, *more: Any) -> Any:
        names.append(name)
        return original(self, folder, name, *more)

    monkeypatch.setattr(Store, "_read_record", spy)
    return names


def reaped(pid: int) -> bool:
    """Whether the forked child `pid` is gone and waited for (a worker never left behind)."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True
    return False


def dry_plan(root: Path) -> str:
    """A dry run's outcome as sorted JSON, its timings left out: equal for equal plans."""
    import json

    from memcli.consolidate import engine
    from memcli.store.store import Store

    out = engine.consolidate(Store(root), dry_run=True).to_json()
    out["stats"] = {k: v for k, v in out["stats"].items() if not k.endswith("_ms")}
    return json.dumps(out, sort_keys=True, default=str)
