"""Every audio track of a source reaches the result (README, "What the result keeps"): in MP4 the codecs it can
hold are copied as they are and any other is re-encoded to AAC, with a warning naming it; Matroska keeps every
track as it came."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from test_delivery import FAST, joined

from stereo3d.io.ffmpeg import ffmpeg_url, run_ffmpeg
from stereo3d.io.probe import probe_video

# ffmpeg encoder of each track, in track order, and the codec the source holds
TRACKS = {
    "aac": "aac",
    "libmp3lame": "mp3",
    "ac3": "ac3",
    "eac3": "eac3",
    "libopus": "opus",
    "flac": "flac",
    "alac": "alac",
    "mp2": "mp2",
    "dca": "dts",
    "pcm_s16le": "pcm_s16le",
    "libvorbis": "vorbis",
    "truehd": "truehd",
}
MP4_COPIES = {"aac", "mp3", "ac3", "eac3", "opus", "flac", "alac", "mp2", "dts"}  # the README's list


@pytest.fixture
def every_codec(make_clip, tmp_path) -> Path:
    """A Matroska source with one second of 8 fps video and one stereo 48 kHz tone per codec of TRACKS."""
    video = make_clip("video.mkv", width=64, height=36, frames=8, fps="8")
    args = ["-i", ffmpeg_url(video)]
    for number, _ in enumerate(TRACKS):
        args += ["-f", "lavfi", "-i", f"sine=frequency={300 + 40 * number}:sample_rate=48000:duration=1"]
    args += ["-map", "0:v", *[f for n in range(len(TRACKS)) for f in ("-map", f"{n + 1}:a")], "-c:v", "copy"]
    args += [f for n, encoder in enumerate(TRACKS) for f in (f"-c:a:{n}", encoder)]
    out = tmp_path / "every_codec.mkv"
    run_ffmpeg([*args, "-ac", "2", "-strict", "-2", "-y", ffmpeg_url(out)], out, "making the test source")
    assert [a["codec"] for a in probe_video(out)["audio"]] == list(TRACKS.values())
    return out


def test_mp4_copies_the_codecs_it_holds_and_re_encodes_the_others_to_aac(every_codec, tmp_path, caplog):
    with caplog.at_level(logging.WARNING):
        final = joined(tmp_path, every_codec, "full_sbs", FAST, out="final.mp4")
    # MP4 has one object type for MPEG-1 audio of any layer, which ffmpeg reads back as mp3: the MP2 track's
    # packets below show that it is the source's.
    expected = [{"mp2": "mp3"}.get(c, c) if c in MP4_COPIES else "aac" for c in TRACKS.values()]
    assert [a["codec"] for a in probe_video(final)["audio"]] == expected
    for number, codec in enumerate(TRACKS.values()):
        if codec in MP4_COPIES:
            assert packets(final, number) == packets(every_codec, number), f"{codec} was not copied as it is"
    warned = " ".join(record.getMessage() for record in caplog.records)
    for codec in set(TRACKS.values()) - MP4_COPIES:
        assert codec in warned, f"no warning names {codec}"


def test_a_track_re_encoded_for_mp4_is_aac_at_256_kbps(make_clip, tmp_path):
    # Pink noise: a signal that takes every bit the encoder is given (ffmpeg's AAC encoder spends less on a tone).
    video = make_clip("video.mkv", width=64, height=36, frames=8, fps="8")
    source = tmp_path / "pcm.mkv"
    run_ffmpeg(["-i", ffmpeg_url(video), "-f", "lavfi", "-i", "anoisesrc=d=1:c=pink:r=48000:seed=1", "-map", "0:v",
                "-map", "1:a", "-c:v", "copy", "-c:a", "pcm_s16le", "-ac", "2", "-y", ffmpeg_url(source)], source,
               "making the test source")  # fmt: skip
    final = joined(tmp_path, source, "full_sbs", FAST, out="final.mp4")
    assert [a["codec"] for a in probe_video(final)["audio"]] == ["aac"]
    assert audio_bitrate(final, 0) == pytest.approx(256_000, rel=0.06)


def test_matroska_keeps_every_track_as_it_came(every_codec, tmp_path):
    final = joined(tmp_path, every_codec, "full_sbs", FAST, out="final.mkv")
    assert [a["codec"] for a in probe_video(final)["audio"]] == list(TRACKS.values())
    for number in range(len(TRACKS)):
        assert packets(final, number) == packets(every_codec, number)


def packets(path: Path, track: int) -> bytes:
    """The payload of every packet of the file's audio track ``track``, in order, as stored."""
    args = ["-i", ffmpeg_url(path), "-map", f"0:a:{track}", "-c", "copy", "-f", "data", "pipe:1"]
    return run_ffmpeg(args, path, "reading an audio track (test)").stdout


def audio_bitrate(path: Path, track: int) -> float:
    """Bits per second of the file's audio track ``track``: its packets' bytes over its duration."""
    import av

    with av.open(str(path)) as container:
        stream = container.streams.audio[track]
        size = sum(packet.size for packet in container.demux(stream) if packet.size)
        return size * 8 / float(stream.duration * stream.time_base)
