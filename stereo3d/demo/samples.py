"""Small generated clips for tests and the demo, made with nothing but the bundled ffmpeg.

The content moves (so temporal stages have something to track) and the bytes are reproducible across runs
on the same ffmpeg build (bit-exact flags, one encoder thread), so workflow tests can compare outputs.
"""

from __future__ import annotations

import tempfile
from fractions import Fraction
from pathlib import Path

from stereo3d.io.atomic import atomic_output
from stereo3d.io.ffmpeg import ffmpeg_url, run_ffmpeg

# The demo's file names; the workflow needs them before the clips exist.
DEMO_CLIPS = ("demo_shapes_16x9.mp4", "demo_fractal_1x1.mp4")
# The demo's own library (relative to the working directory), whatever library.folder says: the demo must never
# write its clips into a user's folder of videos.
DEMO_FOLDER = "demo/videos"

PATTERNS = ("testsrc2", "testsrc", "mandelbrot", "life", "boxes")

_SUBTITLE_CODEC = {".mp4": "mov_text", ".mov": "mov_text", ".m4v": "mov_text"}  # others: SubRip (mkv)


def make_clip(
    path: str | Path,
    width: int = 160,
    height: int = 90,
    frames: int = 24,
    fps: str = "24",
    audio: bool = False,
    subtitles: bool = False,
    pattern: str = "testsrc2",
    codec: str = "libx264",
    pix_fmt: str = "yuv420p",
    extra: tuple[str, ...] | list[str] = (),
    *,
    vfr: bool = False,
    rotation: int = 0,
) -> Path:
    """Write a clip of ``frames`` frames of moving ``pattern`` at ``fps`` (e.g. "24", "24000/1001").

    ``audio`` adds a 440 Hz stereo tone (English); ``subtitles`` two English cues; ``vfr`` stretches every
    third frame interval to twice the nominal one (variable frame rate); ``rotation`` (0/90/180/270, clockwise
    like the legacy ``rotate`` tag) stores a display matrix without touching the pixels. ``extra`` goes to the
    encoder options (e.g. ``("-qp", "0")`` for lossless x264). Written atomically; returns the path.
    """
    path = Path(path)
    if pattern not in PATTERNS:
        raise ValueError(f"unknown pattern {pattern!r}; choose one of {', '.join(PATTERNS)}")
    if rotation % 90:
        raise ValueError(f"rotation must be a multiple of 90 degrees, not {rotation}")
    rate = Fraction(fps)
    seconds = frames / rate
    video = _pattern_source(pattern, width, height, rate)
    if vfr:
        video += f",setpts='(N+floor(N/3))*{rate.denominator}/{rate.numerator}/TB'"
    video += f",format={pix_fmt}"

    with tempfile.TemporaryDirectory(prefix="stereo3d-sample-") as scratch:
        args = ["-f", "lavfi", "-i", video]
        maps = ["-map", "0:v"]
        if audio:
            args += ["-f", "lavfi", "-i", f"sine=frequency=440:sample_rate=48000:duration={float(seconds):.6f}"]
            maps += ["-map", "1:a"]
        if subtitles:
            srt = Path(scratch) / "cues.srt"
            srt.write_text(_srt_cues(float(seconds)), encoding="utf-8")
            args += ["-i", ffmpeg_url(srt)]
            maps += ["-map", f"{len(maps) // 2}:s"]
        encode = [
            *maps,
            "-frames:v", str(frames),
            "-fps_mode", "passthrough",
            "-c:v", codec,
            "-threads", "1",
            "-fflags", "+bitexact",
            "-flags", "+bitexact",
            "-map_metadata", "-1",
            *[str(a) for a in extra],
        ]  # fmt: skip
        if audio:
            encode += ["-c:a", "aac", "-b:a", "96k", "-ac", "2", "-metadata:s:a:0", "language=eng"]
        if subtitles:
            encode += [
                "-c:s", _SUBTITLE_CODEC.get(path.suffix.lower(), "srt"),
                "-metadata:s:s:0", "language=eng",
                # mp4 keeps a track title as its handler name (a "name" atom upsets ffmpeg's own reader).
                "-metadata:s:s:0", ("handler_name" if path.suffix.lower() in _SUBTITLE_CODEC else "title")
                + "=English cues",
            ]  # fmt: skip
        with atomic_output(path) as tmp:
            if rotation % 360:
                # The display matrix is an input-side option, so it takes a second, lossless remux.
                plain = Path(scratch) / f"plain{path.suffix}"
                run_ffmpeg(["-y", *args, *encode, ffmpeg_url(plain)], path, "generating sample clip")
                run_ffmpeg(
                    [
                        "-display_rotation", str(-(rotation % 360)),  # ffmpeg counts counter-clockwise
                        "-i", ffmpeg_url(plain),
                        "-map", "0", "-c", "copy", "-fflags", "+bitexact", "-y", ffmpeg_url(tmp),
                    ],
                    path,
                    "rotating sample clip",
                )  # fmt: skip
            else:
                run_ffmpeg(["-y", *args, *encode, ffmpeg_url(tmp)], path, "generating sample clip")
    return path


def make_demo_library(folder: str | Path) -> list[Path]:
    """Write the demo clips (``DEMO_CLIPS``) into ``folder``: small, a few seconds, quick to convert on a CPU.

    One is 16:9 with a tone and subtitles, the other square and silent, so both the audio/subtitle path and
    the non-16:9 padding path run. Existing clips are kept (the generation is deterministic).
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    specs = {
        DEMO_CLIPS[0]: dict(width=320, height=180, frames=48, fps="16", audio=True, subtitles=True, pattern="boxes"),
        DEMO_CLIPS[1]: dict(width=240, height=240, frames=48, fps="16", pattern="mandelbrot"),
    }
    paths = []
    for name, spec in specs.items():
        target = folder / name
        if not target.exists():
            make_clip(target, **spec)
        paths.append(target)
    return paths


def _pattern_source(pattern: str, width: int, height: int, rate: Fraction) -> str:
    size, fps = f"{width}x{height}", f"{rate.numerator}/{rate.denominator}"
    if pattern == "boxes":
        # Three boxes at different speeds over a dark background: simple parallax for eyeballing the 3D.
        return (
            f"color=c=0x1c2a3a:size={size}:rate={fps},"
            "drawbox=x='mod(t*iw/3\\,iw)-iw/8':y=ih/8:w=iw/4:h=ih/4:color=0xd04040:t=fill,"
            "drawbox=x='iw-mod(t*iw/2\\,iw)':y=ih/2:w=iw/6:h=ih/3:color=0x40c060:t=fill,"
            "drawbox=x=iw/2-iw/10+iw/6*sin(t*3):y=ih/3:w=iw/5:h=ih/5:color=0xe0d040:t=fill"
        )
    if pattern == "life":
        return f"life=size={size}:rate={fps}:seed=7:ratio=0.3:mold=8:life_color=0x80ff80:death_color=0x202060"
    if pattern == "mandelbrot":
        return f"mandelbrot=size={size}:rate={fps}:start_scale=2.5:end_scale=0.2"
    return f"{pattern}=size={size}:rate={fps}"


def _srt_cues(seconds: float) -> str:
    half = seconds / 2
    first = f"1\n{_srt_time(0)} --> {_srt_time(half)}\nLeft eye\n"
    return first + f"\n2\n{_srt_time(half)} --> {_srt_time(seconds)}\nRight eye\n"


def _srt_time(seconds: float) -> str:
    ms = round(seconds * 1000)
    return f"{ms // 3600000:02d}:{ms // 60000 % 60:02d}:{ms // 1000 % 60:02d},{ms % 1000:03d}"
