"""Report figures and tables: numbers on synthetic maps with known answers, pictures with the right shape."""

import json

import cv2
import numpy as np
import pytest

from stereo3d.io.mapstore import write_maps
from stereo3d.io.probe import probe_video
from stereo3d.qc import figures, report, tables
from stereo3d.qc import stats as qc_stats
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


def test_stabilised_flicker_below_raw_when_the_raw_range_jumps(tmp_path):
    rng = np.random.default_rng(0)
    base = 1.0 + rng.random((24, 32), dtype=np.float32)
    # Raw depth whose far tail jumps every other frame: per-frame normalisation breathes.
    depth = [base * (1.0 if k % 2 else 1.0) + (3.0 if k % 2 else 0.0) * (base > 1.9) for k in range(8)]
    near = [np.full((24, 32), 0.5, np.float32) for _ in range(8)]  # perfectly stable
    d, n = _stores(tmp_path, depth, near)
    stats = qc_stats.map_statistics(d, n, StereoSettings(), (2.0, 98.0), 3.0)
    assert stats["flicker"]["stabilised_mean"] == pytest.approx(0.0, abs=1e-4)
    assert stats["flicker"]["raw_mean"] > 0.01
    assert stats["flicker_raw"].shape == (7,)


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


def test_nice_ticks_are_round_and_cover_the_range():
    assert figures.nice_ticks(0.0, 1.0) == [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]
    assert figures.nice_ticks(-3.3, 3.3) == [-2.0, 0.0, 2.0]
    assert figures.nice_ticks(-3.3, 3.3, target=8) == [-3.0, -2.0, -1.0, 0.0, 1.0, 2.0, 3.0]
    assert figures.nice_ticks(0.00012, 0.00048) == pytest.approx([0.0002, 0.0003, 0.0004])


def test_line_plot_draws_its_series_in_their_colour():
    x = np.linspace(0, 10, 50)
    img = figures.line_plot([figures.Series("a", x, np.sin(x), (0, 0, 255))], "title", "x", "y", size=(400, 200))
    assert img.shape == (200, 400, 3) and img.dtype == np.uint8
    red = (img[:, :, 2] > 200) & (img[:, :, 0] < 60) & (img[:, :, 1] < 60)
    assert red.sum() > 100


def test_video_report_writes_every_figure_and_the_stats(tmp_path, make_clip):
    clip = make_clip("clip.mp4", width=96, height=54, frames=8, fps="8")
    probe = probe_video(clip)
    depth = [1.0 + _ramp(27, 48)[::-1] * (1 + 0.1 * k) for k in range(8)]
    near = [_ramp(27, 48)] * 8
    d, n = _stores(tmp_path, depth, near, split=5)
    outs = {name: tmp_path / name for name in ("sheet.png", "flicker.png", "parallax.png", "stats.json")}
    stats = report.video_report(clip, probe, d, n, {"divergence_pct": 2.0, "layout": "full_sbs", "crf": 18},
                            (2.0, 98.0), 3.0, *outs.values(), rows=3, tile_width=64)  # fmt: skip
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
