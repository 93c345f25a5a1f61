"""The ground truth the viewing figures are measured against (stereo3d.qc.truth): ray-cast, not warped, so it can
judge the renderer; and the scores taken apart by pixel class (stereo3d.qc.viewing)."""

from dataclasses import replace

import numpy as np

from stereo3d.qc import truth, viewing
from stereo3d.stereo.warp import Renderer, StereoSettings

WIDTH, HEIGHT = 120, 60


def wall_scene(z=6.0, box=None, frames=1, velocity=(0.0, 0.0, 0.0), grain=0.0):
    surfaces = [truth.Surface((-40, -20, z), (80, 0, 0), (0, 40, 0), texture=1, check=0.4, detail=0.2, grain=grain)]
    if box is not None:
        surfaces.append(truth.Surface(box, (0.5, 0, 0), (0, 1.0, 0), texture=2, stripes=0.1, velocity=velocity))
    return truth.Scene(surfaces=tuple(surfaces), z_near=2.0, z_far=z, frames=frames)


def test_a_wall_at_the_far_plane_moves_by_half_the_parallax_in_each_eye():
    # The wall is at z_far: its near value is 0, its parallax -divergence * zero_plane; the eyes see it shifted by
    # half of that, each its own way, by exact whole pixels here (2 % of 120 px x 0.75 / 2 = 0.9 px: use 10 %).
    rig = truth.Rig(divergence_pct=10.0, convergence=0.5)  # parallax of the far plane: -6 px, 3 px per eye
    frame = truth.render_frame(wall_scene(), 0, WIDTH, HEIGHT, rig)
    assert np.allclose(frame.near, 0.0, atol=1e-6)
    np.testing.assert_array_equal(frame.left[:, : WIDTH - 3], frame.source[:, 3:])  # behind: left eye sees it left
    np.testing.assert_array_equal(frame.right[:, 3:], frame.source[:, : WIDTH - 3])
    assert (frame.left_class[:, WIDTH - 3 :] == truth.OUTSIDE).all()  # beyond the source's right edge
    assert (frame.left_class[:, : WIDTH - 3] == truth.VISIBLE).all()


def test_grain_is_fine_texture_of_the_surface_the_same_from_every_camera():
    # A grain cell of 0.05 world units at z = 6 is 0.9 px here (focal 108 px): detail down to the pixel.
    rig = truth.Rig(divergence_pct=10.0, convergence=0.5)
    plain = truth.render_frame(wall_scene(), 0, WIDTH, HEIGHT, rig)
    grained = truth.render_frame(wall_scene(grain=0.05), 0, WIDTH, HEIGHT, rig)
    # A point of the surface has one colour, whichever camera sees it: the eyes are the source moved by 3 px.
    np.testing.assert_array_equal(grained.left[:, : WIDTH - 3], grained.source[:, 3:])
    np.testing.assert_array_equal(grained.right[:, 3:], grained.source[:, : WIDTH - 3])

    # What the grain adds changes from pixel to pixel (the mean step between neighbours: ~7 grey levels).
    assert _steps(grained.source.astype(np.float64) - plain.source) > 4.0


def test_a_scenes_camera_softens_and_each_camera_adds_its_own_noise():
    rig = truth.Rig(divergence_pct=10.0, convergence=0.5)
    scene = wall_scene(grain=0.05)
    sharp = truth.render_frame(scene, 0, WIDTH, HEIGHT, rig)
    soft = truth.render_frame(replace(scene, blur_px=1.0), 0, WIDTH, HEIGHT, rig)
    assert _steps(soft.source) < 0.8 * _steps(sharp.source)
    noisy = truth.render_frame(replace(scene, noise=3.0), 0, WIDTH, HEIGHT, rig)
    # Where both cameras see the same point, they differ by two cameras' noise: sqrt(2) x 3 grey levels.
    difference = noisy.left[:, : WIDTH - 3].astype(float) - noisy.source[:, 3:].astype(float)
    assert 3.6 < difference.std() < 4.9
    assert np.abs(noisy.source.astype(float) - sharp.source.astype(float)).mean() > 1.5
    # The same frame is the same picture each time it is made (the bench caches them; tests compare them).
    np.testing.assert_array_equal(truth.render_frame(replace(scene, noise=3.0), 0, WIDTH, HEIGHT, rig).left,
                                  noisy.left)  # fmt: skip


def _steps(image: np.ndarray) -> float:
    """The mean change between neighbouring pixels of a row (grey levels): how much fine detail a picture has."""
    return float(np.abs(np.diff(np.asarray(image, np.float64), axis=1)).mean())


def test_the_eyes_see_what_the_source_camera_cannot_beside_a_near_box():
    rig = truth.Rig(divergence_pct=8.0, convergence=0.5)
    frame = truth.render_frame(wall_scene(box=(-0.25, -0.5, 2.0)), 0, WIDTH, HEIGHT, rig)
    # The box is nearer than the screen: the left eye sees it shifted right, uncovering the wall on its left.
    box_columns = np.nonzero(frame.near[HEIGHT // 2] > 0.5)[0]
    left_holes = np.nonzero(frame.left_class[HEIGHT // 2] == truth.HOLE)[0]
    right_holes = np.nonzero(frame.right_class[HEIGHT // 2] == truth.HOLE)[0]
    assert len(left_holes) and len(right_holes)
    assert left_holes.max() < box_columns.mean() < right_holes.min()


def test_the_renderer_given_the_true_depth_matches_the_eyes_where_both_see():
    rig = truth.Rig(divergence_pct=6.0, convergence=0.5)
    frame = truth.render_frame(wall_scene(box=(-0.25, -0.5, 2.5)), 0, WIDTH, HEIGHT, rig)
    settings = StereoSettings(divergence_pct=6.0, convergence=0.5, edge_dilate_px=0)
    left, right = Renderer("cpu").render_stereo(frame.source, frame.near, settings)
    for view, eye, classes in ((left, frame.left, frame.left_class), (right, frame.right, frame.right_class)):
        assert viewing.psnr(view, eye, classes == truth.VISIBLE) > 27.0  # a wrong geometry scores ~15 dB


def test_moving_surfaces_and_a_moving_camera_are_not_still():
    scene = wall_scene(box=(-0.25, -0.5, 2.5), frames=2, velocity=(0.05, 0.0, 0.0))
    frame = truth.render_frame(scene, 1, WIDTH, HEIGHT)
    assert frame.left_static.any() and not frame.left_static.all()  # the wall is still, the box is not
    dolly = truth.render_frame(truth.Scene(scene.surfaces, 2.0, 6.0, 2, camera_velocity=(0, 0, 0.1)), 1, WIDTH, HEIGHT)
    assert not dolly.left_static.any()


def test_scores_are_taken_per_pixel_class():
    rng = np.random.default_rng(0)
    truth_view = rng.integers(0, 256, (4, 6, 3), dtype=np.uint8)
    classes = np.full((4, 6), truth.VISIBLE, np.uint8)
    classes[:, :2] = truth.HOLE
    view = truth_view.copy()
    view[:, :2] = np.clip(truth_view[:, :2].astype(int) + 10, 0, 255)  # only the holes are wrong
    tally = viewing.Tally()
    tally.add(view, truth_view, classes)
    scores = tally.scores()
    assert scores["visible_psnr_db"] is None  # no error at all
    assert 27.0 < scores["hole_psnr_db"] < 29.0  # 20 log10(255 / ~10)
    assert scores["hole_pixels"] == 8 and scores["visible_pixels"] == 16


def test_flicker_is_split_into_the_fills_own_and_the_warps():
    still = np.zeros((2, 4), bool)
    still[:, :3] = True  # 6 still hole pixels
    painted = np.zeros((2, 4), bool)
    painted[:, :2] = True  # the fill paints 4 of them in both frames; the warp covers the other 2 in one
    before = np.zeros((2, 4, 3), np.uint8)
    now = before.copy()
    now[:, 0] = 6  # the fill's own change (2 pixels)
    now[:, 2] = 30  # the warp's (2 pixels), the same for any fill
    now[:, 3] = 90  # not still: not counted
    tally = viewing.Tally()
    tally.add_change(before, now, before, before, still, painted, "frame 0 -> 1")
    tally.add_change(now, now, before, before, still, painted, "frame 1 -> 2")  # no change
    scores = tally.scores()
    assert scores["hole_flicker"] == (2 * 6 + 2 * 30) / 12
    assert scores["fill_flicker"] == 2 * 6 / 8
    assert scores["warp_flicker"] == 2 * 30 / 12  # what a fill that never changed would score
    assert scores["largest_changes"][0] == {"change": "frame 0 -> 1", "fill_own": 12, "warp": 60}
