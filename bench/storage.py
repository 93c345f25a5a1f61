"""P7: bytes per frame of the cached depth store ÷ bytes per frame of raw float16 depth.

    python -m bench.storage [--frames N] [--store PATH]

The figure is taken on a synthetic scene with known, DA3-like depth at DA3's output size for a 16:9 frame at
518 (518x291): a ground plane receding to a far wall, a tilted wall, boxes and spheres moving at several
depths (sharp silhouettes, softened over ~2 px as DA3's upsampling head does) and a faint low-frequency
surface texture. Real DA3 depth cannot be produced here (no real weights); the smoke DA3 depth of a generated
clip is reported beside it (``smoke_da3``, from P1's store when given), but random weights give a
patch-grid texture, not depth, and that compresses like noise, so it is not the figure.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import cv2
import numpy as np

from bench import common


def scene_depth(frames: int = 32, width: int = 518, height: int = 291, seed: int = 5) -> np.ndarray:
    """float32 [frames, height, width] distance-like depth (metres-ish, smaller = nearer)."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:height, 0:width].astype(np.float32)
    horizon = 0.42 * height
    # Ground: distance grows towards the horizon; above it a far wall at 40 m, and a tilted wall on the left.
    ground = np.where(yy > horizon, 1.6 * height / np.maximum(yy - horizon, 1.0), 40.0).astype(np.float32)
    base = np.minimum(ground, 40.0)
    tilted = 6.0 + 30.0 * xx / (0.3 * width)
    base = np.where((xx < 0.3 * width) & (tilted < base), tilted, base)
    texture = cv2.GaussianBlur(rng.standard_normal((height, width)).astype(np.float32), (0, 0), 6) * 0.15
    objects = [  # kind, x, y (fractions), size (fraction of height), distance (m), x speed (px/frame)
        ("box", 0.55, 0.55, 0.35, 8.0, 1.5),
        ("sphere", 0.25, 0.65, 0.25, 4.0, -2.0),
        ("box", 0.8, 0.3, 0.2, 15.0, 0.7),
        ("sphere", 0.4, 0.35, 0.12, 12.0, 3.0),
    ]
    out = np.empty((frames, height, width), np.float32)
    for t in range(frames):
        depth = base.copy()
        for kind, x, y, size, dist, speed in objects:
            cx, cy, r = x * width + speed * t, y * height, size * height / 2
            if kind == "box":
                inside = (np.abs(xx - cx) < r) & (np.abs(yy - cy) < r)
                surface = dist + 0.02 * (xx - cx)  # slightly turned towards the camera
            else:
                d2 = ((xx - cx) ** 2 + (yy - cy) ** 2) / (r * r)
                inside = d2 < 1
                surface = dist - 0.8 * np.sqrt(np.clip(1 - d2, 0, 1)) * size * 4
            depth = np.where(inside & (surface < depth), surface, depth)
        depth = depth * np.exp(texture)
        out[t] = cv2.GaussianBlur(depth, (0, 0), 1.0)
    return out


def measure(path: Path, frames: int, height: int, width: int) -> dict:
    size = path.stat().st_size
    raw = frames * height * width * 2
    return {
        "file_bytes": size,
        "frames": frames,
        "map": f"{width}x{height}",
        "bytes_per_frame": round(size / frames, 1),
        "float16_bytes_per_frame": height * width * 2,
        "ratio": round(size / raw, 4),
    }


def run(frames: int = 32, smoke_store: str | Path | None = None) -> dict:
    from stereo3d.io.mapstore import MapReader, write_maps

    work = common.scratch("storage")
    depth = scene_depth(frames)
    start = time.perf_counter()
    write_maps(work / "scene.maps", depth, "log")
    write_s = time.perf_counter() - start
    with MapReader(work / "scene.maps") as store:
        back = store.read()
    scene = measure(work / "scene.maps", *depth.shape)
    scene["max_rel_err"] = float(np.max(np.abs(back - depth) / depth))
    scene["write_ms_per_frame"] = round(1000 * write_s / frames, 2)
    extra = {}
    if smoke_store:
        with MapReader(smoke_store) as store:
            n, (h, w) = store.frames, store.shape
        extra["smoke_da3"] = {
            **measure(Path(smoke_store), n, h, w),
            "note": "random-weights depth (patch-grid texture): not representative",
        }
    common.say(f"P7: map store {scene['ratio']:.3f} of float16 on the synthetic scene")
    return {
        "P7": common.figure(
            scene["ratio"],
            "<= 0.5",
            baseline={"what": "raw float16", "bytes_per_frame": scene["float16_bytes_per_frame"]},
            measured={"what": "stereo3d map store (log transfer)", **scene},
            **extra,
        )
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=32)
    parser.add_argument("--store", type=Path, help="also measure this depth store (e.g. smoke DA3 depth)")
    args = parser.parse_args()
    print(json.dumps(run(args.frames, args.store), indent=2))


if __name__ == "__main__":
    main()
