"""Cache keys: each stage's results are stored under a name derived from the settings that made them, so a
setting switched back finds its old result instead of recomputing it, and a setting a stage does not read never
moves its results.

A video's settings are its config sections with its sheet row laid over them (``da3``, ``stabilise``, ``near``,
``render``, ``encode``); the functions here say which of them reach which stage.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from stereo3d.models.da3.runtime import PLACEMENTS
from stereo3d.models.da3.tiers import FIT_PLACEMENT, export_shape
from stereo3d.models.names import DA3_VARIANTS
from stereo3d.stabilisers import get_stabiliser
from stereo3d.stereo.layouts import LAYOUT_OPTION_KEYS, get_layout

DEPTH_KEY = re.compile(rf"da3_({'|'.join(DA3_VARIANTS)})_([0-9]+)x([0-9]+)_(float|u8)_({'|'.join(PLACEMENTS)})(_fast)?")
NEAR_KEY = r"[a-z0-9_]+-[0-9a-f]{8}"
RENDER_KEY = r"[a-z0-9_]+-[0-9a-f]{8}"


def depth_key(da3: dict, display: tuple[int, int] | None = None, precision: str = "exact") -> str:
    """``da3_small_518x294_u8_letterbox``: variant, the export's width x height, contract and how the frame is
    placed in it (readable: the depth is the costly stage), and ``_fast`` where ``runtime.precision: fast`` lets
    the device compute it in bf16/fp16/TF32 (other numbers). ``display`` is the video's display size, which picks
    the aspect tier under ``fit: aspect``. The key names what the depth depends on, not the settings that chose
    it: tiers that change no video's export, or fit aspect vs letterbox for a square video, move no depth; nor
    does the provider, whose float32 results agree within the export's validation tolerance."""
    width, height = export_shape(da3, display)
    contract = "u8" if da3["contract"] == "uint8" else "float"
    fast = "_fast" if precision == "fast" else ""
    return f"da3_{da3['variant']}_{width}x{height}_{contract}_{FIT_PLACEMENT[da3['fit']]}{fast}"


def parse_depth_key(key: str) -> dict:
    """Inverse of :func:`depth_key`: the export (``variant``, ``shape`` as (width, height), ``contract``), the
    ``placement`` of the frame in it and the ``precision`` of the arithmetic."""
    match = DEPTH_KEY.fullmatch(key)
    if not match:
        raise ValueError(f"not a depth key: {key!r}")
    variant, width, height, contract, placement, fast = match.groups()
    contract = "uint8" if contract == "u8" else "float"
    return {"variant": variant, "shape": (int(width), int(height)), "contract": contract, "placement": placement,
            "precision": "fast" if fast else "exact"}  # fmt: skip


def near_settings(sections: dict, config: dict) -> dict:
    """Everything that changes a video's near maps: ``near.*``, the method, and the keys its stabiliser declares
    (from the video's sections, else the config's), by their last name part."""
    stabiliser = get_stabiliser(sections["stabilise"]["method"])
    settings = {**sections["near"], "method": stabiliser.name}
    for dotted in stabiliser.keys:
        section, name = dotted.split(".")
        settings[name] = (sections.get(section) or config[section])[name]
    return settings


MUX_ONLY = ("container",)  # encode keys the final mux reads, and the render stage does not


def render_settings(sections: dict) -> dict:
    """Everything that changes the encoded stereo video's bytes: the render and encode sections, less the
    options of layouts other than the chosen one and what only the final mux reads."""
    layout = get_layout(sections["render"]["layout"])
    render = {k: v for k, v in sections["render"].items() if k in layout.options or k not in LAYOUT_OPTION_KEYS}
    encode = {k: v for k, v in sections["encode"].items() if k not in MUX_ONLY}
    return {**render, **encode}


def near_key(settings: dict) -> str:
    return keyed(settings["method"], settings)


def render_key(settings: dict) -> str:
    return keyed(settings["layout"], settings)


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
