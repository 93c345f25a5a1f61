"""Anamorphic (non-square pixel) sources keep their shape: the probe's display size is square pixels, frames are
decoded at it, and every layout's output reads back (in ffmpeg's own report) with each eye at the source's display
aspect. Square-pixel sources go through exactly as before."""

from __future__ import annotations

import re
from fractions import Fraction
from pathlib import Path

import cv2
import numpy as np
import pytest
from test_delivery import banner, near_store, settings

from stereo3d.errors import BadVideo
from stereo3d.io.decode import FrameReader, _Conversion
from stereo3d.io.encode import VideoStream, encode_args
from stereo3d.io.ffmpeg import ffmpeg_url, run_ffmpeg
from stereo3d.io.probe import display_size, probe_video, square_pixels
from stereo3d.stages.join import join_segments
from stereo3d.stages.render import render_video

DVD_WIDE = ("-vf", "setsar=32/27")  # NTSC DVD 16:9: 720x480 coded, shown 16:9
# Each eye's share of the packed frame (width, height) and how far a player stretches it back (width, height).
EYES = {
    "full_sbs": ((Fraction(1, 2), 1), (1, 1)),
    "half_sbs": ((Fraction(1, 2), 1), (2, 1)),
    "full_tb": ((1, Fraction(1, 2)), (1, 1)),
    "half_tb": ((1, Fraction(1, 2)), (1, 2)),
}


def picture(path: Path) -> tuple[int, int, Fraction, Fraction | None]:
    """Size, SAR and DAR of the first video stream as ``ffmpeg -i`` reports them (no SAR means square pixels)."""
    line = next(line for line in banner(path).splitlines() if re.search(r"Stream #0:\d+.*: Video:", line))
    size = re.search(r", (\d+)x(\d+)\b", line)
    aspect = re.search(r"SAR (\d+):(\d+) DAR (\d+):(\d+)", line)
    width, height = int(size.group(1)), int(size.group(2))
    if aspect is None:
        return width, height, Fraction(1), None
    sar, dar = (Fraction(int(aspect.group(n)), int(aspect.group(n + 1))) for n in (1, 3))
    return width, height, sar, dar


def decode_plain(path: Path, width: int, height: int, *vf: str) -> np.ndarray:
    """Every frame as ffmpeg decodes it with no help from FrameReader, RGB ``[N, height, width, 3]``."""
    args = ["-i", ffmpeg_url(path), "-map", "0:v:0", "-fps_mode", "passthrough", *vf]
    done = run_ffmpeg([*args, "-f", "rawvideo", "-pix_fmt", "rgb24", "pipe:1"], path, "decoding (test)")
    return np.frombuffer(done.stdout, np.uint8).reshape(-1, height, width, 3)


def read_all(path: Path, probe: dict, **options) -> np.ndarray:
    with FrameReader(path, probe, **options) as reader:
        return np.stack(list(reader))


@pytest.mark.parametrize(
    ("coded", "sar", "rotation", "shown"),
    [
        ((720, 480), "32:27", 0, (854, 480)),  # 853.3 -> 854
        ((720, 480), "8:9", 0, (640, 480)),  # NTSC DVD 4:3
        ((1440, 1080), "4:3", 0, (1920, 1080)),  # HDV
        ((720, 576), "64:45", 0, (1024, 576)),  # PAL DVD 16:9
        ((96, 64), "32:27", 0, (114, 64)),  # 113.8 -> 114
        ((100, 64), "3:2", 0, (150, 64)),  # exactly 150
        ((99, 64), "3:2", 0, (148, 64)),  # 148.5 -> 148 (the nearest even number)
        ((96, 64), "32:27", 90, (64, 114)),  # the display size turns with the picture
        ((96, 64), "32:27", 270, (64, 114)),
        ((96, 64), "32:27", 180, (114, 64)),
        ((15, 9), "1:1", 0, (15, 9)),  # square pixels: unchanged, odd sides included
        ((15, 9), "1:1", 90, (9, 15)),
        ((15, 9), "0:1", 0, (15, 9)),  # "unknown" is square
    ],
)
def test_display_size_keeps_the_height_and_scales_the_width_to_an_even_number(coded, sar, rotation, shown):
    assert display_size(*coded, sar, rotation) == shown


def test_probe_reports_the_square_pixel_display_size_and_keeps_the_coded_one(make_clip):
    video = probe_video(make_clip("dvd.mp4", width=96, height=64, frames=4, extra=DVD_WIDE))["video"]
    assert (video["width"], video["height"], video["sar"]) == (96, 64, "32:27")
    assert (video["display_width"], video["display_height"]) == (114, 64)
    assert not square_pixels(video)


def test_a_picture_too_narrow_once_shown_is_refused_at_the_probe(make_clip):
    source = make_clip("sliver.mp4", width=16, height=16, frames=2, extra=("-vf", "setsar=1/4"))
    with pytest.raises(BadVideo, match=r"display size 4x16 .*too small"):
        probe_video(source)


def test_reader_delivers_frames_stretched_to_the_display_size(make_clip):
    source = make_clip("dvd.mkv", width=96, height=64, frames=6, codec="ffv1", extra=DVD_WIDE)
    probe = probe_video(source)
    frames = read_all(source, probe)
    assert frames.shape == (6, 64, 114, 3)
    # ffmpeg's own bicubic stretch (the binary's swscale, another build than PyAV's: within rounding), and that is
    # the coded picture widened, not padded at the sides.
    plain = decode_plain(source, 114, 64, "-vf", "scale=114:64:flags=bicubic").astype(int)
    assert np.abs(frames.astype(int) - plain).mean() < 1.0
    coded = decode_plain(source, 96, 64)
    widened = np.stack([cv2.resize(f, (114, 64), interpolation=cv2.INTER_CUBIC) for f in coded]).astype(int)
    padded = np.pad(coded, ((0, 0), (0, 0), (9, 9), (0, 0)), mode="edge").astype(int)
    assert np.abs(frames - widened).mean() * 3 < np.abs(frames - padded).mean()
    # A slice is the same frames; an asked-for size is reached in one scale from the coded picture.
    np.testing.assert_array_equal(read_all(source, probe, start=2, count=3), frames[2:5])
    conversion = _Conversion(probe["video"], (56, 32), "rgb24")
    assert (conversion.coded_size, conversion.interpolation) == ((56, 32), "AREA")  # one scale, from the coded
    assert read_all(source, probe, size=(56, 32)).shape == (6, 32, 56, 3)


def test_rotated_anamorphic_source_is_read_upright_at_its_display_size(make_clip):
    plain = make_clip("dvd.mkv", width=96, height=64, frames=4, codec="ffv1", extra=DVD_WIDE)
    rotated = make_clip("dvd-rot.mkv", width=96, height=64, frames=4, codec="ffv1", extra=DVD_WIDE, rotation=90)
    probe = probe_video(rotated)
    assert probe["video"]["rotation"] == 90 and probe["video"]["sar"] == "32:27"
    assert (probe["video"]["display_width"], probe["video"]["display_height"]) == (64, 114)
    upright = read_all(rotated, probe)
    assert upright.shape == (4, 114, 64, 3)
    # The plain clip widened (in its coded orientation, where its chroma siting is known), then turned clockwise.
    widened = read_all(plain, probe_video(plain))
    np.testing.assert_array_equal(upright, np.rot90(widened, k=-1, axes=(1, 2)))


def test_square_pixel_source_is_decoded_as_before(make_clip):
    source = make_clip("square.mp4", width=64, height=48, frames=6)
    probe = probe_video(source)
    assert square_pixels(probe["video"])
    assert _Conversion(probe["video"], (64, 48), "rgb24").coded_size == (64, 48)  # no scaling added
    np.testing.assert_array_equal(read_all(source, probe), decode_plain(source, 64, 48))
    # The encoder tags nothing it did not tag before.
    assert not any("setsar" in a for a in encode_args(VideoStream(64, 48, "24"), ".mkv"))
    assert "setsar=1/1" in encode_args(VideoStream(64, 48, "24", sar="1:1"), ".mkv")[1]


@pytest.mark.parametrize("rotation", [0, 90], ids=["upright", "rotated_90"])
@pytest.mark.parametrize("layout", list(EYES))
def test_each_eye_displays_at_the_source_aspect_in_every_layout(make_clip, tmp_path, layout, rotation):
    source = make_clip("dvd.mp4", width=96, height=64, frames=6, extra=DVD_WIDE, rotation=rotation)
    probe = probe_video(source)
    coded_w, coded_h, source_sar, source_dar = picture(source)
    assert (coded_w, coded_h, source_sar, source_dar) == (96, 64, Fraction(32, 27), Fraction(16, 9))
    shown = 1 / source_dar if rotation else source_dar  # the aspect a player shows the source at
    video_only = tmp_path / f"{layout}.mkv"
    render_video(source, probe, near_store(tmp_path / "near.maps", probe), video_only, settings(layout))
    final = join_segments([video_only], [0], source, tmp_path / f"{layout}.mp4", probe)
    for path in (video_only, final):
        width, height, sar, dar = picture(path)
        assert sar == 1, f"{path.name}: pixels are not square (SAR {sar})"
        assert dar is None or dar == Fraction(width, height)
        (share_w, share_h), (stretch_w, stretch_h) = EYES[layout]
        eye_w, eye_h = width * share_w * stretch_w * sar, height * share_h * stretch_h
        assert abs(eye_w - eye_h * shown) <= 1, f"{path.name}: an eye shows {eye_w}x{eye_h}, not {shown}"
        assert probe_video(path)["video"]["rotation"] == 0  # upright as it is, nothing turns it again
