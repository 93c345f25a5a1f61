"""The near_maps stage: one segment's raw DA3 depth → near maps (0..1, larger = nearer), by the configured
stabiliser (``stereo3d.stabilisers``), stored for rendering."""

from __future__ import annotations

import logging
from pathlib import Path

from stereo3d.io.mapstore import MapReader, MapWriter
from stereo3d.progress import Progress
from stereo3d.runtime.sessions import SessionOptions
from stereo3d.stabilisers import NearJob, get_stabiliser

log = logging.getLogger(__name__)


def make_near_maps(
    video: str | Path,
    probe: dict,
    depth: str | Path,
    out: str | Path,
    settings: dict,
    plan: str | Path | None = None,
    previous_depth: str | Path | None = None,
    models_dir: str | Path | None = None,
    options: SessionOptions = SessionOptions(),
) -> dict:
    """Write one near map per depth map of the segment ``depth`` to the map store ``out``.

    ``settings`` are the video's near settings: ``near.*``, ``method`` and the method's own keys (what the
    workflow's ``near_settings`` gives). ``plan``, ``previous_depth`` and ``models_dir`` are what the method
    declares it needs (its plan file, the raw depth before the segment, the folder of its models)."""
    stabiliser = get_stabiliser(settings["method"])
    with MapReader(depth) as depths:
        start = int(depths.attrs.get("start", 0))
        attrs = {"method": stabiliser.name, "source_depth": Path(depth).name, "start": start}
        progress = Progress(log, f"near maps ({stabiliser.name}) {Path(video).name} from frame {start}", depths.frames)
        with MapWriter(out, "linear", attrs=attrs) as store:

            def write(near) -> None:
                store.append(near)
                progress.advance(1)

            stabiliser.run(
                NearJob(
                    video=Path(video),
                    probe=probe,
                    depths=depths,
                    start=start,
                    settings=settings,
                    write=write,
                    plan=Path(plan) if plan else None,
                    previous_depth=Path(previous_depth) if previous_depth else None,
                    models_dir=Path(models_dir) if models_dir else None,
                    options=options,
                )
            )
    return {"frames": progress.done, "fps": progress.finish(), "method": stabiliser.name}
