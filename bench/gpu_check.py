"""GPU figures in frames/s: DA3 at 518 on TensorRT fp16 and on CUDA, NVDS split at 512x288, NVENC, the renderer on
the GPU against the CPU's, the stages in one process, P1/P2 on CUDA, and P9 (a library through the workflow with
profiles/gpu, bench/gpu_library.py).

    bench/gpu_check.sh [--out FILE] [--only a,b]  (the wrapper: repo venv, nvidia-smi, then this)
    python -m bench.gpu_check --cpu-smoke          (exercise every path on a CPU at tiny sizes; figures mean nothing)

Installs nothing. Models come from the bench cache (exported once from smoke weights, timing only). Every
ONNX Runtime session reports the providers it really got (onnxruntime-gpu falls back to CPU silently), and a
figure whose session did not get the provider it names is marked ``"provider_ok": false``. NVENC is tried
with a one-frame test encode first: H100/H200/A100 have no NVENC, and that is reported, not hidden.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from bench import common, gpu_library

PROVIDER_NAMES = {"tensorrt": "TensorrtExecutionProvider", "cuda": "CUDAExecutionProvider",
                  "cpu": "CPUExecutionProvider"}  # fmt: skip


_ONLY: set[str] = set()  # --only: the checks to run (empty: all)


def _safe(name: str, results: dict, fn) -> None:
    """Run one check; a failure is recorded in the JSON (with its first line) and the others still run."""
    if _ONLY and name not in _ONLY:
        return
    common.say(f"gpu_check: {name}")
    try:
        results[name] = fn()
    except Exception as exc:  # a missing provider or encoder must not hide the other figures
        results[name] = {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"}
    common.say(f"gpu_check: {name}: {json.dumps(results[name])[:300]}")


def da3_fps(provider: str, size: int, batch: int, iterations: int, trt_cache: Path) -> dict:
    from stereo3d.runtime.sessions import SessionOptions, open_session

    model = common.da3_model_path("uint8", size)
    options = SessionOptions(providers=(provider, "cpu"), trt_cache_dir=str(trt_cache), trt_fp16=True)
    session, open_s = common.timed(lambda: open_session(model, options))
    used = session.get_providers()
    if used[0] != PROVIDER_NAMES[provider]:  # a silent CPU fallback: say so instead of timing the CPU
        return {
            "model": model.name,
            "provider_ok": False,
            "providers_used": used,
            "why": f"{PROVIDER_NAMES[provider]} could not start here (see the log above)",
        }
    x = np.random.default_rng(0).integers(0, 256, (batch, size, size, 3), dtype=np.uint8)
    _, first_s = common.timed(lambda: session.run(["depth"], {"image": x}))  # TensorRT builds its engine here
    for _ in range(3):
        session.run(["depth"], {"image": x})
    start = time.perf_counter()
    for _ in range(iterations):
        session.run(["depth"], {"image": x})
    seconds = time.perf_counter() - start
    return {"model": model.name, "batch": batch, "fps": round(iterations * batch / seconds, 2),
            "providers_used": used, "provider_ok": used[0] == PROVIDER_NAMES[provider],
            "session_open_s": round(open_s, 2), "first_run_s": round(first_s, 2)}  # fmt: skip


def da3_torch_fps(size: int, batch: int, iterations: int) -> dict:
    """DA3 in PyTorch on the GPU, fp16 autocast: the reference a TensorRT fp16 engine should beat (and the
    figure to read where TensorRT's libraries are not installed)."""
    import torch

    from stereo3d.models.da3.checkpoint import load_da3_weights
    from stereo3d.models.da3.model import build_da3, depth_module, export_patches

    net = build_da3(common.DA3_VARIANT)
    load_da3_weights(net, common.da3_weights())
    net.cam_enc = net.cam_dec = None
    model = depth_module(net, "uint8").cuda()
    x = torch.randint(0, 256, (batch, size, size, 3), dtype=torch.uint8, device="cuda")
    with export_patches(), torch.inference_mode(), torch.autocast("cuda", dtype=torch.float16):
        for _ in range(3):
            model(x)
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(iterations):
            model(x)
        torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    return {
        "torch": torch.__version__,
        "batch": batch,
        "dtype": "fp16 autocast",
        "fps": round(iterations * batch / seconds, 2),
    }


def nvds_fps(provider: str, tier: tuple[int, int], iterations: int) -> dict:
    from stereo3d.models.nvds.runtime import open_stabiliser
    from stereo3d.runtime.sessions import SessionOptions

    stabiliser = open_stabiliser(common.nvds_dir(), *tier, SessionOptions(providers=(provider, "cpu")))
    used = {role: s.get_providers() for role, s in stabiliser._sessions.items()}
    rng = np.random.default_rng(0)
    rgb = rng.integers(0, 256, (tier[1], tier[0], 3), dtype=np.uint8)
    near = rng.random((tier[1], tier[0]), dtype=np.float32)
    for _ in range(5):  # warm-up, and past the 4-frame window start
        stabiliser.step(rgb, near)
    start = time.perf_counter()
    for _ in range(iterations):
        stabiliser.step(rgb, near)
    seconds = time.perf_counter() - start
    return {
        "tier": f"{tier[0]}x{tier[1]}",
        "mode": stabiliser.mode,
        "fps": round(iterations / seconds, 2),
        "providers_used": used,
        "provider_ok": all(p[0] == PROVIDER_NAMES[provider] for p in used.values()),
    }


def nvenc_fps(codec: str, frames: int, width: int, height: int) -> dict:
    from bench.render_encode import scene
    from stereo3d.io.encode import VideoEncoder, _nvenc_problem
    from stereo3d.stereo.layouts import pack
    from stereo3d.stereo.warp import StereoSettings, render_stereo

    problem = _nvenc_problem(codec, "yuv420p")
    if problem is not None:
        return {"codec": codec, "available": False, "why": problem}
    sources, nears = scene(min(frames, 24), width, height, 518)
    packed = [pack(*render_stereo(f, n, StereoSettings()), "full_sbs") for f, n in zip(sources, nears)]
    work = common.scratch("gpu_nvenc")
    start = time.perf_counter()
    with VideoEncoder(work / "sbs.mkv", 2 * width, height, "24", codec=codec, crf=18, preset="medium") as encoder:
        for n in range(frames):
            encoder.write(packed[n % len(packed)])
    seconds = time.perf_counter() - start
    return {"codec": codec, "available": True, "size": f"{2 * width}x{height}", "frames": frames,
            "fps": round(frames / seconds, 2)}  # fmt: skip


def render_gpu(width: int, height: int, frames: int) -> dict:
    """The renderer on the GPU (numba-cuda) against the CPU renderer on the same 1080p frames: frames/s of both
    (views only, both eyes), and whether the views are the same bit for bit."""
    from bench.render_encode import scene
    from stereo3d.stereo import warp

    sources, nears = scene(frames, width, height, 518)
    settings = warp.StereoSettings()
    timings, views = {}, {}
    for device in ("cpu", "cuda"):
        if warp.set_render_device(device) != device:
            from stereo3d.stereo.cuda import unavailable

            return {"available": False, "why": unavailable(), "cpu_fps": timings.get("cpu")}
        views[device] = warp.render_stereo(sources[0], nears[0], settings)  # warm-up: compiling, buffers
        start = time.perf_counter()
        for frame, near in zip(sources, nears):
            warp.render_stereo(frame, near, settings)
        timings[device] = round(frames / (time.perf_counter() - start), 2)
    warp.set_render_device("cpu")
    same = all(np.array_equal(a, b) for a, b in zip(views["cpu"], views["cuda"]))
    return {"available": True, "size": f"{width}x{height}", "frames": frames, "cpu_fps": timings["cpu"],
            "cuda_fps": timings["cuda"], "same_views": same}  # fmt: skip


def pipeline_fps(providers: tuple[str, ...], size: int, tier: tuple[int, int], frames: int, width: int,
                 height: int, codec: str, trt_cache: Path) -> dict:  # fmt: skip
    from stereo3d.io.probe import probe_video
    from stereo3d.runtime.sessions import PROFILE_ENV, SessionOptions, inference_totals
    from stereo3d.stages.depth import estimate_depth
    from stereo3d.stages.near_maps import make_near_maps
    from stereo3d.stages.render import EncodeSettings, render_video
    from stereo3d.stereo.warp import StereoSettings

    os.environ[PROFILE_ENV] = "1"
    clip = common.clip(f"gpu_{width}x{height}_{frames}", width=width, height=height, frames=frames, fps="24",
                       pattern="testsrc2", audio=True)  # fmt: skip
    work = common.scratch("gpu_pipeline")
    options = SessionOptions(providers=providers, trt_cache_dir=str(trt_cache))
    inference_totals(reset=True)
    stages = {}
    started = time.perf_counter()
    probe = probe_video(clip)
    for name, fn in (
        ("depth", lambda: estimate_depth(clip, probe, common.da3_model_path("uint8", size), work / "depth.maps",
                                         batch=8, options=options)),
        ("near_maps", lambda: make_near_maps(clip, probe, work / "depth.maps", work / "near.maps",
                                             common.near_settings("nvds", nvds_tier=f"{tier[0]}x{tier[1]}"),
                                             models_dir=common.nvds_dir(), options=options)),
        ("render", lambda: render_video(clip, probe, work / "near.maps", work / "sbs.mkv", StereoSettings(),
                                        "full_sbs", EncodeSettings(codec=codec, preset="medium"))),
    ):  # fmt: skip
        result, seconds = common.timed(fn)
        stages[name] = {"wall_s": round(seconds, 2), "fps": round(frames / seconds, 2),
                        **{k: v for k, v in result.items() if k in ("providers", "codec")}}  # fmt: skip
    wall = time.perf_counter() - started
    totals = inference_totals()
    return {"clip": f"{width}x{height}, {frames} frames", "da3": f"small {size} uint8 batch 8",
            "nvds": f"split {tier[0]}x{tier[1]}", "fps": round(frames / wall, 2), "wall_s": round(wall, 2),
            "inference_s": round(totals["seconds"], 2), "wall_over_inference": round(wall / totals["seconds"], 3),
            "stages": stages}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=common.ROOT / "bench" / "gpu_results.json")
    parser.add_argument(
        "--cpu-smoke",
        action="store_true",
        help="CPU providers, small sizes: checks that every path runs (figures mean nothing)",
    )
    parser.add_argument("--frames", type=int, default=240, help="frames of the 1080p pipeline clip")
    parser.add_argument("--only", default="", help="comma-separated checks to run (names as in the JSON)")
    args = parser.parse_args()
    _ONLY.update(name for name in args.only.split(",") if name)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    smoke = args.cpu_smoke
    size, tier = (140, common.NVDS_TIER) if smoke else (518, (512, 288))
    gpu = ("cpu",) if smoke else ("cuda",)
    width, height, frames = (320, 180, 8) if smoke else (1920, 1080, args.frames)
    trt_cache = common.CACHE / "trt"
    results: dict = {"host": _host(), "smoke": smoke}
    try:
        import onnxruntime as ort

        results["onnxruntime"] = {"version": ort.__version__, "available_providers": ort.get_available_providers()}
    except ImportError as exc:
        raise SystemExit(f"onnxruntime is not installed in this environment: {exc}") from None
    # Every export the checks use, up front and side by side (P1/P2 and P9 also take the 16:9 tier, P2 the
    # float contract): on a lease, exports one after another inside the checks would cost minutes more.
    common.ensure_models(da3=[("uint8", size), ("uint8", common.da3_tier(size)), ("float", size)],
                         nvds=[(tier, ("split",))])  # fmt: skip
    iterations = 2 if smoke else 50
    if smoke:
        _safe("da3_cpu", results, lambda: da3_fps("cpu", size, 2, iterations, trt_cache))
    else:
        _safe("da3_tensorrt_fp16", results, lambda: da3_fps("tensorrt", size, 8, iterations, trt_cache))
        _safe("da3_tensorrt_fp16_b1", results, lambda: da3_fps("tensorrt", size, 1, iterations, trt_cache))
        _safe("da3_cuda", results, lambda: da3_fps("cuda", size, 8, iterations, trt_cache))
        _safe("da3_cuda_b1", results, lambda: da3_fps("cuda", size, 1, iterations, trt_cache))
        _safe("da3_torch_fp16", results, lambda: da3_torch_fps(size, 8, iterations))
    _safe("nvds_split", results, lambda: nvds_fps(gpu[0], tier, 2 if smoke else 30))
    _safe("nvenc_h264", results, lambda: nvenc_fps("h264_nvenc", 8 if smoke else 120, width, height))
    _safe("x264_veryfast_ref", results, lambda: _x264(width, height, 8 if smoke else 48))
    # TensorRT leads the pipeline's providers only where its engine really ran above.
    trt_ok = results.get("da3_tensorrt_fp16", {}).get("provider_ok", False)
    providers = ("cpu",) if smoke else (("tensorrt",) if trt_ok else ()) + ("cuda", "cpu")
    codec = "h264_nvenc" if results.get("nvenc_h264", {}).get("available") else "libx264"
    _safe("render_gpu", results, lambda: render_gpu(width, height, 8 if smoke else 48))
    _safe("pipeline", results, lambda: pipeline_fps(providers, size, tier, frames, width, height, codec, trt_cache))
    _safe("P1_P2", results, lambda: depth_figures(smoke, gpu[0]))
    _safe("P9", results, lambda: gpu_library.run(2 if smoke else 4, 24 if smoke else 240, smoke))
    if codec == "h264_nvenc":
        _safe("P9_nvenc", results, lambda: gpu_library.run(4, 240, smoke, codec="h264_nvenc"))
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))
    print(f"written {args.out}", file=sys.stderr)


def depth_figures(smoke: bool, provider: str) -> dict:
    """P1 and P2 (bench/depth.py) on the GPU: DA3 small at 518, batch 8, a 1080p clip."""
    from bench import depth

    if smoke:
        figures = depth.run(frames=4, size=common.SMALL_DA3_SIZE, batch=2, repeats=1, provider="cpu")
    else:
        figures = depth.run(frames=96, size=518, batch=8, repeats=2, provider=provider)
    return {key: value for key, value in figures.items() if not key.startswith("_")}


def _x264(width: int, height: int, frames: int) -> dict:
    from bench.render_encode import run

    fig = run(frames, width, height)
    return {
        "render_fps": fig["render_fps"],
        "x264_veryfast_fps": fig["encode_fps_x264_veryfast"],
        "render_over_x264": fig["ratio"],
    }


def _host() -> dict:
    info = {"machine": platform.machine(), "python": sys.version.split()[0]}
    if shutil.which("nvidia-smi"):
        done = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
                              capture_output=True, text=True, check=False)  # fmt: skip
        info["gpus"] = done.stdout.strip().splitlines()
    return info


if __name__ == "__main__":
    main()
