"""The render + encode stage: frames and near maps → stereo frames in a layout → an encoded video-only file.

The encoded file carries what players need to recognise the packing (Matroska ``StereoMode``, or the H.264
frame-packing SEI; see ``stereo3d.stereo.layouts``), the source's timestamps (variable frame rate kept), and the
source's bit depth and colour tags (10-bit and HDR stay so). Rotation needs nothing: frames are decoded in display
orientation and written without a display matrix, so nothing rotates them again. Nor do non-square pixels: frames
are decoded at the display size in square pixels, and such a source's output is tagged SAR 1:1 to say so.
"""

from __future__ import annotations

import json
import logging
import shutil
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import numpy as np

from stereo3d.errors import BadVideo, StereoError
from stereo3d.io.atomic import atomic_output
from stereo3d.io.decode import FrameReader
from stereo3d.io.encode import VideoEncoder, resolve_codec
from stereo3d.io.mapstore import CHUNK_FRAMES, MapReader
from stereo3d.io.probe import bit_depth, square_pixels
from stereo3d.io.resume import job_identity
from stereo3d.progress import Progress
from stereo3d.stages.join import concat_video
from stereo3d.stereo.layouts import container_args, encoder_args, get_layout, output_size
from stereo3d.stereo.warp import Renderer, StereoSettings

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
    # Frames per encoded piece (counted from the video's first frame): the most a killed render loses. Each piece
    # starts with a key frame (x264's own interval is 250); at CRF that costs ~1 % of the result's size.
    piece_frames: int = CHUNK_FRAMES

    @classmethod
    def from_config(cls, section: dict) -> EncodeSettings:
        """The encoder's settings out of a config ``encode`` section (other keys ignored)."""
        return cls(**{f.name: section[f.name] for f in fields(cls) if f.name in section})


def render_video(video: str | Path, probe: dict, near: str | Path, out: str | Path, stereo: StereoSettings,
                 layout: str = "full_sbs", encode: EncodeSettings = EncodeSettings(), *,
                 fov_deg: float = 90.0, eye_px: int = 0, renderer: Renderer | None = None) -> dict:  # fmt: skip
    """Render every frame of ``near``'s range (its ``start`` attribute onward) to ``layout`` and encode it, video
    only, to ``out`` (Matroska). ``fov_deg``/``eye_px`` shape the VR180 layout. ``renderer``: where the views
    render (None: the CPU, every thread this process may use). Returns a summary for the log.

    Frames are encoded in pieces of ``encode.piece_frames``, each its own file beside ``out`` until the last is done and
    they are joined without re-encoding: a job killed midway resumes after its last complete piece."""
    info = probe["video"]
    width, height = info["display_width"], info["display_height"]
    get_layout(layout)  # an unknown layout fails before any decoding
    options = {"fov_deg": fov_deg, "eye_px": eye_px}
    renderer = Renderer() if renderer is None else renderer
    codec, pix_fmt = choose_encoder(info, encode)
    deep = bit_depth(pix_fmt) > 8
    out = Path(out)
    extra = [*encoder_args(layout, codec, encode.stereo_signal),
             *container_args(layout, ".mkv", encode.stereo_signal)]  # fmt: skip
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
        log.info("%s: %s %dx%d, %s %s crf %d, %s", Path(video).name, layout, out_w, out_h, codec, pix_fmt,
                 encode.crf, "variable frame rate" if info.get("vfr") else f"{info['fps_fraction']} fps")  # fmt: skip
        identity = job_identity([video, near], layout=layout, options=options, encode=asdict(encode),
                                stereo=asdict(stereo))  # fmt: skip
        pieces = Pieces(out, identity, start, count, encode.piece_frames)
        done = pieces.done()
        if done:
            log.info("%s: resuming the render at frame %d of %d", Path(video).name, start + done, start + count)
        progress = Progress(log, f"render {Path(video).name}", count - done)
        try:
            with FrameReader(video, probe, start=start + done, count=count - done, deep=deep) as frames:
                near_maps = iter(nears.from_frame(done))
                for first, frames_in_piece in pieces.todo():
                    pts_s = None
                    if info.get("vfr"):  # the source's own frame times, counted from the piece's first frame
                        span = probe["frame_pts_s"][first : first + frames_in_piece]
                        pts_s = [t - span[0] for t in span]
                    with VideoEncoder(pieces.path(first), out_w + pad_w, out_h + pad_h, info["fps_fraction"],
                                      codec=codec, crf=encode.crf, preset=encode.preset, pix_fmt=pix_fmt,
                                      extra_args=extra, pts_s=pts_s, depth=16 if deep else 8, color=info,
                                      time_base=info.get("time_base", "1/90000"),
                                      sar=None if square_pixels(info) else "1:1") as encoder:  # fmt: skip
                        for _ in range(frames_in_piece):
                            packed = stereo_frame(renderer, next(frames), next(near_maps), stereo, layout,
                                                  options, (pad_w, pad_h))  # fmt: skip
                            encoder.write(packed, owned=True)
                            progress.advance(1)
        except StereoError:
            pieces.discard()  # a rerun would fail the same way: nothing to resume
            raise
        pieces.join(probe)
    return {"frames": progress.done, "fps": progress.finish(), "size": [out_w + pad_w, out_h + pad_h],
            "codec": codec, "pix_fmt": pix_fmt, "layout": layout}  # fmt: skip


def stereo_frame(renderer: Renderer, frame: np.ndarray, near: np.ndarray, stereo: StereoSettings, layout: str,
                 options: dict, padding: tuple[int, int] = (0, 0)) -> np.ndarray:  # fmt: skip
    """One output frame: the views of ``frame`` packed in ``layout``, then ``padding`` (columns, rows) repeating
    the last column and row. A layout that keeps both views whole has them rendered straight into the packed
    frame (no copy of 2 x 6 MB per 1080p frame)."""
    chosen = get_layout(layout)
    pad_w, pad_h = padding
    if chosen.eyes is None:
        packed = chosen.pack(*renderer.render_stereo(frame, near, stereo), **options)
        return np.pad(packed, ((0, pad_h), (0, pad_w), (0, 0)), mode="edge") if pad_w or pad_h else packed
    height, width = frame.shape[:2]
    out_w, out_h = chosen.size(width, height, **options)
    packed = np.empty((out_h + pad_h, out_w + pad_w, frame.shape[2]), frame.dtype)
    renderer.render_stereo(frame, near, stereo, out=chosen.eyes(packed, width, height))
    packed[:, out_w:] = packed[:, out_w - 1 : out_w]
    packed[out_h:] = packed[out_h - 1 : out_h]
    return packed


class Pieces:
    """The encoded pieces of one render job, in ``.<out name>.partial`` beside ``out`` (with the job's identity,
    so that a rerun continues only its own pieces), joined into ``out`` once all are done."""

    def __init__(self, out: Path, identity: dict, start: int, count: int, size: int):
        self.out, self.start, self.end = out, start, start + count
        self.folder = out.with_name(f".{out.name}.partial")
        # Pieces begin at multiples of ``size`` from the video's first frame, so that segments of a multiple of it
        # cut the video into the very same pieces as one whole-video job: the result's bytes do not depend on it.
        self.firsts = [start, *range((start // size + 1) * size, self.end, size)]
        self.lasts = [*self.firsts[1:], self.end]
        stamp = self.folder / "identity.json"
        wanted = json.dumps(identity, sort_keys=True)
        if not (stamp.is_file() and stamp.read_text(encoding="utf-8") == wanted):
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder.mkdir(parents=True)
            with atomic_output(stamp) as tmp:
                tmp.write_text(wanted, encoding="utf-8")

    def path(self, first: int) -> Path:
        return self.folder / f"{first:08d}.mkv"

    def done(self) -> int:
        """Frames in the complete pieces from the first on (each piece appears only once fully encoded)."""
        finished = 0
        for first, last in zip(self.firsts, self.lasts, strict=True):
            if not self.path(first).is_file():
                break
            finished = last - self.start
        return finished

    def todo(self):
        """(first frame, frame count) of each piece after the complete ones."""
        resume_at = self.start + self.done()
        for first, last in zip(self.firsts, self.lasts, strict=True):
            if first >= resume_at:
                yield first, last - first

    def discard(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)

    def join(self, probe: dict) -> None:
        parts = [self.path(first) for first in self.firsts]
        with atomic_output(self.out) as tmp:
            if len(parts) == 1:
                parts[0].replace(tmp)
            else:
                concat_video(parts, self.firsts, probe, tmp)
        self.discard()


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
