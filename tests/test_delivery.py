"""Delivery: render_video end to end on tiny clips with synthetic near maps, then the final mux. Every stream of
the source survives, timestamps and rotation are honoured, bit depth and colour are kept, and each layout comes
out at its size with the stereo signalling read back by ffmpeg."""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path

import numpy as np
import pytest
from harness import pgs_subtitles
from test_probe import HDR10, HDR10_PARAMS

from stereo3d.defaults import default
from stereo3d.errors import BadConfig, BadVideo
from stereo3d.io.decode import FrameReader
from stereo3d.io.encode import VideoEncoder, VideoStream, encode_args, resolve_codec
from stereo3d.io.ffmpeg import ffmpeg_url, run_ffmpeg
from stereo3d.io.mapstore import write_maps
from stereo3d.io.mux import mux_with_source
from stereo3d.io.probe import probe_video
from stereo3d.stages.join import join_segments
from stereo3d.stages.render import EncodeSettings, RenderSettings, choose_encoder, plan_render, render_video
from stereo3d.stereo.layouts import LAYOUTS, output_size
from stereo3d.stereo.warp import StereoSettings

FAST = EncodeSettings(preset="ultrafast")
STEREO = StereoSettings(divergence_pct=4.0, convergence=0.5, edge_dilate_px=1)


def settings(layout: str = "full_sbs", encode: EncodeSettings = FAST, stereo: StereoSettings = STEREO,
             **options) -> RenderSettings:  # fmt: skip
    """The render's settings of these tests: ``options`` by their pack keywords (fov_deg; a layout without them
    ignores them)."""
    keys = {keyword: key for key, keyword in LAYOUTS[layout].options.items()}
    chosen = {**{f"render.{key}": default(f"render.{key}") for key in keys.values()},
              **{f"render.{keys[word]}": value for word, value in options.items() if word in keys}}  # fmt: skip
    return RenderSettings(stereo=stereo, layout=layout, encode=encode, layout_options=dict(sorted(chosen.items())))


def near_store(path: Path, probe: dict) -> Path:
    """A synthetic near map per frame: a left-to-right ramp with a near block, moving a little over time."""
    video = probe["video"]
    height, width = video["display_height"], video["display_width"]
    frames = []
    for n in range(video["frame_count"]):
        near = np.tile(np.linspace(0, 0.6, width, dtype=np.float32), (height, 1))
        near[height // 4 : height // 2, (n % 4) + width // 4 : width // 2] = 1.0
        frames.append(near)
    write_maps(path, frames, "linear", attrs={"start": 0})
    return path


def render(tmp_path: Path, source: Path, layout: str = "full_sbs", encode: EncodeSettings = FAST, **options):
    probe = probe_video(source)
    out = tmp_path / f"render-{layout}.mkv"
    summary = render_video(source, probe, near_store(tmp_path / "near.maps", probe), out,
                           settings(layout, encode, **options))  # fmt: skip
    return probe, out, summary


def banner(path: Path) -> str:
    return run_ffmpeg(["-i", ffmpeg_url(path)], path, "reading", check=False).stderr.decode("utf-8", "replace")


def frame_side_data(path: Path) -> str:
    """showinfo's report of the first decoded frame (frame side data such as the H.264 frame-packing SEI)."""
    args = ["-i", ffmpeg_url(path), "-frames:v", "1", "-vf", "showinfo", "-f", "null", "-"]
    return run_ffmpeg(args, path, "decoding", check=False).stderr.decode("utf-8", "replace")


def st3d_mode(path: Path) -> int | None:
    """The stereo mode byte of an MP4's st3d box (Google spherical video V2: 1 top-bottom, 2 left-right)."""
    data = path.read_bytes()
    at = data.find(b"st3d")
    return None if at < 0 else data[at + 8]


def decodes(path: Path) -> bool:
    proc = run_ffmpeg(["-loglevel", "error", "-i", ffmpeg_url(path), "-f", "null", "-"], path, "decoding", check=False)
    return proc.returncode == 0


def with_second_audio_and_chapters(make_clip, tmp_path: Path) -> Path:
    """A source with two audio tracks (English tone, French silence), a subtitle track and two chapters."""
    base = make_clip("base.mkv", width=64, height=48, frames=24, fps="24", audio=True, subtitles=True)
    meta = tmp_path / "chapters.txt"
    meta.write_text(
        ";FFMETADATA1\n[CHAPTER]\nTIMEBASE=1/1000\nSTART=0\nEND=500\ntitle=One\n"
        "[CHAPTER]\nTIMEBASE=1/1000\nSTART=500\nEND=1000\ntitle=Two\n",
        encoding="utf-8",
    )
    out = tmp_path / "source.mkv"
    run_ffmpeg(
        [
            "-i", ffmpeg_url(base), "-f", "lavfi", "-i", "anullsrc=r=48000:cl=mono", "-i", ffmpeg_url(meta),
            "-map", "0", "-map", "1:a", "-map_chapters", "2", "-shortest", "-c", "copy", "-c:a:1", "aac",
            "-metadata:s:a:1", "language=fra", "-y", ffmpeg_url(out),
        ],
        out, "making the test source",
    )  # fmt: skip
    return out


@pytest.mark.parametrize("container", [".mp4", ".mkv"])
def test_every_audio_subtitle_and_chapter_of_the_source_is_in_the_output(make_clip, tmp_path, container):
    source = with_second_audio_and_chapters(make_clip, tmp_path)
    probe, video_only, _ = render(tmp_path, source)
    assert len(probe["audio"]) == 2 and len(probe["subtitles"]) == 1 and probe["chapters"] == 2
    final = mux_with_source(video_only, source, tmp_path / f"final{container}", probe)
    out = probe_video(final)
    assert [a["language"] for a in out["audio"]] == ["eng", "fra"]
    assert len(out["subtitles"]) == 1 and out["chapters"] == 2
    assert out["video"]["frame_count"] == probe["video"]["frame_count"]
    # A/V sync: the video starts where the source's did, within one frame.
    one_frame = 1 / probe["video"]["fps"]
    assert abs(out["video"]["start_pts_s"] - probe["video"]["start_pts_s"]) < one_frame
    assert abs(out["video"]["duration_s"] - probe["video"]["duration_s"]) < one_frame


def test_variable_frame_rate_source_keeps_its_timestamps(make_clip, tmp_path):
    source = make_clip("vfr.mkv", width=64, height=48, frames=30, fps="24", vfr=True, audio=True)
    probe, video_only, _ = render(tmp_path, source)
    assert probe["video"]["vfr"]
    for path in (video_only, mux_with_source(video_only, source, tmp_path / "final.mp4", probe)):
        got = probe_video(path)["frame_pts_s"]
        assert len(got) == len(probe["frame_pts_s"])
        assert np.abs(np.array(got) - np.array(probe["frame_pts_s"])).max() <= 0.001


@pytest.mark.parametrize("segment", [16, 0], ids=["segments_of_16", "whole"])
@pytest.mark.parametrize(("fps", "vfr"), [("24000/1001", False), ("240", False), ("24", True)],
                         ids=["23.976", "240", "vfr"])  # fmt: skip
def test_joined_result_keeps_the_source_frame_times_exactly(make_clip, tmp_path, fps, vfr, segment):
    _assert_joined_at_the_source_frame_times(make_clip, tmp_path, fps, vfr, segment)


# The oldest ffmpeg the package supports (7.0: imageio-ffmpeg 0.6.0's), as a system or NVENC build named by
# STEREO3D_FFMPEG may be; CI puts one here. Its setts filter has no prescale and reads timestamps differently.
OLDEST_FFMPEG = os.environ.get("STEREO3D_TEST_OLDEST_FFMPEG")


@pytest.mark.skipif(not OLDEST_FFMPEG, reason="no STEREO3D_TEST_OLDEST_FFMPEG (an ffmpeg 7.0 binary) given")
@pytest.mark.parametrize(("fps", "vfr"), [("24000/1001", False), ("24", True)], ids=["23.976", "vfr"])
def test_the_oldest_supported_ffmpeg_joins_at_the_source_frame_times_too(make_clip, tmp_path, monkeypatch, fps,
                                                                         vfr):  # fmt: skip
    _assert_joined_at_the_source_frame_times(make_clip, tmp_path, fps, vfr, 16, monkeypatch, OLDEST_FFMPEG)


def test_an_ffmpeg_that_is_not_there_is_one_clear_error_naming_it(make_clip, tmp_path, monkeypatch):
    source = make_clip("clip.mp4", width=32, height=16, frames=4, fps="24", audio=True)
    probe = probe_video(source)
    monkeypatch.setenv("STEREO3D_FFMPEG", str(tmp_path / "no-such-ffmpeg"))
    with pytest.raises(BadVideo, match="ffmpeg binary not found.*no-such-ffmpeg"):
        mux_with_source(source, source, tmp_path / "final.mp4", probe)
    assert not (tmp_path / "final.mp4").exists()


def _assert_joined_at_the_source_frame_times(make_clip, tmp_path, fps, vfr, segment, monkeypatch=None,
                                             ffmpeg=None):  # fmt: skip
    # Frame steps of 1001/24000 or 1/240 s are no whole milliseconds, which is all the Matroska render
    # intermediates hold; the medium preset's B-frames give decode times apart from presentation times.
    source = make_clip("clip.mp4", width=32, height=16, frames=40, fps=fps, vfr=vfr, audio=True)
    if ffmpeg:  # the source is made by the bundled ffmpeg; rendering, encoding and joining by this one
        monkeypatch.setenv("STEREO3D_FFMPEG", ffmpeg)
    probe = probe_video(source)
    size = segment or 40
    starts = list(range(0, 40, size))
    segments = []
    for start in starts:
        count = min(size, 40 - start)
        near = write_maps(tmp_path / f"{start}.maps", [np.full((16, 32), 0.5, np.float32)] * count, "linear",
                          attrs={"start": start})  # fmt: skip
        assert near == count
        segments.append(tmp_path / f"{start}.mkv")
        render_video(source, probe, tmp_path / f"{start}.maps", segments[-1],
                     settings(encode=EncodeSettings(preset="medium")))  # fmt: skip
    out = probe_video(join_segments(segments, starts, source, tmp_path / "final.mp4", probe))
    assert out["video"]["time_base"] == probe["video"]["time_base"]
    assert out["frame_pts_s"] == probe["frame_pts_s"]
    assert (out["video"]["fps_fraction"], out["video"]["vfr"]) == (probe["video"]["fps_fraction"], vfr)
    assert out["video"]["start_pts_s"] == probe["video"]["start_pts_s"]
    assert out["video"]["duration_s"] == probe["video"]["duration_s"]
    assert decodes(tmp_path / "final.mp4")


def test_encoder_writes_the_timestamps_it_is_given(tmp_path):
    pts = [0.0, 0.04, 0.1, 0.12, 0.2, 0.3, 0.301, 0.5]
    out = tmp_path / "vfr.mkv"
    with VideoEncoder(out, VideoStream(32, 32, "25", preset="ultrafast", time_base="1/1000"), pts_s=pts) as encoder:
        for n in range(len(pts)):
            encoder.write(np.full((32, 32, 3), n * 20, np.uint8))
    assert probe_video(out)["frame_pts_s"] == pytest.approx(pts, abs=1e-3)
    assert list(tmp_path.iterdir()) == [out]  # the filter script is gone


def test_rotated_source_renders_upright_and_is_not_rotated_again(make_clip, tmp_path):
    source = make_clip("rotated.mp4", width=64, height=48, frames=8, rotation=90)
    probe, video_only, summary = render(tmp_path, source)
    assert (probe["video"]["display_width"], probe["video"]["display_height"]) == (48, 64)
    assert summary["size"] == [96, 64]
    final = probe_video(mux_with_source(video_only, source, tmp_path / "final.mp4", probe))
    assert final["video"]["rotation"] == 0
    assert (final["video"]["display_width"], final["video"]["display_height"]) == (96, 64)


def hdr_source(make_clip, tmp_path: Path, frames: int, hdr10: bool = False) -> Path:
    """A 10-bit HEVC clip with HDR10 signalling in the bitstream's VUI: BT.2020 primaries (9), PQ transfer (16),
    BT.2020 matrix (9); ``hdr10``: with the mastering display and light level of ``HDR10`` in its SEI."""
    params = "log-level=error" + (f":{HDR10_PARAMS}" if hdr10 else "")
    plain = make_clip("plain.mkv", width=64, height=48, frames=frames, codec="libx265", pix_fmt="yuv420p10le",
                      extra=("-x265-params", params))  # fmt: skip
    source = tmp_path / "hdr.mkv"
    vui = "hevc_metadata=colour_primaries=9:transfer_characteristics=16:matrix_coefficients=9"
    run_ffmpeg(["-i", ffmpeg_url(plain), "-c", "copy", "-bsf:v", vui, "-y", ffmpeg_url(source)], source, "tagging")
    return source


def test_ten_bit_hdr_source_stays_ten_bit_with_its_colour_tags(make_clip, tmp_path):
    source = hdr_source(make_clip, tmp_path, frames=6)
    probe, video_only, summary = render(tmp_path, source)
    assert probe["video"]["bit_depth"] == 10 and probe["video"]["color_transfer"] == "smpte2084"
    assert summary["codec"] == "libx265" and summary["pix_fmt"] == "yuv420p10le"
    out = probe_video(video_only)["video"]
    assert out["codec"] == "hevc" and out["bit_depth"] == 10
    assert (out["color_space"], out["color_primaries"], out["color_transfer"]) == ("bt2020nc", "bt2020", "smpte2084")
    # HDR tags without HDR10 metadata: none made up
    assert probe["video"]["hdr10"] is None and out["hdr10"] is None
    assert "Mastering display" not in frame_side_data(video_only)


def test_eight_bit_source_stays_eight_bit_h264(make_clip, tmp_path):
    source = make_clip("sdr.mp4", width=64, height=48, frames=6)
    _, video_only, summary = render(tmp_path, source)
    out = probe_video(video_only)["video"]
    assert summary["codec"] == "libx264" and out["codec"] == "h264" and out["pix_fmt"] == "yuv420p"
    assert (out["color_space"], out["color_primaries"], out["color_transfer"]) == ("bt709", "bt709", "bt709")


def test_deep_decoding_keeps_more_than_eight_bits(make_clip):
    source = make_clip("gradient.mkv", width=64, height=48, frames=2, codec="ffv1", pix_fmt="yuv444p10le",
                       pattern="mandelbrot")  # fmt: skip
    with FrameReader(source, probe_video(source), deep=True) as frames:
        frame = next(iter(frames))
    assert frame.dtype == np.uint16
    assert np.any(frame % 257 != 0)  # not just 8-bit values scaled up


def test_deep_codec_replaces_h264_for_ten_bit_sources_unless_told_to_keep_it():
    deep = {"bit_depth": 10}
    assert choose_encoder(deep, EncodeSettings()) == ("libx265", "yuv420p10le")
    assert choose_encoder(deep, EncodeSettings(deep_codec="same")) == ("libx264", "yuv420p10le")
    assert choose_encoder({"bit_depth": 8}, EncodeSettings()) == ("libx264", "yuv420p")
    assert choose_encoder(deep, EncodeSettings(pix_fmt="yuv420p")) == ("libx264", "yuv420p")


def built_in_encoders() -> str:
    """ffmpeg's own list of the encoders it was built with (an oracle independent of the probe under test)."""
    return run_ffmpeg(["-encoders"], None, "listing encoders").stdout.decode()


@pytest.mark.parametrize(
    ("codec", "pix_fmt", "software"),
    [("h264_videotoolbox", "yuv420p", "libx264"), ("hevc_videotoolbox", "yuv420p10le", "libx265")],
)
def test_a_hardware_encoder_this_ffmpeg_lacks_gives_way_to_software_with_a_one_line_reason(
    caplog, codec, pix_fmt, software
):
    if f" {codec} " in built_in_encoders():
        pytest.skip(f"this ffmpeg has {codec} (a macOS build)")
    with caplog.at_level(logging.WARNING, logger="stereo3d.io.encode"):
        assert resolve_codec(codec, pix_fmt) == software
    assert [record.getMessage() for record in caplog.records] == [
        f"{codec} is not available here (Unknown encoder '{codec}'); encoding with {software} instead"
    ]


@pytest.mark.parametrize(
    ("codec", "pix_fmt", "software"),
    [("h264_nvenc", "yuv420p", "libx264"), ("hevc_qsv", "yuv420p10le", "libx265"), ("av1_amf", "yuv420p", "libsvtav1"),
     ("hevc_nvenc", "yuv420p", "libx265"), ("h264_qsv", "yuv420p", "libx264")],
)  # fmt: skip
def test_a_hardware_encoder_whose_test_encode_fails_gives_way_to_software_with_ffmpegs_reason(
    caplog, codec, pix_fmt, software
):
    from stereo3d.io.codecs import get_codec

    encoder = get_codec(codec).encoder
    assert f" {encoder} " in built_in_encoders()  # this ffmpeg has it: what fails is the device, at the test encode
    # The oracle: the same one-frame encode, run here; where it succeeds (a machine with that hardware) the encoder
    # is kept without a word.
    own = run_ffmpeg(["-f", "lavfi", "-i", "color=c=gray:s=256x256:r=1", "-frames:v", "1", "-pix_fmt",
                      get_codec(codec).pix_fmts[pix_fmt], "-c:v", encoder, "-f", "null", "-"],
                     None, "test encode (test)", check=False)  # fmt: skip
    with caplog.at_level(logging.WARNING, logger="stereo3d.io.encode"):
        chosen = resolve_codec(codec, pix_fmt)
    lines = [record.getMessage() for record in caplog.records]
    if own.returncode == 0:
        assert (chosen, lines) == (codec, [])
        return
    assert chosen == software
    (line,) = lines
    match = re.fullmatch(rf"{codec} is not available here \((.+)\); encoding with {software} instead", line)
    assert match, line
    reason = match.group(1)
    assert "Unknown encoder" not in reason
    assert reason in own.stderr.decode("utf-8", "replace")  # ffmpeg's own words


@pytest.mark.parametrize(
    ("bit_depth", "nvenc", "software"), [(8, "h264_nvenc", "libx264"), (10, "hevc_nvenc", "libx265")]
)
def test_auto_encodes_on_the_gpus_nvenc_where_it_works_else_on_the_cpu_without_a_warning(
    caplog, bit_depth, nvenc, software
):
    from stereo3d.io.codecs import get_codec

    pix_fmt = "yuv420p10le" if bit_depth > 8 else "yuv420p"
    # The oracle: NVENC's one-frame encode, run here (it works only on a GPU that has NVENC).
    own = run_ffmpeg(["-f", "lavfi", "-i", "color=c=gray:s=256x256:r=1", "-frames:v", "1", "-pix_fmt",
                      get_codec(nvenc).pix_fmts[pix_fmt], "-c:v", nvenc, "-f", "null", "-"],
                     None, "test encode (test)", check=False)  # fmt: skip
    with caplog.at_level(logging.INFO, logger="stereo3d.io.encode"):
        chosen = choose_encoder({"bit_depth": bit_depth}, EncodeSettings(codec="auto"))
    assert chosen == (nvenc if own.returncode == 0 else software, pix_fmt)
    lines = [(record.levelname, record.getMessage()) for record in caplog.records]
    assert len(lines) == 1 and lines[0][0] == "INFO" and lines[0][1].startswith(f"encode.codec auto: {chosen[0]} ")
    # The frame-packing SEI is x264's: auto keeps it, without a test encode; and auto is checked as libx264 is.
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="stereo3d.io.encode"):
        assert choose_encoder({"bit_depth": 8}, EncodeSettings(codec="auto", stereo_signal="sei"))[0] == "libx264"
    assert caplog.records == []
    assert choose_encoder({"bit_depth": 8}, EncodeSettings(codec="auto", pix_fmt="yuv444p"))[1] == "yuv444p"


def test_a_software_encoder_is_taken_without_a_test_encode(caplog):
    with caplog.at_level(logging.DEBUG):
        assert resolve_codec("libx264", "yuv420p") == "libx264"
        assert resolve_codec("libsvtav1", "yuv420p10le") == "libsvtav1"
    assert caplog.records == []


def test_an_encoder_is_refused_a_pixel_format_it_cannot_take_before_any_decoding():
    with pytest.raises(BadConfig, match=r"encode.pix_fmt: libsvtav1 cannot encode yuv444p \(it takes yuv420p, "):
        choose_encoder({"bit_depth": 8}, EncodeSettings(codec="libsvtav1", pix_fmt="yuv444p"))
    # ... checked on the configured encoder, whatever this machine would fall back to
    with pytest.raises(BadConfig, match="h264_qsv cannot encode yuv444p"):
        choose_encoder({"bit_depth": 8}, EncodeSettings(codec="h264_qsv", pix_fmt="yuv444p"))
    assert choose_encoder({"bit_depth": 10}, EncodeSettings(codec="libsvtav1")) == ("libsvtav1", "yuv420p10le")


def test_av1_goes_into_mp4_and_mkv_but_not_mov(tmp_path):
    with pytest.raises(ValueError, match=r"libsvtav1 cannot go into \.mov"):
        VideoEncoder(tmp_path / "out.mov", VideoStream(64, 48, "24", codec="libsvtav1"))


def test_av1_renders_reads_back_as_av1_and_keeps_its_stereo_signalling(make_clip, tmp_path):
    source = make_clip("clip.mp4", width=64, height=48, frames=10, audio=True)
    encode = EncodeSettings(codec="libsvtav1", preset="ultrafast", piece_frames=8)  # two pieces, joined
    probe, video_only, summary = render(tmp_path, source, "full_sbs", encode)
    assert (summary["codec"], summary["pix_fmt"], summary["size"]) == ("libsvtav1", "yuv420p", [128, 48])
    out = probe_video(video_only)["video"]
    assert (out["codec"], out["width"], out["height"], out["bit_depth"], out["frame_count"]) == ("av1", 128, 48, 8, 10)
    final = mux_with_source(video_only, source, tmp_path / "final.mp4", probe)
    result = probe_video(final)
    assert result["video"]["codec"] == "av1" and result["video"]["frame_count"] == 10
    assert [a["codec"] for a in result["audio"]] == ["aac"]
    assert st3d_mode(final) == 2  # side by side, for VR players
    assert decodes(final)


def test_ten_bit_hdr_source_stays_ten_bit_av1_with_its_colour_tags(make_clip, tmp_path):
    source = hdr_source(make_clip, tmp_path, frames=4)
    _, video_only, summary = render(tmp_path, source, encode=EncodeSettings(codec="libsvtav1", preset="ultrafast"))
    assert (summary["codec"], summary["pix_fmt"]) == ("libsvtav1", "yuv420p10le")  # AV1 is no H.264: kept
    out = probe_video(video_only)["video"]
    assert (out["codec"], out["bit_depth"], out["frame_count"]) == ("av1", 10, 4)
    assert (out["color_space"], out["color_primaries"], out["color_transfer"]) == ("bt2020nc", "bt2020", "smpte2084")


def test_the_render_plan_cuts_pieces_on_multiples_of_piece_frames_with_their_own_frame_times():
    times = [n / 10 + (n // 3) / 10 for n in range(30)]  # every third interval twice as long
    probe = {"video": {"display_width": 63, "display_height": 47, "fps_fraction": "10", "vfr": True,
                       "time_base": "1/1000", "bit_depth": 8}, "frame_pts_s": times}  # fmt: skip
    plan = plan_render("clip.mkv", probe, 5, 20, settings("half_sbs", EncodeSettings(piece_frames=8)))
    assert [(p.first, p.frames) for p in plan.pieces] == [(5, 3), (8, 8), (16, 8), (24, 1)]
    assert plan.pieces[1].pts_s == pytest.approx([t - times[8] for t in times[8:16]])
    assert plan.pieces[3].pts_s == (0.0,)
    assert plan.size == (62, 47) and plan.padding == (0, 1)  # half SBS keeps even eyes; 4:2:0 wants even rows
    assert (plan.stream.width, plan.stream.height, plan.stream.codec, plan.stream.depth) == (62, 48, "libx264", 8)
    constant = plan_render("clip.mkv", {**probe, "video": {**probe["video"], "vfr": False}}, 0, 8,
                           settings(encode=EncodeSettings(piece_frames=8)))  # fmt: skip
    assert [(p.first, p.frames, p.pts_s) for p in constant.pieces] == [(0, 8, None)]


STEREO_READBACK = {
    "full_sbs": "side by side",
    "half_sbs": "side by side",
    "full_tb": "top and bottom",
    "half_tb": "top and bottom",
    "cross_eyed": "side by side",
    "vr180": "side by side",
    "anaglyph_dubois": None,
    "anaglyph_color": None,
}


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_each_layout_has_its_size_and_stereo_signalling(make_clip, tmp_path, layout):
    source = make_clip("clip.mp4", width=64, height=48, frames=4, audio=True)
    probe, video_only, summary = render(tmp_path, source, layout, fov_deg=80.0)
    width, height = output_size(64, 48, layout, fov_deg=80.0)
    text = banner(video_only)
    assert re.search(rf"Video: h264.*\b{width}x{height}\b", text), text
    side = re.search(r"Stereo 3D: ([a-z ]+),.*", text)
    expected = STEREO_READBACK[layout]
    assert (side.group(1) if side else None) == expected
    if layout == "cross_eyed":
        assert "(inverted)" in side.group(0)  # right eye first
    final = mux_with_source(video_only, source, tmp_path / "final.mp4", probe)
    # st3d knows left-right and top-bottom only: cross-eyed (right first) rightly gets no st3d box.
    mp4_mode = None if layout == "cross_eyed" else {"side by side": 2, "top and bottom": 1, None: None}[expected]
    assert st3d_mode(final) == mp4_mode
    assert decodes(final)


def test_h264_frame_packing_sei_on_request_survives_the_mux(make_clip, tmp_path):
    source = make_clip("clip.mp4", width=64, height=48, frames=4)
    probe, video_only, _ = render(tmp_path, source, "full_tb", EncodeSettings(preset="ultrafast",
                                                                            stereo_signal="sei"))  # fmt: skip
    final = mux_with_source(video_only, source, tmp_path / "final.mp4", probe)
    assert re.search(r"side data - Stereo 3D: type - top and bottom", frame_side_data(final))
    assert "Stereo 3D" not in banner(final)  # the container says nothing: never both (ffmpeg cannot decode that)
    assert decodes(final)


# --- after a multi-segment join, as the workflow delivers -------------------------------------------------------
def joined(
    tmp_path: Path, source: Path, layout: str, encode: EncodeSettings, size: int = 8, out: str = "final.mp4"
) -> Path:
    """The source rendered in segments of ``size`` frames and joined with its streams into ``out``, as the
    workflow does."""
    probe = probe_video(source)
    total = probe["video"]["frame_count"]
    height, width = probe["video"]["display_height"], probe["video"]["display_width"]
    starts, segments = list(range(0, total, size)), []
    for start in starts:
        count = min(size, total - start)
        ramp = np.tile(np.linspace(0, 1, width, dtype=np.float32), (height, 1))
        write_maps(tmp_path / f"{start}.maps", [ramp] * count, "linear", attrs={"start": start})
        segments.append(tmp_path / f"{start}.mkv")
        render_video(source, probe, tmp_path / f"{start}.maps", segments[-1], settings(layout, encode))
    return join_segments(segments, starts, source, tmp_path / out, probe)


@pytest.mark.parametrize(("layout", "st3d"), [("full_sbs", 2), ("half_tb", 1)])
def test_container_stereo_signalling_survives_a_multi_segment_join(make_clip, tmp_path, layout, st3d):
    source = make_clip("clip.mp4", width=64, height=48, frames=20, audio=True)
    final = joined(tmp_path, source, layout, FAST)
    assert probe_video(final)["video"]["frame_count"] == 20
    assert st3d_mode(final) == st3d
    assert decodes(final)


def test_frame_packing_sei_survives_a_multi_segment_join(make_clip, tmp_path):
    source = make_clip("clip.mp4", width=64, height=48, frames=20)
    final = joined(tmp_path, source, "full_sbs", EncodeSettings(preset="ultrafast", stereo_signal="sei"))
    assert re.search(r"side data - Stereo 3D: type - side by side", frame_side_data(final))
    assert st3d_mode(final) is None  # never both
    assert decodes(final)


def hdr10_in_every_frame(path: Path) -> list[str]:
    """ffmpeg's own report (showinfo) of the mastering display and light level of every decoded frame of ``path``."""
    args = ["-i", ffmpeg_url(path), "-vf", "showinfo", "-f", "null", "-"]
    log = run_ffmpeg(args, path, "decoding", check=False).stderr.decode("utf-8", "replace")
    return re.findall(r"side data - (Mastering display metadata: .*|Content light level metadata: .*)", log)


@pytest.mark.parametrize(
    ("codec", "out", "min_luminance"),
    # AV1 stores the minimum luminance in steps of 1/16384 cd/m²: 0.0001 comes back as 2/16384.
    [
        ("libx265", "final.mp4", "0.000100"),
        ("libx265", "final.mkv", "0.000100"),
        ("libsvtav1", "final.mkv", "0.000122"),
        ("libsvtav1", "final.mp4", "0.000122"),
    ],
)
def test_hdr10_metadata_of_the_source_is_in_every_frame_of_the_joined_result(make_clip, tmp_path, codec, out,
                                                                              min_luminance):  # fmt: skip
    source = hdr_source(make_clip, tmp_path, frames=12, hdr10=True)
    assert probe_video(source)["video"]["hdr10"] == HDR10
    final = joined(tmp_path, source, "full_sbs", EncodeSettings(codec=codec, preset="ultrafast"), out=out)
    display = (
        "Mastering display metadata: has_primaries:1 has_luminance:1 r(0.6800,0.3200) g(0.2650,0.6900) "
        f"b(0.1500 0.0600) wp(0.3127, 0.3290) min_luminance={min_luminance}, max_luminance=1000.000000"
    )
    assert hdr10_in_every_frame(final) == [display, "Content light level metadata: MaxCLL=1000, MaxFALL=400"] * 12
    assert probe_video(final)["video"]["hdr10"] == HDR10  # AV1's coarser steps round back to x265's units
    assert decodes(final)


def test_an_encoder_that_cannot_write_hdr10_metadata_says_so_in_one_line(make_clip, tmp_path, caplog):
    source = hdr_source(make_clip, tmp_path, frames=2, hdr10=True)
    keep_h264 = EncodeSettings(preset="ultrafast", deep_codec="same")
    with caplog.at_level(logging.WARNING, logger="stereo3d.stages.render"):
        plan = plan_render(source, probe_video(source), 0, 2, settings(encode=keep_h264))
    assert plan.stream.codec == "libx264"
    assert [record.getMessage() for record in caplog.records] == [
        "hdr.mkv: libx264 cannot write the source's HDR10 metadata (mastering display, content light level); "
        "players will use their defaults for it (libx265 or libsvtav1 keep it)"
    ]


def test_hdr10_metadata_joins_the_encoders_own_options_rather_than_replacing_them():
    stream = VideoStream(64, 48, "24", "libx265", pix_fmt="yuv420p10le", depth=16, color={"hdr10": HDR10})
    args = encode_args(stream, ".mkv")
    assert args.count("-x265-params") == 1  # ffmpeg would keep only the last
    assert args[args.index("-x265-params") + 1] == f"log-level=error:{HDR10_PARAMS}"


def test_ten_bit_hdr_tags_survive_a_multi_segment_join(make_clip, tmp_path):
    final = joined(tmp_path, hdr_source(make_clip, tmp_path, frames=20), "full_sbs", FAST)
    out = probe_video(final)["video"]
    assert out["codec"] == "hevc" and out["bit_depth"] == 10 and out["frame_count"] == 20
    assert (out["color_space"], out["color_primaries"], out["color_transfer"]) == ("bt2020nc", "bt2020", "smpte2084")
    assert st3d_mode(final) == 2
    assert decodes(final)


# --- every stream of the source ---------------------------------------------------------------------------------
def with_every_stream_kind(make_clip, tmp_path: Path) -> Path:
    """A Matroska source with four audio tracks (AAC, AC-3 5.1, FLAC, PCM) and three subtitle tracks (SubRip,
    ASS, PGS bitmaps), each with its language."""
    base = make_clip("base.mkv", width=64, height=48, frames=24, fps="24", audio=True, subtitles=True)
    ass = tmp_path / "styled.ass"
    ass.write_text(
        "[Script Info]\nScriptType: v4.00+\nPlayResX: 64\nPlayResY: 48\n\n[V4+ Styles]\n"
        "Format: Name, Fontname, Fontsize, PrimaryColour, Bold, Italic, Alignment, MarginL, MarginR, MarginV\n"
        "Style: Default,Arial,12,&H00FFFFFF,0,0,2,2,2,2\n\n[Events]\n"
        "Format: Layer, Start, End, Style, Text\nDialogue: 0,0:00:00.10,0:00:00.80,Default,{\\i1}Bonjour{\\i0}\n",
        encoding="utf-8",
    )
    sup = pgs_subtitles(tmp_path / "bitmaps.sup", [(0.1, 0.5), (0.6, 0.9)])
    out = tmp_path / "every.mkv"
    tone = "sine=frequency=660:sample_rate=48000:duration=1"
    run_ffmpeg(
        [
            "-i", ffmpeg_url(base), "-f", "lavfi", "-i", tone, "-f", "lavfi", "-i", tone, "-f", "lavfi", "-i", tone,
            "-i", ffmpeg_url(ass), "-i", ffmpeg_url(sup),
            "-map", "0:v", "-map", "0:a", "-map", "1:a", "-map", "2:a", "-map", "3:a", "-map", "0:s", "-map", "4",
            "-map", "5", "-shortest", "-c:v", "copy", "-c:a:0", "copy", "-c:a:1", "ac3", "-ac:a:1", "6",
            "-c:a:2", "flac", "-c:a:3", "pcm_s16le", "-c:s", "copy",
            "-metadata:s:a:1", "language=fra", "-metadata:s:a:2", "language=deu", "-metadata:s:a:3", "language=spa",
            "-metadata:s:s:1", "language=fra", "-metadata:s:s:2", "language=jpn", "-y", ffmpeg_url(out),
        ],
        out, "making the test source",
    )  # fmt: skip
    return out


def test_mp4_keeps_every_audio_track_and_the_subtitles_it_can_hold(make_clip, tmp_path, caplog):
    source = with_every_stream_kind(make_clip, tmp_path)
    probe = probe_video(source)
    assert [a["codec"] for a in probe["audio"]] == ["aac", "ac3", "flac", "pcm_s16le"]
    assert [s["codec"] for s in probe["subtitles"]] == ["subrip", "ass", "hdmv_pgs_subtitle"]
    with caplog.at_level(logging.WARNING, logger="stereo3d.io.mux"):
        final = joined(tmp_path, source, "full_sbs", FAST)
    out = probe_video(final)
    # Copied as they are where MP4 holds them; PCM becomes AAC (README: Outputs and their names).
    assert [a["codec"] for a in out["audio"]] == ["aac", "ac3", "flac", "aac"]
    assert [a["language"] for a in out["audio"]] == ["eng", "fra", "deu", "spa"]
    assert [a["channels"] for a in out["audio"]][1] == 6
    # Text subtitles become MP4's own text format; PGS bitmaps have no place in MP4 and are left out, saying so.
    assert [(s["codec"], s["language"]) for s in out["subtitles"]] == [("mov_text", "eng"), ("mov_text", "fra")]
    assert "hdmv_pgs_subtitle" in caplog.text and "left out" in caplog.text
    assert decodes(final)


def test_dvd_bitmap_subtitles_are_copied_into_mp4(make_clip, tmp_path):
    base = make_clip("base.mkv", width=64, height=48, frames=24, fps="24", audio=True)
    sup = pgs_subtitles(tmp_path / "bitmaps.sup", [(0.1, 0.5)])
    source = tmp_path / "dvd.mkv"
    # fix_sub_duration: each bitmap cue ends where the clearing display set says (as DVD rips store it).
    run_ffmpeg(["-i", ffmpeg_url(base), "-fix_sub_duration", "-i", ffmpeg_url(sup), "-map", "0", "-map", "1",
                "-c:v", "copy", "-c:a", "copy", "-c:s", "dvdsub", "-y", ffmpeg_url(source)], source,
               "making the test source")  # fmt: skip
    assert [s["codec"] for s in probe_video(source)["subtitles"]] == ["dvd_subtitle"]
    out = probe_video(joined(tmp_path, source, "full_sbs", FAST))
    assert [s["codec"] for s in out["subtitles"]] == ["dvd_subtitle"]
