"""Shot cuts: a small grey thumbnail per frame, the picture change between consecutive frames, and the rule that
calls a change a cut. The depth stage records the changes; a stabiliser that must not carry one shot's depth
range into the next (``ema``) asks the detector."""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

THUMB_SIZE = (64, 36)


def thumbnail(frame: np.ndarray) -> np.ndarray:
    """A small grey picture (0..1) of an RGB frame: enough to see a cut, cheap to compare."""
    small = cv2.resize(frame, THUMB_SIZE, interpolation=cv2.INTER_AREA)
    return small.mean(axis=2, dtype=np.float32) * np.float32(1 / 255)


def picture_change(previous: np.ndarray, current: np.ndarray) -> float:
    """Mean absolute grey-level difference (0..1) between two thumbnails."""
    return float(np.mean(np.abs(current - previous)))


@dataclass
class CutDetector:
    """Shot cuts from picture changes between consecutive frames: a cut is a change that is both
    large in absolute terms and large against the recent motion level (so fast pans are not
    mistaken for cuts)."""

    threshold: float = 0.25  # mean |Δ| in 0..1 grey levels that a cut must exceed
    ratio: float = 3.0  # ...and how many times the recent average it must be
    _motion: float = 0.0

    def step(self, change: float) -> bool:
        if change is None or not np.isfinite(change):
            return False  # the first frame: nothing to compare with
        cut = change > self.threshold and change > self.ratio * max(self._motion, 1e-3)
        self._motion = 0.0 if cut else 0.8 * self._motion + 0.2 * change
        return cut
