"""Progress of long steps into the rule's log: frames done, frames/s, at most every few seconds."""

from __future__ import annotations

import logging
import time


class Progress:
    def __init__(self, log: logging.Logger, what: str, total: int | None, every_s: float = 5.0):
        self.log, self.what, self.total, self.every_s = log, what, total, every_s
        self.done = 0
        self.started = self._last = time.perf_counter()

    def advance(self, frames: int) -> None:
        self.done += frames
        now = time.perf_counter()
        if now - self._last >= self.every_s:
            self._last = now
            self._line(now)

    def finish(self) -> float:
        """Log the closing line; returns frames per second."""
        now = time.perf_counter()
        self._line(now)
        return self.rate(now)

    def rate(self, now: float | None = None) -> float:
        elapsed = (now or time.perf_counter()) - self.started
        return self.done / elapsed if elapsed > 0 else 0.0

    def _line(self, now: float) -> None:
        total = f"/{self.total}" if self.total is not None else ""
        self.log.info("%s: %d%s frames, %.2f frames/s", self.what, self.done, total, self.rate(now))
