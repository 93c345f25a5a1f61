"""Library scale: per-segment jobs, kill-safe resume, and reruns of exactly the changed stages."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import yaml
from harness import export_cache

from stereo3d.demo import samples
from stereo3d.io.mapstore import MapReader
from stereo3d.io.probe import probe_video

ROOT = Path(__file__).resolve().parents[1]
BASE_CONFIG = {
    "library": {"folder": "videos"},
    "da3": {"size": 140, "batch": 2},
    "encode": {"preset": "ultrafast", "piece_frames": 8},
    "runtime": {"providers": ["cpu"], "threads": 1},
    "segments": {"frames": 16},
    "report": {"qc": False},  # the report's own jobs are tested in test_report.py
}


def command(workdir: Path, *args: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "snakemake",
        "--snakefile",
        str(ROOT / "Snakefile"),
        "--directory",
        str(workdir),
        f"--configfile={workdir / 'test.yaml'}",
        "--cores",
        "2",
        *args,
    ]


def run(workdir: Path, *args: str) -> str:
    done = subprocess.run(command(workdir, *args), capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        raise AssertionError(f"snakemake failed:\n{done.stdout[-3000:]}\n{done.stderr[-5000:]}")
    return done.stdout + done.stderr


def configure(workdir: Path, **sections) -> None:
    config = yaml.safe_load(yaml.safe_dump(BASE_CONFIG))
    for section, values in sections.items():
        config.setdefault(section, {}).update(values)
    (workdir / "test.yaml").write_text(yaml.safe_dump(config))


def scheduled(workdir: Path) -> dict[str, int]:
    """The jobs a dry run would run, by rule (the 'Job stats' table), without the target rule."""
    text = run(workdir, "-n")
    counts = dict(re.findall(r"^(\w+)\s+(\d+)$", text, flags=re.MULTILINE))
    counts.pop("total", None)
    counts.pop("all", None)
    return {rule: int(n) for rule, n in counts.items()}


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """DA3 Small at longest side 140, every aspect tier, from smoke weights (the session's shared exports)."""
    return export_cache(tmp_path_factory)


def library(workdir: Path, models: Path, clips: dict[str, dict]) -> None:
    """Videos, smoke weights and the shared exports (copied after the weights, so they are newer)."""
    for name, options in clips.items():
        samples.make_clip(workdir / "videos" / name, **options)
    shutil.copytree(models / "weights", workdir / "weights")
    time.sleep(0.01)
    shutil.copytree(models / "models", workdir / "models")


def near_maps_of(workdir: Path, video: str) -> np.ndarray:
    (folder,) = [p for p in (workdir / "work" / video / "near").glob("*/*") if p.is_dir()]
    parts = []
    for path in sorted(folder.glob("*.zarr")):
        with MapReader(path) as maps:
            parts.append(maps.read())
    return np.concatenate(parts)


TWO_CLIPS = {
    "long.mp4": dict(width=96, height=54, frames=40, fps="10", audio=True),
    "short.mkv": dict(width=64, height=48, frames=18, fps="9"),
}


def test_the_result_is_the_same_whatever_the_segment_size(tmp_path, models):
    library(tmp_path, models, {"long.mp4": TWO_CLIPS["long.mp4"]})
    # Lossless x264 (crf 0): the decoded result is the rendered frames, so equal pixels prove equal renders.
    configure(tmp_path, segments={"frames": 0}, encode={"crf": 0})
    run(tmp_path)
    whole = near_maps_of(tmp_path, "long")
    whole_result = tmp_path / "results/long/long_LRF_Full_SBS.mp4"
    whole_probe = probe_video(whole_result)
    whole_frames = decoded(whole_result)
    whole_bytes = whole_result.read_bytes()
    assert len(list((tmp_path / "work/long/depth").glob("*/*.zarr"))) == 1

    configure(tmp_path, segments={"frames": 16}, encode={"crf": 0})
    run(tmp_path)
    assert len(list((tmp_path / "work/long/depth").glob("*/*.zarr"))) == 1 + 3  # 0-16, 16-32, 32-40
    segmented = near_maps_of_segmented(tmp_path, "long")
    # The EMA ranges are planned over the whole video: every segment applies the same ranges to the same depth.
    np.testing.assert_array_equal(segmented, whole)
    result = probe_video(tmp_path / "results/long/long_LRF_Full_SBS.mp4")
    assert result["video"]["frame_count"] == whole_probe["video"]["frame_count"] == 40
    np.testing.assert_allclose(result["frame_pts_s"], whole_probe["frame_pts_s"], atol=1e-3)
    assert result["audio"]
    np.testing.assert_array_equal(decoded(tmp_path / "results/long/long_LRF_Full_SBS.mp4"), whole_frames)
    # Segments of whole pieces encode the very same pieces as the whole-video job: the same file, byte for byte.
    assert (tmp_path / "results/long/long_LRF_Full_SBS.mp4").read_bytes() == whole_bytes


def decoded(path: Path) -> np.ndarray:
    from stereo3d.io.decode import FrameReader

    with FrameReader(path, probe_video(path)) as frames:
        return np.stack(list(frames))


def near_maps_of_segmented(workdir: Path, video: str) -> np.ndarray:
    (folder,) = [p for p in (workdir / "work" / video / "near").glob("*/*") if p.is_dir()]
    parts = []
    for path in sorted(folder.glob("*.zarr")):
        if re.fullmatch(r"\d{8}-\d{8}\.zarr", path.name) and path.name != "00000000-00000040.zarr":
            with MapReader(path) as maps:
                parts.append(maps.read())
    return np.concatenate(parts)


def test_a_killed_run_resumes_without_recomputing_finished_segments(tmp_path, models):
    library(tmp_path, models, {"long.mp4": TWO_CLIPS["long.mp4"]})
    configure(tmp_path)
    run(tmp_path)
    final = tmp_path / "results/long/long_LRF_Full_SBS.mp4"
    uninterrupted = final.read_bytes()
    shutil.rmtree(tmp_path / "work")
    shutil.rmtree(tmp_path / "results")
    shutil.rmtree(tmp_path / ".snakemake")

    process = subprocess.Popen(
        command(tmp_path), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    depth = tmp_path / "work/long/depth"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and len(list(depth.glob("*/*.zarr"))) < 2:
        time.sleep(0.05)  # depth jobs run one at a time here: the first is recorded once a second is written
    os.killpg(process.pid, signal.SIGKILL)  # the whole tree, mid-run, as a crash or a scheduler would
    process.wait()
    first = min(depth.glob("*/*.zarr"), key=lambda p: p.stat().st_mtime_ns)
    finished_at = first.stat().st_mtime_ns
    assert not final.exists()

    run(tmp_path, "--unlock")  # a killed Snakemake leaves its lock behind
    run(tmp_path, "--rerun-incomplete")
    assert first.stat().st_mtime_ns == finished_at  # the finished segment was kept, not recomputed
    assert final.read_bytes() == uninterrupted


def test_reruns_schedule_exactly_the_stages_a_setting_touches(tmp_path, models):
    library(tmp_path, models, TWO_CLIPS)
    configure(tmp_path)
    run(tmp_path)
    segs = 3 + 2  # long: 40 frames, short: 18 frames, in segments of 16
    assert scheduled(tmp_path) == {}

    # What each setting reruns, key by key, is tests/test_reruns.py; here: the counts per segment, a setting
    # switched back, and sheet rows.
    configure(tmp_path, render={"divergence_pct": 3.0})
    assert scheduled(tmp_path) == {"render": segs, "join": 2}
    configure(tmp_path, stabilise={"ema_alpha": 0.3})
    assert scheduled(tmp_path) == {"near_plan": 2, "near_maps": segs, "render": segs, "join": 2}

    # A setting switched back finds its old near maps: no model job; the encoded videos went once joined (temp).
    configure(tmp_path, render={"divergence_pct": 3.0})
    run(tmp_path)
    configure(tmp_path)
    assert scheduled(tmp_path) == {"render": segs, "join": 2}

    # A sheet row reruns its own video only, from the first stage its cells touch.
    run(tmp_path)
    (tmp_path / "videos.tsv").write_text("video\trender.layout\nlong.mp4\thalf_sbs\n")
    configure(tmp_path, library={"sheet": "videos.tsv"})
    assert scheduled(tmp_path) == {"render": 3, "join": 1}
    (tmp_path / "videos.tsv").write_text("video\trender.layout\tstabilise.method\n"
                                         "long.mp4\thalf_sbs\t\nshort\t\tframe\n")  # fmt: skip
    assert scheduled(tmp_path) == {"render": segs, "near_maps": 2, "join": 2}
