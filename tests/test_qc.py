"""Report figures and tables: numbers on synthetic maps with known answers, pictures with the right shape."""

import json

import cv2
import matplotlib.colors as mcolors
import numpy as np
import pytest

from stereo3d.io.mapstore import write_maps
from stereo3d.io.probe import probe_video
from stereo3d.qc import figures, report, tables
from stereo3d.qc import stats as qc_stats
from stereo3d.stabilisers import NearSettings
from stereo3d.stages.near_maps import make_near_maps
from stereo3d.stages.near_plan import make_near_plan
from stereo3d.stereo.warp import StereoSettings


def _stores(tmp_path, depth_frames, near_frames, split=None):
    """Depth and near stores, optionally split into segments at ``split``."""
    cuts = [0, split, len(depth_frames)] if split else [0, len(depth_frames)]
    depth, near = [], []
    for k, (a, b) in enumerate(zip(cuts, cuts[1:])):
        depth.append(tmp_path / f"depth-{k}.maps")
        near.append(tmp_path / f"near-{k}.maps")
        write_maps(depth[-1], depth_frames[a:b], "log")
        write_maps(near[-1], near_frames[a:b], "linear")
    return depth, near


def _ramp(h=24, w=32):
    return np.tile(np.linspace(0.0, 1.0, w, dtype=np.float32), (h, 1))


def test_flicker_is_zero_for_still_maps_and_follows_the_mean_change():
    frames = [_ramp() for _ in range(5)]
    stepped = [_ramp() * 0 + 0.1 * k for k in range(5)]  # flat maps stepping by 0.1
    assert qc_stats.mean_abs_change(frames).tolist() == [0.0] * 4
    np.testing.assert_allclose(qc_stats.mean_abs_change(stepped), [0.1] * 4, atol=1e-6)


def test_ema_stabilised_flicker_is_below_the_raw_and_equal_to_it_without_smoothing(tmp_path):
    rng = np.random.default_rng(0)
    base = 1.0 + rng.random((24, 32), dtype=np.float32)
    # Raw depth whose far tail jumps every other frame: per-frame normalisation breathes.
    depth = [base + (3.0 if k % 2 else 0.0) * (base > 1.9) for k in range(8)]
    write_maps(tmp_path / "depth.maps", depth, "log")
    flicker = {alpha: _ema_flicker(tmp_path, alpha) for alpha in (0.1, 0.5, 1.0)}
    raw = flicker[1.0]["flicker_raw"]
    assert raw.shape == (7,) and raw.min() > 0.1
    # The raw flicker is the same measure of the same depth whatever the stabiliser did.
    for stats in flicker.values():
        np.testing.assert_array_equal(stats["flicker_raw"], raw)
    # Alpha 1 weighs only the newest frame: each frame keeps its own range, i.e. the per-frame maps.
    np.testing.assert_allclose(flicker[1.0]["flicker_stabilised"], raw, rtol=1e-4)
    means = [flicker[alpha]["flicker"]["stabilised_mean"] for alpha in (0.1, 0.5)]
    assert means[0] < means[1] < flicker[1.0]["flicker"]["raw_mean"]
    assert flicker[0.1]["flicker"]["ratio"] < 0.25


def test_parallax_percentiles_of_a_flat_map_are_exact(tmp_path):
    # near 1 everywhere, zero plane at 1 - 0.25: parallax = 0.25 x 2 % = 0.5 % of the width in front.
    frames = [np.ones((24, 32), np.float32)] * 4
    d, n = _stores(tmp_path, frames, frames)
    stats = qc_stats.map_statistics(d, n, StereoSettings(divergence_pct=2.0, convergence=0.25), (2.0, 98.0), 3.0)
    for value in stats["parallax_pct"].values():
        assert value == pytest.approx(0.5, abs=0.01)
    assert stats["comfort"]["beyond_frames"] == 0
    np.testing.assert_allclose(stats["parallax_per_frame"], 0.5, atol=1e-5)


def test_frames_beyond_the_comfort_limit_are_counted(tmp_path):
    near = [np.ones((24, 32), np.float32)] * 3 + [np.zeros((24, 32), np.float32)]
    d, n = _stores(tmp_path, near, near)
    # divergence 8 %, convergence 0.5: near 1 → +4 %, near 0 → -4 %; limit 3 % → every frame beyond.
    settings = StereoSettings(divergence_pct=8.0, convergence=0.5)
    stats = qc_stats.map_statistics(d, n, settings, (2.0, 98.0), 3.0)
    assert stats["comfort"]["beyond_frames"] == 4 and stats["comfort"]["beyond_pct"] == 100.0
    stats = qc_stats.map_statistics(d, n, settings, (2.0, 98.0), 5.0)
    assert stats["comfort"]["beyond_frames"] == 0


def test_segments_read_as_one_sequence(tmp_path):
    frames = [np.full((4, 6), k / 10, np.float32) for k in range(7)]
    _, near = _stores(tmp_path, frames, frames, split=3)
    maps = qc_stats.MapSequence(near)
    assert len(maps) == 7
    assert [round(float(m.mean()), 3) for m in maps] == [k / 10 for k in range(7)]
    assert float(maps.frame(5).mean()) == pytest.approx(0.5, abs=1e-4)
    with pytest.raises(IndexError):
        maps.frame(7)


def test_mismatched_frame_counts_are_refused(tmp_path):
    d, _ = _stores(tmp_path, [np.ones((4, 4), np.float32)] * 3, [np.ones((4, 4), np.float32)] * 3)
    write_maps(tmp_path / "short.maps", [np.ones((4, 4), np.float32)] * 2, "linear")
    with pytest.raises(ValueError, match="frame counts disagree"):
        qc_stats.map_statistics(d, [tmp_path / "short.maps"], StereoSettings(), (2.0, 98.0), 3.0)


def test_plots_are_pictures_of_the_report_size_showing_their_series(tmp_path):
    flicker, parallax = _write_plots(tmp_path, frames=48)
    for path in (flicker, parallax):
        image = cv2.imread(str(path))
        assert image.shape == (420, 1000, 3)
        assert (image.min(axis=2) < 200).mean() > 0.02  # axes, text and curves, not a blank page
    image = cv2.imread(str(flicker))
    assert _pixels_of(image, figures.RAW_COLOUR) > 100 and _pixels_of(image, figures.STABLE_COLOUR) > 100
    image = cv2.imread(str(parallax))
    assert _pixels_of(image, figures.BAND_COLOUR) > 10_000  # the shaded p5..p95 band
    assert _pixels_of(image, figures.LIMIT_COLOUR) > 100 and _pixels_of(image, figures.INK) > 100


def test_two_renders_of_the_same_input_are_the_same_bytes(tmp_path):
    first, second = _write_plots(tmp_path / "a", frames=48), _write_plots(tmp_path / "b", frames=48)
    for a, b in zip(first, second, strict=True):
        assert a.read_bytes() == b.read_bytes()


@pytest.mark.parametrize("frames", [1, 0])
def test_plots_of_a_one_frame_or_empty_video_are_drawn(tmp_path, frames):
    for path in _write_plots(tmp_path, frames=frames):
        image = cv2.imread(str(path))
        assert image.shape == (420, 1000, 3) and (image.min(axis=2) < 200).any()


def test_video_report_of_a_one_frame_clip(tmp_path, make_clip):
    clip = make_clip("still.mp4", width=64, height=36, frames=1, fps="8")
    probe = probe_video(clip)
    d, n = _stores(tmp_path, [1.0 + _ramp(18, 32)], [_ramp(18, 32)])
    outs = [tmp_path / name for name in ("sheet.png", "flicker.png", "parallax.png", "stats.json")]
    stats = report.video_report(clip, probe, d, n, StereoSettings(), NearSettings(), 3.0, *outs, rows=2, tile_width=32)
    assert stats["frames"] == 1 and stats["flicker"]["ratio"] is None
    for path in outs[1:3]:
        assert cv2.imread(str(path)).shape == (420, 1000, 3)


def test_video_report_writes_every_figure_and_the_stats(tmp_path, make_clip):
    clip = make_clip("clip.mp4", width=96, height=54, frames=8, fps="8")
    probe = probe_video(clip)
    depth = [1.0 + _ramp(27, 48)[::-1] * (1 + 0.1 * k) for k in range(8)]
    near = [_ramp(27, 48)] * 8
    d, n = _stores(tmp_path, depth, near, split=5)
    outs = {name: tmp_path / name for name in ("sheet.png", "flicker.png", "parallax.png", "stats.json")}
    stats = report.video_report(clip, probe, d, n, StereoSettings(divergence_pct=2.0), NearSettings(), 3.0,
                                *outs.values(), rows=3, tile_width=64)  # fmt: skip
    sheet = cv2.imread(str(outs["sheet.png"]))
    # Three rows of four 64x36 tiles (2-pixel borders), a header strip and one caption strip per row.
    assert sheet.shape == (26 + 3 * (26 + 40), 4 * 68, 3)
    for name in ("flicker.png", "parallax.png"):
        assert cv2.imread(str(outs[name])).shape == (420, 1000, 3)
    assert json.loads(outs["stats.json"].read_text()) == stats
    assert stats["frames"] == 8 and stats["video"] == "clip.mp4"


def test_validation_table_reads_both_report_layouts(tmp_path):
    da3 = tmp_path / "da3_small_280_u8.onnx.validation.json"
    da3.write_text(
        json.dumps(
            {
                "model": "da3",
                "opset": 18,
                "contract": "uint8",
                "size": 280,
                "max_abs_err": 0.003,
                "validated": True,
                "providers": ["CPUExecutionProvider"],
                "smoke": False,
            }
        )
    )
    nvds = tmp_path / "NVDS_Head_256x128.onnx.validation.json"
    nvds.write_text(
        json.dumps(
            {
                "opset": 17,
                "mode": "split-head",
                "tier": "256x128",
                "onnx_vs_pytorch": {"max_abs_err": 5e-6},
                "file_bytes": 2_000_000,
            }
        )
    )
    rows = tables.validation_table([nvds, da3], tmp_path / "exports.html")
    assert [r["file"] for r in rows] == ["NVDS_Head_256x128.onnx", "da3_small_280_u8.onnx"]
    assert rows[0]["max abs err"] == 5e-6 and rows[0]["model"] == "nvds" and rows[0]["MB"] == 2.0
    assert rows[1]["contract / mode"] == "uint8" and rows[1]["providers"] == "CPU"
    page = (tmp_path / "exports.html").read_text()
    assert "<table>" in page and "split-head" in page and "da3_small_280_u8.onnx" in page


def test_benchmark_table_sums_per_rule(tmp_path):
    header = "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"
    for rel, seconds in {"depth/a/k.tsv": 10.0, "depth/b/k.tsv": 30.0, "probe/a.tsv": 0.5}.items():
        path = tmp_path / "bench" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(header + f"{seconds}\t0:00:10\t100.0\t0\t0\t0\t0\t0\t50\t{seconds * 2}\n")
    (tmp_path / "bench" / "notes.tsv").write_text("what\tever\n1\t2\n")
    rules = tables.benchmark_table(tmp_path / "bench", tmp_path / "b.html", tmp_path / "b.csv")
    assert [(r["rule"], r["jobs"], r["total s"], r["max s"]) for r in rules] == [("depth", 2, 40.0, 30.0),
                                                                             ("probe", 1, 0.5, 0.5)]  # fmt: skip
    assert rules[0]["CPU s"] == 80.0
    assert "depth" in (tmp_path / "b.html").read_text()
    assert (tmp_path / "b.csv").read_text().splitlines()[0] == "rule,job,s,max RSS MB,CPU s,mean load %"


def test_stereo_settings_ignore_keys_of_other_sections():
    settings = StereoSettings.from_config(
        {"divergence_pct": 3.5, "layout": "half_sbs", "crf": 20, "original_eye": "left"}
    )
    assert settings == StereoSettings(divergence_pct=3.5, original_eye="left")


def _ema_flicker(tmp_path, alpha):
    """map_statistics of the EMA's near maps (the real near_plan and near_maps stages) of depth.maps."""
    settings = NearSettings(method="ema", options={"stabilise.ema_alpha": alpha, "stabilise.cut_threshold": 0.25})
    depth, plan, near = tmp_path / "depth.maps", tmp_path / f"plan-{alpha}.npz", tmp_path / f"near-{alpha}.maps"
    make_near_plan([depth], plan, settings)
    make_near_maps(tmp_path / "clip.mp4", {}, depth, near, settings, plan=plan)
    return qc_stats.map_statistics([depth], [near], StereoSettings(), (2.0, 98.0), 3.0)


def _write_plots(folder, frames):
    """The flicker and parallax PNGs of a synthetic video of ``frames`` frames at 24 fps."""
    rng = np.random.default_rng(3)
    times = np.arange(frames) / 24.0
    raw = 0.02 + 0.01 * rng.random(max(frames - 1, 0))
    per_frame = np.array([-2.0, -1.0, 0.3, 1.5, 3.5]) + 0.2 * np.sin(times)[:, None]
    stats = {"comfort": {"beyond_pct": 100.0 if frames else 0.0}}
    paths = folder / "flicker.png", folder / "parallax.png"
    figures.write_png(paths[0], figures.flicker_figure(times, raw, raw / 4, "clip.mp4"))
    figures.write_png(paths[1], figures.parallax_figure(times, per_frame, 3.0, stats, "clip.mp4"))
    return paths


def _pixels_of(image, colour, tolerance=12):
    """How many pixels of a BGR image are within ``tolerance`` of a matplotlib colour."""
    bgr = np.array(mcolors.to_rgb(colour))[::-1] * 255
    return int((np.abs(image.astype(np.float64) - bgr).max(axis=2) <= tolerance).sum())
