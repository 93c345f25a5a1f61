"""What the reader, the encoder and the map store share: a bounded hand-over between a worker thread and the
caller (either side may give up), the draining of an ffmpeg pipe's log, and reading ahead of a loop."""

from __future__ import annotations

import collections
import queue
import threading
from collections.abc import Callable, Iterable, Iterator

END = object()  # queue sentinel: no more frames
POLL_S = 0.1  # how often a blocked queue operation looks whether the other side gave up


def patient_put(q: queue.Queue, item, keep_trying: Callable[[], bool]) -> bool:
    """Put ``item`` on the bounded queue ``q``, waiting while it is full for as long as ``keep_trying()`` holds
    (it may also raise, to hand a failure of the other side to this one). True once put, False if given up.

    A plain blocking ``put`` would hang for ever when the consumer has died or stopped reading."""
    while keep_trying():
        try:
            q.put(item, timeout=POLL_S)
            return True
        except queue.Full:
            continue
    return False


def patient_get(q: queue.Queue, keep_trying: Callable[[], bool]):
    """The next item of ``q``, waiting while it is empty for as long as ``keep_trying()`` holds; ``END`` once
    given up. A plain blocking ``get`` would hang for ever when the producer has stopped without a last item."""
    while keep_trying():
        try:
            return q.get(timeout=POLL_S)
        except queue.Empty:
            continue
    return END


def drain_lines(stream, sink: collections.deque, keep: Callable[[str], bool] | None = None) -> None:
    """Read ``stream`` line by line into ``sink`` (lines for which ``keep`` is false are dropped): ffmpeg blocks
    when its stderr pipe fills, so someone must always be reading it."""
    try:
        for raw in iter(stream.readline, b""):
            line = raw.decode("utf-8", "replace").rstrip()
            if keep is None or keep(line):
                sink.append(line)
    except (OSError, ValueError):
        pass


def read_ahead(items: Iterable, count: int = 2) -> Iterator:
    """``items``, made on a thread of its own up to ``count`` ahead of the caller, for a loop whose own work leaves
    the CPU idle (a GPU's run): making the next items (decoding, numpy, which release Python's lock) overlaps it.
    An error in ``items`` is raised in the caller, after the items made before it; closing the generator (the
    caller stops early) stops the thread."""
    ready: queue.Queue = queue.Queue(maxsize=max(1, count))
    stop = threading.Event()
    failure: list[BaseException] = []

    def make() -> None:
        try:
            for item in items:
                if not patient_put(ready, item, lambda: not stop.is_set()):
                    return
        except BaseException as exc:  # handed to the caller, which raises it
            failure.append(exc)
        patient_put(ready, END, lambda: not stop.is_set())

    thread = threading.Thread(target=make, name="read-ahead", daemon=True)
    thread.start()
    try:
        while (item := ready.get()) is not END:
            yield item
        if failure:
            raise failure[0]
    finally:
        stop.set()
        thread.join()
