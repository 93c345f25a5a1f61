"""P7: bytes per frame of the cached depth store (and of the near-map store), and what the quantisation costs in
the rendered views.

    python -m bench.storage [--frames N] [--store PATH]

The figure is taken on a synthetic moving-camera sequence with known, DA3-like depth at DA3's output size for a
16:9 frame at 518 (518x291): the camera pans and moves forward over a ground plane receding to a far wall, a
tilted wall, boxes and spheres moving at several depths (sharp silhouettes, softened over ~2 px as DA3's
upsampling head does) and a faint surface texture fixed to the world, so consecutive frames are coherent as a
real shot's are. Real DA3 depth cannot be produced here (no real weights); the smoke DA3 depth of a generated
clip is reported beside it (``smoke_da3``, from P1's store when given), but random weights give a patch-grid
texture, not depth, and that compresses like noise, so it is not the figure.

The cost of the quantisation is measured where it matters: both views of a 1280x720 textured picture rendered
(default settings) from the near maps of the exact depth and from those of the stored depth, and compared: mean
absolute difference in grey levels (0..255) over every pixel and channel.
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
    """float32 [frames, height, width] distance-like depth (metres-ish, smaller = nearer) seen by a camera that pans
    1.5 px per frame and moves forward 0.4 % of the distance per frame."""
    rng = np.random.default_rng(seed)
    canvas = width + int(1.5 * frames) + 2  # the world is wider than one view: the camera pans across it
    yy, xx = np.mgrid[0:height, 0:canvas].astype(np.float32)
    horizon = 0.42 * height
    # Ground: distance grows towards the horizon; above it a far wall at 40 m, and a tilted wall on the left.
    ground = np.where(yy > horizon, 1.6 * height / np.maximum(yy - horizon, 1.0), 40.0).astype(np.float32)
    base = np.minimum(ground, 40.0)
    tilted = 6.0 + 30.0 * xx / (0.3 * width)
    base = np.where((xx < 0.3 * width) & (tilted < base), tilted, base)
    texture = cv2.GaussianBlur(rng.standard_normal((height, canvas)).astype(np.float32), (0, 0), 6) * 0.15
    world = base * np.exp(texture)
    vy, vx = np.mgrid[0:height, 0:width].astype(np.float32)
    objects = [  # kind, x, y (fractions), size (fraction of height), distance (m), x speed (px/frame)
        ("box", 0.55, 0.55, 0.35, 8.0, 1.5),
        ("sphere", 0.25, 0.65, 0.25, 4.0, -2.0),
        ("box", 0.8, 0.3, 0.2, 15.0, 0.7),
        ("sphere", 0.4, 0.35, 0.12, 12.0, 3.0),
    ]
    out = np.empty((frames, height, width), np.float32)
    for t in range(frames):
        pan = 1.5 * t
        shift = np.float32([[1, 0, -pan], [0, 1, 0]])  # sub-pixel pan of the world into the view
        depth = cv2.warpAffine(world, shift, (width, height), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REFLECT)
        for kind, x, y, size, dist, speed in objects:
            cx, cy, r = x * width + (speed - 1.5) * t, y * height, size * height / 2
            if kind == "box":
                inside = (np.abs(vx - cx) < r) & (np.abs(vy - cy) < r)
                surface = dist + 0.02 * (vx - cx)  # slightly turned towards the camera
            else:
                d2 = ((vx - cx) ** 2 + (vy - cy) ** 2) / (r * r)
                inside = d2 < 1
                surface = dist - 0.8 * np.sqrt(np.clip(1 - d2, 0, 1)) * size * 4
            depth = np.where(inside & (surface < depth), surface, depth)
        out[t] = cv2.GaussianBlur(depth * (1 - 0.004 * t), (0, 0), 1.0)
    return out


def picture(width: int = 1280, height: int = 720, seed: int = 3) -> np.ndarray:
    """A textured RGB picture (edges and gradients everywhere, as a warp error would show)."""
    rng = np.random.default_rng(seed)
    noise = rng.integers(0, 256, (height // 8, width // 8, 3), dtype=np.uint8)
    coarse = cv2.resize(noise, (width, height), interpolation=cv2.INTER_CUBIC)
    fine = rng.integers(0, 64, (height, width, 3), dtype=np.uint8)
    return cv2.add(cv2.multiply(coarse, (0.75, 0.75, 0.75, 0)), fine)


def view_error(exact: np.ndarray, stored: np.ndarray, every: int = 4) -> dict:
    """Mean and 99th-percentile absolute difference (grey levels) of the views rendered from the near maps of
    ``exact`` and of ``stored`` depth, on every ``every``-th frame."""
    from stereo3d.stereo.near import near_from_depth
    from stereo3d.stereo.warp import Renderer, StereoSettings

    # A fixed screen plane: the figure is the store's error, not a convergence planner's answer to it.
    image, settings, renderer = picture(), StereoSettings(convergence=0.25), Renderer()
    diffs = []
    for a, b in zip(exact[::every], stored[::every], strict=True):
        views_a = renderer.render_stereo(image, near_from_depth(a), settings)
        views_b = renderer.render_stereo(image, near_from_depth(b), settings)
        diffs += [np.abs(va.astype(np.int16) - vb.astype(np.int16)) for va, vb in zip(views_a, views_b)]
    diff = np.stack(diffs)
    return {"mean_grey": round(float(diff.mean()), 4), "p99_grey": float(np.percentile(diff, 99)),
            "frames": len(diffs) // 2, "picture": "1280x720"}  # fmt: skip


def measure(path: Path, frames: int, height: int, width: int) -> dict:
    from stereo3d.io.mapstore import store_bytes

    size = store_bytes(path)
    raw = frames * height * width * 2
    return {
        "store_bytes": size,
        "frames": frames,
        "map": f"{width}x{height}",
        "bytes_per_frame": round(size / frames, 1),
        "float16_bytes_per_frame": height * width * 2,
        "ratio": round(size / raw, 4),
    }


def run(frames: int = 96, smoke_store: str | Path | None = None) -> dict:
    from stereo3d.io.mapstore import MapReader, write_maps
    from stereo3d.stereo.near import near_from_depth

    work = common.scratch("storage")
    depth = scene_depth(frames)
    start = time.perf_counter()
    write_maps(work / "scene.maps", depth, "inverse")  # as the depth stage stores it
    write_s = time.perf_counter() - start
    with MapReader(work / "scene.maps") as store:
        back = store.read()
    scene = measure(work / "scene.maps", *depth.shape)
    rel = np.abs(back - depth) / depth
    scene["rel_err_mean"] = float(rel.mean())
    scene["rel_err_max"] = float(rel.max())
    scene["write_ms_per_frame"] = round(1000 * write_s / frames, 2)
    scene["views"] = view_error(depth, back)
    near = np.stack([near_from_depth(d) for d in depth])
    write_maps(work / "near.maps", near, "linear")
    with MapReader(work / "near.maps") as store:
        near_back = store.read()
    near_cache = measure(work / "near.maps", *near.shape)
    near_cache["abs_err_mean"] = float(np.abs(near_back - near).mean())
    extra = {}
    if smoke_store:
        with MapReader(smoke_store) as store:
            n, (h, w) = store.frames, store.shape
        extra["smoke_da3"] = {
            **measure(Path(smoke_store), n, h, w),
            "note": "random-weights depth (patch-grid texture): not representative",
        }
    views = scene["views"]["mean_grey"]
    common.say(f"P7: depth store {scene['bytes_per_frame']:.0f} B/frame ({scene['ratio']:.3f} of float16), near "
               f"{near_cache['bytes_per_frame']:.0f} B/frame; views off by {views} grey")  # fmt: skip
    return {
        "P7": common.figure(
            scene["ratio"],
            "<= 0.066",  # 20 KB per 518x291 frame; and the views within 0.5 grey levels mean
            baseline={"what": "raw float16", "bytes_per_frame": scene["float16_bytes_per_frame"]},
            measured={"what": "stereo3d map store (inverse transfer, 10 bits, moving camera)", **scene},
            near_store=near_cache,
            views_met=scene["views"]["mean_grey"] <= 0.5,
            **extra,
        )
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=96)
    parser.add_argument("--store", type=Path, help="also measure this depth store (e.g. smoke DA3 depth)")
    args = parser.parse_args()
    print(json.dumps(run(args.frames, args.store), indent=2))


if __name__ == "__main__":
    main()
