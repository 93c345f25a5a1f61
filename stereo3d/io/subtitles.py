"""A subtitle track of the source as pictures: which track to burn in (``subtitles.burn``), its cues (when each is
shown) and each cue drawn once, as a transparent picture of the eye's size.

Text tracks (SubRip, ASS/SSA, WebVTT, MP4 timed text) are drawn by libass through ffmpeg's ``subtitles`` filter,
with their styles and the fonts the file carries; bitmap tracks (Blu-ray PGS, DVD VobSub, DVB) by ffmpeg's own
subtitle decoder, scaled from the size they were authored at. The track is first copied out of the source (with its
fonts and its own times); then one ffmpeg process draws every screen: what is shown between two changes (a cue
starting or ending), every cue shown then in one picture, as a player lays them out together (two speakers' lines
stacked, a sign above the dialogue). Text: over a transparent canvas that has one frame at the middle of each
screen (a concat list of one blank picture). Bitmaps: as the decoder composes the screen at each of its changes,
each screen taking the picture shown at its middle. The frames come back as raw RGBA. A screen is drawn as it looks
at that moment (ASS animations and karaoke are not followed: a 3D subtitle keeps one place and one depth).
"""

from __future__ import annotations

import bisect
import logging
import re
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from stereo3d.errors import BadVideo
from stereo3d.io.ffmpeg import BITEXACT, ffmpeg_command, ffmpeg_exe, ffmpeg_url, last_error_line, run_ffmpeg

log = logging.getLogger(__name__)

TEXT = frozenset({"subrip", "srt", "ass", "ssa", "webvtt", "mov_text", "text"})
BITMAP = frozenset({"hdmv_pgs_subtitle", "dvd_subtitle", "dvb_subtitle"})
CONVERTED = frozenset({"mov_text", "text"})  # text tracks copied out as ASS (Matroska holds none of them as they are)
BURN_CHOICES = ("none", "auto")  # besides a language (eng) or a track's number among the subtitle tracks (0, 1, ...)
# A bitmap cue whose decoder gives no end is shown until the next one, or for this long at most.
LONGEST_CUE_S = 10.0
UNKNOWN_DURATION = 0xFFFFFFFF  # a packet duration that says none is known


@dataclass(frozen=True)
class Cue:
    """One subtitle shown from ``start_s`` to ``end_s`` (the source's own clock, as its frames' times), or one screen
    of them (``screens``): ``group`` numbers the screens that a cue shown across their change joins."""

    start_s: float
    end_s: float
    group: int = 0


def screens(cues: Sequence[Cue]) -> list[Cue]:
    """What the screen shows between two changes: the time cut at every cue's start and end, each piece over which
    one cue or more is shown once, in order (they do not overlap). Consecutive pieces that a cue is shown across share
    a group (a line that stays while another comes and goes), others not (one line after another)."""
    starts = sorted(cue.start_s for cue in cues)
    ends = sorted(cue.end_s for cue in cues)
    changes = sorted({*starts, *ends})
    out: list[Cue] = []
    group = -1
    for start, end in zip(changes, changes[1:]):
        # No change lies inside (start, end): a cue begun by ``start`` and not over by then is shown throughout.
        if bisect.bisect_right(starts, start) - bisect.bisect_right(ends, start) <= 0:
            continue
        spanning = bisect.bisect_left(starts, start) - bisect.bisect_right(ends, start)  # begun before, over after
        if not (out and out[-1].end_s == start and spanning > 0):
            group += 1
        out.append(Cue(start, end, group))
    return out


def choose_track(burn: str | int, tracks: Sequence[dict]) -> dict | None:
    """The track ``subtitles.burn`` names among a probe's ``subtitles`` (None: none asked, or none such): ``auto``
    the one marked default, else the first; a number the track of that rank (from 0); a language the first track
    tagged with it (ISO 639-2 as files tag them: eng, deu; case ignored)."""
    burn = str(burn).strip().lower()
    if burn == "none" or not tracks:
        return None
    if burn == "auto":
        return next((track for track in tracks if track.get("default")), tracks[0])
    if burn.isdigit():
        return tracks[int(burn)] if int(burn) < len(tracks) else None
    return next((track for track in tracks if (track.get("language") or "").lower() == burn), None)


def burnable(track: dict) -> bool:
    """Whether the package can draw this track (text or bitmap subtitles ffmpeg decodes)."""
    return track["codec"] in TEXT or track["codec"] in BITMAP


def cue_pictures(source: str | Path, track: dict, size: tuple[int, int], authored: tuple[int, int],
                 work: str | Path) -> Iterator[tuple[Cue, np.ndarray]]:  # fmt: skip
    """Each screen (``screens``) of ``track`` (a probe's subtitle entry) of ``source`` with its picture: RGBA uint8
    ``[H, W, 4]`` of ``size`` (W, H), the eye's, transparent where nothing is drawn. ``authored``: the frame size
    the track was made for (the source's display size: text styles and bitmaps scale from it). ``work``: a folder
    for the track's copy."""
    if not burnable(track):
        raise BadVideo(source, f"subtitle stream #{track['index']} ({track['codec']}) cannot be drawn into the views")
    work = Path(work)
    copy = work / "track.mkv"
    # The track alone, with the fonts its styles name, at its own times (-copyts: the cues keep the source's clock);
    # MP4's timed text, which Matroska cannot hold as it is, as ASS (its decoder's styling kept).
    codec = ["-c:s", "ass", "-c:t", "copy"] if track["codec"] in CONVERTED else ["-c", "copy"]
    run_ffmpeg(["-y", "-copyts", "-i", ffmpeg_url(source), "-map", f"0:{track['index']}", "-map", "0:t?", *codec,
                *BITEXACT, ffmpeg_url(copy)], source, "copying the subtitle track to burn")  # fmt: skip
    cues = screens(read_cues(copy))
    if not cues:
        return
    if track["codec"] in TEXT:
        yield from _text_pictures(source, track, copy, cues, size, authored, work)
    else:
        yield from _bitmap_pictures(source, track, copy, cues, size)


def _text_pictures(source, track, copy: Path, cues: list[Cue], size, authored, work: Path):
    """Text screens drawn by libass over a transparent canvas with a frame at the middle of each (a concat list of
    one blank picture), in order."""
    import cv2  # (here: the workflow's DAG build reads choose_track from this module, not the rest)

    width, height = size
    blank = work / "blank.png"
    cv2.imwrite(str(blank), np.zeros((height, width, 4), np.uint8))
    canvas = work / "canvas.ffconcat"
    canvas.write_text(_canvas_list(blank, [(cue.start_s + cue.end_s) / 2 for cue in cues]), encoding="utf-8")
    # (The copy's path is the package's own, so that no user's file name needs the filter's escaping.)
    args = ["-y", "-f", "concat", "-safe", "0", "-i", ffmpeg_url(canvas), "-vf",
            f"format=rgba,subtitles=filename={_filter_path(copy)}:alpha=1:original_size={authored[0]}x{authored[1]}",
            "-fps_mode", "passthrough", "-f", "rawvideo", "-pix_fmt", "rgba", "pipe:1"]  # fmt: skip
    black, white = libass_levels(work)
    # The canvas's first frame is its start (time 0), before the first cue's.
    for index, picture in enumerate(_raw_frames(args, size, source, track)):
        if 1 <= index <= len(cues):
            yield cues[index - 1], picture if (black, white) == (0, 255) else _full_range(picture, black, white)


def _bitmap_pictures(source, track, copy: Path, cues: list[Cue], size):
    """Bitmap screens as ffmpeg's decoder composes them (each change a picture of the track's own size, scaled to
    the eye): their times read first, then each screen takes the picture shown at its middle. (Over a canvas, with
    ffmpeg's overlay, a cue's frame came out or not from one run to the next.)"""
    width, height = size
    graph = f"[0:s:0]scale={width}:{height},format=rgba,showinfo"
    times = run_ffmpeg(["-copyts", "-i", ffmpeg_url(copy), "-filter_complex", graph, "-fps_mode", "passthrough", "-f",
                        "null", "-"], source, "reading the times of the bitmap subtitles")  # fmt: skip
    shown = [float(time) for time in re.findall(rb"pts_time:\s*(-?[0-9.]+)", times.stderr)]
    wanted: dict[int, list[Cue]] = {}
    for cue in cues:
        index = bisect.bisect_right(shown, (cue.start_s + cue.end_s) / 2) - 1
        if index >= 0:
            wanted.setdefault(index, []).append(cue)
    args = ["-y", "-copyts", "-i", ffmpeg_url(copy), "-filter_complex", graph, "-fps_mode", "passthrough", "-f",
            "rawvideo", "-pix_fmt", "rgba", "pipe:1"]  # fmt: skip
    for index, picture in enumerate(_raw_frames(args, size, source, track)):
        for cue in wanted.get(index, ()):
            yield cue, picture


def _raw_frames(args: list[str], size: tuple[int, int], source, track) -> Iterator[np.ndarray]:
    """The RGBA frames (of ``size``) an ffmpeg run writes to its standard output, one at a time."""
    width, height = size
    frame_bytes = width * height * 4
    with tempfile.TemporaryFile() as errors:
        process = subprocess.Popen(ffmpeg_command(args), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                   stderr=errors)  # fmt: skip
        try:
            for data in iter(lambda: process.stdout.read(frame_bytes), b""):
                if len(data) != frame_bytes:
                    break
                yield np.frombuffer(data, np.uint8).reshape(height, width, 4)
        finally:
            process.stdout.close()
            returncode = process.wait()
        if returncode:
            errors.seek(0)
            raise BadVideo(source, f"drawing subtitle stream #{track['index']}: {last_error_line(errors.read())}")


# Two squares drawn by libass, white and black, filling known pixels of a 64 x 32 canvas.
_LEVELS_SCRIPT = """[Script Info]
ScriptType: v4.00+
PlayResX: 64
PlayResY: 32

[V4+ Styles]
Format: Name, Fontname, Fontsize, PrimaryColour, OutlineColour, BackColour, Bold, Italic, BorderStyle, Outline, \
Shadow, Alignment, MarginL, MarginR, MarginV
Style: Default,Arial,20,&H00FFFFFF,&H00000000,&H00000000,0,0,1,0,0,7,0,0,0

[Events]
Format: Layer, Start, End, Style, Text
Dialogue: 0,0:00:00.00,0:00:01.00,Default,{\\pos(4,4)\\p1}m 0 0 l 16 0 16 16 0 16
Dialogue: 0,0:00:00.00,0:00:01.00,Default,{\\pos(36,4)\\p1\\c&H000000&}m 0 0 l 16 0 16 16 0 16
"""
_LEVELS: dict[str, tuple[int, int]] = {}


def libass_levels(work: str | Path) -> tuple[int, int]:
    """The code values at which this ffmpeg's ``subtitles`` filter draws black and white on an RGBA canvas: 0 and
    255 up to FFmpeg 7; FFmpeg 9 (the bundled one) draws as for limited-range video, 16 and 235, whatever the
    canvas's range is said to be, which left burnt text grey and its outline dark grey. Asked once per binary, with
    a two-square script drawn in ``work``."""
    binary = ffmpeg_exe()
    if binary not in _LEVELS:
        script = Path(work) / "levels.ass"
        script.write_text(_LEVELS_SCRIPT, encoding="utf-8")
        args = ["-f", "lavfi", "-i", "color=c=black@0:s=64x32:r=1:d=1,format=rgba", "-vf",
                f"subtitles=filename={_filter_path(script)}:alpha=1", "-frames:v", "1", "-f", "rawvideo", "-pix_fmt",
                "rgba", "pipe:1"]  # fmt: skip
        drawn = run_ffmpeg(args, script, "asking ffmpeg how libass draws black and white").stdout
        canvas = np.frombuffer(drawn, np.uint8).reshape(32, 64, 4)
        white, black = int(canvas[12, 12, 0]), int(canvas[12, 44, 0])
        _LEVELS[binary] = (black, white) if white > black else (0, 255)
    return _LEVELS[binary]


def _full_range(picture: np.ndarray, black: int, white: int) -> np.ndarray:
    """An RGBA picture drawn between ``black`` and ``white`` code values, stretched to the whole 0..255."""
    out = picture.copy()
    levels = out[..., :3].astype(np.int32)
    span = white - black
    out[..., :3] = np.clip(((levels - black) * 255 + span // 2) // span, 0, 255)
    return out


def read_cues(path: str | Path) -> list[Cue]:
    """The cues of the one subtitle stream of ``path``, in order: each packet that decodes to something shown is a
    cue from its time, for its duration, or where it has none (bitmap tracks: a set without pictures clears the
    screen) until the next packet, then ``LONGEST_CUE_S`` at most."""
    import av

    events: list[tuple[float, float | None, bool]] = []
    with av.open(str(path)) as container:
        stream = container.streams.subtitles[0]
        for packet in container.demux(stream):
            if packet.pts is None:
                continue
            start = float(packet.pts * packet.time_base)
            # (A DVD track may carry the 32-bit "unknown" as its duration.)
            known = packet.duration and packet.duration < UNKNOWN_DURATION
            until = start + float(packet.duration * packet.time_base) if known else None
            events.append((start, until, len(packet.decode()) > 0))
    events.sort(key=lambda event: event[0])
    cues = []
    for index, (start, end, shows) in enumerate(events):
        if not shows:
            continue
        if end is None:  # shown until the next set, which clears or replaces it
            following = events[index + 1][0] if index + 1 < len(events) else start + LONGEST_CUE_S
            end = min(following, start + LONGEST_CUE_S)
        if end > start:
            cues.append(Cue(start, end))
    return cues


def _canvas_list(blank: Path, times: list[float]) -> str:
    """An ffconcat list of the blank picture with a frame at 0 and at each of ``times`` (ascending), to the
    microsecond: a picture's frames count in its frame rate's units (25 fps by default, which put a frame up to 20 ms
    off its time: outside a screen shorter than that, drawn with what another screen shows)."""
    lines = ["ffconcat version 1.0"]
    previous = 0.0
    for time in [*times, times[-1] + 1.0]:
        duration = max(time - previous, 1e-3)
        lines += [f"file '{blank.as_posix()}'", "option framerate 1000000", f"duration {duration:.6f}"]
        previous = max(time, previous + 1e-3)
    return "\n".join(lines) + "\n"


def _filter_path(path: Path) -> str:
    """A path as a filter option's value (quoted; the package's own folders hold no quote)."""
    text = path.as_posix().replace("\\", "/")
    return "'" + text.replace(":", "\\:") + "'"
