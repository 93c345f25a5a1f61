"""Flicker of the near maps on a static-camera clip: raw per-frame, EMA and NVDS paths.

Flicker is the mean |Δnear| between consecutive frames (near maps in 0..1). On a static camera
most of the picture does not move, so a lower figure means steadier depth. With smoke (random)
weights the DA3 depth and the NVDS output are meaningless, so the figures here measure the
*paths* (that each runs, and how much the normalisation alone moves the maps), not depth quality;
rerun with real weights for real figures: ``python -m bench.flicker --weights weights``.

    python -m bench.flicker
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import numpy as np

from bench.common import near_settings
from stereo3d.demo.samples import make_clip
from stereo3d.io.mapstore import MapReader
from stereo3d.io.probe import probe_video
from stereo3d.runtime.sessions import SessionOptions
from stereo3d.stabilisers import stabilisers
from stereo3d.stages.depth import estimate_depth
from stereo3d.stages.near_maps import make_near_maps
from stereo3d.stages.near_plan import make_near_plan

CPU = SessionOptions(providers=("cpu",))


def flicker(path: Path) -> float:
    """Mean absolute change between consecutive near maps."""
    with MapReader(path) as maps:
        near = maps.read()
    return float(np.mean(np.abs(np.diff(near, axis=0))))


def run(work: Path | None = None, frames: int = 48, side: int = 140, tier: tuple[int, int] = (128, 64)) -> dict:
    from stereo3d.demo.smoke import write_smoke_checkpoint, write_smoke_weights
    from stereo3d.models.da3.export import export_da3
    from stereo3d.models.nvds.export import export_nvds
    from stereo3d.models.nvds.model import NvdsConfig

    work = Path(work or tempfile.mkdtemp(prefix="flicker-"))
    clip = make_clip(work / "static.mp4", width=256, height=144, frames=frames, fps="24", pattern="boxes")
    probe = probe_video(clip)
    weights = write_smoke_weights(work / "DA3/model.safetensors", "small", seed=0)
    model = work / f"da3_small_{side}_u8.onnx"
    if not model.is_file():
        export_da3(weights, model, "small", side, "uint8", validate=False)
    checkpoint = write_smoke_checkpoint(work / "NVDS/NVDS_Stabilizer.pth", config=NvdsConfig.tiny(), seed=0)
    nvds_dir = work / "NVDS"
    export_nvds(checkpoint, nvds_dir, *tier, modes=("split",), config=NvdsConfig.tiny(), ort_check=False)

    depth = work / "depth.maps"
    estimate_depth(clip, probe, model, depth, options=CPU)
    figures = {}
    for method, stabiliser in stabilisers().items():
        out = work / f"near-{method}.maps"
        settings = near_settings(method, nvds_tier=f"{tier[0]}x{tier[1]}")
        plan = None
        if stabiliser.plan is not None:
            plan = work / f"plan-{method}.npz"
            make_near_plan([depth], plan, settings)
        make_near_maps(clip, probe, depth, out, settings, plan=plan, models_dir=nvds_dir, options=CPU)
        figures[method] = flicker(out)
    return {
        "clip": {"frames": frames, "size": "256x144", "pattern": "boxes (static camera)"},
        "weights": "smoke (random): path figures, not depth quality",
        "nvds": f"tiny architecture, {tier}",
        "mean_abs_delta_near": figures,
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, help="folder for the clip, models and maps (default: a temp folder)")
    args = parser.parse_args()
    print(json.dumps(run(args.work), indent=2))
