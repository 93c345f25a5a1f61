"""NVDS at run time (numpy + ONNX Runtime, no torch): per-frame near maps in, stabilised near maps out.

Split graphs (preferred): the backbone runs once per frame and its features are cached for the last 4
frames; the head runs once per frame on the window. The features stay where the sessions run (I/O binding):
on a GPU they never come back to the host, and the window is joined there too (``stereo3d.runtime.concat``);
per frame, only the RGBD frame goes up and the near map comes down. Monolith (fallback): the last 4 RGBD
frames are kept and the whole window runs every frame.

Window rule (the official demo, spec section 5): frame i >= 3 uses ``[i-3, i-2, i-1, i]``; frames 0..2
use the current frame repeated 4 times. A segment that starts mid-video calls ``prime`` with the raw
inputs of the 3 frames before it, so its first outputs see the same windows as an unsegmented run.

Frames whose aspect differs from the tier are letterboxed into it and the output is cropped back.
Pad values: RGB 0 after ImageNet normalisation (the mean colour, which is also what the convolutions'
own zero padding shows the network at the borders) and near 0 (the far end of the range, a distant
backdrop: it adds no near surface for the stabiliser to pull edges towards).

The output is returned as is: a stabilised near map (larger = nearer) that must not be inverted or
renormalised again.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

from stereo3d.errors import BadModel
from stereo3d.models.names import NVDS_ROLES, nvds_onnx_names
from stereo3d.runtime.concat import concat_session, join
from stereo3d.runtime.sessions import SessionOptions, model_metadata, open_session, session_device

log = logging.getLogger(__name__)

WINDOW_FRAMES = 4
IMAGENET_MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)  # NVDS demo preprocessing (spec section 4)
IMAGENET_STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)
_warned_tensorrt = False


def open_stabiliser(
    models_dir: str | Path,
    width: int,
    height: int,
    options: SessionOptions = SessionOptions(),
    graphs: str | None = None,
) -> NvdsStabiliser:
    """The stabiliser for tier ``width`` x ``height`` from ``models_dir``, running ``graphs`` (split: backbone +
    head; monolith: one graph over the window). ``graphs=None`` takes the split pair if present, else the
    monolith (for use outside the workflow, which always says which)."""
    models_dir = Path(models_dir)
    tier = f"{width}x{height}"
    options = _without_tensorrt(options)
    if graphs is None:
        split = [models_dir / name for name in nvds_onnx_names(tier, "split")]
        graphs = "split" if all(path.is_file() for path in split) else "monolith"
        if graphs == "monolith":
            log.info("NVDS %s: split graphs absent, using the monolith", tier)
    files = dict(zip(NVDS_ROLES[graphs], (models_dir / name for name in nvds_onnx_names(tier, graphs))))
    missing = [path.name for path in files.values() if not path.is_file()]
    if missing:
        raise BadModel(
            models_dir,
            f"no NVDS graphs for tier {tier} ({graphs}: {', '.join(missing)} missing; run the NVDS export rule)",
        )
    sessions = {role: open_session(path, options) for role, path in files.items()}
    smoke = False
    for role, session in sessions.items():
        smoke |= _check_contract(session, role, width, height, models_dir)
    if smoke:
        log.warning("NVDS %s: SMOKE weights: the stabilised depth is meaningless until real weights are exported", tier)
    return NvdsStabiliser(width, height, sessions, smoke=smoke)


@dataclass(frozen=True)
class Letterbox:
    """Where the source content sits inside the tier."""

    top: int
    left: int
    height: int
    width: int

    def crop(self, tier_map: np.ndarray) -> np.ndarray:
        return tier_map[self.top : self.top + self.height, self.left : self.left + self.width]


@dataclass(frozen=True, eq=False)
class PreparedFrame:
    """A frame as the network takes it (``rgbd``), where its content sits there (``box``), and the size of the
    near map its output is brought back to (``shape``)."""

    rgbd: np.ndarray
    box: Letterbox
    shape: tuple[int, int]

    def fit(self, content: np.ndarray) -> np.ndarray:
        """The network's output over the content's box, at the near map's size (float32)."""
        h, w = self.shape
        if content.shape != (h, w):
            shrink = w < content.shape[1]
            content = cv2.resize(content, (w, h), interpolation=cv2.INTER_AREA if shrink else cv2.INTER_LINEAR)
        return np.ascontiguousarray(content, dtype=np.float32)


def prepare_frame(rgb: np.ndarray, near: np.ndarray, width: int, height: int) -> tuple[np.ndarray, Letterbox]:
    """RGBD ``[4, height, width]`` float32 for the network, and where the content sits in it.

    RGB: fit into the tier keeping the aspect (INTER_AREA when shrinking, cubic when enlarging, as the
    demo), /255, ImageNet-normalised. Near: resized to the same box (linear when enlarging: cubic would
    overshoot [0, 1]), clipped to [0, 1].
    """
    if rgb.ndim != 3 or rgb.shape[2] != 3 or rgb.dtype != np.uint8:
        raise ValueError(f"rgb must be uint8 [h, w, 3], got {rgb.dtype} {rgb.shape}")
    if near.ndim != 2:
        raise ValueError(f"near must be [h, w], got {near.shape}")
    box = letterbox(rgb.shape[0], rgb.shape[1], width, height)
    size = (box.width, box.height)
    shrink = box.width < rgb.shape[1]
    rgb_fit = cv2.resize(rgb, size, interpolation=cv2.INTER_AREA if shrink else cv2.INTER_CUBIC)
    near_shrink = box.width < near.shape[1]
    near_fit = cv2.resize(
        np.ascontiguousarray(near, dtype=np.float32),
        size,
        interpolation=cv2.INTER_AREA if near_shrink else cv2.INTER_LINEAR,
    )
    rgbd = np.zeros((4, height, width), dtype=np.float32)  # the pad values: normalised 0, near 0
    rows, cols = slice(box.top, box.top + box.height), slice(box.left, box.left + box.width)
    rgbd[0:3, rows, cols] = ((rgb_fit.astype(np.float32) / 255.0 - IMAGENET_MEAN) / IMAGENET_STD).transpose(2, 0, 1)
    rgbd[3, rows, cols] = np.clip(near_fit, 0.0, 1.0)
    return rgbd, box


def letterbox(src_h: int, src_w: int, width: int, height: int) -> Letterbox:
    """The largest box of the source's aspect that fits the tier, centred."""
    scale = min(width / src_w, height / src_h)
    box_w = min(width, max(1, round(src_w * scale)))
    box_h = min(height, max(1, round(src_h * scale)))
    return Letterbox(top=(height - box_h) // 2, left=(width - box_w) // 2, height=box_h, width=box_w)


class NvdsStabiliser:
    """Causal NVDS over a frame sequence; ``reset()`` between sequences (videos, or independent segments)."""

    def __init__(self, width: int, height: int, sessions: dict, smoke: bool = False):
        self.width, self.height = width, height
        self.smoke = smoke
        self.mode = "split" if "backbone" in sessions else "monolith"
        self._sessions = sessions
        if self.mode == "split":
            self._feature_names = [o.name for o in sessions["backbone"].get_outputs()]
            self._backbone_input = sessions["backbone"].get_inputs()[0].name
            head_inputs = [i.name for i in sessions["head"].get_inputs()]
            self._rgb_input = next(n for n in head_inputs if n not in self._feature_names)
            self._device = session_device(sessions["backbone"])
            self._concat = concat_session(sessions["backbone"])
        else:
            self._window_input = sessions["monolith"].get_inputs()[0].name
        self.reset()

    def reset(self) -> None:
        """Forget the cached frames: the next frame is frame 0 of a new sequence."""
        self._cache: collections.deque = collections.deque(maxlen=WINDOW_FRAMES)
        self._seen = 0

    def prime(self, frames: Iterable[tuple[np.ndarray, np.ndarray]]) -> None:
        """Feed earlier frames' raw ``(rgb, near)`` inputs (oldest first) without producing output."""
        for rgb, near in frames:
            self._push(self.prepare(rgb, near).rgbd)

    def step(self, rgb: np.ndarray, near: np.ndarray) -> np.ndarray:
        """Stabilised near map ``[h, w]`` (float32, the size of ``near``) for this frame."""
        return self.run(self.prepare(rgb, near))

    def prepare(self, rgb: np.ndarray, near: np.ndarray) -> PreparedFrame:
        """A frame's input for the network (``prepare_frame``): host work only, which touches nothing of the
        stabiliser's state, so that a thread may prepare the next frames while the network runs on this one."""
        rgbd, box = prepare_frame(rgb, near, self.width, self.height)
        return PreparedFrame(rgbd, box, near.shape)

    def run(self, frame: PreparedFrame) -> np.ndarray:
        """The stabilised near map of the next frame of the sequence, from its ``prepare``d input."""
        rgbd, box = frame.rgbd, frame.box
        entry = self._push(rgbd)
        window = list(self._cache) if self._seen >= WINDOW_FRAMES else [entry] * WINDOW_FRAMES
        if self.mode == "split":
            binding = self._sessions["head"].io_binding()
            for index, name in enumerate(self._feature_names):
                binding.bind_ortvalue_input(name, join(self._concat, [frame[index] for frame in window], self._device))
            binding.bind_cpu_input(self._rgb_input, np.ascontiguousarray(rgbd[None, 0:3]))
            binding.bind_output(self._sessions["head"].get_outputs()[0].name, "cpu")
            self._sessions["head"].run_with_iobinding(binding)
            out = binding.copy_outputs_to_cpu()[0]
        else:
            out = self._sessions["monolith"].run(None, {self._window_input: np.stack(window)[None]})[0]
        return frame.fit(box.crop(out[0, 0]))

    def _push(self, rgbd: np.ndarray):
        if self.mode == "split":  # the frame's features, kept on the session's device as OrtValues
            binding = self._sessions["backbone"].io_binding()
            binding.bind_cpu_input(self._backbone_input, rgbd[None])
            for name in self._feature_names:
                binding.bind_output(name, *self._device)
            self._sessions["backbone"].run_with_iobinding(binding)
            entry = binding.get_outputs()
        else:
            entry = rgbd
        self._cache.append(entry)
        self._seen += 1
        return entry


def _without_tensorrt(options: SessionOptions) -> SessionOptions:
    """NVDS is served by CUDA (bounded by gpu_mem_limit): its graph is not a TensorRT candidate here. ``auto``
    skips TensorRT for it; a list that names TensorRT gets CUDA in its place (said once per process)."""
    global _warned_tensorrt
    options = dataclasses.replace(options, exclude=tuple(dict.fromkeys((*options.exclude, "tensorrt"))))
    if isinstance(options.providers, str) or "tensorrt" not in options.providers:
        return options
    if not _warned_tensorrt:
        log.warning("NVDS: TensorRT requested; using CUDA with a bounded arena instead (DA3 keeps TensorRT)")
        _warned_tensorrt = True
    providers = tuple(dict.fromkeys("cuda" if p == "tensorrt" else p for p in options.providers))
    return dataclasses.replace(options, providers=providers)


def _check_contract(session, role: str, width: int, height: int, models_dir: Path) -> bool:
    """Refuse a graph whose stored contract disagrees with the tier; returns its smoke flag."""
    meta = model_metadata(session)
    expected_mode = {"backbone": "split-backbone", "head": "split-head", "monolith": "monolith"}[role]
    if "stereo3d.model" not in meta:
        log.warning("NVDS %s graph in %s has no stereo3d metadata; trusting its file name", role, models_dir)
    elif meta.get("stereo3d.model") != "nvds" or meta.get("stereo3d.mode") != expected_mode:
        raise BadModel(
            models_dir,
            f"NVDS {role} graph is labelled {meta.get('stereo3d.model')}/"
            f"{meta.get('stereo3d.mode')}, expected nvds/{expected_mode}",
        )
    elif meta.get("stereo3d.tier") != f"{width}x{height}":
        raise BadModel(
            models_dir, f"NVDS {role} graph is for tier {meta.get('stereo3d.tier')}, expected {width}x{height}"
        )
    shape = session.get_inputs()[-1 if role == "head" else 0].shape
    if list(shape[-2:]) != [height, width]:
        raise BadModel(models_dir, f"NVDS {role} graph takes {shape[-1]}x{shape[-2]}, expected {width}x{height}")
    return meta.get("stereo3d.smoke") == "1"
