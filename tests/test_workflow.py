"""The whole workflow, for real: Snakemake on a tiny generated library in a temporary folder."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from harness import exported_workdir, job_stats, snakemake, write_config

from stereo3d.demo import samples
from stereo3d.io.probe import probe_video

ROOT = Path(__file__).resolve().parents[1]


CLIPS = {"tone.mp4": (160, 90, 12, 12, True), "square.mkv": (120, 90, 10, 10, False)}  # w, h, frames, fps, audio


def make_library(workdir: Path) -> None:
    """The two clips: one 16:9 with audio, one 4:3 without."""
    for name, (width, height, frames, fps, audio) in CLIPS.items():
        samples.make_clip(workdir / "videos" / name, width=width, height=height, frames=frames, fps=str(fps),
                          audio=audio)  # fmt: skip


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    """The two-clip library converted with smoke DA3 weights and the session's exports."""
    workdir = exported_workdir(tmp_path_factory, "library")
    make_library(workdir)
    # The default providers (auto): each job that runs a model takes a device lease and logs it.
    write_config(workdir, runtime={"providers": "auto"})
    run = snakemake(workdir)
    return workdir, run


def test_every_video_becomes_a_full_sbs_file_with_its_frames_and_audio(converted):
    workdir, _ = converted
    for name, (width, height, frames, fps, has_audio) in CLIPS.items():
        out = workdir / "results" / Path(name).stem / f"{Path(name).stem}_LRF_Full_SBS.mp4"
        assert out.is_file(), out
        result = probe_video(out)
        assert (result["video"]["width"], result["video"]["height"]) == (2 * width, height)
        assert result["video"]["frame_count"] == frames
        assert bool(result["audio"]) == has_audio
        assert abs(result["duration_s"] - frames / fps) <= 1 / fps + 1e-3


def test_each_jobs_log_names_the_device_and_the_provider_it_ran_on(converted):
    workdir, _ = converted
    depth_logs = sorted((workdir / "logs" / "depth").rglob("*.log"))
    render_logs = sorted((workdir / "logs" / "render").rglob("*.log"))
    assert len(depth_logs) == len(render_logs) == len(CLIPS)
    for log in depth_logs:
        (line,) = [line for line in log.read_text().splitlines() if ".onnx: running on" in line]
        assert re.search(r"da3_small_140x\d+_u8\.onnx: running on the [A-Z]+( \(\w+\))? with provider \w+, "
                         r"precision exact", line), line  # fmt: skip
    for log in render_logs:
        assert re.search(r"rendering on the CPU", log.read_text()), log


def test_the_jobs_that_run_models_and_only_they_take_a_device_lease(converted):
    from test_workflow_rules import MODEL_RULES

    workdir, _ = converted
    leased = {log.relative_to(workdir / "logs").parts[0] for log in (workdir / "logs").rglob("*.log")
              if LEASE.search(log.read_text())}  # fmt: skip
    assert leased == MODEL_RULES - {"preview_depth", "preview_near_maps"}  # tests/test_preview.py: those


# What stereo3d.runtime.devices logs when a job takes its device: a scheduler's, a locked slot, or the CPU.
LEASE = re.compile(r"device chosen by the scheduler|GPU \d+ \(slot \d+ of \d+\) locked|no NVIDIA GPU on this machine|"
                   r"CUDA_VISIBLE_DEVICES=.* hides every GPU")  # fmt: skip


def test_a_run_builds_only_the_exports_its_videos_use(tmp_path_factory):
    """With weights and no exports, a run of the library plans one export per tier its videos take (160x90: 16:9,
    120x90: 4:3), each with its validation report, and no other: once the probes say what the videos are."""
    workdir = exported_workdir(tmp_path_factory, "library-bare", exports=())
    make_library(workdir)
    write_config(workdir)
    snakemake(workdir, *(f"work/{Path(name).stem}/probe.json" for name in CLIPS))
    dry = snakemake(workdir, "-n").stdout
    assert job_stats(dry)["export_da3"] == 2
    planned = sorted(set(re.findall(r"models/DA3/[^\s,]+", dry)))
    tiers = ("da3_small_140x112_u8.onnx", "da3_small_140x84_u8.onnx")
    assert planned == [f"models/DA3/{name}{report}" for name in tiers for report in ("", ".validation.json")]


def test_a_rerun_schedules_nothing(converted):
    workdir, _ = converted
    dry = snakemake(workdir, "-n")
    assert "Nothing to be done" in dry.stdout + dry.stderr


def test_a_side_not_a_multiple_of_14_stops_before_any_job(tmp_path):
    (tmp_path / "videos").mkdir()
    write_config(tmp_path, da3={"size": 500})
    run = snakemake(tmp_path, check=False)
    assert run.returncode != 0
    assert "da3.size: 500 is not a multiple of 14" in run.stderr
    assert not (tmp_path / "models").exists() and not (tmp_path / "work").exists()


def test_missing_weights_without_the_demo_stop_before_any_job(tmp_path, make_clip):
    make_clip("videos/a.mp4", frames=4)
    write_config(tmp_path)
    run = snakemake(tmp_path, check=False)
    assert run.returncode != 0
    assert "DA3 small weights not found" in run.stderr
    assert not (tmp_path / "work").exists()


def test_a_missing_library_folder_stops_before_any_job(tmp_path):
    write_config(tmp_path, library={"folder": "nowhere"})
    run = snakemake(tmp_path, check=False)
    assert run.returncode != 0 and "library folder not found" in run.stderr
