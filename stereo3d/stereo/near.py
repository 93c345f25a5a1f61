"""Raw DA3 depth (distance-like, smaller = nearer) to near maps (0..1, larger = nearer).

``near_from_depth`` is the per-frame mapping: reciprocal, clip to percentiles, normalise. Per frame, the
percentiles jump whenever an object enters or leaves, which the viewer sees as the whole scene breathing in
depth; the stabilisers (``stereo3d.stabilisers``) smooth that over time.
"""

from __future__ import annotations

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
