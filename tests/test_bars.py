"""Finding the picture in baked-in bars, on generated frames: letterbox, pillarbox, fades to black, night scenes,
subtitles drawn into a bar, bars that change mid-video (their union), and frames without bars."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from stereo3d.stereo.bars import Area, describe, picture_area

W, H = 192, 108


def scene(seed: int, brightness: float = 1.0, width: int = W, height: int = H) -> np.ndarray:
    """A textured picture (smooth blobs and noise), scaled by ``brightness``."""
    rng = np.random.default_rng(seed)
    base = cv2.resize(rng.uniform(40, 230, (6, 8, 3)).astype(np.float32), (width, height))
    noise = rng.normal(0, 8, (height, width, 3))
    return np.clip((base + noise) * brightness, 0, 255).astype(np.uint8)


def boxed(picture: np.ndarray, area: Area, noise_seed: int = 0) -> np.ndarray:
    """``picture`` placed at ``area`` of a black frame with a little compression-like noise in the bars."""
    rng = np.random.default_rng(noise_seed)
    frame = rng.integers(0, 4, (H, W, 3), dtype=np.uint8)
    area.cut(frame)[:] = picture
    return frame


LETTERBOX = Area(0, 14, W, 80)  # 2.39:1-ish in 16:9
PILLARBOX = Area(24, 0, 144, H)  # 4:3 in 16:9


def frames_in(area: Area, n: int = 12, brightness: float = 1.0) -> list[np.ndarray]:
    return [boxed(scene(k, brightness, area.width, area.height), area, k) for k in range(n)]


@pytest.mark.parametrize("area", [LETTERBOX, PILLARBOX, Area(24, 14, 144, 80)], ids=["letter", "pillar", "window"])
def test_bars_around_the_picture_are_found_exactly(area):
    assert picture_area(frames_in(area), W, H) == area


def test_a_frame_without_bars_is_all_picture():
    assert picture_area([scene(k) for k in range(8)], W, H) == Area.full(W, H)
    assert describe(Area.full(W, H), W, H) == f"picture fills the {W}x{H} frame: no bars"


def test_the_log_line_names_the_kind_of_bars():
    assert describe(LETTERBOX, W, H) == f"picture 192x80+0+14 of {W}x{H}: letterbox"
    assert describe(PILLARBOX, W, H).endswith(": pillarbox")


def test_fades_to_black_tell_nothing_and_are_skipped():
    black = [np.zeros((H, W, 3), np.uint8)] * 20
    fading = [boxed(scene(k, 0.05, W, 80), LETTERBOX) for k in range(5)]  # almost black: nearly nothing shows
    assert picture_area(black + fading + frames_in(LETTERBOX, 3), W, H) == LETTERBOX
    assert picture_area(black, W, H) == Area.full(W, H)  # a black video: nothing to cut


def test_a_night_scene_is_found_from_rows_lit_in_some_frames():
    # A dark picture (below black, flat-ish) where a light sweeps over it: each row is lit in a few frames only.
    frames = []
    for k in range(24):
        picture = scene(k, 0.08, PILLARBOX.width, PILLARBOX.height)
        top = k * PILLARBOX.height // 12 % PILLARBOX.height
        picture[top : top + PILLARBOX.height // 8] = scene(k, 1.0, PILLARBOX.width, PILLARBOX.height // 8)[
            : PILLARBOX.height - top
        ]
        frames.append(boxed(picture, PILLARBOX, k))
    assert picture_area(frames, W, H) == PILLARBOX


def test_subtitles_and_a_logo_in_the_bar_are_not_picture():
    frames = []
    for k, frame in enumerate(frames_in(LETTERBOX, 16)):
        bar_top = LETTERBOX.y + LETTERBOX.height
        cv2.putText(frame, "Where are you going?"[: 8 + k % 8], (30, bar_top + 10), cv2.FONT_HERSHEY_SIMPLEX,
                    0.35, (255, 255, 255), 1)  # fmt: skip
        frame[2:10, W - 20 : W - 4] = 200  # a channel logo in the top bar
        frames.append(frame)
    assert picture_area(frames, W, H) == LETTERBOX


def test_bars_that_change_mid_video_give_the_union_of_the_picture():
    wide = Area(0, 22, W, 64)  # 3:1 scenes
    tall = Area(0, 10, W, 88)  # scenes opening up
    area = picture_area(frames_in(wide, 10) + frames_in(tall, 4), W, H)
    assert area == Area(0, 10, W, 88)


def test_thin_bars_are_no_bars_and_sides_snap_to_even():
    # Two black rows at the top (under 1 % plus a few px): no bar. An odd picture edge widens to even.
    assert picture_area(frames_in(Area(0, 2, W, H - 2)), W, H) == Area.full(W, H)
    assert picture_area(frames_in(Area(25, 0, 141, H)), W, H) == Area(24, 0, 142, H)


def test_a_small_bright_patch_on_black_is_no_picture():
    frames = [boxed(scene(k, 1.0, 40, 30), Area(76, 40, 40, 30)) for k in range(6)]
    assert picture_area(frames, W, H) == Area.full(W, H)


def test_deep_frames_are_read_at_their_top_eight_bits():
    frames = [frame.astype(np.uint16) << 8 for frame in frames_in(PILLARBOX, 4)]
    assert picture_area(frames, W, H) == PILLARBOX


# --- the render of a picture inside bars -----------------------------------------------------------------------


def rendered(picture: Area | None, layout: str = "full_sbs", window: tuple[float, float] = (0.0, 0.0)) -> np.ndarray:
    from stereo3d.stages.render import stereo_frame
    from stereo3d.stereo.warp import Renderer, StereoSettings

    frame = boxed(scene(1, 1.0, PILLARBOX.width, PILLARBOX.height), PILLARBOX)
    rng = np.random.default_rng(5)  # a near map with strong, varied parallax at the picture's edges
    near = cv2.resize(rng.uniform(0, 1, (9, 12)).astype(np.float32), (72, 54))
    stereo = StereoSettings(divergence_pct=8.0, convergence=0.5)
    with Renderer(threads=1) as renderer:
        if picture is not None:
            stereo = stereo.inside(W, picture.width)
        return frame, stereo_frame(renderer, frame, near, stereo, layout, {}, picture=picture, window=window)


def test_kept_bars_are_the_sources_in_both_eyes_and_the_picture_edges_are_straight():
    frame, packed = rendered(PILLARBOX)
    outside = np.ones((H, W), bool)
    PILLARBOX.cut(outside)[:] = False
    for eye in (packed[:, :W], packed[:, W:]):
        assert np.array_equal(eye[outside], frame[outside])  # the bars exactly, no parallax
        for column in (PILLARBOX.x, PILLARBOX.x + PILLARBOX.width - 1):  # the picture's first and last columns
            assert (eye[:, column].max(axis=1) > 24).all()  # picture in every row, never bar
    # The same frame taken as all picture (render.bars: ignore) moves the bars' edges, row by row.
    _, whole = rendered(None)
    edges = [np.flatnonzero(whole[row, :W].max(axis=1) > 24)[[0, -1]] for row in range(H)]
    assert len({tuple(edge) for edge in edges}) > 1


def test_a_floating_window_masks_the_pictures_edges_and_leaves_the_bars_as_they_are():
    frame, plain = rendered(PILLARBOX)
    _, masked = rendered(PILLARBOX, window=(4.0, 6.0))
    outside = np.ones((H, W), bool)
    PILLARBOX.cut(outside)[:] = False
    left_edge, right_edge = PILLARBOX.x, PILLARBOX.x + PILLARBOX.width - 1
    for eye in (masked[:, :W], masked[:, W:]):
        assert np.array_equal(eye[outside], frame[outside])  # the bars exactly, no mask in them
    # The left eye's first picture columns and the right eye's last go dark; the other edges are untouched.
    assert masked[:, left_edge, :].max() == 0 and masked[:, W + right_edge, :].max() == 0
    assert np.array_equal(masked[:, left_edge + 8 : W], plain[:, left_edge + 8 : W])
    assert np.array_equal(masked[:, W : W + right_edge - 10], plain[:, W : W + right_edge - 10])


def test_a_layout_that_packs_copies_gets_the_same_eyes():
    from stereo3d.stereo.layouts import half_sbs

    _, full = rendered(PILLARBOX)
    _, half = rendered(PILLARBOX, "half_sbs")
    assert np.array_equal(half, half_sbs(full[:, :W], full[:, W:]))


def test_kept_bars_leave_the_parallax_percent_of_the_frame_width():
    from stereo3d.stereo.warp import Parallax, StereoSettings

    stereo = StereoSettings(divergence_pct=3.0, convergence=0.25, ipd_offset_pct=1.0, border_taper_pct=5.0)
    inside = Parallax.of(stereo.inside(W, PILLARBOX.width), PILLARBOX.width)
    outside = Parallax.of(stereo, W)
    assert inside.divergence_px == pytest.approx(outside.divergence_px)
    assert inside.ipd_px == pytest.approx(outside.ipd_px)
    assert np.flatnonzero(inside.ramp < 1).size == np.flatnonzero(outside.ramp < 1).size  # the taper's pixels
