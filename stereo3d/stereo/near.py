"""Raw DA3 depth (distance-like, smaller = nearer) to near maps (0..1, larger = nearer).

``near_from_depth`` is the per-frame mapping: reciprocal, clip to percentiles, normalise. Per frame, the
percentiles jump whenever an object enters or leaves, which the viewer sees as the whole scene breathing in
depth; the stabilisers (``stereo3d.stabilisers``) smooth that over time.

NaN depth is sky (a model with a sky head marks it so): it sets no percentile, and lands on the far plane (0), so
clouds never float in front of the screen.
"""

from __future__ import annotations

import numpy as np

from stereo3d.defaults import default

_EPS = 1e-6


def reciprocal(depth: np.ndarray) -> np.ndarray:
    """Inverse depth (disparity-like): larger = nearer; non-positive depth counts as very far."""
    depth = np.asarray(depth, dtype=np.float32)
    return np.float32(1.0) / np.maximum(depth, np.float32(_EPS))


def percentile_range(inverse: np.ndarray, low_pct: float, high_pct: float) -> tuple[float, float]:
    """Robust value range of one map (outliers such as specks of sky do not set the scale); sky (NaN) is left
    out, and a map that is all sky has the empty range (0, 0)."""
    sky = np.isnan(inverse)
    if sky.any():
        inverse = inverse[~sky]
        if not inverse.size:
            return 0.0, 0.0
    lo, hi = np.percentile(inverse, (low_pct, high_pct))
    return float(lo), float(hi)


def normalise(inverse: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """Map [lo, hi] onto [0, 1], clipping outside; a flat range gives a flat mid-grey map; sky (NaN) gives 0."""
    if hi - lo <= _EPS * max(abs(hi), 1.0):
        out = np.full(inverse.shape, 0.5, dtype=np.float32)
    else:
        out = (inverse - np.float32(lo)) * np.float32(1.0 / (hi - lo))
        np.clip(out, 0.0, 1.0, out=out)
    sky = np.isnan(inverse)
    if sky.any():
        out[sky] = 0.0
    return out.astype(np.float32, copy=False)


def sky_to_far(near: np.ndarray, depth: np.ndarray) -> np.ndarray:
    """``near`` with the sky of ``depth`` (its NaN pixels, resampled to the near map's size if it differs) on
    the far plane: for maps that come out of a network rather than from :func:`normalise`."""
    sky = np.isnan(depth)
    if not sky.any():
        return near
    if sky.shape != near.shape:
        rows = (np.arange(near.shape[0]) * sky.shape[0]) // near.shape[0]
        cols = (np.arange(near.shape[1]) * sky.shape[1]) // near.shape[1]
        sky = sky[rows[:, None], cols[None, :]]
    out = np.array(near, dtype=np.float32)
    out[sky] = 0.0
    return out


def near_from_depth(depth: np.ndarray, low_pct: float = default("near.low_pct"),
                    high_pct: float = default("near.high_pct")) -> np.ndarray:  # fmt: skip
    """Per-frame near map of one raw DA3 depth map (the percentiles: the schema's defaults unless given)."""
    inverse = reciprocal(depth)
    return normalise(inverse, *percentile_range(inverse, low_pct, high_pct))
