"""Encoded pieces of one video, one after the other, into one stream without re-encoding.

The render stage joins its resumable pieces with it, the join stage a video's segments."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from stereo3d.io.atomic import temp_path_for
from stereo3d.io.ffmpeg import BITEXACT, ffmpeg_url, run_ffmpeg


def concat_video(
    parts: Sequence[str | Path], starts: Sequence[int], probe: dict, out: str | Path, extra_args: Sequence[str] = ()
) -> None:
    """Write the video streams of ``parts`` (encoded frame ranges beginning at ``starts``), one after the other
    without re-encoding, to ``out`` (Matroska; ``extra_args`` are muxer options)."""
    out = Path(out)
    pts = probe.get("frame_pts_s") or []
    # Each part lasts until the next one's first frame (variable frame rate included). The concat demuxer
    # counts in whole microseconds: durations are differences of the parts' rounded start times, so the
    # rounding never adds up over many parts: each starts within half a microsecond of its first frame (the
    # Matroska parts then round to the millisecond, which the final mux restamps exactly).
    micros = [round(pts[start] * 10**6) for start in starts] if pts else []
    listing = ["ffconcat version 1.0"]
    for index, part in enumerate(parts):
        listing.append(f"file {_quote(ffmpeg_url(Path(part).resolve()))}")
        if index + 1 < len(micros):
            span = micros[index + 1] - micros[index]
            listing.append(f"duration {span // 10**6}.{span % 10**6:06d}")
    concat_list = temp_path_for(out.with_name(out.stem + ".ffconcat"))
    try:
        concat_list.write_text("\n".join(listing) + "\n", encoding="utf-8")
        args = ["-y", "-loglevel", "error", "-f", "concat", "-safe", "0", "-i", ffmpeg_url(concat_list)]
        args += ["-map", "0:v:0", "-c", "copy", *extra_args, *BITEXACT, "-f", "matroska", ffmpeg_url(out)]
        run_ffmpeg(args, out, f"joining {len(parts)} encoded parts")
    finally:
        concat_list.unlink(missing_ok=True)


def _quote(text: str) -> str:
    """ffconcat quoting: single quotes, an embedded quote written as '\\''."""
    return "'" + text.replace("'", "'\\''") + "'"
