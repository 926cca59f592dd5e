"""`memcli --help` (and a bare `memcli`) without importing typer: the same text, in a tenth
of the time.

Typer and its vendored click cost about 0.15 s of imports before a word of help is printed,
which is most of what `memcli --help` took. The top-level help changes only when a command
or a common option does, so its parts (usage, description, option rows, each command's first
paragraph) live in `tophelp_data.py`, written from the typer application by
`python -m memcli.cli.tophelp`. They are laid out here as click lays out a group's help: the
width of the terminal (at most 80 columns, less 2, at least 50), definition lists with a first
column of at most 30, each command's help cut to its first sentence or to what fits.
`tests/cli/test_tophelp.py` checks the data against the application and the text against
typer's at every width, so neither can drift.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # `typing` costs 3-4 ms of start-up; only the type checker needs it
if TYPE_CHECKING:
    import textwrap
    from collections.abc import Sequence

_FIRST_COLUMN_MAX = 30
_SPACING = 2
_INDENT = 2
_DATA_FILE = "tophelp_data.py"


def help_width(columns: int) -> int:
    """The text width click uses for a terminal `columns` wide."""
    return max(min(columns, 80) - 2, 50)


def short_help(first_paragraph: str, limit: int) -> str:
    """A command's line in the list: its first sentence when that fits in `limit` characters,
    else all of it when that fits, else as many whole words as fit with "..." after them."""
    words = first_paragraph.split()
    length = -1  # the joined length of words[:i + 1]; no space before the first word
    for i, word in enumerate(words):
        length += len(word) + 1
        if length > limit:
            break
        if word.endswith("."):
            return " ".join(words[:i + 1])
        if length == limit and i < len(words) - 1:
            break  # full, with words left: cut below
    else:
        return " ".join(words)
    kept = 0
    length = -1
    for word in words:
        if length + len(word) + 1 + len("...") > limit:
            break
        length += len(word) + 1
        kept += 1
    return " ".join(words[:kept]) + "..."


def _wrapper(width: int, first: str = "", rest: str = "") -> textwrap.TextWrapper:
    import textwrap

    class Wrapper(textwrap.TextWrapper):
        def _handle_long_word(self, reversed_chunks: list[str], cur_line: list[str],
                              cur_len: int, width: int) -> None:
            # a word longer than the line is cut where the line ends, hyphens or not (click's way)
            room = max(width - cur_len, 1)
            cur_line.append(reversed_chunks[-1][:room])
            reversed_chunks[-1] = reversed_chunks[-1][room:]

    return Wrapper(width, initial_indent=first, subsequent_indent=rest, replace_whitespace=False)


def _paragraphs(text: str, width: int, indent: str = "") -> str:
    """Each paragraph (lines up to an empty one) joined and filled to `width`, keeping the
    indentation of its first line."""
    out: list[str] = []
    block: list[str] = []
    lead = 0
    for line in [*text.expandtabs().splitlines(), ""]:
        if line:
            if not block:
                lead = len(line) - len(line.lstrip())
            block.append(line.lstrip() if len(block) == 0 else line)
            continue
        if block:
            pad = indent + " " * lead
            out.append(_wrapper(width, pad, pad).fill(" ".join(block)))
            block = []
    return "\n\n".join(out)


def _definitions(rows: Sequence[tuple[str, str]], width: int, indent: int) -> list[str]:
    """Two columns: the names, padded to the longest (at most 30), then their help wrapped
    beside them; a longer name gets its help on the next line."""
    column = min(max(len(name) for name, _ in rows), _FIRST_COLUMN_MAX) + _SPACING
    room = max(width - column - 2, 10)
    lines: list[str] = []
    for name, text in rows:
        head = " " * indent + name
        if not text:
            lines.append(head)
            continue
        wrapped = _paragraphs(text, room).splitlines() or [""]
        if len(name) <= column - _SPACING:
            lines.append(head + " " * (column - len(name)) + wrapped[0])
        else:
            lines += [head, " " * (column + indent) + wrapped[0]]
        lines += [" " * (column + indent) + line for line in wrapped[1:]]
    return lines


def render(width: int, prog: str = "memcli") -> str:
    """The whole top-level help for a text `width` (see `help_width`), as typer prints it."""
    from memcli.cli import tophelp_data as data

    prefix = f"Usage: {prog} "
    usage = _wrapper(width, prefix, " " * len(prefix)).fill(data.USAGE)
    lines = [usage, "", _paragraphs(data.HELP, width, " " * _INDENT), "", "Options:"]
    lines += _definitions(data.OPTIONS, width, _INDENT)
    limit = width - 6 - max(len(name) for name, _ in data.COMMANDS)
    commands = [(name, short_help(first, limit)) for name, first in data.COMMANDS]
    lines += ["", "Commands:", *_definitions(commands, width, _INDENT)]
    return "\n".join(lines).rstrip("\n") + "\n"


def serve() -> int | None:
    """Print the top-level help; None (typer prints it) when stdout cannot take the text."""
    import shutil

    text = render(help_width(shutil.get_terminal_size().columns))
    encoding = getattr(sys.stdout, "encoding", None) or "ascii"
    try:
        text.encode(encoding)
    except (UnicodeEncodeError, LookupError):
        return None  # typer's path degrades the stream first
    sys.stdout.write(text)
    sys.stdout.flush()
    return 0


# ---------------------------------------------------------------- writing the data


def extract() -> dict[str, object]:
    """The parts of the top-level help, read from the typer application (imports typer)."""
    import inspect

    import typer._click as click
    import typer.main
    from typer.core import TyperGroup

    from memcli.cli import load_app

    group = typer.main.get_command(load_app())
    assert isinstance(group, TyperGroup)  # memcli is a group of commands
    ctx = click.Context(group, info_name="memcli")
    sections: dict[str, list[tuple[str, str]]] = {}

    class Recorder(click.HelpFormatter):
        def write_heading(self, heading: str) -> None:
            sections[heading] = []

        def write_dl(self, found: Sequence[tuple[str, str]], col_max: int = 30,
                     col_spacing: int = 2) -> None:
            sections[list(sections)[-1]].extend(found)

    group.format_options(ctx, Recorder(width=80))  # its options, then its commands
    if list(sections) != ["Options", "Commands"]:
        raise ValueError(f"help sections {list(sections)}: teach tophelp.render first")
    rows = sections["Options"]
    commands: list[tuple[str, str]] = []
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        if command is None or command.hidden:
            continue
        if command.short_help or command.deprecated or "\b" in (command.help or ""):
            raise ValueError(f"{name}: short_help, deprecation or \\b: teach tophelp.render first")
        commands.append((name, inspect.cleandoc(command.help or "").split("\n\n")[0]))
    widest = help_width(80) - 6 - max(len(name) for name, _ in commands)
    commands = [(name, _words_seen(first, widest)) for name, first in commands]
    help_text = inspect.cleandoc(group.help or "").partition("\f")[0]
    if group.epilog or "\b" in help_text:
        raise ValueError("an epilog or \\b in the group's help: teach tophelp.render first")
    return {"USAGE": " ".join(group.collect_usage_pieces(ctx)), "HELP": help_text,
            "OPTIONS": tuple(rows), "COMMANDS": tuple(commands)}


def _words_seen(first_paragraph: str, limit: int) -> str:
    """The words `short_help` can look at for any limit up to `limit`: those that end within
    it, and one more (whose presence is all that counts)."""
    kept: list[str] = []
    length = -1
    for word in first_paragraph.split():
        kept.append(word)
        length += len(word) + 1
        if length > limit:
            break
    return " ".join(kept)


def data_source(parts: dict[str, object]) -> str:
    """tophelp_data.py's text for `parts`."""
    lines = ['"""The parts of `memcli --help`, written by `python -m memcli.cli.tophelp` from the',
             'typer application: do not edit (tests/cli/test_tophelp.py says when it is stale)."""',
             ""]
    for name, value in parts.items():
        if isinstance(value, tuple):
            lines.append(f"{name} = (")
            lines += [f"    {row!r}," for row in value]
            lines.append(")")
        else:
            lines.append(f"{name} = {value!r}")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    from pathlib import Path

    target = Path(__file__).with_name(_DATA_FILE)
    target.write_text(data_source(extract()), encoding="utf-8")
    print(f"wrote {target}")
