"""Cache keys: results are stored under a name derived from the settings that made them, so a
setting switched back finds its old result instead of recomputing it."""

from __future__ import annotations

import hashlib
import json
from typing import Any

# The player filename tag of each layout; layouts.py owns it, the workflow imports it from here.
from stereo3d.layouts import LAYOUT_TAGS  # noqa: F401


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
