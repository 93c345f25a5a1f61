"""DA3 at run time (numpy + ONNX Runtime, no torch): frames to the fixed width x height of an export, the session
with the contract its exporter stored, and the model's output back to the frame.

Two placements: ``letterbox`` keeps the aspect ratio (content scaled to fit, bars around it, cropped back out of
the depth); ``resize`` stretches the frame to the export's shape (no bars, distorted shapes). Which export a video
uses (an aspect tier, or the square) is ``stereo3d.models.da3.tiers``' choice.

An export with a sky head (Mono-Large) has a second output, ``sky``; pixels it marks as sky come back as NaN
depth: no finite distance (the map store keeps them as a mask, and near maps put them on the far plane).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from stereo3d.errors import BadModel
from stereo3d.runtime.sessions import model_metadata, session_device

log = logging.getLogger(__name__)

# ImageNet statistics, as DA3 was trained (specs/da3.md section 1).
IMAGENET_MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
IMAGENET_STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)
# Letterbox bars take the mean colour, which normalises to zero: the bars carry no signal.
BAR_RGB = np.round(IMAGENET_MEAN * 255).astype(np.uint8)

PLACEMENTS = ("letterbox", "resize")
# DA3's own threshold on its sky head (depth_anything_3.utils.alignment.compute_sky_mask: sky where >= 0.3).
SKY_THRESHOLD = 0.3


@dataclass(frozen=True)
class Placement:
    """Where the frame's content sits inside the ``canvas_width`` x ``canvas_height`` model input."""

    canvas_width: int
    canvas_height: int
    x: int
    y: int
    width: int
    height: int

    def crop(self, maps: np.ndarray) -> np.ndarray:
        """Cut the content region out of model outputs shaped [..., canvas_height, canvas_width]."""
        return maps[..., self.y : self.y + self.height, self.x : self.x + self.width]

    @property
    def bars(self) -> float:
        """The share of the model's input that is bars (paid for, and no content)."""
        return 1 - (self.width * self.height) / (self.canvas_width * self.canvas_height)


def placement_for(frame_width: int, frame_height: int, shape: tuple[int, int], placement: str) -> Placement:
    """The content rectangle for a frame of the given size in an export of ``shape`` (width, height): the same
    for every frame of a video."""
    canvas_w, canvas_h = shape
    if placement == "resize":
        return Placement(canvas_w, canvas_h, 0, 0, canvas_w, canvas_h)
    if placement != "letterbox":
        raise ValueError(f"unknown placement {placement!r} (valid: {', '.join(PLACEMENTS)})")
    scale = min(canvas_w / frame_width, canvas_h / frame_height)
    width = max(1, min(canvas_w, round(frame_width * scale)))
    height = max(1, min(canvas_h, round(frame_height * scale)))
    return Placement(canvas_w, canvas_h, (canvas_w - width) // 2, (canvas_h - height) // 2, width, height)


def place(frames: np.ndarray, placement: Placement) -> np.ndarray:
    """Put content-sized RGB frames [B, h, w, 3] (already scaled) into uint8 canvases of the export's shape."""
    batch = frames.shape[0]
    if frames.shape[1:3] != (placement.height, placement.width):
        raise ValueError(f"frames are {frames.shape[1:3]}, placement expects {(placement.height, placement.width)}")
    if placement.width == placement.canvas_width and placement.height == placement.canvas_height:
        return np.ascontiguousarray(frames)
    canvas = np.empty((batch, placement.canvas_height, placement.canvas_width, 3), dtype=np.uint8)
    top, left = placement.y, placement.x
    bottom, right = top + placement.height, left + placement.width
    # The bars only: the content covers the rest (filling the whole canvas first cost twice the copy).
    for bar in (canvas[:, :top], canvas[:, bottom:], canvas[:, top:bottom, :left], canvas[:, top:bottom, right:]):
        bar[...] = BAR_RGB
    canvas[:, top:bottom, left:right] = frames
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
        height, width = shape[1:3] if self.input_contract == "uint8" else shape[2:4]
        if not isinstance(width, int) or not isinstance(height, int):
            raise BadModel(path, f"input shape is not fixed ({shape})")
        self.shape = (width, height)
        outputs = [output.name for output in session.get_outputs()]
        if outputs[:1] != ["depth"] or not set(outputs) <= {"depth", "sky"}:
            raise BadModel(path, f"not a DA3 depth export (outputs {outputs}; expected depth, and sky if any)")
        self.outputs = outputs
        self.has_sky = "sky" in outputs
        self.device = session_device(session)
        if self.meta.get("weights") == "smoke":
            log.warning(
                "%s was exported from SMOKE weights (random): its depth is meaningless. "
                "Place real DA3 weights under weights/DA3/ to get real 3D.",
                Path(path).name,
            )

    def run(self, frames: np.ndarray, placement) -> np.ndarray:
        """Content-sized RGB frames [B, h, w, 3] → raw depth at content size [B, h, w] (NaN where the model's sky
        head, if it has one, sees sky). In three steps that a caller may overlap: ``feed``, ``infer``, ``depth_of``."""
        return self.depth_of(self.infer(self.feed(frames, placement)), placement)

    def feed(self, frames: np.ndarray, placement) -> np.ndarray:
        """The model's input for content-sized RGB frames [B, h, w, 3]: placed on the export's canvas, in its
        input contract."""
        return to_model_input(place(frames, placement), self.input_contract)

    def depth_of(self, results: list[np.ndarray], placement) -> np.ndarray:
        """Raw depth at content size [B, h, w] from the model's outputs for a batch (NaN where the sky head, if the
        model has one, sees sky)."""
        depth = np.array(placement.crop(results[0]), dtype=np.float32)
        if self.has_sky:
            depth[placement.crop(results[1]) >= SKY_THRESHOLD] = np.nan
        return depth

    def infer(self, feed: np.ndarray) -> list[np.ndarray]:
        """The model's outputs for one batch in its input contract, by I/O binding: the batch is placed on the
        session's device in one copy, as the contract has it (uint8 exports: a quarter of float32's bytes, the
        normalisation runs on the device), and every output comes back to the host in one copy when the batch
        is done; nothing crosses in between. The same code runs on the CPU provider, with no copies at all."""
        import onnxruntime as ort

        binding = self.session.io_binding()
        binding.bind_ortvalue_input(self.input_name, ort.OrtValue.ortvalue_from_numpy(feed, *self.device))
        for name in self.outputs:
            binding.bind_output(name, "cpu")
        self.session.run_with_iobinding(binding)
        return binding.copy_outputs_to_cpu()
