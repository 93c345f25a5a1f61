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
wide as the parallax range, so it is a one-row dilation). Target pixels nobody claimed are disocclusions: they
repeat the last claimed pixel to their left, which is the background side for this direction, never the
foreground. The right view is the same computation mirrored.
"""

from __future__ import annotations

import functools
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import cv2
import numpy as np

EYES = ("none", "left", "right")

# Running maxima over windows wider than this are cheaper as a full cumulative maximum than as a dilation.
_DILATE_MAX_SPAN = 96
# Frames smaller than this render both eyes in the calling thread (a thread hand-off costs more than it saves).
_PARALLEL_MIN_PIXELS = 256 * 256
_TIE_BREAK = 2.0**-10  # pixels; far below the fixed-point resolution of the map


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


def render_stereo(frame: np.ndarray, near: np.ndarray, settings: StereoSettings) -> tuple[np.ndarray, np.ndarray]:
    """Left and right views (same dtype as ``frame``: uint8, or uint16 for deep sources; ``[H, W, 3]``) of an
    RGB frame and its near map (float, larger = nearer, any size: resized to the frame)."""
    height, width = frame.shape[:2]
    parallax = parallax_px(prepare_near(near, (height, width), settings.edge_dilate_px), width, settings)
    if settings.original_eye == "left":
        return frame, _warp(frame, -parallax, mirrored=True)
    if settings.original_eye == "right":
        return _warp(frame, parallax, mirrored=False), frame
    half = parallax * np.float32(0.5)
    if height * width < _PARALLEL_MIN_PIXELS:
        return _warp(frame, half, mirrored=False), _warp(frame, -half, mirrored=True)
    # The two eyes are independent and OpenCV/numpy release the GIL on whole-frame work: one thread each.
    right = _pool().submit(_warp, frame, -half, True)
    left = _warp(frame, half, mirrored=False)
    return left, right.result()


def prepare_near(near: np.ndarray, shape: tuple[int, int], edge_dilate_px: int) -> np.ndarray:
    """The near map at frame size (``shape`` = (H, W)), float32, foreground grown by ``edge_dilate_px``.

    Dilation comes after resizing: upscaling blurs a depth edge into a ramp, and growing the near side past that
    ramp is what makes the foreground's edge pixels (often a blend of both sides) travel with the foreground.
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
    the left view): nearer pixels win, holes are filled from the left (the background side for this direction)."""
    return _warp(image, np.asarray(shift, dtype=np.float32), mirrored=False)


def source_columns(shift: np.ndarray) -> np.ndarray:
    """Backward map of the forward warp by ``shift`` (``[H, W]``, left-view direction): for every target pixel
    the (fractional) source column it shows, float32. See the module docstring for occlusion and holes."""
    shift = np.ascontiguousarray(shift, dtype=np.float32)
    fixed, bits = _source_fixed(shift)
    return fixed.astype(np.float32) / np.float32(1 << bits) - np.float32(1.0)


# --- helpers -------------------------------------------------------------------------------------------------


def _warp(image: np.ndarray, shift: np.ndarray, mirrored: bool) -> np.ndarray:
    """Resample ``image`` through the backward map of ``shift``; ``mirrored`` warps in the right-view direction
    (nearer moves left, holes filled from the right) by mirroring the map computation, not the image."""
    shift = np.ascontiguousarray(shift, dtype=np.float32)
    height, width = shift.shape
    if mirrored:
        fixed, bits = _source_fixed(cv2.flip(shift, 1), negate=True)
        # Column x of the mirrored problem is column width-1-x here; +1 px is the offset _source_fixed adds.
        fixed = cv2.flip(cv2.subtract(np.full_like(fixed, (width + 1) << bits), fixed), 1)
    else:
        fixed, bits = _source_fixed(shift)
    # Fixed point -> OpenCV's own remap format: integer column (beside the row) plus a 5-bit fraction index.
    one = 1 << bits
    np.maximum(fixed, one, out=fixed)  # nothing claimed left of the first pixel: column 0
    fixed -= one
    map_xy = _workspace(height, width).map_xy
    np.right_shift(fixed, bits, out=map_xy[:, :, 0], casting="unsafe")
    fraction = np.bitwise_and(fixed, one - 1, out=fixed)
    fraction <<= cv2.INTER_BITS - bits
    return cv2.remap(image, map_xy, fraction, cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)


def _source_fixed(shift: np.ndarray, negate: bool = False) -> tuple[np.ndarray, int]:
    """The backward map as uint16 fixed point with ``bits`` fraction bits, offset by +1 pixel so that 0 can
    mean "nothing lands here". ``negate`` warps by ``-shift`` (saves a pass for the mirrored eye)."""
    height, width = shift.shape
    bits = _fraction_bits(width)
    one = 1 << bits
    work = _workspace(height, width)
    sign = -1.0 if negate else 1.0
    # The target pixel each source column claims (rounded), and the sub-pixel source position shown there.
    # The tie-break nudge rounds exact halves up, uniformly: OpenCV rounds half to even, which would land a
    # surface shifted by k + 1/2 pixels on every other pixel twice (a collision, then a gap).
    landing = cv2.addWeighted(shift, sign, _column_map(height, width), 1.0, _TIE_BREAK, dst=work.landing,
                              dtype=cv2.CV_16S)  # fmt: skip
    value = cv2.addWeighted(landing, float(one), shift, -sign * one, float(one), dst=work.value, dtype=cv2.CV_16U)
    lo, hi = sorted((sign * float(shift.min()), sign * float(shift.max())))
    span = min(int(np.ceil(hi - lo)) + 2, width)

    # Hidden: claims no pixel beyond what a column to its left (nearer, or the same surface) already claimed.
    reach = _running_max(landing, span, work.reach)
    hidden = cv2.compare(landing[:, 1:], reach[:, :-1], cv2.CMP_LE)
    np.clip(landing, -1, width, out=landing)  # -1 and width: dummy columns just outside the frame
    np.copyto(landing[:, 1:], -1, where=hidden.view(bool))
    index = np.add(landing, _row_offsets(height, width + 2), out=work.index)
    padded = work.padded
    padded.fill(0)
    padded.ravel()[index.ravel()] = value.ravel()  # one writer per claimed pixel: no order to worry about

    # Unclaimed pixels repeat the last claimed one to their left. A hole inside the frame is never wider than
    # the parallax range, nor one at the right border than the largest shift to the left, so a dilation of that
    # width fills them all. Holes take whole pixels, rounded half down (to the left): a fractional position, or
    # rounding up, would take in the neighbour across the gap, the foreground.
    claimed = padded[:, 1 : width + 1]
    out = _running_max(claimed, min(max(span, int(np.ceil(-lo)) + 2), width), work.out)
    hole = claimed == 0
    np.copyto(out, (out + ((one >> 1) - 1)) & np.uint16(0xFFFF ^ (one - 1)), where=hole)
    return out, bits


def _fraction_bits(width: int) -> int:
    """Sub-pixel bits of the fixed-point map: as many as uint16 holds for this width, at most OpenCV's own."""
    bits = cv2.INTER_BITS
    while bits > 1 and (width + 2) << bits > 0xFFFF:
        bits -= 1
    return bits


def _running_max(values: np.ndarray, span: int, out: np.ndarray) -> np.ndarray:
    """Cumulative maximum along rows, given that no value is beaten by one more than ``span`` columns to its
    left (true of targets whose shifts differ by less than ``span`` - 1): then a one-sided dilation suffices."""
    if span > _DILATE_MAX_SPAN or span >= values.shape[1]:
        return np.maximum.accumulate(values, axis=1, out=out)
    kernel = np.ones((1, span), np.uint8)
    floor = float(np.iinfo(values.dtype).min)
    return cv2.dilate(values, kernel, dst=out, anchor=(span - 1, 0), borderType=cv2.BORDER_CONSTANT, borderValue=floor)


class _Workspace:
    """Scratch arrays of one thread for one frame size: fresh multi-megabyte arrays per frame cost page faults
    that add up to a good share of the render time at 1080p."""

    def __init__(self, height: int, width: int):
        self.landing = np.empty((height, width), np.int16)
        self.reach = np.empty((height, width), np.int16)
        self.value = np.empty((height, width), np.uint16)
        self.out = np.empty((height, width), np.uint16)
        self.index = np.empty((height, width), np.intp)
        self.padded = np.empty((height, width + 2), np.uint16)
        self.map_xy = np.empty((height, width, 2), np.int16)  # remap's (column, row) pairs; rows never change
        self.map_xy[:, :, 1] = np.arange(height, dtype=np.int16)[:, None]


_local = threading.local()
_pool_lock = threading.Lock()
_executor: ThreadPoolExecutor | None = None


def _workspace(height: int, width: int) -> _Workspace:
    spaces = _local.__dict__.setdefault("spaces", {})
    if (height, width) not in spaces:
        if len(spaces) >= 4:  # a long-lived process meeting many sizes keeps only a few
            spaces.clear()
        spaces[(height, width)] = _Workspace(height, width)
    return spaces[(height, width)]


def _pool() -> ThreadPoolExecutor:
    global _executor
    with _pool_lock:
        if _executor is None:
            _executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="render-right-eye")
        return _executor


def _border_ramp(width: int, taper_px: float) -> np.ndarray:
    distance = np.minimum(np.arange(width), np.arange(width)[::-1]).astype(np.float32)
    ramp = np.clip(distance / np.float32(taper_px), 0.0, 1.0)
    return (ramp * ramp * (3.0 - 2.0 * ramp)).astype(np.float32)  # smoothstep: no kink where the taper ends


@functools.lru_cache(maxsize=4)
def _column_map(height: int, width: int) -> np.ndarray:
    cols = np.broadcast_to(np.arange(width, dtype=np.float32), (height, width)).copy()
    cols.setflags(write=False)
    return cols


@functools.lru_cache(maxsize=4)
def _row_offsets(height: int, stride: int) -> np.ndarray:
    offsets = (np.arange(height, dtype=np.intp) * stride + 1)[:, None]  # +1: column 0 is the left dummy
    offsets.setflags(write=False)
    return offsets
