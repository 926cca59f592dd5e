"""Reading a session transcript as a stream (SPEC 12): one JSON object a line, in bounded
memory, never written to.

The file is opened read-only (non-blocking, so that a FIFO named as a transcript cannot
hang us), must be a regular file, and is read in 1 MiB chunks up to the size it had when
the read began (a session still writing to it cannot keep us reading). A line longer than
`MAX_LINE` is skipped without being held in memory; a truncated last line, a line that is
not JSON (or not UTF-8) and a record of an unknown type are skipped and counted, and the
read goes on. Each record goes to the reader of its shape:

- Claude Code's transcript (`transcript_claude`): records with a `type` such as `user`,
  `assistant`, `system`, `attachment`, `summary`, ...;
- the Codex CLI's session rollout (`transcript_codex`): `{"timestamp", "type", "payload"}`
  with types `session_meta`, `response_item`, `event_msg`, `turn_context`, `compacted`;
- a minimal generic shape (`transcript_claude.generic`): `{"role": "user"|"assistant"|"tool",
  "content": ...}` lines, for other harnesses (README, "Capture").

Claude Code keeps a sub-agent's own transcript beside the session's, in
`<session>/subagents/*.jsonl`; those are read too, as delegated work.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import orjson

from memcli.capture import claude_code as transcript_claude
from memcli.capture import codex as transcript_codex
from memcli.capture.session import Learn, Session, SessionBuilder
from memcli.errors import MemcliError

MAX_LINE = 8 * 1024 * 1024  # a record longer than this is skipped, never held whole
CHUNK = 1024 * 1024
MAX_SUBAGENT_FILES = 50


class TranscriptError(MemcliError):
    """A transcript that cannot be read at all (missing, not a file, no permission)."""


def read_session(path: Path, end_reason: str | None = None, learn: Learn | None = None) -> Session:
    """The digest of the transcript at `path` (and its sub-agents' transcripts); `learn` is
    shown each line that may hold a secret (the masker, so that it knows every secret)."""
    builder = SessionBuilder(learn=learn)
    reader = _Reader(builder)
    for line in stream_lines(path):
        reader.feed(line, sidechain=False)
    for side in subagent_files(path):
        try:
            for line in stream_lines(side):
                reader.feed(line, sidechain=True)
        except TranscriptError:
            builder.skip("unreadable sub-agent transcript")
    builder.session.kind = reader.kind or "jsonl"
    return builder.finish(end_reason)


def subagent_files(path: Path) -> list[Path]:
    """Claude Code's sub-agent transcripts of this session, if any (sorted, capped)."""
    folder = path.parent / path.stem / "subagents"
    try:
        if not folder.is_dir() or folder.is_symlink():
            return []
        found = sorted(p for p in folder.iterdir() if p.suffix == ".jsonl" and p.is_file()
                       and not p.is_symlink())
    except OSError:
        return []
    return found[:MAX_SUBAGENT_FILES]


# ---------------------------------------------------------------- the stream


def open_transcript(path: Path) -> tuple[int, int]:
    """A read-only descriptor on the transcript and its size; TranscriptError when it is
    missing, not a regular file, or not readable."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise TranscriptError(f"{path}: no such transcript") from None
    except IsADirectoryError:
        raise TranscriptError(f"{path}: is a folder, not a transcript file") from None
    except OSError as exc:
        raise TranscriptError(f"{path}: cannot read the transcript ({exc.strerror or exc})") from None
    try:
        st = os.fstat(fd)
    except OSError as exc:
        os.close(fd)
        raise TranscriptError(f"{path}: cannot read the transcript ({exc.strerror or exc})") from None
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        kind = "a folder" if stat.S_ISDIR(st.st_mode) else "not a regular file"
        raise TranscriptError(f"{path}: {kind}, not a transcript file")
    return fd, st.st_size


def stream_lines(path: Path) -> Iterator[bytes | None]:
    """Each line of the file (without its newline), or None for a line over `MAX_LINE`."""
    fd, size = open_transcript(path)
    try:
        yield from _lines(fd, size)
    except OSError as exc:  # a read error half-way (a disk error, a file truncated under us)
        raise TranscriptError(f"{path}: read failed ({exc.strerror or exc})") from None
    finally:
        os.close(fd)


def _lines(fd: int, size: int) -> Iterator[bytes | None]:
    parts: list[bytes] = []
    held = 0
    skipping = False
    remaining = size
    while remaining > 0:
        chunk = os.read(fd, min(CHUNK, remaining))
        if not chunk:
            break
        remaining -= len(chunk)
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            if end < 0:
                break
            piece = chunk[start:end]
            start = end + 1
            if skipping or held + len(piece) > MAX_LINE:
                yield None
            elif parts:
                parts.append(piece)
                yield b"".join(parts)
            else:
                yield piece
            parts, held, skipping = [], 0, False
        rest = chunk[start:]
        if skipping or not rest:
            continue
        if held + len(rest) > MAX_LINE:
            parts, held, skipping = [], 0, True
        else:
            parts.append(rest)
            held += len(rest)
    if skipping:
        yield None
    elif parts:
        yield b"".join(parts)  # a last line without a newline (maybe cut off: JSON will tell)


# ---------------------------------------------------------------- records


class _Reader:
    """Parses each line and hands the record to the reader of its shape."""

    def __init__(self, builder: SessionBuilder) -> None:
        self.builder = builder
        self.kind: str | None = None
        self.claude = transcript_claude.ClaudeReader(builder)
        self.codex = transcript_codex.CodexReader(builder)

    def feed(self, line: bytes | None, sidechain: bool) -> None:
        b = self.builder
        b.line()
        if line is None:
            b.skip("line too long")
            return
        if not line.strip():
            return
        try:
            record = orjson.loads(line)
        except orjson.JSONDecodeError:
            b.skip("not JSON")
            return
        if not isinstance(record, dict):
            b.skip("not a JSON object")
            return
        try:
            self._dispatch(record, sidechain)
        except (TypeError, ValueError, AttributeError, KeyError, IndexError):
            b.skip("malformed record")  # a shape no reader expected: the capture goes on

    def _dispatch(self, record: dict[str, object], sidechain: bool) -> None:
        kind = record.get("type")
        if isinstance(kind, str) and kind in transcript_codex.TYPES and "payload" in record:
            self._seen("codex")
            self.codex.handle(kind, record)
        elif isinstance(kind, str) and kind in transcript_claude.TYPES:
            self._seen("claude-code" if ("sessionId" in record or "uuid" in record) else "jsonl")
            self.claude.handle(kind, record, sidechain)
        elif kind is None and isinstance(record.get("role"), str):
            self._seen("jsonl")
            self.claude.generic(record, sidechain)
        else:
            self.builder.skip(f"unknown record type {str(kind)[:40]!r}" if isinstance(kind, str)
                              else "record without a type")

    def _seen(self, kind: str) -> None:
        if self.kind is None or (self.kind == "jsonl" and kind == "claude-code"):
            self.kind = kind
