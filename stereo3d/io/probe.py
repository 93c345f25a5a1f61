"""Probe a video through PyAV: structured data from FFmpeg's own libraries, never the text ffmpeg prints.

One cheap pass over the file: a demux of the video stream's packets for the frame timeline, decoding only its
first picture, which proves the stream decodes and carries what only a decoded frame holds (the display
matrix, the HDR10 static metadata wherever the file keeps it: see ``stereo3d.io.hdr``). The result is a plain,
JSON-serialisable dict (see ``probe_video``), written once per video and read by every later stage. The decoder
(``stereo3d.io.decode``) is the same FFmpeg, through the same library, so probe and decoder agree on what a frame
is.

The frame timeline is what a player shows: one frame per picture, at its presentation time. A packet is not
always a picture: a zero-byte packet is a repeat marker (AVI writers store a dropped or unchanged frame so; the
picture before stays on screen, so that frame lasts longer), a packet an edit list cuts is decoded only to serve
as a reference, and the packets before the first key frame cannot be decoded at all.
"""

from __future__ import annotations

import math
import os
import re
import statistics
from fractions import Fraction
from pathlib import Path

import av

from stereo3d.errors import BadVideo
from stereo3d.io.hdr import read_hdr10

# Rates a real camera or master uses; an average measured through container rounding snaps to one of them.
# Rates a real camera or master uses; an average measured through container rounding snaps to one of them.
STANDARD_RATES = tuple(
    Fraction(r)
    for r in (
        "24000/1001", "24", "25", "30000/1001", "30", "48000/1001", "48", "50", "60000/1001", "60",
        "90", "100", "120000/1001", "120", "144", "240", "15", "12", "10", "8", "6",
    )
)  # fmt: skip

# Smaller frames hold no picture to give depth to (1x1 "videos" are cover placeholders of audio files), and
# half-width layouts would leave eyes of a pixel or two: refused at the probe, before any work.
MIN_SIDE = 8
# Packets to feed the decoder at most while looking for the first picture (a stream that starts far from a key
# frame, or frame-threaded decoding's delay).
FIRST_PICTURE_PACKETS = 600
# FFmpeg's names of the colour properties, by their ITU-T H.273 code points (libavutil/pixdesc.c).
PRIMARIES = {1: "bt709", 4: "bt470m", 5: "bt470bg", 6: "smpte170m", 7: "smpte240m", 8: "film", 9: "bt2020",
             10: "smpte428", 11: "smpte431", 12: "smpte432", 22: "jedec-p22"}  # fmt: skip
TRANSFERS = {1: "bt709", 4: "gamma22", 5: "gamma28", 6: "smpte170m", 7: "smpte240m", 8: "linear", 9: "log100",
             10: "log316", 11: "iec61966-2-4", 12: "bt1361e", 13: "iec61966-2-1", 14: "bt2020-10",
             15: "bt2020-12", 16: "smpte2084", 17: "smpte428", 18: "arib-std-b67"}  # fmt: skip
SPACES = {0: "gbr", 1: "bt709", 4: "fcc", 5: "bt470bg", 6: "smpte170m", 7: "smpte240m", 8: "ycgco", 9: "bt2020nc",
          10: "bt2020c", 11: "smpte2085", 12: "chroma-derived-nc", 13: "chroma-derived-c", 14: "ictcp"}  # fmt: skip
RANGES = {1: "tv", 2: "pc"}
FIELD_ORDERS = {1: "progressive", 2: "tt", 3: "bb", 4: "tb", 5: "bt"}  # AVFieldOrder


def probe_video(path: str | Path) -> dict:
    """Describe ``path``; raise ``BadVideo`` (file + cause) when it is not a video this workflow can convert.

    Returns ``{"path", "bytes", "container", "duration_s", "start_s", "video": {...}, "frame_pts_s": [...],
    "audio": [...], "subtitles": [...], "attachments", "chapters"}``. ``video["rotation"]`` is the clockwise
    turn a player applies (the legacy ``rotate`` tag's sense); ``width``/``height`` are coded (before rotation),
    ``sar`` the sample aspect ratio ("32:27"; "1:1" where the file gives none), and ``display_width``/
    ``display_height`` the size every later stage works at (``display_size``: square pixels, after rotation).
    ``frame_pts_s`` are the presentation times of every frame in seconds, relative to the first frame and
    ascending; ``video["hdr10"]`` the HDR10 static metadata (``stereo3d.io.hdr.read_hdr10``) or None;
    ``video["pts_offset_s"]`` is that first frame's own timestamp in the file, ``video["start_pts_s"]``
    its time after the container start, ``video["keyframes"]`` the frame indices (presentation order) a
    decoder can start from, and ``video["duration_s"]`` runs to the end of the last frame shown (a repeated
    picture included).
    """
    path = Path(path)
    size = _check_file(path)
    try:
        container = av.open(os.fspath(path), metadata_errors="ignore")
    except av.FFmpegError as exc:
        raise BadVideo(path, f"not a readable media file: {_cause(exc)}") from exc
    with container:
        stream = _pick_video(path, container)
        codec = stream.codec_context
        width, height = codec.width, codec.height
        if not width or not height:
            raise BadVideo(path, f"video stream #{stream.index} has no picture size (codec {_codec_name(stream)})")
        if min(width, height) < MIN_SIDE:
            raise BadVideo(
                path,
                f"frame size {width}x{height} is too small (min {MIN_SIDE}x{MIN_SIDE}): no picture to give depth to",
            )
        timeline = _packet_pass(path, container, stream)
        info = _describe(path, size, container, stream, timeline, timeline["rotation"])
    display_w, display_h = info["video"]["display_width"], info["video"]["display_height"]
    if min(display_w, display_h) < MIN_SIDE:
        raise BadVideo(
            path,
            f"display size {display_w}x{display_h} (SAR {info['video']['sar']}) is too small "
            f"(min {MIN_SIDE}x{MIN_SIDE}): no picture to give depth to",
        )
    return info


def _describe(path: Path, size: int, container, stream, timeline: dict, rotation: int) -> dict:
    codec = stream.codec_context
    ticks, tb = timeline["pts"], timeline["time_base"]
    first = ticks[0]
    pts_s = [float((t - first) * tb) for t in ticks]
    video_duration = (timeline["end"] - first) * tb
    hint = stream.average_rate or stream.guessed_rate or stream.base_rate
    rate = _frame_rate(ticks, tb, float(hint) if hint else None)
    container_start = container.start_time / av.time_base if container.start_time is not None else 0.0
    width, height = codec.width, codec.height
    sar = _sar_text(stream.sample_aspect_ratio or codec.sample_aspect_ratio)
    display_width, display_height = display_size(width, height, sar, rotation)
    pix_fmt = codec.format.name if codec.format is not None else "unknown"
    video = {
        "index": stream.index,
        "codec": _codec_name(stream),
        "width": width,
        "height": height,
        "display_width": display_width,
        "display_height": display_height,
        "rotation": rotation,
        "fps": float(rate),
        "fps_fraction": f"{rate.numerator}/{rate.denominator}",
        "time_base": f"{tb.numerator}/{tb.denominator}",
        "frame_count": len(ticks),
        "vfr": _is_vfr(ticks, tb),
        "pix_fmt": pix_fmt,
        "bit_depth": bit_depth(pix_fmt),
        "color_primaries": PRIMARIES.get(codec.color_primaries),
        "color_transfer": TRANSFERS.get(codec.color_trc),
        "color_space": SPACES.get(codec.colorspace),
        "color_range": RANGES.get(codec.color_range),
        # Mastering display and content light level (stereo3d.io.hdr.read_hdr10), None for a source without them.
        "hdr10": timeline["hdr10"],
        "field_order": FIELD_ORDERS.get(codec.field_order),
        "sar": sar,
        # Frame 0's own timestamp in the file, and its distance from the container start: the first addresses
        # frames for the decoder, the second keeps A/V offsets when muxing.
        "pts_offset_s": float(first * tb),
        "start_pts_s": round(float(first * tb) - container_start, 6),
        "keyframes": timeline["keyframes"],
        "duration_s": float(video_duration),
        "title": _title(stream),
        "language": _language(stream),
    }
    duration = container.duration / av.time_base if container.duration is not None else float(video_duration)
    return {
        "path": os.fspath(path),
        "bytes": size,
        "container": container.format.name,
        "duration_s": duration,
        "start_s": container_start,
        "video": video,
        "frame_pts_s": pts_s,
        "audio": [_audio_entry(s) for s in container.streams.audio],
        "subtitles": [_subtitle_entry(s) for s in container.streams.subtitles],
        "attachments": len(container.streams.attachments),
        "chapters": len(container.chapters()),
    }


def bit_depth(pix_fmt: str) -> int:
    """Bits per component of a pixel format (8 for an unknown one)."""
    try:
        return max(c.bits for c in av.VideoFormat(pix_fmt).components)
    except (ValueError, TypeError):
        return 8


def display_size(width: int, height: int, sar: str, rotation: int = 0) -> tuple[int, int]:
    """The size at which a ``width`` x ``height`` coded picture with sample aspect ratio ``sar`` ("32:27") is shown,
    in square pixels, after a clockwise ``rotation``: the coded height kept, the width scaled by the SAR and
    rounded to the nearest even number (halves up), then the two swapped for 90 and 270 degrees. A 1:1 SAR
    (or a malformed one) keeps the coded size as it is, odd sides included.

    Why this policy (render at the display size, not keep the SAR and tag the output): VR players and many
    headsets ignore SAR tags, so only square pixels look right everywhere; and depth, the warp and the layouts
    all see the picture as it is meant to look. Even, because a 4:2:0 output needs even sides (an odd width
    would be padded with a repeated column) and half-width layouts then halve it exactly. 720x480 at 32:27
    becomes 854x480 (16:9), 1440x1080 at 4:3 becomes 1920x1080, 720x576 at 64:45 becomes 1024x576.
    """
    ratio = _sar_fraction(sar)
    if ratio != 1:
        width = max(2, math.floor(width * ratio / 2 + Fraction(1, 2)) * 2)
    return (height, width) if rotation % 360 in (90, 270) else (width, height)


def square_pixels(video: dict) -> bool:
    """Whether a probe's ``video`` has square pixels (SAR 1:1, or none given): its frames need no scaling."""
    return _sar_fraction(video.get("sar") or "1:1") == 1


def _sar_fraction(sar: str) -> Fraction:
    m = re.fullmatch(r"\s*(\d+)\s*[:/]\s*(\d+)\s*", sar)
    if not m or int(m.group(1)) == 0 or int(m.group(2)) == 0:
        return Fraction(1)
    return Fraction(int(m.group(1)), int(m.group(2)))


def _check_file(path: Path) -> int:
    """Fail early, in plain words, on what ffmpeg would report obscurely."""
    if path.is_symlink() and not path.exists():
        raise BadVideo(path, f"broken symbolic link (points to {os.readlink(path)})")
    if not path.exists():
        raise BadVideo(path, "file not found")
    if path.is_dir():
        raise BadVideo(path, "is a folder, not a video file")
    if not path.is_file():
        raise BadVideo(path, "not a regular file")
    if not os.access(path, os.R_OK):
        raise BadVideo(path, "not readable (permission denied)")
    size = path.stat().st_size
    if size == 0:
        raise BadVideo(path, "empty file (0 bytes)")
    return size


def _frame_rate(ticks: list[int], tb: Fraction, hint: float | None) -> Fraction:
    """Average frame rate as an exact fraction; container rounding is undone by snapping to a standard rate.

    ``hint`` is the rate ffmpeg prints (two decimals, e.g. 29.97): Matroska stores it at nanosecond precision,
    so it tells 30000/1001 from 30 where millisecond timestamps over a short clip cannot.
    """
    if len(ticks) < 2 or ticks[-1] == ticks[0]:
        if hint:
            return _snap(Fraction(hint).limit_denominator(1001), 0.005 / hint, hint)
        return Fraction(25)
    span = (ticks[-1] - ticks[0]) * tb
    average = Fraction(len(ticks) - 1) / span
    # Each timestamp may be off by up to one tick, so the span by two: that bounds the relative error.
    tolerance = float(2 * tb / span) + 1e-6
    return _snap(average, tolerance, hint)


def _snap(rate: Fraction, tolerance: float, hint: float | None) -> Fraction:
    fits = [r for r in STANDARD_RATES if abs(float(r - rate)) / float(r) <= tolerance]
    if hint:
        agreeing = [r for r in fits if abs(float(r) - hint) < 0.006]
        fits = agreeing or fits
    if fits:
        return min(fits, key=lambda r: abs(float(r - rate)))
    return rate.limit_denominator(1001) if rate.denominator > 1001 else rate


def _is_vfr(ticks: list[int], tb: Fraction) -> bool:
    if len(ticks) < 3:
        return False
    deltas = [b - a for a, b in zip(ticks, ticks[1:], strict=False)]
    # Rounding to the time base moves an interval by at most two ticks; a frame rate change moves it more.
    allowance = max(2, math.ceil(0.02 * statistics.median(deltas)))
    return max(deltas) - min(deltas) > allowance


def _pick_video(path: Path, container):
    streams = list(container.streams)
    if not streams:
        raise BadVideo(path, "no streams found (not a video file?)")
    videos = list(container.streams.video)
    # Cover art is a one-picture "video" stream; it is never the picture to convert.
    moving = [s for s in videos if not s.disposition & av.stream.Disposition.attached_pic]
    if not moving:
        if videos:
            raise BadVideo(path, "no video stream (only a cover picture)")
        others = sorted({s.type for s in streams})
        raise BadVideo(path, f"no video stream (only {', '.join(others)})")
    return moving[0]


def _packet_pass(path: Path, container, stream) -> dict:
    """The frame timeline from the stream's packets (see the module docstring), with the first picture decoded
    on the way: every picture's pts (ascending, in the stream's ticks), which frames (indices in presentation
    order) are key frames, where the last frame shown ends, the clockwise turn the first picture's display
    matrix asks for (the legacy ``rotate`` tag's sense), and the first picture's HDR10 static metadata."""
    pictures: list[tuple[int, int, bool]] = []  # pts, duration, key
    end = None
    seen_key = False
    rotation = None
    hdr10 = None
    decoded = 0
    problem = None
    try:
        for packet in container.demux(stream):
            if rotation is None and problem is None and decoded < FIRST_PICTURE_PACKETS:
                decoded += 1
                try:
                    for frame in packet.decode():
                        rotation = int(round(-(frame.rotation or 0) / 90.0)) * 90 % 360
                        hdr10 = read_hdr10(frame)
                        break
                except av.FFmpegError as exc:
                    # Packets before the first key frame cannot decode (a stream cut mid-GOP); from the key frame
                    # on, a decoder error before any picture means the stream does not decode.
                    if seen_key or packet.is_keyframe:
                        problem = exc
            stamp = packet.pts if packet.pts is not None else packet.dts
            if stamp is None:
                continue  # the demuxer's flush marker
            duration = packet.duration or 0
            end = stamp + duration if end is None else max(end, stamp + duration)
            # A discarded key frame still starts decoding: the pictures after it decode, shown or not.
            seen_key = seen_key or (packet.is_keyframe and packet.size > 0)
            if packet.size == 0 or packet.is_discard:
                continue
            if seen_key:  # before the first key frame there is nothing to decode a picture from
                pictures.append((stamp, duration, packet.is_keyframe))
    except av.FFmpegError as exc:
        if not pictures:
            raise BadVideo(path, f"reading video packets: {_cause(exc)}") from exc
        # A file cut off mid-stream: the complete packets before the cut are the video.
    if not pictures:
        raise BadVideo(path, f"video stream #{stream.index} has no frames")
    if rotation is None:
        cause = _cause(problem) if problem is not None else "no frame came out"
        raise BadVideo(path, f"video stream #{stream.index} does not decode: {cause}")
    pictures.sort()
    ticks = [t for t, _, _ in pictures]
    last_duration = pictures[-1][1] or (ticks[-1] - ticks[-2] if len(ticks) > 1 else 1)
    tb = stream.time_base
    end = max(end, ticks[-1] + last_duration)
    if stream.duration and container.duration:
        # Repeat markers after the last picture keep it on screen to the end of the stream, even where the demuxer
        # hands them over as nothing at all (AVI's empty chunks): the stream's own length says where it ends,
        # within the container's.
        start = stream.start_time if stream.start_time is not None else ticks[0]
        limit = round(Fraction(container.duration, av.time_base) / Fraction(tb.numerator, tb.denominator))
        end = max(end, min(start + stream.duration, ticks[0] + limit))
    return {
        "pts": ticks,
        # Frame 0 is always a place to start from: decoding from the beginning of the file reaches it.
        "keyframes": sorted({0} | {i for i, (_, _, key) in enumerate(pictures) if key}),
        "end": end,
        "time_base": Fraction(tb.numerator, tb.denominator),
        "rotation": rotation,
        "hdr10": hdr10,
    }


def _audio_entry(stream) -> dict:
    codec = stream.codec_context
    layout = codec.layout.name if codec.layout is not None else None
    return {
        "index": stream.index,
        "codec": _codec_name(stream),
        "channels": codec.channels,
        "layout": layout,
        "sample_rate": codec.sample_rate,
        "language": _language(stream),
        "title": _title(stream),
        "default": bool(stream.disposition & av.stream.Disposition.default),
    }


def _subtitle_entry(stream) -> dict:
    return {
        "index": stream.index,
        "codec": _codec_name(stream),
        "language": _language(stream),
        "title": _title(stream),
        "default": bool(stream.disposition & av.stream.Disposition.default),
        "forced": bool(stream.disposition & av.stream.Disposition.forced),
    }


def _codec_name(stream) -> str:
    """The codec's own name (``subrip``, ``hdmv_pgs_subtitle``), not the decoder's (``srt``, ``pgssub``)."""
    codec = stream.codec_context.codec
    return codec.canonical_name if codec is not None else "unknown"


def _language(stream) -> str | None:
    language = stream.metadata.get("language")
    return None if language in (None, "", "und") else language


def _title(stream) -> str | None:
    # Matroska says "title"; mp4 says "name" or uses the handler name, unless that is a muxer's default.
    tags = {k.lower(): v for k, v in stream.metadata.items()}
    handler = tags.get("handler_name", "")
    if re.search(r"handler|^core media|^iso media|^$", handler, re.IGNORECASE):
        handler = None
    return tags.get("title") or tags.get("name") or handler


def _sar_text(ratio) -> str:
    if not ratio or ratio.numerator <= 0 or ratio.denominator <= 0:
        return "1:1"
    return f"{ratio.numerator}:{ratio.denominator}"


def _cause(exc: av.FFmpegError) -> str:
    """FFmpeg's reason, without the errno and the file name PyAV adds."""
    return getattr(exc, "strerror", None) or str(exc)
