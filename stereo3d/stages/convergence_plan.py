"""The convergence_plan stage: with ``render.convergence: auto``, the screen plane of every frame of a video,
planned over its near maps in order before any segment renders (``stereo3d.stereo.convergence``), so that every
segment renders with the planes of a whole-video job.

Each frame's subject and nearest content are found on its near map reduced to at most ``PLAN_WIDTH`` columns (a
film of two hours is 172,800 maps: the plan reads them all), and kept in a resumable table as they are found
(``stereo3d.io.frametable``): a killed plan continues after its last stored chunk. Cuts come from the picture
changes the depth stage recorded.
"""

from __future__ import annotations

import logging
from pathlib import Path

import cv2
import numpy as np

from stereo3d.io.atomic import atomic_output
from stereo3d.io.frametable import FrameTable
from stereo3d.io.mapstore import MapReader, partial_path
from stereo3d.io.resume import job_identity
from stereo3d.stereo import convergence

log = logging.getLogger(__name__)

PLAN_WIDTH = convergence.REDUCED_WIDTH


def make_convergence_plan(near_segments: list[str | Path], depth_segments: list[str | Path], out: str | Path,
                          divergence_pct: float, front_limit_pct: float, fps: float) -> dict:  # fmt: skip
    """Write ``out`` (``.npz``): per frame the ``zero_plane`` (near value at the screen), the ``subject`` and
    ``front`` near values it was planned from, the ``shot`` number, and ``first``: the video frame of the first
    row. The segments are the video's in order (or a clip's alone: the preview)."""
    out = Path(out)
    identity = job_identity([*near_segments, *depth_segments], plan_width=PLAN_WIDTH)
    table = FrameTable(partial_path(out), ("subject", "front", "change"), identity)
    if table.resumed:
        log.info("%s: resuming the plan at frame %d", out.name, table.resumed)
    changes = _changes(depth_segments)
    with MapReader(near_segments[0]) as reader:
        first_frame = int(reader.attrs.get("start", 0))
    done, previous = 0, None
    for path in near_segments:
        with MapReader(path) as reader:
            if done + reader.frames <= table.count:
                done += reader.frames
                continue
            offset = max(0, table.count - done)
            if offset:
                previous = _reduced(reader.read(offset - 1, 1)[0])
            for index, near in enumerate(reader.from_frame(offset), start=done + offset):
                small = _reduced(near)
                change = changes[index] if index < len(changes) else np.nan
                table.append(subject=convergence.subject_near(small, previous), front=convergence.front_near(small),
                             change=change)  # fmt: skip
                previous = small
            done += reader.frames
    columns = table.read()
    shots = convergence.shots_of(columns["change"])
    # A new shot has no previous frame to compare motion with; its first subject is found again without one.
    planes = convergence.plan(columns["subject"], columns["front"], shots, fps, divergence_pct, front_limit_pct)
    with atomic_output(out) as tmp:
        with open(tmp, "wb") as fh:
            np.savez(fh, zero_plane=planes, subject=columns["subject"], front=columns["front"], shot=shots,
                     first=np.int64(first_frame))  # fmt: skip
        table.discard()  # before the plan appears (FrameTable.discard says why)
    log.info("%s: %d frames, %d shots, screen plane %.2f .. %.2f", out.name, len(planes), int(shots.max(initial=0)) + 1,
             float(planes.min(initial=0)), float(planes.max(initial=0)))  # fmt: skip
    return {"frames": len(planes), "shots": int(shots.max(initial=0)) + 1}


def plan_of_store(
    near: str | Path, fps: float, divergence_pct: float, front_limit_pct: float
) -> tuple[int, np.ndarray]:
    """(first frame, zero planes) of one near-map store planned on its own, as one shot: for a job given no plan
    of its video (the preview's clips, a second or two each)."""
    subjects, fronts, previous = [], [], None
    with MapReader(near) as reader:
        first = int(reader.attrs.get("start", 0))
        for near_map in reader:
            small = _reduced(near_map)
            subjects.append(convergence.subject_near(small, previous))
            fronts.append(convergence.front_near(small))
            previous = small
    shots = np.zeros(len(subjects), np.int64)
    return first, convergence.plan(np.array(subjects), np.array(fronts), shots, fps, divergence_pct, front_limit_pct)


def _reduced(near: np.ndarray) -> np.ndarray:
    near = np.asarray(near, np.float32)
    if near.shape[1] <= PLAN_WIDTH:
        return near
    height = max(1, round(near.shape[0] * PLAN_WIDTH / near.shape[1]))
    return cv2.resize(np.nan_to_num(near, nan=0.0), (PLAN_WIDTH, height), interpolation=cv2.INTER_AREA)


def _changes(depth_segments: list[str | Path]) -> np.ndarray:
    """The picture change of every frame (against the one before), from the depth stores in order."""
    parts = []
    for path in depth_segments:
        with MapReader(path) as reader:
            series = reader.series("changes")
            parts.append(np.full(reader.frames, np.nan) if series is None else np.asarray(series, np.float64))
    return np.concatenate(parts) if parts else np.empty(0)
