"""The whole workflow, for real: Snakemake on a tiny generated library in a temporary folder."""

from __future__ import annotations

from pathlib import Path

import pytest
from harness import exported_workdir, snakemake, write_config

from stereo3d.demo import samples
from stereo3d.io.probe import probe_video

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    """A two-clip library (one 16:9 with audio, one 4:3 without) converted with smoke DA3 weights."""
    from stereo3d.demo.smoke import write_smoke_weights

    workdir = tmp_path_factory.mktemp("library")
    videos = workdir / "videos"
    videos.mkdir()
    samples.make_clip(videos / "tone.mp4", width=160, height=90, frames=12, fps="12", audio=True)
    samples.make_clip(videos / "square.mkv", width=120, height=90, frames=10, fps="10")
    write_smoke_weights(workdir / "weights/DA3/Small/model.safetensors", "small", seed=0)
    write_config(workdir)
    run = snakemake(workdir)
    return workdir, run


def test_every_video_becomes_a_full_sbs_file_with_its_frames_and_audio(converted):
    workdir, _ = converted
    for name, has_audio in (("tone.mp4", True), ("square.mkv", False)):
        source = probe_video(workdir / "videos" / name)
        out = workdir / "results" / Path(name).stem / f"{Path(name).stem}_LRF_Full_SBS.mp4"
        assert out.is_file(), out
        result = probe_video(out)
        assert result["video"]["width"] == 2 * source["video"]["width"]
        assert result["video"]["height"] == source["video"]["height"]
        assert result["video"]["frame_count"] == source["video"]["frame_count"]
        assert bool(result["audio"]) == has_audio
        frame = 1 / source["video"]["fps"]
        assert abs(result["duration_s"] - source["duration_s"]) <= frame + 1e-3


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
    from stereo3d.demo.smoke import write_smoke_checkpoint
    from stereo3d.io.mapstore import MapReader
    from stereo3d.models.nvds.model import NvdsConfig

    workdir = exported_workdir(tmp_path_factory, "workflow-nvds")  # DA3 smoke weights and their exports
    samples.make_clip(workdir / "videos/wide.mp4", width=128, height=72, frames=6, fps="6")
    write_smoke_checkpoint(workdir / "weights/NVDS/NVDS_Stabilizer.pth", config=NvdsConfig.tiny(), seed=0)
    write_config(workdir, stabilise={"method": "nvds", "nvds_tier": "96x64"}, export={"nvds_architecture": "tiny"})
    snakemake(workdir)
    out = workdir / "results/wide/wide_LRF_Full_SBS.mp4"
    assert probe_video(out)["video"]["frame_count"] == 6
    assert (workdir / "models/NVDS/NVDS_Head_96x64.onnx.validation.json").is_file()
    (near_store,) = (workdir / "work/wide/near").glob("*/nvds-*/*.zarr")
    with MapReader(near_store) as maps:
        assert maps.attrs["method"] == "nvds" and len(maps) == 6
    # Switching back to EMA needs no NVDS job and no depth job: only near maps onward.
    write_config(workdir, stabilise={"method": "ema"}, export={"nvds_architecture": "tiny"})
    dry = snakemake(workdir, "-n")
    scheduled = dry.stdout + dry.stderr
    assert "near_maps" in scheduled and "export_nvds" not in scheduled and "rule depth" not in scheduled


def test_deleting_models_rebuilds_byte_identical_exports(converted):
    """Exports are reproducible from config.yaml: same weights and settings, same bytes."""
    import hashlib
    import shutil

    workdir, _ = converted
    models = workdir / "models"
    before = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in models.rglob("*.onnx")}
    shutil.rmtree(models)
    snakemake(workdir, "exports")
    after = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in models.rglob("*.onnx")}
    assert before and after == before
