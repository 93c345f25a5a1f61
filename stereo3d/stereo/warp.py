"""Depth-image-based rendering: a near map and its frame become left and right views.

Parallax is ``(near - zero_plane) * divergence``: pixels nearer than the zero-parallax plane come out of the
screen (the left view shifts them right, the right view left), farther ones go behind it. Because near maps are
normalised inverse depth, this is exactly the parallax of a parallel camera pair with shifted sensors, so known
geometry renders true (tests/test_render_geometry.py).

The warp is a forward splat along rows turned into a backward map, so OpenCV resamples the image once (bilinear,
sub-pixel). For the left view a source column ``x`` lands at ``t(x) = x + shift(x)`` and claims target pixel
``round(t)``, with the sub-pixel source position ``round(t) - shift`` as its value. Occlusion is decided without
sorting: a nearer pixel always lies left of any farther pixel landing on the same spot, so a pixel is hidden
exactly when its target is not beyond every target to its left (a running maximum; it only needs a window as
wide as the parallax range). Target pixels nobody claimed are disocclusions: they repeat the last claimed pixel
to their left, which is the background side for this direction, never the foreground. The right view is the same
computation mirrored.

Speed (a 1080p frame must render well ahead of x264 ``veryfast``, with no per-pixel Python), in order of what
it saved: the image is resampled as RGBA through float maps, the only remap path OpenCV vectorises here (3
channels or fixed-point maps run ~2.5x slower); each view's map is built and applied in bands of rows small
enough that the dozen passes over them stay in the CPU cache; the shift is int16 fixed point (1/2**bits px)
from the near map on, so resizing and dilating it at frame size move half the bytes of float32, and the map
needs no conversion to OpenCV's format at the end; running maxima double their window per pass (log2 of the
parallax range) instead of a dilation's comparison per column of it.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, fields

import cv2
import numpy as np

EYES = ("none", "left", "right")

# Frames smaller than this render both eyes in the calling thread (a thread hand-off costs more than it saves).
_PARALLEL_MIN_PIXELS = 256 * 256
_TIE_BREAK = 2.0**-10  # pixels; far below the fixed-point resolution of the map
# Pixels per band of rows that a view's map is built and applied in: the band's scratch arrays (~50 bytes per
# pixel, a few MB) stay in the CPU caches between the passes. Smaller bands lose more to per-call overhead than
# they gain (at 1080p, 2**17 measured best of 2**15 .. a whole frame).
_BAND_PIXELS = 1 << 17


@dataclass(frozen=True)
class StereoSettings:
    divergence_pct: float = 2.0  # maximum parallax between the eyes, in % of the frame width
    convergence: float = 0.25  # 0 = everything behind the screen ... 1 = everything in front
    edge_dilate_px: int = 2  # grow foreground in the near map so its edges carry full parallax
    ipd_offset_pct: float = 0.0  # extra uniform separation of the views, % of width (+ = scene further back)
    border_taper_pct: float = 0.0  # parallax fades to zero over this % of the width at the left/right border
    original_eye: str = "none"  # "left"/"right": that eye shows the source frame, the other takes all parallax

    def __post_init__(self):
        if self.original_eye not in EYES:
            raise ValueError(f"original_eye must be one of {', '.join(EYES)}, not {self.original_eye!r}")
        if not 0.0 <= self.border_taper_pct <= 50.0:
            raise ValueError(f"border_taper_pct must lie in 0..50, not {self.border_taper_pct}")

    def zero_plane(self) -> float:
        return 1.0 - self.convergence

    @classmethod
    def from_config(cls, section: dict) -> StereoSettings:
        """The renderer's settings out of a config ``render`` section (other keys, e.g. the layout's, ignored)."""
        return cls(**{f.name: section[f.name] for f in fields(cls) if f.name in section})


def render_stereo(frame: np.ndarray, near: np.ndarray, settings: StereoSettings) -> tuple[np.ndarray, np.ndarray]:
    """Left and right views (same dtype as ``frame``: uint8, or uint16 for deep sources; ``[H, W, 3]``) of an
    RGB frame and its near map (float, larger = nearer, any size: resized to the frame)."""
    height, width = frame.shape[:2]
    # Each eye takes half the parallax, in opposite directions; a lone rendered eye takes all of it.
    share = 0.5 if settings.original_eye == "none" else 1.0
    shift = _fixed_shift_of_near(near, (height, width), settings, share)
    source, channels = _remap_source(frame)
    if settings.original_eye == "left":
        return frame, _render_eyes(source, shift, channels, (True,))[0]
    if settings.original_eye == "right":
        return _render_eyes(source, shift, channels, (False,))[0], frame
    left, right = _render_eyes(source, shift, channels, (False, True))
    return left, right


def prepare_near(near: np.ndarray, shape: tuple[int, int], edge_dilate_px: int) -> np.ndarray:
    """The near map at frame size (``shape`` = (H, W)), float32, foreground grown by ``edge_dilate_px``.

    Dilation comes after resizing: upscaling blurs a depth edge into a ramp, and growing the near side past that
    ramp is what makes the foreground's edge pixels (often a blend of both sides) travel with the foreground.
    ``render_stereo`` does the same in fixed point (``_fixed_shift_of_near``).
    """
    near = np.asarray(near, dtype=np.float32)
    if near.shape != shape:
        near = cv2.resize(near, (shape[1], shape[0]), interpolation=cv2.INTER_LINEAR)
    if edge_dilate_px > 0:
        size = 2 * edge_dilate_px + 1
        near = cv2.dilate(near, cv2.getStructuringElement(cv2.MORPH_RECT, (size, size)))
    return near


def parallax_px(near: np.ndarray, width: int, settings: StereoSettings) -> np.ndarray:
    """Screen parallax in pixels (positive = in front of the screen) of a near map at frame size.

    ``border_taper_pct`` multiplies the depth parallax by a smooth ramp from 0 at the left and right frame edges
    to 1 at that distance from them: what the frame edge cuts then sits on the screen plane instead of floating
    in front of a window that clips it (a window violation). ``ipd_offset_pct`` is added after, as a uniform
    shift of both views: it moves the whole scene, border included.
    """
    divergence_px = settings.divergence_pct / 100.0 * width
    parallax = (np.asarray(near, dtype=np.float32) - np.float32(settings.zero_plane())) * np.float32(divergence_px)
    taper_px = settings.border_taper_pct / 100.0 * width
    if taper_px >= 1.0:
        parallax *= _border_ramp(width, float(taper_px))
    if settings.ipd_offset_pct:
        parallax -= np.float32(settings.ipd_offset_pct / 100.0 * width)
    return parallax


def warp_view(image: np.ndarray, shift: np.ndarray) -> np.ndarray:
    """Forward-warp ``image`` along rows by ``shift`` pixels (larger shift = nearer; positive moves right, as in
    the left view): nearer pixels win, holes are filled from the left (the background side for this direction).
    The shift is taken to the map's resolution, 1/2**bits pixel (1/32 up to 2046 columns)."""
    shift = np.asarray(shift, dtype=np.float32)
    source, channels = _remap_source(image)
    return _render_eyes(source, _fixed_shift(shift), channels, (False,))[0]


def source_columns(shift: np.ndarray) -> np.ndarray:
    """Backward map of the forward warp by ``shift`` (``[H, W]``, left-view direction): for every target pixel
    the (fractional) source column it shows, float32 (-1: nothing lands at or left of it). See the module
    docstring for occlusion and holes."""
    fixed = _fixed_shift(np.asarray(shift, dtype=np.float32))
    columns = np.empty(fixed.values.shape, np.float32)
    for top, bottom, map_x in _band_maps(fixed, False, 0, fixed.values.shape[0]):
        columns[top:bottom] = map_x
    return columns


# --- helpers -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _FixedShift:
    """A shift map in fixed point: int16 ``values`` in units of 1/2**``bits`` pixel (left-view direction),
    and its smallest and largest value. Fixed point from the start makes every full-size pass over it half the
    bytes of float32, and it is exactly what the map resolves anyway. int16 holds +-1023 px at 5 bits (any
    width up to 2046), +-2047 px at 4 bits: far beyond the schema's 10 % divergence plus 5 % IPD offset."""

    values: np.ndarray
    bits: int
    lo: int
    hi: int


def _fixed_shift_of_near(near: np.ndarray, shape: tuple[int, int], settings: StereoSettings,
                         share: float) -> _FixedShift:  # fmt: skip
    """``share`` times ``parallax_px(prepare_near(near, shape, edge_dilate_px), width, settings)``, in fixed
    point. The parallax is an increasing linear function of the near map (for a non-negative divergence), so it
    commutes with the bilinear resize and with the dilation: scaling the small near map first lets both run on
    int16 at frame size instead of float32 (dilation of float32 at 1080p alone costs ~6 ms). The border taper
    is not uniform across columns, so it comes after them, as in ``parallax_px``."""
    height, width = shape
    bits = _fraction_bits(width)
    unit = share * (1 << bits)  # fixed-point units per pixel of parallax
    gain = settings.divergence_pct / 100.0 * width * unit
    ipd = settings.ipd_offset_pct / 100.0 * width * unit
    taper_px = settings.border_taper_pct / 100.0 * width
    near = np.asarray(near, dtype=np.float32)
    offset = -settings.zero_plane() * gain - (0.0 if taper_px >= 1.0 else ipd)
    values = cv2.addWeighted(near, gain, near, 0.0, offset, dtype=cv2.CV_16S)  # rounds, saturates
    if values.shape != shape:
        values = cv2.resize(values, (width, height), interpolation=cv2.INTER_LINEAR)
    if settings.edge_dilate_px > 0:
        size = 2 * settings.edge_dilate_px + 1
        element = cv2.getStructuringElement(cv2.MORPH_RECT, (size, size))
        # Growing the near side of the near map grows the larger side of the shift, or its smaller side when
        # a negative divergence reverses the order.
        values = (cv2.dilate if gain >= 0 else cv2.erode)(values, element)
    if taper_px >= 1.0:
        tapered = np.multiply(values, _border_ramp(width, float(taper_px)), dtype=np.float32)
        values = cv2.addWeighted(tapered, 1.0, tapered, 0.0, -ipd, dtype=cv2.CV_16S)
    return _with_range(values, bits)


def _fixed_shift(shift: np.ndarray) -> _FixedShift:
    bits = _fraction_bits(shift.shape[1])
    return _with_range(cv2.addWeighted(shift, float(1 << bits), shift, 0.0, 0.0, dtype=cv2.CV_16S), bits)


def _with_range(values: np.ndarray, bits: int) -> _FixedShift:
    lo, hi = cv2.minMaxLoc(values)[:2]
    return _FixedShift(values, bits, int(lo), int(hi))


def _remap_source(image: np.ndarray) -> tuple[np.ndarray, int]:
    """The image as ``cv2.remap`` resamples it fastest, and the channel count the views keep (0: 2-D).
    OpenCV's vectorised float-map remap handles 1 and 4 channels (8 or 16 bit); 3 channels take a scalar path
    about 2.5x slower, so RGB goes through RGBA (one conversion per frame, shared by both eyes)."""
    image = np.asarray(image)
    channels = image.shape[2] if image.ndim == 3 else 0
    if channels == 3:
        # Into a kept buffer of the calling thread: a fresh frame-sized array per frame costs its page faults.
        # The views are finished before render_stereo returns, so the next frame may overwrite it.
        key = (image.shape[:2], image.dtype)
        buffer = _local.__dict__.get("rgba")
        if buffer is None or buffer[0] != key:
            buffer = (key, np.empty((*image.shape[:2], 4), image.dtype))
            _local.rgba = buffer
        return cv2.cvtColor(image, cv2.COLOR_RGB2RGBA, dst=buffer[1]), 3
    return np.ascontiguousarray(image), channels


def _render_eyes(source: np.ndarray, shift: _FixedShift, channels: int,
                 mirrored: tuple[bool, ...]) -> list[np.ndarray]:  # fmt: skip
    """One view per entry of ``mirrored`` (False: the left-view direction; True: the right view's, with
    nearer content moving left and holes filled from the right). Rows never exchange pixels, so each view is
    cut into horizontal slices, one job per render thread (``set_render_threads``); OpenCV and numpy release
    the GIL, so the slices run side by side. Small frames stay in the calling thread: a hand-off costs more
    than it saves."""
    height, width = shift.values.shape
    shape = (height, width, channels) if channels else (height, width)
    views = [np.empty(shape, source.dtype) for _ in mirrored]
    threads = _render_threads()
    if height * width < _PARALLEL_MIN_PIXELS or threads < 2:
        for view, direction in zip(views, mirrored):
            _warp_rows(source, shift, channels, view, direction, 0, height)
        return views
    # Slices per view: enough to give every thread work, none thinner than a band (per-call overhead).
    slices = max(1, min(-(-threads // len(views)), height // _band_rows(width)))
    cuts = [round(height * k / slices) for k in range(slices + 1)]
    jobs = [(view, direction, top, bottom) for view, direction in zip(views, mirrored)
            for top, bottom in zip(cuts, cuts[1:]) if top < bottom]  # fmt: skip
    pending = [_pool(threads).submit(_warp_rows, source, shift, channels, *job) for job in jobs[1:]]
    _warp_rows(source, shift, channels, *jobs[0])
    for job in pending:
        job.result()
    return views


def _warp_rows(source: np.ndarray, shift: _FixedShift, channels: int, out: np.ndarray, mirrored: bool,
               top: int, bottom: int) -> None:  # fmt: skip
    """Render rows ``top:bottom`` of one view into ``out``, a band of rows at a time. The warp never moves
    anything across rows, so a band of the view needs only the same band of the source."""
    if shift.values.shape[1] < 2:  # one column: nothing can move
        out[top:bottom] = source[top:bottom, :, :3] if channels == 3 else source[top:bottom]
        return
    rows = min(bottom - top, _band_rows(shift.values.shape[1]))
    work = _workspace(rows, shift.values.shape[1])
    for start, stop, map_x in _band_maps(shift, mirrored, top, bottom):
        n = stop - start
        # The row map is the band's own row index: the vertical weight is 0, the image is only read along rows.
        if channels == 3:
            band = cv2.remap(source[start:stop], map_x, work.map_y[:n], cv2.INTER_LINEAR,
                             dst=work.rgba(source.dtype)[:n], borderMode=cv2.BORDER_REPLICATE)  # fmt: skip
            cv2.cvtColor(band, cv2.COLOR_RGBA2RGB, dst=out[start:stop])
        else:
            cv2.remap(source[start:stop], map_x, work.map_y[:n], cv2.INTER_LINEAR, dst=out[start:stop],
                      borderMode=cv2.BORDER_REPLICATE)  # fmt: skip


def _band_maps(shift: _FixedShift, mirrored: bool, top: int, bottom: int):
    """Yield ``(start, stop, map_x)`` for bands of rows of ``top:bottom``: the float32 source column of every
    target pixel of the band (a workspace array, valid until the next band). Working a band of ~100 k pixels
    at a time keeps the dozen passes below in the CPU cache instead of streaming full frames through memory;
    ``mirrored`` computes the right view's direction by mirroring the band of shifts and the resulting map,
    never the image."""
    width = shift.values.shape[1]
    one = 1 << shift.bits
    span = min(-(-(shift.hi - shift.lo) // one) + 2, width)
    # A hole inside the frame is never wider than the parallax range, nor one at the right border than the
    # largest shift to the left (in the mirrored problem's own direction, where the shift is the same).
    hole_span = min(max(span, -(shift.lo // one) + 2), width)
    rows = min(bottom - top, _band_rows(width))
    work = _workspace(rows, width)
    for start in range(top, bottom, rows):
        stop = min(start + rows, bottom)
        n = stop - start
        values = shift.values[start:stop]
        if mirrored:
            values = cv2.flip(values, 1, dst=work.flipped[:n])
        fixed = _band_source_fixed(values, one, span, hole_span, work)
        # Fixed point (+1 px offset, 0 = nothing claimed) -> source column. Nothing claimed comes out as column
        # -1 (or W in the mirrored direction), which BORDER_REPLICATE resamples as the border column itself.
        if mirrored:
            # Column x of the mirrored problem is column W-1-x here; the +1 px offset turns W-1 into W.
            flipped = cv2.addWeighted(fixed, -1.0 / one, fixed, 0.0, float(width), dst=work.mirrored_map[:n],
                                      dtype=cv2.CV_32F)  # fmt: skip
            map_x = cv2.flip(flipped, 1, dst=work.map_x[:n])
        else:
            map_x = cv2.addWeighted(fixed, 1.0 / one, fixed, 0.0, -1.0, dst=work.map_x[:n], dtype=cv2.CV_32F)
        yield start, stop, map_x


def _band_source_fixed(shift: np.ndarray, one: int, span: int, hole_span: int, work: _Workspace) -> np.ndarray:
    """The backward map of a band of fixed-point shifts (left-view direction) as uint16 fixed point, offset by
    +1 pixel so that 0 can mean "nothing lands here" (a workspace array)."""
    n, width = shift.shape
    # The column of the padded row (target pixel + 1: column 0 is a dummy left of the frame) that each source
    # column claims, rounded. The tie-break nudge rounds exact halves up, uniformly: OpenCV rounds half to
    # even, which would land a surface shifted by k + 1/2 pixels on every other pixel twice (a collision, then
    # a gap).
    landing = cv2.addWeighted(shift, 1.0 / one, work.columns[:n], 1.0, 1.0 + _TIE_BREAK, dst=work.landing[:n],
                              dtype=cv2.CV_16S)  # fmt: skip
    # The sub-pixel source position shown there, +1 px: landing - shift, in fixed point. uint16 arithmetic
    # wraps, and the true result lies in 0..(width + 1) * one, so the wrapped one is exact (OpenCV's saturating
    # path for this mix of types is ~8x slower).
    value = np.multiply(landing.view(np.uint16), np.uint16(one), out=work.value[:n])
    np.subtract(value, shift.view(np.uint16), out=value)

    # Hidden: claims no pixel beyond what a column to its left (nearer, or the same surface) already claimed.
    reach = _running_max(landing, span, work.reach[:n], work.spare[:n].view(np.int16))
    hidden = cv2.compare(landing[:, 1:], reach[:, :-1], cv2.CMP_LE, dst=work.hidden[:n])
    np.clip(landing, 0, width + 1, out=landing)  # 0 and width + 1: the dummy columns just outside the frame
    np.copyto(landing[:, 1:], 0, where=hidden.view(bool))
    # Flat indices into the padded band. Widening first and adding a full-size offset array is ~1.6x faster
    # than numpy's mixed-type broadcast add.
    index = work.index[:n]
    np.copyto(index, landing)
    np.add(index, work.row_offsets[:n], out=index)
    padded = work.padded[:n]
    padded.fill(0)
    padded.ravel()[index.ravel()] = value.ravel()  # one writer per claimed pixel: no order to worry about

    # Unclaimed pixels repeat the last claimed one to their left (a running maximum over windows as wide as the
    # widest hole fills them all). Holes take whole pixels, rounded half down (to the left): a fractional
    # position, or rounding up, would take in the neighbour across the gap, the foreground.
    claimed = padded[:, 1 : width + 1]
    out = _running_max(claimed, hole_span, work.out[:n], work.spare[:n])
    hole = cv2.compare(claimed, 0, cv2.CMP_EQ, dst=work.hole[:n])
    rounded = np.add(out, np.uint16((one >> 1) - 1), out=work.rounded[:n])
    np.bitwise_and(rounded, np.uint16(0xFFFF ^ (one - 1)), out=rounded)
    cv2.copyTo(rounded, hole, dst=out)  # OpenCV's masked copy: several times faster than numpy's where=
    return out


def _fraction_bits(width: int) -> int:
    """Sub-pixel bits of the fixed-point map: as many as uint16 holds for this width, at most OpenCV's own."""
    bits = cv2.INTER_BITS
    while bits > 1 and (width + 2) << bits > 0xFFFF:
        bits -= 1
    return bits


def _band_rows(width: int) -> int:
    return max(1, _BAND_PIXELS // width)


def _running_max(values: np.ndarray, span: int, out: np.ndarray, spare: np.ndarray) -> np.ndarray:
    """Cumulative maximum along rows into ``out``, given that no value is beaten by one more than ``span``
    columns to its left (true of targets whose shifts differ by less than ``span`` - 1): then the maximum over
    any window of at least ``span`` columns ending at each column is the cumulative one. Windows of 1, 2, 4, ...
    columns, each the maximum of the previous and itself shifted: log2(span) passes, where a 1 x span dilation
    compares span values per pixel and numpy's accumulate does not vectorise. ``spare`` (same shape and dtype)
    holds the intermediate steps."""
    steps = max(1, (span - 1).bit_length())
    buffers = (out, spare) if steps % 2 else (spare, out)  # the last step writes ``out``
    previous, window = values, 1
    for step in range(steps):
        current = buffers[step % 2]
        current[:, :window] = previous[:, :window]
        cv2.max(previous[:, window:], previous[:, :-window], dst=current[:, window:])
        previous, window = current, 2 * window
    return out


class _Workspace:
    """Scratch arrays of one thread for one band size: fresh arrays per band would cost allocations and page
    faults that add up to a good share of the render time at 1080p."""

    def __init__(self, rows: int, width: int):
        self.flipped = np.empty((rows, width), np.int16)
        self.columns = np.broadcast_to(np.arange(width, dtype=np.int16), (rows, width)).copy()
        self.landing = np.empty((rows, width), np.int16)
        self.reach = np.empty((rows, width), np.int16)
        self.value = np.empty((rows, width), np.uint16)
        self.hidden = np.empty((rows, width - 1), np.uint8)
        self.index = np.empty((rows, width), np.intp)
        self.row_offsets = np.repeat(np.arange(rows, dtype=np.intp)[:, None] * (width + 2), width, axis=1)
        self.padded = np.empty((rows, width + 2), np.uint16)
        self.out = np.empty((rows, width), np.uint16)
        self.spare = np.empty((rows, width), np.uint16)
        self.rounded = np.empty((rows, width), np.uint16)
        self.hole = np.empty((rows, width), np.uint8)
        self.mirrored_map = np.empty((rows, width), np.float32)
        self.map_x = np.empty((rows, width), np.float32)
        self.map_y = np.repeat(np.arange(rows, dtype=np.float32)[:, None], width, axis=1)
        self._rgba: dict[np.dtype, np.ndarray] = {}
        self._shape = (rows, width)

    def rgba(self, dtype: np.dtype) -> np.ndarray:
        """A band of remapped RGBA pixels of this dtype, before it is repacked as RGB."""
        key = np.dtype(dtype)
        if key not in self._rgba:
            self._rgba[key] = np.empty((*self._shape, 4), key)
        return self._rgba[key]


_local = threading.local()
_pool_lock = threading.Lock()
_executor: ThreadPoolExecutor | None = None
_executor_size = 0
_threads: int | None = None


def _workspace(rows: int, width: int) -> _Workspace:
    spaces = _local.__dict__.setdefault("spaces", {})
    if (rows, width) not in spaces:
        if len(spaces) >= 4:  # a long-lived process meeting many sizes keeps only a few
            spaces.clear()
        spaces[(rows, width)] = _Workspace(rows, width)
    return spaces[(rows, width)]


def set_render_threads(threads: int | None) -> None:
    """Threads rendering one frame (None: every CPU this process may use). The render job passes its own share
    of the machine; the encoder's threads come on top."""
    global _threads
    _threads = None if threads is None else max(1, int(threads))


def _render_threads() -> int:
    if _threads is not None:
        return _threads
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _pool(threads: int) -> ThreadPoolExecutor:
    """The calling thread works too, so the pool holds ``threads - 1`` workers (rebuilt if the count changes)."""
    global _executor, _executor_size
    with _pool_lock:
        if _executor is None or _executor_size != threads - 1:
            if _executor is not None:
                _executor.shutdown(wait=False)
            _executor = ThreadPoolExecutor(max_workers=threads - 1, thread_name_prefix="render")
            _executor_size = threads - 1
        return _executor


def _border_ramp(width: int, taper_px: float) -> np.ndarray:
    distance = np.minimum(np.arange(width), np.arange(width)[::-1]).astype(np.float32)
    ramp = np.clip(distance / np.float32(taper_px), 0.0, 1.0)
    return (ramp * ramp * (3.0 - 2.0 * ramp)).astype(np.float32)  # smoothstep: no kink where the taper ends
