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
from harness import export_cache, planned_jobs, snakemake

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
    """``command``'s run, forked by the tests' Snakemake server (tests/harness.py)."""
    done = snakemake(workdir, *args)
    return done.stdout + done.stderr


def configure(workdir: Path, **sections) -> None:
    config = yaml.safe_load(yaml.safe_dump(BASE_CONFIG))
    for section, values in sections.items():
        config.setdefault(section, {}).update(values)
    (workdir / "test.yaml").write_text(yaml.safe_dump(config))


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


@pytest.fixture(scope="module")
def segmented(tmp_path_factory, models):
    """Both clips converted once in segments of 16 frames (the base config). The long clip's near maps and result
    are kept as they were then: the last test changes this library's settings."""
    workdir = tmp_path_factory.mktemp("segmented")
    library(workdir, models, TWO_CLIPS)
    configure(workdir)
    run(workdir)
    assert len(list((workdir / "work/long/depth").glob("*/*.zarr"))) == 3  # 0-16, 16-32, 32-40
    return workdir, near_maps_of(workdir, "long"), (workdir / LONG_RESULT).read_bytes()


LONG_RESULT = "results/long/long_LRF_Full_SBS.mp4"


def test_the_result_is_the_same_whatever_the_segment_size(tmp_path, models, segmented):
    _, segmented_maps, segmented_bytes = segmented
    library(tmp_path, models, {"long.mp4": TWO_CLIPS["long.mp4"]})
    configure(tmp_path, segments={"frames": 0})
    run(tmp_path)
    assert len(list((tmp_path / "work/long/depth").glob("*/*.zarr"))) == 1
    # The EMA ranges are planned over the whole video: every segment applies the same ranges to the same depth.
    np.testing.assert_array_equal(segmented_maps, near_maps_of(tmp_path, "long"))
    result = probe_video(tmp_path / LONG_RESULT)
    assert result["video"]["frame_count"] == 40 and result["audio"]
    np.testing.assert_allclose(result["frame_pts_s"], np.arange(40) / 10, atol=1e-3)
    # Segments of whole pieces encode the very same pieces as the whole-video job: the same file, byte for byte
    # (so the same frames, and the same audio), floating window included: the segments drew one, each planned
    # from its neighbours' near maps within its reach.
    assert (tmp_path / LONG_RESULT).read_bytes() == segmented_bytes
    segmented_workdir = segmented[0]
    drawn = [int(m) for log in (segmented_workdir / "logs/render/long").rglob("*.log")
             for m in re.findall(r"floating window on (\d+) of 16 frames", log.read_text())]  # fmt: skip
    assert len(drawn) == 2 and sum(drawn) > 0  # segments 0-16 and 16-32 (32-40 has 8 frames)


def test_a_killed_run_resumes_without_recomputing_finished_segments(tmp_path, models, segmented):
    _, _, uninterrupted = segmented
    library(tmp_path, models, {"long.mp4": TWO_CLIPS["long.mp4"]})
    configure(tmp_path)
    final = tmp_path / LONG_RESULT
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


def test_reruns_schedule_exactly_the_stages_a_setting_touches(segmented):
    tmp_path, _, _ = segmented  # the module's library, changed from here on: this test comes last
    segs = 3 + 2  # long: 40 frames, short: 18 frames, in segments of 16
    assert planned_jobs(tmp_path) == {}

    # What each setting reruns, key by key, is tests/test_reruns.py; here: the counts per segment, a setting
    # switched back, and sheet rows.
    configure(tmp_path, render={"divergence_pct": 3.0})
    assert planned_jobs(tmp_path) == {"convergence_plan": 2, "render": segs, "join": 2}
    configure(tmp_path, stabilise={"ema_alpha": 0.3})
    assert planned_jobs(tmp_path) == {
        "near_plan": 2,
        "near_maps": segs,
        "convergence_plan": 2,
        "render": segs,
        "join": 2,
    }

    # A setting switched back finds its old near maps: no model job; the encoded videos went once joined (temp).
    configure(tmp_path, render={"divergence_pct": 3.0})
    run(tmp_path)
    configure(tmp_path)
    assert planned_jobs(tmp_path) == {"render": segs, "join": 2}

    # A sheet row reruns its own video only, from the first stage its cells touch.
    run(tmp_path)
    (tmp_path / "videos.tsv").write_text("video\trender.layout\nlong.mp4\thalf_sbs\n")
    configure(tmp_path, library={"sheet": "videos.tsv"})
    assert planned_jobs(tmp_path) == {"render": 3, "join": 1}
    (tmp_path / "videos.tsv").write_text("video\trender.layout\tstabilise.method\n"
                                         "long.mp4\thalf_sbs\t\nshort\t\tframe\n")  # fmt: skip
    assert planned_jobs(tmp_path) == {"render": segs, "near_maps": 2, "convergence_plan": 1, "join": 2}
