"""The preview: short clips spread over each video and a settings grid, in the report, without converting whole
videos; its depth is the first frames of the full run's depth jobs, which the full run continues."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import av
import cv2
import numpy as np
import pytest
from harness import exported_workdir, planned_jobs, snakemake, write_config

from stereo3d.demo.samples import make_clip
from stereo3d.io.mapstore import MapReader, MapWriter, finished_by, partial_path
from stereo3d.workflow.preview import Clip, grid_still, preview_clips

DKEY = "da3_small_140x84_u8_letterbox"
# Segments of 40 frames (a multiple of the tests' 8-frame pieces), clips of 0.5 s at 24 fps (12 frames): a clip
# computes one 32-frame chunk of its segment, less than the segment, so it can leave the rest to the full run.
SETTINGS = dict(
    segments={"frames": 40},
    preview={"clips": 3, "seconds": 0.5, "grid": {"divergence_pct": [1.0, 3.0], "convergence": [0.0, 0.25, 0.5]}},
    report={"qc": False},
)
FRAMES = {"alpha": 120, "beta": 80}


def test_clips_are_spread_over_the_video_and_start_its_segments_where_they_can():
    # Three parts of 40 frames: each clip moves from its part's middle to the segment start in it.
    assert preview_clips(120, 24.0, 3, 0.5, 40) == [
        Clip(0, 12, (0, 40)),
        Clip(40, 12, (40, 40)),
        Clip(80, 12, (80, 40)),
    ]
    # The last segment is taken: the third clip stays in the middle of its part, with depth of its own.
    assert preview_clips(80, 24.0, 3, 0.5, 40) == [Clip(0, 12, (0, 40)), Clip(40, 12, (40, 40)), Clip(61, 12)]
    # One whole-video segment: only the first clip can start it.
    assert preview_clips(1000, 25.0, 3, 2.0, 0) == [Clip(0, 50, (0, 1000)), Clip(475, 50), Clip(808, 50)]
    # A segment the clip's chunk would finish is not shared; a video shorter than the clips gives fewer.
    assert preview_clips(30, 24.0, 3, 1.0, 32) == [Clip(0, 24)]
    # The second clip took the last segment start: the third, which would overlap it, moves past it.
    assert preview_clips(96, 24.0, 3, 1.0, 48) == [Clip(0, 24, (0, 48)), Clip(48, 24, (48, 48)), Clip(72, 24)]
    assert grid_still(preview_clips(120, 24.0, 3, 0.5, 40)) == (Clip(40, 12, (40, 40)), 46)


def test_a_suspended_store_is_read_partial_and_continued_by_the_same_job(tmp_path):
    maps = np.random.default_rng(0).uniform(1, 5, (20, 6, 8)).astype(np.float32)
    with MapWriter(tmp_path / "d.zarr", "inverse", chunk=8, series=("changes",), resume={"job": 1}) as store:
        store.append(maps[:16], changes=np.arange(16.0))
        store.suspend()
    assert not (tmp_path / "d.zarr").exists() and partial_path(tmp_path / "d.zarr").is_dir()
    with MapReader(tmp_path / "d.zarr", partial=True) as partial:
        assert partial.frames == 16 and partial.identity == {"job": 1}
        np.testing.assert_allclose(partial.read(0, 16), maps[:16], rtol=2e-3)
    with MapWriter(tmp_path / "d.zarr", "inverse", chunk=8, series=("changes",), resume={"job": 1}) as store:
        assert store.resumed == 16
        store.append(maps[16:], changes=np.arange(16.0, 20.0))
    with MapReader(tmp_path / "d.zarr") as whole:
        assert whole.frames == 20
        np.testing.assert_array_equal(whole.series("changes"), np.arange(20.0))
    # The preview reads a finished store only if the job it would continue wrote it (not an older source's).
    assert finished_by(tmp_path / "d.zarr", {"job": 1}) and not finished_by(tmp_path / "d.zarr", {"job": 2})


def test_a_store_is_not_left_for_a_later_writer_with_a_chunk_begun(tmp_path):
    with pytest.raises(ValueError, match="not whole chunks"):
        with MapWriter(tmp_path / "d.zarr", "inverse", chunk=8, resume={"job": 1}) as store:
            store.append(np.ones((10, 4, 4), np.float32))
            store.suspend()


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    """Two videos previewed (and timed), then the report built with the preview."""
    workdir = exported_workdir(tmp_path_factory, "preview", exports=("da3_small_140x84_u8.onnx",))
    make_clip(workdir / "videos" / "alpha.mp4", width=128, height=72, frames=FRAMES["alpha"], fps="24")
    make_clip(workdir / "videos" / "beta.mp4", width=128, height=72, frames=FRAMES["beta"], fps="24", pattern="boxes")
    write_config(workdir, **SETTINGS)
    snakemake(workdir, "preview")
    snakemake(workdir, "--report", "report.html", "preview")
    return workdir, jobs_run(workdir)


def jobs_run(workdir: Path) -> dict[str, int]:
    """The jobs that ran, by rule: each writes its benchmark file (a checkpoint's run prints no table of the jobs
    planned after it)."""
    return dict(Counter(path.relative_to(workdir / "benchmarks").parts[0]
                        for path in (workdir / "benchmarks").rglob("*.tsv")))  # fmt: skip


def clips_of(workdir: Path, video: str) -> list[Path]:
    return sorted((workdir / "work" / video / "preview" / "clips").rglob("*.mp4"))


def test_the_preview_renders_short_clips_spread_over_each_video_and_converts_none(library):
    workdir, jobs = library
    assert jobs == {"probe": 2, "preview_depth": 6, "preview_near_maps": 6, "preview_render": 6, "preview_page": 2,
                    "preview_grid": 2}  # fmt: skip
    for video, starts in {"alpha": [0, 40, 80], "beta": [0, 40, 61]}.items():
        clips = clips_of(workdir, video)
        assert [int(re.match(r"(\d+)-", clip.name).group(1)) for clip in clips] == starts
        for clip in clips:
            with av.open(str(clip)) as container:
                stream = container.streams.video[0]
                assert stream.codec_context.name == "h264" and (stream.width, stream.height) == (256, 72)
                assert sum(1 for _ in container.decode(stream)) == 12
    assert not (workdir / "results").exists()


def test_the_grid_has_one_tile_per_divergence_and_convergence(library):
    workdir, _ = library
    for video in FRAMES:
        (grid,) = (workdir / "work" / video / "preview" / "grid").rglob("grid.png")
        image = cv2.imread(str(grid))
        assert image.shape[1] == 3 * (128 + 4)  # three columns of 128-px tiles with their borders
        # Two rows of 72-px tiles (with borders) under three 26-px label strips, the header's two and each row's
        assert image.shape[0] == 2 * (72 + 4) + 4 * 26


def test_the_report_holds_each_videos_clips_page_and_grid(library):
    workdir, _ = library
    report = (workdir / "report.html").read_text(encoding="utf-8")
    for video in FRAMES:
        assert re.search(rf'"labels": {{"video": "{video}", "preview": "clips"}}', report)
        assert re.search(rf'"labels": {{"video": "{video}", "preview": "settings grid"}}', report)
    page = next((workdir / "work" / "alpha" / "preview" / "clips").rglob("clips.html")).read_text()
    assert page.count("<video") == 3 and page.count("data:video/mp4;base64,") == 3


def test_a_render_setting_reruns_the_preview_renders_and_grid_only(library):
    workdir, _ = library
    write_config(workdir, **SETTINGS, render={"divergence_pct": 3.0})
    try:
        assert planned_jobs(workdir, "preview") == {
            "preview": 1,
            "preview_render": 6,
            "preview_page": 2,
            "preview_grid": 2,
        }
    finally:
        write_config(workdir, **SETTINGS)


def test_the_full_run_continues_the_depth_the_preview_computed(library):
    workdir, _ = library
    depth = workdir / "work" / "alpha" / "depth" / DKEY
    with MapReader(depth / "00000040-00000080.zarr", partial=True) as partial:
        assert partial.frames == 32  # the clip's 12 frames in whole chunks, left for the full run
    # The full run's depth jobs (what the preview shares with it); the stages after them are the workflow's tests'.
    segments = [f"work/{video}/depth/{DKEY}/{start:08d}-{min(start + 40, frames):08d}.zarr"
                for video, frames in FRAMES.items() for start in range(0, frames, 40)]  # fmt: skip
    snakemake(workdir, *segments)
    logs = {
        path.relative_to(workdir).as_posix(): path.read_text() for path in (workdir / "logs").rglob("depth/*/*/*.log")
    }
    resumed = {job for job, text in logs.items() if "resuming depth at frame" in text}
    # Every segment a clip started (alpha's three, beta's first two) computed 8 of its 40 frames; beta's last
    # clip (frames 61..72) started no segment.
    assert len(logs) == 5 and len(resumed) == 5, logs
    assert all(re.search(r"depth \S+: 8/8 frames", text) for text in logs.values()), logs
    for video, start in [("alpha", 40), ("beta", 0)]:
        segment = workdir / "work" / video / "depth" / DKEY / f"{start:08d}-{start + 40:08d}.zarr"
        (clip,) = (workdir / "work" / video / "preview" / "depth" / DKEY).glob(f"{start:08d}-*[0-9].zarr")
        with MapReader(segment) as full, MapReader(clip) as preview:
            np.testing.assert_allclose(preview.read(), full.read(0, 12), rtol=2e-3)
