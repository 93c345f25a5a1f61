"""Scores of rendered views against the true ones (``stereo3d.qc.truth``), and the classical methods they are
measured against.

The pixels both eyes see (``VISIBLE``) and the disoccluded ones (``HOLE``) are scored apart, since they fail for
different reasons: the first by resampling and edges, the second by the fill. ``EDGE`` pixels (part seen, part
hidden) are scored on their own too; ``OUTSIDE`` ones (beyond the source's frame) are not scored. Per class: PSNR
over its pixels, SSIM (of luma, mean over its pixels), and for holes the fill's **flicker**: the mean absolute
frame-to-frame change of the view inside holes where the truth is still (a fill that differs from frame to frame
where nothing moves is seen as shimmer).

The classical baselines: ``nearest_warp`` (each source pixel moved by its rounded parallax, the nearest winning:
no resampling, holes left open) and ``telea`` (OpenCV's Telea inpainting of those holes).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import cv2
import numpy as np

from stereo3d.qc.truth import EDGE, HOLE, VISIBLE

CLASSES = {"visible": VISIBLE, "hole": HOLE, "edge": EDGE}


@dataclass
class Tally:
    """Running sums for one method over many frames and both eyes."""

    squared: dict = field(default_factory=lambda: dict.fromkeys(CLASSES, 0.0))
    ssim: dict = field(default_factory=lambda: dict.fromkeys(CLASSES, 0.0))
    count: dict = field(default_factory=lambda: dict.fromkeys(CLASSES, 0))
    flicker: float = 0.0
    flicker_count: int = 0
    truth_flicker: float = 0.0  # the same pixels' change in the truth (what "still" lets through)
    # Of them, the pixels the method's fill paints in both frames (its holes in both): the fill's own flicker. The
    # rest are pixels the warp covers in one frame or both, the same for every fill of the same holes.
    fill_flicker: float = 0.0
    fill_flicker_count: int = 0
    # Each change's sums (label, the fill's own, the warp's) where labelled: where the flicker comes from.
    changes: list = field(default_factory=list)

    def add(self, view: np.ndarray, truth: np.ndarray, classes: np.ndarray) -> None:
        """Scores one view against its truth, per class of its pixels."""
        error = (view.astype(np.float64) - truth.astype(np.float64)) ** 2
        ssim_map = ssim_luma(view, truth)
        for name, value in CLASSES.items():
            mask = classes == value
            self.squared[name] += float(error[mask].sum())
            self.ssim[name] += float(ssim_map[mask].sum())
            self.count[name] += int(mask.sum())

    def add_change(self, previous: np.ndarray, view: np.ndarray, previous_truth: np.ndarray, truth: np.ndarray,
                   still: np.ndarray, painted: np.ndarray | None = None, label: str | None = None) -> None:  # fmt: skip
        """The fill's change from the previous frame at the ``still`` pixels: holes in both frames that see only
        surfaces that do not move, through a camera that does not move. ``painted``: the pixels that the method
        fills in both frames (its own holes), where known; ``label``: the change's name among the largest
        (``scores``' ``largest_changes``)."""
        truth_change = np.abs(truth.astype(np.float32) - previous_truth.astype(np.float32)).mean(axis=2)
        mask = still
        change = np.abs(view.astype(np.float32) - previous.astype(np.float32)).mean(axis=2)
        total = float(change[mask].sum())
        self.flicker += total
        self.truth_flicker += float(truth_change[mask].sum())
        self.flicker_count += int(mask.sum())
        own = 0.0
        if painted is not None:
            own = float(change[mask & painted].sum())
            self.fill_flicker += own
            self.fill_flicker_count += int((mask & painted).sum())
        if label is not None and mask.any():
            self.changes.append((label, own, total - own))

    def scores(self) -> dict:
        out = {}
        for name in CLASSES:
            n = self.count[name]
            mse = self.squared[name] / max(1, 3 * n)
            out[f"{name}_psnr_db"] = round(10 * np.log10(255.0**2 / mse), 3) if n and mse > 0 else None
            out[f"{name}_ssim"] = round(self.ssim[name] / n, 4) if n else None
            out[f"{name}_pixels"] = n
        out["hole_flicker"] = round(self.flicker / self.flicker_count, 4) if self.flicker_count else None
        out["hole_flicker_truth"] = round(self.truth_flicker / self.flicker_count, 4) if self.flicker_count else None
        out["hole_flicker_pixels"] = self.flicker_count
        if self.fill_flicker_count:
            # The fill's own flicker (over the pixels it paints in both frames) and their share of all flicker.
            out["fill_flicker"] = round(self.fill_flicker / self.fill_flicker_count, 4)
            out["fill_flicker_share"] = round(self.fill_flicker / max(self.flicker, 1e-9), 4)
            # The rest, over all the still pixels: what a fill that never changed would score with this warp.
            out["warp_flicker"] = round((self.flicker - self.fill_flicker) / self.flicker_count, 4)
        if self.changes:
            # The largest frame changes (sums of grey levels over the still pixels): one event can be most of it.
            largest = sorted(self.changes, key=lambda change: -(change[1] + change[2]))[:5]
            out["largest_changes"] = [{"change": label, "fill_own": round(own), "warp": round(warp)}
                                      for label, own, warp in largest]  # fmt: skip
        return out


def psnr(view: np.ndarray, truth: np.ndarray, mask: np.ndarray) -> float:
    """PSNR (dB, 8-bit) of ``view`` against ``truth`` over the pixels of ``mask`` (every channel)."""
    error = (view[mask].astype(np.float64) - truth[mask].astype(np.float64)) ** 2
    return float(10 * np.log10(255.0**2 / max(error.mean(), 1e-12)))


def ssim_luma(view: np.ndarray, truth: np.ndarray) -> np.ndarray:
    """The SSIM map (Wang et al. 2004: 11-tap Gaussian window of sigma 1.5, K1 = 0.01, K2 = 0.03) of the luma of
    two 8-bit RGB images."""
    a, b = (cv2.cvtColor(image, cv2.COLOR_RGB2GRAY).astype(np.float32) for image in (view, truth))
    c1, c2 = (0.01 * 255) ** 2, (0.03 * 255) ** 2

    def blur(x):
        return cv2.GaussianBlur(x, (11, 11), 1.5)

    mu_a, mu_b = blur(a), blur(b)
    var_a = blur(a * a) - mu_a * mu_a
    var_b = blur(b * b) - mu_b * mu_b
    cov = blur(a * b) - mu_a * mu_b
    return ((2 * mu_a * mu_b + c1) * (2 * cov + c2)) / ((mu_a * mu_a + mu_b * mu_b + c1) * (var_a + var_b + c2))


def nearest_warp(frame: np.ndarray, shift_px: np.ndarray, mirrored: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """A plain depth-ordered forward warp: each source pixel moves by its rounded shift (px, + = right; the right
    view passes the mirrored sign), the one with the larger shift (nearer, for the left view) winning where two
    land on one pixel. Returns the view and its holes (pixels nothing landed on)."""
    height, width = shift_px.shape
    rows, cols = np.mgrid[0:height, 0:width]
    target = cols + np.rint(shift_px).astype(np.int64)
    order = np.argsort(-shift_px if mirrored else shift_px, axis=None, kind="stable")  # nearest written last
    inside = (target.ravel()[order] >= 0) & (target.ravel()[order] < width)
    order = order[inside]
    view = np.zeros_like(frame)
    filled = np.zeros((height, width), bool)
    view[rows.ravel()[order], target.ravel()[order]] = frame.reshape(-1, frame.shape[2])[order]
    filled[rows.ravel()[order], target.ravel()[order]] = True
    return view, ~filled


def telea(view: np.ndarray, holes: np.ndarray, radius: int = 3) -> np.ndarray:
    """OpenCV's Telea inpainting of ``holes`` (Telea 2004: fast marching from the hole's border inward)."""
    return cv2.inpaint(view, holes.astype(np.uint8), radius, cv2.INPAINT_TELEA)
