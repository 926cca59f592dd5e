"""How much of a long sweep a test run covers.

The default run keeps the suite quick (issue 20: under two minutes on two cores) by taking a
sample of each exhaustive sweep (crash points, generated stores, property examples), and a
different sample each day, so that the whole of each sweep is covered over a few runs. With
`MEMCLI_FULL_SWEEPS=1` every sweep runs in full:

    MEMCLI_FULL_SWEEPS=1 .venv/bin/python -m pytest -m slow

A sampled failure names the offset it ran with; `MEMCLI_SWEEP_OFFSET=N` runs that sample again.
"""

from __future__ import annotations

import datetime as dt
import os

FULL = os.environ.get("MEMCLI_FULL_SWEEPS", "") not in ("", "0")
STRIDE = 4  # a sampled sweep runs one point in STRIDE, besides the points at either end
EDGE = 3  # points at each end of a sweep that always run: the first changes and the commit


def offset() -> int:
    """Which one point in STRIDE this run takes: `MEMCLI_SWEEP_OFFSET`, else the day's."""
    given = os.environ.get("MEMCLI_SWEEP_OFFSET", "")
    if given.isdigit():
        return int(given) % STRIDE
    return dt.date.today().toordinal() % STRIDE  # real date, not MEMCLI_NOW: it must move


def points(first: int, last: int) -> list[int]:
    """The points of the sweep first..last (inclusive) that this run covers."""
    if FULL or last - first < 2 * EDGE + STRIDE:
        return list(range(first, last + 1))
    chosen = {n for n in range(first, last + 1) if n % STRIDE == offset()}
    chosen |= set(range(first, first + EDGE)) | set(range(last - EDGE + 1, last + 1))
    return sorted(chosen)


def scale(quick: int, full: int) -> int:
    """A size for a sweep: `quick` in the default run, `full` with MEMCLI_FULL_SWEEPS=1."""
    return full if FULL else quick


def label() -> str:
    """How to run the same sample again, for failure messages."""
    return "every point" if FULL else f"sampled: MEMCLI_SWEEP_OFFSET={offset()} runs it again"
