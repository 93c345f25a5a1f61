"""Depth-image-based rendering: a near map and its frame become left and right views.

Parallax is ``(near - zero_plane) * divergence`` (defined once, in ``Parallax``): pixels nearer than the
zero-parallax plane come out of the screen (the left view shifts them right, the right view left), farther ones go
behind it. Because near maps are normalised inverse depth, this is exactly the parallax of a parallel camera pair
with shifted sensors, so known geometry renders true (tests/test_render_geometry.py).

The warp is a forward splat along rows turned into a backward map, so the image is resampled once (bilinear,
sub-pixel). For the left view a source column ``x`` lands at ``t(x) = x + shift(x)`` and claims target pixel
``round(t)``, with the sub-pixel source position ``round(t) - shift`` as its value. Occlusion is decided without
sorting: a nearer pixel always lies left of any farther pixel landing on the same spot, so a pixel is hidden
exactly when its target is not beyond every target to its left (a running maximum). Target pixels nobody claimed
are disocclusions: they repeat the last claimed pixel to their left, which is the background side for this
direction, never the foreground. The right view is the same computation mirrored.

The near map becomes an int16 fixed-point shift (1/2**bits px) here, that parallax rounded to the grid, then
enlarged (its depth edges put on the picture's: ``stereo3d.stereo.upsample``), dilated and tapered at frame size
(``ShiftRecipe``); the splat and the resampling of each row are ``stereo3d.stereo.splat``, and the hole fill
``stereo3d.stereo.fill``. A ``Renderer`` runs all of it on the CPU's render threads, or on an NVIDIA GPU
(``stereo3d.stereo.cuda``, compiled from the same scalar code), with the same pixels.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, fields, replace
from functools import partial
from typing import TYPE_CHECKING

import cv2
import numpy as np

from stereo3d.defaults import default

if TYPE_CHECKING:  # numba's import stays out of processes that only read StereoSettings (see _splat)
    from stereo3d.stereo.fill import Neighbours

log = logging.getLogger(__name__)

EYES = ("none", "left", "right")
FLOATING_WINDOW = ("auto", "off")
RENDER_DEVICES = ("auto", "cpu", "cuda")
DEPTH_UPSAMPLES = ("edges", "bilinear")
FILLS = ("temporal", "background")

# Frames smaller than this render both eyes in the calling thread (a thread hand-off costs more than it saves).
_PARALLEL_MIN_PIXELS = 256 * 256
# Pixels per band of rows that a view's map is built and applied in on the CPU: the band's map and pixels stay
# in the CPU caches between the splat and the resampling (at 1080p, 2**17 measured best of 2**15 .. a frame).
_BAND_PIXELS = 1 << 17


@dataclass(frozen=True)
class StereoSettings:
    """The renderer's settings: the config's ``render`` keys of the same names (a new field is a new key: its
    schema entry gives its default, its name its place in the render's params and cache key)."""

    divergence_pct: float = default("render.divergence_pct")  # maximum parallax between the eyes, % of the width
    # 0 = everything behind the screen ... 1 = all in front; "auto": per frame, on the subject (a plan over the video,
    # stereo3d.stereo.convergence, gives each frame's number: ``at_plane``; a frame alone: ``for_frame``)
    convergence: float | str = default("render.convergence")
    edge_dilate_px: int = default("render.edge_dilate_px")  # grow foreground sideways: its edges carry full parallax
    ipd_offset_pct: float = default("render.ipd_offset_pct")  # uniform separation, % of width (+ = further back)
    border_taper_pct: float = default("render.border_taper_pct")  # parallax fades to 0 over this % at the border
    original_eye: str = default("render.original_eye")  # left/right: that eye shows the source frame untouched
    # "auto": the render stage masks an eye's edge where in-front content meets it (stereo3d.stereo.window); the
    # Renderer itself draws no window (its widths are planned across frames)
    floating_window: str = default("render.floating_window")
    # How a near map smaller than the frame is enlarged: "edges" puts its depth edges on the picture's edges
    # (stereo3d.stereo.upsample), "bilinear" does not
    depth_upsample: str = default("render.depth_upsample")
    # Disocclusions: "temporal" fills them from the frames around where the render job gives them, then from the
    # background beside them; "background" only from the background beside them (stereo3d.stereo.fill)
    fill: str = default("render.fill")
    fill_frames: int = default("render.fill_frames")  # frames before and after that a disocclusion may be filled from
    front_limit_pct: float = default("render.front_limit_pct")  # auto: the most content comes in front, % width

    def __post_init__(self):
        if self.original_eye not in EYES:
            raise ValueError(f"original_eye must be one of {', '.join(EYES)}, not {self.original_eye!r}")
        if self.floating_window not in FLOATING_WINDOW:
            raise ValueError(f"floating_window must be one of {', '.join(FLOATING_WINDOW)}, "
                             f"not {self.floating_window!r}")  # fmt: skip
        if not 0.0 <= self.border_taper_pct <= 50.0:
            raise ValueError(f"border_taper_pct must lie in 0..50, not {self.border_taper_pct}")
        if self.convergence != "auto" and not (
            isinstance(self.convergence, (int, float)) and 0 <= self.convergence <= 1
        ):
            raise ValueError(f"convergence must be auto or a number in 0..1, not {self.convergence!r}")
        if self.depth_upsample not in DEPTH_UPSAMPLES:
            raise ValueError(f"depth_upsample must be one of {', '.join(DEPTH_UPSAMPLES)}, not {self.depth_upsample!r}")
        if self.fill not in FILLS:
            raise ValueError(f"fill must be one of {', '.join(FILLS)}, not {self.fill!r}")

    def zero_plane(self) -> float:
        """The near value at the screen (``1 - convergence``); ``convergence: auto`` has none of its own."""
        if self.convergence == "auto":
            raise ValueError("convergence auto has no single zero plane: take a plan's (at_plane) or a frame's "
                             "(for_frame)")  # fmt: skip
        return 1.0 - float(self.convergence)

    def at_plane(self, zero_plane: float) -> StereoSettings:
        """These settings with the screen at near value ``zero_plane`` (a convergence plan's frame)."""
        return replace(self, convergence=1.0 - float(zero_plane))

    def for_frame(self, near: np.ndarray) -> StereoSettings:
        """These settings for one frame with ``near`` map: unchanged for a numeric convergence; under ``auto``, the
        screen on that frame's subject alone (no easing: where no plan of the video is at hand)."""
        if self.convergence != "auto":
            return self
        from stereo3d.stereo import convergence

        return self.at_plane(convergence.frame_plane(near, self.divergence_pct, self.front_limit_pct))

    def inside(self, width: int, picture_width: int) -> StereoSettings:
        """The settings that give a picture ``picture_width`` wide, shown inside a frame ``width`` wide (baked-in
        bars kept), the parallax in pixels that these settings give the frame: their percentages are of the width
        the viewer sees, and the picture is rendered on its own."""
        ratio = width / picture_width
        return replace(self, divergence_pct=self.divergence_pct * ratio, ipd_offset_pct=self.ipd_offset_pct * ratio,
                       border_taper_pct=min(50.0, self.border_taper_pct * ratio))  # fmt: skip

    @classmethod
    def from_config(cls, section: dict) -> StereoSettings:
        """The renderer's settings out of a config ``render`` section (other keys, e.g. the layout's, ignored)."""
        return cls(**{f.name: section[f.name] for f in fields(cls) if f.name in section})


@dataclass(frozen=True, eq=False)
class Parallax:
    """The parallax of one frame width, the one definition that both the float QC path (``px``) and the renderer's
    fixed-point shift (``fixed_shift``) evaluate: at column ``x``, in pixels (positive = in front of the screen),

        ``parallax(x, near) = ramp(x) * divergence_px * (near - zero_plane) - ipd_px``

    ``ramp`` (``border_taper_pct``) goes smoothly from 0 at the left and right frame edges to 1 at that distance
    from them: what the frame edge cuts then sits on the screen plane instead of floating in front of a window that
    clips it (a window violation); None where the taper is narrower than a pixel. ``ipd_px``
    (``ipd_offset_pct``) comes after the ramp, a uniform shift of both views: it moves the whole scene, border
    included."""

    divergence_px: float
    zero_plane: float
    ipd_px: float
    ramp: np.ndarray | None

    @classmethod
    def of(cls, settings: StereoSettings, width: int) -> Parallax:
        taper_px = settings.border_taper_pct / 100.0 * width
        return cls(
            divergence_px=settings.divergence_pct / 100.0 * width,
            zero_plane=settings.zero_plane(),
            ipd_px=settings.ipd_offset_pct / 100.0 * width,
            ramp=_border_ramp(width, float(taper_px)) if taper_px >= 1.0 else None,
        )

    def px(self, near: np.ndarray) -> np.ndarray:
        """The parallax of a near map at frame width, float32."""
        parallax = (np.asarray(near, dtype=np.float32) - np.float32(self.zero_plane)) * np.float32(self.divergence_px)
        if self.ramp is not None:
            parallax *= self.ramp
        if self.ipd_px:
            parallax -= np.float32(self.ipd_px)
        return parallax

    def fixed_shift(self, near: np.ndarray, shape: tuple[int, int], edge_dilate_px: int, share: float,
                    frame: np.ndarray | None = None, run: Callable | None = None,
                    parts: int = 1) -> FixedShift:  # fmt: skip
        """``share`` times ``px`` of the near map brought to frame size ``shape`` = (H, W) (bilinear, with its
        depth edges put on ``frame``'s where one is given) with its foreground grown by ``edge_dilate_px`` along
        rows, rounded to the fixed-point grid of that width, computed on the CPU (``shift_recipe``, in ``parts``
        side by side by ``run``)."""
        return self.shift_recipe(near, shape, edge_dilate_px, share, frame is not None).on_cpu(frame, run, parts)

    def shift_recipe(self, near: np.ndarray, shape: tuple[int, int], edge_dilate_px: int, share: float,
                     edges: bool = False) -> ShiftRecipe:  # fmt: skip
        """How ``fixed_shift`` is made, for either device: the near map scaled into fixed-point units at its own
        size here, the rest at frame size by the device (``ShiftRecipe``).

        Dilation comes after resizing: upscaling blurs a depth edge into a ramp, and growing the near side past
        that ramp is what makes the foreground's edge pixels (often a blend of both sides) travel with the
        foreground. The depth term is an increasing linear function of the near map (for a non-negative
        divergence), so it commutes with the resize and with the dilation: scaling the small near map first lets
        both run on int16 at frame size instead of float32 (dilation of float32 at 1080p alone costs ~6 ms).

        Each rounding to the grid is at most half a step off, and the ramp only shrinks an error, so the shift
        lies within half a step per rounding of the exact value (tests/test_render.py measures it): one rounding
        at frame size without a taper, one more for a resize (of rounded values), one more for a taper. The
        taper is not uniform across columns, so it, and the IPD offset after it, come after the resize and the
        dilation, in a rounding of their own; without a taper the IPD offset is a constant, folded into the
        first rounding."""
        bits = _fraction_bits(shape[1])
        unit = share * (1 << bits)  # fixed-point units per pixel of parallax
        gain = self.divergence_px * unit
        ipd = self.ipd_px * unit
        near = np.asarray(near, dtype=np.float32)
        offset = -self.zero_plane * gain - (0.0 if self.ramp is not None else ipd)
        small = cv2.addWeighted(near, gain, near, 0.0, offset, dtype=cv2.CV_16S)  # rounds, saturates
        # Growing the near side of the near map grows the larger side of the shift, or its smaller side when a
        # negative divergence reverses the order.
        return ShiftRecipe(small, tuple(shape), bits, edge_threshold(unit) if edges else None, edge_dilate_px,
                           gain >= 0, self.ramp, np.float32(-ipd))  # fmt: skip


@dataclass(frozen=True, eq=False)
class ShiftRecipe:
    """A view's fixed-point shift map (``FixedShift``) before it is made at frame size ``shape`` = (H, W): ``small``,
    the near map in int16 units of 1/2**``bits`` px at its own size, enlarged bilinearly (``upsample.enlarge``, with
    its depth edges put on the frame's where ``threshold`` is given); grown along rows by ``dilate_px`` (its larger
    side where ``grow``, else its smaller); then, where ``ramp`` is given, multiplied by it per column and
    ``offset`` added (float32, rounded to the grid). The CPU makes it here (``on_cpu``), a GPU in its kernels
    (``stereo3d.stereo.cuda``), with the same values."""

    small: np.ndarray
    shape: tuple[int, int]
    bits: int
    threshold: int | None
    dilate_px: int
    grow: bool
    ramp: np.ndarray | None
    offset: np.float32

    @classmethod
    def of(cls, shift: FixedShift) -> ShiftRecipe:
        """The recipe of a shift map made already: used as it is."""
        return cls(shift.values, shift.values.shape, shift.bits, None, 0, True, None, np.float32(0.0))

    def on_cpu(self, frame: np.ndarray | None = None, run: Callable | None = None, parts: int = 1) -> FixedShift:
        """The shift map, made on the CPU (``frame``: the picture whose edges the depth edges go onto, where the
        recipe has a ``threshold``; the enlargement in ``parts`` side by side by ``run``)."""
        values = self.small
        if values.shape != self.shape:
            values = np.empty(self.shape, np.int16)
            guide = frame if self.threshold is not None else None
            _upsample().enlarge(self.small, values, guide, self.threshold or 0, run, parts)
        if self.dilate_px > 0:
            # Along rows only: parallax is horizontal, so growing the foreground up and down would only move the
            # pixels above and below it sideways with it (bench Q1: +0.26 dB where both eyes see, holes no worse).
            element = np.ones((1, 2 * self.dilate_px + 1), np.uint8)
            values = (cv2.dilate if self.grow else cv2.erode)(values, element)
        if self.ramp is not None:
            tapered = np.multiply(values, self.ramp, dtype=np.float32)
            # OpenCV adds in float32 and rounds half to even, saturating: the GPU's upsample.to_int16 of the same sum.
            values = cv2.addWeighted(tapered, 1.0, tapered, 0.0, float(self.offset), dtype=cv2.CV_16S)
        return FixedShift(values, self.bits)


def edge_threshold(unit: float) -> int:
    """The spread of a cell's four samples, in fixed-point units (``unit`` a pixel of parallax), above which the
    depth edges are put on the picture's (``stereo3d.stereo.upsample.EDGE_PX``)."""
    return abs(int(round(_upsample().EDGE_PX * unit)))


def parallax_px(near: np.ndarray, width: int, settings: StereoSettings) -> np.ndarray:
    """Screen parallax in pixels (positive = in front of the screen) of a near map at frame width (``Parallax``)."""
    return Parallax.of(settings, width).px(near)


def fixed_shift_of_near(near: np.ndarray, shape: tuple[int, int], settings: StereoSettings,
                        share: float) -> FixedShift:  # fmt: skip
    """The left view's shift of a near map (any size) for a frame of ``shape`` = (H, W): ``share`` of the
    parallax, in fixed point (``Parallax.fixed_shift``)."""
    return Parallax.of(settings, shape[1]).fixed_shift(near, shape, settings.edge_dilate_px, share)


def view_shift(frame: np.ndarray, near: np.ndarray, settings: StereoSettings, share: float) -> ShiftRecipe:
    """How the left view's shift for ``frame`` ([H, W, ...]) is made from its ``near`` map (any size):
    ``fixed_shift_of_near``'s, with the map's depth edges put on the frame's edges where ``settings.depth_upsample``
    says so."""
    return Parallax.of(settings, frame.shape[1]).shift_recipe(near, frame.shape[:2], settings.edge_dilate_px, share,
                                                              settings.depth_upsample == "edges")  # fmt: skip


@dataclass(frozen=True)
class FixedShift:
    """A shift map in fixed point: int16 ``values`` in units of 1/2**``bits`` pixel (left-view direction).
    Fixed point from the start makes every full-size pass over it half the bytes of float32, and it is exactly
    what the map resolves anyway. int16 holds +-1023 px at 5 bits (any width up to 2046), +-2047 px at 4 bits:
    far beyond the schema's 10 % divergence plus 5 % IPD offset."""

    values: np.ndarray
    bits: int


class Renderer:
    """Renders views on one device: ``cpu`` (``threads`` render threads, None: every CPU this process may use),
    ``cuda`` (GPU ``device_id``, through numba-cuda: every step on the GPU, the frames' optical flow excepted) or
    ``auto`` (the GPU where numba finds one, else the CPU). A
    GPU asked for and not found, or whose kernels fail their check (``cuda.open_renderer``), falls back to the CPU
    with a warning, as ONNX Runtime's providers do; ``device`` says which one renders. The pixels are the same on
    both. A render job holds one for its video: it keeps the GPU's buffers, the thread pool and each thread's
    scratch arrays from frame to frame.

    With ``threads`` given (the render job passes its own share of the machine; the encoder's threads come on
    top), OpenCV's own pool, which is the process's, is kept to one thread until ``close``: the render threads
    already slice every frame, and a second pool on the same cores only contends (about 10 % of the render's speed
    on 2 cores)."""

    def __init__(self, device: str = "cpu", device_id: int = 0, threads: int | None = None):
        if device not in RENDER_DEVICES:
            raise ValueError(f"unknown render device {device!r} (valid: {', '.join(RENDER_DEVICES)})")
        self._gpu = None  # the CUDA renderer while the device is a GPU
        self.device = self._open(device, device_id)
        self._owns_opencv_threads = threads is not None
        if threads is not None:
            cv2.setNumThreads(1)
        self.threads = max(1, int(threads)) if threads is not None else _usable_cpus()
        # The calling thread works too, so the pool holds ``threads - 1`` workers.
        self._pool = ThreadPoolExecutor(self.threads - 1, thread_name_prefix="render") if self.threads > 1 else None
        self._local = threading.local()  # each thread's scratch arrays (``_workspace``, ``_remap_source``)
        self._buffers: dict = {}  # each view's positions, disocclusions and fill scratch (``_view_maps``)

    def _open(self, device: str, device_id: int) -> str:
        """The device that will render (``cpu`` or ``cuda``), with its GPU renderer kept where it is one."""
        if device == "cpu":
            log.info("rendering on the CPU")
            return "cpu"
        from stereo3d.stereo import cuda

        renderer, reason = cuda.open_renderer(device_id)
        if renderer is not None:
            self._gpu = renderer
            log.info("rendering on %s", renderer.name)
            return "cuda"
        (log.warning if device == "cuda" else log.info)("rendering on the CPU: %s", reason)
        return "cpu"

    def close(self) -> None:
        """Stops the render threads and gives OpenCV its default threads back (if this renderer took them)."""
        if self._pool is not None:
            self._pool.shutdown()
        if self._owns_opencv_threads:
            cv2.setNumThreads(-1)

    def __enter__(self) -> Renderer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def render_stereo(self, frame: np.ndarray, near: np.ndarray, settings: StereoSettings,
                      out: tuple[np.ndarray, np.ndarray] | None = None,
                      neighbours: Neighbours | None = None) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
        """Left and right views (same dtype as ``frame``: uint8, or uint16 for deep sources; ``[H, W, 3]``) of an
        RGB frame and its near map (float, larger = nearer, any size: resized to the frame). ``out``: two arrays
        of the frame's shape and dtype (the halves of a packed frame, say) that the views are rendered into, and
        returned; without it, an eye kept as the original is the frame itself. ``neighbours``: the frames around
        this one that its disocclusions may be filled from (``stereo3d.stereo.fill.FrameWindow``; None: only
        from the background beside them)."""
        height, width = frame.shape[:2]
        # Each eye takes half the parallax, in opposite directions; a lone rendered eye takes all of it.
        settings = settings.for_frame(near)
        share = 0.5 if settings.original_eye == "none" else 1.0
        if settings.fill != "temporal":
            neighbours = None
        shift = view_shift(frame, near, settings, share)
        if settings.original_eye == "none":
            left, right = self.render_views(frame, shift, (False, True), out, neighbours)
            return left, right
        rendered, kept = (1, 0) if settings.original_eye == "left" else (0, 1)
        views = [frame, frame]
        target = None if out is None else (out[rendered],)
        views[rendered] = self.render_views(frame, shift, (rendered == 1,), target, neighbours)[0]
        if out is not None:
            np.copyto(out[kept], frame)
            views[kept] = out[kept]
        return views[0], views[1]

    def warp_view(self, image: np.ndarray, shift: np.ndarray) -> np.ndarray:
        """Forward-warp ``image`` along rows by ``shift`` pixels (larger shift = nearer; positive moves right, as
        in the left view): nearer pixels win, holes are filled from the left (the background side for this
        direction). The shift is taken to the map's resolution, 1/2**bits pixel (1/32 up to 2046 columns)."""
        shift = _fixed_shift(np.asarray(shift, dtype=np.float32))
        return self.render_views(image, ShiftRecipe.of(shift), (False,))[0]

    def render_views(self, image: np.ndarray, recipe: ShiftRecipe, mirrored: tuple[bool, ...],
                     out: tuple[np.ndarray, ...] | None = None,
                     neighbours: Neighbours | None = None) -> list[np.ndarray]:  # fmt: skip
        """One view per entry of ``mirrored`` (False: the left-view direction; True: the right view's, with nearer
        content moving left and holes filled from the right), of an image ``[H, W]`` or ``[H, W, C]``, shifted as
        ``recipe`` says, on this renderer's device, into ``out`` (new arrays if None), with each view's
        disocclusions filled (``stereo3d.stereo.fill``): on the GPU, every step there (``stereo3d.stereo.cuda``);
        on the CPU, in the render threads."""
        image = np.asarray(image)
        if recipe.shape[1] < 2:  # one column: nothing can move
            views = [np.empty_like(image) for _ in mirrored] if out is None else list(out)
            for view in views:
                np.copyto(view, image)
            return views
        if neighbours is not None and not neighbours.count:
            neighbours = None
        if self._gpu is not None:
            return self._gpu.render_views(image, recipe, mirrored, out, neighbours)
        views = [np.empty_like(image) for _ in mirrored] if out is None else list(out)
        shift = recipe.on_cpu(image, *self._side_by_side(image.shape[:2]))
        maps = [self._view_maps(index, shift.values.shape) for index in range(len(mirrored))]
        self._render_on_cpu(image, shift, mirrored, views, maps)
        fills = [_fill().HoleFill(view, holes, positions, image, direction, self._scratch(index, image), neighbours)
                 for index, (view, direction, (positions, holes)) in enumerate(zip(views, mirrored, maps))]  # fmt: skip
        # In slices of rows on every render thread, as the warp's, in the fill's two passes.
        parallel = self._pool is not None and image.size >= 3 * _PARALLEL_MIN_PIXELS
        slices = self._slices(image.shape[0], len(fills), 1, parallel)
        for step in ("gather", "smooth"):
            self._run([(getattr(fill, step), top, bottom) for fill in fills for top, bottom in slices], parallel)
        return views

    def _side_by_side(self, shape: tuple[int, int]) -> tuple[Callable | None, int]:
        """How a frame of ``shape`` splits work that runs in bands (a ``run`` of calls and how many): two bands a
        render thread, or the calling thread alone for small frames."""
        if self._pool is None or shape[0] * shape[1] < _PARALLEL_MIN_PIXELS:
            return None, 1
        return partial(self._run, parallel=True), 2 * self.threads

    def _run(self, calls: list[tuple], parallel: bool) -> None:
        """Runs ``(function, *arguments)`` calls on the render threads (the calling thread takes the first, then
        from the back those no worker has started), or all in the calling thread where ``parallel`` is False or
        there are no workers."""
        if not parallel or self._pool is None:
            for function, *arguments in calls:
                function(*arguments)
            return
        pending = [(self._pool.submit(*call), call) for call in calls[1:]]
        function, *arguments = calls[0]
        function(*arguments)
        # The calling thread then takes, from the back, the calls that no worker has started.
        for job, (function, *arguments) in reversed(pending):
            if job.cancel():
                function(*arguments)
        for job, _ in pending:
            if not job.cancelled():
                job.result()

    def _view_maps(self, index: int, shape: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
        """The source positions (float32 px) and disocclusions (uint8) of view ``index`` at ``shape``, kept from
        frame to frame (fresh frame-sized arrays cost their page faults)."""
        key = ("maps", index, shape)
        if key not in self._buffers:
            self._buffers[key] = (np.empty(shape, np.float32), np.empty(shape, np.uint8))
        return self._buffers[key]

    def _scratch(self, index: int, image: np.ndarray) -> np.ndarray:
        key = ("scratch", index, image.shape, image.dtype)
        if key not in self._buffers:
            self._buffers[key] = np.empty_like(image)
        return self._buffers[key]

    def _render_on_cpu(self, image: np.ndarray, shift: FixedShift, mirrored: tuple[bool, ...],
                       views: list[np.ndarray], maps: list[tuple[np.ndarray, np.ndarray]]) -> None:  # fmt: skip
        """Rows never exchange pixels, so each view is cut into horizontal slices, one job per render thread;
        the splat's compiled code and OpenCV release the GIL, so the slices run side by side. Small frames stay in
        the calling thread: a hand-off costs more than it saves."""
        height, width = shift.values.shape
        source = self._remap_source(image)
        parallel = self._pool is not None and height * width >= _PARALLEL_MIN_PIXELS
        slices = self._slices(height, len(views), _band_rows(width), parallel)
        jobs = [(self._warp_rows, source, shift, view, positions, holes, top, bottom, direction)
                for view, direction, (positions, holes) in zip(views, mirrored, maps)
                for top, bottom in slices]  # fmt: skip
        self._run(jobs, parallel)

    def _slices(self, height: int, views: int, least_rows: int, parallel: bool) -> list[tuple[int, int]]:
        """The slices of rows (top, bottom) that each of ``views`` views is cut into for the render threads: two for
        every thread's share, so that a thread done early takes another (views and rows differ in cost: holes,
        occlusions), none thinner than ``least_rows`` (per-call overhead); the whole frame where not ``parallel``."""
        count = max(1, min(-(-2 * self.threads // views), height // least_rows)) if parallel else 1
        cuts = [round(height * k / count) for k in range(count + 1)]
        return list(zip(cuts, cuts[1:]))

    def _warp_rows(self, source: np.ndarray, shift: FixedShift, out: np.ndarray, positions: np.ndarray,
                   holes: np.ndarray, top: int, bottom: int, mirrored: bool) -> None:  # fmt: skip
        """Rows ``top:bottom`` of one view into ``out`` (and their source positions and disocclusions into
        ``positions`` and ``holes``), a band of rows at a time: the splat's source map (``splat.source_map``), then
        OpenCV's bilinear ``remap``, whose SIMD code resamples about twice as fast as the compiled scalar
        ``splat.sample_pixel`` that a GPU runs (the same pixels: tests/test_render_cuda.py). The row map is the
        band's own row index: the vertical weight is 0, the image is only read along rows."""
        width = shift.values.shape[1]
        rows = min(bottom - top, _band_rows(width))
        work = self._workspace(rows, width)
        source_map = _splat().source_map
        for start in range(top, bottom, rows):
            stop = min(start + rows, bottom)
            n = stop - start
            map_x = positions[start:stop]
            source_map(shift.values, start, mirrored, shift.bits, map_x, holes[start:stop])
            if source.ndim == 3 and out.ndim == 3 and out.shape[2] == 3:
                band = cv2.remap(source[start:stop], map_x, work.map_y[:n], cv2.INTER_LINEAR,
                                 dst=work.rgba(source.dtype)[:n], borderMode=cv2.BORDER_REPLICATE)  # fmt: skip
                cv2.cvtColor(band, cv2.COLOR_RGBA2RGB, dst=out[start:stop])
            else:
                cv2.remap(source[start:stop], map_x, work.map_y[:n], cv2.INTER_LINEAR, dst=out[start:stop],
                          borderMode=cv2.BORDER_REPLICATE)  # fmt: skip

    def _remap_source(self, image: np.ndarray) -> np.ndarray:
        """The image as ``cv2.remap`` resamples it fastest. OpenCV's vectorised float-map remap handles 1 and 4
        channels (8 or 16 bit); 3 channels take a scalar path about 2.5x slower, so RGB goes through RGBA (one
        conversion per frame, shared by both eyes)."""
        if image.ndim == 3 and image.shape[2] == 3:
            # Into a kept buffer of the calling thread: a fresh frame-sized array per frame costs its page faults.
            # The views are finished before render_stereo returns, so the next frame may overwrite it.
            key = (image.shape[:2], image.dtype)
            buffer = self._local.__dict__.get("rgba")
            if buffer is None or buffer[0] != key:
                buffer = (key, np.empty((*image.shape[:2], 4), image.dtype))
                self._local.rgba = buffer
            return cv2.cvtColor(image, cv2.COLOR_RGB2RGBA, dst=buffer[1])
        return np.ascontiguousarray(image)

    def _workspace(self, rows: int, width: int) -> _Workspace:
        spaces = self._local.__dict__.setdefault("spaces", {})
        if (rows, width) not in spaces:
            if len(spaces) >= 4:  # a long-lived renderer meeting many sizes keeps only a few
                spaces.clear()
            spaces[(rows, width)] = _Workspace(rows, width)
        return spaces[(rows, width)]


# --- helpers -------------------------------------------------------------------------------------------------


def _fixed_shift(shift: np.ndarray) -> FixedShift:
    bits = _fraction_bits(shift.shape[1])
    return FixedShift(cv2.addWeighted(shift, float(1 << bits), shift, 0.0, 0.0, dtype=cv2.CV_16S), bits)


def _usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _band_rows(width: int) -> int:
    return max(1, _BAND_PIXELS // width)


class _Workspace:
    """Scratch arrays of one thread for one band size: fresh arrays per band would cost allocations and page
    faults that add up to a good share of the render time at 1080p."""

    def __init__(self, rows: int, width: int):
        self.map_y = np.repeat(np.arange(rows, dtype=np.float32)[:, None], width, axis=1)
        self._rgba: dict[np.dtype, np.ndarray] = {}
        self._shape = (rows, width)

    def rgba(self, dtype: np.dtype) -> np.ndarray:
        """A band of remapped RGBA pixels of this dtype, before it is repacked as RGB."""
        key = np.dtype(dtype)
        if key not in self._rgba:
            self._rgba[key] = np.empty((*self._shape, 4), key)
        return self._rgba[key]


def _splat():
    """The compiled splat, imported when something renders: numba's import (0.3 s) stays out of processes that
    only read ``StereoSettings`` from here, such as the workflow's DAG build."""
    from stereo3d.stereo import splat

    return splat


def _fill():
    from stereo3d.stereo import fill

    return fill


def _upsample():
    from stereo3d.stereo import upsample

    return upsample


def _fraction_bits(width: int) -> int:
    """Sub-pixel bits of the fixed-point shift: at most the 1/32 px that resampling resolves, fewer where 16 bits
    would not hold a position (+1 px) of this width: 5 up to 2046 columns, 4 up to 4093 (so that int16 shifts
    reach far enough, and the views stay those the renderer made before it was compiled)."""
    bits = _splat().POSITION_BITS
    while bits > 1 and (width + 2) << bits > 0xFFFF:
        bits -= 1
    return bits


def _border_ramp(width: int, taper_px: float) -> np.ndarray:
    distance = np.minimum(np.arange(width), np.arange(width)[::-1]).astype(np.float32)
    ramp = np.clip(distance / np.float32(taper_px), 0.0, 1.0)
    return (ramp * ramp * (3.0 - 2.0 * ramp)).astype(np.float32)  # smoothstep: no kink where the taper ends
