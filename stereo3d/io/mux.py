"""The final mux: the encoded video plus every audio/subtitle/chapter stream of the source, restamped onto the
source's exact frame times, written atomically."""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path

import av
from av.sidedata.sidedata import Type

from stereo3d.errors import BadVideo, StereoError
from stereo3d.io.atomic import atomic_output
from stereo3d.io.codecs import CONTAINERS, MP4_LIKE, family_mp4_tag
from stereo3d.io.ffmpeg import BITEXACT, bsf_options, ffmpeg_exe, ffmpeg_url, run_ffmpeg

log = logging.getLogger(__name__)


# What an .mp4 may carry as is; other audio is re-encoded (AAC), other subtitles converted or left out.
MP4_AUDIO = frozenset({"aac", "mp3", "ac3", "eac3", "opus", "flac", "alac", "mp2", "dts"})
TEXT_SUBTITLES = frozenset({"subrip", "srt", "ass", "ssa", "webvtt", "mov_text", "text"})
MP4_BITMAP_SUBTITLES = frozenset({"dvd_subtitle"})

_DISK_TROUBLE = re.compile(
    r"No space left on device|Disk quota exceeded|Read-only file system|Permission denied|"
    r"File too large",
    re.IGNORECASE,
)


def mux_with_source(
    video_only: str | Path,
    source: str | Path,
    out_path: str | Path,
    probe: dict,
    extra_args: Sequence[str] = (),
    keep_subtitles: bool = True,
) -> Path:
    """Write ``out_path``: the video stream of ``video_only`` plus every audio stream, the subtitles, chapters
    and global metadata of ``source`` (``probe`` is the source's probe). Streams are copied; where the
    container cannot hold one (.mp4: text subtitles become mov_text, unsupported audio becomes AAC, bitmap
    subtitles other than DVD are left out with a warning); without ``keep_subtitles`` (``subtitles.keep: false``)
    no subtitle track, nor the fonts styled ones bring. ``extra_args`` go before the output (stereo metadata,
    tags). Written atomically; ``-movflags +faststart`` for .mp4/.mov.

    The video's packets are restamped with the source's exact frame times (``_restamp_bsf``), so the encoded
    video may come in whole milliseconds (Matroska) and still leave with the source's timing, A/V offset
    included.
    """
    out_path = Path(out_path)
    suffix = out_path.suffix.lower()
    if suffix not in CONTAINERS:
        raise ValueError(f"{out_path}: output must end in one of {', '.join(CONTAINERS)}")
    mp4_like = suffix in MP4_LIKE
    if not Path(video_only).is_file():
        raise BadVideo(video_only, "encoded video to mux not found")
    args = ["-loglevel", "error", "-i", ffmpeg_url(video_only), "-i", ffmpeg_url(source), "-map", "0:v:0"]
    codecs = ["-c", "copy"]
    for n, audio in enumerate(probe.get("audio", [])):
        args += ["-map", f"1:{audio['index']}"]
        if mp4_like and audio.get("title"):
            # mp4 players show the handler name as the track title.
            codecs += [f"-metadata:s:a:{n}", f"handler_name={audio['title']}", f"-metadata:s:a:{n}", "title="]
        if mp4_like and audio["codec"] not in MP4_AUDIO:
            log.warning("%s: audio stream #%d (%s) cannot go into %s as is; re-encoding it to AAC",
                        source, audio["index"], audio["codec"], suffix)  # fmt: skip
            codecs += [f"-c:a:{n}", "aac", f"-b:a:{n}", "256k"]
    kept = 0
    for sub in probe.get("subtitles", []) if keep_subtitles else []:
        codec = sub["codec"]
        if mp4_like:
            if codec in TEXT_SUBTITLES:
                target = "mov_text"
            elif codec in MP4_BITMAP_SUBTITLES:
                target = "copy"
            else:
                log.warning(
                    "%s: subtitle stream #%d (%s) cannot go into %s; left out", source, sub["index"], codec, suffix
                )
                continue
        else:
            target = "srt" if codec == "mov_text" else "copy"
        args += ["-map", f"1:{sub['index']}"]
        codecs += [f"-c:s:{kept}", target]
        if mp4_like and sub.get("title"):
            codecs += [f"-metadata:s:s:{kept}", f"handler_name={sub['title']}", f"-metadata:s:s:{kept}", "title="]
        kept += 1
    if not mp4_like and keep_subtitles:
        args += ["-map", "1:t?"]  # fonts and other attachments that styled subtitles rely on
    args += ["-map_chapters", "1", "-map_metadata", "1", *codecs]
    if mp4_like:
        args += ["-movflags", "+faststart"]
        codec, stereo = _video_stream(video_only)
        tag = family_mp4_tag(codec)
        if tag:
            args += ["-tag:v", tag]  # hvc1: Apple and many VR players only play HEVC tagged so in mp4
        if stereo:
            # The stereo packing (from Matroska StereoMode) becomes an st3d box only when unofficial boxes are
            # allowed; without it ffmpeg drops the signalling silently.
            args += ["-strict", "unofficial"]
    args += [str(a) for a in extra_args]
    with atomic_output(out_path) as tmp:
        # The restamping expression grows with the number of frame-rate changes (VFR), past what a command line
        # holds: ffmpeg reads it from a file beside the output (-/ takes an option's value from a file).
        restamp = tmp.with_name(tmp.name + ".bsf")
        try:
            restamp.write_text(_restamp_bsf(probe, _setts_prescales(source, out_path)), encoding="utf-8")
            output = [*BITEXACT, "-f", CONTAINERS[suffix], "-y", ffmpeg_url(tmp)]
            run_ffmpeg([*args, "-/bsf:v", ffmpeg_url(restamp), *output], source, f"muxing into {out_path.name}")
        except (BadVideo, OSError) as exc:
            trouble = _DISK_TROUBLE.search(exc.cause if isinstance(exc, BadVideo) else str(exc))
            if trouble:  # the output's filesystem, not the source, is at fault: say so, naming the output
                raise StereoError(out_path, f"cannot write the result: {trouble.group(0)}") from exc
            raise
        finally:
            restamp.unlink(missing_ok=True)
    return out_path


def _setts_prescales(source: str | Path, out_path: Path) -> bool:
    """Whether this ffmpeg's ``setts`` has ``prescale``; a build too old to restamp at all is a clear error."""
    options = bsf_options("setts", source)
    if "time_base" not in options:
        raise StereoError(out_path, f"cannot mux: the ffmpeg at {ffmpeg_exe()} is too old (its setts bitstream "
                                    "filter has no time_base option; FFmpeg 7.0 or newer is needed)")  # fmt: skip
    return "prescale" in options


def _restamp_bsf(probe: dict, prescale: bool = True) -> str:
    """A ``setts`` bitstream filter (an ``-bsf:v`` value) giving every video packet the exact time of the source
    frame it shows, counted from the source's container start like the source's audio.

    Why: the per-segment renders are Matroska, the one container whose ``StereoMode`` ffmpeg turns into the MP4
    st3d box (an MP4/MOV intermediate reads back as "unspecified" packing and the box is lost), and Matroska
    stores whole milliseconds: 24000/1001, 30000/1001 or 240 fps frames arrive up to 1 ms off (rounded once in
    the segment, once in its concat offset). Restamping while the packets are copied into the result brings
    them back exactly, without decoding: a packet's time since the first packet is snapped to the nearest frame
    of the source's timeline. Exact while that error stays under half a frame interval: up to 500 fps,
    variable frame rate included.

    The timeline is cut into runs of frames of equal duration (one run at a constant frame rate); a balanced
    tree of ``if``s on the time finds the run (a few comparisons a packet, however long the video), and within
    it ``round`` counts whole frame durations. Decode times are snapped the same way: past the first frames they
    are presentation times of earlier frames. The few before the first frame (the B-frame delay) keep their
    distance at the fine time base, so they stay increasing and below every presentation time. Durations become
    the source's, the last frame's included, so the video ends where the source's did. The time base is the
    source's, refined as the MP4 muxer would (doubled up to 10000 ticks a second): every frame time is a whole
    tick there, and a millisecond is several ticks.

    ``prescale``: the build's ``setts`` has that option, which hands the expressions PTS and DTS already in the
    output ticks. Older builds (FFmpeg 7.0) hand them in the input's ticks and take the results in the output's:
    the expressions convert (``TB/TB_OUT``) and round to whole ticks, as the option would.
    """
    video, pts_s = probe["video"], probe["frame_pts_s"]
    if not pts_s:
        raise ValueError("no frame timestamps to restamp with")
    tb = Fraction(video["time_base"])
    den = tb.denominator
    while den < 10000:
        den *= 2
    scale = tb.numerator * (den // tb.denominator)  # output ticks per source tick
    ticks = [round(Fraction(t) / tb) * scale for t in pts_s]  # since the first frame (probe floats of exact ticks)
    last = round((Fraction(video["duration_s"]) - Fraction(pts_s[-1])) / tb) * scale
    if last <= 0:
        last = ticks[-1] - ticks[-2] if len(ticks) > 1 else round(den / Fraction(video["fps_fraction"]))
    # The first frame's place after the container start: ffmpeg counts the source's audio from that start (whole
    # microseconds, as the banner shows it), so the video goes there too and the A/V offset is kept.
    first = round(Fraction(video.get("pts_offset_s", 0.0)) / tb) * tb
    offset = round((first - Fraction(round((probe.get("start_s") or 0.0) * 10**6), 10**6)) * den)

    durations = [b - a for a, b in zip(ticks, ticks[1:], strict=False)] + [last]
    runs: list[list[int]] = []  # [first frame, frames, duration of each]
    for n, step in enumerate(durations):
        if runs and step == runs[-1][2]:
            runs[-1][1] += 1
        else:
            runs.append([n, 1, step])

    def tree(lo: int, hi: int, leaf) -> str:
        if hi - lo == 1:
            return leaf(*runs[lo])
        mid = (lo + hi) // 2
        split = ticks[runs[mid][0] - 1] + ticks[runs[mid][0]]  # twice the time half-way between the two runs
        half = f"{split // 2}.5" if split % 2 else str(split // 2)
        return f"if(lt(ld(0),{half}),{tree(lo, mid, leaf)},{tree(mid, hi, leaf)})"

    def frame_time(n: int, count: int, step: int) -> str:
        if count == 1 or step <= 0:  # the run's one frame (or one time): anything landing in it is that frame
            return str(offset + ticks[n])
        return f"{offset + ticks[n]}+{step}*round((ld(0)-{ticks[n]})/{step})"

    def since_first(ts: str) -> str:  # ld(0): the packet's time since the first packet's PTS, in output ticks
        return f"st(0,{ts}-STARTPTS)" if prescale else f"st(0,round(({ts}-STARTPTS)*TB/TB_OUT))"

    timeline = tree(0, len(runs), frame_time)
    pts = f"{since_first('PTS')};{timeline}"
    dts = f"{since_first('DTS')};if(lt(ld(0),0),{offset}+ld(0),{timeline})"
    duration = f"{since_first('PTS')};{tree(0, len(runs), lambda n, count, step: str(step))}"
    return f"setts=pts='{pts}':dts='{dts}':duration='{duration}':time_base=1/{den}" + (":prescale=1" * prescale)


def _video_stream(path: str | Path) -> tuple[str | None, bool]:
    """Codec name of the first video stream of ``path`` and whether its pictures carry stereo 3D side data."""
    try:
        with av.open(os.fspath(path)) as container:
            stream = container.streams.video[0]
            codec = stream.codec_context.codec.canonical_name
            for frame in container.decode(stream):
                return codec, Type.STEREO3D in frame.side_data
    except (av.FFmpegError, IndexError) as exc:
        raise BadVideo(path, f"reading the encoded video: {getattr(exc, 'strerror', None) or exc}") from exc
    return codec, False
