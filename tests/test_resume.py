"""A job killed inside a stage (SIGKILL of the whole run) resumes inside itself: its rerun continues after the
last complete chunk (32 frames of depth or near maps, one encoded piece of the render), and the result is byte
for byte the one of an uninterrupted run."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
from harness import exported_workdir, snakemake, snakemake_cmd, stray_files, write_config

from stereo3d.demo.samples import make_clip
from stereo3d.io.mapstore import CHUNK_FRAMES

FRAMES = 200  # several chunks of maps (32 frames), and a part one; the EMA near maps still take only ~0.2 s
RESULT = "results/clip/clip_LRF_Full_SBS.mp4"


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    workdir = exported_workdir(tmp_path_factory, "resume")
    make_clip(workdir / "videos/clip.mp4", width=64, height=36, frames=FRAMES, fps="24", audio=True)
    write_config(workdir, report={"qc": False})
    snakemake(workdir)
    return workdir, (workdir / RESULT).read_bytes()


# What each stage's run starts without: its own outputs and all after them. The stages before it are kept, as a
# real rerun keeps finished work, so each test computes only from its stage on.
REDO = {
    "depth": ("work", "results", "logs", ".snakemake"),
    "near_maps": ("work/clip/near/*/*/*.zarr", "work/clip/render", "results", "logs/near_maps", "logs/render"),
    "render": ("work/clip/render", "results", "logs/render"),
}


def fresh_start(workdir: Path, stage: str) -> None:
    for pattern in REDO[stage]:
        for path in workdir.glob(pattern):
            shutil.rmtree(path) if path.is_dir() else path.unlink()


def written_maps(partial: Path) -> int:
    try:
        return json.loads((partial / "zarr.json").read_text())["attributes"]["written"]
    except (OSError, ValueError, KeyError):
        return 0


def partials(folder: Path, pattern: str) -> list[Path]:
    """The job's leftovers, looked for while jobs come and go (a folder may vanish while it is walked)."""
    try:
        return list(folder.rglob(pattern))
    except FileNotFoundError:
        return []


def map_progress(stage: str):
    def progress(workdir: Path) -> tuple[int, Path | None]:
        found = partials(workdir / "work/clip" / stage, ".*.zarr.partial")
        return (written_maps(found[0]), found[0]) if found else (0, None)

    return progress


def render_progress(workdir: Path) -> tuple[int, Path | None]:
    found = partials(workdir / "work/clip/render", ".*.mkv.partial")
    if not found:
        return 0, None
    try:
        pieces = [p for p in found[0].glob("*.mkv") if ".partial-" not in p.name]
    except FileNotFoundError:
        return 0, None
    return 8 * len(pieces), found[0]  # pieces of 8 frames (the harness's encode.piece_frames)


# stage: (how far it got, frames done before the kill)
STAGES = {
    "depth": (map_progress("depth"), 2 * CHUNK_FRAMES),
    "near_maps": (map_progress("near"), 2 * CHUNK_FRAMES),
    "render": (render_progress, 24),
}


@pytest.mark.parametrize("stage", list(STAGES))
def test_a_job_killed_midway_resumes_after_its_last_chunk(reference, stage):
    workdir, uninterrupted = reference
    progress, enough = STAGES[stage]
    for _attempt in range(5):
        fresh_start(workdir, stage)
        process = subprocess.Popen(snakemake_cmd(workdir, "--cores", "1"), stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and progress(workdir)[0] < enough and process.poll() is None:
            time.sleep(0.005)  # the EMA near maps of 200 frames take a fraction of a second
        os.killpg(process.pid, signal.SIGKILL)  # the whole tree, mid-job, as a crash or a scheduler would
        process.wait()
        done, partial = progress(workdir)
        if partial is not None:
            break
        # The job ran to its end between the last look and the kill (a short job on a busy machine): again.
    assert done >= enough, f"the {stage} job was never caught with {enough} frames in"
    assert not (workdir / RESULT).exists()

    snakemake(workdir, "--unlock")
    snakemake(workdir, "--rerun-incomplete")
    (log,) = (workdir / "logs" / stage).rglob("*.log")
    resumed = re.search(r"resuming .* at frame (\d+) of", log.read_text())
    assert resumed, f"the rerun of {stage} started again from the first frame"
    assert int(resumed.group(1)) == done  # every complete chunk kept: at most the chunk in progress was lost
    assert (workdir / RESULT).read_bytes() == uninterrupted
    assert not partial.exists() and stray_files(workdir) == []
