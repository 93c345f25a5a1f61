"""Where the renderer's CPU goes: P4's walk (1080p -> full SBS, the defaults) with each step's CPU time.

    python -m bench.render_profile [--frames N] [--width W --height H] [--threads T]

Renders P4's synthetic frames as the render job walks them (``stereo_frame`` on every render thread, each frame's
holes filled from its neighbours, the frame window pushed on its own thread), without the encoder, and prints, in
ms of CPU a frame, what each step of the renderer costs (the thread CPU time of every call, summed over the threads
that made it; the steps within a step indented under it), the process's own CPU time, and what no step holds (the
calls' Python, the packing, the thread hand-offs). A change to the renderer is judged by the step it touches: the
stage's frames/s (P4) moves by several percent from one run to the next on a shared machine, a step's CPU far less.
``run()`` returns the same figures.

Every step is a function or method the renderer looks up where it calls it, replaced for the run by one that
times it (``_timed``); a step that no frame reached (renamed, or moved out of the walk) fails the run instead of
reading 0.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import threading
import time
from collections import Counter

import numpy as np

from bench.render_encode import scene

# (label, owner, attribute, depth): the steps, in the order printed; depth 1 lies within the step above it.
STEPS = (
    ("shift map: the depth's enlargement with its edge picks", "upsample", "_enlarge_cells", 0),
    ("warp bands: splat, remap, RGBA -> RGB", "Renderer", "_warp_rows", 0),
    ("splat", "splat", "source_map", 1),
    ("RGB -> RGBA of the frame (remap's source)", "Renderer", "_remap_source", 0),
    ("fill, first pass (gather)", "HoleFill", "gather", 0),
    ("the hole runs' scan", "fill", "hole_runs", 1),
    ("fill, second pass (smooth)", "HoleFill", "smooth", 0),
    ("frame window push", "FrameWindow", "push", 0),
    ("grey picture", "fill", "_grey", 1),
    ("optical flow", "fill", "_flow", 1),
)


def run(frames: int = 48, width: int = 1920, height: int = 1080, near_side: int = 518,
        threads: int | None = None) -> dict:  # fmt: skip
    """CPU ms a frame of each of ``STEPS`` and of the whole process, over a walk of ``frames`` frames after a warm-up
    of 12 (compiled code, workspaces, the thread pool), on ``threads`` render threads (None: every CPU here)."""
    from stereo3d.stages.render import stereo_frame
    from stereo3d.stereo.fill import windowed
    from stereo3d.stereo.warp import Renderer, StereoSettings

    sources, nears = scene(frames, width, height, near_side)
    settings = StereoSettings().at_plane(0.75)  # as P4: the defaults, a convergence plan's screen plane

    def walk(count: int):
        items = ((i, f, n) for i, (f, n) in enumerate(zip(sources[:count], nears[:count])))
        return windowed(items, settings.fill_frames, 0, count)

    threads = threads or len(os.sched_getaffinity(0))
    with Renderer(threads=threads) as renderer:
        ring = [np.empty((height, 2 * width, 3), np.uint8) for _ in range(10)]  # as the encoder's kept arrays
        for index, frame, near, neighbours in walk(min(frames, 12)):
            stereo_frame(renderer, frame, near, settings, "full_sbs", {}, neighbours=neighbours, out=ring[index % 10])
        with _timed() as spent:
            cpu, start = time.process_time(), time.perf_counter()
            for index, frame, near, neighbours in walk(frames):
                stereo_frame(renderer, frame, near, settings, "full_sbs", {}, neighbours=neighbours,
                             out=ring[index % 10])  # fmt: skip
            cpu, wall = time.process_time() - cpu, time.perf_counter() - start
    missed = [label for label, *_ in STEPS if not spent["calls"][label]]
    if missed:
        raise RuntimeError(f"no frame reached these steps (renamed or moved?): {', '.join(missed)}")
    steps: dict = {}  # label: ms, or for a step with steps within it {"ms": ..., "within": {label: ms}}
    for label, _, _, depth in STEPS:
        ms = round(spent["seconds"][label] * 1000 / frames, 2)
        if depth == 0:
            steps[label], outer = ms, label
        else:
            if not isinstance(steps[outer], dict):
                steps[outer] = {"ms": steps[outer], "within": {}}
            steps[outer]["within"][label] = ms
    outside = cpu - sum(spent["seconds"][label] for label, _, _, depth in STEPS if depth == 0)
    return {
        "size": f"{width}x{height} -> {2 * width}x{height} full SBS",
        "frames": frames,
        "threads": threads,
        "fps": round(frames / wall, 2),
        "cpu_ms_per_frame": round(cpu * 1000 / frames, 2),
        "steps_ms_per_frame": steps,
        "outside_the_steps_ms_per_frame": round(outside * 1000 / frames, 2),
    }


@contextlib.contextmanager
def _timed():
    """Each of ``STEPS`` replaced by a wrapper that adds its thread CPU time and counts its calls: yields
    ``{"seconds": Counter, "calls": Counter}`` by label; the originals are put back after."""
    from stereo3d.stereo import fill, splat, upsample, warp

    owners = {"upsample": upsample, "splat": splat, "fill": fill, "Renderer": warp.Renderer,
              "HoleFill": fill.HoleFill, "FrameWindow": fill.FrameWindow}  # fmt: skip
    spent = {"seconds": Counter(), "calls": Counter()}
    lock = threading.Lock()
    originals = []

    def wrapper(label: str, function):
        def timed(*arguments, **keywords):
            start = time.thread_time()
            try:
                return function(*arguments, **keywords)
            finally:
                with lock:
                    spent["seconds"][label] += time.thread_time() - start
                    spent["calls"][label] += 1

        return timed

    try:
        for label, owner, name, _ in STEPS:
            holder = owners[owner]
            original = holder.__dict__[name]  # (a KeyError: the step was renamed)
            originals.append((holder, name, original))
            setattr(holder, name, wrapper(label, original))
        yield spent
    finally:
        for holder, name, original in reversed(originals):
            setattr(holder, name, original)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=48)
    parser.add_argument("--width", type=int, default=1920)
    parser.add_argument("--height", type=int, default=1080)
    parser.add_argument("--near-side", type=int, default=518)
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args()
    print(json.dumps(run(args.frames, args.width, args.height, args.near_side, args.threads), indent=2))


if __name__ == "__main__":
    main()
