"""Stereo rendering: parallax direction, occlusion order, hole filling from the background side."""

import os

import cv2
import numpy as np
import pytest

from stereo3d.stereo import fill
from stereo3d.stereo.warp import Renderer, StereoSettings, parallax_px

CPU = Renderer()  # every CPU; the tests of this module share its threads


def ramp_image(width=12, height=1):
    row = np.arange(width, dtype=np.uint8) * 10
    return np.repeat(row[None, :, None], 3, axis=2).repeat(height, axis=0)


def test_nearer_pixels_win_where_two_land_on_one_place():
    image = ramp_image()
    shift = np.zeros((1, 12), np.float32)
    shift[0, 4:6] = 2  # an object two columns wide moves right over the background
    out = CPU.warp_view(image, shift)[0, :, 0] // 10
    assert list(out[6:8]) == [4, 5]  # the object covers background columns 6 and 7


def test_disocclusions_are_filled_from_the_background_side():
    image = ramp_image()
    shift = np.zeros((1, 12), np.float32)
    shift[0, 4:6] = 2
    out = CPU.warp_view(image, shift)[0, :, 0] // 10
    assert list(out[4:6]) == [3, 3]  # the gap left behind repeats background column 3, not the object


def test_left_and_right_views_shift_near_content_in_opposite_directions():
    frame = np.zeros((8, 40, 3), np.uint8)
    frame[:, 18:22] = 255  # a bright bar
    near = np.zeros((8, 40), np.float32)
    near[:, 18:22] = 1.0  # ...that is near
    settings = StereoSettings(divergence_pct=20, convergence=0.5, edge_dilate_px=0)
    left, right = CPU.render_stereo(frame, near, settings)
    centre = lambda view: np.nonzero(view[4, :, 0] == 255)[0].mean()  # noqa: E731
    assert centre(left) > 19.5 > centre(right)


def test_convergence_sets_the_zero_parallax_plane():
    near = np.array([[0.0, 0.5, 1.0]], np.float32)
    behind = parallax_px(near, 100, StereoSettings(divergence_pct=2, convergence=0.0))
    in_front = parallax_px(near, 100, StereoSettings(divergence_pct=2, convergence=1.0))
    assert np.all(behind <= 0) and behind[0, 2] == 0
    assert np.all(in_front >= 0) and in_front[0, 0] == 0


def bar_scene(width=60, height=6):
    """A bright near bar over a dark far background."""
    frame = np.zeros((height, width, 3), np.uint8)
    frame[:, 28:32] = 255
    near = np.zeros((height, width), np.float32)
    near[:, 28:32] = 1.0
    return frame, near


def bar_centre(view):
    """Brightness-weighted centre of the bar (edge pixels are half-covered blends or background-filled)."""
    weight = view[3, :, 0].astype(float)
    return float((weight * np.arange(weight.size)).sum() / weight.sum())


def test_right_view_also_lets_nearer_pixels_win_and_fills_from_its_background_side():
    image = ramp_image()
    shift = np.zeros((1, 12), np.float32)
    shift[0, 6:8] = 2  # the object moves left by 2 in the right view (mirror of the left-view case)
    out = CPU.warp_view(image[:, ::-1], shift[:, ::-1])[:, ::-1][0, :, 0] // 10
    assert list(out[4:6]) == [6, 7] and list(out[6:8]) == [8, 8]


def test_a_uniform_shift_repeats_the_border_column_it_uncovers():
    image = np.repeat((np.arange(40, dtype=np.uint8) * 6)[None, :, None], 3, axis=2)
    left = CPU.warp_view(image, np.full((1, 40), -12.0, np.float32))[0, :, 0] // 6
    right = CPU.warp_view(image, np.full((1, 40), 12.0, np.float32))[0, :, 0] // 6
    assert list(left[:28]) == list(range(12, 40)) and (left[28:] == 39).all()
    assert (right[:12] == 0).all() and list(right[12:]) == list(range(28))


def test_divergence_scales_the_separation_of_the_eyes():
    frame, near = bar_scene()
    for divergence, expected in ((5, 3.0), (10, 6.0)):
        # Convergence 1: the background (near 0) is the screen plane, the bar comes out by the full divergence.
        left, right = CPU.render_stereo(frame, near, StereoSettings(divergence, 1.0, 0))
        assert bar_centre(left) - bar_centre(right) == pytest.approx(expected, abs=0.75)  # % of 60 px
        # Convergence 0: the bar (near 1) is the screen plane and stays put in both eyes.
        left, right = CPU.render_stereo(frame, near, StereoSettings(divergence, 0.0, 0))
        assert (left[:, 28:32] == 255).all() and (right[:, 28:32] == 255).all()


def test_ipd_offset_moves_the_whole_scene_behind_the_screen():
    frame, near = bar_scene()
    base = StereoSettings(10, 0.5, 0)
    left0, right0 = CPU.render_stereo(frame, near, base)
    left, right = CPU.render_stereo(frame, near, StereoSettings(10, 0.5, 0, ipd_offset_pct=10))
    # +10 % of 60 px = 6 px more uncrossed parallax: the left view moves 3 px left, the right 3 px right.
    assert bar_centre(left) == pytest.approx(bar_centre(left0) - 3, abs=0.75)
    assert bar_centre(right) == pytest.approx(bar_centre(right0) + 3, abs=0.75)


def test_border_taper_keeps_zero_parallax_at_the_frame_edges():
    near = np.ones((2, 100), np.float32)
    tapered = parallax_px(near, 100, StereoSettings(10, 0.5, 0, border_taper_pct=20))
    assert tapered[0, 0] == 0 and tapered[0, -1] == 0
    assert tapered[0, 50] == pytest.approx(5.0) and 0 < tapered[0, 10] < 5.0


def near_at_frame_size(near, shape, edge_dilate_px):
    """The near map as the parallax definition takes it, in float: bilinear to the frame's size, then its
    foreground (larger values) grown by ``edge_dilate_px`` along rows."""
    height, width = shape
    if near.shape != shape:
        near = cv2.resize(near, (width, height), interpolation=cv2.INTER_LINEAR)
    if edge_dilate_px:
        near = cv2.dilate(near, np.ones((1, 2 * edge_dilate_px + 1), np.uint8))
    return near


def test_edge_dilation_grows_the_foreground_sideways_only():
    # Parallax is horizontal: the foreground's edge pixels must travel with it sideways, but the rows above and
    # below it keep the background's shift (a vertical grow would move them sideways with the foreground).
    from stereo3d.stereo.warp import fixed_shift_of_near

    near = np.zeros((20, 40), np.float32)
    near[8:12, 15:25] = 1.0
    settings = StereoSettings(divergence_pct=10.0, convergence=0.5, edge_dilate_px=2)
    values = fixed_shift_of_near(near, near.shape, settings, 1.0).values
    background, foreground = values[0, 0], values[10, 20]
    assert foreground > background
    assert (values[8:12, 13:27] == foreground).all()  # 2 px wider on both sides
    assert (values[8:12, :13] == background).all() and (values[8:12, 27:] == background).all()
    assert (values[:8] == background).all() and (values[12:] == background).all()  # no row above or below moves


@pytest.mark.parametrize("taper", [False, True])
def test_the_renderers_fixed_point_shift_is_the_float_parallax_rounded_to_its_grid(taper):
    # The renderer's shift (share x parallax in 1/2**bits px) against parallax_px of the same near map brought to
    # frame size in float: each rounding to the grid costs at most half a step (the taper's ramp only shrinks an
    # earlier error), so one rounding at frame size, two with a resize or a taper, three with both; and the shift
    # never strays more than one step from the float parallax rounded to the grid.
    from stereo3d.stereo.warp import fixed_shift_of_near

    rng = np.random.default_rng(25 + taper)
    worst = {}
    for _ in range(120):
        height, width = int(rng.integers(1, 90)), int(rng.choice([int(rng.integers(2, 700)), 2500]))
        shape = (height, width)
        near_shape = shape if rng.random() < 0.3 else (int(rng.integers(1, 60)), int(rng.integers(1, 300)))
        near = rng.random(near_shape).astype(np.float32)
        if rng.random() < 0.5:  # flat regions with sharp edges, as segmented depth has them
            near = np.round(near * 6).astype(np.float32) / 6
        settings = StereoSettings(
            divergence_pct=float(rng.uniform(-10, 10)),
            convergence=float(rng.uniform(0, 1)),
            edge_dilate_px=int(rng.integers(0, 4)),
            ipd_offset_pct=float(rng.choice([0.0, rng.uniform(-5, 5)])),
            border_taper_pct=float(rng.uniform(0, 50)) if taper else 0.0,
            original_eye=str(rng.choice(["none", "left"])),
        )
        share = 0.5 if settings.original_eye == "none" else 1.0
        shift = fixed_shift_of_near(near, shape, settings, share)
        parallax = parallax_px(near_at_frame_size(near, shape, settings.edge_dilate_px), width, settings)
        exact = parallax.astype(np.float64) * share * (1 << shift.bits)
        resized, tapered = near_shape != shape, settings.border_taper_pct / 100 * width >= 1
        error = float(np.abs(shift.values - exact).max())
        assert error <= (1 + resized + tapered) / 2 + 1 / 128, (settings, shape, near_shape)  # + float32's error
        assert np.abs(shift.values - np.rint(exact)).max() <= 1, (settings, shape, near_shape)
        worst[resized, tapered] = max(worst.get((resized, tapered), 0.0), error)
    print({f"resized={r} tapered={t}": round(e, 4) for (r, t), e in sorted(worst.items())})
    assert {(False, taper), (True, taper)} <= set(worst)  # both cases were met


def test_one_eye_can_stay_the_original_while_the_other_takes_all_parallax():
    frame, near = bar_scene()
    settings = StereoSettings(10, 1.0, 0, original_eye="left")
    left, right = CPU.render_stereo(frame, near, settings)
    assert left is frame
    assert bar_centre(left) - bar_centre(right) == pytest.approx(6.0, abs=0.75)  # the full separation in one eye
    left, right = CPU.render_stereo(frame, near, StereoSettings(10, 1.0, 0, original_eye="right"))
    assert right is frame and bar_centre(left) - bar_centre(right) == pytest.approx(6.0, abs=0.75)


def test_unknown_original_eye_is_refused():
    with pytest.raises(ValueError, match="original_eye"):
        StereoSettings(original_eye="both")


def test_edge_dilation_makes_the_foreground_edge_travel_with_the_foreground():
    frame, near = bar_scene()
    frame[:, 27] = 128  # an anti-aliased edge pixel that the near map calls background
    plain, _ = CPU.render_stereo(frame, near, StereoSettings(20, 0.0, 0))
    grown, _ = CPU.render_stereo(frame, near, StereoSettings(20, 0.0, 1))
    # Without dilation the grey edge stays behind with the background; with it, it moves with the bar.
    assert (plain[3, :, 0] == 128).sum() >= 1 and np.nonzero(plain[3, :, 0] == 128)[0].min() < 27
    assert np.nonzero(grown[3, :, 0] == 128)[0].min() >= 27


def test_sub_pixel_shifts_resample_instead_of_rounding():
    image = np.repeat((np.arange(40, dtype=np.uint8) * 6)[None, :, None], 3, axis=2)
    out = CPU.warp_view(image, np.full((1, 40), 0.5, np.float32))
    assert out[0, 20, 0] == pytest.approx((image[0, 19, 0] + image[0, 20, 0]) / 2, abs=1)


def test_sixteen_bit_frames_render_the_same_views_as_eight_bit_ones():
    rng = np.random.default_rng(5)
    frame = rng.integers(0, 256, (8, 64, 3)).astype(np.uint8)
    near = rng.random((8, 64)).astype(np.float32)
    settings = StereoSettings(10, 0.5, 1)
    deep = CPU.render_stereo(frame.astype(np.uint16) * 257, near, settings)
    shallow = CPU.render_stereo(frame, near, settings)
    for view16, view8 in zip(deep, shallow, strict=True):
        assert view16.dtype == np.uint16
        # The same resampling at 16 bits: within the half step of 8-bit rounding (257 / 2) of the 8-bit view.
        assert np.abs(view16.astype(np.int64) - view8.astype(np.int64) * 257).max() <= 129


def bilinear_upscale(small, height, width):
    """Bilinear resize with pixel centres aligned and edges clamped (what any image library calls bilinear)."""
    rows, cols = small.shape
    ys = np.clip((np.arange(height) + 0.5) * rows / height - 0.5, 0, rows - 1)
    xs = np.clip((np.arange(width) + 0.5) * cols / width - 0.5, 0, cols - 1)
    wide = np.array([np.interp(xs, np.arange(cols), row) for row in small.astype(np.float64)])
    return np.array([np.interp(ys, np.arange(rows), column) for column in wide.T]).T.astype(np.float32)


def test_near_maps_of_another_size_are_resized_to_the_frame():
    frame, near = bar_scene(width=64, height=8)
    small = near[::2, ::2]
    settings = StereoSettings(10, 1.0, 0, depth_upsample="bilinear")
    left, right = CPU.render_stereo(frame, small, settings)
    assert left.shape == frame.shape and right.shape == frame.shape
    # The views of the half-size map are those of the same map upscaled to the frame beforehand (bilinear: the
    # bar's edges get a ramp of parallax), within the rounding of the renderer's fixed-point shifts.
    ref_left, ref_right = CPU.render_stereo(frame, bilinear_upscale(small, 8, 64), settings)
    assert np.abs(left.astype(int) - ref_left).max() <= 16 and np.abs(right.astype(int) - ref_right).max() <= 16
    # ...and the bar did come out of the screen: the eyes see it apart, the left eye on the right.
    assert bar_centre(left) - bar_centre(right) > 3
    assert (left[:, :20] == 0).all() and (right[:, 44:] == 0).all()


def test_depth_edges_of_a_small_map_land_on_the_pictures_edges():
    # A bar whose edges fall inside the half-size map's samples (columns 29 and 35): the small map blends bar and
    # background there. Enlarged with its edges on the picture's, the views are those of the exact full-size map;
    # enlarged bilinearly, the edges are sheared.
    frame = np.zeros((8, 64, 3), np.uint8)
    frame[:, 29:35] = 255
    near = np.zeros((8, 64), np.float32)
    near[:, 29:35] = 1.0
    small = cv2.resize(near, (32, 4), interpolation=cv2.INTER_AREA)
    exact = CPU.render_stereo(frame, near, StereoSettings(10, 1.0, 0))
    edges = CPU.render_stereo(frame, small, StereoSettings(10, 1.0, 0, depth_upsample="edges"))
    bilinear = CPU.render_stereo(frame, small, StereoSettings(10, 1.0, 0, depth_upsample="bilinear"))
    for a, b, c in zip(exact, edges, bilinear, strict=True):
        assert np.array_equal(a, b)
        assert not np.array_equal(a, c)


def test_a_gap_thinner_than_the_maps_samples_takes_the_depth_of_what_it_shows(monkeypatch):
    # A post two pixels wide, one background pixel, then a box: at a quarter of the size, the samples around the gap
    # blend post, background and box, and none holds the background's depth. The gap's pixel matches none of its
    # four samples and finds the background's depth two samples away; its four alone would give it the box's.
    from stereo3d.stereo import upsample

    frame = np.zeros((8, 64, 3), np.uint8)
    near = np.zeros((8, 64), np.float32)
    frame[:, 28:30], near[:, 28:30] = 255, 1.0
    frame[:, 31:44], near[:, 31:44] = (200, 40, 40), 0.5
    small = np.rint(cv2.resize(near, (16, 2), interpolation=cv2.INTER_AREA) * 1000).astype(np.int16)

    def picked():
        enlarged = np.empty((8, 64), np.int16)
        upsample.enlarge(small, enlarged, frame, threshold=50)
        return enlarged

    wide = picked()
    assert (wide[:, 30] == 0).all()  # the gap: background
    assert (wide[:, 31:44] == 500).all() and (wide[:, 20:28] == 0).all() and (wide[:, 44:] == 0).all()
    monkeypatch.setattr(upsample, "REACH", 0)
    assert (picked()[:, 30] == 500).all()


def test_a_pixel_at_a_soft_edge_takes_a_surfaces_depth_over_the_blend_of_both(monkeypatch):
    # A box's edge softened over two pixels (levels 160 and 90 between the box's 200 and the background's 40): at a
    # quarter of the size, one sample blends both, in colour (122.5) and depth (500). The pixel of level 160 lies
    # a little nearer that blend's colour than the box's, yet takes the box's depth: a blend's depth belongs to
    # neither surface (its pixel would be sheared between them in the views). The pixel of level 90, far nearer
    # the blend than either surface, keeps the blend.
    from stereo3d.stereo import upsample

    frame = np.zeros((8, 64, 3), np.uint8)
    near = np.zeros((8, 64), np.float32)
    frame[:, :29], near[:, :30] = 200, 1.0
    frame[:, 29], frame[:, 30], frame[:, 31:] = 160, 90, 40
    small = np.rint(cv2.resize(near, (16, 2), interpolation=cv2.INTER_AREA) * 1000).astype(np.int16)
    assert small[0, 7] == 500

    def picked():
        enlarged = np.empty((8, 64), np.int16)
        upsample.enlarge(small, enlarged, frame, threshold=50)
        return enlarged

    wide = picked()
    assert (wide[:, :30] == 1000).all() and (wide[:, 30] == 500).all() and (wide[:, 31:] == 0).all()
    monkeypatch.setattr(upsample, "MIXED_COST", 0.0)
    assert (picked()[:, 29] == 500).all()


def test_large_frames_render_the_same_in_parallel_and_serially(monkeypatch):
    from stereo3d.stereo import warp as render

    rng = np.random.default_rng(0)
    frame = rng.integers(0, 255, (640, 640, 3)).astype(np.uint8)  # three bands of rows: up to 3 slices a view
    near = rng.random((64, 64)).astype(np.float32)
    serial = []
    for threads in (1, 2, 5, None):  # None: every CPU; 5: three slices per view, a lone eye's included
        with Renderer(threads=threads) as renderer:
            assert renderer.threads == (threads or len(os.sched_getaffinity(0)))
            views = [renderer.render_stereo(frame, near, StereoSettings(original_eye=eye)) for eye in ("none", "left")]
        serial = serial or views
        assert all(np.array_equal(a, b) for pair, ref in zip(views, serial) for a, b in zip(pair, ref))
    monkeypatch.setattr(render, "_PARALLEL_MIN_PIXELS", 10**9)
    small = CPU.render_stereo(frame, near, StereoSettings())
    assert all(np.array_equal(a, b) for a, b in zip(small, serial[0]))


def splat_reference(shift_row):
    """The warp rule of stereo3d.stereo.splat, one pixel at a time: source column x lands on round(x + shift), half
    up; it is hidden unless it lands beyond every column to its left; what it shows there is its sub-pixel
    position. Returns each pixel's position and whether it is a hole (claimed by nobody); a hole's position is its
    hidden position, the last claimed position to its left carried on by its distance (the background's shift), or
    its own column when nothing lies to its left."""
    width = len(shift_row)
    claimed = [None] * width
    reach = -np.inf
    for x, shift in enumerate(shift_row.astype(np.float64)):
        target = int(np.floor(x + shift + 0.5))
        if target > reach and 0 <= target < width:
            claimed[target] = target - shift
        reach = max(reach, target)
    positions, holes, last, at = [], [], None, None
    for target, value in enumerate(claimed):
        if value is not None:
            last, at = value, target
        positions.append(value if value is not None else target if last is None else last + (target - at))
        holes.append(value is None)
    return np.array(positions), np.array(holes)


def fill_reference(image_row_values, positions, holes, radius):
    """The background-side fill of a left view (stereo3d.stereo.fill), on one channel: each hole run repeats the
    source pixel at its left neighbour's position rounded half down (column 0 at the frame's edge); then each hole
    pixel is the mean, rounded half up, of the repeated values of its column's holes within ``radius`` rows."""
    height, width = holes.shape
    repeated = np.zeros((height, width))
    for y in range(height):
        for x in range(width):
            if holes[y, x]:
                start = x
                while start > 0 and holes[y, start - 1]:
                    start -= 1
                column = 0 if start == 0 else int(np.ceil(positions[y, start - 1] - 0.5))
                repeated[y, x] = image_row_values[min(max(column, 0), width - 1)]
    out = np.full((height, width), np.nan)
    for y, x in zip(*np.nonzero(holes)):
        rows = [r for r in range(max(0, y - radius), min(height, y + radius + 1)) if holes[r, x]]
        out[y, x] = np.floor(np.mean([repeated[r, x] for r in rows]) + 0.5)
    return out


def layered_shifts(rng, rows, width, spread):
    """Rows of piecewise-constant shifts (surfaces 3..40 px wide at random depths), on the 1/32 px grid the
    renderer resolves at this width, so that the reference and the renderer see the same numbers."""
    out = np.empty((rows, width), np.float32)
    for row in out:
        x = 0
        while x < width:
            run = int(rng.integers(3, 41))
            row[x : x + run] = np.round(rng.uniform(-spread, spread) * 32) / 32
            x += run
    return out


@pytest.mark.parametrize("spread", [0.7, 20.0, 150.0])  # sub-pixel; typical; wider than the frame's half
def test_both_views_follow_the_pixel_by_pixel_splat_rule(spread):
    width = 300
    shift = layered_shifts(np.random.default_rng(int(spread * 10)), 6, width, spread)
    # Column-coded image: every view pixel tells the (clamped) source column it was resampled at, exactly.
    image = np.repeat((np.arange(width, dtype=np.uint16) * 64)[None, :, None], 3, axis=2).repeat(6, axis=0)
    # Divergence of 1 px per unit of near and convergence 1 make the parallax equal to the near map itself.
    settings = dict(divergence_pct=100 / width, convergence=1.0, edge_dilate_px=0)
    left, _ = CPU.render_stereo(image, shift, StereoSettings(**settings, original_eye="right"))
    _, right = CPU.render_stereo(image, shift, StereoSettings(**settings, original_eye="left"))
    left_positions, left_holes = map(np.array, zip(*(splat_reference(row) for row in shift)))
    right_positions, right_holes = map(np.array, zip(*(splat_reference(row) for row in shift[:, ::-1])))
    right_positions, right_holes = (width - 1) - right_positions[:, ::-1], right_holes[:, ::-1]
    seen = ~left_holes
    np.testing.assert_array_equal(left[..., 0][seen] / 64, np.clip(left_positions, 0, width - 1)[seen])
    seen = ~right_holes
    np.testing.assert_array_equal(right[..., 0][seen] / 64, np.clip(right_positions, 0, width - 1)[seen])
    # The holes: filled from the background side (the right view's is the left view's rule mirrored).
    filled = fill_reference(image[0, :, 0].astype(float), left_positions, left_holes, fill.SMOOTH_ROWS)
    np.testing.assert_array_equal(left[..., 0][left_holes], filled[left_holes])
    mirrored = fill_reference(image[0, ::-1, 0].astype(float), (width - 1) - right_positions[:, ::-1],
                              right_holes[:, ::-1], fill.SMOOTH_ROWS)[:, ::-1]  # fmt: skip
    np.testing.assert_array_equal(right[..., 0][right_holes], mirrored[right_holes])
    assert left_holes.any() and right_holes.any()
