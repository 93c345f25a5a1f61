"""``ema``: the normalisation range smoothed by an exponential moving average over time, reset at shot cuts.

The ranges are planned once over the whole video (``plan``), from every depth segment in order, so a segmented
run gives exactly the maps of an unsegmented one; each segment then only applies its slice of the plan.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from stereo3d.io.atomic import atomic_output
from stereo3d.io.frametable import FrameTable
from stereo3d.io.mapstore import MapReader, partial_path
from stereo3d.io.resume import job_identity
from stereo3d.stabilisers.registry import NearJob, Stabiliser
from stereo3d.stabilisers.settings import NearSettings
from stereo3d.stereo.cuts import CutDetector
from stereo3d.stereo.near import normalise, percentile_range, reciprocal

log = logging.getLogger(__name__)


def range_table(depth_segments: list[str | Path], out: str | Path, settings: NearSettings) -> FrameTable:
    """The plan's working table beside ``out``: each frame's own range of inverse depth and its picture change
    (what a killed plan leaves, for the next attempt of the same plan)."""
    identity = job_identity(depth_segments, low_pct=settings.low_pct, high_pct=settings.high_pct)
    return FrameTable(partial_path(out), ("lo", "hi", "change"), identity)


def plan(depth_segments: list[str | Path], out: str | Path, settings: NearSettings) -> dict:
    """The per-frame normalisation ranges of a whole video (``.npz``: ``lo``, ``hi``, and ``first``: the video
    frame of their first row), from its depth segments in order. Reads depth maps and the picture changes the depth
    stage recorded. The segments may also be a clip's alone (the preview): the plan then starts at its frame.

    Reading every depth map of a film takes minutes, so the frames' own ranges are kept in a resumable table as
    they are found (``stereo3d.io.frametable``): a killed plan continues after its last stored chunk."""
    out = Path(out)
    low, high = settings.low_pct, settings.high_pct
    table = range_table(depth_segments, out, settings)
    if table.resumed:
        total = sum(_frames(path) for path in depth_segments)
        log.info("%s: resuming the plan at frame %d of %d", out.name, table.resumed, total)
    with MapReader(depth_segments[0]) as depths:
        plan_first = int(depths.attrs.get("start", 0))
    first = 0  # the segment's first frame, counted from the plan's first
    for path in depth_segments:
        with MapReader(path) as depths:
            if first + depths.frames > table.count:
                recorded = depths.series("changes")
                offset = table.count - first
                for index, raw in enumerate(depths.from_frame(offset), start=offset):
                    lo, hi = percentile_range(reciprocal(raw), low, high)
                    table.append(lo=lo, hi=hi, change=np.nan if recorded is None else recorded[index])
            first += depths.frames
    columns = table.read()
    smoothed = ema_ranges(
        np.stack([columns["lo"], columns["hi"]], axis=1),
        columns["change"],
        settings.option("stabilise.ema_alpha"),
        settings.option("stabilise.cut_threshold"),
    )
    with atomic_output(out) as tmp:
        with open(tmp, "wb") as fh:
            np.savez(fh, lo=smoothed[:, 0], hi=smoothed[:, 1], first=np.int64(plan_first))
        table.discard()  # before the plan appears (FrameTable.discard says why)
    return {"frames": len(smoothed)}


def _frames(path: str | Path) -> int:
    with MapReader(path) as depths:
        return depths.frames


def run(job: NearJob) -> None:
    if job.plan is None:
        raise ValueError("the ema method needs the video's plan")
    with np.load(job.plan) as ranges:
        offset = job.start - int(ranges["first"]) if "first" in ranges else job.start  # plans before `first`: 0
        lo, hi = ranges["lo"][offset:], ranges["hi"][offset:]
    for index, raw in enumerate(job.depths):
        job.write(normalise(reciprocal(raw), lo[index], hi[index]))


def ema_ranges(
    ranges: np.ndarray, changes: np.ndarray, alpha: float, cut_threshold: float, cut_ratio: float = 3.0
) -> np.ndarray:
    """Normalisation ranges [n, 2] smoothed by an exponential moving average over a whole video.

    ``ranges`` are each frame's own (lo, hi) of inverse depth; ``changes`` each frame's picture
    change against the previous frame (NaN for the first). ``alpha`` is the weight of the newest
    frame (1 = per-frame, no smoothing); a shot cut restarts the average at the new frame. Run over
    the whole video at once, so the result does not depend on how the video is cut into segments.
    """
    ranges = np.asarray(ranges, dtype=np.float64)
    out = np.empty_like(ranges)
    detector = CutDetector(cut_threshold, cut_ratio)
    current = None
    for index, (frame_range, change) in enumerate(zip(ranges, changes, strict=True)):
        if detector.step(change) or current is None:
            current = frame_range.copy()
        else:
            current += alpha * (frame_range - current)
        out[index] = current
    return out


STABILISER = Stabiliser(
    name="ema",
    summary="normalisation range smoothed over time, reset at shot cuts",
    run=run,
    keys=("stabilise.ema_alpha", "stabilise.cut_threshold"),
    plan=plan,
)
