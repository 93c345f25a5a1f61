"""``frame``: each frame normalised on its own. No memory, so it flickers when content moves in and out."""

from __future__ import annotations

from stereo3d.stabilisers.registry import NearJob, Stabiliser
from stereo3d.stereo.near import near_from_depth


def run(job: NearJob) -> None:
    for raw in job.depths:
        job.write(near_from_depth(raw, job.settings.low_pct, job.settings.high_pct))


STABILISER = Stabiliser(name="frame", summary="each frame normalised alone (may flicker)", run=run)
