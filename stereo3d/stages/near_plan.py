"""The near_plan stage: a stabiliser's plan over a whole video (e.g. the EMA's smoothed ranges), made from every
depth segment in order before any segment's near maps."""

from __future__ import annotations

from pathlib import Path

from stereo3d.stabilisers import NearSettings


def make_near_plan(depth_segments: list[str | Path], out: str | Path, settings: NearSettings) -> dict:
    """Write the plan of ``settings``' method for the video whose depth segments are ``depth_segments``."""
    stabiliser = settings.stabiliser
    if stabiliser.plan is None:
        raise ValueError(f"the {stabiliser.name} method makes no plan")
    return stabiliser.plan([Path(p) for p in depth_segments], Path(out), settings)
