"""P9: a library of 1080p clips through the workflow with ``profiles/gpu``, against the encoder alone.

    python -m bench.gpu_library [--clips N] [--frames F] [--cpu-smoke]     (bench/gpu_check.sh runs it too)

P9 = output frames/s of the whole run (``snakemake --profile profiles/gpu``: probe, DA3 small at 518 on its
16:9 tier, NVDS split 512x288, full SBS, x264 ``veryfast``; every job, Python start and session opening
included) ÷ frames/s of the same encoder, same settings, on the same packed frames (ffmpeg decodes each result and
encodes it again, one clip after another, with every core). Goal >= 0.8: the GPU keeps the encoder fed.

Beside it: each stage's frames/s (Snakemake's benchmark of every job, summed per rule), the ONNX Runtime
provider and render device each job logged, and the GPU memory peak (``nvidia-smi``, sampled every 0.2 s).
``--cpu-smoke`` runs the same path on the CPU at tiny sizes (checks the script; figures mean nothing).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import threading
import time
from pathlib import Path

from bench import common, pipeline


def run(clips: int = 4, frames: int = 240, smoke: bool = False, codec: str = "libx264",
        providers: str | list[str] | None = None, precision: str = "exact",
        timeout_s: float = 3600) -> dict:  # fmt: skip
    """P9. ``providers``: ``runtime.providers`` of the run; by default CUDA (then the CPU), not TensorRT, whose engine
    builds (minutes, once per model and precision) would be most of a short run; ``auto`` or a list with
    ``tensorrt`` measures a library whose engines are built. A run that fails or outlasts ``timeout_s`` raises with
    what its jobs did until then in the error's ``record`` (each rule's job seconds, the devices the logs name)."""
    size, tier = (common.SMALL_DA3_SIZE, common.NVDS_TIER) if smoke else (518, (512, 288))
    providers = providers or (["cpu"] if smoke else ["cuda", "cpu"])
    width, height = (320, 180) if smoke else (1920, 1080)
    common.ensure_models(nvds=[(tier, ("split",))])
    work = pipeline.workdir(
        "p9",
        size,
        da3={"batch": 8},
        stabilise={"method": "nvds", "nvds_tier": f"{tier[0]}x{tier[1]}"},
        encode={"codec": codec, "preset": "veryfast"},
        runtime={"providers": providers, "precision": precision, "render_device": "cpu" if smoke else "auto",
                 "trt_cache_dir": str(common.CACHE / "trt")},
        report={"qc": False},
    )  # fmt: skip
    _nvds_models(work, tier)
    for n in range(clips):  # different content per clip: x264's speed depends on it
        clip = common.clip(f"p9_{width}x{height}_{frames}_{n}", width=width, height=height, frames=frames, fps="24",
                           pattern=("testsrc2", "mandelbrot", "life", "boxes")[n % 4], audio=True)  # fmt: skip
        os.link(clip, work / "videos" / f"clip{n}.mp4")
    profile = ["--profile", str(common.ROOT / "profiles" / "gpu")]
    started = time.perf_counter()
    try:
        with _GpuMemory() as memory:
            _, wall_s = common.timed(lambda: pipeline._snakemake(work, *profile, timeout=timeout_s))
    except (RuntimeError, subprocess.TimeoutExpired) as exc:
        # What the jobs did until then goes with the error (gpu_check's record of the check adds ``record``).
        failure = RuntimeError(str(exc) if isinstance(exc, RuntimeError) else f"{type(exc).__name__}: {exc}")
        failure.record = {"library": f"{clips} clips of {width}x{height}, {frames} frames each, with audio",
                          "wall_s": round(time.perf_counter() - started, 1),
                          "stages_so_far": _stage_fps(work, clips * frames), "used": _devices_used(work)}  # fmt: skip
        raise failure from exc
    results = sorted((work / "results").rglob("*.m*"))
    if len(results) != clips:
        raise RuntimeError(f"{len(results)} results for {clips} clips in {work / 'results'}")
    encode_s = sum(_encode_alone(result, codec) for result in results)
    total = clips * frames
    fps, encoder_fps = total / wall_s, total / encode_s
    return {
        "P9": round(fps / encoder_fps, 3),
        "goal": ">= 0.8",
        "library": f"{clips} clips of {width}x{height}, {frames} frames each, with audio",
        "settings": f"DA3 small {size} (16:9 tier) batch 8, NVDS split {tier[0]}x{tier[1]}, full SBS, {codec} veryfast",
        "runtime": {"providers": providers, "precision": precision},
        "output_fps": round(fps, 2),
        "wall_s": round(wall_s, 1),
        "encoder_alone_fps": round(encoder_fps, 2),
        "stages": _stage_fps(work, total),
        "used": _devices_used(work),
        "gpu_memory_peak_mib": memory.peak_mib,
    }


def _nvds_models(work: Path, tier: tuple[int, int]) -> None:
    """The cached NVDS smoke weights and split graphs in the work folder, the graphs newer than the weights (as
    the export rule leaves them), so the workflow exports nothing."""
    weights = work / "weights/NVDS/NVDS_Stabilizer.pth"
    weights.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(common.nvds_weights(), weights)
    stamp = weights.stat().st_mtime + 1
    for model in common.nvds_paths(tier, ("split",)):
        for path in (model, model.with_name(model.name + ".validation.json")):
            target = work / "models/NVDS" / path.name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)
            os.utime(target, (stamp, stamp))


def _encode_alone(result: Path, codec: str) -> float:
    """Seconds ffmpeg takes to decode ``result``'s video and encode it again as the render stage did."""
    from stereo3d.io.ffmpeg import ffmpeg_exe

    cmd = [ffmpeg_exe(), "-v", "error", "-i", str(result), "-map", "0:v:0", "-c:v", codec,
           "-preset", "veryfast", "-crf", "18", "-pix_fmt", "yuv420p", "-f", "null", "-"]  # fmt: skip
    _, seconds = common.timed(lambda: subprocess.run(cmd, check=True, capture_output=True))
    return seconds


def _stage_fps(work: Path, frames: int) -> dict:
    """Frames/s of each rule over the whole library: frames ÷ the summed wall seconds of its jobs."""
    stages = {}
    for rule in ("probe", "depth", "near_maps", "render", "join"):
        seconds = 0.0
        for table in (work / "benchmarks" / rule).rglob("*.tsv"):
            lines = table.read_text().splitlines()
            seconds += float(lines[1].split("\t")[0])
        if seconds:
            stages[rule] = {"job_seconds": round(seconds, 2), "fps": round(frames / seconds, 2)}
    return stages


def _devices_used(work: Path) -> dict:
    """What the jobs' logs say they ran on: ONNX Runtime's providers, the renderer's device."""
    used: dict[str, set] = {"providers": set(), "render": set()}
    for log in (work / "logs").rglob("*.log"):
        text = log.read_text(errors="replace")
        # sessions' line: "<model>: running on <device and provider>, precision <p>; opened in ..."
        used["providers"] |= {
            f"{on}, {precision}" for on, precision in re.findall(r"running on (.+?), precision ([^;]+);", text)
        }
        used["render"] |= set(re.findall(r"rendering on (.+)", text))
    return {key: sorted(values) for key, values in used.items()}


class _GpuMemory:
    """The largest memory.used nvidia-smi reports while the block runs (None without nvidia-smi)."""

    def __init__(self, every_s: float = 0.2):
        self.every_s, self.peak_mib = every_s, None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> _GpuMemory:
        if shutil.which("nvidia-smi"):
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def _sample(self) -> None:
        query = ["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"]
        while not self._stop.is_set():
            done = subprocess.run(query, capture_output=True, text=True, check=False)
            values = [int(v) for v in done.stdout.split() if v.isdigit()]
            if values:
                self.peak_mib = max(self.peak_mib or 0, max(values))
            time.sleep(self.every_s)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clips", type=int, default=4)
    parser.add_argument("--frames", type=int, default=240)
    parser.add_argument("--providers", default="", help="runtime.providers: auto, or a comma-separated list")
    parser.add_argument("--precision", default="exact", choices=("exact", "fast"))
    parser.add_argument("--cpu-smoke", action="store_true")
    args = parser.parse_args()
    smoke = args.cpu_smoke
    providers = None if not args.providers else "auto" if args.providers == "auto" else args.providers.split(",")
    figures = run(2 if smoke else args.clips, 24 if smoke else args.frames, smoke, providers=providers,
                  precision=args.precision)  # fmt: skip
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
