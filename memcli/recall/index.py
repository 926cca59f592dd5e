"""The search index: a derived cache under `.cache/recall/` (SPEC 1 and 10), on tantivy.

Why tantivy and not SQLite's FTS5: measured on the same texts and terms (bench/recall.py,
figures in README and bench/RESULTS.md), FTS5 took 160 ms for a median query over 100,000
memories and 5 s to build; tantivy 1-2 ms and 2 s, with the same ranking quality.

Layout: `.cache/recall/current` names the live generation `gen-<token>/`, which holds the
tantivy index (`tantivy/`), one rows file per memory folder (`rows/<folder>.json`: file name
-> size, mtime, id, plus the files that are bad input and why), `folders.json` (per folder:
the folder's mtime when the rows were last known to match it) and `pending.jsonl` (documents
of memories written since the last commit, and the folders' new mtimes, see below). A
rebuild makes a new generation and then switches `current`, so a reader never sees a
half-built index.

Checked against the files the way `_index.json` is: a folder whose mtime is still the one in
`folders.json` is as indexed (creating, removing or replacing a file moves it, and memcli
writes every file by replacing it); any other folder is listed and each file's size and mtime
compared with its row; changed files are read again (bad input reported, skipped). A folder
mtime is only trusted when it is over a second older than the listing (a change in the same
timestamp tick would not move it). A missing, unreadable or foreign index is rebuilt.

Writes keep it current. A write that knows its files (`add`, folding uses, capture) uses
`keeping_current`: each file is noted before it is written; afterwards its document goes to
`pending.jsonl` (a fraction of a millisecond) instead of a tantivy commit (12 ms of fsyncs),
and the next search commits every pending document at once. The folder's new mtime goes to
the same file, after the documents, as a stamp line (`{"folder", "stamp", "bad"}`): reading
the generation applies it to `folders.json`'s state, so an add appends one file and replaces
none (replacing `folders.json` was most of an add's time on a busy disk). A torn last line is
ignored: without its stamp the folder is listed again by the next search. A consolidation run, undo or
restore (`after_run`) brings the folders it touched in line before it returns. All index
writes hold `.cache/recall/.lock`, never the store lock: recall and the hooks are read paths.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import stat
import time
from pathlib import Path

from memcli.store.cache import cache_dir

TYPE_CHECKING = False  # the read path imports no typing, dataclasses, orjson or model: hooks
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from typing import Any

VERSION = 6  # of the schema and analyzers: another value is a foreign index, rebuilt
STAMP_AGE_NS = 1_000_000_000
# The word fields are indexed by tantivy's own `en_stem` (the simple tokenizer, tokens of 40
# bytes or more dropped, lowercase, the Snowball English stemmer): the same pipeline as the
# `words` analyzer the queries use (`analyzers`; tests/recall/test_index_analyzers.py holds them to it), but
# built in, without the per-token dynamic dispatch of an analyzer made from Python (a sixth
# to a tenth of a build's CPU).
WORDS = "en_stem"
CODE = "mc_code"
HEAP_BYTES = 200_000_000  # the build's writer: one segment per thread at 100,000 memories, no merging
LOCK_WAIT_S = 2.0
# Documents are made and handed to tantivy's writer threads a chunk at a time while the
# folder is still being read, not a folder at a time: the writer threads start at once and
# have little left to do when the reading ends (with a folder at a time, the first folder's
# reading and the last one's indexing ran alone, a tenth of a build each at 10 folders).
CHUNK = 1000
_READ_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0)


class IndexUnusable(Exception):
    """The index on disk cannot be used (corrupt, foreign, half-written): rebuild it."""


def _tantivy() -> Any:
    import tantivy

    return tantivy


def _orjson() -> Any:
    """orjson for the write side (fast on big rows files); the read side uses json, which
    a hook process has already paid for (orjson's import alone is about 10 ms)."""
    import orjson

    return orjson


def analyzers() -> tuple[Any, Any]:
    """(words, code) analyzers: what the queries are analysed with, the same pipelines as
    the index's (`WORDS`, `CODE`). The code field is given its terms already found
    (`text.code_terms`: tantivy's regex tokenizer cost half of the whole build), so its
    analyzer only splits them."""
    tv = _tantivy()
    words = (tv.TextAnalyzerBuilder(tv.Tokenizer.simple()).filter(tv.Filter.remove_long(40))
             .filter(tv.Filter.lowercase()).filter(tv.Filter.stemmer("english")).build())
    return words, code_analyzer()


def code_analyzer() -> Any:
    tv = _tantivy()
    return tv.TextAnalyzerBuilder(tv.Tokenizer.whitespace()).filter(tv.Filter.lowercase()).build()


def schema() -> Any:
    tv = _tantivy()
    builder = tv.SchemaBuilder()
    # Term frequencies without positions: no query asks for a phrase, and positions were a
    # third of what a build wrote. `meta` (what a result shows) is stored, never indexed.
    builder.add_text_field("key", stored=True, tokenizer_name="raw", index_option="basic")
    builder.add_text_field("folder", stored=False, tokenizer_name="raw", index_option="basic")
    for name in ("summary", "details", "tags", "parts"):
        builder.add_text_field(name, stored=False, tokenizer_name=WORDS, index_option="freq")
    builder.add_text_field("code", stored=False, tokenizer_name=CODE, index_option="freq")
    builder.add_bytes_field("meta", stored=True)
    builder.add_integer_field("brief", stored=False, indexed=False, fast=True)  # briefing order
    return builder.build()


# ---------------------------------------------------------------- documents


# ---------------------------------------------------------------- the generation on disk


class Generation:
    """One built index on disk, with its folders' state (rel -> {"stamp", "bad"})."""

    __slots__ = ("path", "folders", "pending", "has_pending")

    def __init__(self, path: Path, folders: dict[str, Any] | None = None) -> None:
        self.path = path
        self.folders: dict[str, Any] = folders if folders is not None else {}
        self.pending: list[dict[str, Any]] = []  # documents written since the last commit
        self.has_pending = False  # pending.jsonl holds anything (documents or stamps)

    @property
    def tantivy_dir(self) -> Path:
        return self.path / "tantivy"

    def rows_path(self, rel: str) -> Path:
        return self.path / "rows" / (rel.replace("/", "__") + ".json")

    def load_rows(self, rel: str) -> dict[str, Any]:
        try:
            data = _orjson().loads(self.rows_path(rel).read_bytes())
            if isinstance(data, dict) and isinstance(data.get("rows"), dict):
                return data
        except (OSError, ValueError):
            pass
        return {"rows": {}, "bad": {}}

    def save_rows(self, rel: str, data: dict[str, Any]) -> None:
        _write(self.rows_path(rel), _orjson().dumps(data))

    def save_folders(self) -> None:
        _write(self.path / "folders.json", _orjson().dumps({"version": VERSION, "folders": self.folders}))


def _write(path: Path, data: bytes) -> None:
    """Atomic write of a cache file (temporary name, rename): a reader never sees half of it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{time.monotonic_ns()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def base_dir(root: Path, create: bool = False) -> Path:
    return cache_dir(root, "recall", create=create)


def current(root: Path) -> Generation | None:
    """The live generation, or None when there is none usable (never built, foreign, torn)."""
    base = base_dir(root)
    try:
        name = (base / "current").read_text().strip()
    except (OSError, UnicodeDecodeError):
        return None
    if not re.fullmatch(r"gen-[0-9a-f]{16}", name) or not (base / name).is_dir():
        return None
    gen = Generation(base / name)
    try:
        data = json.loads((gen.path / "folders.json").read_bytes())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("version") != VERSION \
            or not isinstance(data.get("folders"), dict):
        return None
    gen.folders = data["folders"]
    _load_pending(gen)
    return gen


@contextlib.contextmanager
def writing(root: Path, wait: float = LOCK_WAIT_S) -> Iterator[bool]:
    """Hold the index's own lock (never the store's); yields False when it stayed busy."""
    from filelock import FileLock, Timeout

    lock = FileLock(str(base_dir(root, create=True) / ".lock"), timeout=max(wait, 0))
    try:
        lock.acquire()
    except Timeout:
        yield False
        return
    try:
        yield True
    finally:
        lock.release()


def open_index(gen: Generation) -> Any:
    tv = _tantivy()
    try:
        index = tv.Index.open(str(gen.tantivy_dir))
    except Exception as exc:  # tantivy raises ValueError and OSError alike for a broken index
        raise IndexUnusable(str(exc)) from exc
    index.register_tokenizer(CODE, code_analyzer())
    return index


# ---------------------------------------------------------------- building and syncing

if TYPE_CHECKING:
    Problems = list[Any]  # memcli.store.store.Problem


def rebuild(store: Any, problems: Problems) -> Generation:
    """A new generation from every live folder; switched in once complete. The caller holds
    the index lock."""
    import secrets
    import shutil

    tv = _tantivy()
    base = base_dir(store.root, create=True)
    gen = Generation(base / f"gen-{secrets.token_hex(8)}")
    gen.tantivy_dir.mkdir(parents=True)
    index = tv.Index(schema(), path=str(gen.tantivy_dir))
    index.register_tokenizer(CODE, code_analyzer())
    writer = index.writer(heap_size=HEAP_BYTES, num_threads=min(2, os.cpu_count() or 1))
    typed, from_dict = index.schema, tv.Document.from_dict  # (typed by the schema: the cheapest way in)
    for folder in store.memory_folders():
        before, listed = _mtime(folder.path), time.time_ns()
        rows, bad = _read_folder(store, folder, {}, {}, problems, lambda doc: writer.add_document(
            from_dict(doc, typed)), None)
        gen.save_rows(folder.rel, {"rows": rows, "bad": bad})
        gen.folders[folder.rel] = {"stamp": _stamp(folder.path, before, listed), "bad": bool(bad)}
    writer.commit()
    writer.wait_merging_threads()
    gen.save_folders()
    _write(base / "current", gen.path.name.encode())
    for old in base.glob("gen-*"):  # a reader still in an old one retries with the new
        if old != gen.path:
            shutil.rmtree(old, ignore_errors=True)
    return gen


def _stamp(path: Path, rows_taken_ns: int | None, listed_ns: int | None = None) -> int | None:
    """The folder's mtime when it can vouch for the listing just made, else None."""
    try:
        mtime = os.stat(path).st_mtime_ns
    except OSError:
        return None
    if rows_taken_ns is not None and mtime != rows_taken_ns:
        return None  # changed while we listed it
    started = listed_ns if listed_ns is not None else time.time_ns()
    return mtime if started - mtime > STAMP_AGE_NS else None


def _read_folder(store: Any, folder: Any, old_rows: dict[str, Any], old_bad: dict[str, Any],
                 problems: Problems, add: Callable[[dict[str, Any]], None],
                 delete: Callable[[str], None] | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """Compare a folder's files with its rows; index what changed. Returns (rows, bad).

    A file whose `_index.json` entry still has its size and mtime was read and checked by
    the store when the entry was written (the store's own rule for trusting an entry): it is
    only parsed here, not checked again. Any other file is read through the store's checks
    (bad input reported and skipped)."""
    from memcli.store.store import Problem

    rows: dict[str, Any] = {}
    bad: dict[str, Any] = {}
    vouchers: dict[str, tuple[int, int, str]] | None = None
    records: list[tuple[str, dict[str, Any], int, int]] = []  # made into documents a chunk at once
    base = str(folder.path) + os.sep
    for name in store.memory_names(folder):
        path = base + name
        sig: list[int] | None = None
        if old_rows or old_bad:  # a sync: compare with the rows before reading anything
            try:
                st = os.lstat(path)
            except OSError:
                continue
            sig = [st.st_size, st.st_mtime_ns]
            old = old_rows.get(name)
            if old is not None and old[:2] == sig:
                rows[name] = old
                continue
            seen_bad = old_bad.get(name)
            if seen_bad is not None and seen_bad[:2] == sig:
                bad[name] = seen_bad
                problems.append(Problem(f"{folder.rel}/{name}", str(seen_bad[2]), "bad_file"))
                continue
            if delete is not None and old is not None:
                delete(f"{folder.rel}/{name}")
        if vouchers is None:
            vouchers = _vouchers(folder.path)
        trusted = _read_trusted(path, name, vouchers.get(name))
        if trusted is not None:
            data, size, mtime_ns = trusted
            rows[name] = [size, mtime_ns, data["id"]]
            records.append((name, data, size, mtime_ns))
            if len(records) >= CHUNK:
                _add_documents(folder.rel, records, add)
            continue
        found: list[Any] = []
        mem = store.try_read(folder.path / name, folder, found)
        problems.extend(found)
        if mem is None:
            if found and found[0].severity == "error":
                if sig is None:
                    try:
                        st = os.lstat(path)
                    except OSError:
                        continue
                    sig = [st.st_size, st.st_mtime_ns]
                bad[name] = [*sig, "; ".join(p.reason for p in found if p.severity == "error")]
            continue
        rows[name] = [mem.size, mem.mtime_ns, mem.id]
        records.append((name, mem.data, mem.size, mem.mtime_ns))
        if len(records) >= CHUNK:
            _add_documents(folder.rel, records, add)
    if delete is not None:
        for name in old_rows:  # (never a name added above: those are in `rows`)
            if name not in rows and name not in bad:
                delete(f"{folder.rel}/{name}")
    _add_documents(folder.rel, records, add)
    return rows, bad


def _add_documents(rel: str, records: list[tuple[str, dict[str, Any], int, int]],
                   add: Callable[[dict[str, Any]], None]) -> None:
    """Hand the documents of `records` over, and empty it. (A changed file's old document
    was deleted before its file was read: the new one comes after.)"""
    from memcli.recall.documents import documents_of  # (not imported by the read path: hooks)

    for doc in documents_of(rel, records):
        if doc is not None:
            add(doc)
    records.clear()


# In the layout the store writes `_index.json` (compact, each entry starting with its id and
# file, its size, mtime and content hash side by side), what vouches for a file can be found
# without parsing the 600 bytes of each entry: `_vouchers` finds these and checks that they
# pair up (else it parses the whole index). The store's folder indices are a third of the
# size of the memories: parsing them was a third of the time of reading them. (`[^"]*` is
# the regular expression engine's fastest loop; a name with an escape in it is then read
# wrong, vouches for no file, and that file is read through the store.)
_ENTRY_HEAD = re.compile(rb'\{"id":"([^"]*)","file":"([^"]*)"')
_ENTRY_SIG = re.compile(rb',"size":(\d+),"mtime_ns":(\d+),"content_hash":"')


def _vouchers(folder: Path) -> dict[str, tuple[int, int, str]]:
    """File name -> (size, mtime, id) of each `_index.json` entry with a content hash: the
    files the store has read and checked as they are now ({} when the index is missing or
    unreadable). Heads and signatures are paired by their order when there are as many of
    each; a pairing gone wrong (an index edited by hand) could only make a file look
    changed, since `_read_trusted` compares each file's own size, mtime and id."""
    try:
        raw = (folder / "_index.json").read_bytes()
    except OSError:
        return {}
    heads = _ENTRY_HEAD.findall(raw)
    sigs = _ENTRY_SIG.findall(raw)
    if not heads or len(heads) != len(sigs):
        return _parsed_vouchers(raw)
    ids, files = zip(*heads, strict=True)
    sizes, mtimes = zip(*sigs, strict=True)
    try:  # (columns at once: a call per column, not per entry)
        signatures = zip(map(int, sizes), map(int, mtimes), map(bytes.decode, ids), strict=True)
        return dict(zip(map(bytes.decode, files), signatures, strict=True))
    except UnicodeDecodeError:
        return _parsed_vouchers(raw)


def _parsed_vouchers(raw: bytes) -> dict[str, tuple[int, int, str]]:
    try:
        data = _orjson().loads(raw)
    except ValueError:
        return {}
    listed = data.get("entries") if isinstance(data, dict) else None
    if not isinstance(listed, list):
        return {}
    found: dict[str, tuple[int, int, str]] = {}
    for e in listed:
        if isinstance(e, dict) and isinstance(e.get("file"), str) and "content_hash" in e:
            size, mtime_ns, mem_id = e.get("size"), e.get("mtime_ns"), e.get("id")
            if isinstance(size, int) and isinstance(mtime_ns, int) and isinstance(mem_id, str):
                found[e["file"]] = (size, mtime_ns, mem_id)
    return found


def _read_trusted(path: str, name: str, voucher: tuple[int, int, str] | None
                  ) -> tuple[dict[str, Any], int, int] | None:
    """The record (and size, mtime) of a JSON file its index entry vouches for (`_vouchers`):
    the open file has the entry's size and mtime, the record its id. Else None (the caller
    reads it with every check)."""
    if voucher is None or not name.endswith(".json"):
        return None
    try:
        fd = os.open(path, _READ_FLAGS)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        size = st.st_size
        if size != voucher[0] or st.st_mtime_ns != voucher[1] or not stat.S_ISREG(st.st_mode):
            return None
        raw = os.read(fd, size + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    try:
        data = _orjson().loads(raw)
    except ValueError:
        return None
    if not isinstance(data, dict) or data.get("id") != voucher[2] or len(raw) != size:
        return None
    return data, size, st.st_mtime_ns


def sync(store: Any, gen: Generation, rels: list[str], problems: Problems, force: bool = False) -> bool:
    """Bring the folders `rels` in line with their files, and commit pending documents (and
    their rows). The caller holds the index lock. Returns whether anything was committed."""
    from memcli.recall import documents

    tv = _tantivy()
    stale = [rel for rel in rels if force or not _vouched(store, gen, rel)]
    pending = _read_pending(gen)
    if not stale and not pending:
        if gen.has_pending:  # stamp lines alone (their documents' lines torn): keep the stamps
            gen.save_folders()
            _write(gen.path / "pending.jsonl", b"")
            gen.has_pending = False
        for rel in rels:
            problems.extend(_bad_at(gen, rel))
        return False
    index = open_index(gen)
    writer = index.writer(heap_size=50_000_000, num_threads=1)
    typed = index.schema
    saved: dict[str, dict[str, Any]] = {}
    for doc in pending:
        key = str(doc["key"])
        rel, _, name = key.rpartition("/")
        data = saved.setdefault(rel, gen.load_rows(rel))
        data["rows"].pop(name, None)
        data.setdefault("bad", {}).pop(name, None)
        writer.delete_documents_by_term("key", key)
        if isinstance(doc.get("row"), list):  # a record marked archived: a row, no document
            data["rows"][name] = doc["row"]
        elif isinstance(doc.get("bad"), list):
            data["bad"][name] = doc["bad"]
        elif not doc.get("deleted"):
            fields = ("key", "folder", *documents.TEXT_FIELDS, "brief")
            given = {k: doc[k] for k in fields if doc.get(k) not in (None, "")}
            writer.add_document(tv.Document.from_dict({**given, "meta": str(doc["meta"]).encode()}, typed))
            meta = json.loads(doc["meta"])
            data["rows"][name] = [meta["size"], meta["mtime_ns"], meta["id"]]
    folders = {f.rel: f for f in store.memory_folders()}
    for rel in stale:
        old = saved.get(rel) or gen.load_rows(rel)
        folder = folders.get(rel)
        before = _mtime(folder.path) if folder is not None else None
        listed = time.time_ns()
        if folder is None:  # the folder went away: every document of it goes too
            for name in old["rows"]:
                writer.delete_documents_by_term("key", f"{rel}/{name}")
            saved[rel] = {"rows": {}, "bad": {}}
            continue
        rows, bad = _read_folder(store, folder, old["rows"], old.get("bad") or {}, problems,
                                 lambda doc: writer.add_document(tv.Document.from_dict(doc, typed)),
                                 lambda key: writer.delete_documents_by_term("key", key))
        saved[rel] = {"rows": rows, "bad": bad}
        gen.folders[rel] = {"stamp": _stamp(folder.path, before, listed), "bad": bool(bad)}
    writer.commit()
    writer.wait_merging_threads()
    for rel, data in saved.items():  # after the commit: replaying a sync is harmless
        gen.save_rows(rel, data)
        if rel in gen.folders:
            gen.folders[rel]["bad"] = bool(data.get("bad"))
        if not data["rows"] and not data["bad"] and rel not in folders:
            gen.folders.pop(rel, None)
    gen.save_folders()  # (with the pending stamps) before pending.jsonl is emptied
    if gen.has_pending:
        _write(gen.path / "pending.jsonl", b"")
        gen.pending, gen.has_pending = [], False
    for rel in rels:
        if rel not in stale:
            problems.extend(_bad_at(gen, rel))
    return True


def _mtime(path: Path) -> int | None:
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return None


def _vouched(store: Any, gen: Generation, rel: str) -> bool:
    return _vouched_at(store.root, gen, rel)


def _vouched_at(root: Path, gen: Generation, rel: str) -> bool:
    stamp = (gen.folders.get(rel) or {}).get("stamp")
    return stamp is not None and stamp == _mtime(root / rel)


def _bad_problems(store: Any, gen: Generation, rel: str) -> Problems:
    return _bad_at(gen, rel)


def _bad_at(gen: Generation, rel: str) -> Problems:
    """Bad files of a folder that is as indexed: reported again on every search, unread."""
    if not (gen.folders.get(rel) or {}).get("bad"):
        return []
    from memcli.store.store import Problem

    bad = gen.load_rows(rel).get("bad") or {}
    return [Problem(f"{rel}/{name}", str(info[2]), "bad_file") for name, info in sorted(bad.items())]


def _read_pending(gen: Generation) -> list[dict[str, Any]]:
    """The documents written since the last commit (read with the generation)."""
    return gen.pending


def _load_pending(gen: Generation) -> None:
    """Read `pending.jsonl`: its documents into `gen.pending`, its stamp lines into
    `gen.folders` (in order: each was written under the index lock after the documents
    it vouches for). A line that does not parse is skipped, and so is every stamp after it:
    a write torn by a crash runs into the next write's first line, whose documents would
    then be lost under a stamp that vouches for them (without it, the folder is listed)."""
    try:
        raw = (gen.path / "pending.jsonl").read_bytes()
    except OSError:
        return
    gen.has_pending = bool(raw)
    torn = False
    for line in raw.split(b"\n"):
        if not line.strip():
            continue
        try:
            doc = json.loads(line)
        except ValueError:
            torn = True
            continue
        if not isinstance(doc, dict):
            torn = True
        elif isinstance(doc.get("key"), str):
            gen.pending.append(doc)
        elif isinstance(doc.get("folder"), str) and not torn:
            stamp = doc.get("stamp")
            gen.folders[doc["folder"]] = {"stamp": stamp if isinstance(stamp, int) else None,
                                          "bad": bool(doc.get("bad"))}


# ---------------------------------------------------------------- writers keep it current


@contextlib.contextmanager
def keeping_current(store: Any) -> Iterator[Callable[[Any, str], None]]:
    """For a writer that knows the files it writes (add, folding uses, capture):

        with keeping_current(store) as note:
            note(folder, "mem_x.json")   # before writing the file
            ... write it ...

    Afterwards each noted file's document is queued for the index (the next search commits
    it), and its folder stays vouched for when it was before the write. Never raises: an
    index that cannot be kept current is brought in line by the next search."""
    noted: dict[str, tuple[Any, int | None, list[str]]] = {}

    def note(folder: Any, name: str) -> None:
        if folder.rel not in noted:
            noted[folder.rel] = (folder, _mtime(folder.path), [])
        noted[folder.rel][2].append(name)

    yield note
    if noted:
        with contextlib.suppress(Exception):
            _queue(store, noted)


def _queue(store: Any, noted: dict[str, tuple[Any, int | None, list[str]]]) -> None:
    """Append the noted files' documents (and rows) to pending.jsonl, each folder's new
    stamp after them; no other file is written (a folder's rows would cost what the folder
    holds, `folders.json` a replace)."""
    if not (base_dir(store.root) / "current").exists():
        return  # no index yet: the first search builds it
    with writing(store.root, wait=0.5) as locked:
        if not locked:
            return
        gen = current(store.root)
        if gen is None:
            return
        lines: list[bytes] = []
        for rel, (folder, before, names) in noted.items():
            state = gen.folders.get(rel) or {}
            if before is None or state.get("stamp") != before:
                continue  # changed by someone else since: the next search lists the folder
            bad = bool(state.get("bad"))
            for name in dict.fromkeys(names):
                line, is_bad = _pending_line(store, folder, name)
                lines.append(line)
                bad = bad or is_bad
            lines.append(_orjson().dumps({"folder": rel, "stamp": _mtime(folder.path), "bad": bad}) + b"\n")
        if lines:  # one write: a crash leaves at most the last line torn (then the stamp)
            with open(gen.path / "pending.jsonl", "ab") as handle:
                handle.write(b"".join(lines))


def _pending_line(store: Any, folder: Any, name: str) -> tuple[bytes, bool]:
    """The pending line of one file (its document; or a row, a bad file, a deletion) and
    whether the file is bad input."""
    key = f"{folder.rel}/{name}"
    found: list[Any] = []
    mem = store.try_read(folder.path / name, folder, found)
    line: dict[str, Any] = {"key": key, "deleted": True}
    if mem is None:
        errors = [p.reason for p in found if p.severity == "error"]
        with contextlib.suppress(OSError):
            st = os.lstat(folder.path / name)
            if errors:
                line = {"key": key, "bad": [st.st_size, st.st_mtime_ns, "; ".join(errors)]}
    else:
        from memcli.recall.documents import document

        doc = document(folder.rel, mem)
        line = {**doc, "meta": doc["meta"].decode()} if doc is not None else \
            {"key": key, "row": [mem.size, mem.mtime_ns, mem.id]}
    return _orjson().dumps(line) + b"\n", "bad" in line


def written(store: Any, names: dict[str, list[str]]) -> None:
    """After files were written without `keeping_current`: their folders are listed again
    now when an index exists (the fold and a run call this). Never raises."""
    after_run(store, list(names))


def after_run(store: Any, rels: list[str]) -> None:
    """A run, an undo or a restore changed these folders: bring them in line now, when an
    index exists (none is built here: the first search does it). Never raises."""
    with contextlib.suppress(Exception):
        if current(store.root) is None:
            return
        with writing(store.root, wait=5.0) as locked:
            gen = current(store.root)
            if locked and gen is not None:
                live = {f.rel for f in store.memory_folders()}
                sync(store, gen, sorted({r for r in rels if r in live or r in gen.folders}), [], force=True)


# ---------------------------------------------------------------- the reader's entry point


def open_current(root: Path, rels: list[str], problems: Problems,
                 pending_ok: bool = False) -> tuple[Generation, Any] | None:
    """The live generation and its tantivy index when it is in line with the folders `rels`
    and has nothing pending (unless `pending_ok`: the caller reads `pending.jsonl` itself):
    all a reader needs, with no lock, no write and no `Store` (the hooks' path). None
    otherwise: `ready` then brings it in line."""
    gen = current(root)
    if gen is None or (not pending_ok and _has_pending(gen)):
        return None
    if not all(_vouched_at(root, gen, r) for r in rels):
        return None
    try:
        index = open_index(gen)
    except IndexUnusable:
        return None
    for rel in rels:
        problems.extend(_bad_at(gen, rel))
    return gen, index


def ready(store: Any, rels: list[str], problems: Problems,
          wait: float = LOCK_WAIT_S) -> tuple[Generation, Any]:
    """The live generation and its tantivy index, in line with the folders `rels`: built
    when missing or unusable, synced when stale. Raises IndexUnusable only when even a fresh
    build cannot be opened."""
    opened = open_current(store.root, rels, problems)
    if opened is not None:
        return opened
    with writing(store.root, wait) as locked:
        gen = current(store.root)
        if gen is None and not locked:
            raise IndexUnusable("the search index is being built by another process")
        if gen is None:
            gen = rebuild(store, problems)
            return gen, open_index(gen)
        if locked:
            try:
                sync(store, gen, rels, problems)
            except IndexUnusable:
                gen = rebuild(store, problems)
            except (ValueError, OSError, RuntimeError):  # tantivy's errors for a damaged index
                gen = rebuild(store, problems)
        else:
            for rel in rels:
                problems.extend(_bad_problems(store, gen, rel))
        try:
            return gen, open_index(gen)
        except IndexUnusable:
            if not locked:
                raise
            gen = rebuild(store, [])
            return gen, open_index(gen)


def _has_pending(gen: Generation) -> bool:
    return gen.has_pending
