"""bench/RESULTS.md is shared by several benchmarks: each owns the part between its own
markers (`<!-- NAME:begin -->` ... `<!-- NAME:end -->`) and replaces only that part,
keeping everything else, other benchmarks' sections and hand-written notes alike."""

from __future__ import annotations

from pathlib import Path


def markers(name: str) -> tuple[str, str]:
    return f"<!-- {name}:begin -->", f"<!-- {name}:end -->"


def replace(text: str, name: str, body: str, at_top: bool = False) -> str:
    """`text` with the section `name` set to `body` (markers added); a section not there
    yet goes at the end (or at the top)."""
    begin, end = markers(name)
    section = f"{begin}\n{body.strip(chr(10))}\n{end}\n"
    start = text.find(begin)
    stop = text.find(end, start + len(begin)) if start >= 0 else -1
    if start >= 0 and stop >= 0:
        after = text[stop + len(end):]
        return text[:start] + section + after.removeprefix("\n")
    if at_top:
        return section + ("\n" + text if text.strip() else "")
    return (text.rstrip("\n") + "\n\n" if text.strip() else "") + section


def write(path: Path, name: str, body: str, at_top: bool = False) -> None:
    text = path.read_text() if path.exists() else ""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(replace(text, name, body, at_top))
