"""The render + encode stage: frames and near maps → stereo frames → an encoded video-only file."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from stereo3d.mapstore import MapReader
from stereo3d.progress import Progress
from stereo3d.render import StereoSettings, compose, render_stereo
from stereo3d.video import FrameReader, VideoEncoder

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class EncodeSettings:
    codec: str = "libx264"
    crf: int = 18
    preset: str = "medium"
    pix_fmt: str = "yuv420p"


def render_video(video: str | Path, probe: dict, near: str | Path, out: str | Path, stereo: StereoSettings,
                 layout: str = "full_sbs", encode: EncodeSettings = EncodeSettings()) -> dict:
    """Render every frame of ``near``'s range to ``layout`` and encode it (video only) to ``out``."""
    info = probe["video"]
    width, height = info["display_width"], info["display_height"]
    with MapReader(near) as nears:
        start = int(nears.attrs.get("start", 0))
        out_w, out_h = layout_size(width, height, layout)
        progress = Progress(log, f"render {Path(video).name}", nears.frames)
        with FrameReader(video, probe, start=start, count=nears.frames) as frames, \
                VideoEncoder(out, out_w, out_h, info["fps_fraction"], codec=encode.codec, crf=encode.crf,
                             preset=encode.preset, pix_fmt=encode.pix_fmt) as encoder:
            for frame, near_map in zip(frames, nears, strict=True):
                left, right = render_stereo(frame, near_map, stereo)
                encoder.write(compose(left, right, layout))
                progress.advance(1)
    return {"frames": progress.done, "fps": progress.finish(), "size": [out_w, out_h]}


def layout_size(width: int, height: int, layout: str) -> tuple[int, int]:
    if layout == "full_sbs":
        return 2 * width, height
    raise ValueError(f"unknown layout {layout!r}")
