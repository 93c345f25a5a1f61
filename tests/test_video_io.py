"""FrameReader, VideoEncoder and mux_with_source: frame-exact, streaming, atomic."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from stereo3d.errors import BadVideo
from stereo3d.io.decode import FrameReader, read_batches
from stereo3d.io.encode import VideoEncoder, VideoStream
from stereo3d.io.ffmpeg import ffmpeg_url, run_ffmpeg
from stereo3d.io.mux import mux_with_source
from stereo3d.io.probe import probe_video

HANG_S = 60  # only so that a hang fails instead of blocking the suite; never what a test asserts
HOSTILE_NAME = "a clip; $(touch pwned) `x` 'q' \"dq\" & ünï 視頻 -x"


def read_all(path, probe=None, **options):
    probe = probe or probe_video(path)
    with FrameReader(path, probe, **options) as reader:
        return np.stack(list(reader))


def leftovers(folder):
    """Files in ``folder`` that look like an unfinished write."""
    return [p.name for p in folder.iterdir() if ".partial-" in p.name]


# --- FrameReader ------------------------------------------------------------------------------------------


def test_reader_yields_every_frame_as_rgb_uint8(make_clip):
    frames = read_all(make_clip(frames=20, width=64, height=48))
    assert frames.shape == (20, 48, 64, 3) and frames.dtype == np.uint8
    assert not np.array_equal(frames[0], frames[-1])  # the pattern moves


@pytest.mark.parametrize("name,options", [("bframes.mp4", {}), ("exact.mkv", {"codec": "ffv1"})])
@pytest.mark.parametrize("start,count", [(0, 5), (1, 1), (7, 9), (13, 11), (23, 1), (10, None)])
def test_slice_equals_the_same_frames_of_a_full_read(make_clip, name, options, start, count):
    path = make_clip(name, frames=24, **options)
    probe = probe_video(path)
    full = read_all(path, probe)
    part = read_all(path, probe, start=start, count=count)
    end = 24 if count is None else start + count
    assert part.shape[0] == end - start
    np.testing.assert_array_equal(part, full[start:end])


def test_ntsc_rate_in_matroska_slices_exactly(make_clip):
    path = make_clip("ntsc.mkv", frames=48, fps="24000/1001")
    probe = probe_video(path)
    full = read_all(path, probe)
    np.testing.assert_array_equal(read_all(path, probe, start=31, count=10), full[31:41])


@pytest.mark.parametrize("name", ["long.ts", "long.mp4"])
def test_seeking_far_into_a_long_clip_is_exact(make_clip, name):
    # MPEG-TS has no index (the demuxer searches), mp4 has one: both must land on the same frames.
    path = make_clip(name, frames=480, width=64, height=36, audio=True, extra=("-g", "24", "-bf", "3"))
    probe = probe_video(path)
    assert probe["video"]["keyframes"][:3] == [0, 24, 48]
    full = read_all(path, probe)
    for start, count in [(300, 30), (433, 7), (479, 1)]:
        np.testing.assert_array_equal(read_all(path, probe, start=start, count=count), full[start : start + count])


def test_variable_frame_rate_gives_one_frame_per_timestamp(make_clip, lossless_clip):
    path = make_clip("vfr.mp4", frames=24, vfr=True)
    probe = probe_video(path)
    full = read_all(path, probe)
    assert full.shape[0] == probe["video"]["frame_count"] == 24
    # No duplicated frames: consecutive frames of a moving pattern all differ.
    assert all(not np.array_equal(a, b) for a, b in zip(full, full[1:], strict=False))
    np.testing.assert_array_equal(read_all(path, probe, start=9, count=8), full[9:17])


def test_rotated_clip_is_read_in_display_orientation(make_clip):
    plain = make_clip("plain.mp4", frames=6, extra=("-qp", "0"))
    rotated = make_clip("rotated.mp4", frames=6, extra=("-qp", "0"), rotation=90)
    upright = read_all(rotated)
    assert upright.shape == (6, 160, 90, 3)
    expected = np.rot90(read_all(plain), k=-1, axes=(1, 2))  # 90 degrees clockwise
    assert np.abs(upright.astype(int) - expected.astype(int)).mean() < 2.0


def test_scaled_reading_has_the_requested_size(make_clip):
    path = make_clip(frames=4)
    assert read_all(path, size=(64, 36)).shape == (4, 36, 64, 3)
    assert read_all(path, size=(320, 180), start=2).shape == (2, 180, 320, 3)


def test_fewer_frames_than_promised_is_bad_video(make_clip):
    path = make_clip(frames=10)
    probe = probe_video(path)
    probe["video"]["frame_count"] = 14  # a probe that promises more than the file holds
    with pytest.raises(BadVideo, match="got 10 of 14 frames") as caught:
        read_all(path, probe)
    assert caught.value.path == path


def test_ffmpeg_failure_while_reading_is_bad_video(make_clip, tmp_path):
    path = make_clip(frames=10)
    probe = probe_video(path)
    path.write_bytes(b"not a video any more")
    with pytest.raises(BadVideo) as caught:
        read_all(path, probe)
    assert str(path) in str(caught.value)


def test_leaving_early_stops_decoding_without_hanging(make_clip):
    # 240 frames of 320x180 RGB are 41 MB: far more than the prefetch queues hold, so the decoder is still blocked
    # handing pictures on when the reader is left, and only stopping it ends it.
    path = make_clip(frames=240, width=320, height=180)
    probe = probe_video(path)
    before = threading.active_count()
    seen = {}

    def leave_early():
        with FrameReader(path, probe, prefetch=2) as reader:
            seen["first"] = next(reader)
            seen["reader"], seen["threads"] = reader, reader._threads

    # Run in a thread only so that a hang fails the test instead of the suite; the timeout is no measurement.
    worker = threading.Thread(target=leave_early, daemon=True)
    worker.start()
    worker.join(HANG_S)
    assert not worker.is_alive(), "leaving the reader early hung"
    assert seen["first"].shape == (180, 320, 3)
    assert seen["reader"].decoded < 240  # stopped, not left to decode every frame
    assert not any(thread.is_alive() for thread in seen["threads"])  # the decoder and the converter both ended
    assert threading.active_count() <= before


def test_breaking_out_of_a_loop_stops_decoding(make_clip):
    path = make_clip(frames=120)
    with FrameReader(path, probe_video(path), prefetch=1) as reader:
        for n, _ in enumerate(reader):
            if n == 3:
                break
    assert reader.decoded < 120
    assert not any(thread.is_alive() for thread in reader._threads)


def test_out_of_range_request_is_refused(make_clip):
    path = make_clip(frames=10)
    probe = probe_video(path)
    with pytest.raises(ValueError):
        FrameReader(path, probe, start=8, count=3)


def test_read_batches_groups_frames(make_clip):
    path = make_clip(frames=10)
    with FrameReader(path, probe_video(path)) as reader:
        sizes = [batch.shape[0] for batch in read_batches(reader, 4)]
    assert sizes == [4, 4, 2]


def test_hostile_names_read_encode_and_mux(make_clip, tmp_path):
    source = make_clip(HOSTILE_NAME + ".mp4", frames=8, audio=True)
    probe = probe_video(source)
    frames = read_all(source, probe, start=3)
    encoded = tmp_path / (HOSTILE_NAME + " video.mkv")
    with VideoEncoder(encoded, VideoStream(160, 90, probe["video"]["fps_fraction"], preset="ultrafast")) as encoder:
        for frame in frames:
            encoder.write(frame)
    final = mux_with_source(encoded, source, tmp_path / (HOSTILE_NAME + " final.mp4"), probe)
    assert probe_video(final)["video"]["frame_count"] == 5
    assert not (tmp_path / "pwned").exists()


# --- VideoEncoder -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["out.mkv", "out.mp4"])
def test_encoder_round_trip(make_clip, tmp_path, name):
    source = make_clip(frames=12, width=96, height=64)
    frames = read_all(source)
    out = tmp_path / name
    with VideoEncoder(out, VideoStream(96, 64, "24000/1001", crf=10, preset="ultrafast")) as encoder:
        for frame in frames:
            encoder.write(frame)
    probe = probe_video(out)
    video = probe["video"]
    assert (video["width"], video["height"], video["frame_count"]) == (96, 64, 12)
    assert video["fps_fraction"] == "24000/1001"
    assert (video["color_space"], video["color_range"]) == ("bt709", "tv")
    again = read_all(out, probe)
    assert np.abs(again.astype(int) - frames.astype(int)).mean() < 4.0  # same pictures, within coding loss
    assert leftovers(tmp_path) == []


def test_frames_rendered_into_the_encoders_kept_arrays_all_arrive_intact(tmp_path):
    # The render stage renders each frame into VideoEncoder.frame_buffer() and hands it over: the arrays come round
    # again after prefetch + 2 frames, so none may be refilled before ffmpeg has read it. Every frame a flat grey of
    # its own level, written as fast as the queue takes them (each larger than a pipe's buffer, so the feeder waits
    # on ffmpeg while the next ones are filled): each comes back as its own level.
    out = tmp_path / "kept.mkv"
    levels = [(16 + 9 * k) % 236 for k in range(40)]
    with VideoEncoder(out, VideoStream(640, 320, "24", crf=0, preset="ultrafast"), prefetch=1) as encoder:
        held = set()
        for level in levels:
            buffer = encoder.frame_buffer()
            held.add(id(buffer))
            buffer[...] = level
            encoder.write(buffer, owned=True)
    assert len(held) == 3  # prefetch + 2 arrays, no more
    again = read_all(out, probe_video(out))
    assert len(again) == len(levels)
    assert [round(float(frame.mean())) for frame in again] == pytest.approx(levels, abs=2)  # 9 levels apart


def test_encoder_leaves_nothing_when_the_producer_fails(tmp_path):
    out = tmp_path / "broken.mp4"
    with pytest.raises(RuntimeError, match="producer died"):
        with VideoEncoder(out, VideoStream(32, 32, "24")) as encoder:
            for _ in range(5):
                encoder.write(np.zeros((32, 32, 3), np.uint8))
            raise RuntimeError("producer died")
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_encoder_failure_is_bad_video_and_leaves_nothing(tmp_path):
    out = tmp_path / "odd.mp4"
    # yuv420p cannot hold odd sizes with libx264: ffmpeg refuses once frames arrive.
    with pytest.raises(BadVideo) as caught:
        with VideoEncoder(out, VideoStream(33, 31, "24")) as encoder:
            for _ in range(30):
                encoder.write(np.zeros((31, 33, 3), np.uint8))
    assert caught.value.path == out
    assert list(tmp_path.iterdir()) == []


def test_encoder_refuses_a_frame_of_the_wrong_shape(tmp_path):
    out = tmp_path / "shape.mkv"
    with pytest.raises(ValueError, match="frame must be uint8"):
        with VideoEncoder(out, VideoStream(32, 32, "24")) as encoder:
            encoder.write(np.zeros((32, 31, 3), np.uint8))
    assert list(tmp_path.iterdir()) == []


def test_encoder_with_no_frames_writes_nothing(tmp_path):
    out = tmp_path / "none.mkv"
    with pytest.raises(BadVideo, match="no frames"):
        with VideoEncoder(out, VideoStream(32, 32, "24")):
            pass
    assert list(tmp_path.iterdir()) == []


# --- mux_with_source --------------------------------------------------------------------------------------


def encode_copy(source, probe, out):
    """Stand-in for the 3D render: re-encode the source's own frames."""
    video = probe["video"]
    stream = VideoStream(video["display_width"], video["display_height"], video["fps_fraction"], preset="ultrafast")
    with VideoEncoder(out, stream) as enc:
        for frame in read_all(source, probe):
            enc.write(frame)
    return out


@pytest.mark.parametrize(
    "source_name,out_name",
    [("src.mp4", "final.mp4"), ("src.mkv", "final.mp4"), ("src.mkv", "final.mkv"), ("src.mp4", "final.mkv")],
)
def test_mux_keeps_audio_subtitles_and_duration(make_clip, tmp_path, source_name, out_name):
    source = make_clip(source_name, frames=36, audio=True, subtitles=True)
    probe = probe_video(source)
    video_only = encode_copy(source, probe, tmp_path / "video_only.mkv")
    final = mux_with_source(video_only, source, tmp_path / out_name, probe)
    result = probe_video(final)
    assert result["video"]["frame_count"] == 36
    assert [(a["codec"], a["channels"], a["language"]) for a in result["audio"]] == [("aac", 2, "eng")]
    assert len(result["subtitles"]) == 1 and result["subtitles"][0]["language"] == "eng"
    expected_sub = "mov_text" if out_name.endswith(".mp4") else "subrip"
    assert result["subtitles"][0]["codec"] == expected_sub
    assert result["subtitles"][0]["title"] == "English cues"
    assert abs(result["duration_s"] - probe["duration_s"]) <= 1 / 24 + 0.011  # within a frame (+ banner rounding)
    assert abs(result["video"]["duration_s"] - probe["video"]["duration_s"]) <= 1 / 24
    assert leftovers(tmp_path) == []


def test_mux_keeps_a_late_video_start_in_sync(make_clip, tmp_path):
    base = make_clip("base.mp4", frames=24, audio=True)
    source = tmp_path / "late video.mp4"
    run_ffmpeg(
        ["-itsoffset", "0.25", "-i", ffmpeg_url(base), "-i", ffmpeg_url(base),
         "-map", "0:v", "-map", "1:a", "-c", "copy", ffmpeg_url(source)],
        source,
        "test setup",
    )  # fmt: skip
    probe = probe_video(source)
    assert probe["video"]["start_pts_s"] == pytest.approx(0.25, abs=1e-3)
    final = mux_with_source(encode_copy(source, probe, tmp_path / "v.mkv"), source, tmp_path / "final.mkv", probe)
    assert probe_video(final)["video"]["start_pts_s"] == pytest.approx(0.25, abs=1e-3)


def test_mux_without_audio(make_clip, tmp_path):
    source = make_clip("silent.mp4", frames=12)
    probe = probe_video(source)
    final = mux_with_source(encode_copy(source, probe, tmp_path / "v.mkv"), source, tmp_path / "final.mp4", probe)
    result = probe_video(final)
    assert result["audio"] == [] and result["video"]["frame_count"] == 12


def test_mux_keeps_every_audio_stream_chapters_and_title(make_clip, tmp_path):
    base = make_clip("base.mkv", frames=24, audio=True)
    meta = tmp_path / "meta.txt"
    meta.write_text(
        ";FFMETADATA1\ntitle=Holiday\n[CHAPTER]\nTIMEBASE=1/1000\nSTART=0\nEND=500\ntitle=One\n"
        "[CHAPTER]\nTIMEBASE=1/1000\nSTART=500\nEND=1000\ntitle=Two\n"
    )
    source = tmp_path / "two tracks.mkv"
    run_ffmpeg(
        [
            "-i", ffmpeg_url(base), "-f", "ffmetadata", "-i", ffmpeg_url(meta), "-f", "lavfi", "-i",
            "sine=frequency=660:duration=1", "-map", "0:v", "-map", "0:a", "-map", "2:a", "-map_metadata", "1",
            "-map_chapters", "1", "-c:v", "copy", "-c:a", "flac", "-metadata:s:a:1", "language=fra",
            ffmpeg_url(source),
        ],
        source,
        "test setup",
    )  # fmt: skip
    probe = probe_video(source)
    assert probe["chapters"] == 2 and len(probe["audio"]) == 2
    final = mux_with_source(encode_copy(source, probe, tmp_path / "v.mkv"), source, tmp_path / "final.mp4", probe)
    result = probe_video(final)
    assert [a["language"] for a in result["audio"]] == ["eng", "fra"]
    assert result["chapters"] == 2
    banner = run_ffmpeg(["-i", ffmpeg_url(final)], final, "test", check=False).stderr.decode()
    assert "Holiday" in banner


def test_mux_failure_leaves_nothing(make_clip, tmp_path):
    source = make_clip(frames=6)
    probe = probe_video(source)
    out = tmp_path / "final.mp4"
    with pytest.raises(BadVideo) as caught:
        mux_with_source(tmp_path / "missing video.mkv", source, out, probe)
    assert "missing video.mkv" in str(caught.value) and "not found" in str(caught.value)
    assert not out.exists() and leftovers(tmp_path) == []
