"""DA3 at run time (numpy + ONNX Runtime, no torch): frames to the fixed square side of an export, the session
with the contract its exporter stored, and the model's output back to the frame.

Two fits: ``letterbox`` keeps the aspect ratio (content scaled to fit, bars around it, cropped
back out of the depth); ``resize`` stretches the frame to the square (no bars, distorted shapes).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from stereo3d.errors import BadModel
from stereo3d.runtime.sessions import model_metadata

log = logging.getLogger(__name__)

# ImageNet statistics, as DA3 was trained (specs/da3.md section 1).
IMAGENET_MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
IMAGENET_STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)
# Letterbox bars take the mean colour, which normalises to zero: the bars carry no signal.
BAR_RGB = np.round(IMAGENET_MEAN * 255).astype(np.uint8)

FITS = ("letterbox", "resize")


@dataclass(frozen=True)
class Placement:
    """Where the frame's content sits inside the ``side`` x ``side`` model input."""

    side: int
    x: int
    y: int
    width: int
    height: int

    def crop(self, maps: np.ndarray) -> np.ndarray:
        """Cut the content region out of model outputs shaped [..., side, side]."""
        return maps[..., self.y : self.y + self.height, self.x : self.x + self.width]


def placement_for(frame_width: int, frame_height: int, side: int, fit: str) -> Placement:
    """The content rectangle for a frame of the given size (same for every frame of a video)."""
    if fit == "resize":
        return Placement(side, 0, 0, side, side)
    if fit != "letterbox":
        raise ValueError(f"unknown fit {fit!r} (valid: {', '.join(FITS)})")
    scale = side / max(frame_width, frame_height)
    width = max(1, min(side, round(frame_width * scale)))
    height = max(1, min(side, round(frame_height * scale)))
    return Placement(side, (side - width) // 2, (side - height) // 2, width, height)


def place(frames: np.ndarray, placement: Placement) -> np.ndarray:
    """Put content-sized RGB frames [B, h, w, 3] (already scaled) into square uint8 canvases."""
    batch = frames.shape[0]
    if frames.shape[1:3] != (placement.height, placement.width):
        raise ValueError(f"frames are {frames.shape[1:3]}, placement expects {(placement.height, placement.width)}")
    if placement.width == placement.side and placement.height == placement.side:
        return np.ascontiguousarray(frames)
    canvas = np.empty((batch, placement.side, placement.side, 3), dtype=np.uint8)
    canvas[:] = BAR_RGB
    canvas[:, placement.y : placement.y + placement.height, placement.x : placement.x + placement.width] = frames
    return canvas


def to_model_input(canvas: np.ndarray, contract: str) -> np.ndarray:
    """uint8 NHWC canvases in the export's input contract (``uint8``: as is; ``float``: normalised NCHW)."""
    if contract == "uint8":
        return np.ascontiguousarray(canvas)
    if contract != "float":
        raise ValueError(f"unknown input contract {contract!r}")
    scaled = canvas.astype(np.float32) * np.float32(1 / 255)
    normalised = (scaled - IMAGENET_MEAN) / IMAGENET_STD
    return np.ascontiguousarray(normalised.transpose(0, 3, 1, 2))


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
            log.warning(
                "%s was exported from SMOKE weights (random): its depth is meaningless. "
                "Place real DA3 weights under weights/DA3/ to get real 3D.",
                Path(path).name,
            )

    def run(self, frames: np.ndarray, placement) -> np.ndarray:
        """Content-sized RGB frames [B, h, w, 3] → raw depth at content size [B, h, w]."""
        feed = to_model_input(place(frames, placement), self.input_contract)
        (depth,) = self.session.run(["depth"], {self.input_name: feed})
        return np.ascontiguousarray(placement.crop(depth))
