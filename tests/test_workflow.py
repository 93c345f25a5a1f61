"""The whole workflow, for real: Snakemake on a tiny generated library in a temporary folder."""

from __future__ import annotations

from pathlib import Path

import pytest
from harness import NVDS_EXPORT, NVDS_TIER, export_cache, exported_workdir, planned_jobs, snakemake, write_config

from stereo3d.demo import samples
from stereo3d.io.probe import probe_video

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    """A two-clip library (one 16:9 with audio, one 4:3 without) converted with smoke DA3 weights. The 16:9 export
    is the session's; the 4:3 one is left for this run to build."""
    workdir = exported_workdir(tmp_path_factory, "library", exports=("da3_small_140x84_u8.onnx",))
    videos = workdir / "videos"
    videos.mkdir()
    samples.make_clip(videos / "tone.mp4", width=160, height=90, frames=12, fps="12", audio=True)
    samples.make_clip(videos / "square.mkv", width=120, height=90, frames=10, fps="10")
    write_config(workdir)
    run = snakemake(workdir)
    return workdir, run


def test_every_video_becomes_a_full_sbs_file_with_its_frames_and_audio(converted):
    workdir, _ = converted
    # name: (width, height, frames, fps, audio), as the fixture made them
    for name, (width, height, frames, fps, has_audio) in {
        "tone.mp4": (160, 90, 12, 12, True),
        "square.mkv": (120, 90, 10, 10, False),
    }.items():
        out = workdir / "results" / Path(name).stem / f"{Path(name).stem}_LRF_Full_SBS.mp4"
        assert out.is_file(), out
        result = probe_video(out)
        assert (result["video"]["width"], result["video"]["height"]) == (2 * width, height)
        assert result["video"]["frame_count"] == frames
        assert bool(result["audio"]) == has_audio
        assert abs(result["duration_s"] - frames / fps) <= 1 / fps + 1e-3


def test_exports_and_their_validation_reports_are_built_for_the_tiers_in_use(converted):
    workdir, _ = converted
    # 160x90 takes the 16:9 tier, 120x90 the 4:3 one; no other export is made
    built = sorted(path.name for path in (workdir / "models/DA3").glob("*.onnx"))
    assert built == ["da3_small_140x112_u8.onnx", "da3_small_140x84_u8.onnx"]
    for name in built:
        assert (workdir / "models/DA3" / f"{name}.validation.json").is_file()


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


def test_nvds_stabilisation_runs_in_the_workflow(tmp_path_factory):
    """NVDS on (tiny architecture, smoke checkpoint in the real layout): split export, stage, render."""
    from stereo3d.io.mapstore import MapReader

    # DA3 and NVDS smoke weights and their exports, the session's (the export rules: test_nvds_workflow.py)
    workdir = exported_workdir(tmp_path_factory, "workflow-nvds", nvds=True)
    samples.make_clip(workdir / "videos/wide.mp4", width=128, height=72, frames=6, fps="6")
    write_config(workdir, stabilise={"method": "nvds", "nvds_tier": NVDS_TIER}, export=NVDS_EXPORT)
    snakemake(workdir)
    out = workdir / "results/wide/wide_LRF_Full_SBS.mp4"
    assert probe_video(out)["video"]["frame_count"] == 6
    assert (workdir / "models/NVDS/NVDS_Head_96x64.onnx.validation.json").is_file()
    (near_store,) = (workdir / "work/wide/near").glob("*/nvds-*/*.zarr")
    with MapReader(near_store) as maps:
        assert maps.attrs["method"] == "nvds" and len(maps) == 6
    # Switching back to EMA needs no NVDS job and no depth job: only near maps onward.
    write_config(workdir, stabilise={"method": "ema"}, export=NVDS_EXPORT)
    near_on = {"near_plan": 1, "near_maps": 1, "render": 1, "join": 1, "qc_video": 1, "qc_library": 1}
    assert planned_jobs(workdir) == {**near_on, "qc_exports": 1}  # the NVDS models leave the exports table


def test_an_export_is_the_same_bytes_from_another_run_and_folder(converted, tmp_path_factory):
    """Exports are reproducible from config.yaml: the 4:3 export this library's run built equals, byte for byte,
    the one the session's export run built in its own folder from the same weights and settings."""
    import hashlib

    workdir, run = converted
    assert "export_da3" in run.stdout + run.stderr  # built here, not linked
    name = "models/DA3/da3_small_140x112_u8.onnx"
    ours, theirs = workdir / name, export_cache(tmp_path_factory) / name
    assert ours.stat().st_ino != theirs.stat().st_ino
    assert hashlib.sha256(ours.read_bytes()).hexdigest() == hashlib.sha256(theirs.read_bytes()).hexdigest()
