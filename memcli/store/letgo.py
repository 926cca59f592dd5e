"""Replaced files let go off the main thread.

Renaming over a file frees the one it replaces there and then, in the call: milliseconds for
the 5-6 MB index of a large folder (its pages dropped, its blocks freed and, where the file
system discards online, queued for discard), and while one is freed, freeing any other waits
for it. So `fsops` holds the file about to be replaced open across the rename (`hold`) and
hands the descriptor to `release`: one background thread closes them, in the order replaced,
which frees them while the run goes on (close releases the GIL). The store's changes are the
same, at the same moments: only where the old files' space is given back differs.
"""

from __future__ import annotations

import _thread
import contextlib
import os
import stat

_FLAGS = (os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
          | getattr(os, "O_CLOEXEC", 0))

_released: list[int] = []  # replaced files held open, to be let go in this order
_releasing = [False]  # a thread is letting them go
_guard = _thread.allocate_lock()
_all_released = _thread.allocate_lock()  # held while that thread runs (`released` waits on it)


def hold(name: str, dir_fd: int | None) -> int | None:
    """A descriptor on the regular file `name` (relative to `dir_fd`), to keep its blocks
    until `release`; None when there is nothing to free by holding it: no such file, not a
    regular one, or one another name still holds (a run's pre-image link)."""
    if os.name != "posix":
        return None
    try:
        fd = os.open(name, _FLAGS, dir_fd=dir_fd)
    except OSError:
        return None  # no such file yet (or not one to open): nothing to hold
    try:
        st = os.fstat(fd)
    except OSError:
        st = None
    if st is None or not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
        os.close(fd)
        return None
    return fd


def release(fd: int) -> None:
    """Let the held file go on the background thread (started if none is running)."""
    with _guard:
        _released.append(fd)
        if _releasing[0]:
            return  # the thread letting them go takes this one too
        _releasing[0] = True
        _all_released.acquire()
    try:
        _thread.start_new_thread(_let_go, ())
    except RuntimeError:  # no thread to be had: let go here
        _let_go()


def _let_go() -> None:
    while True:
        with _guard:
            if not _released:
                _releasing[0] = False
                _all_released.release()
                return
            fd = _released.pop(0)
        with contextlib.suppress(OSError):
            os.close(fd)


def released(timeout: float = 10.0) -> bool:
    """Wait until every held file is let go (for tests)."""
    if not _all_released.acquire(timeout=timeout):
        return False
    _all_released.release()
    return True
