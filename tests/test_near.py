"""Raw depth to near maps: direction, normalisation, and temporal smoothing with cut resets."""

import numpy as np
import pytest

from stereo3d.stabilisers.ema import ema_ranges
from stereo3d.stereo.cuts import CutDetector, picture_change, thumbnail
from stereo3d.stereo.near import near_from_depth


def test_nearer_depth_gives_larger_near():
    depth = np.array([[1.0, 2.0, 4.0, 8.0]], np.float32)
    near = near_from_depth(depth, 0, 100)
    assert near[0, 0] == 1.0 and near[0, -1] == 0.0
    assert np.all(np.diff(near[0]) < 0)


def test_percentile_clip_ignores_outliers():
    depth = np.full((10, 10), 5.0, np.float32)
    depth[:, :5] = 2.0
    depth[0, 0] = 1e-4  # one absurdly near speck
    near = near_from_depth(depth, 2, 98)
    assert near[5, 0] == 1.0 and near[5, 9] == 0.0


def test_flat_depth_gives_flat_mid_near():
    assert np.all(near_from_depth(np.ones((4, 4), np.float32)) == 0.5)


def test_ema_smooths_a_range_jump_and_resets_at_cuts():
    ranges = np.array([[0.0, 1.0], [0.0, 1.0], [0.0, 3.0], [0.0, 3.0]])
    steady = np.array([np.nan, 0.01, 0.01, 0.01])
    smoothed = ema_ranges(ranges, steady, alpha=0.1, cut_threshold=0.25)
    assert smoothed[2, 1] == pytest.approx(1.2)  # the jump is followed slowly...
    assert smoothed[3, 1] == pytest.approx(1.38)
    cut = np.array([np.nan, 0.01, 0.6, 0.01])
    reset = ema_ranges(ranges, cut, alpha=0.1, cut_threshold=0.25)
    assert reset[2, 1] == 3.0  # ...unless the picture cut: a new shot starts from its own range


def test_ema_of_alpha_one_is_the_per_frame_range():
    ranges = np.random.default_rng(0).random((6, 2))
    np.testing.assert_allclose(ema_ranges(ranges, np.full(6, 0.01), alpha=1.0, cut_threshold=0.25), ranges)


def test_cut_detector_sees_cuts_but_not_steady_motion():
    yy, xx = np.mgrid[0:72, 0:128]
    a = np.repeat((127 + 100 * np.sin(xx / 10.0) * np.cos(yy / 12.0)).astype(np.uint8)[:, :, None], 3, axis=2)
    detector = CutDetector(threshold=0.25)
    thumbs = [thumbnail(np.roll(a, k, axis=1)) for k in range(4)] + [thumbnail(255 - a)]
    changes = [picture_change(p, c) for p, c in zip(thumbs, thumbs[1:], strict=False)]
    assert not detector.step(float("nan"))
    assert not any(detector.step(c) for c in changes[:3])
    assert detector.step(changes[3])
