"""The render + encode stage: frames and near maps → stereo frames in a layout → an encoded video-only file.

The encoded file carries what players need to recognise the packing (Matroska ``StereoMode``, or the H.264
frame-packing SEI; see ``stereo3d.stereo.layouts``), the source's timestamps (variable frame rate kept), the
source's bit depth and colour tags (10-bit and HDR stay so), and its HDR10 static metadata where the encoder can
write it (x265, SVT-AV1; see ``stereo3d.io.hdr``). Rotation needs nothing: frames are decoded in display
orientation and written without a display matrix, so nothing rotates them again. Nor do non-square pixels: frames
are decoded at the display size in square pixels, and such a source's output is tagged SAR 1:1 to say so.

A video with baked-in bars (its depth covers only the picture area, ``stereo3d.stereo.bars``) has the picture
rendered on its own, as views of the picture: its edges stay straight, and nothing of a bar moves. With ``bars:
keep`` the views are put into eyes that hold the source's bars as they are (no parallax: on the screen plane),
and the settings' percentages stay of the whole frame's width; with ``crop`` each eye is the picture alone.
"""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Mapping, Sequence
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from stereo3d.defaults import default
from stereo3d.errors import BadConfig, BadVideo, StereoError
from stereo3d.io.atomic import atomic_output
from stereo3d.io.codecs import get_codec
from stereo3d.io.concat import concat_video
from stereo3d.io.decode import FrameReader
from stereo3d.io.encode import VideoEncoder, VideoStream, automatic_codec, resolve_codec
from stereo3d.io.mapstore import MapReader
from stereo3d.io.probe import bit_depth, square_pixels
from stereo3d.io.resume import job_identity
from stereo3d.progress import Progress
from stereo3d.stereo.bars import Area, paste_bars
from stereo3d.stereo.layouts import container_args, encoder_args, get_layout, output_size
from stereo3d.stereo.subtitles import PlacedCue, SubtitlePlan, burn
from stereo3d.stereo.warp import Renderer, StereoSettings
from stereo3d.stereo.window import apply_floating_window, window_widths

if TYPE_CHECKING:  # numba's import stays out of the workflow's DAG build, which reads RenderSettings from here
    from stereo3d.stereo.fill import Neighbours

log = logging.getLogger(__name__)

# The largest side libx264 and libx265 encode (a larger frame fails only once frames arrive, after depth and
# near maps were computed; checked before decoding instead). Hardware encoders' limits are lower; they fall back.
MAX_SIDE = 16384
# What becomes of baked-in bars (render.bars): kept in both eyes as in the source | cut away | none taken as bars
# (the whole frame is picture: the depth key then names no picture area, so the render never gets one).
BARS = ("keep", "crop", "ignore")
# encode.codec auto: the GPU's encoder where it has one (NVENC), else this one.
AUTO_CODEC, AUTO_SOFTWARE = "auto", "libx264"


@dataclass(frozen=True)
class EncodeSettings:
    """The encoder's settings: the config's ``encode`` keys of the same names, defaults from the schema
    (``encode.container`` is the final mux's alone: rule join)."""

    codec: str = default("encode.codec")  # a row of stereo3d.io.codecs; hardware falls back to software
    crf: int = default("encode.crf")  # the encoder's constant quality (x264/x265/SVT-AV1 CRF, NVENC -cq, ...)
    preset: str = default("encode.preset")  # x264's preset names; each encoder's row maps them onto its own
    pix_fmt: str = default("encode.pix_fmt")  # auto: yuv420p for 8-bit sources, yuv420p10le for deeper ones
    deep_codec: str = default("encode.deep_codec")  # replaces H.264 for sources deeper than 8 bits ("same")
    stereo_signal: str = default("encode.stereo_signal")  # container | sei (H.264 SEI) | none
    # Frames per encoded piece (counted from the video's first frame): the most a killed render loses. Each piece
    # starts with a key frame (x264's own interval is 250); at CRF that costs ~1 % of the result's size.
    piece_frames: int = default("encode.piece_frames")

    @classmethod
    def from_config(cls, section: dict) -> EncodeSettings:
        """The encoder's settings out of a config ``encode`` section (other keys ignored)."""
        return cls(**{f.name: section[f.name] for f in fields(cls) if f.name in section})


@dataclass(frozen=True)
class RenderSettings:
    """The render stage's settings, built once per video from its config sections (``from_sections``): the stereo
    geometry (``StereoSettings``: the ``render`` keys of its fields), the layout and its own options (VR180's field
    of view and eye size), the encoder's settings, and what becomes of baked-in bars (None for a video without
    bars: the setting does not touch it).

    ``params()`` is what the render rules show as their params, by the keys' dotted config names, and what names
    the render's results (``keys.render_key``); ``from_params`` reads it back in the job. A field of
    ``StereoSettings`` or ``EncodeSettings`` is a key of its section: adding one (with its schema entry) adds it to
    the params, the key and the job, with nothing else to change."""

    stereo: StereoSettings = field(default_factory=StereoSettings)
    layout: str = default("render.layout")
    encode: EncodeSettings = field(default_factory=EncodeSettings)
    layout_options: Mapping[str, Any] = field(default_factory=dict)  # config key (render.vr180_fov_deg) -> value
    bars: str | None = None
    # subtitles.burn: the source's subtitle stream drawn into both eyes in depth (None: none), and how far in front
    # of the content under it (% of the width; stereo3d.stereo.subtitles)
    subtitle_stream: int | None = None
    subtitle_margin_pct: float = default("subtitles.margin_pct")

    def __post_init__(self):
        if self.bars is not None and self.bars not in BARS:
            raise ValueError(f"unknown bars {self.bars!r} (valid: {', '.join(BARS)})")

    @classmethod
    def from_sections(cls, sections: dict, bars: bool = False, subtitle_stream: int | None = None) -> RenderSettings:
        """The settings of a video from its config sections (config.yaml with its sheet row over it): ``bars``
        when its picture does not fill its frame (its depth key names the picture area); ``subtitle_stream``: the
        subtitle stream ``subtitles.burn`` chose in it (None: none)."""
        render = sections["render"]
        layout = get_layout(render["layout"])
        return cls(
            stereo=StereoSettings.from_config(render),
            layout=render["layout"],
            encode=EncodeSettings.from_config(sections["encode"]),
            layout_options={f"render.{key}": render[key] for key in sorted(layout.options)},
            bars=render["bars"] if bars else None,
            subtitle_stream=subtitle_stream,
            subtitle_margin_pct=sections.get("subtitles", {}).get("margin_pct", default("subtitles.margin_pct")),
        )

    def params(self) -> dict[str, Any]:
        """``{dotted config key: value}``: the layout, the stereo and encode fields in their order, the bars of a
        video that has them, the subtitle stream burnt in and its margin where there is one, the layout's
        options."""
        burn = {"subtitles.burn_stream": self.subtitle_stream, "subtitles.margin_pct": self.subtitle_margin_pct}
        return {
            "render.layout": self.layout,
            **{f"render.{key}": value for key, value in asdict(self.stereo).items()},
            **{f"encode.{key}": value for key, value in asdict(self.encode).items()},
            **({"render.bars": self.bars} if self.bars is not None else {}),
            **(burn if self.subtitle_stream is not None else {}),
            **self.layout_options,
        }

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> RenderSettings:
        """The inverse of ``params``."""
        section = {key.removeprefix("render."): value for key, value in params.items() if key.startswith("render.")}
        encode = {key.removeprefix("encode."): value for key, value in params.items() if key.startswith("encode.")}
        layout = get_layout(section["layout"])
        return cls(
            stereo=StereoSettings(**{f.name: section[f.name] for f in fields(StereoSettings)}),
            layout=section["layout"],
            encode=EncodeSettings(**{f.name: encode[f.name] for f in fields(EncodeSettings)}),
            layout_options={f"render.{key}": section[key] for key in sorted(layout.options)},
            bars=section.get("bars"),
            subtitle_stream=params.get("subtitles.burn_stream"),
            subtitle_margin_pct=params.get("subtitles.margin_pct", default("subtitles.margin_pct")),
        )

    def pack_options(self) -> dict[str, Any]:
        """The layout's pack/size keywords (``fov_deg``, ``eye_px`` for VR180; none for most)."""
        names = get_layout(self.layout).options
        return {names[key.removeprefix("render.")]: value for key, value in self.layout_options.items()}


@dataclass(frozen=True)
class Piece:
    """One encoded piece: ``frames`` frames from the video's frame ``first``, with their presentation times counted
    from the piece's first frame (``pts_s``) where the source has a variable frame rate."""

    first: int
    frames: int
    pts_s: tuple[float, ...] | None = None


@dataclass(frozen=True)
class RenderPlan:
    """Everything a render job decides before it decodes a frame."""

    layout: str
    options: dict  # the layout's pack/size keywords (fov_deg, eye_px: VR180)
    size: tuple[int, int]  # the packed frame, before padding
    padding: tuple[int, int]  # columns, rows repeated on the right/bottom for the chroma subsampling
    stream: VideoStream  # what the encoder makes of every piece
    start: int  # the job's first frame and its frame count
    count: int
    pieces: tuple[Piece, ...]

    @property
    def deep(self) -> bool:
        """Whether frames are decoded and rendered at 16 bits (for output deeper than 8)."""
        return self.stream.depth == 16


def render_video(video: str | Path, probe: dict, near: str | Path, out: str | Path, settings: RenderSettings, *,
                 renderer: Renderer | None = None, window_near: Sequence[str | Path] = (),
                 picture: Area | None = None, convergence_plan: str | Path | None = None,
                 subtitle_plan: str | Path | None = None) -> dict:  # fmt: skip
    """Render every frame of ``near``'s range (its ``start`` attribute onward) as ``settings`` say (stereo, layout,
    encoder, bars) and encode it, video only, to ``out`` (Matroska). ``renderer``: where the views render (None:
    the CPU, every thread this process may use). ``picture``: the area of the frame the near maps cover (None: the
    whole frame); ``settings.bars`` says what becomes of the rest. Returns a summary for the log.

    With ``floating_window: auto`` the views get a floating window whose widths are planned from the near maps of
    ``near`` and of ``window_near``, the neighbouring segments' stores within the plan's reach
    (``stereo3d.stereo.window``): the same widths as a whole-video job. With ``fill: temporal`` each frame's
    disocclusions are filled from the ``fill_frames`` frames before and after it (``stereo3d.stereo.fill``), read
    across the segment's edges (their near maps from ``window_near``), so a segment fills as a whole-video job
    does. With ``convergence: auto`` each frame takes its screen plane from ``convergence_plan`` (the video's,
    ``stereo3d.stages.convergence_plan``). With ``subtitle_plan`` (``subtitles.burn``: the video's,
    ``stereo3d.stages.subtitle_plan``) its cues are drawn into both eyes in depth.

    Frames are encoded in pieces of ``encode.piece_frames``, each its own file beside ``out`` until the last is done
    and they are joined without re-encoding: a job killed midway resumes after its last complete piece."""
    name = Path(video).name
    stereo, bars = settings.stereo, settings.bars or "keep"
    info = probe["video"]
    if picture is not None and picture.is_full(info["display_width"], info["display_height"]):
        picture = None
    # A renderer of its own is closed at the end (its thread pool, OpenCV's thread count); the caller's is not.
    own = Renderer() if renderer is None else nullcontext(renderer)
    with own as renderer, MapReader(near) as nears:
        view = None if picture is None or bars != "crop" else picture.size
        plan = plan_render(video, probe, int(nears.attrs.get("start", 0)), nears.frames, settings, view)
        if picture is not None:
            log.info("%s: the picture %s is rendered on its own; its bars are %s", name, picture,
                     "cut away" if bars == "crop" else "kept in both eyes as in the source")  # fmt: skip
        plans = [path for path in (convergence_plan, subtitle_plan) if path]
        identity = render_identity(video, [near, *window_near, *plans], settings, plan, picture)
        pieces = Pieces(Path(out), identity, plan.start, plan.count, plan.pieces)
        done = pieces.done()
        if done:
            log.info("%s: resuming the render at frame %d of %d", name, plan.start + done, plan.start + plan.count)
        # The views are of the picture: inside kept bars with the frame's percentages, or cropped as the frame.
        kept = picture if bars != "crop" else None
        if kept is not None:
            stereo = stereo.inside(info["display_width"], picture.width)
        plane_at = plane_at_frames(convergence_plan, stereo, near, float(info["fps"]))
        subtitles = SubtitlePlan.load(subtitle_plan) if subtitle_plan else None
        windows = None
        if stereo.floating_window == "auto":
            windows = iter(_window_widths(name, near, window_near, plan, info, picture, stereo, plane_at)[done:])
        reach = stereo.fill_frames if stereo.fill == "temporal" else 0
        # The frames before the job's that fill its first frames' holes, and after its last: as far as the near
        # maps at hand reach (the workflow hands a segment its neighbours' within reach; a job without them fills
        # from its own frames alone).
        low, high = covered_frames([near, *window_near], plan.start, plan.start + plan.count)
        first = max(low, plan.start + done - reach)
        end = min(high, plan.start + plan.count + reach)
        progress = Progress(log, f"render {name}", plan.count - done)
        try:
            with FrameReader(video, probe, start=first, count=end - first, deep=plan.deep) as frames:
                maps = near_frames([near, *window_near], first, end)
                items = _with_neighbours(range(first, end), frames, maps, reach, plan.start + done,
                                         plan.start + plan.count, picture if bars != "crop" else None,
                                         picture if bars == "crop" else None)  # fmt: skip
                render_pieces(plan, pieces, items, stereo, renderer, progress, kept, windows, plane_at, subtitles)
        except StereoError:
            pieces.discard()  # a rerun would fail the same way: nothing to resume
            raise
        pieces.join(probe)
    width, height = plan.stream.width, plan.stream.height
    return {"frames": progress.done, "fps": progress.finish(), "size": [width, height],
            "codec": plan.stream.codec, "pix_fmt": plan.stream.pix_fmt, "layout": settings.layout}  # fmt: skip


def render_identity(video: str | Path, maps: Sequence[str | Path], settings: RenderSettings, plan: RenderPlan,
                    picture: Area | None) -> dict:  # fmt: skip
    """What a render job's pieces are stored under (``stereo3d.io.resume``), so that a rerun continues only its own
    pieces: its inputs (its near maps, the neighbours' that plan the window and fill the holes, the convergence
    plan: pieces rendered under older ones are not continued) and its settings."""
    crop = {} if picture is None else {"picture": picture.as_list(), "bars": settings.bars or "keep"}
    return job_identity([video, *maps], layout=settings.layout, options=plan.options, encode=asdict(settings.encode),
                        stereo=asdict(settings.stereo), **crop)  # fmt: skip


def covered_frames(stores: Sequence[str | Path], first: int, end: int) -> tuple[int, int]:
    """The unbroken range of video frames around ``first .. end - 1`` that the near-map ``stores`` hold."""
    spans = []
    for path in stores:
        with MapReader(path) as reader:
            start = int(reader.attrs.get("start", 0))
            spans.append((start, start + reader.frames))
    low, high = first, end
    for _ in range(len(spans)):  # widen by each adjoining store (a handful)
        for start, stop in spans:
            if start < low <= stop:
                low = start
            if start <= high < stop:
                high = stop
    return low, high


def near_frames(stores: Sequence[str | Path], first: int, end: int):
    """The near maps of video frames ``first .. end - 1``, in order, from the ``stores`` that hold them (each
    store's ``start`` attribute places it: the job's own and its neighbours'), read a chunk at a time."""
    readers = []
    try:
        for path in stores:
            reader = MapReader(path)
            readers.append((int(reader.attrs.get("start", 0)), reader))
        index = first
        for start, reader in sorted(readers, key=lambda item: item[0]):
            if index >= end or not start <= index < start + reader.frames:
                continue
            for near in reader.from_frame(index - start):
                if index == end:
                    break
                yield near
                index += 1
        if index < end:
            raise ValueError(f"no near map store holds frame {index} (stores: {', '.join(map(str, stores))})")
    finally:
        for _, reader in readers:
            reader.close()


def _with_neighbours(indices, frames, maps, reach: int, first: int, end: int, kept: Area | None,
                     cropped: Area | None):  # fmt: skip
    """``(frame, near map, neighbours)`` of every video frame ``first .. end - 1``, from the frames and near maps
    of ``indices`` (which reach ``reach`` frames past both ends where the video has them). The neighbours are of
    the picture that is rendered (the area the near maps cover, ``kept`` inside its bars or ``cropped``); the frame
    handed on is the whole frame where its bars are kept (they are pasted back), else the picture."""
    from stereo3d.stereo.fill import windowed

    whole: dict[int, np.ndarray] = {}

    def pictures():
        for index, frame, near in zip(indices, frames, maps):
            whole[index] = frame
            area = kept or cropped
            yield index, frame if area is None else area.cut(frame), near

    for index, picture, near, neighbours in windowed(pictures(), reach, first, end):
        for old in [key for key in whole if key < index]:
            del whole[old]  # frames only a neighbour of others
        yield (whole.pop(index) if kept is not None else picture), near, neighbours


def plane_at_frames(convergence_plan: str | Path | None, stereo: StereoSettings, near: str | Path, fps: float):
    """Video frame -> its zero plane under ``convergence: auto`` (else None: the settings' own): the video's plan,
    or, where a job has none (the preview's clips), a plan over the job's own near maps, as one shot."""
    if stereo.convergence != "auto":
        return None
    if convergence_plan is not None:
        with np.load(convergence_plan) as data:
            first, planes = int(data["first"]), np.asarray(data["zero_plane"])
    else:
        from stereo3d.stages.convergence_plan import plan_of_store

        first, planes = plan_of_store(near, fps, stereo.divergence_pct, stereo.front_limit_pct)

    def plane_at(index: int) -> float:
        return float(planes[min(max(index - first, 0), len(planes) - 1)])

    return plane_at


def _window_widths(name: str, near: str | Path, window_near: Sequence[str | Path], plan: RenderPlan, info: dict,
                   picture: Area | None, stereo: StereoSettings, plane_at=None) -> np.ndarray:  # fmt: skip
    """The floating window's (left, right) widths for each frame of the job, planned over its reach."""
    width = info["display_width"] if picture is None else picture.width
    widths = window_widths([near, *window_near], plan.start, plan.count, width, stereo, float(info["fps"]), plane_at)
    log.info("%s: floating window on %d of %d frames, up to %.1f px", name, int((widths.max(axis=1) > 0).sum()),
             plan.count, float(widths.max(initial=0.0)))  # fmt: skip
    return widths


def plan_render(video: str | Path, probe: dict, start: int, count: int, settings: RenderSettings,
                view: tuple[int, int] | None = None) -> RenderPlan:  # fmt: skip
    """The render of frames ``start`` .. ``start + count`` of ``video`` as ``settings`` say: the frame size, the
    encoder and its pixel format, the padding, the pieces and their frame times. ``view``: the size of each eye's
    view where it is not the frame's (the picture alone, its bars cropped away). Decides from the probe and the
    settings alone (a hardware encoder is tried by a one-frame test encode, once per process); an unknown layout, a
    frame too large to encode or a pixel format the encoder cannot take fail here, before any decoding."""
    info = probe["video"]
    layout, encode, options = settings.layout, settings.encode, settings.pack_options()
    get_layout(layout)
    codec, pix_fmt = choose_encoder(info, encode)
    out_w, out_h = output_size(*(view or (info["display_width"], info["display_height"])), layout, **options)
    if max(out_w, out_h) > MAX_SIDE:
        raise BadVideo(
            video,
            f"{layout} frames of {out_w}x{out_h} exceed the encoders' {MAX_SIDE} px limit; "
            "choose a half-size layout (half_sbs, half_tb) for this source",
        )
    pad_w, pad_h = even_padding(out_w, out_h, pix_fmt)
    name = Path(video).name
    if pad_w or pad_h:
        log.info("%s: %dx%d frames padded to %dx%d (%s needs even sides; the last column/row is repeated)",
                 name, out_w, out_h, out_w + pad_w, out_h + pad_h, pix_fmt)  # fmt: skip
    log.info("%s: %s %dx%d, %s %s crf %d, %s", name, layout, out_w, out_h, codec, pix_fmt, encode.crf,
             "variable frame rate" if info.get("vfr") else f"{info['fps_fraction']} fps")  # fmt: skip
    if info.get("hdr10") and get_codec(codec).hdr10 is None:
        log.warning("%s: %s cannot write the source's HDR10 metadata (mastering display, content light level); "
                    "players will use their defaults for it (libx265 or libsvtav1 keep it)", name, codec)  # fmt: skip
    extra = [*encoder_args(layout, codec, encode.stereo_signal),
             *container_args(layout, ".mkv", encode.stereo_signal)]  # fmt: skip
    stream = VideoStream(
        out_w + pad_w, out_h + pad_h, info["fps_fraction"], codec, encode.crf, encode.preset, pix_fmt,
        depth=16 if bit_depth(pix_fmt) > 8 else 8, color=info, time_base=info.get("time_base", "1/90000"),
        sar=None if square_pixels(info) else "1:1", extra_args=tuple(extra),
    )  # fmt: skip
    times = probe["frame_pts_s"] if info.get("vfr") else None
    pieces = tuple(
        Piece(first, frames, None if times is None else piece_times(times, first, frames))
        for first, frames in piece_ranges(start, count, encode.piece_frames)
    )
    return RenderPlan(layout, options, (out_w, out_h), (pad_w, pad_h), stream, start, count, pieces)


def piece_ranges(start: int, count: int, size: int) -> list[tuple[int, int]]:
    """(first frame, frame count) of each piece of frames ``start`` .. ``start + count``.

    Pieces begin at multiples of ``size`` from the video's first frame, so that segments of a multiple of it cut
    the video into the very same pieces as one whole-video job: the result's bytes do not depend on it."""
    end = start + count
    firsts = [start, *range((start // size + 1) * size, end, size)]
    return [(first, last - first) for first, last in zip(firsts, [*firsts[1:], end], strict=True)]


def piece_times(pts_s: list[float], first: int, frames: int) -> tuple[float, ...]:
    """The source's own frame times of a piece, counted from the piece's first frame."""
    span = pts_s[first : first + frames]
    return tuple(t - span[0] for t in span)


def render_pieces(plan: RenderPlan, pieces: Pieces, items, stereo: StereoSettings, renderer: Renderer,
                  progress: Progress, picture: Area | None = None, windows=None, plane_at=None,
                  subtitles: SubtitlePlan | None = None) -> None:  # fmt: skip
    """Render and encode each piece not yet done, from ``items`` (``(frame, near map, neighbours)``, from the first
    such piece's first frame), ``windows``, the floating window's (left, right) widths (None: no window),
    ``plane_at`` (video frame -> zero plane under ``convergence: auto``) and ``subtitles`` (the cues burnt in);
    each piece appears under its name only once complete. ``picture``: the area of the frames that is rendered, its
    bars kept (None: the whole frame)."""
    items = iter(items)
    for piece in pieces.todo():
        with VideoEncoder(pieces.path(piece.first), plan.stream, pts_s=piece.pts_s) as encoder:
            for index in range(piece.first, piece.first + piece.frames):
                window = (0.0, 0.0) if windows is None else tuple(next(windows))
                frame, near, neighbours = next(items)
                settings = stereo if plane_at is None else stereo.at_plane(plane_at(index))
                cues = subtitles.at(index) if subtitles is not None else ()
                packed = stereo_frame(renderer, frame, near, settings, plan.layout, plan.options, plan.padding,
                                      picture, window, neighbours, out=encoder.frame_buffer(), cues=cues)  # fmt: skip
                encoder.write(packed, owned=True)
                progress.advance(1)


def stereo_frame(renderer: Renderer, frame: np.ndarray, near: np.ndarray, stereo: StereoSettings, layout: str,
                 options: dict, padding: tuple[int, int] = (0, 0), picture: Area | None = None,
                 window: tuple[float, float] = (0.0, 0.0), neighbours: Neighbours | None = None,
                 out: np.ndarray | None = None, cues: Sequence[PlacedCue] = ()) -> np.ndarray:  # fmt: skip
    """One output frame: the views of ``frame`` (``stereo_views``, with ``cues`` burnt in) packed in ``layout``,
    then ``padding`` (columns, rows) repeating the last column and row. A layout that keeps both views whole has
    them rendered straight into the packed frame (no copy of 2 x 6 MB per 1080p frame): ``out`` where given (an
    array of the packed frame's shape and dtype, e.g. the encoder's ``frame_buffer``), else a new one."""
    chosen = get_layout(layout)
    pad_w, pad_h = padding
    height, width = frame.shape[:2]
    if chosen.eyes is None:
        packed = chosen.pack(*stereo_views(renderer, frame, near, stereo, picture, window, neighbours=neighbours,
                                           cues=cues), **options)  # fmt: skip
        return np.pad(packed, ((0, pad_h), (0, pad_w), (0, 0)), mode="edge") if pad_w or pad_h else packed
    out_w, out_h = chosen.size(width, height, **options)
    shape = (out_h + pad_h, out_w + pad_w, frame.shape[2])
    if out is not None and (out.shape != shape or out.dtype != frame.dtype):
        raise ValueError(f"the packed frame is {frame.dtype} {shape}, not {out.dtype} {out.shape}")
    packed = np.empty(shape, frame.dtype) if out is None else out
    eyes = chosen.eyes(packed, width, height)
    stereo_views(renderer, frame, near, stereo, picture, window, out=eyes, neighbours=neighbours, cues=cues)
    packed[:, out_w:] = packed[:, out_w - 1 : out_w]
    packed[out_h:] = packed[out_h - 1 : out_h]
    return packed


def stereo_views(renderer: Renderer, frame: np.ndarray, near: np.ndarray, stereo: StereoSettings,
                 picture: Area | None = None, window: tuple[float, float] = (0.0, 0.0),
                 out: tuple[np.ndarray, np.ndarray] | None = None, neighbours: Neighbours | None = None,
                 cues: Sequence[PlacedCue] = ()) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """The left and right views of ``frame`` (into ``out``, two arrays of its shape, or new ones; without ``out``
    an eye kept as the original may be ``frame`` itself), in three steps: the views of the picture (the whole frame,
    or the ``picture`` area that ``near`` covers inside bars that are kept, rendered from its area of ``frame`` into
    its area of each eye); the floating ``window`` at the picture's edges (px masked at the left view's left edge,
    the right view's right edge: ``window.apply_floating_window``); then the frame's bars pasted around the
    picture as they are; last, the subtitle ``cues`` of the frame, in depth, over each eye (``burn``)."""
    if picture is None:
        views = renderer.render_stereo(frame, near, stereo, out=out, neighbours=neighbours)
        if any(window) or cues:
            views = tuple(view.copy() if view is frame else view for view in views)  # the frame is not drawn on
            apply_floating_window(*views, *window)
            burn(views, cues)
        return views
    eyes = out if out is not None else (np.empty_like(frame), np.empty_like(frame))
    inner = (picture.cut(eyes[0]), picture.cut(eyes[1]))
    renderer.render_stereo(picture.cut(frame), near, stereo, out=inner, neighbours=neighbours)
    if any(window):
        apply_floating_window(*inner, *window)
    for eye in eyes:
        paste_bars(eye, frame, picture)
    burn(eyes, cues)
    return eyes


class Pieces:
    """The encoded pieces of one render job, in ``.<out name>.partial`` beside ``out`` (with the job's identity,
    so that a rerun continues only its own pieces), joined into ``out`` once all are done."""

    def __init__(self, out: Path, identity: dict, start: int, count: int, plan: tuple[Piece, ...]):
        self.out, self.start, self.end = out, start, start + count
        self.folder = out.with_name(f".{out.name}.partial")
        self.plan = plan
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
        for piece in self.plan:
            if not self.path(piece.first).is_file():
                break
            finished = piece.first + piece.frames - self.start
        return finished

    def todo(self) -> list[Piece]:
        """The pieces after the complete ones."""
        resume_at = self.start + self.done()
        return [piece for piece in self.plan if piece.first >= resume_at]

    def discard(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)

    def join(self, probe: dict) -> None:
        parts = [self.path(piece.first) for piece in self.plan]
        with atomic_output(self.out) as tmp:
            if len(parts) == 1:
                parts[0].replace(tmp)
            else:
                concat_video(parts, [piece.first for piece in self.plan], probe, tmp)
            # Before the output appears: a kill after it would leave the pieces for good (Snakemake does not come
            # back for an output it finds whole); a kill before leaves no output, and the rerun starts again.
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
    pixel format; H.264 swapped for ``deep_codec`` on deep sources; a hardware encoder checked by a test encode."""
    source_depth = int(info.get("bit_depth") or 8)
    pix_fmt = encode.pix_fmt
    if pix_fmt == "auto":
        pix_fmt = "yuv420p10le" if source_depth > 8 else "yuv420p"
    # auto is libx264 to every check here (NVENC's H.264 and HEVC take what x264 and x265 take), and the GPU's
    # encoder of the chosen family once the checks pass, where it works; the frame-packing SEI is x264's alone.
    automatic = encode.codec == AUTO_CODEC
    codec = get_codec(AUTO_SOFTWARE if automatic else encode.codec)
    if bit_depth(pix_fmt) > 8 and codec.family == "h264" and encode.deep_codec != "same":
        log.info("%d-bit output: %s instead of %s (10-bit H.264 plays on few devices)", source_depth,
                 encode.deep_codec, codec.name)  # fmt: skip
        codec = get_codec(encode.deep_codec)
    if pix_fmt not in codec.pix_fmts:
        # Checked on the configured encoder, not on what a machine without its hardware falls back to: the same
        # config must not work on one machine and fail on another.
        raise BadConfig(None, f"encode.pix_fmt: {codec.name} cannot encode {pix_fmt} "
                              f"(it takes {', '.join(codec.pix_fmts)})")  # fmt: skip
    if automatic and codec.hardware is None and encode.stereo_signal != "sei":
        return automatic_codec(codec.name, pix_fmt), pix_fmt
    return resolve_codec(codec.name, pix_fmt), pix_fmt
