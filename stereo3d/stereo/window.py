"""Screen edges: window violations, and the floating window that removes them.

The frame's left and right edges are the edges of the screen, at zero parallax. Content in front of the screen
(positive parallax, ``Parallax``) that an edge cuts looks as if the nearer object were clipped by the farther
window: a **window violation**. Per frame and edge it is measured as the *edge parallax*: the largest parallax
(pixels at frame width, ``Parallax.px``: the border taper included) of the content in the edge band, the columns
within ``EDGE_BAND_PCT`` of the frame width of that edge, after the renderer's edge dilation. A frame violates a
window when either edge's parallax exceeds ``VIOLATION_PCT`` of the width.

A **floating window** moves the screen's edge forward instead. In this code the left view shows in-front content
shifted right and the right view shifted left (parallax = x_left - x_right). Masking the leftmost ``w`` columns of
the LEFT view puts the left view's edge at ``x = w`` while the right view's stays at 0: the left edge now has
parallax ``+w``, in front of the screen. Likewise the RIGHT view's rightmost ``w`` columns for the right edge. With
``w`` at least the edge parallax, the window is no farther than the content it cuts: no violation.

The width follows the per-frame need (the edge parallax where it violates, else 0) through a finite envelope
(``smooth_widths``): it rises over ``ATTACK_S`` before the content arrives and falls over ``RELEASE_S`` after it
leaves, both eased. A frame's width depends only on the needs of the frames ``ATTACK_S`` after and ``RELEASE_S``
before it, so a segmented render reads its neighbours' near maps for those frames and gets the very same widths
as one whole-video job (``window_widths``). The mask itself (``apply_floating_window``) is a smoothstep ramp to
black over ``FEATHER_PCT`` of the width, centred on ``w``: its half-dark column is the window's edge.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import cv2
import numpy as np

from stereo3d.stereo.warp import Parallax, StereoSettings

EDGE_BAND_PCT = 1.0  # the edge band: half the default divergence, as far as the eye shifting outward moves content
VIOLATION_PCT = 0.1  # % of width (2 px at 1920): less is within the renderer's sub-pixel noise at the edge
ATTACK_S = 0.5  # the window rises over this time before the content that needs it reaches the edge
RELEASE_S = 2.0  # and falls over this time after it left: a slow release reads as a calm window, not a jump
FEATHER_PCT = 0.3  # % of width (6 px at 1920) over which the mask eases to black


def edge_band_px(width: int) -> int:
    """Columns of the edge band at frame ``width``."""
    return max(1, round(EDGE_BAND_PCT / 100.0 * width))


def edge_parallax(near: np.ndarray, width: int, settings: StereoSettings) -> tuple[float, float]:
    """The left and right edge parallax (px at frame ``width``, + = in front) of a near map of any size.

    As the renderer computes it (``Parallax.fixed_shift``): the near map brought to ``width`` columns (bilinear),
    grown by ``edge_dilate_px``, then ``Parallax.px`` with its border ramp, evaluated on the largest near value of
    each column (the parallax is increasing in near, the ramp is per column). Its rows are left at the map's own
    count: the largest value of a column does not grow with vertical interpolation. NaN (masked) pixels are no
    content."""
    near = np.asarray(near, dtype=np.float32)
    if near.shape[1] != width:
        near = cv2.resize(near, (width, near.shape[0]), interpolation=cv2.INTER_LINEAR)
    column = np.fmax.reduce(near, axis=0)  # the largest near value of each column, NaN ignored
    content = np.isfinite(column)
    if not content.any():
        return 0.0, 0.0
    floor = np.float32(np.min(column[content]))  # a column without content takes the farthest value: no effect
    grown = _grow(np.where(content, column, floor).astype(np.float32), settings.edge_dilate_px)
    parallax = Parallax.of(settings, width).px(grown[None, :])[0]
    band = edge_band_px(width)
    return max(0.0, float(parallax[:band].max())), max(0.0, float(parallax[-band:].max()))


def violation_need(edges: np.ndarray, width: int) -> np.ndarray:
    """The floating window's per-frame need (px, [frames, 2]): the edge parallax where it exceeds
    ``VIOLATION_PCT``, else 0."""
    edges = np.asarray(edges, dtype=np.float64).reshape(-1, 2)
    return np.where(edges > VIOLATION_PCT / 100.0 * width, edges, 0.0)


def reach_frames(fps: float) -> tuple[int, int]:
    """(release, attack) in frames at ``fps``: how far before and after a frame its window width looks."""
    return max(1, round(RELEASE_S * fps)), max(1, round(ATTACK_S * fps))


def smooth_widths(need: np.ndarray, fps: float) -> np.ndarray:
    """Window widths (px, same shape as ``need``: frames on the first axis) that never fall below the need.

    ``width[t] = max over s of need[s] * k(t - s)``, with ``k`` 1 at 0, rising (smoothstep) over ``attack``
    frames before and falling (smoothstep) over ``release`` frames after: each need is a bump wide enough to be
    met early and let go slowly. A maximum of bumps changes from one frame to the next by at most the largest
    need times the kernel's steepest step (1.5 / attack), and is 0 wherever no need lies within reach."""
    need = np.asarray(need, dtype=np.float64)
    release, attack = reach_frames(fps)
    widths = need.copy()
    frames = len(need)
    for lag in range(-attack, release + 1):  # lag = t - s
        if lag == 0 or abs(lag) >= frames:
            continue
        weight = _kernel(lag, release, attack)
        if lag > 0:
            np.maximum(widths[lag:], need[:-lag] * weight, out=widths[lag:])
        else:
            np.maximum(widths[:lag], need[-lag:] * weight, out=widths[:lag])
    return widths


def window_widths(stores: Sequence[str | Path], first: int, count: int, width: int, settings: StereoSettings,
                  fps: float, plane_at=None) -> np.ndarray:  # fmt: skip
    """The window widths (px, [count, 2]: left edge, right edge) of frames ``first`` .. ``first + count``, from
    the near-map ``stores`` that hold them and the frames within reach around them (each store's ``start``
    attribute places it). Frames no store holds (before the video's start, after its end) need no window.
    ``plane_at``: video frame -> its planned zero plane (``convergence: auto``; see ``frame_settings``)."""
    from stereo3d.io.mapstore import MapReader

    release, attack = reach_frames(fps)
    lo, hi = first - release, first + count + attack
    need = np.zeros((hi - lo, 2))
    for path in stores:
        with MapReader(path) as reader:
            start = int(reader.attrs.get("start", 0))
            a, b = max(lo, start), min(hi, start + reader.frames)
            if a >= b:
                continue
            for block in range(a, b, reader.chunk):  # a block at a time: a whole-film store does not fit in memory
                count_here = min(reader.chunk, b - block)
                maps = reader.read(block - start, count_here)
                edges = np.array([edge_parallax(near, width, frame_settings(settings, near, plane_at, block + k))
                                  for k, near in enumerate(maps)]).reshape(-1, 2)  # fmt: skip
                need[block - lo : block - lo + count_here] = violation_need(edges, width)
    return smooth_widths(need, fps)[release : release + count]


def frame_settings(settings: StereoSettings, near: np.ndarray, plane_at, index: int) -> StereoSettings:
    """The settings of video frame ``index``: with a convergence plan (``plane_at``: frame -> zero plane), the
    screen where it puts it; without one, ``auto`` on the frame alone (``StereoSettings.for_frame``)."""
    if plane_at is not None:
        return settings.at_plane(plane_at(index))
    return settings.for_frame(near)


def apply_floating_window(left: np.ndarray, right: np.ndarray, left_px: float, right_px: float) -> None:
    """Mask, in place, the left edge of the LEFT view ``left_px`` wide and the right edge of the RIGHT view
    ``right_px`` wide (views ``[H, W, C]`` or ``[H, W]``, uint8 or uint16, of the picture alone).

    The mask is a smoothstep from black to the picture over ``min(FEATHER_PCT of W, 2 * width)`` columns centred
    on the width: the column half dark is the window's edge, and the ramp shrinks with the width, so a window
    growing from 0 appears gradually. A width of 0 leaves the view untouched (byte for byte)."""
    for view, px, flip in ((left, left_px, False), (right, right_px, True)):
        if px <= 0:
            continue
        alpha = edge_alpha(view.shape[1], float(px))
        span = len(alpha)
        edge = view[:, ::-1][:, :span] if flip else view[:, :span]
        shape = (1, span) + (1,) * (view.ndim - 2)
        scaled = edge.astype(np.float32) * alpha.reshape(shape)
        edge[...] = np.rint(scaled).astype(view.dtype)


def edge_alpha(width: int, px: float) -> np.ndarray:
    """Mask values (0 = black .. 1 = picture) of the columns from the masked edge inward, as far as the mask
    reaches."""
    feather = min(max(1.0, FEATHER_PCT / 100.0 * width), 2.0 * px)
    span = min(width, int(np.ceil(px + feather / 2.0)))
    centres = np.arange(span, dtype=np.float32) + np.float32(0.5)
    ramp = np.clip((centres - np.float32(px - feather / 2.0)) / np.float32(feather), 0.0, 1.0)
    return ramp * ramp * (3.0 - 2.0 * ramp)


def effective_edge(alpha: np.ndarray) -> float:
    """Where a mask's ramp crosses half dark, in columns from the masked edge (linear between column centres):
    the floating window's position, measured on what the mask does to a view."""
    alpha = np.asarray(alpha, dtype=np.float64)
    above = np.nonzero(alpha >= 0.5)[0]
    if not len(above):
        return float(len(alpha))
    k = int(above[0])
    if k == 0:
        return 0.0
    a, b = alpha[k - 1], alpha[k]
    return k - 0.5 + (0.5 - a) / (b - a)


# --- helpers -------------------------------------------------------------------------------------------------


def _grow(values: np.ndarray, radius: int) -> np.ndarray:
    """The running maximum over ``radius`` columns on either side (the renderer's dilation, along one row)."""
    if radius <= 0:
        return values
    edge = np.full(radius, -np.inf, np.float32)
    padded = np.concatenate([edge, values, edge])
    windows = np.lib.stride_tricks.sliding_window_view(padded, 2 * radius + 1)
    return windows.max(axis=1)


def _kernel(lag: int, release: int, attack: int) -> float:
    """The bump of one need, ``lag`` frames after it (negative: before)."""
    x = 1.0 + lag / attack if lag < 0 else 1.0 - lag / release
    x = min(1.0, max(0.0, x))
    return x * x * (3.0 - 2.0 * x)
