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

import copy
import datetime as dt
import re
from pathlib import Path
from typing import Any

from memcli.errors import MemcliError, OpsFileError
from memcli.store import fsops, opsfiles

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
    opsfiles.write_json(path, data)


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
    return any(any(e.get("run_id") == run_id for e in _shared_entries_of(path))
               for path in (log_path(root), local_log_path(root)))


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
    try:
        raw = fsops.read_bytes(path, limit=opsfiles.MAX_OPS_BYTES)
    except FileNotFoundError:
        return False
    except OSError:
        raw = None  # read_json names the problem
    if raw is not None and f'"{run_id}"'.encode() not in raw and b"\\u" not in raw:
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
