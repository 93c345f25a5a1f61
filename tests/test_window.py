"""Screen edges: the window-violation figure, the floating window's geometry, its plan over time and the render
with and without it."""

import json

import numpy as np
import pytest

from stereo3d.io.decode import FrameReader
from stereo3d.io.mapstore import write_maps
from stereo3d.io.probe import probe_video
from stereo3d.qc import figures, tables
from stereo3d.qc import stats as qc_stats
from stereo3d.stages.render import EncodeSettings, RenderSettings, render_video, stereo_frame
from stereo3d.stereo.warp import Renderer, StereoSettings
from stereo3d.stereo.window import (
    VIOLATION_PCT,
    apply_floating_window,
    edge_alpha,
    edge_parallax,
    effective_edge,
    reach_frames,
    smooth_widths,
    window_widths,
)

FPS = 24.0
# Parallax of near 1 at frame width W: (1 - 0.5) * 10 % of W, i.e. 4.8 px at 96 columns.
STEREO = StereoSettings(divergence_pct=10.0, convergence=0.5, edge_dilate_px=0)


@pytest.fixture(scope="module")
def cpu():
    with Renderer("cpu") as renderer:
        yield renderer


def disk_maps(frames: int, width: int = 96, height: int = 54, left: bool = True) -> np.ndarray:
    """Near maps (near 0.2 behind a near-1 disk) of a disk sliding from the centre out across one edge."""
    yy, xx = np.mgrid[0:height, 0:width].astype(np.float32)
    maps = np.full((frames, height, width), 0.2, np.float32)
    for t in range(frames):
        travel = width * 0.8 * t / max(1, frames - 1)
        cx = width / 2 - travel if left else width / 2 + travel
        maps[t][(xx - cx) ** 2 + (yy - height / 2) ** 2 < (height / 4) ** 2] = 1.0
    return maps


def test_a_window_masks_the_left_eyes_left_edge_and_the_right_eyes_right_edge():
    left, right = np.full((4, 40, 3), 200, np.uint8), np.full((4, 40, 3), 200, np.uint16)
    apply_floating_window(left, right, 6.0, 0.0)
    assert (left[:, :4] < 20).all() and (left[:, 9:] == 200).all()  # black up to the ramp, untouched past it
    assert (right == 200).all()
    apply_floating_window(left * 0 + 200, right, 0.0, 6.0)
    assert (right[:, -4:] < 20).all() and (right[:, :-9] == 200).all()
    # The ramp is eased: it rises monotonically, and is half dark at the width.
    alpha = edge_alpha(40, 6.0)
    assert (np.diff(alpha) >= 0).all() and abs(effective_edge(alpha) - 6.0) < 0.05


def test_the_window_puts_the_edge_in_front_of_the_content_it_cuts(cpu):
    """The renderer moves in-front content right in the left view (parallax = x_left - x_right > 0); the window
    masks the left eye's left edge w wide, so that edge's parallax is +w: in front, and at least the content's."""
    frame = np.zeros((8, 96, 3), np.uint8)
    frame[:, 40:44] = 255  # a bar, all of it in front of the screen (near 1)
    near = np.ones((8, 96), np.float32)
    left, right = cpu.render_stereo(frame, near, STEREO)
    x_left, x_right = np.argmax(left[4, :, 0] > 128), np.argmax(right[4, :, 0] > 128)
    assert x_left - x_right > 0  # in front = crossed: further right in the left view

    edge_left, edge_right = edge_parallax(near, 96, STEREO)
    assert edge_left == pytest.approx(4.8, abs=1e-4) and edge_right == pytest.approx(4.8, abs=1e-4)
    image = np.full((8, 96, 3), 200, np.uint8)
    masked = stereo_frame(cpu, image, near, STEREO, "full_sbs", {}, window=(edge_left, edge_right))
    left_view, right_view = masked[:, :96], masked[:, 96:]
    ratio = left_view[4, :, 0] / 200.0
    left_edge_of_left_eye, left_edge_of_right_eye = effective_edge(ratio), effective_edge(right_view[4, :, 0] / 200)
    assert left_edge_of_left_eye - left_edge_of_right_eye >= edge_left - 0.05  # the window's parallax covers it
    right_edge_of_right_eye = 96 - effective_edge(right_view[4, ::-1, 0] / 200.0)
    assert (96 - effective_edge(left_view[4, ::-1, 0] / 200.0)) - right_edge_of_right_eye >= edge_right - 0.05


def test_the_edge_figure_counts_only_in_front_content_near_the_edge_and_the_taper_lowers_it():
    far_edge = np.ones((8, 96), np.float32)
    far_edge[:, :8] = 0.2  # behind the screen at the left edge
    assert edge_parallax(far_edge, 96, STEREO)[0] == 0.0
    near = np.ones((8, 400), np.float32)  # a band of 4 columns, a taper of 8
    plain = edge_parallax(near, 400, STEREO)[0]
    tapered = edge_parallax(near, 400, StereoSettings(10.0, 0.5, 0, border_taper_pct=2.0))[0]
    assert 0.0 < tapered < plain
    # Measured at frame width from a smaller map, as the renderer scales it.
    assert edge_parallax(near[:, :24], 400, STEREO)[0] == pytest.approx(plain)


def test_the_window_rises_before_the_content_arrives_falls_slowly_and_never_jumps():
    need = np.zeros((240, 2))
    need[100:130, 0] = 8.0  # a near object at the left edge for 30 frames
    widths = smooth_widths(need, FPS)
    release, attack = reach_frames(FPS)
    assert (widths >= need).all()
    assert (widths[:, 1] == 0).all()  # nothing at the right edge: no mask there
    assert widths[100 - attack, 0] == 0 and widths[100 - attack // 2, 0] > 0  # met early
    assert widths[129 + release // 2, 0] > 0 and (widths[130 + release :, 0] == 0).all()  # let go slowly
    assert np.abs(np.diff(widths, axis=0)).max() <= 1.5 * 8.0 / attack + 1e-9
    assert (smooth_widths(np.zeros((50, 2)), FPS) == 0).all()


def test_qc_counts_window_violations_of_a_disk_crossing_the_left_edge(tmp_path):
    maps = disk_maps(24)
    write_maps(tmp_path / "depth.maps", 1.0 / (0.5 + maps), "log")
    write_maps(tmp_path / "near.maps", maps, "linear")
    expected = np.array([edge_parallax(m, 96, STEREO)[0] > VIOLATION_PCT / 100 * 96 for m in maps])
    assert 0 < expected.sum() < 24  # the disk starts inside the frame and ends across the edge
    drawn = {}
    for mode in ("off", "auto"):
        settings = StereoSettings(10.0, 0.5, 0, floating_window=mode)
        stats = qc_stats.map_statistics([tmp_path / "depth.maps"], [tmp_path / "near.maps"], settings, (2.0, 98.0),
                                        3.0, frame_width=96, fps=FPS)  # fmt: skip
        window = stats["window"]
        assert window["violation_frames"] == expected.sum()
        assert window["worst_pct"] == pytest.approx(5.0, abs=1e-3)  # near 1 at 10 % divergence, zero plane 0.5
        assert window["after_window_pct"] == (0.0 if mode == "auto" else pytest.approx(100 * expected.mean()))
        assert stats["window_per_frame"].shape == (24, 4)
        stats.pop("flicker_raw"), stats.pop("flicker_stabilised")
        per_frame, window_per_frame = stats.pop("parallax_per_frame"), stats.pop("window_per_frame")
        times = np.arange(24) / FPS
        drawn[mode] = figures.parallax_figure(times, per_frame, 3.0, stats, "clip.mp4", window_per_frame)
        drawn["none"] = figures.parallax_figure(times, per_frame, 3.0, stats, "clip.mp4")
    # The figure draws the edges' parallax as a curve across the plot (far more pixels than its legend's sample),
    # and the floating window's width only where one is drawn (auto).
    curve = 300
    assert coloured(drawn["auto"], figures.EDGE_COLOUR) > curve and coloured(drawn["off"], figures.EDGE_COLOUR) > curve
    assert coloured(drawn["auto"], figures.WINDOW_COLOUR) > curve / 2  # dashed
    assert coloured(drawn["off"], figures.WINDOW_COLOUR) == 0
    assert coloured(drawn["none"], figures.EDGE_COLOUR) == coloured(drawn["none"], figures.WINDOW_COLOUR) == 0
    # The library table has a column for it.
    (tmp_path / "stats.json").write_text(json.dumps({"video": "clip.mp4", "frames": 24, "duration_s": 1.0, **stats}))
    (row,) = tables.library_table([tmp_path / "stats.json"], tmp_path / "videos.html")
    assert row["window violations %"] == pytest.approx(100 * expected.mean())
    assert row["after floating window %"] == 0.0


def coloured(image: np.ndarray, colour: str) -> int:
    """Pixels of a BGR figure within a few levels of the matplotlib colour ``colour`` (#rrggbb)."""
    bgr = np.array([int(colour[i : i + 2], 16) for i in (5, 3, 1)])
    return int((np.abs(image.astype(int) - bgr).max(axis=2) <= 12).sum())


def test_a_segments_window_is_the_whole_videos(tmp_path):
    maps = disk_maps(60)
    write_maps(tmp_path / "whole.maps", maps, "linear", attrs={"start": 0})
    stores = []
    for start in range(0, 60, 20):
        stores.append(tmp_path / f"{start}.maps")
        write_maps(stores[-1], maps[start : start + 20], "linear", attrs={"start": start})
    whole = window_widths([tmp_path / "whole.maps"], 0, 60, 96, STEREO, FPS)
    assert whole.max() > 0
    for k, start in enumerate(range(0, 60, 20)):
        own_first = [stores[k], *stores[:k], *stores[k + 1 :]]
        np.testing.assert_array_equal(window_widths(own_first, start, 20, 96, STEREO, FPS), whole[start : start + 20])


def test_the_render_is_unchanged_where_no_window_is_needed_and_masked_where_one_is(tmp_path, cpu):
    from stereo3d.demo.samples import make_clip

    source = make_clip(tmp_path / "clip.mp4", width=96, height=54, frames=12)
    probe = probe_video(source)
    fast = EncodeSettings(preset="ultrafast")
    quiet = np.full((12, 54, 96), 0.2, np.float32)
    quiet[:, 20:30, 30:60] = 1.0  # near, but far from the edges
    write_maps(tmp_path / "quiet.maps", quiet, "linear", attrs={"start": 0})
    write_maps(tmp_path / "edge.maps", disk_maps(12), "linear", attrs={"start": 0})
    outs = {}
    for maps in ("quiet", "edge"):
        for mode in ("off", "auto"):
            outs[maps, mode] = tmp_path / f"{maps}-{mode}.mkv"
            settings = StereoSettings(10.0, 0.5, 0, floating_window=mode)
            render_video(source, probe, tmp_path / f"{maps}.maps", outs[maps, mode],
                         RenderSettings(stereo=settings, encode=fast), renderer=cpu)  # fmt: skip
    assert outs["quiet", "off"].read_bytes() == outs["quiet", "auto"].read_bytes()

    def left_edge_means(path):
        with FrameReader(path, probe_video(path)) as frames:
            return np.array([(f[:, :2].mean(), f[:, 96:98].mean()) for f in frames])  # left eye, right eye

    off, auto = left_edge_means(outs["edge", "off"]), left_edge_means(outs["edge", "auto"])
    assert (auto[-4:, 0] < 0.2 * off[-4:, 0]).all()  # the left eye's left edge is black once the disk is there
    np.testing.assert_allclose(auto[:, 1], off[:, 1], atol=3)  # the right eye's left edge is not masked
