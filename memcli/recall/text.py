"""The words of a query that carry no meaning, and the short forms agents use: the part of
text analysis that is ours. Stemming and tokenising are the index's own analyzers (tantivy's
simple tokenizer, lowercase and the Snowball English stemmer; see `memcli.recall.index`), used
for memories and queries alike so that both sides always meet.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from itertools import accumulate

# A raw token of a query: letters, digits and underscores, joined by . / - : @ # (paths,
# versions, dotted names, kebab-case); each is planned on its own (memcli.recall.search).
RAW_TOKEN = re.compile(r"\w+(?:[./:@#\-]+\w+)*", re.UNICODE)
PIECE = re.compile(r"[^\W_]+", re.UNICODE)
CAMEL_PIECE = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
VERSION = re.compile(r"^v?(\d+(?:\.\d+)+)$")

# Identifiers as agents write them, whole: paths, dotted names, versions, snake_case joined by
# a separator, kebab-case (`a/b.py`, `v2.3.1`, `user-service`), and CamelCase
# (`getUserName`, `HTTPServer`). The index's `code` field holds exactly these terms of a
# memory and a query looks for exactly these terms of its own words (`code_terms`), so both
# sides always meet. (Written for Python's `re`: `\w` is a letter, digit or underscore in any
# script; the CamelCase forms are ASCII.)
CODE = re.compile(r"\w+(?:[./:@#\-]\w+)+|[a-z0-9]+[A-Z]\w*|[A-Z]{2,}[a-z]\w*")
CAMEL_WORD = re.compile(r"\b\w*(?:[a-z0-9][A-Z]|[A-Z]{2}[a-z])\w*")


def _class_table(classes: dict[str, bytes]) -> bytes:
    table = bytearray(b" " * 256)
    for chars, mark in classes.items():
        for char in chars.encode("latin-1"):
            table[char] = mark[0]
    return bytes(table)


_LOWER, _UPPER = "abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
# UTF-8 bytes -> a class each, so that C-speed substring tests say whether a text can hold
# an identifier at all (most memories are prose): "w" a word byte (any byte of a non-ASCII
# character counts, so no identifier is missed), "s" a joining separator.
# (NUL becomes "|": `shaped` joins texts with it.)
_JOINED = _class_table({_LOWER + _UPPER + "0123456789_" + "".join(map(chr, range(128, 256))): b"w",
                        "./:@#-": b"s", "\x00": b"|"})
# "a" lower case or digit, "A" upper case: `[a-z0-9][A-Z]` and `[A-Z]{2}[a-z]` become "aA", "AAa".
_CASES = _class_table({_LOWER + "0123456789": b"a", _UPPER: b"A", "\x00": b"|"})


def shapes(text: str) -> tuple[bool, bool]:
    """(may hold a joined identifier, may hold a CamelCase word): never False when the
    text does; True can be a false alarm (the regular expressions then decide)."""
    raw = text.encode("utf-8", "surrogatepass")
    joined = b"wsw" in raw.translate(_JOINED)
    cases = raw.translate(_CASES)
    return joined, b"aA" in cases or b"AAa" in cases


def shaped(texts: list[str]) -> list[int]:
    """The positions of the texts that `shapes` says may hold either shape, found for all of
    them at once: each class string is searched whole (C-speed `find` over a folder's text,
    most of which holds no shape), and a hit skips to the next text."""
    if not texts:
        return []
    whole = "\x00".join(texts)
    raw = whole.encode("utf-8", "surrogatepass")
    sizes = (len(t) for t in texts) if len(raw) == len(whole) else \
        (len(t.encode("utf-8", "surrogatepass")) for t in texts)  # (ASCII: characters are bytes)
    ends = list(accumulate(size + 1 for size in sizes))  # each text's end, past its NUL
    found: set[int] = set()
    for table, needles in ((_JOINED, (b"wsw",)), (_CASES, (b"aA", b"AAa"))):
        classes = raw.translate(table)  # a NUL is "|": no needle reaches into the next text
        for needle in needles:
            at = classes.find(needle)
            while at >= 0:
                n = bisect_right(ends, at)
                found.add(n)
                at = classes.find(needle, ends[n])
    return sorted(found)


def code_terms(text: str, joined: bool = True, camel: bool = True) -> list[str]:
    """The identifiers of a text, lower-cased: the `code` field's terms. `joined` and
    `camel` say which shapes `shapes` found (both when unknown)."""
    if not (joined or camel):
        return []
    return [term.lower() for term in CODE.findall(text)]


def camel_parts(text: str, camel: bool = True) -> str:
    """The pieces of CamelCase identifiers in a text ("getUserName" -> "get User Name"):
    the `parts` field. `camel`: whether `shapes` found a CamelCase word (True when unknown)."""
    if not camel or text.islower():
        return ""
    return " ".join(" ".join(CAMEL_PIECE.findall(word)) for word in CAMEL_WORD.findall(text))

STOP_WORDS = frozenset("""
a about above after again against all also am an and any are aren't as at be because been
before being below between both but by can can't cannot could couldn't did didn't do does
doesn't doing don't down during each either else ever every few for from further get gets got
had hadn't has hasn't have haven't having he her here hers herself him himself his how i if
in into is isn't it it's its itself just let let's like may me might mine more most must
mustn't my myself need needs no nor not now of off on once one only or other ought our ours
ourselves out over own please per same shall shan't she should shouldn't so some such than
that that's the their theirs them themselves then there there's these they this those
through thus to too under until up upon us very via was wasn't we were weren't what what's
when where which while who whom whose why will with within without won't would wouldn't yes
yet you your yours yourself yourselves
again anyone anything everything something someone thing things way ways
know remember recall tell show find look give want wanted trying try tried
okay ok hey hi thanks thank sure really actually maybe probably basically
""".split())

# Short forms agents and people use for the same thing: each side of a pair is analysed to
# both, so "k8s" finds "kubernetes" and "db" finds "database" (and the other way round).
ALIASES = {
    "db": "database", "k8s": "kubernetes", "repo": "repository", "config": "configuration",
    "cfg": "configuration", "conf": "configuration", "auth": "authentication",
    "env": "environment", "envs": "environment", "deps": "dependency", "dep": "dependency",
    "pr": "pull request", "prs": "pull request", "ci": "continuous integration",
    "js": "javascript", "ts": "typescript", "py": "python", "pg": "postgres",
    "postgresql": "postgres", "msg": "message", "msgs": "message", "dir": "directory",
    "dirs": "directory", "folder": "directory", "pkg": "package", "lib": "library",
    "impl": "implementation", "func": "function", "fn": "function", "arg": "argument",
    "args": "argument", "param": "parameter", "params": "parameter", "prod": "production",
    "perf": "performance", "docs": "documentation", "doc": "documentation",
    "spec": "specification", "tmp": "temporary", "temp": "temporary", "err": "error",
    "errs": "error", "exc": "exception", "info": "information", "num": "number",
    "async": "asynchronous", "sync": "synchronize", "mem": "memory", "creds": "credential",
    "cred": "credential", "pw": "password", "pwd": "password", "passwd": "password",
    "secs": "second", "sec": "second", "ms": "millisecond", "min": "minute", "mins": "minute",
    "app": "application", "apps": "application", "svc": "service", "src": "source",
    "img": "image", "btn": "button", "tz": "timezone",
    "cli": "command line", "rollout": "deployment",
}




def expansions(word: str) -> list[str]:
    """The other names of a word (lowercase), both ways: "k8s" <-> "kubernetes"."""
    out = [ALIASES[word]] if word in ALIASES else []
    out += [short for short, long in ALIASES.items() if long == word]
    return out


def is_stop(word: str) -> bool:
    return word.lower() in STOP_WORDS
