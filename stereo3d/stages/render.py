"""The render + encode stage: frames and near maps → stereo frames in a layout → an encoded video-only file.

The encoded file carries what players need to recognise the packing (Matroska ``StereoMode``, or the H.264
frame-packing SEI; see ``stereo3d.stereo.layouts``), the source's timestamps (variable frame rate kept), and the
source's bit depth and colour tags (10-bit and HDR stay so). Rotation needs nothing: frames are decoded in display
orientation and written without a display matrix, so nothing rotates them again. Nor do non-square pixels: frames
are decoded at the display size in square pixels, and such a source's output is tagged SAR 1:1 to say so.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np

from stereo3d.errors import BadVideo
from stereo3d.io.decode import FrameReader
from stereo3d.io.encode import VideoEncoder, resolve_codec
from stereo3d.io.mapstore import MapReader
from stereo3d.io.probe import bit_depth, square_pixels
from stereo3d.progress import Progress
from stereo3d.stereo.layouts import container_args, encoder_args, get_layout, output_size
from stereo3d.stereo.warp import StereoSettings, render_stereo

log = logging.getLogger(__name__)

H264_ENCODERS = ("libx264", "h264_nvenc")
# The largest side libx264 and libx265 encode (a larger frame fails only once frames arrive, after depth and
# near maps were computed; checked before decoding instead). NVENC's own limit is lower; it falls back.
MAX_SIDE = 16384


@dataclass(frozen=True)
class EncodeSettings:
    codec: str = "libx264"  # libx264 | libx265 | h264_nvenc | hevc_nvenc (NVENC falls back to software)
    crf: int = 18  # x264/x265 CRF, NVENC constant quality (-cq)
    preset: str = "medium"  # x264/x265 preset names; mapped to NVENC p1..p7
    pix_fmt: str = "auto"  # auto: yuv420p for 8-bit sources, yuv420p10le for deeper ones
    deep_codec: str = "libx265"  # replaces an H.264 codec for sources deeper than 8 bits ("same" keeps it)
    stereo_signal: str = "container"  # container (Matroska StereoMode -> MP4 st3d) | sei (H.264 SEI) | none

    @classmethod
    def from_config(cls, section: dict) -> EncodeSettings:
        """The encoder's settings out of a config ``encode`` section (other keys ignored)."""
        return cls(**{f.name: section[f.name] for f in fields(cls) if f.name in section})


def render_video(video: str | Path, probe: dict, near: str | Path, out: str | Path, stereo: StereoSettings,
                 layout: str = "full_sbs", encode: EncodeSettings = EncodeSettings(), *,
                 fov_deg: float = 90.0, eye_px: int = 0) -> dict:  # fmt: skip
    """Render every frame of ``near``'s range (its ``start`` attribute onward) to ``layout`` and encode it, video
    only, to ``out``. ``fov_deg``/``eye_px`` shape the VR180 layout. Returns a summary for the log."""
    info = probe["video"]
    width, height = info["display_width"], info["display_height"]
    get_layout(layout)  # an unknown layout fails before any decoding
    options = {"fov_deg": fov_deg, "eye_px": eye_px}
    codec, pix_fmt = choose_encoder(info, encode)
    deep = bit_depth(pix_fmt) > 8
    out = Path(out)
    extra = [*encoder_args(layout, codec, encode.stereo_signal),
             *container_args(layout, out.suffix, encode.stereo_signal)]  # fmt: skip
    with MapReader(near) as nears:
        start = int(nears.attrs.get("start", 0))
        count = nears.frames
        out_w, out_h = output_size(width, height, layout, **options)
        if max(out_w, out_h) > MAX_SIDE:
            raise BadVideo(
                video,
                f"{layout} frames of {out_w}x{out_h} exceed the encoders' {MAX_SIDE} px limit; "
                "choose a half-size layout (half_sbs, half_tb) for this source",
            )
        pad_w, pad_h = even_padding(out_w, out_h, pix_fmt)
        if pad_w or pad_h:
            log.info("%s: %dx%d frames padded to %dx%d (%s needs even sides; the last column/row is repeated)",
                     Path(video).name, out_w, out_h, out_w + pad_w, out_h + pad_h, pix_fmt)  # fmt: skip
        pts_s = None
        if info.get("vfr"):
            # Keep the source's own frame times, counted from this range's first frame.
            span = probe["frame_pts_s"][start : start + count]
            pts_s = [t - span[0] for t in span]
        log.info("%s: %s %dx%d, %s %s crf %d, %s", Path(video).name, layout, out_w, out_h, codec, pix_fmt,
                 encode.crf, "variable frame rate" if pts_s else f"{info['fps_fraction']} fps")  # fmt: skip
        progress = Progress(log, f"render {Path(video).name}", count)
        with FrameReader(video, probe, start=start, count=count, deep=deep) as frames, \
                VideoEncoder(out, out_w + pad_w, out_h + pad_h, info["fps_fraction"], codec=codec, crf=encode.crf,
                             preset=encode.preset, pix_fmt=pix_fmt, extra_args=extra, pts_s=pts_s,
                             depth=16 if deep else 8, color=info, time_base=info.get("time_base", "1/90000"),
                             sar=None if square_pixels(info) else "1:1") as encoder:  # fmt: skip
            for frame, near_map in zip(frames, nears, strict=True):
                left, right = render_stereo(frame, near_map, stereo)
                packed = get_layout(layout).pack(left, right, **options)
                if pad_w or pad_h:
                    packed = np.pad(packed, ((0, pad_h), (0, pad_w), (0, 0)), mode="edge")
                encoder.write(packed, owned=True)
                progress.advance(1)
    return {"frames": progress.done, "fps": progress.finish(), "size": [out_w + pad_w, out_h + pad_h],
            "codec": codec, "pix_fmt": pix_fmt, "layout": layout}  # fmt: skip


def even_padding(width: int, height: int, pix_fmt: str) -> tuple[int, int]:
    """Columns and rows to add so that ``pix_fmt``'s chroma subsampling fits: 4:2:0 needs even sides, 4:2:2 an
    even width (libx264 refuses odd ones). Padding, not cropping: every source pixel is kept, and since it goes
    on the right/bottom of the packed frame both eyes of SBS and TB layouts stay the same size."""
    if pix_fmt.startswith(("yuv420", "yuvj420", "nv12", "nv21", "p010", "p016")):
        return width % 2, height % 2
    if pix_fmt.startswith(("yuv422", "yuvj422", "nv16", "p210")):
        return width % 2, 0
    return 0, 0


def choose_encoder(info: dict, encode: EncodeSettings) -> tuple[str, str]:
    """(encoder, pixel format) for a source (a probe's ``video`` dict): bit depth kept unless the config names a
    pixel format; H.264 swapped for ``deep_codec`` on deep sources; NVENC checked by a test encode."""
    source_depth = int(info.get("bit_depth") or 8)
    pix_fmt = encode.pix_fmt
    if pix_fmt == "auto":
        pix_fmt = "yuv420p10le" if source_depth > 8 else "yuv420p"
    codec = encode.codec
    deep = bit_depth(pix_fmt) > 8
    if deep and codec in H264_ENCODERS and encode.deep_codec != "same":
        log.info("%d-bit output: %s instead of %s (10-bit H.264 plays on few devices)", source_depth,
                 encode.deep_codec, codec)  # fmt: skip
        codec = encode.deep_codec
    return resolve_codec(codec, pix_fmt), pix_fmt
