"""A library full of hostile videos: each converts correctly, or fails alone in one line naming file and cause.

One Snakemake run with ``--keep-going`` over the whole corpus (tests/corpus.py); the cases are then checked one
by one against what the corpus says the workflow does with them.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import corpus
import pytest
from harness import PARTIAL, exported_workdir, snakemake, stray_files, write_config

from stereo3d.errors import BadVideo
from stereo3d.io.decode import FrameReader
from stereo3d.io.probe import probe_video
from stereo3d.workflow.library import discover, video_id

CONVERTS = [c for c in corpus.VIDEO_CASES if c.expect == "converts"]
FAILS = [c for c in corpus.VIDEO_CASES if c.expect and c.expect != "converts"]
SKIPPED = [c for c in corpus.VIDEO_CASES if not c.expect]
EXTENSIONS = [".mp4", ".mkv"]


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    workdir = exported_workdir(tmp_path_factory, "hostile-library")
    made = corpus.make_corpus(workdir / "videos")
    write_config(workdir)
    run = snakemake(workdir, "--keep-going", check=False)
    return workdir, made, run


def _result(workdir: Path, name: str) -> Path:
    vid = video_id(name)
    return workdir / "results" / vid / f"{vid}_LRF_Full_SBS.mp4"


@pytest.mark.parametrize("case", CONVERTS, ids=lambda c: c.name[:20])
def test_convertible_cases_give_a_full_sbs_file_with_every_frame(library, case):
    workdir, made, run = library
    out = _result(workdir, case.name)
    assert out.is_file(), f"{case.name}: no result\n{run.stderr[-4000:]}"
    source, result = probe_video(made[case.name])["video"], probe_video(out)["video"]
    assert result["frame_count"] == source["frame_count"]
    # Display orientation, both eyes side by side; odd heights padded to even (4:2:0).
    assert result["display_width"] == 2 * source["display_width"]
    assert result["display_height"] == source["display_height"] + source["display_height"] % 2
    assert result["rotation"] == 0
    assert abs(result["duration_s"] - source["duration_s"]) < 1.5 / source["fps"]
    assert result["fps_fraction"] == source["fps_fraction"]
    assert result["vfr"] == source["vfr"]


def test_a_240_fps_source_keeps_its_exact_frame_rate(library):
    # Frame steps of 1/240 s are no whole milliseconds: the Matroska render intermediates round them, and the
    # final mux must put every frame back on the source's own ticks.
    workdir, made, _ = library
    source, out = probe_video(made["hfr_240.mp4"]), probe_video(_result(workdir, "hfr_240.mp4"))
    assert (out["video"]["fps_fraction"], out["video"]["vfr"]) == ("240/1", False)
    assert out["frame_pts_s"] == source["frame_pts_s"]


@pytest.mark.parametrize("case", FAILS, ids=lambda c: c.name)
def test_bad_cases_fail_alone_in_one_line_naming_file_and_cause(library, case):
    workdir, made, run = library
    path = Path("videos") / case.name  # as Snakemake hands it to the job
    lines = [line for line in run.stderr.splitlines() if f"bad video: {path}: " in line]
    assert lines, f"{case.name}: no one-line error\n{run.stderr[-4000:]}"
    assert all(case.expect in line for line in lines), lines
    vid = video_id(case.name)
    log = (workdir / "logs/probe" / f"{vid}.log").read_text(encoding="utf-8")
    assert f"bad video: {path}: " in log and case.expect in log
    assert not (workdir / "results" / vid).exists()
    assert not (workdir / "work" / vid / "probe.json").exists()


def test_the_run_reports_failure_but_every_good_video_completes(library):
    workdir, _, run = library
    assert run.returncode != 0  # the failures are not hidden
    done = sorted(p.name for p in (workdir / "results").rglob("*.mp4"))
    assert len(done) == len(CONVERTS) + 1  # the video inside the folder named like a video converts too


def test_a_folder_named_like_a_video_is_not_a_video_but_its_contents_are(library):
    workdir, made, _ = library
    assert _result(workdir, "folder.mp4/inside.mp4").is_file()
    assert not (workdir / "results" / video_id("folder.mp4")).exists()


def test_a_broken_symlink_is_skipped_with_a_warning_naming_it(library):
    workdir, made, run = library
    assert f"skipped {Path('videos/dangling.mp4')}: broken symbolic link" in run.stderr
    assert not (workdir / "results" / "dangling").exists()


def test_no_temporary_or_half_written_file_remains(library):
    workdir, _, _ = library
    assert stray_files(workdir) == []
    assert not [p for p in workdir.rglob(f"*{PARTIAL}*")]


def test_a_rerun_retries_only_the_failed_videos(library):
    workdir, _, _ = library
    dry = snakemake(workdir, "-n", "--keep-going", check=False)
    scheduled = dry.stdout + dry.stderr
    counts = dict(re.findall(r"^(\w+)\s+(\d+)$", scheduled, re.MULTILINE))
    # Only the failed probes again (their joins wait on the segment checkpoint); nothing of the good videos.
    assert counts["probe"] == str(len(FAILS)), scheduled
    assert not {"depth", "near_plan", "near_maps", "render", "export_da3"} & set(counts), scheduled


# --- the same cases at the library level (no Snakemake) -------------------------------------------


def test_discovery_skips_folders_and_dangling_links(tmp_path):
    corpus.make_corpus(tmp_path, ("folder.mp4", "dangling.mp4", "single_frame.mp4"))
    found = discover(tmp_path, EXTENSIONS)
    assert sorted(p.relative_to(tmp_path).as_posix() for p in found.values()) == [
        "folder.mp4/inside.mp4", "single_frame.mp4"]  # fmt: skip


def test_an_8k_header_is_probed_without_decoding_the_video(tmp_path):
    path = corpus.make_8k_header(tmp_path / "eight_k.mp4")
    video = probe_video(path)["video"]
    assert (video["width"], video["height"], video["frame_count"]) == (7680, 4320, 1)


def test_an_output_wider_than_the_encoders_allow_is_refused_before_decoding(tmp_path):
    """A 16K-wide full SBS (from an 8K+ source) fails in one line naming the layout to choose instead."""
    from stereo3d.io.mapstore import write_maps
    from stereo3d.stages.render import render_video
    from stereo3d.stereo.warp import StereoSettings

    near = tmp_path / "near.maps"
    import numpy as np

    write_maps(near, [np.zeros((1, 9, 16), np.float32)], "linear", attrs={"start": 0})
    probe = {"video": {"display_width": 8704, "display_height": 4896, "bit_depth": 8, "fps_fraction": "24/1"}}
    with pytest.raises(BadVideo, match="17408x4896 exceed the encoders' 16384 px limit; choose a half-size"):
        render_video(tmp_path / "never-read.mp4", probe, near, tmp_path / "out.mkv", StereoSettings())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["near.maps"]


def test_interlaced_video_is_deinterlaced_frame_for_frame(tmp_path):
    path = corpus.make_corpus(tmp_path, ("interlaced.mp4",))["interlaced.mp4"]
    probe = probe_video(path)
    assert probe["video"]["field_order"] == "tt"
    with FrameReader(path, probe) as frames:
        deinterlaced = list(frames)
    assert len(deinterlaced) == probe["video"]["frame_count"] == 4
    woven_probe = {**probe, "video": {**probe["video"], "field_order": "progressive"}}
    with FrameReader(path, woven_probe) as frames:
        woven = list(frames)
    assert any((a != b).any() for a, b in zip(deinterlaced, woven, strict=True))


def test_probe_json_of_every_good_case_is_plain_json(tmp_path):
    made = corpus.make_corpus(tmp_path, ("vfr.mp4", "rotated_90.mp4", "ten_bit.mkv", "hfr_240.mp4"))
    for path in made.values():
        json.dumps(probe_video(path))


def test_nvds_converts_videos_shorter_than_its_window(tmp_path_factory):
    """NVDS looks at 4 frames: one frame and three frames convert (the window is filled by repetition)."""
    from stereo3d.demo.smoke import write_smoke_checkpoint
    from stereo3d.models.nvds.model import NvdsConfig

    workdir = exported_workdir(tmp_path_factory, "hostile-nvds")
    names = ("single_frame.mp4", "three_frames.mp4", "odd_15x9.mp4")
    made = corpus.make_corpus(workdir / "videos", names)
    write_smoke_checkpoint(workdir / "weights/NVDS/NVDS_Stabilizer.pth", config=NvdsConfig.tiny(), seed=0)
    write_config(workdir, stabilise={"method": "nvds", "nvds_tier": "96x64"}, export={"nvds_architecture": "tiny"})
    snakemake(workdir)
    for name in names:
        source = probe_video(made[name])["video"]
        assert probe_video(_result(workdir, name))["video"]["frame_count"] == source["frame_count"]
