"""The near_maps stage: one segment's raw DA3 depth → near maps (0..1, larger = nearer), by the configured
stabiliser (``stereo3d.stabilisers``), stored for rendering. A job killed midway resumes after the last chunk it
stored: the stabiliser then starts at that frame, primed as a segment starting there would be.

The stage's settings are a ``NearSettings`` (``stereo3d.stabilisers.settings``, beside the stabilisers that read
it): built once per video, shown by the rules as their params, its hash the near key."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from stereo3d.io.mapstore import MapReader, MapWriter
from stereo3d.io.resume import job_identity
from stereo3d.progress import Progress
from stereo3d.runtime.sessions import SessionOptions
from stereo3d.stabilisers import NearJob, NearSettings
from stereo3d.stereo.bars import Area

log = logging.getLogger(__name__)


def make_near_maps(
    video: str | Path,
    probe: dict,
    depth: str | Path,
    out: str | Path,
    settings: NearSettings,
    plan: str | Path | None = None,
    previous_depth: str | Path | None = None,
    models_dir: str | Path | None = None,
    options: SessionOptions = SessionOptions(),
    picture: Area | None = None,
) -> dict:
    """Write one near map per depth map of the segment ``depth`` to the map store ``out``.

    ``settings``: the video's near range, stabiliser and its options. ``plan``, ``previous_depth`` and
    ``models_dir`` are what the method declares it needs (its plan file, the raw depth before the segment, the
    folder of its models). ``picture``: the area of the frame the depth covers (None: the whole frame), for a
    method that reads the frames too."""
    stabiliser = settings.stabiliser
    declared = stabiliser.models(settings) if stabiliser.models and models_dir else []
    models = [Path(models_dir) / Path(name).name for name in declared]
    identity = job_identity([video, depth, plan, previous_depth, *models], settings=settings.params())
    with MapReader(depth) as depths:
        start = int(depths.attrs.get("start", 0))
        attrs = {"method": stabiliser.name, "source_depth": Path(depth).name, "start": start}
        with MapWriter(out, "linear", attrs=attrs, resume=identity) as store:
            done = store.resumed
            if done:
                log.info("%s: resuming near maps at frame %d of %d", Path(video).name, start + done,
                         start + depths.frames)  # fmt: skip
            progress = Progress(log, f"near maps ({stabiliser.name}) {Path(video).name} from frame {start + done}",
                                depths.frames - done)  # fmt: skip

            def write(near) -> None:
                store.append(near)
                progress.advance(1)

            if done < depths.frames:
                stabiliser.run(
                    NearJob(
                        video=Path(video),
                        probe=probe,
                        depths=depths.from_frame(done),
                        start=start + done,
                        settings=settings,
                        write=write,
                        plan=Path(plan) if plan else None,
                        earlier=_earlier(depths, done, previous_depth),
                        models_dir=Path(models_dir) if models_dir else None,
                        options=options,
                        picture=picture,
                    )
                )
    return {"frames": progress.done, "fps": progress.finish(), "method": stabiliser.name}


def _earlier(depths: MapReader, offset: int, previous_depth: str | Path | None):
    """``earlier(n)``: the raw depth of the n frames before frame ``offset`` of the segment: from the segment's
    own store, and for frames before its first from the previous segment's."""

    def earlier(n: int) -> np.ndarray:
        own = min(n, offset)
        parts = []
        if n > own:
            if previous_depth is None:
                raise ValueError(f"{n - own} frames of depth before the segment are needed, and none was given")
            with MapReader(previous_depth) as previous:
                parts.append(previous.read(previous.frames - (n - own), n - own))
        if own:
            parts.append(depths.read(offset - own, own))
        return np.concatenate(parts) if parts else np.empty((0, *depths.shape), np.float32)

    return earlier
