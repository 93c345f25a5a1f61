"""The probe stage: one source video's streams, frames and timing, written as JSON for the other stages.

The probe also finds where the picture lies in the frame (``video["picture"]``: x, y, width, height in display
pixels; the whole frame for a video without baked-in bars; see ``stereo3d.stereo.bars``), from a sample of frames
spread over the video: the DA3 export a video runs through is chosen when the workflow plans, from the picture's
shape.

A file that is not a video this workflow can convert (empty, truncated, no video stream, 1x1, ...) still gets its
probe, holding the one-line reason under ``error``: the job succeeds, so the rest of the library and its report
go on, and the file is not probed again until it changes (its fingerprint is a parameter of the rule).
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

import numpy as np

from stereo3d.errors import BadVideo
from stereo3d.io.atomic import atomic_output
from stereo3d.io.decode import sample_frames
from stereo3d.io.probe import probe_video
from stereo3d.stereo.bars import SAMPLE_FRAMES, Area, describe, picture_area

log = logging.getLogger(__name__)

FRAMES_NAME = "frames.npz"  # beside the summary


def write_probe(source: str | Path, out: str | Path, frames: str | Path, fingerprint: str | None = None) -> dict:
    """Probe ``source`` and write the result (atomically): the summary to ``out`` (JSON), the per-frame part (every
    frame's time, the key frames) to ``frames`` (``.npz``). Returns the whole probe. ``fingerprint`` (the
    source's, see stereo3d.workflow.sources) is kept in the summary.

    Why two files: a 2-hour film's frame times are 3 MB of JSON, and the workflow reads the summary of every
    video each time it plans (how many frames, is it good); only the jobs that decode need the times."""
    try:
        info = probe_video(source)
        info["video"]["picture"] = find_picture(source, info).as_list()
    except BadVideo as exc:
        log.error("%s", exc)
        info = {"path": str(source), "error": str(exc), "frame_pts_s": [], "video": {"keyframes": []}}
    if fingerprint is not None:
        info["fingerprint"] = fingerprint
    summary = {**info, "video": {k: v for k, v in info["video"].items() if k != "keyframes"}}
    summary.pop("frame_pts_s")
    if "error" in info:
        summary.pop("video")
    with atomic_output(frames) as tmp, open(tmp, "wb") as fh:
        np.savez(
            fh,
            pts_s=np.asarray(info["frame_pts_s"], dtype=np.float64),
            keyframes=np.asarray(info["video"]["keyframes"], dtype=np.int64),
        )
    with atomic_output(out) as tmp:
        tmp.write_text(json.dumps(summary, indent=1) + "\n")
    return info


def find_picture(source: str | Path, info: dict, samples: int = SAMPLE_FRAMES) -> Area:
    """The picture area of a probed video (``probe_video``'s ``info``), logged in one line. A sample the decoder
    refuses (a damaged stretch) ends the sampling with a warning: the frames before it decide."""
    video = info["video"]
    width, height = video["display_width"], video["display_height"]
    started = time.perf_counter()
    sampled = [0]

    def frames():
        try:
            for _, frame in sample_frames(source, info, samples):
                sampled[0] += 1
                yield frame
        except BadVideo as exc:
            log.warning("finding the picture: %s; deciding from the %d frames sampled before", exc, sampled[0])

    area = picture_area(frames(), width, height)
    log.info("%s: %s (%d frames sampled in %.2f s)", Path(source).name, describe(area, width, height), sampled[0],
             time.perf_counter() - started)  # fmt: skip
    return area


def picture_of(summary: dict) -> Area:
    """The picture area a probe summary holds (the whole frame in a probe made before pictures were found)."""
    video = summary["video"]
    return Area.of(video.get("picture")) or Area.full(video["display_width"], video["display_height"])


def load_probe(summary: str | Path, frames: str | Path | None = None) -> dict:
    """The whole probe, as ``probe_video`` returns it, from the files ``write_probe`` wrote (``frames``: the
    per-frame file; by default the one beside the summary, ``frames.npz``)."""
    summary = Path(summary)
    info = json.loads(summary.read_text())
    with np.load(frames or summary.with_name(FRAMES_NAME)) as data:
        info["frame_pts_s"] = data["pts_s"].tolist()
        if "video" in info:
            info["video"]["keyframes"] = data["keyframes"].tolist()
    return info


def probe_failed(info: dict) -> str | None:
    """The one-line reason a probe result holds for a file that cannot be converted, else None."""
    return info.get("error")
