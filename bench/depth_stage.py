"""P18: the depth stage against its model alone, with a stand-in model of a GPU's speed.

    python -m bench.depth_stage [--frames N] [--model-fps F] [--batch B] [--repeats R]

The stage (``stereo3d.stages.depth.estimate_depth`` as a job runs it: a 1080p clip decoded and scaled to the 16:9
tier's 518x294, each frame's picture change, the batch placed in the export's input contract, the model's output
cropped, quantised, compressed and stored) with the model's run replaced by a stand-in that waits as long as DA3
small at 518x294 (uint8, batch 8, CUDA exact) took on an NVIDIA H200 (161.3 frames/s: P1's bare
``session.run`` there, ``bench/recorded/gpu_h200_2026-12-04.json``), Python's lock released, and returns a depth
map of the export's size. P18 = the stage's frames/s ÷ the model's own (goal ≥ 0.9: the stage keeps that GPU
busy). P1 measures the same on the CPU provider, where the model is slow and the stage's own work hides behind it;
here that work alone decides. The lease measured P1 on CUDA 0.55 (89 frames/s) before the model ran on a thread
of its own. A real GPU run also costs the host its kernel launches, which the stand-in does not: on a machine
with cores to spare that is another core's work, not the stage's. Twin of P17 (``bench.nvds_stage``).
"""

from __future__ import annotations

import argparse
import json
import time
from unittest import mock

import numpy as np

from bench import common

H200_DA3_FPS = 161.3  # DA3 small 518x294 uint8, batch 8, CUDA exact, H200 (the 2026-12-04 lease's P1 baseline)
SIZE = 70 if common.SMOKE else 518  # the export's longest side: the 16:9 tier of it


def run(frames: int = 960, model_fps: float = H200_DA3_FPS, batch: int = 8, repeats: int = 2) -> dict:
    """Frames/s of the depth stage with the stand-in model, and the model's own."""
    from stereo3d.models.da3.runtime import DepthModel
    from stereo3d.runtime.sessions import SessionOptions
    from stereo3d.stages.depth import estimate_depth

    tier = common.da3_tier(SIZE)
    common.ensure_models(da3=[("uint8", tier)])
    model = common.da3_model_path("uint8", tier)
    width, height = (320, 180) if common.SMOKE else (1920, 1080)
    clip = common.clip(f"depth_stage_{width}x{height}_{frames}", width=width, height=height, frames=frames,
                       fps="24", pattern="testsrc2")  # fmt: skip
    probe = common.probe(clip)
    work = common.scratch("depth_stage")
    # The stand-in's depth: a smooth field, moving from batch to batch (the store compresses what it is given).
    rows, cols = np.mgrid[0 : tier[1], 0 : tier[0]].astype(np.float32)
    calls = []

    def infer(contract: DepthModel, feed: np.ndarray) -> list[np.ndarray]:
        time.sleep(len(feed) / model_fps)  # the device's run: the host waits, its lock released
        calls.append(len(feed))
        shift = np.float32(len(calls))
        depth = 1.0 + np.sin((cols + shift) / 40.0) * np.cos(rows / 30.0)
        outputs = [np.broadcast_to(depth, (len(feed), *depth.shape)).copy()]
        if contract.has_sky:
            outputs.append(np.zeros_like(outputs[0]))
        return outputs

    rounds, opened = [], []
    for index in range(repeats):
        out = work / f"depth-{index}.maps"
        calls.clear()
        with mock.patch.object(DepthModel, "infer", infer):
            # Timed as P1 times the stage: from its first frame to its stored last one (the job's own clock), the
            # session's opening apart (a long segment amortises it).
            result = estimate_depth(clip, probe, model, out, common.depth_settings("uint8", tier), batch=batch,
                                    options=SessionOptions(providers=("cpu",)))  # fmt: skip
        assert sum(calls) == frames == result["frames"]
        rounds.append(result["fps"])
        opened.append(result["session_open_s"])
        common.shutil.rmtree(out, ignore_errors=True)
    stage = max(rounds)
    return {"clip": f"{width}x{height}, {frames} frames", "tier": f"{tier[0]}x{tier[1]}", "batch": batch,
            "model_fps": model_fps, "stage_fps": round(stage, 2), "ratio": round(stage / model_fps, 3),
            "rounds": [round(r, 2) for r in rounds], "session_open_s": opened, "goal": 0.9}  # fmt: skip


def figure(frames: int = 960, repeats: int = 2) -> dict:
    """P18 for the harness."""
    common.say(f"P18: the depth stage with a stand-in model of the H200's speed, {frames} frames")
    fig = run(frames, repeats=repeats)
    model = f"DA3 small {fig['tier']} uint8, batch {fig['batch']}, CUDA exact on an NVIDIA H200"
    stage = "the depth stage (decode and scale, picture changes, place, model stand-in, crop, store)"
    return {
        "P18": common.figure(
            fig["ratio"],
            ">= 0.9",
            baseline={"what": f"the model alone: {model}", "fps": fig["model_fps"]},
            measured={"what": stage, "fps": fig["stage_fps"]},
            setup=f"{fig['clip']}, export {fig['tier']}, best of {len(fig['rounds'])} rounds, each from its first "
            "frame (the session's opening apart)",
            rounds=fig["rounds"],
            session_open_s=fig["session_open_s"],
        )
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=960)
    parser.add_argument("--model-fps", type=float, default=H200_DA3_FPS)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    print(json.dumps(run(args.frames, args.model_fps, args.batch, args.repeats), indent=2))


if __name__ == "__main__":
    main()
