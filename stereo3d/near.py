"""Raw DA3 depth (distance-like, smaller = nearer) to near maps (0..1, larger = nearer).

``near_from_depth`` is the per-frame mapping: reciprocal, clip to percentiles, normalise. Per
frame, the percentiles jump whenever an object enters or leaves, which the viewer sees as the
whole scene breathing in depth; ``ema_ranges`` smooths the range over time instead,
and resets at shot cuts so a new shot does not inherit the last one's range.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

_EPS = 1e-6
THUMB_SIZE = (64, 36)


def reciprocal(depth: np.ndarray) -> np.ndarray:
    """Inverse depth (disparity-like): larger = nearer; non-positive depth counts as very far."""
    depth = np.asarray(depth, dtype=np.float32)
    return np.float32(1.0) / np.maximum(depth, np.float32(_EPS))


def percentile_range(inverse: np.ndarray, low_pct: float, high_pct: float) -> tuple[float, float]:
    """Robust value range of one map (outliers such as specks of sky do not set the scale)."""
    lo, hi = np.percentile(inverse, (low_pct, high_pct))
    return float(lo), float(hi)


def normalise(inverse: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """Map [lo, hi] onto [0, 1], clipping outside; a flat range gives a flat mid-grey map."""
    if hi - lo <= _EPS * max(abs(hi), 1.0):
        return np.full(inverse.shape, 0.5, dtype=np.float32)
    out = (inverse - np.float32(lo)) * np.float32(1.0 / (hi - lo))
    return np.clip(out, 0.0, 1.0, out=out).astype(np.float32, copy=False)


def near_from_depth(depth: np.ndarray, low_pct: float = 2.0, high_pct: float = 98.0) -> np.ndarray:
    """Per-frame near map of one raw DA3 depth map."""
    inverse = reciprocal(depth)
    return normalise(inverse, *percentile_range(inverse, low_pct, high_pct))


def ema_ranges(ranges: np.ndarray, changes: np.ndarray, alpha: float, cut_threshold: float,
               cut_ratio: float = 3.0) -> np.ndarray:
    """Normalisation ranges [n, 2] smoothed by an exponential moving average over a whole video.

    ``ranges`` are each frame's own (lo, hi) of inverse depth; ``changes`` each frame's picture
    change against the previous frame (NaN for the first). ``alpha`` is the weight of the newest
    frame (1 = per-frame, no smoothing); a shot cut restarts the average at the new frame. Run over
    the whole video at once, so the result does not depend on how the video is cut into segments.
    """
    ranges = np.asarray(ranges, dtype=np.float64)
    out = np.empty_like(ranges)
    detector = CutDetector(cut_threshold, cut_ratio)
    current = None
    for index, (frame_range, change) in enumerate(zip(ranges, changes, strict=True)):
        if detector.step(change) or current is None:
            current = frame_range.copy()
        else:
            current += alpha * (frame_range - current)
        out[index] = current
    return out


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
