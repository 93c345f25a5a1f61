"""A corpus of hostile inputs, generated with the bundled ffmpeg and Python (never committed as blobs).

Every case a library of hundreds of films eventually holds: empty, truncated and fake files, audio only,
one frame, fewer frames than the NVDS window, 1x1 and odd sizes, variable and very high frame rates, rotated,
interlaced, 10-bit, an 8K header, names a shell would misread, a folder named like a video and a broken
symbolic link. ``VIDEO_CASES`` says what the workflow does with each (``converts`` or the cause it names);
``make_corpus`` writes them into a folder. Used by tests/test_hostile_*.py and usable by bench/ and demos.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from stereo3d.demo.samples import make_clip
from stereo3d.io.atomic import atomic_output
from stereo3d.io.ffmpeg import ffmpeg_url, run_ffmpeg

# A name with everything a shell or a format string would misread: spaces, unicode, ; $() ' " and a glob.
HOSTILE_NAME = "spaced ünï名 ;$(touch pwned)`touch pwned2` 'q' \"dq\" %s *.mp4"
PWNED = ("pwned", "pwned2")  # files a name reaching a shell would create


@dataclass(frozen=True)
class Case:
    name: str  # file name inside the corpus folder
    expect: str  # "converts", or a fragment of the one-line error naming the cause
    note: str  # the behaviour chosen, in words


VIDEO_CASES = (
    Case("empty.mp4", "empty file (0 bytes)", "0-byte file: refused at probe"),
    Case(
        "truncated_moov.mp4",
        "not a readable media file",
        "mp4 cut mid-stream (index at the end is lost): refused at probe",
    ),
    Case(
        "truncated_mid.mkv",
        "converts",
        "Matroska cut mid-stream (header intact): the frames that are "
        "there convert; the probe counts only complete packets",
    ),
    Case("text.mp4", "not a readable media file", "a text file named .mp4: refused at probe"),
    Case("audio_only.mp4", "no video stream (only audio)", "audio-only file: refused at probe"),
    Case("single_frame.mp4", "converts", "one frame: converts (a 1-frame 3D file)"),
    Case(
        "three_frames.mp4",
        "converts",
        "fewer frames than the NVDS window (4): converts, the window is padded by repetition",
    ),
    Case(
        "one_by_one.mkv", "frame size 1x1 is too small", "1x1: refused at probe (min 8x8: no picture to give depth to)"
    ),
    Case(
        "odd_15x9.mp4",
        "converts",
        "15x9 (H.264 4:4:4): converts; the 4:2:0 output is padded to even sides by repeating the last row/column",
    ),
    Case("vfr.mp4", "converts", "variable frame rate: converts, every timestamp kept"),
    Case("rotated_90.mp4", "converts", "rotated 90 degrees: converts in display orientation"),
    Case(
        "interlaced.mp4",
        "converts",
        "interlaced (tff): converts; fields are deinterlaced (bwdif, one frame per frame) before depth and rendering",
    ),
    Case(
        "ten_bit.mkv",
        "converts",
        "10-bit HDR (BT.2020, PQ): converts to 10-bit (HEVC by encode.deep_codec) with the same colour tags",
    ),
    Case(
        "hfr_240.mp4",
        "converts",
        "240 fps: converts, every frame at its exact time (the Matroska render "
        "intermediates round to whole ms; the final mux restamps the source's ticks)",
    ),
    Case(HOSTILE_NAME, "converts", "spaces, unicode, ;$()'\"` and a glob in the name: converts, nothing executed"),
    Case(
        "repeat_markers.avi",
        "converts",
        "AVI with zero-byte video chunks (how AVI writers store a dropped or unchanged frame): each picture lasts "
        "until the next, the last to the end of the stream; the audio stays in sync",
    ),
    Case(
        "mid_gop.mp4",
        "converts",
        "H.264 cut in the middle of a GOP and muxed without reordering times: the decoder delivers pictures out of "
        "order; they are shown in presentation order, every frame at its time",
    ),
    Case(
        "edit_list_cut.mp4",
        "converts",
        "stream copy from mid-GOP with an edit list: the pre-roll packets are decoded as references but not "
        "shown; the video starts at the cut",
    ),
    Case(
        "folder.mp4", "", "a folder named like a video: not a video, skipped by discovery (its videos inside are found)"
    ),
    Case("dangling.mp4", "", "a broken symbolic link: skipped by discovery with a warning naming it"),
)


def make_corpus(folder: str | Path, names: tuple[str, ...] | None = None) -> dict[str, Path]:
    """Write the cases named in ``names`` (all of ``VIDEO_CASES`` by default) into ``folder``; name -> path."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    wanted = [c.name for c in VIDEO_CASES] if names is None else list(names)
    made = {}
    for name in wanted:
        made[name] = _MAKERS.get(name, _good)(folder / name)
    return made


TINY = dict(width=64, height=36, fps="8")


def _good(path: Path) -> Path:
    return make_clip(path, frames=4, **TINY)


def _empty(path: Path) -> Path:
    path.write_bytes(b"")
    return path


def _truncated_moov(path: Path) -> Path:
    # Without +faststart the index (moov) comes last: half the file has media data and no index.
    data = make_clip(path, frames=8, **TINY).read_bytes()
    path.write_bytes(data[: len(data) // 2])
    return path


TRUNCATED_MID_FRAMES = 16  # frames of truncated_mid.mkv before the cut


def _truncated_mid(path: Path) -> Path:
    # Matroska's header comes first; the cut loses the last frames and leaves a partial packet at the end.
    # All key frames in short clusters, so the cut leaves whole clusters of decodable frames before it.
    data = make_clip(
        path, frames=TRUNCATED_MID_FRAMES, extra=("-g", "1", "-cluster_time_limit", "250"), **TINY
    ).read_bytes()
    path.write_bytes(data[: len(data) * 2 // 3 + 7])
    return path


def _text(path: Path) -> Path:
    path.write_text("This is a shopping list, not a video.\nmilk\neggs\n", encoding="utf-8")
    return path


def _audio_only(path: Path) -> Path:
    return _lavfi(
        path, ["-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000:duration=0.5", "-c:a", "aac", "-b:a", "64k"]
    )


def _single_frame(path: Path) -> Path:
    return make_clip(path, frames=1, **TINY)


def _three_frames(path: Path) -> Path:
    return make_clip(path, frames=3, **TINY)


def _one_by_one(path: Path) -> Path:
    # testsrc patterns round sizes to even; a plain colour keeps 1x1. FFV1 stores any size.
    return _lavfi(path, ["-f", "lavfi", "-i", "color=c=0x808080:size=1x1:rate=8", "-frames:v", "4", "-c:v", "ffv1"])


def _odd(path: Path, width: int = 15, height: int = 9) -> Path:
    # 4:4:4 H.264 allows odd sides (4:2:0 does not): what an odd-sized file in the wild is.
    return _lavfi(
        path,
        [
            "-f",
            "lavfi",
            "-i",
            f"testsrc2=size=16x10:rate=8,scale={width}:{height},setsar=1,format=yuv444p",
            "-frames:v",
            "4",
            "-c:v",
            "libx264",
            "-threads",
            "1",
        ],
    )


def _vfr(path: Path) -> Path:
    return make_clip(path, frames=6, vfr=True, **TINY)


def _rotated(path: Path) -> Path:
    return make_clip(path, frames=4, rotation=90, **TINY)


def _interlaced(path: Path) -> Path:
    return make_clip(path, frames=4, extra=("-flags", "+ilme+ildct", "-x264-params", "tff=1"), **TINY)


HDR_TAGS = {
    "color_primaries": "bt2020",
    "color_transfer": "smpte2084",
    "color_space": "bt2020nc",
    "color_range": "tv",
}


def _ten_bit(path: Path) -> Path:
    # What a 10-bit file in the wild mostly is: HDR, tagged BT.2020 (primaries and matrix) and PQ (transfer).
    tags = "color_primaries=bt2020:color_trc=smpte2084:colorspace=bt2020nc:range=tv"
    return make_clip(
        path,
        frames=4,
        codec="libx265",
        pix_fmt="yuv420p10le",
        extra=("-vf", f"setparams={tags}", "-x265-params", "log-level=error"),
        **TINY,
    )


def _hfr(path: Path) -> Path:
    return make_clip(path, width=64, height=36, frames=8, fps="240")


def make_8k_header(path: str | Path) -> Path:
    """A one-frame 7680x4320 H.264 clip of flat colour: cheap to make (well under a second) and to probe."""
    return _lavfi(
        Path(path),
        [
            "-f",
            "lavfi",
            "-i",
            "color=c=0x336699:size=7680x4320:rate=24",
            "-frames:v",
            "1",
            "-c:v",
            "libx264",
            "-preset",
            "ultrafast",
        ],
    )


def _folder(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    make_clip(path / "inside.mp4", frames=2, **TINY)
    return path


def _dangling(path: Path) -> Path:
    if path.is_symlink():
        path.unlink()
    os.symlink(path.with_name("gone-missing.mp4"), path)
    return path


def _lavfi(path: Path, args: list[str]) -> Path:
    with atomic_output(path) as tmp:
        run_ffmpeg(
            ["-y", *args, "-fflags", "+bitexact", "-map_metadata", "-1", ffmpeg_url(tmp)],
            path,
            "generating corpus clip",
        )
    return path


REPEAT_MARKERS = dict(fps=16, every=6, frames=48)  # a picture every 6th frame of 48 at 16 fps: 8 pictures, 3 s


def _repeat_markers(path: Path) -> Path:
    """An AVI (Motion JPEG + PCM tone) written chunk by chunk, with empty video chunks for the frames that repeat
    the picture before: FFmpeg's own AVI muxer never writes those, other writers do."""
    import struct

    import cv2
    import numpy as np

    fps, every, frames = REPEAT_MARKERS["fps"], REPEAT_MARKERS["every"], REPEAT_MARKERS["frames"]
    width, height, rate = 64, 36, 8000
    per_frame = rate // fps

    def chunk(fourcc: bytes, data: bytes) -> bytes:
        return fourcc + struct.pack("<I", len(data)) + data + (b"\0" if len(data) % 2 else b"")

    def listed(kind: bytes, body: bytes) -> bytes:
        return b"LIST" + struct.pack("<I", len(body) + 4) + kind + body

    pictures = []
    for n in range(frames):
        if n % every:
            pictures.append(b"")  # a repeat marker
            continue
        image = np.zeros((height, width, 3), np.uint8)
        image[:, (4 * n) % width] = 255  # a bar that moves from picture to picture
        image[..., 1] = 40 + 4 * n
        pictures.append(cv2.imencode(".jpg", image)[1].tobytes())
    avih = struct.pack("<14I", 10**6 // fps, 0, 0, 0x110, frames, 0, 2, 1 << 16, width, height, 0, 0, 0, 0)
    video_h = b"vidsMJPG" + struct.pack("<IHHIIIIIIIIhhhh", 0, 0, 0, 0, 1, fps, 0, frames, 1 << 16, 2**32 - 1, 0, 0,
                                        0, width, height)  # fmt: skip
    video_f = struct.pack("<IiiHH4sIiiII", 40, width, height, 1, 24, b"MJPG", width * height * 3, 0, 0, 0, 0)
    audio_h = b"auds\0\0\0\0" + struct.pack("<IHHIIIIIIIIhhhh", 0, 0, 0, 0, 1, rate, 0, frames * per_frame, 1 << 14,
                                            2**32 - 1, 2, 0, 0, 0, 0)  # fmt: skip
    audio_f = struct.pack("<HHIIHH", 1, 1, rate, 2 * rate, 2, 16)  # PCM, mono, 16 bit
    header = listed(b"hdrl", chunk(b"avih", avih) + listed(b"strl", chunk(b"strh", video_h) + chunk(b"strf", video_f))
                    + listed(b"strl", chunk(b"strh", audio_h) + chunk(b"strf", audio_f)))  # fmt: skip
    tone = (np.sin(2 * np.pi * 440 * np.arange(frames * per_frame) / rate) * 8000).astype("<i2").tobytes()
    movi, index = b"", b""
    for n, data in enumerate(pictures):
        for fourcc, payload, key in (
            (b"00dc", data, bool(data)),
            (b"01wb", tone[2 * n * per_frame :][: 2 * per_frame], True),
        ):
            index += fourcc + struct.pack("<III", 0x10 if key else 0, 4 + len(movi), len(payload))
            movi += chunk(fourcc, payload)
    body = b"AVI " + header + listed(b"movi", movi) + chunk(b"idx1", index)
    with atomic_output(path) as tmp:
        tmp.write_bytes(b"RIFF" + struct.pack("<I", len(body)) + body)
    return path


def _mid_gop(path: Path) -> Path:
    # B-frames and GOPs of 12; the raw stream cut at its 8th slice (mid-GOP, parameter sets kept in front) and
    # muxed as it comes, so the container's times follow decode order, not presentation order.
    with tempfile.TemporaryDirectory(prefix="corpus-") as scratch:
        clip = make_clip(
            Path(scratch) / "gop.mp4", frames=48, width=64, height=36, fps="24", extra=("-g", "12", "-bf", "3")
        )
        raw = Path(scratch) / "gop.h264"
        run_ffmpeg(["-i", ffmpeg_url(clip), "-c:v", "copy", "-bsf:v", "h264_mp4toannexb", "-an", "-y", ffmpeg_url(raw)],
                   path, "corpus: raw stream")  # fmt: skip
        data = raw.read_bytes()
        units = [i for i in range(len(data) - 4) if data[i : i + 4] == b"\0\0\0\1"]
        bounds = list(zip(units, [*units[1:], len(data)]))
        parameters = b"".join(data[a:b] for a, b in bounds if data[a + 4] & 0x1F in (7, 8))
        slices = [a for a, _ in bounds if data[a + 4] & 0x1F in (1, 5)]
        cut = Path(scratch) / "cut.h264"
        cut.write_bytes(parameters + data[slices[7] :])
        with atomic_output(path) as tmp:
            run_ffmpeg(["-r", "24", "-i", ffmpeg_url(cut), "-c", "copy", "-y", ffmpeg_url(tmp)], path, "corpus: mux")
    return path


EDIT_LIST_CUT_S = 0.35


def _edit_list_cut(path: Path) -> Path:
    # ffmpeg's stream copy from a time that is no key frame keeps the GOP's start and hides it with an edit list.
    with tempfile.TemporaryDirectory(prefix="corpus-") as scratch:
        clip = make_clip(Path(scratch) / "gop.mp4", frames=48, width=64, height=36, fps="24", audio=True,
                         extra=("-g", "12", "-bf", "3"))  # fmt: skip
        with atomic_output(path) as tmp:
            run_ffmpeg(["-ss", str(EDIT_LIST_CUT_S), "-i", ffmpeg_url(clip), "-c", "copy", "-y", ffmpeg_url(tmp)],
                       path, "corpus: cut")  # fmt: skip
    return path


_MAKERS = {
    "repeat_markers.avi": _repeat_markers,
    "mid_gop.mp4": _mid_gop,
    "edit_list_cut.mp4": _edit_list_cut,
    "empty.mp4": _empty,
    "truncated_moov.mp4": _truncated_moov,
    "truncated_mid.mkv": _truncated_mid,
    "text.mp4": _text,
    "audio_only.mp4": _audio_only,
    "single_frame.mp4": _single_frame,
    "three_frames.mp4": _three_frames,
    "one_by_one.mkv": _one_by_one,
    "odd_15x9.mp4": _odd,
    "vfr.mp4": _vfr,
    "rotated_90.mp4": _rotated,
    "interlaced.mp4": _interlaced,
    "ten_bit.mkv": _ten_bit,
    "hfr_240.mp4": _hfr,
    "folder.mp4": _folder,
    "dangling.mp4": _dangling,
}
