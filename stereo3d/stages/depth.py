"""The depth stage: decoded frames → DA3 on ONNX Runtime → raw depth maps, stored compressed.

Frames come from ffmpeg already scaled to the content size inside the export's width x height (letterbox) or to
that shape itself (resize), so no per-frame resize runs in Python. Batches use the model's dynamic axis; decoding
runs in the reader's thread while ONNX Runtime (which releases the GIL) computes the previous batch. An export
with a sky head marks sky pixels NaN (no finite depth); the store keeps them as its mask.
"""

from __future__ import annotations

import contextlib
import logging
import time
from pathlib import Path

import numpy as np

from stereo3d.io.decode import FrameReader
from stereo3d.io.mapstore import MapWriter, finished_by, store_lock
from stereo3d.io.resume import job_identity
from stereo3d.models.da3.runtime import DepthModel, placement_for
from stereo3d.progress import Progress
from stereo3d.runtime.sessions import SessionOptions, open_session
from stereo3d.stereo.bars import Area
from stereo3d.stereo.cuts import picture_change, thumbnail

log = logging.getLogger(__name__)


def estimate_depth(
    video: str | Path,
    probe: dict,
    model: str | Path,
    out: str | Path,
    placement: str = "letterbox",
    batch: int = 4,
    options: SessionOptions = SessionOptions(),
    start: int = 0,
    count: int | None = None,
    stop_after: int | None = None,
    picture: Area | None = None,
) -> dict:
    """Write raw DA3 depth of frames [start, start + count) of ``video`` to the map store ``out``.

    ``picture``: the area of the frame the depth covers (the picture inside baked-in bars; None: the whole frame).
    It is cut out of each decoded picture before scaling, and it alone is placed in the export: the bars cost no
    model time, and the model never sees their edge as a depth edge.

    The store also carries each frame's picture change against the frame before it (its ``changes`` series;
    the frame before ``start`` is decoded for that alone), from which shot cuts are found later. A job killed
    midway resumes after the last chunk it stored.

    ``stop_after`` (a multiple of the store's chunk, less than ``count``): compute only the first frames of the
    job and leave them in its partial store, which the same job, run in full later, continues (the preview's
    depth). The store's lock is held throughout, so such a run and the full job never write it at once.
    """
    started = time.perf_counter()
    session = open_session(model, options)
    contract = DepthModel(session, model)
    opened_s = time.perf_counter() - started
    display = (probe["video"]["display_width"], probe["video"]["display_height"])
    shown = display if picture is None else picture.size
    placed = placement_for(*shown, contract.shape, placement)
    total = probe["video"]["frame_count"] - start if count is None else count
    attrs = {
        "video": Path(video).name,
        "start": start,
        "model": Path(model).name,
        "fit": placement,
        "variant": contract.meta.get("variant"),
        "width": contract.shape[0],
        "height": contract.shape[1],
        "contract": contract.input_contract,
        "placement": [placed.x, placed.y, placed.width, placed.height],
        "bars": round(placed.bars, 4),
        "sky": contract.has_sky,
    }
    # The area of the frame (display pixels) the maps cover, where it is not the whole frame (a video without bars
    # keeps its stores' old bytes): readers such as the QC figures follow it.
    if picture is not None:
        attrs["picture"] = picture.as_list()
    identity = depth_identity(video, model, start, total, placement, batch, picture)
    store = MapWriter(out, "inverse", attrs=attrs, series=("changes",), resume=identity, masked=contract.has_sky)
    if stop_after is not None and not 0 < stop_after < total:
        raise ValueError(f"stop_after {stop_after} must lie inside the job's {total} frames")
    end = total if stop_after is None else stop_after
    with contextlib.ExitStack() as held:
        held.enter_context(store_lock(out))
        if stop_after is not None and finished_by(out, identity):  # the full job finished it while we waited
            log.info("%s: frames %d.. are stored in full already: nothing to compute", Path(video).name, start)
            return {"frames": 0, "providers": session.get_providers()}
        held.enter_context(store)
        done = min(store.resumed, end)  # frames a killed (or stopped) attempt of this job already stored
        if store.resumed:
            log.info("%s: resuming depth at frame %d of %d", Path(video).name, start + store.resumed, start + total)
        if stop_after is not None:
            log.info("%s: frames %d..%d of the job only, left for the full job to continue", Path(video).name,
                     start, start + end - 1)  # fmt: skip
            store.suspend()
        progress = Progress(log, f"depth {Path(video).name}", end - done)
        first = start + done
        lead = 1 if first > 0 else 0  # the frame before, for the first picture change
        size = (placed.width, placed.height)
        with FrameReader(video, probe, start=first - lead, count=end - done + lead, size=size,
                         crop=picture) as frames:  # fmt: skip
            previous = None
            pending: list[np.ndarray] = []
            changes: list[float] = []
            first_batch_s = None

            def infer() -> None:
                nonlocal first_batch_s
                started = time.perf_counter()
                store.append(contract.run(np.stack(pending), placed), changes=changes)
                if first_batch_s is None:  # a GPU provider's own start-up (TensorRT engine, kernel tuning)
                    first_batch_s = time.perf_counter() - started
                    log.info("%s: session opened in %.2f s, first batch in %.2f s", Path(video).name, opened_s,
                             first_batch_s)  # fmt: skip
                progress.advance(len(pending))

            for index, frame in enumerate(frames):
                thumb = thumbnail(frame)
                if index >= lead:
                    changes.append(picture_change(previous, thumb) if previous is not None else float("nan"))
                    pending.append(frame)
                previous = thumb
                # A batch never spans two chunks: batches are then the same in a resumed run.
                if len(pending) == min(batch, store.chunk_left()):
                    infer()
                    pending, changes = [], []
            if pending:
                infer()
    fps = progress.finish()
    return {"frames": progress.done, "fps": fps, "providers": session.get_providers(),
            "session_open_s": round(opened_s, 3), "first_batch_s": round(first_batch_s or 0.0, 3)}  # fmt: skip


def depth_identity(video: str | Path, model: str | Path, start: int, count: int, placement: str, batch: int,
                   picture: Area | None = None) -> dict:  # fmt: skip
    """The identity of the depth job of frames [start, start + count) of the ``picture`` area (None: the whole
    frame) (``stereo3d.io.resume``): what its store records, so that only the same job continues it, and the
    preview knows whether a finished store is current."""
    crop = {} if picture is None else {"picture": picture.as_list()}
    return job_identity([video, model], start=start, count=count, fit=placement, batch=batch, **crop)
