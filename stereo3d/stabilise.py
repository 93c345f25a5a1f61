"""The near-map stage: raw DA3 depth → near maps (0..1, larger = nearer) for rendering.

Methods: ``frame`` normalises each frame on its own (flickers when content moves in and out);
``ema`` smooths the normalisation range over time and resets at shot cuts; ``nvds`` runs the NVDS
stabiliser on the RGBD frames (its output is already a stabilised near map and is stored as is).
"""

from __future__ import annotations

import logging
from pathlib import Path

from stereo3d.mapstore import MapReader, MapWriter
from stereo3d.near import CutDetector, EmaNormaliser, near_from_depth
from stereo3d.progress import Progress
from stereo3d.runtime import SessionOptions
from stereo3d.video import FrameReader

log = logging.getLogger(__name__)

METHODS = ("frame", "ema", "nvds")
THUMB_SIZE = (64, 36)  # grey thumbnails are enough to see a cut, and cheap to decode


def make_near_maps(video: str | Path, probe: dict, depth: str | Path, out: str | Path, method: str = "ema",
                   low_pct: float = 2.0, high_pct: float = 98.0, ema_alpha: float = 0.1,
                   cut_threshold: float = 0.25, nvds_models: str | Path | None = None,
                   nvds_tier: tuple[int, int] = (512, 288), options: SessionOptions = SessionOptions()) -> dict:
    """Write one near map per depth map of ``depth`` to the map store ``out``."""
    if method not in METHODS:
        raise ValueError(f"unknown stabilisation method {method!r} (valid: {', '.join(METHODS)})")
    with MapReader(depth) as depths:
        start = int(depths.attrs.get("start", 0))
        attrs = {"method": method, "source_depth": Path(depth).name, "start": start}
        progress = Progress(log, f"near maps ({method}) {Path(video).name}", depths.frames)
        with MapWriter(out, "linear", attrs=attrs) as store:
            if method == "frame":
                for raw in depths:
                    store.append(near_from_depth(raw, low_pct, high_pct))
                    progress.advance(1)
            elif method == "ema":
                _ema(video, probe, depths, store, progress, start, low_pct, high_pct, ema_alpha, cut_threshold)
            else:
                _nvds(video, probe, depths, store, progress, start, low_pct, high_pct, nvds_models, nvds_tier,
                      options)
    return {"frames": progress.done, "fps": progress.finish(), "method": method}


def _ema(video, probe, depths, store, progress, start, low_pct, high_pct, alpha, cut_threshold) -> None:
    normaliser = EmaNormaliser(alpha=alpha, low_pct=low_pct, high_pct=high_pct)
    cuts = CutDetector(threshold=cut_threshold)
    with FrameReader(video, probe, start=start, count=depths.frames, size=THUMB_SIZE) as thumbs:
        for raw, thumb in zip(depths, thumbs, strict=True):
            store.append(normaliser.step(raw, cut=cuts.step(thumb)))
            progress.advance(1)


def _nvds(video, probe, depths, store, progress, start, low_pct, high_pct, models, tier, options) -> None:
    from stereo3d.nvds.stabiliser import open_stabiliser

    stabiliser = open_stabiliser(models, *tier, options)
    with FrameReader(video, probe, start=start, count=depths.frames, size=_fit_inside(probe, tier)) as frames:
        for raw, rgb in zip(depths, frames, strict=True):
            store.append(stabiliser.step(rgb, near_from_depth(raw, low_pct, high_pct)))
            progress.advance(1)


def _fit_inside(probe: dict, tier: tuple[int, int]) -> tuple[int, int]:
    """The frame size that fits the NVDS tier keeping the aspect (decoded at this size directly)."""
    width, height = probe["video"]["display_width"], probe["video"]["display_height"]
    scale = min(tier[0] / width, tier[1] / height)
    return max(2, round(width * scale) // 2 * 2), max(2, round(height * scale) // 2 * 2)
