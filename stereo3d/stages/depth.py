"""The depth stage: decoded frames → DA3 on ONNX Runtime → raw depth maps, stored compressed.

Frames come from ffmpeg already scaled to the content size of the export's square (letterbox) or
to the square itself (resize), so no per-frame resize runs in Python. Batches use the model's
dynamic axis; decoding runs in the reader's thread while ONNX Runtime (which releases the GIL)
computes the previous batch.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from stereo3d.io.decode import FrameReader
from stereo3d.io.mapstore import MapWriter
from stereo3d.models.da3.runtime import DepthModel, placement_for
from stereo3d.progress import Progress
from stereo3d.runtime.sessions import SessionOptions, open_session
from stereo3d.stereo.cuts import picture_change, thumbnail

log = logging.getLogger(__name__)


def estimate_depth(
    video: str | Path,
    probe: dict,
    model: str | Path,
    out: str | Path,
    fit: str = "letterbox",
    batch: int = 4,
    options: SessionOptions = SessionOptions(),
    start: int = 0,
    count: int | None = None,
) -> dict:
    """Write raw DA3 depth of frames [start, start + count) of ``video`` to the map store ``out``.

    The store's attrs also carry each frame's picture change against the frame before it (the
    frame before ``start`` is decoded for that alone), from which shot cuts are found later.
    """
    session = open_session(model, options)
    contract = DepthModel(session, model)
    display = (probe["video"]["display_width"], probe["video"]["display_height"])
    placement = placement_for(*display, contract.size, fit)
    total = probe["video"]["frame_count"] - start if count is None else count
    attrs = {
        "video": Path(video).name,
        "start": start,
        "model": Path(model).name,
        "fit": fit,
        "variant": contract.meta.get("variant"),
        "size": contract.size,
        "contract": contract.input_contract,
        "placement": [placement.x, placement.y, placement.width, placement.height],
    }
    progress = Progress(log, f"depth {Path(video).name}", total)
    lead = 1 if start > 0 else 0  # the frame before the segment, for the first picture change
    changes: list[float] = []
    with (
        FrameReader(
            video, probe, start=start - lead, count=total + lead, size=(placement.width, placement.height)
        ) as frames,
        MapWriter(out, "log", attrs=attrs) as store,
    ):
        previous = None
        pending: list[np.ndarray] = []
        for index, frame in enumerate(frames):
            thumb = thumbnail(frame)
            if index >= lead:
                changes.append(picture_change(previous, thumb) if previous is not None else float("nan"))
                pending.append(frame)
            previous = thumb
            if len(pending) == batch:
                store.append(contract.run(np.stack(pending), placement))
                progress.advance(len(pending))
                pending = []
        if pending:
            store.append(contract.run(np.stack(pending), placement))
            progress.advance(len(pending))
        store.attrs["changes"] = [None if np.isnan(c) else round(c, 6) for c in changes]
    fps = progress.finish()
    return {"frames": progress.done, "fps": fps, "providers": session.get_providers()}
