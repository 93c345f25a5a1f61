"""NVDS through the whole workflow (tiny architecture): the result does not depend on the segment size, to the
pixel; `stabilise.nvds_graphs` runs the graphs it names, per video from the sheet too; `snakemake exports`
builds the configured NVDS tiers x modes."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from harness import exported_workdir, planned_jobs, snakemake, write_config

from stereo3d.demo.samples import make_clip
from stereo3d.io.decode import FrameReader
from stereo3d.io.mapstore import MapReader
from stereo3d.io.probe import probe_video

NVDS = {"method": "nvds", "nvds_tier": "96x64"}
# Lossless x264 (crf 0): decoded results are the rendered frames themselves, so equal pixels prove equal renders.
BASE = dict(stabilise=NVDS, export={"nvds_architecture": "tiny"}, encode={"crf": 0}, report={"qc": False})


def configure(workdir: Path, **sections) -> None:
    merged = {name: dict(values) for name, values in BASE.items()}
    for name, values in sections.items():
        merged.setdefault(name, {}).update(values)
    write_config(workdir, **merged)


def near_maps(workdir: Path, video: str, segment: str = "00000000-00000040") -> np.ndarray:
    """The near maps of the video's most recently written store of ``segment`` (under whatever key)."""
    newest = max((workdir / "work" / video / "near").glob(f"*/nvds-*/{segment}.zarr"), key=lambda p: p.stat().st_mtime)
    with MapReader(newest) as maps:
        return maps.read()


def result_frames(path: Path) -> np.ndarray:
    probe = probe_video(path)
    with FrameReader(path, probe) as frames:
        return np.stack(list(frames))


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    workdir = exported_workdir(tmp_path_factory, "nvds-library", nvds=True)  # the split pair at 96x64 too
    make_clip(workdir / "videos/moving.mp4", width=64, height=36, frames=40, fps="10", audio=True)
    make_clip(workdir / "videos/other.mkv", width=48, height=48, frames=12, fps="8", pattern="mandelbrot")
    configure(workdir, segments={"frames": 0})
    snakemake(workdir)
    whole = {
        "near": near_maps(workdir, "moving"),
        "frames": result_frames(workdir / "results/moving/moving_LRF_Full_SBS.mp4"),
        "bytes": (workdir / "results/moving/moving_LRF_Full_SBS.mp4").read_bytes(),
    }
    return workdir, whole


def test_the_nvds_result_is_the_same_whatever_the_segment_size(library):
    workdir, whole = library
    configure(workdir, segments={"frames": 16})
    snakemake(workdir)
    depth = sorted(p.name for p in (workdir / "work/moving/depth").glob("*/*.zarr"))
    assert "00000016-00000032.zarr" in depth  # it really ran in segments (0-16, 16-32, 32-40)
    # Each segment primes its window with the raw depth and pictures of the 3 frames before it: the same
    # windows as the whole-video run, so the same maps, and the same rendered pixels.
    segmented = np.concatenate([_maps(p) for p in _segment_stores(workdir, "moving", 16)])
    np.testing.assert_array_equal(segmented, whole["near"])
    frames = result_frames(workdir / "results/moving/moving_LRF_Full_SBS.mp4")
    assert frames.shape == whole["frames"].shape == (40, 36, 128, 3)
    np.testing.assert_array_equal(frames, whole["frames"])
    assert (workdir / "results/moving/moving_LRF_Full_SBS.mp4").read_bytes() == whole["bytes"]


def _segment_stores(workdir: Path, video: str, size: int) -> list[Path]:
    (folder,) = {p.parent for p in (workdir / "work" / video / "near").glob("*/nvds-*/*.zarr")}
    stores = [p for p in sorted(folder.glob("*.zarr")) if _frames(p.stem) <= size]
    assert [p.stem.split("-")[0] for p in stores] == ["00000000", "00000016", "00000032"]
    return stores


def _frames(segment: str) -> int:
    start, end = (int(frame) for frame in segment.split("-"))
    return end - start


def _maps(path: Path) -> np.ndarray:
    with MapReader(path) as maps:
        return maps.read()


def test_nvds_graphs_from_a_sheet_row_runs_the_monolith_for_that_video_only(library):
    workdir, whole = library
    (workdir / "videos.tsv").write_text("video\tstabilise.nvds_graphs\nmoving.mp4\tmonolith\n")
    configure(workdir, segments={"frames": 0}, library={"sheet": "videos.tsv"})
    plan = planned_jobs(workdir)
    assert plan == {"export_nvds_monolith": 1, "near_maps": 1, "convergence_plan": 1, "render": 1, "join": 1}
    snakemake(workdir)
    logs = {p.parts[-4]: p.read_text() for p in (workdir / "logs/near_maps").glob("*/*/*/*.log")}
    for video, text in logs.items():  # each NVDS graph's session names its device and provider
        opened = re.findall(r"(NVDS_\w+_96x64\.onnx): running on the CPU( \(\w+\))? with provider cpu, precision", text)
        assert sorted(name for name, _ in opened) == GRAPHS_OPENED[video], text
    monolith = [video for video, text in logs.items() if "96x64: monolith graphs" in text]
    split = [video for video, text in logs.items() if "96x64: split graphs" in text]
    assert monolith == ["moving"] and "other" in split
    # The monolith and the split pair are the same network: the maps agree to the export's validation limit.
    np.testing.assert_allclose(near_maps(workdir, "moving"), whole["near"], atol=1e-3)
    (workdir / "videos.tsv").unlink()


# The NVDS graphs each video's job opens after the sheet gave "moving" the monolith.
GRAPHS_OPENED = {
    "moving": ["NVDS_Stabilizer_96x64.onnx"],
    "other": ["NVDS_Backbone_96x64.onnx", "NVDS_Head_96x64.onnx"],
}


def test_exports_builds_the_configured_nvds_tiers_and_modes_when_the_weights_are_there(library, tmp_path):
    workdir, _ = library
    configure(workdir, export={"nvds_tiers": ["96x64", "64x64"], "nvds_modes": ["split", "monolith"]})
    plan = planned_jobs(workdir, "exports")
    # 96x64 split and monolith exist already (the library's videos use them): only 64x64 is missing.
    assert plan == {"export_nvds_split": 1, "export_nvds_monolith": 1}
    listed = snakemake(workdir, "exports", "-n").stdout
    assert "models/NVDS/NVDS_Backbone_64x64.onnx" in listed and "models/NVDS/NVDS_Stabilizer_64x64.onnx" in listed

    # Without NVDS weights (and no video on NVDS) the exports target builds no NVDS graph.
    bare = tmp_path / "bare"
    shutil.copytree(workdir / "weights/DA3", bare / "weights/DA3")
    shutil.copytree(workdir / "models/DA3", bare / "models/DA3")
    (bare / "videos").mkdir()
    write_config(bare, export={"nvds_tiers": ["64x64"], "nvds_modes": ["split", "monolith"]})
    assert planned_jobs(bare, "exports") == {}


def test_switching_back_to_the_ema_runs_no_depth_and_no_nvds_job(library):
    """The NVDS library (tests/test_workflow.py's single NVDS run, folded in here): its depth serves the EMA too."""
    workdir, _ = library
    configure(workdir, segments={"frames": 0}, stabilise={"method": "ema"})
    try:
        assert planned_jobs(workdir) == {"near_plan": 2, "near_maps": 2, "convergence_plan": 2, "render": 2, "join": 2}
    finally:
        configure(workdir, segments={"frames": 0})
