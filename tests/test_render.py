"""Stereo rendering: parallax direction, occlusion order, hole filling from the background side."""

import numpy as np

from stereo3d.render import StereoSettings, compose, parallax_px, render_stereo, warp_view


def ramp_image(width=12, height=1):
    row = np.arange(width, dtype=np.uint8) * 10
    return np.repeat(row[None, :, None], 3, axis=2).repeat(height, axis=0)


def test_nearer_pixels_win_where_two_land_on_one_place():
    image = ramp_image()
    shift = np.zeros((1, 12), np.float32)
    shift[0, 4:6] = 2  # an object two columns wide moves right over the background
    out = warp_view(image, shift)[0, :, 0] // 10
    assert list(out[6:8]) == [4, 5]  # the object covers background columns 6 and 7


def test_disocclusions_are_filled_from_the_background_side():
    image = ramp_image()
    shift = np.zeros((1, 12), np.float32)
    shift[0, 4:6] = 2
    out = warp_view(image, shift)[0, :, 0] // 10
    assert list(out[4:6]) == [3, 3]  # the gap left behind repeats background column 3, not the object


def test_left_and_right_views_shift_near_content_in_opposite_directions():
    frame = np.zeros((8, 40, 3), np.uint8)
    frame[:, 18:22] = 255  # a bright bar
    near = np.zeros((8, 40), np.float32)
    near[:, 18:22] = 1.0  # ...that is near
    settings = StereoSettings(divergence_pct=20, convergence=0.5, edge_dilate_px=0)
    left, right = render_stereo(frame, near, settings)
    centre = lambda view: np.nonzero(view[4, :, 0] == 255)[0].mean()  # noqa: E731
    assert centre(left) > 19.5 > centre(right)


def test_convergence_sets_the_zero_parallax_plane():
    near = np.array([[0.0, 0.5, 1.0]], np.float32)
    behind = parallax_px(near, 100, StereoSettings(divergence_pct=2, convergence=0.0))
    in_front = parallax_px(near, 100, StereoSettings(divergence_pct=2, convergence=1.0))
    assert np.all(behind <= 0) and behind[0, 2] == 0
    assert np.all(in_front >= 0) and in_front[0, 0] == 0


def test_full_sbs_doubles_the_width():
    left = np.zeros((4, 6, 3), np.uint8)
    assert compose(left, left + 1, "full_sbs").shape == (4, 12, 3)
