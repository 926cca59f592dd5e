"""An open file's bytes, read a page at a time where they are looked at.

Splicing a few entries into a 5-6 MB index (`index.splice`) looks at a few dozen of its
thousands of entries: a binary search. Reading the whole file for that cost more than
everything else the splice does (1,300 page faults for the buffer, 4-5 ms), so the search
reads through this instead, and the unchanged runs of entries are copied file to file
(`fsops.Span`). Only the subset of `bytes` that the search uses is offered.
"""

from __future__ import annotations

import errno
import os
import re

from memcli.store.fsops import SpanChangedError

PAGE = 1 << 12  # an entry is about 750 bytes: a probe of the search reads one page or two


class FileBytes:
    """The first `size` bytes of the open regular file `fd`, which must not change while
    they are used: a page found shorter than `size` says it did (SpanChangedError)."""

    def __init__(self, fd: int, size: int) -> None:
        self.fd, self.size = fd, size
        self._pages: dict[int, bytes] = {}

    def __len__(self) -> int:
        return self.size

    def _page(self, n: int) -> bytes:
        page = self._pages.get(n)
        if page is None:
            page = os.pread(self.fd, PAGE, n * PAGE)
            if len(page) < min(PAGE, self.size - n * PAGE):
                raise SpanChangedError(errno.EIO, "the file ended before the size it had when opened")
            self._pages[n] = page
        return page

    def slice(self, start: int, stop: int) -> bytes:
        """`bytes[start:stop]` for 0 <= start; stop is clamped to the size."""
        stop = min(stop, self.size)
        if start >= stop:
            return b""
        first, last = start // PAGE, (stop - 1) // PAGE
        if first == last:
            return self._page(first)[start - first * PAGE:stop - first * PAGE]
        parts = [self._page(n) for n in range(first, last + 1)]
        parts[-1] = parts[-1][:stop - last * PAGE]
        parts[0] = parts[0][start - first * PAGE:]
        return b"".join(parts)

    def byte(self, at: int) -> int:
        """`bytes[at]` for 0 <= at < size."""
        if not 0 <= at < self.size:
            raise IndexError(at)
        return self._page(at // PAGE)[at % PAGE]

    def find(self, sub: bytes, start: int = 0, end: int | None = None) -> int:
        """`bytes.find` over [start, end): in each page as it is, then across its edge with
        the next (a window of the length of `sub` less one either side)."""
        end = self.size if end is None else min(max(end, 0), self.size)
        at, reach = max(start, 0), len(sub) - 1
        while at < end:
            base = at // PAGE * PAGE
            found = self._page(at // PAGE).find(sub, at - base, min(end - base, PAGE))
            if found >= 0:
                return base + found
            edge = base + PAGE
            if edge >= end:
                return -1
            if reach:
                low = max(at, edge - reach)
                found = self.slice(low, min(end, edge + reach)).find(sub)
                if found >= 0:
                    return low + found
            at = edge
        return -1

    def startswith(self, prefix: bytes, start: int = 0) -> bool:
        return self.slice(start, start + len(prefix)) == prefix

    def endswith(self, suffix: bytes) -> bool:
        return len(suffix) <= self.size and self.slice(self.size - len(suffix), self.size) == suffix

    def match(self, pattern: re.Pattern[bytes], at: int) -> re.Match[bytes] | None:
        """`pattern.match` at `at`, on a window after it: 256 bytes, 4 KB, or the rest of the
        file, the next when one did not match and more is left (only its groups are used)."""
        for reach in (256, 4096, self.size):  # (a head is short: a small copy first)
            found = pattern.match(self.slice(at, at + reach))
            if found is not None or at + reach >= self.size:
                return found
        return None
