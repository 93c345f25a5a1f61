"""Exclusive locks on files, the same on Linux, macOS and Windows, through the ``filelock`` library's native lock
on a descriptor we own: ``flock`` on POSIX systems, ``LockFileEx`` on byte 0 on Windows.

Either way the lock belongs to the open file and the operating system drops it when the process ends, however it
ends: a killed job never leaves a lock behind. Holding the descriptor ourselves (rather than a ``FileLock`` object)
lets the holder write who it is into the file, and keeps the file in place on release, so that a waiter never locks
a file that nobody else sees.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from pathlib import Path

POLL_S = 0.05  # between two tries of a blocking lock


def try_lock(path: str | Path) -> int | None:
    """The open descriptor of ``path`` (created if missing) holding its exclusive lock, or None when another
    open file holds it (in this process or another). Release with ``unlock``."""
    # filelock is imported where a lock is taken: opening a session imports this module (through the GPU leases)
    # and most processes never lock anything.
    from filelock import lock_descriptor

    fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_BINARY", 0), 0o666)  # Windows: no newline rewriting
    try:
        if lock_descriptor(fd, blocking=False):
            return fd
    except BaseException:
        os.close(fd)
        raise
    os.close(fd)
    return None


def unlock(fd: int) -> None:
    """Release a lock taken by ``try_lock`` (or ``held``) and close its descriptor."""
    from filelock import unlock_descriptor

    try:
        unlock_descriptor(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def held(path: str | Path, poll_s: float = POLL_S) -> Iterator[int]:
    """Hold the exclusive lock of ``path`` for the ``with`` block, waiting for another holder to let go."""
    while (fd := try_lock(path)) is None:
        time.sleep(poll_s)
    try:
        yield fd
    finally:
        unlock(fd)
