"""Raw depth to near maps: direction, normalisation, and temporal smoothing with cut resets."""

import numpy as np

from stereo3d.near import CutDetector, EmaNormaliser, near_from_depth


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
    still = np.linspace(1, 4, 100, dtype=np.float32).reshape(10, 10)
    jumped = still.copy()
    jumped[0, :] = 0.2  # an object enters close to the camera: the per-frame range jumps
    ema = EmaNormaliser(alpha=0.1, low_pct=0, high_pct=100)
    first = ema.step(still)
    smoothed = ema.step(jumped)
    per_frame = near_from_depth(jumped, 0, 100)
    # The background keeps nearly its previous near value instead of collapsing towards 0.
    assert abs(smoothed[5, 5] - first[5, 5]) < abs(per_frame[5, 5] - first[5, 5])
    reset = ema.step(jumped, cut=True)
    np.testing.assert_allclose(reset, per_frame, atol=1e-6)


def test_cut_detector_sees_cuts_but_not_steady_motion():
    rng = np.random.default_rng(0)
    a = rng.integers(0, 256, (36, 64), dtype=np.uint8)
    b = 255 - a
    detector = CutDetector(threshold=0.25)
    shifts = [np.roll(a, k, axis=1) for k in range(5)]
    assert not any(detector.step(f) for f in shifts[:1])
    results = [detector.step(np.roll(a, 0, axis=1)) for _ in range(3)]
    assert not any(results)
    assert detector.step(b)
