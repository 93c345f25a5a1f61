"""Cache keys: each stage's results are stored under a name derived from the settings that made them, so a
setting switched back finds its old result instead of recomputing it, and a setting a stage does not read never
moves its results.

A video's settings are its config sections with its sheet row laid over them (``da3``, ``stabilise``, ``near``,
``render``, ``encode``). Each stage has one settings object, built once per video from them
(``stereo3d.workflow.videos.VideoSettings``): its fields are what the stage's rules show as their params and what
its job reads back, and its serialisation is the key here:

- depth: ``stereo3d.stages.depth.DepthSettings`` (the export, the frame's placement, the picture inside bars, the
  precision), named readably by :func:`depth_key`;
- near maps: ``stereo3d.stabilisers.NearSettings`` (``near.*``, ``stabilise.method`` and the options its
  stabiliser declares), :func:`near_key` the hash of its ``params()``;
- render: ``stereo3d.stages.render.RenderSettings``, :func:`render_key` the hash of its ``params()``.

A setting reaches a stage by being a field of its settings object (with its schema entry, the one place its default
lives); tests/test_reruns.py checks every key of the schema against the stages it reruns.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from stereo3d.models.da3.runtime import PLACEMENTS
from stereo3d.models.names import DA3_VARIANTS
from stereo3d.stabilisers import NearSettings
from stereo3d.stages.depth import DepthSettings
from stereo3d.stages.render import RenderSettings
from stereo3d.stereo.bars import Area

DEPTH_KEY = re.compile(
    rf"da3_({'|'.join(DA3_VARIANTS)})_([0-9]+)x([0-9]+)_(float|u8)_({'|'.join(PLACEMENTS)})"
    r"(?:_crop([0-9]+)x([0-9]+)\+([0-9]+)\+([0-9]+))?(_fast)?"
)
NEAR_KEY = r"[a-z0-9_]+-[0-9a-f]{8}"
RENDER_KEY = r"[a-z0-9_]+-[0-9a-f]{8}"
CONVERGENCE_KEY = r"[0-9a-f]{8}"


def depth_key(settings: DepthSettings) -> str:
    """``da3_small_518x294_u8_letterbox``: variant, the export's width x height, contract and how the frame is
    placed in it (readable: the depth is the costly stage), ``_crop<W>x<H>+<X>+<Y>`` where the depth covers only
    the ``picture`` area of the frame (baked-in bars, ``stereo3d.stereo.bars``; None: the whole frame), and
    ``_fast`` where ``runtime.precision: fast`` lets the device compute it in bf16/fp16/TF32 (other numbers).
    The key names what the depth depends on (``DepthSettings``' fields), not the settings that chose it: tiers
    that change no video's export, or fit aspect vs letterbox for a square video, move no depth; nor does the
    provider, whose float32 results agree within the export's validation tolerance."""
    width, height = settings.size
    contract = "u8" if settings.contract == "uint8" else "float"
    crop = "" if settings.picture is None else f"_crop{settings.picture}"
    fast = "_fast" if settings.precision == "fast" else ""
    return f"da3_{settings.variant}_{width}x{height}_{contract}_{settings.placement}{crop}{fast}"


def parse_depth_key(key: str) -> dict:
    """Inverse of :func:`depth_key`: the export (``variant``, ``shape`` as (width, height), ``contract``), the
    ``placement`` of the frame in it, the ``picture`` area the depth covers (an ``Area``; None: the whole frame)
    and the ``precision`` of the arithmetic."""
    match = DEPTH_KEY.fullmatch(key)
    if not match:
        raise ValueError(f"not a depth key: {key!r}")
    variant, width, height, contract, placement, *crop, fast = match.groups()
    contract = "uint8" if contract == "u8" else "float"
    crop_w, crop_h, x, y = crop
    picture = None if crop_w is None else Area(int(x), int(y), int(crop_w), int(crop_h))
    return {"variant": variant, "shape": (int(width), int(height)), "contract": contract, "placement": placement,
            "picture": picture, "precision": "fast" if fast else "exact"}  # fmt: skip


# The render's keys are the fields of its settings (stereo3d.stages.render.RenderSettings: the layout, the
# renderer's StereoSettings, the encoder's EncodeSettings, render.bars for a video with bars, the layout's options).
MUX_ONLY = ("encode.container", "subtitles.keep")  # read by the final mux (rule join) alone
SIDECAR_ONLY = ("subtitles.sidecar",)  # whether the files beside the result are written (rule subtitle_sidecar)


def near_key(settings: NearSettings) -> str:
    """``ema-1a2b3c4d``: the method and the hash of the near stage's params."""
    return keyed(settings.method, settings.params())


def render_key(settings: RenderSettings) -> str:
    """``full_sbs-1a2b3c4d``: the layout and the hash of the render's params."""
    return keyed(settings.layout, settings.params())


def convergence_params(stereo) -> dict[str, Any]:
    """The render settings a convergence plan (``render.convergence: auto``) is made with, by their dotted names."""
    return {"render.divergence_pct": stereo.divergence_pct, "render.front_limit_pct": stereo.front_limit_pct}


def convergence_key(stereo) -> str:
    """The hash that names a video's convergence plan under its near maps."""
    return settings_hash(convergence_params(stereo))


def settings_hash(settings: dict[str, Any]) -> str:
    """8 hex digits of the canonical JSON of ``settings`` (key order and int/float spelling don't matter)."""
    canonical = json.dumps(_canonical(settings), sort_keys=True, separators=(",", ":"))
    return hashlib.sha1(canonical.encode()).hexdigest()[:8]


def keyed(prefix: str, settings: dict[str, Any]) -> str:
    """A readable prefix and the settings hash: ``ema-1a2b3c4d``."""
    return f"{prefix}-{settings_hash(settings)}"


def _canonical(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _canonical(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_canonical(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)  # 2.0 and 2 are the same setting
    return value
