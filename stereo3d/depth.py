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

from stereo3d.errors import BadModel
from stereo3d.mapstore import MapWriter
from stereo3d.near import picture_change, thumbnail
from stereo3d.preprocess import place, placement_for, to_model_input
from stereo3d.progress import Progress
from stereo3d.runtime import SessionOptions, model_metadata, open_session
from stereo3d.video import FrameReader

log = logging.getLogger(__name__)


def estimate_depth(video: str | Path, probe: dict, model: str | Path, out: str | Path, fit: str = "letterbox",
                   batch: int = 4, options: SessionOptions = SessionOptions(), start: int = 0,
                   count: int | None = None) -> dict:
    """Write raw DA3 depth of frames [start, start + count) of ``video`` to the map store ``out``.

    The store's attrs also carry each frame's picture change against the frame before it (the
    frame before ``start`` is decoded for that alone), from which shot cuts are found later.
    """
    session = open_session(model, options)
    contract = DepthModel(session, model)
    display = (probe["video"]["display_width"], probe["video"]["display_height"])
    placement = placement_for(*display, contract.size, fit)
    total = probe["video"]["frame_count"] - start if count is None else count
    attrs = {"video": Path(video).name, "start": start, "model": Path(model).name, "fit": fit,
             "variant": contract.meta.get("variant"), "size": contract.size, "contract": contract.input_contract,
             "placement": [placement.x, placement.y, placement.width, placement.height]}
    progress = Progress(log, f"depth {Path(video).name}", total)
    lead = 1 if start > 0 else 0  # the frame before the segment, for the first picture change
    changes: list[float] = []
    with FrameReader(video, probe, start=start - lead, count=total + lead,
                     size=(placement.width, placement.height)) as frames, \
            MapWriter(out, "log", attrs=attrs) as store:
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


class DepthModel:
    """A DA3 session and the contract its exporter stored (never guessed from the file name)."""

    def __init__(self, session, path: str | Path):
        self.session = session
        self.meta = model_metadata(session)
        inputs = session.get_inputs()
        if len(inputs) != 1 or inputs[0].name != "image":
            raise BadModel(path, "not a DA3 depth export (expected one input named 'image')")
        self.input_name = inputs[0].name
        dtype = inputs[0].type  # 'tensor(uint8)' or 'tensor(float)'
        self.input_contract = "uint8" if "uint8" in dtype else "float"
        if self.meta.get("contract", self.input_contract) != self.input_contract:
            raise BadModel(path, f"metadata says contract {self.meta['contract']} but the input is {dtype}")
        shape = inputs[0].shape
        side = shape[1] if self.input_contract == "uint8" else shape[2]
        if not isinstance(side, int):
            raise BadModel(path, f"input side is not fixed ({shape})")
        self.size = side
        if self.meta.get("weights") == "smoke":
            log.warning("%s was exported from SMOKE weights (random): its depth is meaningless. "
                        "Place real DA3 weights under weights/DA3/ to get real 3D.", Path(path).name)

    def run(self, frames: np.ndarray, placement) -> np.ndarray:
        """Content-sized RGB frames [B, h, w, 3] → raw depth at content size [B, h, w]."""
        feed = to_model_input(place(frames, placement), self.input_contract)
        (depth,) = self.session.run(["depth"], {self.input_name: feed})
        return np.ascontiguousarray(placement.crop(depth))
