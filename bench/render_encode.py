"""P4: renderer throughput against the encoder's: 1080p frames -> full SBS, then libx264 ``veryfast`` on them.

    python -m bench.render_encode [--frames N] [--width W --height H] [--near-side S]

Prints frames/s of both and their ratio (goal: render >= 3x encode, so rendering never bounds the stage);
``run()`` returns them. The scene is synthetic but video-like: textured planes at several depths, moving, with
a little sensor noise (x264's speed depends on content; flat test patterns would flatter the encoder). Near
maps come at a DA3-like resolution and are resized by the renderer, as in the pipeline.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import cv2
import numpy as np

from bench import common
from stereo3d.stereo.warp import Renderer, StereoSettings


def run(frames: int = 96, width: int = 1920, height: int = 1080, near_side: int = 518) -> dict:
    """Frames/s of the render stage's full SBS frames (``stereo_frame``, the frames walked with their neighbours
    as the render job walks them: the temporal fill's optical flow and candidates included), of libx264 veryfast
    on them, and the ratio, each over a whole clip of ``frames``. Each pays its start once, as a job does: the
    encoder's process and its pipeline's fill and drain (lookahead, frame threads: ~1.5 s at this size), the
    renderer's frame window. (Over 24 frames, the measure until 2026-12-04, the encoder's start cost it 43 % of its
    frames/s, 12.1 against 21.4, the window's start the renderer 14 %: the ratio read ~1.5x too high.)"""
    # Here: they import PyAV, which scene() (gpu_check's first stage, before PyAV is carried) needs not.
    from stereo3d.io.encode import VideoEncoder, VideoStream
    from stereo3d.stages.render import stereo_frame
    from stereo3d.stereo.fill import windowed

    sources, nears = scene(frames, width, height, near_side)
    # The defaults, the screen plane as a convergence plan gives it (a number per frame: auto's planning is a job of
    # its own), the holes filled from the frames around as the render job walks the video.
    settings = StereoSettings().at_plane(0.75)
    reach = settings.fill_frames if settings.fill == "temporal" else 0

    def walk(count: int = frames):
        return windowed(((i, f, n) for i, (f, n) in enumerate(zip(sources[:count], nears[:count]))), reach, 0, count)

    # As the render job sets its threads (every CPU here).
    with Renderer(threads=len(os.sched_getaffinity(0))) as renderer:
        # Timed as the render stage runs: each frame rendered into the next of the encoder's kept arrays
        # (VideoEncoder.frame_buffer: 10 in turn), so no frame pays the page faults of fresh memory (12 MB).
        ring = [np.empty((height, 2 * width, 3), np.uint8) for _ in range(10)]
        # Warm-up: compiled code, workspaces, the thread pool, the kept arrays' first touch, as a render job is
        # after its first frames.
        for index, frame, near, neighbours in walk(min(frames, 12)):
            stereo_frame(renderer, frame, near, settings, "full_sbs", {}, neighbours=neighbours, out=ring[index % 10])
        start = time.perf_counter()
        for index, frame, near, neighbours in walk():
            stereo_frame(renderer, frame, near, settings, "full_sbs", {}, neighbours=neighbours, out=ring[index % 10])
        render_s = time.perf_counter() - start
        packed = [stereo_frame(renderer, frame, near, settings, "full_sbs", {}, neighbours=neighbours)
                  for _, frame, near, neighbours in walk()]  # fmt: skip

    def encode_fps(preset: str) -> float:
        with tempfile.TemporaryDirectory(prefix="bench-render-encode-") as tmp:
            start = time.perf_counter()
            with VideoEncoder(Path(tmp) / "sbs.mkv", VideoStream(2 * width, height, "24", preset=preset)) as encoder:
                for frame in packed:
                    encoder.write(frame, owned=True)
            return frames / (time.perf_counter() - start)

    render_fps, fast, default = frames / render_s, encode_fps("veryfast"), encode_fps(VideoStream.preset)
    return {
        "size": f"{width}x{height} -> {2 * width}x{height} full SBS",
        "frames": frames,
        "render_fps": round(render_fps, 2),
        "encode_fps_x264_veryfast": round(fast, 2),
        "ratio": round(render_fps / fast, 2),
        "goal": 3.0,
        # Beside it, the encoder as a job runs it by default (``encode.preset``): what its encode costs beside its
        # render.
        "default_preset": {"preset": VideoStream.preset, "encode_fps_x264": round(default, 2),
                           "ratio": round(render_fps / default, 2)},
    }  # fmt: skip


def figure(frames: int = 96) -> dict:
    """P4 for the harness: renderer frames/s ÷ libx264 veryfast frames/s at 1080p full SBS."""
    common.say(f"P4: renderer vs libx264 veryfast, 1080p -> 3840x1080 full SBS, {frames} frames")
    fig = run(frames)
    return {
        "P4": common.figure(
            fig["ratio"],
            ">= 3",
            baseline={
                "what": "libx264 veryfast crf 18 on the packed frames (ffmpeg, own threads)",
                "fps": fig["encode_fps_x264_veryfast"],
            },
            measured={
                "what": "stereo_frame: both views rendered into a full SBS frame (in process)",
                "fps": fig["render_fps"],
            },  # fmt: skip
            setup=f"{fig['size']}, {frames} frames of a synthetic textured scene, near maps at 518 wide",
            default_preset=fig["default_preset"],
        )
    }


def scene(frames: int, width: int, height: int, near_side: int) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Frames of a far textured wall and three textured boxes at other depths drifting sideways, with their
    near maps (normalised inverse depth, larger = nearer) at ``near_side`` wide."""
    rng = np.random.default_rng(11)

    def texture(w: int, h: int) -> np.ndarray:
        coarse = rng.integers(0, 256, (max(2, h // 24), max(2, w // 24), 3), dtype=np.uint8)
        return cv2.GaussianBlur(cv2.resize(coarse, (w, h), interpolation=cv2.INTER_CUBIC), (0, 0), 1.5)

    wall = texture(width + frames * 4, height)
    boxes = [  # x, y, w, h, near, pixels per frame
        (0.10, 0.20, 0.25, 0.45, 0.45, 3),
        (0.45, 0.35, 0.20, 0.40, 0.70, -5),
        (0.70, 0.10, 0.18, 0.30, 1.00, -7),  # (each stays in the picture for 96 frames)
    ]
    box_tex = [texture(int(w * width), int(h * height)) for _, _, w, h, _, _ in boxes]
    near_h = round(near_side * height / width)
    sources, nears = [], []
    for n in range(frames):
        frame = wall[:, 2 * n : 2 * n + width].copy()
        near = np.full((height, width), 0.05, np.float32)
        for (x, y, _, _, z, speed), tex in zip(boxes, box_tex):
            x0, y0 = int(x * width) + speed * n, int(y * height)
            frame[y0 : y0 + tex.shape[0], x0 : x0 + tex.shape[1]] = tex[:, : max(0, width - x0)]
            near[y0 : y0 + tex.shape[0], x0 : x0 + tex.shape[1]] = z
        noise = rng.integers(-3, 4, frame.shape, dtype=np.int16)
        sources.append(np.clip(frame.astype(np.int16) + noise, 0, 255).astype(np.uint8))
        nears.append(cv2.resize(near, (near_side, near_h), interpolation=cv2.INTER_AREA))
    return sources, nears


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=96)
    parser.add_argument("--width", type=int, default=1920)
    parser.add_argument("--height", type=int, default=1080)
    parser.add_argument("--near-side", type=int, default=518)
    args = parser.parse_args()
    print(json.dumps(run(args.frames, args.width, args.height, args.near_side), indent=2))


if __name__ == "__main__":
    main()
