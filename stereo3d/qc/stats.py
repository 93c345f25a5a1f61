"""QC statistics over a video's map stores: flicker of the raw and stabilised maps, screen parallax percentiles and
comfort, window violations at the left/right frame edges, and the frame times they are plotted against.

Map stores are given as lists (one per segment, in frame order) and read as one sequence. Statistics run on
maps shrunk to at most ``STATS_WIDTH`` pixels wide: the measures are means and percentiles of relative
quantities, which shrinking barely changes, and a feature film then costs minutes, not an hour.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from pathlib import Path

import cv2
import numpy as np

from stereo3d.io.mapstore import MapReader
from stereo3d.progress import Progress
from stereo3d.stereo.near import near_from_depth
from stereo3d.stereo.warp import StereoSettings, parallax_px
from stereo3d.stereo.window import (
    EDGE_BAND_PCT,
    VIOLATION_PCT,
    edge_parallax,
    frame_settings,
    smooth_widths,
    violation_need,
)

log = logging.getLogger(__name__)

STATS_WIDTH = 160  # pixels: maps are shrunk to this width for the statistics (see the module doc)
PERCENTILES = (1, 5, 50, 95, 99)  # of screen parallax, per frame
HIST_RANGE_PCT = 25.0  # parallax histogram covers ±this % of the width (divergence ≤ 10 plus IPD offset ≤ 5)
HIST_BINS = 5000  # 0.01 % of the width per bin


def map_statistics(
    depth: Sequence[str | Path],
    near: Sequence[str | Path],
    settings: StereoSettings,
    near_pct: tuple[float, float],
    comfort_limit_pct: float,
    frame_width: int | None = None,
    fps: float = 25.0,
    planes: np.ndarray | None = None,
) -> dict:
    """Flicker of raw (per-frame normalised) and stabilised maps, parallax percentiles and comfort, and window
    violations, in one pass.

    Window violations (``stereo3d.stereo.window``) are measured on the full near maps at ``frame_width`` (the
    video's display width, which the renderer renders at; None: the maps' own width), exactly as the render
    plans its floating window: per frame, the edge parallax of the left and right edges (the largest in-front
    ``Parallax.px`` of the columns within ``EDGE_BAND_PCT`` of the width from that edge, border taper included);
    a frame violates when either exceeds ``VIOLATION_PCT`` of the width. With ``floating_window: auto`` the
    window's widths (planned at ``fps``) are computed too, and a frame still violates after it when an edge's
    parallax exceeds that edge's window by more than the threshold."""
    depth_maps, near_maps = MapSequence(depth), MapSequence(near)
    check_counts(None, depth_maps, near_maps)
    raw_flicker, stable_flicker, per_frame = [], [], []
    hist = np.zeros(HIST_BINS, dtype=np.int64)
    previous_raw = previous_stable = None
    progress = Progress(log, "qc maps", len(near_maps))
    edges = []
    plane_at = None if planes is None else planes.__getitem__
    for index, (depth_map, near_map) in enumerate(zip(depth_maps, near_maps, strict=True)):
        # ``planes``: each frame's planned zero plane (convergence auto), as the render takes it.
        frame = frame_settings(settings, near_map, plane_at, index)
        edges.append(edge_parallax(near_map, frame_width or near_map.shape[1], frame))
        raw = _shrink(near_from_depth(depth_map, *near_pct))
        stable = _shrink(near_map)
        if previous_raw is not None:
            raw_flicker.append(_difference(previous_raw, raw))
            stable_flicker.append(_difference(previous_stable, stable))
        previous_raw, previous_stable = raw, stable
        width = stable.shape[1]
        pct = parallax_px(stable, width, frame) * np.float32(100.0 / width)
        per_frame.append(np.percentile(pct, PERCENTILES))
        hist += np.histogram(pct, bins=HIST_BINS, range=(-HIST_RANGE_PCT, HIST_RANGE_PCT))[0]
        progress.advance(1)
    progress.finish()
    per_frame = np.asarray(per_frame, dtype=np.float64).reshape(-1, len(PERCENTILES))
    raw_flicker, stable_flicker = np.asarray(raw_flicker), np.asarray(stable_flicker)
    extreme = np.maximum(np.abs(per_frame[:, 0]), np.abs(per_frame[:, -1])) if len(per_frame) else np.zeros(0)
    beyond = extreme > comfort_limit_pct
    window, window_per_frame = window_statistics(np.asarray(edges).reshape(-1, 2), frame_width or width_of(near_maps),
                                                 settings, fps)  # fmt: skip
    raw_mean = float(raw_flicker.mean()) if raw_flicker.size else 0.0
    stable_mean = float(stable_flicker.mean()) if stable_flicker.size else 0.0
    return {
        "flicker": {
            "raw_mean": raw_mean,
            "stabilised_mean": stable_mean,
            "raw_p95": float(np.percentile(raw_flicker, 95)) if raw_flicker.size else 0.0,
            "stabilised_p95": float(np.percentile(stable_flicker, 95)) if stable_flicker.size else 0.0,
            "ratio": stable_mean / raw_mean if raw_mean > 0 else None,
        },
        "parallax_pct": {f"p{p}": _hist_percentile(hist, p) for p in PERCENTILES},
        "comfort": {
            "limit_pct": float(comfort_limit_pct),
            "beyond_frames": int(beyond.sum()),
            "beyond_pct": float(100.0 * beyond.mean()) if beyond.size else 0.0,
            "rule": "a frame is beyond when its 1st or 99th parallax percentile exceeds the limit in magnitude",
        },
        "window": window,
        "flicker_raw": raw_flicker,
        "flicker_stabilised": stable_flicker,
        "parallax_per_frame": per_frame,
        "window_per_frame": window_per_frame,
    }


def window_statistics(edges: np.ndarray, width: int, settings: StereoSettings, fps: float) -> tuple[dict, np.ndarray]:
    """Window violations of a video from its per-frame edge parallax (px, [frames, 2]: left, right) at frame
    ``width``: the stats, and per frame (% of the width) the left and right edge parallax and the floating
    window's left and right widths (0 unless ``floating_window: auto``)."""
    scale = 100.0 / width
    limit = VIOLATION_PCT / 100.0 * width
    if settings.floating_window == "auto":
        widths = smooth_widths(violation_need(edges, width), fps)
    else:
        widths = np.zeros_like(edges, dtype=np.float64)
    before = edges.max(axis=1, initial=0.0) > limit if len(edges) else np.zeros(0, bool)
    left_over = edges - widths  # how far in front of the window the content at the edge still is
    after = left_over.max(axis=1, initial=0.0) > limit if len(edges) else np.zeros(0, bool)
    stats = {
        "floating_window": settings.floating_window,
        "band_pct": EDGE_BAND_PCT,
        "threshold_pct": VIOLATION_PCT,
        "violation_frames": int(before.sum()),
        "violation_pct": float(100.0 * before.mean()) if before.size else 0.0,
        "worst_pct": float(edges.max(initial=0.0) * scale),
        "after_window_pct": float(100.0 * after.mean()) if after.size else 0.0,
        "window_max_pct": float(widths.max(initial=0.0) * scale),
        "window_max_step_pct": float(np.abs(np.diff(widths, axis=0)).max(initial=0.0) * scale),
        "rule": (
            f"a frame violates the window when content within {EDGE_BAND_PCT:g} % of the width of the left or "
            f"right edge is more than {VIOLATION_PCT:g} % of the width in front of the screen (parallax as "
            "rendered, border taper included); after the floating window, when it is that far in front of the "
            "window's edge"
        ),
    }
    return stats, np.concatenate([edges, widths], axis=1) * scale


def mean_abs_change(frames) -> np.ndarray:
    """Flicker measure: mean |Δ| between each pair of consecutive maps (length n - 1)."""
    frames = [np.asarray(f, dtype=np.float32) for f in frames]
    return np.array([_difference(a, b) for a, b in zip(frames, frames[1:])], dtype=np.float64)


def frame_times(probe: dict) -> np.ndarray:
    """Presentation time (s) of every frame: exact for VFR, from the frame rate where the probe lacks them."""
    video = probe["video"]
    pts = probe.get("frame_pts_s")
    if pts and len(pts) == video["frame_count"]:
        return np.asarray(pts, dtype=np.float64) - float(pts[0])
    return np.arange(video["frame_count"], dtype=np.float64) / float(video["fps"])


class MapSequence:
    """Several map stores (the segments of one video, in order) read as one run of frames."""

    def __init__(self, paths: Sequence[str | Path] | str | Path):
        self.paths = [Path(paths)] if isinstance(paths, str | Path) else [Path(p) for p in paths]
        self.counts = []
        for path in self.paths:
            with MapReader(path) as reader:
                self.counts.append(reader.frames)
        self.starts = np.concatenate([[0], np.cumsum(self.counts)]).astype(int)

    def __len__(self) -> int:
        return int(self.starts[-1])

    def __iter__(self) -> Iterator[np.ndarray]:
        for path in self.paths:
            with MapReader(path) as reader:
                yield from reader

    def frame(self, index: int) -> np.ndarray:
        part = int(np.searchsorted(self.starts, index, side="right")) - 1
        if not 0 <= index < len(self) or part >= len(self.paths):
            raise IndexError(f"frame {index} outside 0..{len(self)}")
        with MapReader(self.paths[part]) as reader:
            return reader.read(index - int(self.starts[part]), 1)[0]


def width_of(maps: MapSequence) -> int:
    """The width of the maps of a sequence (1 if it has none)."""
    for path in maps.paths:
        with MapReader(path) as reader:
            return int(reader.shape[1])
    return 1


def _difference(previous: np.ndarray, current: np.ndarray) -> float:
    return float(np.mean(np.abs(current - previous)))


def check_counts(total: int | None, *sequences: MapSequence) -> None:
    counts = {len(s) for s in sequences} | ({total} if total is not None else set())
    if len(counts) > 1:
        names = ", ".join(str(p) for s in sequences for p in s.paths)
        raise ValueError(f"frame counts disagree ({sorted(counts)}) between the video and {names}")


def _shrink(near: np.ndarray) -> np.ndarray:
    near = np.asarray(near, dtype=np.float32)
    height, width = near.shape
    if width <= STATS_WIDTH:
        return near
    size = (STATS_WIDTH, max(1, round(height * STATS_WIDTH / width)))
    return cv2.resize(near, size, interpolation=cv2.INTER_AREA)


def _hist_percentile(hist: np.ndarray, pct: float) -> float:
    total = hist.sum()
    if total == 0:
        return 0.0
    cdf = np.cumsum(hist)
    index = int(np.searchsorted(cdf, pct / 100.0 * total))
    width = 2 * HIST_RANGE_PCT / HIST_BINS
    return round(-HIST_RANGE_PCT + (index + 0.5) * width, 4)
