"""The local clock for the schedule tests: cron times and daily passes are local, so the
tests pin the zone (`utc`, autouse where imported) and set another one where that matters."""

from __future__ import annotations

import datetime as dt
import os
import time
from collections.abc import Iterator

import pytest

from memcli.store.model import parse_ts


def at(stamp: str) -> dt.datetime:
    return parse_ts(stamp)[0]


def set_tz(name: str) -> None:
    os.environ["TZ"] = name
    time.tzset()


@pytest.fixture(autouse=True)
def utc() -> Iterator[None]:
    """Cron times are local: pin the zone so the tests mean the same everywhere."""
    old = os.environ.get("TZ")
    set_tz("UTC")
    yield
    if old is None:
        os.environ.pop("TZ", None)
    else:
        os.environ["TZ"] = old
    time.tzset()
