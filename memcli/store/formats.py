"""The two file formats of a memory record, JSON and Markdown with YAML front matter (SPEC 1.1),
and the parsing bounds that make bad input an error, never a hang (SPEC 8)."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path
from typing import Any

import orjson

# Parsing bounds (SPEC 8): a record nests objects and lists at most this deep (JSON or YAML),
# its front matter is at most this many bytes, and expands to at most this many values (YAML
# aliases repeat a value without repeating its text: a few hundred bytes can stand for
# billions of values). Anything beyond is bad input, refused before or while parsing.
MAX_DEPTH = 64
MAX_FRONT_MATTER = 1024 * 1024
MAX_YAML_VALUES = 100_000


_yaml_kit: tuple[Any, Any, Any] | None = None


def _yaml() -> tuple[Any, Any, Any]:
    """PyYAML with its safe loader and dumper (libyaml's where installed), imported on the
    first Markdown record: commands that meet only JSON (and `--help`, `list`, `show` of a
    JSON store) start about 20 ms sooner without it."""
    global _yaml_kit
    if _yaml_kit is None:
        import yaml

        class Dumper(getattr(yaml, "CSafeDumper", yaml.SafeDumper)):  # type: ignore[misc]
            """Never writes anchors and aliases (a value shared twice is written twice), so
            that every file memcli writes is one it reads back."""

            def ignore_aliases(self, data: Any) -> bool:
                return True

        _yaml_kit = (yaml, getattr(yaml, "CSafeLoader", yaml.SafeLoader), Dumper)
    return _yaml_kit




def decode(raw: bytes, fmt: str) -> dict[str, Any]:
    """Bytes of a memory file -> record. Raises ValueError with a user-facing reason."""
    if fmt == "json":
        return _decode_json(raw)
    return _decode_markdown(_utf8(raw))


def _utf8(raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"not UTF-8 text (byte {raw[exc.start]:#04x} at offset {exc.start})") from exc


def _decode_json(raw: bytes) -> dict[str, Any]:
    try:
        data = orjson.loads(raw)  # orjson checks UTF-8 itself: no separate decode pass
    except orjson.JSONDecodeError as exc:
        _utf8(raw)  # name the bad byte when that is what broke it
        raise ValueError(f"not valid JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    # orjson stops at 1,024 levels; a record is bounded far lower, so that every record read
    # can be written back (orjson writes at most 254 levels, YAML fewer). Counting brackets
    # first spares the walk for the usual record, which has a handful.
    if raw.count(b"[") + raw.count(b"{") > MAX_DEPTH and nesting_depth(data) > MAX_DEPTH:
        raise ValueError(f"nested more than {MAX_DEPTH} levels deep")
    return data


def nesting_depth(value: Any, stop: int = MAX_DEPTH) -> int:
    """How deep objects and lists nest in `value` (a scalar is 0), found without recursion;
    the walk stops once it is past `stop`."""
    deepest = 0
    stack = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else None
        if children is None:
            continue
        deepest = max(deepest, depth)
        if deepest > stop:
            return deepest
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return deepest


def _decode_markdown(text: str) -> dict[str, Any]:
    import frontmatter  # imported here: JSON-only stores never pay for it

    yaml = _yaml()[0]
    if not text.lstrip().startswith("---"):
        raise ValueError("no YAML front matter (the file must start with a '---' line)")
    try:
        meta, body = frontmatter.parse(text, handler=_bounded_handler())
    except yaml.YAMLError as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ValueError(f"broken front matter ({reason})") from exc
    except ValueError as exc:  # the bounds above, or a scalar too large to convert
        if str(exc).startswith("front matter"):
            raise
        raise ValueError(f"broken front matter ({exc})") from exc
    except (TypeError, RecursionError, MemoryError) as exc:
        raise ValueError(f"broken front matter ({type(exc).__name__}: {exc})") from exc
    if not isinstance(meta, dict) or not meta:
        raise ValueError("broken front matter (it is not a mapping of fields)")
    if expanded_size(meta, MAX_YAML_VALUES) > MAX_YAML_VALUES:
        raise ValueError(f"front matter expands to more than {MAX_YAML_VALUES} values (YAML aliases?)")
    data = _plain(meta, 1)
    content = data.get("content", {})
    if not isinstance(content, dict):
        raise ValueError("front matter 'content' must be a mapping")
    if body:
        content = {**content, "details": body}
    data["content"] = content
    return data


_handler: Any = None


def _bounded_handler() -> Any:
    """python-frontmatter's YAML handler, loading with `load_front_matter` (bounded, and
    libyaml's fast safe loader where installed)."""
    global _handler
    if _handler is None:
        import frontmatter

        class Bounded(frontmatter.YAMLHandler):  # type: ignore[misc]
            def load(self, fm: str, **kwargs: object) -> Any:
                return load_front_matter(fm)

        _handler = Bounded()
    return _handler


# The start of a line nested deep in block style: indentation, `- ` and `? ` indicators.
_DEEP_BLOCK = re.compile(rf"^[ \t?:-]{{{MAX_DEPTH},}}", re.MULTILINE)
_FLOW_BRACKETS = re.compile(r"[\[\]{}]")


def load_front_matter(text: str) -> Any:
    """YAML front matter, parsed within bounds: refused (ValueError) when over
    MAX_FRONT_MATTER bytes or nested over MAX_DEPTH levels, both checked before the parser
    sees it (a deeply nested document crashes or stalls YAML parsers). Aliases are bounded
    when the values are copied out (`_plain`)."""
    size = len(text.encode("utf-8", "replace")) if len(text) * 4 > MAX_FRONT_MATTER else 0
    if size > MAX_FRONT_MATTER:
        raise ValueError(f"front matter is {size} bytes, over the {MAX_FRONT_MATTER}-byte limit")
    if not _flow_depth_ok(text) or (_DEEP_BLOCK.search(text) and not _event_depth_ok(text)):
        raise ValueError(f"front matter nested more than {MAX_DEPTH} levels deep")
    yaml, loader, _ = _yaml()
    return yaml.load(text, Loader=loader)  # noqa: S506 - a safe loader


def _flow_depth_ok(text: str) -> bool:
    """Flow collections (`[`, `{`) nest at most MAX_DEPTH deep. Brackets inside quoted text
    count too: conservative, and only text with more than MAX_DEPTH of them is walked."""
    if text.count("[") + text.count("{") <= MAX_DEPTH:
        return True
    depth = 0
    for match in _FLOW_BRACKETS.finditer(text):
        if match.group() in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                return False
        elif depth:
            depth -= 1
    return True


def _event_depth_ok(text: str) -> bool:
    """The exact block nesting, from the parser's events (no document is built): only for
    text whose indentation says it may be deep. Flow nesting is bounded before this."""
    yaml, loader, _ = _yaml()
    depth = 0
    try:
        for event in yaml.parse(text, Loader=loader):
            if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
                depth += 1
                if depth > MAX_DEPTH:
                    return False
            elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
                depth -= 1
    except yaml.YAMLError:
        return True  # not deep; the load reports what is broken
    return True


def expanded_size(value: Any, limit: int) -> int:
    """How many values `value` holds once YAML aliases are copied out, counting each shared
    node's size once (by identity), so that an alias bomb is measured in the time of its few
    real nodes instead of its billions of copies. Counting stops past `limit` (the answer is
    then `limit + 1`); a node that holds itself is endless and counts as over it."""
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()

    def size(node: Any) -> int:
        if isinstance(node, dict):
            children: Any = node.values()
        elif isinstance(node, (list, tuple, set, frozenset)):
            children = node
        else:
            return 1
        key = id(node)
        if key in sizes:
            return sizes[key]
        if key in open_nodes:
            return limit + 1  # a cycle: endless once copied
        if len(open_nodes) > MAX_DEPTH:
            return 1  # nested deeper than the copy allows: `_plain` refuses it, saying so
        open_nodes.add(key)
        total = 1
        for child in children:
            total += size(child)
            if total > limit:
                break
        open_nodes.discard(key)
        sizes[key] = total = min(total, limit + 1)
        return total

    return size(value)


_INT_MIN, _INT_MAX = -(2 ** 63), 2 ** 64 - 1  # what a JSON file (orjson) can hold


def _plain(value: Any, depth: int) -> Any:
    """The front matter as plain JSON values: YAML may hand back datetimes for unquoted
    timestamps (the record holds strings), and values no JSON holds are bad input. The copy
    is bounded before it starts (`expanded_size`): an alias bomb never gets here."""
    if isinstance(value, (dict, list, tuple, set, frozenset)) and depth > MAX_DEPTH:
        raise ValueError(f"front matter nested more than {MAX_DEPTH} levels deep")
    if isinstance(value, dict):
        return {str(k): _plain(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v, depth + 1) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted((_plain(v, depth + 1) for v in value), key=str)
    if isinstance(value, dt.datetime):
        return value.isoformat().replace("+00:00", "Z")
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, bool) or value is None or isinstance(value, (str, float)):
        return value
    if isinstance(value, int):
        if not _INT_MIN <= value <= _INT_MAX:
            raise ValueError("front matter holds an integer too large for a record")
        return value
    raise ValueError(f"front matter holds a {type(value).__name__} value, which a record cannot hold")


def encode(data: dict[str, Any], fmt: str) -> bytes:
    """Record -> file bytes in the given format."""
    if fmt == "json":
        return orjson.dumps(data, option=orjson.OPT_INDENT_2) + b"\n"
    meta = dict(data)
    content = dict(meta.get("content") or {})
    details = content.pop("details", None)
    meta["content"] = content
    yaml, _, dumper = _yaml()
    front = yaml.dump(meta, Dumper=dumper, sort_keys=False, allow_unicode=True,
                      default_flow_style=False, width=100)
    body = (str(details).strip() + "\n") if details else ""
    return f"---\n{front}---\n\n{body}".encode()


def fmt_of(path: Path) -> str | None:
    """The format of a memory file name, or None if it is not a memory file."""
    if path.name.startswith((".", "_")):
        return None
    return {".json": "json", ".md": "md"}.get(path.suffix)
