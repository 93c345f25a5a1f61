"""Raw DA3 depth (distance-like, smaller = nearer) to near maps (0..1, larger = nearer).

``near_from_depth`` is the per-frame mapping: reciprocal, clip to percentiles, normalise. Per
frame, the percentiles jump whenever an object enters or leaves, which the viewer sees as the
whole scene breathing in depth; ``EmaNormaliser`` smooths the range over time instead, and
resets at shot cuts so a new shot does not inherit the last one's range.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

_EPS = 1e-6


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


@dataclass
class EmaNormaliser:
    """Near maps whose normalisation range follows an exponential moving average over frames.

    ``alpha`` is the weight of the newest frame's range (1 = per-frame, no smoothing). A shot cut
    (``cut=True`` from the caller, who sees the pictures) restarts the average at the new frame.
    """

    alpha: float = 0.1
    low_pct: float = 2.0
    high_pct: float = 98.0
    _lo: float | None = None
    _hi: float | None = None

    def reset(self) -> None:
        self._lo = self._hi = None

    def step(self, depth: np.ndarray, cut: bool = False) -> np.ndarray:
        inverse = reciprocal(depth)
        lo, hi = percentile_range(inverse, self.low_pct, self.high_pct)
        if cut or self._lo is None:
            self._lo, self._hi = lo, hi
        else:
            self._lo += self.alpha * (lo - self._lo)
            self._hi += self.alpha * (hi - self._hi)
        return normalise(inverse, self._lo, self._hi)


@dataclass
class CutDetector:
    """Shot cuts from small grey thumbnails: a cut is a jump in the mean absolute difference
    between consecutive frames that is both large in absolute terms and large against the
    recent motion level (so fast pans are not mistaken for cuts)."""

    threshold: float = 0.25  # mean |Δ| in 0..1 grey levels that a cut must exceed
    ratio: float = 3.0  # ...and how many times the recent average it must be
    _previous: np.ndarray | None = None
    _motion: float = 0.0

    def step(self, thumb: np.ndarray) -> bool:
        grey = np.asarray(thumb, dtype=np.float32)
        if grey.ndim == 3:
            grey = grey.mean(axis=2)
        grey = grey * np.float32(1 / 255)
        if self._previous is None or self._previous.shape != grey.shape:
            self._previous = grey
            return False
        change = float(np.mean(np.abs(grey - self._previous)))
        self._previous = grey
        cut = change > self.threshold and change > self.ratio * max(self._motion, 1e-3)
        self._motion = 0.0 if cut else 0.8 * self._motion + 0.2 * change
        return cut
