"""The near-map stage: raw DA3 depth → near maps (0..1, larger = nearer) for rendering.

Methods: ``frame`` normalises each frame on its own (flickers when content moves in and out);
``ema`` normalises with ranges smoothed over the whole video and reset at shot cuts (a per-video
plan, so segments agree exactly with an unsegmented run); ``nvds`` runs the NVDS stabiliser on the
RGBD frames (its output is already a stabilised near map and is stored as is). Every method works
on one segment (a frame range); NVDS primes its window with the 3 raw frames before the segment.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from stereo3d.atomic import atomic_output
from stereo3d.mapstore import MapReader, MapWriter
from stereo3d.near import ema_ranges, near_from_depth, normalise, percentile_range, reciprocal
from stereo3d.progress import Progress
from stereo3d.runtime import SessionOptions
from stereo3d.video import FrameReader

log = logging.getLogger(__name__)

METHODS = ("frame", "ema", "nvds")
NVDS_HISTORY = 3  # frames before the target in the NVDS window


def make_ema_plan(depth_segments: list[str | Path], out: str | Path, low_pct: float = 2.0, high_pct: float = 98.0,
                  ema_alpha: float = 0.1, cut_threshold: float = 0.25) -> dict:
    """The per-frame normalisation ranges of a whole video (``.npz``: ``lo``, ``hi``), from its depth
    segments in order. Reads depth maps and the picture changes the depth stage recorded."""
    ranges, changes = [], []
    for path in depth_segments:
        with MapReader(path) as depths:
            for raw in depths:
                ranges.append(percentile_range(reciprocal(raw), low_pct, high_pct))
            recorded = depths.attrs.get("changes") or [None] * depths.frames
            changes.extend(np.nan if c is None else c for c in recorded)
    smoothed = ema_ranges(np.array(ranges).reshape(-1, 2), np.array(changes, dtype=np.float64), ema_alpha,
                          cut_threshold)
    with atomic_output(out) as tmp, open(tmp, "wb") as fh:
        np.savez(fh, lo=smoothed[:, 0], hi=smoothed[:, 1])
    return {"frames": len(ranges)}


def make_near_maps(video: str | Path, probe: dict, depth: str | Path, out: str | Path, method: str = "ema",
                   low_pct: float = 2.0, high_pct: float = 98.0, plan: str | Path | None = None,
                   previous_depth: str | Path | None = None, nvds_models: str | Path | None = None,
                   nvds_tier: tuple[int, int] = (512, 288), options: SessionOptions = SessionOptions()) -> dict:
    """Write one near map per depth map of the segment ``depth`` to the map store ``out``."""
    if method not in METHODS:
        raise ValueError(f"unknown stabilisation method {method!r} (valid: {', '.join(METHODS)})")
    with MapReader(depth) as depths:
        start = int(depths.attrs.get("start", 0))
        attrs = {"method": method, "source_depth": Path(depth).name, "start": start}
        progress = Progress(log, f"near maps ({method}) {Path(video).name} from frame {start}", depths.frames)
        with MapWriter(out, "linear", attrs=attrs) as store:
            if method == "frame":
                for raw in depths:
                    store.append(near_from_depth(raw, low_pct, high_pct))
                    progress.advance(1)
            elif method == "ema":
                if plan is None:
                    raise ValueError("the ema method needs the video's plan")
                with np.load(plan) as ranges:
                    lo, hi = ranges["lo"][start:], ranges["hi"][start:]
                for index, raw in enumerate(depths):
                    store.append(normalise(reciprocal(raw), lo[index], hi[index]))
                    progress.advance(1)
            else:
                _nvds(video, probe, depths, store, progress, start, low_pct, high_pct, previous_depth, nvds_models,
                      nvds_tier, options)
    return {"frames": progress.done, "fps": progress.finish(), "method": method}


def _nvds(video, probe, depths, store, progress, start, low_pct, high_pct, previous_depth, models, tier,
          options) -> None:
    from stereo3d.nvds.stabiliser import open_stabiliser

    stabiliser = open_stabiliser(models, *tier, options)
    history = min(NVDS_HISTORY, start)
    if history and previous_depth is None:
        raise ValueError("an NVDS segment after the first needs the previous segment's depth")
    size = _fit_inside(probe, tier)
    with FrameReader(video, probe, start=start - history, count=depths.frames + history, size=size) as frames:
        if history:
            # Causal: the window sees the raw inputs of the frames before the segment, never their output.
            with MapReader(previous_depth) as previous:
                earlier = previous.read(previous.frames - history, history)
            stabiliser.prime((next(frames), near_from_depth(raw, low_pct, high_pct)) for raw in earlier)
        for raw, rgb in zip(depths, frames, strict=True):
            store.append(stabiliser.step(rgb, near_from_depth(raw, low_pct, high_pct)))
            progress.advance(1)


def _fit_inside(probe: dict, tier: tuple[int, int]) -> tuple[int, int]:
    """The frame size that fits the NVDS tier keeping the aspect (decoded at this size directly)."""
    width, height = probe["video"]["display_width"], probe["video"]["display_height"]
    scale = min(tier[0] / width, tier[1] / height)
    return max(2, round(width * scale) // 2 * 2), max(2, round(height * scale) // 2 * 2)
