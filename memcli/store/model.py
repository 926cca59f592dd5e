"""Memory records, their validation, time and ids (SPEC 1.1).

A record is kept as the plain dict read from its file so that fields the tool does not
know survive every rewrite; `Memory` wraps it with where it came from.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

ID_RE = re.compile(r"^mem_[0-9A-Za-z_-]{1,64}$")
TYPES = ("episodic", "semantic", "procedural", "working")
PRIORITIES = ("critical", "high", "normal", "low")
SCOPES = ("agent", "team", "global")
TIME_FIELDS = ("created_at", "updated_at", "last_accessed")
ARCHIVE_FIELDS = ("archived_at", "archive_reason", "archived_from", "archive_run_id")
_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
# ---------------------------------------------------------------- time


def now() -> dt.datetime:
    """The current moment in UTC, whole seconds; `MEMCLI_NOW` replaces the clock everywhere."""
    fixed = os.environ.get("MEMCLI_NOW")
    if fixed:
        parsed, _ = parse_ts(fixed)
        return parsed
    return dt.datetime.now(dt.timezone.utc).replace(microsecond=0)


def parse_ts(value: str) -> tuple[dt.datetime, bool]:
    """Parse ISO 8601; returns (aware UTC datetime, had_zone). Raises ValueError if unreadable."""
    text = value.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    parsed = dt.datetime.fromisoformat(text)
    if parsed.tzinfo is None:
        return parsed.replace(tzinfo=dt.timezone.utc), False
    try:  # 0001-01-01T00:00:00+14:00 is before year 1 in UTC: no datetime holds it
        return parsed.astimezone(dt.timezone.utc), True
    except OverflowError:
        raise ValueError(f"{value!r} is out of range (years 1-9999 in UTC)") from None


def format_ts(moment: dt.datetime) -> str:
    """`YYYY-MM-DDTHH:MM:SSZ` in UTC (the year always four digits, also before 1000)."""
    utc = moment.astimezone(dt.timezone.utc)
    return f"{utc.year:04d}-{utc.month:02d}-{utc.day:02d}T{utc.hour:02d}:{utc.minute:02d}:{utc.second:02d}Z"


def ts_or_none(value: Any) -> dt.datetime | None:
    """Best-effort parse of a timestamp field already validated; None when absent."""
    if not isinstance(value, str):
        return None
    try:
        return parse_ts(value)[0]
    except ValueError:
        return None


# ---------------------------------------------------------------- ids


def new_ulid(moment: dt.datetime, seed: str | None = None) -> str:
    """A ULID for `moment`. With a seed the random part is derived from it, so that a dry
    run and the real run at the same moment name new memories identically."""
    millis = int(moment.timestamp() * 1000)
    if seed:
        rand = hashlib.sha256(seed.encode()).digest()[:10]
    else:
        import secrets  # here: `show`, `list` and the hooks never make an id (random, base64, hmac: 3 ms)

        rand = secrets.token_bytes(10)
    number = (millis << 80) | int.from_bytes(rand, "big")
    return "".join(_CROCKFORD[(number >> (5 * i)) & 31] for i in reversed(range(26)))


def new_memory_id(moment: dt.datetime, seed: str | None = None) -> str:
    return "mem_" + new_ulid(moment, seed)


def new_run_id(moment: dt.datetime) -> str:
    return "run_" + new_ulid(moment)


def is_valid_id(value: Any) -> bool:
    return isinstance(value, str) and bool(ID_RE.match(value))


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# ---------------------------------------------------------------- the record


class Memory:
    """One memory: its record plus where and how it is stored.

    Read from disk, `data` is the whole record. A memory planned from its index entry alone
    (a file unchanged since the entry was written) starts with only `facts`, the entry's
    cached fields, which answer every rule's question about it; the file is read the first
    time `data` or `content` is used (to compare its text, or to rewrite it). If it can no
    longer be read then, `data` is the facts and `content_hash` becomes `VANISHED`, which no
    file on disk ever hashes to: any action planned on it is skipped when applied.
    """

    __slots__ = ("_data", "_path", "_dir", "name", "fmt", "content_hash", "size", "mtime_ns", "warnings",
                 "facts", "_load", "_confirm", "id", "type")

    def __init__(self, data: dict[str, Any] | None, path: Path | None, fmt: str, content_hash: str = "",
                 size: int = 0, mtime_ns: int = 0, warnings: list[str] | None = None, *,
                 facts: dict[str, Any] | None = None, folder: Path | None = None, name: str = "",
                 load: Callable[[Memory], dict[str, Any] | None] | None = None) -> None:
        self._data = data
        self._path = path
        self._dir = folder
        self.name = path.name if path is not None else name
        self.fmt = fmt
        self.content_hash = content_hash
        self.size = size
        self.mtime_ns = mtime_ns
        self.warnings = warnings if warnings is not None else []
        self.facts: dict[str, Any] = facts if facts is not None else (data if data is not None else {})
        self._load = load
        self._confirm: Callable[[Memory, dict[str, Any]], dict[str, Any] | None] | None = None
        self.id = str(self.facts["id"])
        self.type = str(self.facts["type"])

    @classmethod
    def planned(cls, entries: list[dict[str, Any]], folder: Path,
                load: Callable[[Memory], dict[str, Any] | None],
                confirm: Callable[[Memory, dict[str, Any]], dict[str, Any] | None] | None = None,
                ) -> list[Memory]:
        """Memories known from their index entries alone (each entry its memory's `facts`, its
        file `folder`/`file`); `load(memory)` reads the file's record when first needed.
        (Made for every unchanged memory of a full run: kept lean, in one loop for a folder's
        memories, not a call each.)
        With `confirm`, `load` need only check what `content` serves (the text a rule compares;
        every other field a rule reads is the entry's), and `confirm(memory, record)` checks
        the whole record, or reads it again, the first time `data` is asked for (to rewrite or
        archive it): None then makes the memory one whose file went bad, as `load`'s None."""
        out: list[Memory] = []
        append, new = out.append, cls.__new__
        for facts in entries:
            mem = new(cls)
            name = str(facts["file"])
            mem._data = mem._path = None
            mem._dir = folder
            mem.name = name
            mem.facts = facts
            mem._load = load
            mem._confirm = confirm
            mem.fmt = "md" if name.endswith(".md") else "json"
            mem.content_hash = facts["content_hash"]
            mem.size = facts["size"]
            mem.mtime_ns = facts["mtime_ns"]
            mem.warnings = []
            mem.id = str(facts["id"])
            mem.type = str(facts["type"])
            append(mem)
        return out

    def __repr__(self) -> str:
        return f"Memory({self.name!r}, loaded={self._data is not None})"

    @property
    def path(self) -> Path:
        if self._path is None:
            assert self._dir is not None
            self._path = self._dir / self.name
        return self._path

    @property
    def data(self) -> dict[str, Any]:
        if self._data is None:
            self._fetch()
        if self._confirm is not None:  # read for its content alone so far: the whole record now
            confirm, self._confirm = self._confirm, None
            self._settle(confirm(self, self._data))  # type: ignore[arg-type]
        return self._data  # type: ignore[return-value]

    def forget(self) -> None:
        """Let go of the record read (a worker process done with it), when it can be read
        again if asked for: a memory planned from its index entry whose file was fine."""
        if self._load is not None and self.content_hash != VANISHED:
            self._data = None

    def _fetch(self) -> None:
        self._settle(self._load(self) if self._load is not None else None)

    def _settle(self, read: dict[str, Any] | None) -> None:
        if read is None:  # gone, or bad input: planned as a file no longer there (see VANISHED)
            self.content_hash = VANISHED
            self._confirm = None
        self._data = read if read is not None else dict(self.facts)

    @property
    def subtype(self) -> str:
        return str(self.facts.get("subtype") or "")

    @property
    def tags(self) -> list[str]:
        return list(self.facts.get("tags") or [])

    @property
    def created_by(self) -> str:
        return str(self.facts.get("created_by") or "")

    @property
    def content(self) -> dict[str, Any]:
        if self._data is None:
            self._fetch()  # (content only: `data` checks the rest of the record when asked for)
        content = self._data.get("content")  # type: ignore[union-attr]
        return content if isinstance(content, dict) else {}

    def ts(self, name: str) -> dt.datetime | None:
        return ts_or_none(self.facts.get(name))

    def cached_text_len(self) -> int | None:
        """The normalised text's length from the index entry (for a memory planned from it)."""
        value = self.facts.get("text_len") if self.facts is not self._data else None
        return value if type(value) is int else None

    def cached_sort_len(self) -> int | None:
        """The length of the normalised text's tokens sorted and joined by single spaces (the
        string ``token_sort_ratio`` compares) from the index entry, for a memory planned from
        it: trusted as the entry's content hash is (the file's size and mtime unchanged since
        the entry was written), and only when plausible (an int from 0 to the cached text
        length: joining the tokens by single spaces never lengthens the text). None otherwise:
        the text is then read."""
        if self.facts is self._data:
            return None
        value, text = self.facts.get("sort_len"), self.facts.get("text_len")
        return value if type(value) is int and type(text) is int and 0 <= value <= text else None

    def details_len(self) -> int:
        """len(content.details), -1 when it is not a string (cached in the index entry)."""
        if self._data is None and "details_len" in self.facts:
            return int(self.facts["details_len"])
        details = self.content.get("details")
        return len(details) if isinstance(details, str) else -1


VANISHED = "vanished"  # the content hash of a memory whose file went away while planning


def validate(data: Any, *, file_id: str | None = None) -> tuple[list[str], list[str]]:
    """Check a record against the contract. Returns (problems, warnings); problems make the
    file bad input, warnings (a timestamp without a zone) are reported and the file is used."""
    if not isinstance(data, dict):
        return ["the record is not an object"], []
    problems: list[str] = []
    warnings: list[str] = []
    _check_id(data, file_id, problems)
    _check_enums(data, problems)
    _check_types(data, problems)
    _check_times(data, problems, warnings)
    return problems, warnings


_NONE: list[str] = []  # a field left out (`is` tells it from any value read from a file)
_USUAL_TYPES = frozenset(TYPES)
_USUAL_PRIORITIES = frozenset(PRIORITIES)
_USUAL_SCOPES = frozenset(SCOPES)
_STR_OR_NONE = (str, type(None))


def plainly_valid(data: Any, file_id: str) -> bool:
    """True when `validate(data, file_id=file_id)` finds no problem and no warning, checked
    the quick way for the usual record (every memory of a full pass goes through here);
    False when unsure: `validate` then says what is wrong, if anything. (Tests in one
    expression where it can: a cold pass calls this 20,000 times a second of its work.)"""
    if type(data) is not dict:
        return False
    get = data.get
    content, created, kind = get("content"), get("created_at"), get("type")
    priority, scope = get("priority", "normal"), get("scope")
    if (get("id") != file_id or type(content) is not dict or type(kind) is not str or kind not in _USUAL_TYPES
            or type(created) is not str or not _STAMP(created) or not ID_RE.match(file_id)
            or type(priority) is not str or priority not in _USUAL_PRIORITIES
            or (scope is not None and (type(scope) is not str or scope not in _USUAL_SCOPES))
            or type(get("subtype", "")) is not str or type(get("scope_id", "")) is not str
            or type(get("created_by", "")) is not str or type(get("consent", False)) is not bool
            or type(get("promoted_to")) not in _STR_OR_NONE
            or type(get("promoted_from")) not in _STR_OR_NONE):
        return False  # (strings only into `in` on the frozensets: a list is unhashable)
    for name in ("tags", "supersedes", "superseded_by"):
        value = get(name, _NONE)
        if value is _NONE:
            continue
        if type(value) is not list:
            return False
        for item in value:
            if type(item) is not str:
                return False
    count, updated, used = get("access_count", 0), get("updated_at"), get("last_accessed")
    if type(count) is not int or count < 0:
        return False
    # updated_at is often created_at itself: one match for both
    if updated is not None and updated != created and (type(updated) is not str or not _STAMP(updated)):
        return False
    if used is not None and (type(used) is not str or not _STAMP(used)):
        return False
    details, timeline = content.get("details", ""), content.get("timeline", _NONE)
    return type(details) is str and (timeline is _NONE or type(timeline) is list)


def content_usable(data: Any, file_id: str) -> bool:
    """Whether a record read for its text alone may serve it: an object with this id whose
    content is an object with string details and a list timeline where present, as
    `plainly_valid` requires of them. (The other fields of a memory planned from its index
    entry are the entry's; the whole record is checked before it is rewritten or archived.)"""
    if type(data) is not dict or data.get("id") != file_id:
        return False
    content = data.get("content")
    return (type(content) is dict and type(content.get("details", "")) is str
            and type(content.get("timeline", _NONE)) is list)


def _check_id(data: dict[str, Any], file_id: str | None, problems: list[str]) -> None:
    mem_id = data.get("id")
    if not is_valid_id(mem_id):
        problems.append(f"bad id {mem_id!r} (expected mem_ followed by 1-64 of [0-9A-Za-z_-])")
    elif file_id is not None and mem_id != file_id:
        problems.append(f"id {mem_id!r} does not match the file name {file_id!r}")


def _check_enums(data: dict[str, Any], problems: list[str]) -> None:
    if data.get("type") not in TYPES:
        problems.append(f"unknown type {data.get('type')!r} (expected one of {', '.join(TYPES)})")
    priority = data.get("priority", "normal")
    if priority not in PRIORITIES:
        problems.append(f"unknown priority {priority!r} (expected one of {', '.join(PRIORITIES)})")
    scope = data.get("scope")
    if scope is not None and scope not in SCOPES:
        problems.append(f"unknown scope {scope!r}")


_FIELD_TYPES: dict[str, tuple[type, ...]] = {
    "subtype": (str,),
    "scope_id": (str,),
    "created_by": (str,),
    "consent": (bool,),
    "content": (dict,),
    "promoted_to": (str, type(None)),
    "promoted_from": (str, type(None)),
}


_STR_ONLY = {str}


def _check_types(data: dict[str, Any], problems: list[str]) -> None:
    if "content" not in data:
        problems.append("missing field 'content'")
    for name, kinds in _FIELD_TYPES.items():
        if name in data and not isinstance(data[name], kinds):
            problems.append(f"field '{name}' must be {_kind_names(kinds)}, got {_json_kind(data[name])}")
    for name in ("tags", "supersedes", "superseded_by"):
        value = data.get(name, [])
        if not isinstance(value, list) or (value and not set(map(type, value)) <= _STR_ONLY):
            problems.append(f"field '{name}' must be a list of strings")
    count = data.get("access_count", 0)
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        problems.append(f"field 'access_count' must be a non-negative integer, got {count!r}")
    content = data.get("content")
    if isinstance(content, dict):
        if "details" in content and not isinstance(content["details"], str):
            problems.append("field 'content.details' must be a string")
        if "timeline" in content and not isinstance(content["timeline"], list):
            problems.append("field 'content.timeline' must be a list")


# Matches only real dates and times (years 0001-9999): days 01-28 exist in every month, 29 and
# 30 in all but February, 31 in seven; 29 February (and any other form) goes through the full
# parse, which knows leap years. (A cold pass checks every stamp of every record this way:
# with days 01-28 only, one record in seven took the full parse.)
_CANONICAL_TS = re.compile(
    r"(?!0000)\d{4}-(?:(?:0[1-9]|1[0-2])-(?:0[1-9]|1\d|2[0-8])|(?:0[13-9]|1[0-2])-(?:29|30)"
    r"|(?:0[13578]|1[02])-31)T(?:[01]\d|2[0-3]):[0-5]\d:[0-5]\dZ\Z")
_STAMP = _CANONICAL_TS.match


def _check_times(data: dict[str, Any], problems: list[str], warnings: list[str]) -> None:
    if "created_at" not in data:
        problems.append("missing field 'created_at'")
    for name in TIME_FIELDS:
        value = data.get(name)
        if value is None and name != "created_at":
            continue
        if not isinstance(value, str):
            if name in data:
                problems.append(f"field '{name}' must be an ISO 8601 timestamp string")
            continue
        if _CANONICAL_TS.match(value):
            continue  # the usual YYYY-MM-DDTHH:MM:SSZ: no need to build a datetime
        try:
            _, had_zone = parse_ts(value)
        except ValueError as exc:
            problems.append(f"field '{name}' is out of range (years 1-9999 in UTC): {value!r}"
                            if "out of range" in str(exc) else
                            f"field '{name}' is not an ISO 8601 timestamp: {value!r}")
            continue
        if not had_zone:
            warnings.append(f"'{name}' has no time zone; read as UTC")


def _kind_names(kinds: tuple[type, ...]) -> str:
    names = {str: "a string", bool: "true or false", dict: "an object", type(None): "null"}
    return " or ".join(names.get(k, k.__name__) for k in kinds)


def _json_kind(value: Any) -> str:
    return {bool: "a boolean", int: "a number", float: "a number", str: "a string",
            list: "a list", dict: "an object", type(None): "null"}.get(type(value), type(value).__name__)
