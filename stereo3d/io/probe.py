"""Probe a video with the ffmpeg binary alone (imageio-ffmpeg ships no ffprobe).

Three cheap passes: ``ffmpeg -i`` for the stream list and metadata (the human-readable dump, parsed
defensively), a packet pass (``-c copy -f framecrc``: no decoding) for the exact frame count and every
presentation timestamp, and a one-frame decode to prove the stream decodes at all. The result is a plain,
JSON-serialisable dict (see ``probe_video``), written once per video and read by every later stage.
"""

from __future__ import annotations

import math
import os
import re
import statistics
from fractions import Fraction
from pathlib import Path

from stereo3d.errors import BadVideo
from stereo3d.io.ffmpeg import channel_layouts, ffmpeg_url, last_error_line, pix_fmt_bit_depths, run_ffmpeg

# Rates a real camera or master uses; an average measured through container rounding snaps to one of them.
STANDARD_RATES = tuple(
    Fraction(r)
    for r in (
        "24000/1001", "24", "25", "30000/1001", "30", "48000/1001", "48", "50", "60000/1001", "60",
        "90", "100", "120000/1001", "120", "144", "240", "15", "12", "10", "8", "6",
    )
)  # fmt: skip

_FIELD_ORDERS = {
    "progressive": "progressive",
    "top first": "tt",
    "bottom first": "bb",
    "top coded first (swapped)": "tb",
    "bottom coded first (swapped)": "bt",
}
_STREAM_LINE = re.compile(
    r"^(?P<indent>\s*)Stream #0:(?P<index>\d+)(?:\[[^\]]*\])?(?:\((?P<lang>[^)]*)\))?: (?P<type>\w+): (?P<body>.*)$"
)
_DISCARD_FLAG = 0x4  # AV_PKT_FLAG_DISCARD: the demuxer marks packets an edit list cuts; decoders drop them
# Smaller frames hold no picture to give depth to (1x1 "videos" are cover placeholders of audio files), and
# half-width layouts would leave eyes of a pixel or two: refused at the probe, before any work.
MIN_SIDE = 8


def probe_video(path: str | Path) -> dict:
    """Describe ``path``; raise ``BadVideo`` (file + cause) when it is not a video this workflow can convert.

    Returns ``{"path", "bytes", "container", "duration_s", "start_s", "video": {...}, "frame_pts_s": [...],
    "audio": [...], "subtitles": [...], "attachments", "chapters"}``. ``video["rotation"]`` is the clockwise
    turn a player applies (the legacy ``rotate`` tag's sense); ``width``/``height`` are coded (before rotation),
    ``sar`` the sample aspect ratio ("32:27"; "1:1" where the file gives none), and ``display_width``/
    ``display_height`` the size every later stage works at (``display_size``: square pixels, after rotation).
    ``frame_pts_s`` are the presentation times of every frame in seconds, relative to the first frame and
    ascending; ``video["pts_offset_s"]`` is that first frame's own timestamp in the file, ``video["start_pts_s"]``
    its time after the container start, and ``video["keyframes"]`` the frame indices (presentation order) a
    decoder can start from.
    """
    path = Path(path)
    size = _check_file(path)
    banner = _parse_banner(path, _banner_text(path))
    video_info = _pick_video(path, banner["streams"])
    if min(video_info["width"], video_info["height"]) < MIN_SIDE:
        raise BadVideo(
            path,
            f"frame size {video_info['width']}x{video_info['height']} is too small "
            f"(min {MIN_SIDE}x{MIN_SIDE}): no picture to give depth to",
        )
    ticks, durations, keyframes, time_base = _packet_pass(path, video_info["index"])
    _check_decodes(path, video_info["index"])

    tb = Fraction(time_base)
    first = ticks[0]
    pts_s = [float((t - first) * tb) for t in ticks]
    last_duration = durations[-1] if durations[-1] > 0 else (ticks[-1] - ticks[-2] if len(ticks) > 1 else 0)
    video_duration = (ticks[-1] - first + last_duration) * tb
    rate = _frame_rate(ticks, tb, video_info.get("fps_hint"))
    vfr = _is_vfr(ticks, tb)
    rotation = video_info["rotation"]
    width, height = video_info["width"], video_info["height"]
    display_width, display_height = display_size(width, height, video_info["sar"], rotation)
    if min(display_width, display_height) < MIN_SIDE:
        raise BadVideo(
            path,
            f"display size {display_width}x{display_height} (frame {width}x{height}, SAR {video_info['sar']}) "
            f"is too small (min {MIN_SIDE}x{MIN_SIDE}): no picture to give depth to",
        )
    container_start = banner["start_s"] or 0.0

    video = {
        "index": video_info["index"],
        "codec": video_info["codec"],
        "width": width,
        "height": height,
        "display_width": display_width,
        "display_height": display_height,
        "rotation": rotation,
        "fps": float(rate),
        "fps_fraction": f"{rate.numerator}/{rate.denominator}",
        "time_base": f"{tb.numerator}/{tb.denominator}",
        "frame_count": len(ticks),
        "vfr": vfr,
        "pix_fmt": video_info["pix_fmt"],
        "bit_depth": pix_fmt_bit_depths().get(video_info["pix_fmt"], 8),
        "color_primaries": video_info["color_primaries"],
        "color_transfer": video_info["color_transfer"],
        "color_space": video_info["color_space"],
        "color_range": video_info["color_range"],
        "field_order": video_info["field_order"],
        "sar": video_info["sar"],
        # Frame 0's own timestamp in the file (-copyts), and its distance from the container start: the
        # first addresses frames in a decoder filter, the second keeps A/V offsets when muxing.
        "pts_offset_s": float(first * tb),
        "start_pts_s": round(float(first * tb) - container_start, 6),
        "keyframes": keyframes,
        "duration_s": float(video_duration),
        "title": video_info["title"],
        "language": video_info["language"],
    }
    return {
        "path": os.fspath(path),
        "bytes": size,
        "container": banner["container"],
        "duration_s": banner["duration_s"] if banner["duration_s"] is not None else float(video_duration),
        "start_s": container_start,
        "video": video,
        "frame_pts_s": pts_s,
        "audio": [_audio_entry(s) for s in banner["streams"] if s["type"] == "Audio"],
        "subtitles": [_subtitle_entry(s) for s in banner["streams"] if s["type"] == "Subtitle"],
        "attachments": sum(1 for s in banner["streams"] if s["type"] == "Attachment"),
        "chapters": banner["chapters"],
    }


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


def _banner_text(path: Path) -> str:
    # With no output ffmpeg exits 1 after dumping the input: the dump is what we want, so no check.
    proc = run_ffmpeg(["-i", ffmpeg_url(path)], path, "reading the container", check=False)
    text = proc.stderr.decode("utf-8", "replace")
    if "Input #0" not in text:
        raise BadVideo(path, f"not a readable media file: {last_error_line(text)}")
    return text


def _parse_banner(path: Path, text: str) -> dict:
    lines = text.splitlines()
    container = ""
    duration_s = start_s = None
    streams: list[dict] = []
    chapters = 0
    current: dict | None = None
    section = ""
    for line in lines:
        m = re.match(r"^Input #0, (.*), from '", line)
        if m:
            container = m.group(1)
            continue
        m = re.match(r"^\s*Duration: (\S+?),(?: start: (-?[\d.]+),)?", line)
        if m:
            duration_s = _clock_seconds(m.group(1))
            start_s = float(m.group(2)) if m.group(2) else None
            current = None
            continue
        if re.match(r"^\s*Chapter #\d+:\d+", line):
            chapters += 1
            current = None
            continue
        m = _STREAM_LINE.match(line)
        if m:
            index = int(m.group("index"))
            if any(s["index"] == index for s in streams):  # programs (MPEG-TS) can list a stream twice
                current = None
                continue
            lang = m.group("lang")
            current = {
                "index": index,
                "type": m.group("type"),
                "body": m.group("body"),
                "indent": len(m.group("indent")),
                "language": None if lang in (None, "", "und") else lang,
                "tags": {},
                "side_data": [],
            }
            streams.append(current)
            section = ""
            continue
        if current is None:
            continue
        indent = len(line) - len(line.lstrip())
        if indent <= current["indent"]:
            current = None
            continue
        stripped = line.strip()
        if stripped in ("Metadata:", "Side data:"):
            section = stripped
        elif section == "Metadata:" and ":" in stripped:
            key, _, value = stripped.partition(":")
            current["tags"].setdefault(key.strip().lower(), value.strip())
        elif section == "Side data:":
            current["side_data"].append(stripped)
    if not streams:
        raise BadVideo(path, "no streams found (not a video file?)")
    return {
        "container": container,
        "duration_s": duration_s,
        "start_s": start_s,
        "streams": streams,
        "chapters": chapters,
    }


def _pick_video(path: Path, streams: list[dict]) -> dict:
    videos = [s for s in streams if s["type"] == "Video"]
    # Cover art is a one-picture "video" stream; it is never the picture to convert.
    moving = [s for s in videos if "(attached pic)" not in s["body"]]
    if not moving:
        others = sorted({s["type"].lower() for s in streams})
        if videos:
            raise BadVideo(path, "no video stream (only a cover picture)")
        raise BadVideo(path, f"no video stream (only {', '.join(others)})")
    stream = moving[0]
    parts = _split_top(stream["body"])
    info: dict = {
        "index": stream["index"],
        "codec": parts[0].split()[0] if parts and parts[0] else "unknown",
        "title": stream["tags"].get("title"),
        "language": stream["language"],
        "pix_fmt": "unknown",
        "color_range": None,
        "color_space": None,
        "color_primaries": None,
        "color_transfer": None,
        "field_order": None,
        "sar": "1:1",
        "fps_hint": None,
    }
    size_at = None
    for i, part in enumerate(parts):
        m = re.match(r"^(\d+)x(\d+)\b(.*)$", part)
        if i > 0 and m and size_at is None:
            size_at = i
            info["width"], info["height"] = int(m.group(1)), int(m.group(2))
            sar = re.search(r"SAR (\d+):(\d+)", m.group(3))
            if sar and int(sar.group(1)) > 0 and int(sar.group(2)) > 0:
                info["sar"] = f"{sar.group(1)}:{sar.group(2)}"
        elif re.match(r"^SAR (\d+):(\d+)", part) and size_at is not None:
            sar = re.match(r"^SAR (\d+):(\d+)", part)
            if int(sar.group(1)) > 0 and int(sar.group(2)) > 0:
                info["sar"] = f"{sar.group(1)}:{sar.group(2)}"
        m_fps = re.match(r"^([\d.]+)(k?) (fps|tbr)$", part)
        if m_fps and info["fps_hint"] is None:
            info["fps_hint"] = float(m_fps.group(1)) * (1000 if m_fps.group(2) else 1)
    if size_at is None:
        raise BadVideo(path, f"video stream #{stream['index']} has no picture size (codec {info['codec']})")
    if size_at >= 2:
        _parse_pix_fmt(parts[size_at - 1], info)
    info["rotation"] = _rotation(stream["side_data"])
    return info


def _parse_pix_fmt(part: str, info: dict) -> None:
    """``yuv420p10le(tv, bt2020nc/bt2020/smpte2084, top first)``: format, then range, colour, field order."""
    m = re.match(r"^([\w]+)(?:\((.*)\))?$", part)
    if not m:
        return
    info["pix_fmt"] = m.group(1)
    for item in _split_top(m.group(2) or ""):
        if item in ("tv", "pc"):
            info["color_range"] = item
        elif item in _FIELD_ORDERS:
            info["field_order"] = _FIELD_ORDERS[item]
        elif "/" in item:
            space, primaries, transfer = ([*item.split("/"), None, None])[:3]
            info["color_space"], info["color_primaries"], info["color_transfer"] = (
                _known(space),
                _known(primaries),
                _known(transfer),
            )
        elif re.fullmatch(r"[\w.-]+", item) and info["color_space"] is None:
            # One name means space, primaries and transfer all carry it.
            info["color_space"] = info["color_primaries"] = info["color_transfer"] = _known(item)


def _rotation(side_data: list[str]) -> int:
    for line in side_data:
        m = re.search(r"rotation of (-?[\d.]+) degrees", line, re.IGNORECASE)
        if m:
            counter_clockwise = float(m.group(1))
            return int(round(-counter_clockwise / 90.0)) * 90 % 360
    return 0


def _packet_pass(path: Path, index: int) -> tuple[list[int], list[int], list[int], str]:
    """Every packet's pts (sorted, in the file's own stream ticks), duration and which are key frames
    (as frame indices in presentation order), without decoding."""
    proc = run_ffmpeg(
        [
            "-loglevel",
            "error",
            "-copyts",
            "-i",
            ffmpeg_url(path),
            "-map",
            f"0:{index}",
            "-c",
            "copy",
            "-f",
            "framecrc",
            "-",
        ],
        path,
        "counting video packets",
    )
    time_base = None
    frames: list[tuple[int, int, bool]] = []
    for line in proc.stdout.decode("ascii", "replace").splitlines():
        if line.startswith("#tb 0:"):
            time_base = line.split(":", 1)[1].strip()
            continue
        if line.startswith("#") or not line.strip():
            continue
        fields = [f.strip() for f in line.split(",")]
        if len(fields) < 6:
            continue
        dts, pts, duration = int(fields[1]), int(fields[2]), int(fields[3])
        flags = next((int(f[2:], 16) for f in fields[6:] if f.startswith("F=")), 1)
        if flags & _DISCARD_FLAG:
            continue
        frames.append((pts if pts != -(2**63) else dts, duration, bool(flags & 1)))
    if not frames:
        raise BadVideo(path, f"video stream #{index} has no frames")
    if time_base is None:
        raise BadVideo(path, "counting video packets: ffmpeg reported no time base")
    frames.sort()
    keyframes = [i for i, (_, _, key) in enumerate(frames) if key]
    return [p for p, _, _ in frames], [d for _, d, _ in frames], keyframes or [0], time_base


def _check_decodes(path: Path, index: int) -> None:
    proc = run_ffmpeg(
        [
            "-loglevel", "error", "-i", ffmpeg_url(path),
            "-map", f"0:{index}", "-frames:v", "1", "-f", "framecrc", "-",
        ],
        path,
        "decoding the first frame",
        check=False,
    )  # fmt: skip
    decoded = any(line and not line.startswith("#") for line in proc.stdout.decode("ascii", "replace").splitlines())
    if proc.returncode != 0 or not decoded:
        cause = last_error_line(proc.stderr) if proc.stderr.strip() else "no frame came out"
        raise BadVideo(path, f"video stream #{index} does not decode: {cause}")


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


def _audio_entry(stream: dict) -> dict:
    parts = _split_top(stream["body"])
    sample_rate = channels = layout = None
    for i, part in enumerate(parts):
        m = re.match(r"^(\d+) Hz$", part)
        if m:
            sample_rate = int(m.group(1))
            if i + 1 < len(parts):
                layout_part = parts[i + 1]
                n = re.match(r"^(\d+) channels", layout_part)
                if n:
                    channels = int(n.group(1))
                else:
                    layout = layout_part
                    channels = channel_layouts().get(layout_part)
            break
    return {
        "index": stream["index"],
        "codec": parts[0].split()[0] if parts and parts[0] else "unknown",
        "channels": channels,
        "layout": layout,
        "sample_rate": sample_rate,
        "language": stream["language"],
        "title": _title(stream),
        "default": "(default)" in stream["body"],
    }


def _subtitle_entry(stream: dict) -> dict:
    parts = _split_top(stream["body"])
    return {
        "index": stream["index"],
        "codec": parts[0].split()[0] if parts and parts[0] else "unknown",
        "language": stream["language"],
        "title": _title(stream),
        "default": "(default)" in stream["body"],
        "forced": "(forced)" in stream["body"],
    }


def _title(stream: dict) -> str | None:
    # Matroska says "title"; mp4 says "name" or uses the handler name, unless that is a muxer's default.
    tags = stream["tags"]
    handler = tags.get("handler_name", "")
    if re.search(r"handler|^core media|^iso media|^$", handler, re.IGNORECASE):
        handler = None
    return tags.get("title") or tags.get("name") or handler


def _split_top(text: str) -> list[str]:
    """Split on commas that are not inside parentheses or brackets."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth = max(0, depth - 1)
        elif ch == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    tail = text[start:].strip()
    if tail:
        parts.append(tail)
    return parts


def _known(name: str | None) -> str | None:
    return None if name in (None, "", "unknown", "reserved", "unspecified") else name


def _clock_seconds(text: str) -> float | None:
    m = re.match(r"^(\d+):(\d+):(\d+(?:\.\d+)?)$", text)
    if not m:
        return None
    return int(m.group(1)) * 3600 + int(m.group(2)) * 60 + float(m.group(3))
