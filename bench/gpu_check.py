"""GPU figures in frames/s, and the proof that the NVIDIA path computes what the CPU does, in stages that each fit one
call of a GPU lease: DA3 at 518 on CUDA (exact against the CPU provider, fast against exact, frames/s at batch 8
and 1) and on TensorRT fp16, NVDS split at 512x288 (against the CPU, frames/s), the renderer on the GPU (its
pixels against the CPU renderer's), NVENC, the stages in one process, P1/P2 on CUDA, and P9 (a library through the
workflow with profiles/gpu, bench/gpu_library.py).

    bench/gpu_check.sh --stage N [--out FILE]     (the wrapper: installs the carried wheels, nvidia-smi, then this)
    python -m bench.gpu_check [--stage N | --only a,b] [--out FILE] [--list] [--budget-s S]
    python -m bench.gpu_check --cpu-smoke          (exercise every path on a CPU at tiny sizes; figures mean nothing)
    bench/gpu_check.sh --rehearse N                (stage N's smoke run here, with what the lease lacks then hidden)

Stages (``--list`` prints them; with neither ``--stage`` nor ``--only`` every stage runs, one after another):

1. (86 s on the H200 of 2026-12-04, with only part 1 carried: no PyAV, zarr or Snakemake yet) ``exports`` of
   its own models (DA3 518 uint8 square, NVDS split 512x288, side by side, torch on the GPU),
   ``da3_cuda_accuracy`` (exact against the CPU
   provider within the exports' tolerance, 1e-3 mean relative; fast against exact within 1e-2), DA3 on CUDA at
   batch 8 in both precisions, ``nvds_split`` (frames/s, and against the CPU within 1e-3; under ``fast``, the float16
   copies' frames/s and difference), ``render_gpu`` (the renderer on the GPU against the CPU renderer, bit for bit).
2. ``exports`` of P1/P2's, DA3 at batch 1, PyTorch fp16 for reference, NVENC and x264, the whole pipeline on a
   1080p clip, P1/P2 on CUDA, DA3 on TensorRT fp16 (one engine, profile 1..8; its build is the first run's wall
   time).
3. P9: four 1080p clips of 48 frames through ``snakemake --profile profiles/gpu`` (and with NVENC where the GPU has it).

Each stage has a time budget (``STAGE_BUDGET_S``, the lease call's timeout less the install and a margin): a check
that would start with less time left than it needs (its ``reserve_s``) is recorded as skipped for time, so a call
never ends at its timeout with a check half done. The results are written after every check (to a temporary file
renamed over the target), to ``$OUT/gpu_results.json`` where ``$OUT`` is set (a lease's folder whose files come
back), else bench/gpu_results.json; each check's record holds its wall seconds and its log lines. A check that
fails is recorded with its error, and the others still run.

Every ONNX Runtime session reports the provider it really got, and a figure whose session did not get the provider
it names is marked ``"provider_ok": false`` and not timed. NVENC is tried with a one-frame test encode first:
H100/H200/A100 have no NVENC, and that is reported, not hidden.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bench import common, gpu_library

PROVIDER_NAMES = {"tensorrt": "TensorrtExecutionProvider", "cuda": "CUDAExecutionProvider",
                  "cpu": "CPUExecutionProvider"}  # fmt: skip
MAX_BATCH = 8  # the TensorRT profile (batch 1..8): one engine serves both batches measured
# Seconds each stage's checks may take, from this process's start: the lease call's timeout (bench/README.md: 240
# s each, 12 minutes with one machine start inside the lease's 15; on the H200 of 2026-12-04 stage 1 took 86 s and
# stage 2 150) less ~30 s for installing the carried part and writing the results.
STAGE_BUDGET_S = {"1": 210, "2": 210, "3": 210}
EXACT_TOLERANCE = 1e-3  # mean relative difference: the exports' own validation tolerance (export.fail_rel_mean_err)
FAST_TOLERANCE = 1e-2  # fast against exact: TF32's 10-bit mantissa (the precision table: ~0.1 %, bench P16)
_STARTED = time.monotonic()
_BUDGET_S: float | None = None  # this run's (main sets it)


def _time_left(margin_s: float) -> float:
    """Seconds of the run's budget left, less ``margin_s`` (an hour without a budget)."""
    if _BUDGET_S is None:
        return 3600.0
    return max(_BUDGET_S - (time.monotonic() - _STARTED) - margin_s, 10.0)


@dataclass(frozen=True)
class Check:
    """One check: its name (in the JSON), stage, function, the DA3 and NVDS exports it needs, and the seconds it
    needs at least (started only with that much of the stage's budget left)."""

    name: str
    stage: str
    fn: Callable[[], dict]
    da3: tuple = ()
    nvds: tuple = ()
    reserve_s: float = 10


class _Lines(logging.Handler):
    """The log lines of one check, for its record (INFO of the runtime: the provider each session got; WARNING and
    above of everything)."""

    def __init__(self):
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno >= logging.WARNING or record.name.startswith("stereo3d.runtime"):
            self.lines.append(f"{record.levelname} {record.name}: {record.getMessage()}"[:500])


def _write(path: Path, results: dict) -> None:
    """``results`` as JSON at ``path``, atomically: a reader (or a killed run) sees the last whole file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(results, indent=2) + "\n")
    os.replace(tmp, path)


def _safe(name: str, results: dict, out: Path, fn, reserve_s: float = 0, budget_s: float | None = None) -> None:
    """Run one check; a failure is recorded in the JSON (with its first line) and the others still run. The
    results are written at once. With ``budget_s``, a check needing more than the time left is skipped."""
    left = None if budget_s is None else budget_s - (time.monotonic() - _STARTED)
    if left is not None and left < reserve_s:
        results[name] = {"skipped": f"out of time: {left:.0f} s of the stage's {budget_s:.0f} left, {reserve_s:.0f} "
                         "needed"}  # fmt: skip
        _write(out, results)
        common.say(f"gpu_check: {name}: {results[name]['skipped']}")
        return
    common.say(f"gpu_check: {name}")
    lines = _Lines()
    logging.getLogger().addHandler(lines)
    started = time.perf_counter()
    try:
        result = fn()
    except Exception as exc:  # a missing provider, package or encoder must not hide the other figures
        text = str(exc).strip().splitlines() or [""]
        result = {"error": f"{type(exc).__name__}: {text[0]}"}
        # A failed Snakemake run's first line says only that it failed; its cause is in the lines after it.
        cause = [line.strip() for line in text[1:] if re.search(r"error|exception|failed|not found", line, re.I)]
        if cause:
            result["cause"] = cause[-8:]
            for line in result["cause"]:
                common.say(f"gpu_check: {name}: {line[:600]}")
        result.update(getattr(exc, "record", {}))  # what the check measured before it failed, if it says
    finally:
        logging.getLogger().removeHandler(lines)
    if not isinstance(result, dict):
        result = {"result": result}
    result["check_s"] = round(time.perf_counter() - started, 1)
    if lines.lines:
        result["log"] = lines.lines[-30:]
    results[name] = result
    _write(out, results)
    common.say(f"gpu_check: {name}: {json.dumps({k: v for k, v in result.items() if k != 'log'})[:400]}")


def da3_fps(provider: str, precision: str, size: int, batch: int, iterations: int, trt_cache: Path) -> dict:
    """DA3 small uint8 at ``size`` by bare ``session.run`` on ``provider`` (TensorRT with the batch 1..8 profile:
    the first run of the first session builds the engine, later sessions load it from ``trt_cache``)."""
    from stereo3d.runtime.sessions import SessionOptions, open_session

    model = common.da3_model_path("uint8", size)
    options = SessionOptions(providers=(provider,), precision=precision, trt_cache_dir=str(trt_cache),
                             max_batch=MAX_BATCH if provider == "tensorrt" else None)  # fmt: skip
    session, open_s = common.timed(lambda: open_session(model, options))
    used = session.get_providers()
    facts = {"model": model.name, "provider": provider, "precision": precision, "batch": batch,
             "providers_used": used, "provider_ok": used[0] == PROVIDER_NAMES[provider],
             "session_open_s": round(open_s, 2)}  # fmt: skip
    if not facts["provider_ok"]:  # a fallback: say so instead of timing the CPU
        return {**facts, "why": f"{PROVIDER_NAMES[provider]} could not start here (see log)"}
    x = np.random.default_rng(0).integers(0, 256, (batch, size, size, 3), dtype=np.uint8)
    _, first_s = common.timed(lambda: session.run(["depth"], {"image": x}))  # TensorRT builds its engine here
    for _ in range(3):
        session.run(["depth"], {"image": x})
    start = time.perf_counter()
    for _ in range(iterations):
        session.run(["depth"], {"image": x})
    seconds = time.perf_counter() - start
    return {**facts, "fps": round(iterations * batch / seconds, 2), "first_run_s": round(first_s, 2),
            "frames_timed": iterations * batch}  # fmt: skip


def relative(a: np.ndarray, b: np.ndarray) -> float:
    """Mean relative difference of ``a`` against ``b``: mean |a - b| / mean |b|."""
    return float(np.abs(a.astype(np.float64) - b).mean() / max(float(np.abs(b).mean()), 1e-12))


def parallax_px(depth: np.ndarray, reference: np.ndarray, width: int = 1920) -> dict:
    """What a depth difference does to the picture: the two depths' near maps (as the near-map stage makes them)
    apart, in pixels of parallax of a ``width``-wide frame at the default divergence: mean and 99th percentile."""
    from stereo3d.defaults import default
    from stereo3d.stereo.near import near_from_depth

    span = default("render.divergence_pct") / 100 * width  # a near map's 0..1 spans this much parallax
    apart = np.concatenate([np.abs(near_from_depth(a) - near_from_depth(b)).ravel() * span
                            for a, b in zip(depth, reference, strict=True)])  # fmt: skip
    return {"mean": float(f"{apart.mean():.3g}"), "p99": float(f"{np.percentile(apart, 99):.3g}")}


def da3_accuracy(provider: str, size: int, frames: int = 2) -> dict:
    """DA3 on ``provider`` against the CPU provider on the same batch: exact within the exports' tolerance, and fast
    against exact (``EXACT_TOLERANCE``, ``FAST_TOLERANCE``); each also as parallax at 1080p (``parallax_px``)."""
    from stereo3d.runtime.sessions import SessionOptions, open_session

    model = common.da3_model_path("uint8", size)
    x = np.random.default_rng(1).integers(0, 256, (frames, size, size, 3), dtype=np.uint8)
    depth, used = {}, {}
    for name, options in (("cpu", SessionOptions(providers=("cpu",))),
                          ("exact", SessionOptions(providers=(provider,), precision="exact")),
                          ("fast", SessionOptions(providers=(provider,), precision="fast"))):  # fmt: skip
        session = open_session(model, options)
        used[name] = session.get_providers()[0]
        depth[name] = session.run(["depth"], {"image": x})[0]
    exact, fast = relative(depth["exact"], depth["cpu"]), relative(depth["fast"], depth["exact"])
    ok = used["exact"] == used["fast"] == PROVIDER_NAMES[provider]
    return {"model": model.name, "frames": frames, "providers_used": used, "provider_ok": ok,
            "exact_vs_cpu": float(f"{exact:.3g}"), "exact_ok": exact <= EXACT_TOLERANCE,
            "fast_vs_exact": float(f"{fast:.3g}"), "fast_ok": fast <= FAST_TOLERANCE,
            "parallax_px_1080p": {"exact_vs_cpu": parallax_px(depth["exact"], depth["cpu"]),
                                  "fast_vs_exact": parallax_px(depth["fast"], depth["exact"])}}  # fmt: skip


def da3_torch_fps(size: int, batch: int, iterations: int) -> dict:
    """DA3 in PyTorch on the GPU, fp16 autocast: the reference a TensorRT fp16 engine should beat (and the
    figure to read where TensorRT's libraries are not installed)."""
    import torch

    from stereo3d.models.da3.checkpoint import load_da3_weights
    from stereo3d.models.da3.model import build_da3, depth_module, export_patches

    if not torch.cuda.is_available():
        return {"available": False, "why": "torch sees no CUDA device"}
    net = build_da3(common.DA3_VARIANT)
    load_da3_weights(net, common.ensure_da3_weights())
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
    return {"torch": torch.__version__, "batch": batch, "dtype": "fp16 autocast",
            "fps": round(iterations * batch / seconds, 2)}  # fmt: skip


def nvds_fps(provider: str, tier: tuple[int, int], iterations: int) -> dict:
    from stereo3d.models.nvds.runtime import open_stabiliser
    from stereo3d.runtime.sessions import SessionOptions

    stabiliser = open_stabiliser(common.nvds_dir(), *tier, SessionOptions(providers=(provider,)), graphs="split")
    used = {role: s.get_providers() for role, s in stabiliser._sessions.items()}
    if any(p[0] != PROVIDER_NAMES[provider] for p in used.values()):  # a fallback: minutes on the CPU, not timed
        return {"tier": f"{tier[0]}x{tier[1]}", "providers_used": used, "provider_ok": False,
                "why": f"{PROVIDER_NAMES[provider]} could not start here (see log)"}  # fmt: skip
    rng = np.random.default_rng(0)
    # Five different frames (the window of four fills at the fourth) give the comparison with the CPU; the last one
    # repeated is timed.
    frames = [(rng.integers(0, 256, (tier[1], tier[0], 3), dtype=np.uint8), rng.random((tier[1], tier[0]),
              dtype=np.float32)) for _ in range(5)]  # fmt: skip
    out = np.stack([stabiliser.step(rgb, near) for rgb, near in frames])
    start = time.perf_counter()
    for _ in range(iterations):
        stabiliser.step(*frames[-1])
    seconds = time.perf_counter() - start
    cpu = open_stabiliser(common.nvds_dir(), *tier, SessionOptions(providers=("cpu",)), graphs="split")
    reference = np.stack([cpu.step(rgb, near) for rgb, near in frames])
    difference = relative(out, reference)
    # `precision: fast` as a near-map job runs it: on CUDA, float16 copies of the graphs (made once, timed here).
    started = time.perf_counter()
    fast_options = SessionOptions(providers=(provider,), precision="fast", fp16_dir=str(common.CACHE / "fp16"))
    fast = open_stabiliser(common.nvds_dir(), *tier, fast_options, graphs="split")
    opened_s = time.perf_counter() - started
    fast_out = np.stack([fast.step(rgb, near) for rgb, near in frames])
    start = time.perf_counter()
    for _ in range(iterations):
        fast.step(*frames[-1])
    fast_seconds = time.perf_counter() - start
    return {
        "tier": f"{tier[0]}x{tier[1]}",
        "mode": stabiliser.mode,
        "fps": round(iterations / seconds, 2),
        "vs_cpu": float(f"{difference:.3g}"),
        "vs_cpu_ok": difference <= EXACT_TOLERANCE,
        "providers_used": used,
        "provider_ok": all(p[0] == PROVIDER_NAMES[provider] for p in used.values()),
        "fast": {
            "fps": round(iterations / fast_seconds, 2),
            "vs_cpu": float(f"{relative(fast_out, reference):.3g}"),
            "opened_s": round(opened_s, 1),  # the first time: the float16 copies made too
            "providers_used": {role: s.get_providers() for role, s in fast._sessions.items()},
        },
    }


def nvenc_fps(codec: str, frames: int, width: int, height: int) -> dict:
    from bench.render_encode import scene
    from stereo3d.io.encode import VideoEncoder, VideoStream, hardware_problem
    from stereo3d.stereo.layouts import pack
    from stereo3d.stereo.warp import Renderer, StereoSettings

    problem = hardware_problem(codec, "yuv420p")
    if problem is not None:
        return {"codec": codec, "available": False, "why": problem}
    sources, nears = scene(min(frames, 24), width, height, 518)
    renderer = Renderer()
    packed = [pack(*renderer.render_stereo(f, n, StereoSettings()), "full_sbs") for f, n in zip(sources, nears)]
    work = common.scratch("gpu_nvenc")
    start = time.perf_counter()
    with VideoEncoder(work / "sbs.mkv", VideoStream(2 * width, height, "24", codec=codec)) as encoder:
        for n in range(frames):
            encoder.write(packed[n % len(packed)])
    seconds = time.perf_counter() - start
    return {"codec": codec, "available": True, "size": f"{2 * width}x{height}", "frames": frames,
            "fps": round(frames / seconds, 2)}  # fmt: skip


def render_gpu(width: int, height: int, frames: int) -> dict:
    """The renderer on the GPU (numba-cuda: the shift map, splat, resampling and hole fill all there) against the CPU
    renderer on the same 1080p frames, as the render job walks them (each frame with the frames around that fill its
    holes, rendered into a packed full-SBS frame): frames/s of both, the GPU renderer's opening (its kernels built
    and checked), and whether every packed frame is the same bit for bit."""
    from bench.render_encode import scene
    from stereo3d.stereo import warp
    from stereo3d.stereo.fill import windowed

    sources, nears = scene(frames, width, height, 518)
    settings = warp.StereoSettings().at_plane(0.75)
    timings, packed, opened = {}, {}, {}

    def walk():
        items = ((index, frame, near) for index, (frame, near) in enumerate(zip(sources, nears)))
        return windowed(items, settings.fill_frames, 0, frames)

    for device in ("cpu", "cuda"):
        start = time.perf_counter()
        renderer = warp.Renderer(device)
        opened[device] = round(time.perf_counter() - start, 2)
        if renderer.device != device:
            from stereo3d.stereo import cuda

            # Why: no CUDA target or GPU (unavailable), else the kernels' build or check on this device failed.
            why = cuda.unavailable() or cuda.open_renderer()[1] or "the GPU renderer did not open (see log)"
            return {"available": False, "why": why, "cpu_fps": timings.get("cpu")}
        # Full SBS, each eye rendered into its half, as stages.render.stereo_frame does (not imported here: stage 1
        # carries no PyAV).
        ring = [np.empty((height, 2 * width, 3), np.uint8) for _ in range(frames)]
        for _ in range(2):  # a warm-up (compiling, buffers, the device's window), then the timed walk
            start = time.perf_counter()
            for index, frame, near, around in walk():
                eyes = (ring[index][:, :width], ring[index][:, width:])
                renderer.render_stereo(frame, near, settings, out=eyes, neighbours=around)
        timings[device] = round(frames / (time.perf_counter() - start), 2)
        packed[device] = ring
        renderer.close()
    same = all(np.array_equal(a, b) for a, b in zip(packed["cpu"], packed["cuda"], strict=True))
    return {"available": True, "size": f"{width}x{height}", "frames": frames, "cpu_fps": timings["cpu"],
            "cuda_fps": timings["cuda"], "cuda_open_s": opened["cuda"], "same_views": same}  # fmt: skip


def pipeline_fps(providers: tuple[str, ...], size: int, tier: tuple[int, int], frames: int, width: int,
                 height: int, codec: str, trt_cache: Path) -> dict:  # fmt: skip
    from stereo3d.io.probe import probe_video
    from stereo3d.runtime.sessions import PROFILE_ENV, SessionOptions, inference_totals
    from stereo3d.stages.depth import estimate_depth
    from stereo3d.stages.near_maps import make_near_maps
    from stereo3d.stages.render import EncodeSettings, RenderSettings, render_video
    from stereo3d.stereo.warp import Renderer

    os.environ[PROFILE_ENV] = "1"
    # As a render job opens it (runtime.render_device: auto): the GPU where numba-cuda finds one.
    renderer = Renderer("auto")
    clip = common.clip(f"gpu_{width}x{height}_{frames}", width=width, height=height, frames=frames, fps="24",
                       pattern="testsrc2", audio=True)  # fmt: skip
    work = common.scratch("gpu_pipeline")
    options = SessionOptions(providers=providers, trt_cache_dir=str(trt_cache), max_batch=8)
    inference_totals(reset=True)
    stages = {}
    started = time.perf_counter()
    probe = probe_video(clip)
    for name, fn in (
        ("depth", lambda: estimate_depth(clip, probe, common.da3_model_path("uint8", size), work / "depth.maps",
                                         common.depth_settings("uint8", size), batch=8, options=options)),
        ("near_maps", lambda: make_near_maps(clip, probe, work / "depth.maps", work / "near.maps",
                                             common.near_settings("nvds", nvds_tier=f"{tier[0]}x{tier[1]}"),
                                             models_dir=common.nvds_dir(), options=options)),
        ("render", lambda: render_video(clip, probe, work / "near.maps", work / "sbs.mkv",
                                        RenderSettings(encode=EncodeSettings(codec=codec, preset="medium")),
                                        renderer=renderer)),
    ):  # fmt: skip
        result, seconds = common.timed(fn)
        stages[name] = {"wall_s": round(seconds, 2), "fps": round(frames / seconds, 2),
                        **{k: v for k, v in result.items() if k in ("providers", "codec")}}  # fmt: skip
    wall = time.perf_counter() - started
    totals = inference_totals()
    return {"clip": f"{width}x{height}, {frames} frames", "da3": f"small {size} uint8 batch 8",
            "nvds": f"split {tier[0]}x{tier[1]}", "providers": list(providers), "precision": options.precision,
            "fps": round(frames / wall, 2), "wall_s": round(wall, 2), "inference_s": round(totals["seconds"], 2),
            "wall_over_inference": round(wall / max(totals["seconds"], 1e-9), 3), "stages": stages,
            "render_device": renderer.device}  # fmt: skip


def depth_figures(smoke: bool, provider: str) -> dict:
    """P1 and P2 (bench/depth.py) on the GPU: DA3 small at 518, batch 8, a 1080p clip."""
    from bench import depth

    if smoke:
        figures = depth.run(frames=4, size=common.SMALL_DA3_SIZE, batch=2, repeats=1, provider="cpu")
    else:
        figures = depth.run(frames=96, size=518, batch=8, repeats=2, provider=provider)
    return {key: value for key, value in figures.items() if not key.startswith("_")}


def _render_stage(width: int, height: int, frames: int) -> dict:
    """P4 restated (bench/render_encode.py) on the lease's CPUs: the render stage against its encoder alone."""
    from bench.render_encode import run

    fig = run(frames, width, height, repeats=1)
    keep = ("stage_fps", "encode_fps", "encoder", "ratio", "render_fps", "bare_warp_fps", "render_over_bare_warp")
    return {
        **{key: fig[key] for key in keep},
        "x264_veryfast_fps": fig["encode_fps_x264_veryfast"],
        "render_over_x264": fig["render_over_x264_veryfast"],
    }


_READY: dict[str, str | None] = {}


def _gpu_ready(provider: str, size: int) -> str | None:
    """Why a check that assumes ``provider`` would run on the CPU instead (minutes of NVDS at 512x288 and DA3 at
    518 on a lease), or None where a DA3 session opens on it. Asked once per run."""
    if provider not in _READY:
        from stereo3d.runtime.sessions import SessionOptions, open_session

        session = open_session(common.da3_model_path("uint8", size), SessionOptions(providers=(provider,)))
        first = session.get_providers()[0]
        ok = first == PROVIDER_NAMES[provider]
        _READY[provider] = None if ok else f"skipped: {PROVIDER_NAMES[provider]} does not start here ({first} does)"
    return _READY[provider]


def checks(smoke: bool, results: dict, frames: int) -> list[Check]:
    """Every check, in the order they run. In the smoke run the CUDA checks run on the CPU provider (named so) and
    the TensorRT ones take their fallback path."""
    size, tier = (common.SMALL_DA3_SIZE, common.NVDS_TIER) if smoke else (518, (512, 288))
    gpu = "cpu" if smoke else "cuda"
    width, height, frames = (320, 180, 8) if smoke else (1920, 1080, frames)
    trt_cache = common.CACHE / "trt"
    square, wide, floats = ("uint8", size), ("uint8", common.da3_tier(size)), ("float", size)
    nvds = ((tier, ("split",)),)
    small = 2 if smoke else None  # iterations in the smoke run

    def da3(provider: str, precision: str, batch: int):
        iterations = small or (200 // batch)  # 200 frames timed
        return lambda: da3_fps(provider, precision, size, batch, iterations, trt_cache)

    def codec() -> str:
        return "h264_nvenc" if results.get("nvenc_h264", {}).get("available") else "libx264"

    def on_gpu(fn):  # the long checks: not on the CPU by a silent fallback
        return lambda: {"skipped": _gpu_ready(gpu, size)} if _gpu_ready(gpu, size) else fn()

    def pipeline() -> dict:
        return pipeline_fps((gpu,), size, tier, frames, width, height, codec(), trt_cache)

    # Four 1080p clips of 48 frames: 4 x 48 took 145 s to the joins on the H200 of 2026-12-04 (4 x 240 outlasted
    # the call). The library run stops 15 s before the stage's budget and records what its jobs did by then.
    p9 = (2, 24) if smoke else (4, 48)

    def p9_run(codec: str = "libx264") -> dict:
        return gpu_library.run(*p9, smoke, codec=codec, timeout_s=_time_left(15))

    def p9_nvenc() -> dict:
        if codec() != "h264_nvenc":
            return {"skipped": "no NVENC here (nvenc_h264 in stage 2 says why)"}
        return p9_run("h264_nvenc")

    return [
        # 1: what only part 1 (onnxruntime-gpu, the exports' packages) needs: no PyAV, zarr or Snakemake.
        Check(f"da3_{gpu}_accuracy", "1", lambda: da3_accuracy(gpu, size), (square,), reserve_s=20),
        Check(f"da3_{gpu}_exact_b8", "1", da3(gpu, "exact", 8), (square,)),
        Check(f"da3_{gpu}_fast_b8", "1", da3(gpu, "fast", 8), (square,)),
        Check("nvds_split", "1", lambda: nvds_fps(gpu, tier, small or 30), (), nvds, reserve_s=60),
        Check("render_gpu", "1", lambda: render_gpu(width, height, 8 if smoke else 48), reserve_s=30),
        # 2: PyAV, zarr (part 2).
        Check(f"da3_{gpu}_exact_b1", "2", da3(gpu, "exact", 1), (square,)),
        Check(f"da3_{gpu}_fast_b1", "2", da3(gpu, "fast", 1), (square,)),
        *([] if smoke else [Check("da3_torch_fp16", "2", lambda: da3_torch_fps(size, 8, 25), reserve_s=30)]),
        Check("nvenc_h264", "2", lambda: nvenc_fps("h264_nvenc", 8 if smoke else 120, width, height)),
        Check("P4_render_stage", "2", lambda: _render_stage(width, height, 8 if smoke else 48), reserve_s=30),
        Check("pipeline", "2", on_gpu(pipeline), (square,), nvds, reserve_s=60),
        Check("P1_P2", "2", on_gpu(lambda: depth_figures(smoke, gpu)), (square, wide, floats), reserve_s=45),
        # TensorRT last: where its libraries exist, the engine build can take minutes; the figures above come first.
        Check("da3_tensorrt_fast_b8", "2", da3("tensorrt", "fast", 8), (square,), reserve_s=30),
        Check("da3_tensorrt_fast_b1", "2", da3("tensorrt", "fast", 1), (square,)),
        # 3: Snakemake (part 3).
        Check("P9", "3", on_gpu(p9_run), (square, wide), nvds, reserve_s=150),
        Check("P9_nvenc", "3", on_gpu(p9_nvenc), (square, wide), nvds, reserve_s=150),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default_out = Path(os.environ["OUT"]) / "gpu_results.json" if os.environ.get("OUT") else None
    parser.add_argument("--out", type=Path, default=default_out,
                        help="results JSON (default $OUT/gpu_results.json where $OUT is set, else "
                             "bench/gpu_results.json)")  # fmt: skip
    parser.add_argument(
        "--cpu-smoke",
        action="store_true",
        help="CPU providers, small sizes: checks that every path runs (figures mean nothing)",
    )
    parser.add_argument("--frames", type=int, default=240, help="frames of the 1080p pipeline clip")
    parser.add_argument("--stage", choices=("1", "2", "3"), help="run one stage (see --list); default: all")
    parser.add_argument("--only", default="", help="comma-separated checks to run (names as in the JSON)")
    parser.add_argument("--list", action="store_true", help="print the stages and their checks, and exit")
    parser.add_argument("--budget-s", type=float, help="seconds the checks may take (default: the stage's budget, "
                        "STAGE_BUDGET_S; none without --stage)")  # fmt: skip
    args = parser.parse_args()
    smoke = args.cpu_smoke
    out = args.out or common.ROOT / "bench" / "gpu_results.json"
    budget = args.budget_s or (STAGE_BUDGET_S[args.stage] if args.stage and not smoke else None)
    global _BUDGET_S
    _BUDGET_S = budget
    results: dict = {"host": _host(), "smoke": smoke, "stage": args.stage or "all", "budget_s": budget}
    plan = checks(smoke, results, args.frames)
    if args.list:
        for stage in ("1", "2", "3"):
            print(f"stage {stage}: exports, " + ", ".join(c.name for c in plan if c.stage == stage))
        return
    only = {name for name in args.only.split(",") if name}
    unknown = only - {c.name for c in plan} - {"exports"}
    if unknown:
        raise SystemExit(f"unknown checks {sorted(unknown)}; --list names them")
    chosen = [c for c in plan if (not args.stage or c.stage == args.stage) and (not only or c.name in only)]
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("stereo3d.runtime").setLevel(logging.INFO)  # the line naming the provider each session got
    try:
        import onnxruntime as ort

        results["onnxruntime"] = {"version": ort.__version__, "file": ort.__file__,
                                  "available_providers": ort.get_available_providers()}  # fmt: skip
    except ImportError as exc:  # the checks that need it fail one by one; exports, torch and the renderer still run
        results["onnxruntime"] = {"error": f"not importable: {exc}"}
    _write(out, results)
    # Every export the chosen checks use, up front and side by side (each stage its own: the first must fit five
    # minutes; the later stages on the same machine find the first one's exports made).
    da3 = list(dict.fromkeys(m for c in chosen for m in c.da3))
    nvds = list(dict.fromkeys(m for c in chosen for m in c.nvds))
    if da3 or nvds:
        needed = [common.da3_model_path(*m).name for m in da3]
        needed += [path.name for tier, modes in nvds for path in common.nvds_paths(tier, modes)]
        _safe("exports", results, out, lambda: {"needed": needed, "made": common.ensure_models(da3=da3, nvds=nvds)})
    for check in chosen:
        _safe(check.name, results, out, check.fn, check.reserve_s, budget)
    # The figures without their log lines (those are in the file): what a lease call's output tail shows.
    brief = {
        k: {kk: vv for kk, vv in v.items() if kk != "log"} if isinstance(v, dict) else v for k, v in results.items()
    }
    print(json.dumps(brief, indent=1))
    print(f"written {out}", file=sys.stderr)


def _host() -> dict:
    info = {"machine": platform.machine(), "python": sys.version.split()[0], "cpus": os.cpu_count()}
    if shutil.which("nvidia-smi"):
        done = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
                              capture_output=True, text=True, check=False)  # fmt: skip
        info["gpus"] = done.stdout.strip().splitlines()
    return info


if __name__ == "__main__":
    main()
