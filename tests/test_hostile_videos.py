"""A library full of hostile videos: each converts correctly, or fails alone in one line naming file and cause.

One Snakemake run with ``--keep-going`` over the whole corpus (tests/corpus.py); the cases are then checked one
by one against what the corpus says the workflow does with them.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import corpus
import numpy as np
import pytest
from harness import NVDS_EXPORT, NVDS_TIER, PARTIAL, exported_workdir, job_stats, snakemake, stray_files, write_config

from stereo3d.errors import BadVideo
from stereo3d.io.decode import FrameReader
from stereo3d.io.ffmpeg import ffmpeg_url, run_ffmpeg
from stereo3d.io.probe import probe_video
from stereo3d.stages.probe import load_probe
from stereo3d.workflow.library import discover, video_id

CONVERTS = [c for c in corpus.VIDEO_CASES if c.expect == "converts"]
FAILS = [c for c in corpus.VIDEO_CASES if c.expect and c.expect != "converts"]
SKIPPED = [c for c in corpus.VIDEO_CASES if not c.expect]
EXTENSIONS = [".mp4", ".mkv"]


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    workdir = exported_workdir(tmp_path_factory, "hostile-library")
    made = corpus.make_corpus(workdir / "videos")
    # No QC figures: they would double the jobs; a failed video's row in the report's table is test_real_library's.
    write_config(workdir, report={"qc": False})
    run = snakemake(workdir, "--keep-going", check=False)
    return workdir, made, run


def _result(workdir: Path, name: str) -> Path:
    vid = video_id(name)
    return workdir / "results" / vid / f"{vid}_LRF_Full_SBS.mp4"


COLOUR_TAGS = ("color_primaries", "color_transfer", "color_space")


def _decoded(path: Path, width: int, height: int, *input_options: str) -> np.ndarray:
    """Every frame of ``path`` as ffmpeg itself decodes it, RGB ``[N, height, width, 3]`` (not through FrameReader)."""
    args = [*input_options, "-i", ffmpeg_url(path), "-map", "0:v:0", "-fps_mode", "passthrough"]
    done = run_ffmpeg([*args, "-f", "rawvideo", "-pix_fmt", "rgb24", "pipe:1"], path, "reading back (test)")
    return np.frombuffer(done.stdout, np.uint8).reshape(-1, height, width, 3)


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
    # The source's colour tags, or BT.709 (what players assume) where it has none.
    assert {k: result[k] for k in COLOUR_TAGS} == {k: source[k] or "bt709" for k in COLOUR_TAGS}
    assert result["color_range"] == "tv"


# --- what each convertible case is in the corpus for, read back from its result --------------------------------


def _truncated_mid(workdir, source_path, source, out, result):
    # The frames that are there: as many as ffmpeg decodes from the cut file, fewer than were written.
    there = _decoded(source_path, source["video"]["width"], source["video"]["height"]).shape[0]
    assert 0 < there < corpus.TRUNCATED_MID_FRAMES
    assert result["video"]["frame_count"] == source["video"]["frame_count"] == there
    assert result["frame_pts_s"] == source["frame_pts_s"]


def _single_frame(workdir, source_path, source, out, result):
    assert result["video"]["frame_count"] == 1 and result["frame_pts_s"] == [0.0]
    assert _decoded(out, result["video"]["width"], result["video"]["height"]).shape[0] == 1


def _three_frames(workdir, source_path, source, out, result):
    assert result["video"]["frame_count"] == 3 and result["frame_pts_s"] == [0.0, 0.125, 0.25]
    assert _decoded(out, result["video"]["width"], result["video"]["height"]).shape[0] == 3


def _odd_15x9(workdir, source_path, source, out, result):
    assert (source["video"]["width"], source["video"]["height"]) == (15, 9)
    assert (result["video"]["width"], result["video"]["height"]) == (30, 10)  # two 15-wide eyes, 9 -> 10 rows
    assert result["video"]["pix_fmt"] == "yuv420p"
    # The added row repeats the last one (no black or green line at the bottom).
    frames = _decoded(out, 30, 10).astype(int)
    assert np.abs(frames[:, 9] - frames[:, 8]).max() <= 4
    assert np.abs(frames[:, 8] - frames[:, 7]).max() > 4 * np.abs(frames[:, 9] - frames[:, 8]).max()


def _vfr(workdir, source_path, source, out, result):
    assert source["video"]["vfr"] and result["video"]["vfr"]
    assert result["frame_pts_s"] == source["frame_pts_s"]  # every frame at the source's own time


def _rotated_90(workdir, source_path, source, out, result):
    coded_w, coded_h = source["video"]["width"], source["video"]["height"]
    assert source["video"]["rotation"] == 90
    # Each eye is the display picture (portrait), and the output needs no rotation tag to be shown upright.
    eye_w, eye_h = coded_h, coded_w
    assert (result["video"]["width"], result["video"]["height"]) == (2 * eye_w, eye_h)
    assert (result["video"]["display_width"], result["video"]["display_height"]) == (2 * eye_w, eye_h)
    assert result["video"]["rotation"] == 0
    # ...and it is the source turned 90 degrees clockwise (parallax moves it by well under a pixel here).
    upright = np.rot90(_decoded(source_path, coded_w, coded_h, "-noautorotate"), k=-1, axes=(1, 2)).astype(int)
    left_eye = _decoded(out, 2 * eye_w, eye_h)[:, :, :eye_w].astype(int)
    error = np.abs(left_eye - upright).mean()
    assert error < 12
    assert error * 3 < np.abs(left_eye - upright[:, ::-1, ::-1]).mean()  # not turned the other way


def _interlaced(workdir, source_path, source, out, result):
    assert source["video"]["field_order"] == "tt"
    assert result["video"]["field_order"] == "progressive"
    # One progressive frame per interlaced frame (not one per field), at the source's times.
    assert result["frame_pts_s"] == source["frame_pts_s"]


def _ten_bit(workdir, source_path, source, out, result):
    assert source["video"]["bit_depth"] == 10 and {k: source["video"][k] for k in corpus.HDR_TAGS} == corpus.HDR_TAGS
    video = result["video"]
    assert (video["codec"], video["pix_fmt"], video["bit_depth"]) == ("hevc", "yuv420p10le", 10)
    assert {k: video[k] for k in corpus.HDR_TAGS} == corpus.HDR_TAGS  # BT.2020 / PQ carried, not made BT.709


def _hfr_240(workdir, source_path, source, out, result):
    # Frame steps of 1/240 s are no whole milliseconds: the Matroska render intermediates round them, and the
    # final mux must put every frame back on the source's own ticks.
    assert (result["video"]["fps_fraction"], result["video"]["vfr"]) == ("240/1", False)
    assert result["frame_pts_s"] == source["frame_pts_s"]


def _hostile_name(workdir, source_path, source, out, result):
    # Converted (the result exists and is whole) and nothing in the name ran: no file a shell would have made.
    assert result["video"]["frame_count"] == 4  # the corpus's plain clip
    for folder in (workdir, workdir / "videos", Path.cwd()):
        assert not [name for name in corpus.PWNED if (folder / name).exists()], folder
    assert not list(workdir.rglob("pwned*"))


def _repeat_markers(workdir, source_path, source, out, result):
    # A picture every 6th frame: 8 frames as shown, each lasting until the next, the last to the end (3 s).
    spec = corpus.REPEAT_MARKERS
    pictures = spec["frames"] // spec["every"]
    step = spec["every"] / spec["fps"]
    assert result["video"]["frame_count"] == source["video"]["frame_count"] == pictures
    assert result["frame_pts_s"] == pytest.approx([n * step for n in range(pictures)], abs=1e-9)
    assert result["video"]["duration_s"] == pytest.approx(spec["frames"] / spec["fps"], abs=0.5 / spec["fps"])
    # In sync: the audio (re-encoded to AAC for MP4) lasts as long as the video and starts with it.
    assert len(result["audio"]) == 1 and abs(result["video"]["start_pts_s"]) < 1e-3
    assert result["duration_s"] == pytest.approx(spec["frames"] / spec["fps"], abs=1 / spec["fps"])
    # Each frame is its own picture (the bar moves between them), not a neighbour's.
    left = _decoded(out, 128, 36)[:, :, :64].astype(int)
    assert all(np.abs(left[n + 1] - left[n]).mean() > 2 for n in range(pictures - 1))


def _mid_gop(workdir, source_path, source, out, result):
    # The decoder delivers these pictures out of order; the result has every one of them at its own time.
    assert result["video"]["frame_count"] == source["video"]["frame_count"] > 30
    assert result["frame_pts_s"] == source["frame_pts_s"]
    assert _decoded(out, result["video"]["width"], result["video"]["height"]).shape[0] == result["video"]["frame_count"]


def _edit_list_cut(workdir, source_path, source, out, result):
    # The pre-roll before the cut is not shown: the result starts where the edit list does and lasts as long.
    full, cut = 48 / 24, corpus.EDIT_LIST_CUT_S
    assert source["video"]["duration_s"] == pytest.approx(full - cut, abs=1 / 24)
    assert result["frame_pts_s"] == source["frame_pts_s"]
    assert abs(result["video"]["start_pts_s"] - source["video"]["start_pts_s"]) < 1 / 24
    assert len(result["audio"]) == 1


WHAT_EACH_CASE_IS_FOR = {
    "repeat_markers.avi": _repeat_markers,
    "mid_gop.mp4": _mid_gop,
    "edit_list_cut.mp4": _edit_list_cut,
    "truncated_mid.mkv": _truncated_mid,
    "single_frame.mp4": _single_frame,
    "three_frames.mp4": _three_frames,
    "odd_15x9.mp4": _odd_15x9,
    "vfr.mp4": _vfr,
    "rotated_90.mp4": _rotated_90,
    "interlaced.mp4": _interlaced,
    "ten_bit.mkv": _ten_bit,
    "hfr_240.mp4": _hfr_240,
    corpus.HOSTILE_NAME: _hostile_name,
}


def test_every_convertible_case_has_its_own_check():
    assert set(WHAT_EACH_CASE_IS_FOR) == {case.name for case in CONVERTS}


@pytest.mark.parametrize("case", CONVERTS, ids=lambda c: c.name[:20])
def test_each_case_converts_as_the_corpus_says(library, case):
    workdir, made, run = library
    out = _result(workdir, case.name)
    assert out.is_file(), f"{case.name}: no result\n{run.stderr[-4000:]}"
    check = WHAT_EACH_CASE_IS_FOR[case.name]
    check(workdir, made[case.name], probe_video(made[case.name]), out, probe_video(out))


@pytest.mark.parametrize("case", FAILS, ids=lambda c: c.name)
def test_bad_cases_fail_alone_in_one_line_naming_file_and_cause(library, case):
    workdir, made, run = library
    path = made[case.name].resolve()  # the stages read the real file (through a link) and name it
    lines = [line for line in run.stderr.splitlines() if f"bad video: {path}: " in line]
    assert lines, f"{case.name}: no one-line error\n{run.stderr[-4000:]}"
    assert all(case.expect in line for line in lines), lines
    vid = video_id(case.name)
    log = (workdir / "logs/probe" / f"{vid}.log").read_text(encoding="utf-8")
    assert f"bad video: {path}: " in log and case.expect in log
    assert not (workdir / "results" / vid).exists()
    # The probe keeps the reason (this run's report lists it) and so does the failure record (later runs).
    assert case.expect in json.loads((workdir / "work" / vid / "probe.json").read_text())["error"]
    assert case.expect in json.loads((workdir / "work" / vid / "failed.json").read_text())["reason"]


def test_every_good_video_completes_and_each_bad_one_is_listed(library):
    workdir, _, run = library
    assert run.returncode == 0, run.stderr[-3000:]  # a bad file is a row of the report, not a failed run
    done = sorted(p.name for p in (workdir / "results").rglob("*.mp4"))
    assert len(done) == len(CONVERTS) + 1  # the video inside the folder named like a video converts too
    assert f"{len(FAILS)} of {len(CONVERTS) + 1 + len(FAILS)} videos not converted" in run.stderr
    listed = run.stderr[run.stderr.index("videos not converted:") :]
    for case in FAILS:  # one line each at the end of the run, with its reason
        assert re.search(rf"^  {re.escape(video_id(case.name))}: .*{re.escape(case.expect)}", listed, re.M), case.name


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


def test_a_rerun_tries_no_bad_file_again(library):
    workdir, _, _ = library
    dry = snakemake(workdir, "-n", "--keep-going", check=False)
    # The failures are known before any job now (their records): nothing of any video, bad or good, runs again.
    assert job_stats(dry.stdout + dry.stderr) == {}


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
    from stereo3d.stages.render import RenderSettings, render_video

    near = tmp_path / "near.maps"
    import numpy as np

    write_maps(near, [np.zeros((1, 9, 16), np.float32)], "linear", attrs={"start": 0})
    probe = {"video": {"display_width": 8704, "display_height": 4896, "bit_depth": 8, "fps_fraction": "24/1"}}
    with pytest.raises(BadVideo, match="17408x4896 exceed the encoders' 16384 px limit; choose a half-size"):
        render_video(tmp_path / "never-read.mp4", probe, near, tmp_path / "out.mkv", RenderSettings())
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


def _no_constant(name):
    raise AssertionError(f"{name} is not JSON (json.dumps writes it only with allow_nan)")


def test_probe_json_of_every_good_case_is_plain_json(library):
    """Python's json writes NaN and Infinity unless told not to, and other readers refuse them."""
    workdir, made, _ = library
    for case in CONVERTS:
        info = probe_video(made[case.name])
        assert json.loads(json.dumps(info, allow_nan=False)) == info, case.name
        folder = workdir / "work" / video_id(case.name)
        written = json.loads((folder / "probe.json").read_text(encoding="utf-8"), parse_constant=_no_constant)
        # The summary holds everything but the per-frame lists, which live beside it (frames.npz), and the picture
        # area found in the frame (stereo3d.stereo.bars): none of these clips has bars.
        picture = written["video"].pop("picture")
        assert picture == [0, 0, info["video"]["display_width"], info["video"]["display_height"]], case.name
        assert written["video"] == {k: v for k, v in info["video"].items() if k != "keyframes"}, case.name
        assert "frame_pts_s" not in written
        assert load_probe(folder / "probe.json")["frame_pts_s"] == info["frame_pts_s"], case.name


def test_nvds_converts_videos_shorter_than_its_window(tmp_path_factory):
    """NVDS looks at 4 frames: one frame and three frames convert (the window is filled by repetition)."""
    workdir = exported_workdir(tmp_path_factory, "hostile-nvds", nvds=True)
    names = ("single_frame.mp4", "three_frames.mp4", "odd_15x9.mp4")
    made = corpus.make_corpus(workdir / "videos", names)
    write_config(workdir, stabilise={"method": "nvds", "nvds_tier": NVDS_TIER}, export=NVDS_EXPORT)
    snakemake(workdir)
    for name in names:
        source = probe_video(made[name])["video"]
        assert probe_video(_result(workdir, name))["video"]["frame_count"] == source["frame_count"]
