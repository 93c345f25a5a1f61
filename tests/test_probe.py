"""probe_video: exact facts from the ffmpeg binary alone, and one clear line for every bad input."""

from __future__ import annotations

import json
import os
import re

import pytest

from stereo3d.errors import BadVideo
from stereo3d.io import ffmpeg
from stereo3d.io.ffmpeg import ffmpeg_url, run_ffmpeg
from stereo3d.io.probe import probe_video

HOSTILE_NAME = "my clip; $(touch pwned) `x` 'quote' \"dq\" & ünïcødé 視頻 -x.mp4"


def test_probe_reports_exact_frames_fps_size_and_streams(make_clip):
    info = probe_video(make_clip("a.mp4", frames=30, fps="24", audio=True, subtitles=True))
    video = info["video"]
    assert (video["width"], video["height"]) == (160, 90)
    assert (video["display_width"], video["display_height"]) == (160, 90)
    assert video["frame_count"] == 30
    assert video["fps_fraction"] == "24/1" and video["fps"] == 24.0
    assert video["vfr"] is False
    assert video["codec"] == "h264" and video["pix_fmt"] == "yuv420p" and video["bit_depth"] == 8
    assert video["rotation"] == 0 and video["sar"] == "1:1"
    assert info["frame_pts_s"] == pytest.approx([i / 24 for i in range(30)], abs=1e-9)
    assert info["duration_s"] == pytest.approx(30 / 24, abs=0.02)
    assert [(a["codec"], a["channels"], a["sample_rate"], a["language"]) for a in info["audio"]] == [
        ("aac", 2, 48000, "eng")
    ]
    assert [(s["codec"], s["language"], s["title"]) for s in info["subtitles"]] == [("mov_text", "eng", "English cues")]
    assert info["attachments"] == 0 and info["chapters"] == 0
    assert info["bytes"] == os.path.getsize(info["path"])


def test_probe_result_is_json_serialisable(make_clip):
    info = probe_video(make_clip(audio=True))
    assert json.loads(json.dumps(info)) == info


def test_probe_without_audio_or_subtitles_lists_none(make_clip):
    info = probe_video(make_clip())
    assert info["audio"] == [] and info["subtitles"] == []


@pytest.mark.parametrize("name", ["ntsc.mp4", "ntsc.mkv"])
def test_ntsc_rate_is_the_exact_fraction_even_through_millisecond_timestamps(make_clip, name):
    info = probe_video(make_clip(name, frames=48, fps="24000/1001"))
    assert info["video"]["fps_fraction"] == "24000/1001"
    assert info["video"]["frame_count"] == 48
    assert info["video"]["vfr"] is False


def test_matroska_subtitles_are_listed_with_title(make_clip):
    info = probe_video(make_clip("subs.mkv", subtitles=True, audio=True))
    assert [(s["codec"], s["language"], s["title"]) for s in info["subtitles"]] == [("subrip", "eng", "English cues")]
    assert info["video"]["time_base"] == "1/1000"


def test_variable_frame_rate_is_detected_with_exact_timestamps(make_clip):
    info = probe_video(make_clip("vfr.mp4", frames=24, fps="24", vfr=True))
    assert info["video"]["vfr"] is True
    assert info["video"]["frame_count"] == 24
    expected = [(n + n // 3) / 24 for n in range(24)]  # every third interval is doubled
    assert info["frame_pts_s"] == pytest.approx(expected, abs=1e-9)
    # Average rate: 23 intervals over the span of the timestamps.
    assert info["video"]["fps"] == pytest.approx(23 / expected[-1], rel=1e-6)


def test_rotated_clip_swaps_display_dimensions(make_clip):
    video = probe_video(make_clip("rot.mp4", rotation=90))["video"]
    assert video["rotation"] == 90
    assert (video["width"], video["height"]) == (160, 90)
    assert (video["display_width"], video["display_height"]) == (90, 160)


def test_upside_down_clip_keeps_dimensions(make_clip):
    video = probe_video(make_clip("flip.mp4", rotation=180))["video"]
    assert video["rotation"] == 180
    assert (video["display_width"], video["display_height"]) == (160, 90)


def test_ten_bit_clip_reports_depth_and_colour_tags(make_clip):
    path = make_clip(
        "hdr.mkv",
        pix_fmt="yuv420p10le",
        extra=("-vf", "setparams=color_primaries=bt2020:color_trc=smpte2084:colorspace=bt2020nc:range=tv"),
    )
    video = probe_video(path)["video"]
    assert video["bit_depth"] == 10 and video["pix_fmt"] == "yuv420p10le" and video["color_range"] == "tv"
    assert (video["color_space"], video["color_primaries"], video["color_transfer"]) == (
        "bt2020nc",
        "bt2020",
        "smpte2084",
    )
    assert video["hdr10"] is None  # HDR tags alone: no mastering display, no light level


# An HDR10 master as x265 takes it (chromaticity in 1/50000, luminance in 1/10000 cd/m²): a P3-D65 display of
# 1000 cd/m² down to 0.0001, content peaking at 1000 cd/m² with frames averaging up to 400; and as the probe reports
# it (tests/test_delivery.py uses both).
HDR10_PARAMS = "master-display=G(13250,34500)B(7500,3000)R(34000,16000)WP(15635,16450)L(10000000,1):max-cll=1000,400"
HDR10 = {
    "mastering_display": {"red": [34000, 16000], "green": [13250, 34500], "blue": [7500, 3000],
                          "white_point": [15635, 16450], "max_luminance": 10000000, "min_luminance": 1},
    "content_light": [1000, 400],
}  # fmt: skip


def hdr10_clip(make_clip, name: str = "hdr10.mkv"):
    return make_clip(name, width=64, height=48, frames=2, codec="libx265", pix_fmt="yuv420p10le",
                     extra=("-x265-params", f"log-level=error:{HDR10_PARAMS}"))  # fmt: skip


def test_hdr10_metadata_in_the_bitstream_is_read_in_x265_units(make_clip):
    assert probe_video(hdr10_clip(make_clip))["video"]["hdr10"] == HDR10


def test_hdr10_metadata_kept_by_the_container_alone_is_read_too(make_clip, tmp_path):
    # FFV1 has no SEI: ffmpeg moves the decoded metadata into Matroska's colour elements and MP4's mdcv/clli boxes.
    source = hdr10_clip(make_clip)
    for name in ("container.mkv", "container.mov"):
        out = tmp_path / name
        run_ffmpeg(["-i", ffmpeg_url(source), "-c:v", "ffv1", "-y", ffmpeg_url(out)], out, "transcoding")
        assert probe_video(out)["video"]["hdr10"] == HDR10


def test_hostile_file_name_is_taken_literally(make_clip, tmp_path):
    path = make_clip(HOSTILE_NAME, frames=5)
    info = probe_video(path)
    assert info["video"]["frame_count"] == 5
    assert info["path"] == str(path)
    assert not (tmp_path / "pwned").exists()


# --- bad inputs: one BadVideo naming the file and the cause -------------------------------------------------
# Each maker returns the file and a pattern its whole cause must match. ffmpeg's own words (after the colon) are
# its error string for the case, as the bundled ffmpeg spells it.
NOT_MEDIA = "not a readable media file: .*Invalid data found when processing input"


def _empty(tmp_path, make_clip):
    path = tmp_path / "empty.mp4"
    path.write_bytes(b"")
    return path, r"empty file \(0 bytes\)"


def _text(tmp_path, make_clip):
    path = tmp_path / "notes.mp4"
    path.write_text("this is a shopping list, not a film\n" * 20)
    return path, NOT_MEDIA


def _audio_only(tmp_path, make_clip):
    path = tmp_path / "tone.m4a"
    run_ffmpeg(["-f", "lavfi", "-i", "sine=duration=0.5", "-c:a", "aac", ffmpeg_url(path)], path, "test setup")
    return path, r"no video stream \(only audio\)"


def _missing(tmp_path, make_clip):
    return tmp_path / "nowhere.mp4", "file not found"


def _folder(tmp_path, make_clip):
    path = tmp_path / "folder.mp4"
    path.mkdir()
    return path, "is a folder, not a video file"


def _broken_link(tmp_path, make_clip):
    path = tmp_path / "link.mp4"
    path.symlink_to(tmp_path / "gone.mp4")
    return path, re.escape(f"broken symbolic link (points to {tmp_path / 'gone.mp4'})")


def _no_frames(tmp_path, make_clip):
    # A video track whose packets were all dropped, beside a normal audio track.
    path = tmp_path / "noframes.mkv"
    run_ffmpeg(
        [
            "-f", "lavfi", "-i", "testsrc2=size=160x90:duration=1", "-f", "lavfi", "-i", "sine=duration=1",
            "-map", "0:v", "-map", "1:a", "-c:v", "libx264", "-c:a", "aac", "-bsf:v", "noise=drop=1",
            ffmpeg_url(path),
        ],
        path,
        "test setup",
    )  # fmt: skip
    return path, "video stream #0 has no frames"


def _undecodable(tmp_path, make_clip):
    # Every packet's payload scrambled: the container is fine, the pictures are not.
    path = tmp_path / "scrambled.mkv"
    run_ffmpeg(
        ["-f", "lavfi", "-i", "testsrc2=size=160x90:duration=1", "-c:v", "ffv1", "-bsf:v", "noise=amount=-1",
         ffmpeg_url(path)],
        path,
        "test setup",
    )  # fmt: skip
    return path, "video stream #0 does not decode: .+"


def _truncated(tmp_path, make_clip):
    # No +faststart: the index (moov) comes last, so the first third holds media data and no index at all.
    whole = make_clip("whole.mp4", frames=24)
    path = tmp_path / "truncated.mp4"
    path.write_bytes(whole.read_bytes()[: whole.stat().st_size // 3])
    return path, NOT_MEDIA


@pytest.mark.parametrize(
    "make_bad", [_empty, _text, _audio_only, _missing, _folder, _broken_link, _no_frames, _undecodable, _truncated]
)
def test_bad_input_raises_bad_video_naming_the_file(tmp_path, make_clip, make_bad):
    path, cause = make_bad(tmp_path, make_clip)
    with pytest.raises(BadVideo) as caught:
        probe_video(path)
    message = str(caught.value)
    assert caught.value.path == path
    assert re.fullmatch(cause, caught.value.cause), caught.value.cause
    assert message == f"bad video: {path}: {caught.value.cause}"
    assert "\n" not in message


def test_ffmpeg_failure_names_file_and_cause(tmp_path):
    target = tmp_path / "x.mp4"
    with pytest.raises(BadVideo) as caught:
        run_ffmpeg(["-i", ffmpeg_url(tmp_path / "absent.mp4"), ffmpeg_url(target)], target, "converting")
    assert str(target) in str(caught.value)
    assert "converting: " in str(caught.value) and "No such file" in str(caught.value)


def test_ffmpeg_binary_can_be_overridden(monkeypatch):
    monkeypatch.setenv("STEREO3D_FFMPEG", "/opt/ffmpeg-nvenc/bin/ffmpeg")
    assert ffmpeg.ffmpeg_exe() == "/opt/ffmpeg-nvenc/bin/ffmpeg"
    monkeypatch.delenv("STEREO3D_FFMPEG")
    assert os.path.basename(ffmpeg.ffmpeg_exe()).startswith("ffmpeg")
