"""Depth-image-based rendering: a near map and its frame become left and right views.

Parallax is ``(near - zero_plane) * divergence``: pixels nearer than the zero-parallax plane come
out of the screen (left view shifts them right, right view left), farther ones go behind it. The
warp is a forward splat along rows with occlusion decided in one vectorised pass: in the left view
a nearer pixel always lies to the left of any farther pixel landing on the same spot, so a pixel
is visible exactly when it lands beyond everything to its left (a running maximum). The right
view is the mirror image. Holes opened behind foreground edges are filled from the background
side, never by smearing the foreground.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np


@dataclass(frozen=True)
class StereoSettings:
    divergence_pct: float = 2.0  # maximum parallax between the eyes, in % of the frame width
    convergence: float = 0.25  # 0 = everything behind the screen ... 1 = everything in front
    edge_dilate_px: int = 2  # grow foreground in the near map so its edges carry full parallax

    def zero_plane(self) -> float:
        return 1.0 - self.convergence


def parallax_px(near: np.ndarray, width: int, settings: StereoSettings) -> np.ndarray:
    """Screen parallax in pixels (positive = in front of the screen) for a near map at frame size."""
    divergence_px = settings.divergence_pct / 100.0 * width
    return (near - np.float32(settings.zero_plane())) * np.float32(divergence_px)


def render_stereo(frame: np.ndarray, near: np.ndarray, settings: StereoSettings) -> tuple[np.ndarray, np.ndarray]:
    """Left and right views (uint8 [H, W, 3]) of an RGB frame and its near map (any size)."""
    height, width = frame.shape[:2]
    if near.shape != (height, width):
        near = cv2.resize(near, (width, height), interpolation=cv2.INTER_LINEAR)
    if settings.edge_dilate_px > 0:
        size = 2 * settings.edge_dilate_px + 1
        near = cv2.dilate(near, np.ones((size, size), np.uint8))
    parallax = parallax_px(near, width, settings)
    left = warp_view(frame, parallax * np.float32(0.5))
    right = warp_view(frame[:, ::-1], parallax[:, ::-1] * np.float32(0.5))[:, ::-1]
    return left, np.ascontiguousarray(right)


def warp_view(image: np.ndarray, shift: np.ndarray) -> np.ndarray:
    """Forward-warp ``image`` along rows by ``shift`` pixels (larger shift = nearer), holes filled
    from the left (the background side for this direction)."""
    height, width = shift.shape
    columns = np.arange(width, dtype=np.int32)
    target = columns + np.rint(shift).astype(np.int32)
    reach = np.maximum.accumulate(target, axis=1)
    visible = np.empty_like(target, dtype=bool)
    visible[:, 0] = True
    visible[:, 1:] = target[:, 1:] > reach[:, :-1]
    visible &= (target >= 0) & (target < width)

    rows = np.broadcast_to(np.arange(height, dtype=np.int32)[:, None], target.shape)
    source_of = np.full((height, width), -1, dtype=np.int32)
    source_of[rows[visible], target[visible]] = np.broadcast_to(columns, target.shape)[visible]

    # Holes take the nearest written pixel to their left; at the left border, the first to the right.
    written = source_of >= 0
    from_left = np.maximum.accumulate(np.where(written, columns, -1), axis=1)
    from_right = np.minimum.accumulate(np.where(written, columns, width)[:, ::-1], axis=1)[:, ::-1]
    nearest = np.where(from_left >= 0, from_left, np.minimum(from_right, width - 1))
    chosen = np.take_along_axis(source_of, nearest, axis=1)
    chosen = np.where(chosen >= 0, chosen, columns)  # a row with nothing visible keeps the source
    return np.take_along_axis(image, chosen[:, :, None], axis=1)


LAYOUTS = {"full_sbs": "_LRF_Full_SBS"}


def compose(left: np.ndarray, right: np.ndarray, layout: str) -> np.ndarray:
    """Pack two views into one frame of the given layout."""
    if layout == "full_sbs":
        return np.concatenate([left, right], axis=1)
    raise ValueError(f"unknown layout {layout!r} (valid: {', '.join(LAYOUTS)})")
