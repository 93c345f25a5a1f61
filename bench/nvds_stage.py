"""P17: the NVDS near-map stage against the network alone, with a stand-in network of a GPU's speed.

    python -m bench.nvds_stage [--frames N] [--width W --height H] [--network-fps F] [--repeats R]

The stage (``stereo3d.stages.near_maps.make_near_maps`` with ``stabilise.method: nvds`` at the 512x288 tier, as
a job runs it: the frames decoded at the tier's size, the raw depth read and mapped, each frame prepared for the
network, its output cropped and stored) on a 1080p clip, with the network replaced by a stand-in that takes as long
as NVDS split 512x288 took on an NVIDIA H200 (27.3 frames/s, ``bench/recorded/gpu_h200_2026-12-04.json``): it
prepares each frame and crops its output as the real stabiliser does and waits as a GPU run waits (Python's lock
released) for the network's time. P17 = the stage's frames/s ÷ the network's own (goal ≥ 0.9: the stage runs at
its network's speed; the lease measured 15.8 ÷ 27.3 = 0.58 with the real network). A GPU cannot be lent to every
session; this measures, on any machine, whether the stage's own work keeps up with a GPU of that speed.
"""

from __future__ import annotations

import argparse
import json
import time
from unittest import mock

import numpy as np

from bench import common

H200_NVDS_FPS = 27.3  # NVDS split 512x288, CUDA, H200 (bench/recorded/gpu_h200_2026-12-04.json: nvds_split)
TIER = (512, 288)


class StandIn:
    """The NVDS stabiliser's host-side work (``prepare_frame`` in, the crop and resize out) around a network that
    takes ``seconds`` a frame on another device."""

    mode = "split"

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.steps = 0

    def prime(self, frames) -> None:
        for rgb, near in frames:
            self.prepare(rgb, near)
            time.sleep(self.seconds)

    def step(self, rgb: np.ndarray, near: np.ndarray) -> np.ndarray:
        return self.run(self.prepare(rgb, near))

    def prepare(self, rgb: np.ndarray, near: np.ndarray):
        from stereo3d.models.nvds.runtime import PreparedFrame, prepare_frame

        return PreparedFrame(*prepare_frame(rgb, near, *TIER), near.shape)

    def run(self, frame) -> np.ndarray:
        time.sleep(self.seconds)  # the device's run: the host waits, its lock released
        self.steps += 1
        return frame.fit(frame.box.crop(frame.rgbd[3]))  # its output cropped and resized back as the real one's


def run(frames: int = 240, width: int = 1920, height: int = 1080, network_fps: float = H200_NVDS_FPS,
        repeats: int = 2) -> dict:  # fmt: skip
    """Frames/s of the NVDS stage with the stand-in network, and the network's own."""
    from stereo3d.io.mapstore import MapWriter
    from stereo3d.stages.near_maps import make_near_maps

    clip = common.clip(f"nvds_stage_{width}x{height}_{frames}", width=width, height=height, frames=frames, fps="24",
                       pattern="testsrc2")  # fmt: skip
    probe = common.probe(clip)
    work = common.scratch("nvds_stage")
    # Raw depth as the depth stage stores it (inverse depth at DA3's 16:9 size), a smooth field drifting over time.
    depth = work / "depth.maps"
    rows, cols = 294, 518
    yy, xx = np.mgrid[0:rows, 0:cols].astype(np.float32)
    with MapWriter(depth, "inverse", attrs={"start": 0}, series=("changes",)) as store:
        for index in range(frames):
            store.append(1.0 + np.sin((xx + 2 * index) / 40.0) * np.cos(yy / 30.0), changes=0.0)
    settings = common.near_settings("nvds", nvds_tier=f"{TIER[0]}x{TIER[1]}")
    rounds = []
    for _ in range(repeats):
        stand_in = StandIn(1.0 / network_fps)
        out = work / "near.maps"
        with mock.patch("stereo3d.stabilisers.nvds.open_stabiliser", return_value=stand_in):
            start = time.perf_counter()
            make_near_maps(clip, probe, depth, out, settings, models_dir=work)
            seconds = time.perf_counter() - start
        assert stand_in.steps == frames
        rounds.append(frames / seconds)
        common.shutil.rmtree(out, ignore_errors=True)
    stage = max(rounds)
    return {"clip": f"{width}x{height}, {frames} frames", "tier": f"{TIER[0]}x{TIER[1]}",
            "network_fps": network_fps, "stage_fps": round(stage, 2), "ratio": round(stage / network_fps, 3),
            "rounds": [round(r, 2) for r in rounds], "goal": 0.9}  # fmt: skip


def figure(frames: int = 240, width: int = 1920, height: int = 1080, repeats: int = 2) -> dict:
    """P17 for the harness."""
    common.say(f"P17: the NVDS stage with a stand-in network of the H200's speed, {width}x{height}, {frames} frames")
    fig = run(frames, width, height, repeats=repeats)
    return {
        "P17": common.figure(
            fig["ratio"],
            ">= 0.9",
            baseline={"what": "the network alone: NVDS split 512x288 on an NVIDIA H200", "fps": fig["network_fps"]},
            measured={
                "what": "the near-map stage (decode, depth, prepare, network stand-in, store)",
                "fps": fig["stage_fps"],
            },  # fmt: skip
            setup=f"{fig['clip']}, NVDS tier {fig['tier']}, best of {len(fig['rounds'])} rounds",
            rounds=fig["rounds"],
        )
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=240)
    parser.add_argument("--width", type=int, default=1920)
    parser.add_argument("--height", type=int, default=1080)
    parser.add_argument("--network-fps", type=float, default=H200_NVDS_FPS)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    print(json.dumps(run(args.frames, args.width, args.height, args.network_fps, args.repeats), indent=2))


if __name__ == "__main__":
    main()
