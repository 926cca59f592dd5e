"""The audit log `ops/consolidation-log.json` (SPEC section 7): one object, one entry a run.

Entries hold ids, rule names, reasons and counts, never memory text.

So that a run's cost does not grow with the log's age, the live file keeps the newest
`LIVE_MAX` entries at most: past that, the oldest are moved to `ops/log/<YYYY-MM>.json`
(same shape, by the month of each entry's timestamp) down to `LIVE_KEEP`. Appending reads and
rewrites only the live file and, every `LIVE_MAX - LIVE_KEEP` runs, the month files it moves
entries into. Readers (`memcli log`, `stats`, `undo`) see the month files then the live one.

A move writes the month files first and the live file second: a crash between the two leaves
entries in both, which readers drop (by run id, keeping the first) and the next move removes
from the live file, so that a run ends up in one file only. Month names come from the entries'
own timestamps, so two clones of a shared store rotate the same entries into the same files.
"""

from __future__ import annotations

import contextlib
import copy
import datetime as dt
import errno
import hashlib
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from memcli.errors import MemcliError, OpsFileError
from memcli.store import fsops, opsfiles
from memcli.store.cache import cache_dir

LIVE_MAX = 400  # entries in the live file before the oldest move out
LIVE_KEEP = 300  # entries left in the live file by a move
_MONTH = re.compile(r"^(\d{4})-(\d{2})")
MONTH_FILE = re.compile(r"^\d{4}-\d{2}\.json$")
UNDATED = "undated"  # month file for entries without a usable timestamp
CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"  # a ULID's alphabet (`model.new_ulid`)


def log_path(root: Path) -> Path:
    return root / "ops" / "consolidation-log.json"


def rotated_dir(root: Path) -> Path:
    return root / "ops" / "log"


def month_of(entry: dict[str, Any]) -> str:
    """`YYYY-MM` of an entry's timestamp, or `undated`: where a move puts it."""
    match = _MONTH.match(str(entry.get("timestamp") or ""))
    return f"{match.group(1)}-{match.group(2)}" if match else UNDATED


def month_files(root: Path) -> list[Path]:
    """The rotated files, oldest month first (`undated` first of all)."""
    folder = rotated_dir(root)
    if folder.is_symlink():
        return []  # never read through a link out of the store
    try:
        names = [p.name for p in folder.iterdir()]
    except (FileNotFoundError, NotADirectoryError):
        return []
    found = sorted(n for n in names if MONTH_FILE.match(n))
    if f"{UNDATED}.json" in names:
        found.insert(0, f"{UNDATED}.json")
    return [folder / n for n in found]


def _entries_of(path: Path) -> list[dict[str, Any]]:
    entries = opsfiles.read_json(path, {"entries": []}).get("entries", [])
    return [e for e in entries if isinstance(e, dict)]


def _shared_entries_of(path: Path) -> list[dict[str, Any]]:
    """`_entries_of`, possibly the entries an earlier read of this process parsed (see
    `opsfiles.read_json_shared`): for readers that change nothing."""
    entries = opsfiles.read_json_shared(path, {"entries": []}).get("entries", [])
    return [e for e in entries if isinstance(e, dict)]


def read_live(root: Path) -> list[dict[str, Any]]:
    """The live file's entries only (the newest runs)."""
    return _entries_of(log_path(root))


def local_log_path(root: Path) -> Path:
    """Runs that changed nothing: logged on this machine only (`ops/local/`, git-ignored), so
    that a quiet run changes no file a shared store tracks (SPEC 13)."""
    return opsfiles.local_dir(root) / "consolidation-log.json"


def read_entries(root: Path) -> list[dict[str, Any]]:
    """Every run: the shared log's (`shared_entries`) and this machine's quiet ones, each
    quiet one before the first shared run logged after it."""
    merged = shared_entries(root)
    if not local_log_path(root).exists():
        return merged
    known = {e.get("run_id") for e in merged}
    for entry in _entries_of(local_log_path(root)):
        if entry.get("run_id") in known:
            continue
        stamp = str(entry.get("timestamp", ""))
        at = next((i for i, e in enumerate(merged) if str(e.get("timestamp", "")) > stamp), len(merged))
        merged.insert(at, entry)
    return merged


def shared_entries(root: Path) -> list[dict[str, Any]]:
    """Every run of the shared log, oldest first: the month files, then the live file; a run
    found in two files (a move cut short) is read once."""
    seen: set[Any] = set()
    out: list[dict[str, Any]] = []
    for path in [*month_files(root), log_path(root)]:
        for entry in _entries_of(path):
            key = entry.get("run_id")
            if key is not None and key in seen:
                continue
            seen.add(key)
            out.append(entry)
    return out


def append(root: Path, entry: dict[str, Any], quiet: bool = False) -> None:
    """Append one run's entry; a run already logged (a recovered run) is not logged twice.
    Reads the live file only, and moves its oldest entries out when it is full. A `quiet`
    run's entry goes to this machine's log, which keeps its newest `LIVE_KEEP` entries."""
    if quiet:
        _append_quiet(root, entry)
        return
    path = log_path(root)
    if _append_bytes(root, entry):
        return
    # the parse `preflight` made moments ago, when the file is unchanged since: copied where changed
    data = dict(opsfiles.read_json_shared(path, {"entries": []}))
    entries = data["entries"] = list(data.get("entries", []))
    if any(e.get("run_id") == entry["run_id"] for e in entries if isinstance(e, dict)):
        return
    if _in_month_files(root, entry):
        return
    entries.append(entry)
    if len(entries) > LIVE_MAX:
        try:
            data["entries"] = entries = _move_out(root, entries)
        except (MemcliError, OSError):
            pass  # a month file or folder memcli cannot use: keep every entry live (doctor names it)
    raw = orjson.dumps(data, option=orjson.OPT_INDENT_2) + b"\n"  # (as opsfiles.write_json)
    fsops.ensure_parent(path)
    fsops.write_replace(path, raw)
    _save_mark(root, raw, len(entries), list(data)[-1] == "entries" and bool(entries))


# ---------------------------------------------------------------- appending to the bytes
# A run's entry can list thousands of actions (a real run of a large store: megabytes), and
# the live file keeps hundreds of runs: parsing it to append one entry and writing it back
# cost every later run more than its own work. So the bytes this machine last wrote there are
# marked, by their sha256, in `.cache/log/live.json` (a cache: lost or stale, the file is
# parsed as before). While the file still hashes to its mark it is known to be exactly what
# `append` wrote - valid, of the log's shape, writable again, its `entries` last - and the
# next entry is put in front of its closing bytes: what writing the whole object again gives,
# byte for byte, with no parse.

_TAIL = b"\n  ]\n}\n"  # how `append` ends the live file when `entries` is its last key, not empty
_INDENT = b"\n    "  # an entry's lines inside `entries`, two levels deep


def _mark_path(root: Path) -> Path:
    return cache_dir(root, "log") / "live.json"


def _save_mark(root: Path, raw: bytes, count: int, appendable: bool, digest: str | None = None) -> None:
    """Mark `raw` as the live file's bytes (`digest`: their sha256, when known already)."""
    with contextlib.suppress(OSError):  # a cache: without it the next append parses
        cache_dir(root, "log", create=True)
        digest = digest or hashlib.sha256(raw).hexdigest()
        mark = {"sha256": digest, "entries": count, "appendable": appendable}
        fsops.write_replace(_mark_path(root), orjson.dumps(mark), durable=False)


# The live file's bytes this process found to hash to their mark, by the file's identity
# (device, inode, size, mtime, ctime of the very file read, as `indexmark` trusts an index):
# a pass looks at the file twice (its preflight, then its append), and a run's entries make it
# a megabyte or more, whose hash costs milliseconds. The sha256 of the bytes before `_TAIL` is
# kept too, so that the next mark's hash goes on from it instead of hashing the file again.
_hashed: dict[str, tuple[list[int], str, Any]] = {}


def _identity(st: Any) -> list[int]:
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def as_written(root: Path) -> tuple[bytes, dict[str, Any]] | None:
    """The live file's bytes and their mark, when they are exactly what `append` last wrote
    on this machine; else None (no mark, or the file changed since: read it as JSON)."""
    found = _as_written(root)
    return None if found is None else (found[0], found[1])


def _as_written(root: Path) -> tuple[bytes, dict[str, Any], Any] | None:
    """`as_written`, and a sha256 of the bytes before `_TAIL` (None when they do not end so)."""
    path = log_path(root)
    try:
        mark = orjson.loads(fsops.read_bytes(_mark_path(root), limit=4096))
        raw, st = fsops.read_bytes_stat(path, limit=opsfiles.MAX_OPS_BYTES)
    except (OSError, ValueError):
        return None
    if not isinstance(mark, dict) or type(mark.get("entries")) is not int:
        return None
    known = _hashed.get(str(path))
    if known is not None and known[0] == _identity(st) and known[1] == mark.get("sha256"):
        return raw, mark, known[2]  # (the same file as hashed, unchanged since: its ctime)
    body = raw.endswith(_TAIL)
    head = hashlib.sha256(memoryview(raw)[:-len(_TAIL)] if body else raw)
    whole = head.copy()
    if body:
        whole.update(_TAIL)
    if mark.get("sha256") != whole.hexdigest():
        return None
    _hashed[str(path)] = (_identity(st), whole.hexdigest(), head if body else None)
    return raw, mark, head if body else None


def _append_bytes(root: Path, entry: dict[str, Any]) -> bool:
    """`append` of a new run's entry to the bytes of a live file as this machine wrote it,
    with room for it; False (nothing done) for anything else, which `append` does in full:
    a file changed since, one full enough to move entries out, an entry whose run id it
    mentions (a recovered run may be logged already), one a month file may hold."""
    known = _as_written(root)
    if known is None:
        return False
    raw, mark, head = known
    if not mark.get("appendable") or mark["entries"] + 1 > LIVE_MAX or head is None or \
            f'"{entry["run_id"]}"'.encode() in raw or _in_month_files(root, entry):
        return False
    # JSON strings never hold a raw newline: indenting every line indents the entry's lines only
    body = orjson.dumps(entry, option=orjson.OPT_INDENT_2).replace(b"\n", _INDENT)
    added = b"".join([b",", _INDENT, body, _TAIL])
    _write_appended(log_path(root), raw, added)
    digest = head.copy()  # the hash of the new bytes: that of the bytes kept, then of those added
    digest.update(added)
    _save_mark(root, b"", mark["entries"] + 1, True, digest.hexdigest())  # (its digest: no bytes to hash)
    return True


def _write_appended(path: Path, raw: bytes, added: bytes) -> None:
    """Replace the live file, whose bytes are `raw`, with them less `_TAIL`, then `added`. The
    bytes kept are copied file to file (`fsops.Span`) from the very file `raw` was read from,
    while it is still that file: a live file of megabytes is not joined in memory once more.
    Otherwise they are joined, as they were read."""
    known = _hashed.get(str(path))
    try:
        fd = fsops.open_regular(path)
    except OSError:
        fd = -1
    try:
        if fd >= 0 and known is not None and _identity(os.fstat(fd)) == known[0] and fsops.SPANS:
            def pieces() -> Iterator[fsops.Piece]:
                yield fsops.Span(fd, 0, len(raw) - len(_TAIL))
                if _identity(os.fstat(fd)) != known[0]:  # written in place meanwhile (a hand)
                    raise fsops.SpanChangedError(errno.EIO, "the log changed while it was appended to")
                yield added

            with contextlib.suppress(fsops.SpanChangedError):  # (nothing written: joined below)
                fsops.write_replace(path, pieces())
                return
    finally:
        if fd >= 0:
            os.close(fd)
    fsops.write_replace(path, b"".join([raw[:-len(_TAIL)], added]))


def _append_quiet(root: Path, entry: dict[str, Any]) -> None:
    path = local_log_path(root)
    data = dict(opsfiles.read_json_shared(path, {"entries": []}))  # (copied where changed)
    entries = [e for e in data.get("entries", []) if isinstance(e, dict)]
    if any(e.get("run_id") == entry["run_id"] for e in entries):
        return
    data["entries"] = [*entries, entry][-LIVE_KEEP:]  # machine-local, not the audit trail: bounded
    opsfiles.write_json(path, data)


def _in_month_files(root: Path, entry: dict[str, Any]) -> bool:
    """Whether a recovered run was moved out already (only its own month file is read)."""
    path = rotated_dir(root) / f"{month_of(entry)}.json"
    try:
        return any(e.get("run_id") == entry["run_id"] for e in _entries_of(path))
    except OpsFileError:
        return False


def split_for_rotation(entries: list[Any], keep: int | None = None) -> tuple[list[Any], dict[str, list[Any]]]:
    """Pure: the entries the live file keeps (the newest `keep`, by default `LIVE_KEEP`) and,
    by month, those that move out. Entries that are not objects stay in the live file."""
    keep = LIVE_KEEP if keep is None else keep
    movable = [i for i, e in enumerate(entries) if isinstance(e, dict)]
    cut = set(movable[: max(0, len(movable) - keep)])
    moved: dict[str, list[Any]] = {}
    for i in sorted(cut):
        moved.setdefault(month_of(entries[i]), []).append(entries[i])
    return [e for i, e in enumerate(entries) if i not in cut], moved


def _move_out(root: Path, entries: list[Any]) -> list[Any]:
    kept, moved = split_for_rotation(entries)
    months = {m: opsfiles.read_json(rotated_dir(root) / f"{m}.json", {"entries": []}) for m in moved}
    for month, batch in sorted(moved.items()):  # every month file read before any is written
        path = rotated_dir(root) / f"{month}.json"
        data = months[month]
        have = {e.get("run_id") for e in data.setdefault("entries", []) if isinstance(e, dict)}
        data["entries"].extend(e for e in batch if e.get("run_id") not in have)
        opsfiles.write_json(path, data)
    return kept


def run_taken(root: Path, run_id: str) -> bool:
    """Whether the log already holds a run with this id (a new run's id must be unused).
    A run id names its moment (`model.new_ulid`: a ULID's time part), and a run is logged
    with that moment as its timestamp, so that a month file holds the run only when it is
    the month of its id (or `undated`): those two, the live file and this machine's quiet
    log are read, never every month of a long-lived store's log. An id whose moment cannot
    be read (not a ULID) is looked up everywhere."""
    month, folder = id_month(run_id), rotated_dir(root)
    rotated = (month_files(root) if month is None or folder.is_symlink()  # (then none: see month_files)
               else [folder / f"{UNDATED}.json", folder / f"{month}.json"])
    if any(_names_run(path, run_id) for path in rotated):
        return True
    return any(_mentions(path, run_id) and any(e.get("run_id") == run_id for e in _shared_entries_of(path))
               for path in (log_path(root), local_log_path(root)))


def _mentions(path: Path, run_id: str) -> bool:
    """False when the file's bytes cannot hold the run: neither the id as JSON writes it nor
    any escape that could spell it otherwise (the live file then needs no parse: megabytes)."""
    try:
        raw = fsops.read_bytes(path, limit=opsfiles.MAX_OPS_BYTES)
    except OSError:
        return True  # missing, or to be read as JSON (which names the problem)
    return f'"{run_id}"'.encode() in raw or b"\\u" in raw


def id_month(run_id: str) -> str | None:
    """`YYYY-MM` (UTC) of the moment a run id's ULID names, as `month_of` gives it for the
    run's entry; None when the id holds no ULID."""
    ulid = run_id[4:] if run_id.startswith("run_") else ""
    if len(ulid) != 26 or any(c not in CROCKFORD for c in ulid[:10]):
        return None
    millis = 0
    for c in ulid[:10]:
        millis = millis * 32 + CROCKFORD.index(c)
    try:
        moment = dt.datetime.fromtimestamp(millis / 1000, dt.timezone.utc)
    except (OverflowError, OSError, ValueError):
        return None
    return f"{moment.year:04d}-{moment.month:02d}"


def _names_run(path: Path, run_id: str) -> bool:
    """Whether the rotated log file `path` holds the run `run_id`. Its bytes are searched
    first: a file that does not mention the id (as JSON writes it, with no escape in the
    file that could spell it otherwise) is not parsed."""
    if not _mentions(path, run_id):
        return False
    try:
        return any(e.get("run_id") == run_id for e in _entries_of(path))
    except OpsFileError:
        return False  # a month file memcli cannot read never stops a run (doctor names it)


def find_run(root: Path, run_id: str) -> dict[str, Any] | None:
    """A run's entry: the live file first (recent runs), then the month files, newest first."""
    for path in [log_path(root), *reversed(month_files(root)), local_log_path(root)]:
        found = next((e for e in _shared_entries_of(path) if e.get("run_id") == run_id), None)
        if found is not None:
            return copy.deepcopy(found)  # (the parse may be shared: see `_shared_entries_of`)
    return None
