"""P16: the depth stage on ``runtime.providers: auto`` against ONNX Runtime's plain CPU provider, and what
``runtime.precision: fast`` does to the numbers.

    python -m bench.accel [--frames N] [--repeats R]

* P16 = depth stage frames/s with ``auto`` and ``precision: fast`` ÷ with the plain CPU provider: same clip (1080p),
  same export (the 16:9 tier at the bench's side, uint8), same batch, interleaved rounds, best of each. Goal
  >= 2.5 on an Intel CPU with AMX (ONNX Runtime's OpenVINO plugin), >= 1.7 on another x86 CPU with AVX-512-BF16
  (AMD since Zen 4: OpenVINO's own runtime, ``openvino_runtime``); without bf16 arithmetic ``auto`` has nothing
  faster than the CPU provider, and the figure says so (``fast_path``). Beside it: ``auto`` with exact precision
  (it must never be slower than the CPU provider), and the bf16 route itself, named (``providers:
  [openvino_runtime]``), in both precisions: its own speed on any x86 CPU, whether ``auto`` takes it or not.
* The precision table: every path that runs here against the float32 CPU provider, for DA3 and for NVDS (split):
  mean and max relative difference of the output, and the screen parallax it moves at 1080p full SBS (the
  near map of each frame normalised as the ``frame`` stabiliser does, then the renderer's parallax formula at
  the default settings, both with the screen plane that ``convergence: auto`` finds on the reference frame): mean
  and max |Δ| in pixels. ``fp16 graph`` is the model converted to float16
  (ONNX Runtime's converter, inputs and outputs kept float32) and run on the CPU: what an fp16 GPU engine
  computes, emulated.
"""

from __future__ import annotations

import argparse
import json
import platform
import time

import cv2
import numpy as np

from bench import common
from stereo3d.runtime.openvino_runtime import RUNTIME_EP

WIDTH, HEIGHT = 1920, 1080


def cpu_flags() -> dict:
    """The CPU and whether it has bf16 arithmetic (the only CPUs where ``fast`` is faster), as the runtime sees it."""
    from stereo3d.runtime.openvino_runtime import cpu_flags as flags_of_this_cpu
    from stereo3d.runtime.openvino_runtime import has_bf16

    text = open("/proc/cpuinfo").read() if platform.system() == "Linux" else ""
    model = next((line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("model name")), "")
    return {"cpu": model or platform.processor(), "bf16": has_bf16(flags_of_this_cpu())}


def run(frames: int = 16, repeats: int = 2, size: int = common.DA3_SIZE, batch: int = 4) -> dict:
    from stereo3d.runtime import providers as P
    from stereo3d.runtime.sessions import SessionOptions
    from stereo3d.stages.depth import estimate_depth

    tier = common.da3_tier(size)
    common.ensure_models(da3=[("uint8", tier)], nvds=[(common.NVDS_TIER, ("split",))])
    model = common.da3_model_path("uint8", tier)
    video = common.clip(f"depth_{WIDTH}x{HEIGHT}_{frames}", width=WIDTH, height=HEIGHT, frames=frames, fps="24",
                        pattern="testsrc2")  # fmt: skip
    probe = common.probe(video)
    work = common.scratch("accel")
    contenders = {
        "cpu": SessionOptions(providers=("cpu",)),
        "auto_exact": SessionOptions(providers="auto", precision="exact", max_batch=batch),
        "auto_fast": SessionOptions(providers="auto", precision="fast", max_batch=batch),
    }
    route = any(d.ep == RUNTIME_EP for d in P.machine().devices)
    if route:  # the bf16 route named, outside auto: its speed whether auto takes it here or not
        contenders["route_exact"] = SessionOptions(providers=("openvino_runtime",), precision="exact")
        contenders["route_fast"] = SessionOptions(providers=("openvino_runtime",), precision="fast")
    used: dict[str, str] = {}

    def stage(name: str):
        def once() -> float:
            options = contenders[name]
            settings = common.depth_settings("uint8", tier, precision=options.precision)
            result = estimate_depth(video, probe, model, work / f"{name}.maps", settings, batch=batch, options=options)
            used[name] = result["providers"][0]
            return frames / result["fps"]  # the stage's own clock: first frame to last stored

        return once

    times = common.interleaved({name: stage(name) for name in contenders}, repeats)
    fps = {name: round(frames / min(seconds), 2) for name, seconds in times.items()}
    device = P.plan("auto", P.machine(), P.Request()).attempts[0].device
    fast_device = P.plan("auto", P.machine(), P.Request(precision="fast")).attempts[0].device
    flags = cpu_flags()
    ratio = fps["auto_fast"] / fps["cpu"]
    # Without bf16 there is no fast path to gain from; with it, Intel's AMX through the plugin, others' AVX-512-BF16
    # through OpenVINO's runtime.
    goal = (">= 2.5" if fast_device.ep == "OpenVINOExecutionProvider" else ">= 1.7") if flags["bf16"] else ">= 0.9"
    route_figures = {}
    if route:
        route_figures = {f"route_{p}_over_cpu": round(fps[f"route_{p}"] / fps["cpu"], 3) for p in ("exact", "fast")}
    figure = common.figure(
        ratio,
        goal,
        baseline={"cpu_provider_fps": fps["cpu"]},
        measured={name: fps[name] for name in contenders if name != "cpu"},
        auto_exact_over_cpu=round(fps["auto_exact"] / fps["cpu"], 3),
        **route_figures,
        auto_device=device.label,
        auto_fast_device=fast_device.label,
        providers_used=used,
        fast_path=flags["bf16"] or device.kind != "cpu",
        **flags,
        model=model.name,
        clip=f"{WIDTH}x{HEIGHT}, {frames} frames, batch {batch}",
    )
    figure["precision"] = precision_table(model, video, probe, frames)
    return {"P16": figure}


def precision_table(model, video, probe, frames: int) -> dict:
    """Each path against the float32 CPU provider (see the module doc), for DA3 and for NVDS split."""
    from stereo3d.io.decode import FrameReader
    from stereo3d.models.da3.runtime import DepthModel, place, placement_for, to_model_input
    from stereo3d.runtime.sessions import SessionOptions, open_session

    da3 = DepthModel(open_session(model, SessionOptions(providers=("cpu",))), model)
    placed = placement_for(WIDTH, HEIGHT, da3.shape, "letterbox")
    with FrameReader(video, probe, count=min(frames, 8), size=(placed.width, placed.height)) as reader:
        batch = np.stack(list(reader))
    reference = da3.run(batch, placed)
    table = {}
    for name, options in (
        ("auto exact", SessionOptions(providers="auto", precision="exact")),
        ("auto fast", SessionOptions(providers="auto", precision="fast")),
        *_route_options(),
    ):
        session = open_session(model, options)
        depth = DepthModel(session, model).run(batch, placed)
        table[f"DA3 {name} ({session.get_providers()[0].removesuffix('ExecutionProvider')})"] = compare(
            reference, depth
        )
    fp16 = _fp16_copy(model)
    if fp16 is not None:
        depth = DepthModel(open_session(fp16, SessionOptions(providers=("cpu",))), fp16).run(batch, placed)
        table["DA3 fp16 graph (emulated on the CPU)"] = compare(reference, depth)
    emulated = _bf16_emulated(to_model_input(place(batch, placed), "uint8"))
    if emulated is not None:
        table["DA3 bf16 (torch autocast vs float32, emulated)"] = compare(*(placed.crop(d) for d in emulated))
    table.update(_nvds_table(batch, reference))
    return table


def _bf16_emulated(canvases: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """DA3 (the bench's smoke weights) in PyTorch on the canvases, float32 and under bf16 autocast: what an AMX
    CPU's bf16 computes, emulated. None without torch."""
    try:
        import torch
    except ImportError:
        return None
    from stereo3d.models.da3.checkpoint import load_da3_weights
    from stereo3d.models.da3.model import build_da3, depth_module, export_patches

    net = build_da3(common.DA3_VARIANT)
    load_da3_weights(net, common.da3_weights())
    net.cam_enc = net.cam_dec = None
    module = depth_module(net, "uint8")
    x = torch.from_numpy(canvases)
    with export_patches(), torch.inference_mode():
        exact = module(x)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            fast = module(x)
    depth = [out[0] if isinstance(out, tuple) else out for out in (exact, fast)]  # a sky head adds a second output
    return depth[0].float().numpy(), depth[1].float().numpy()


def _nvds_table(rgb: np.ndarray, depth: np.ndarray) -> dict:
    from stereo3d.models.nvds.runtime import open_stabiliser
    from stereo3d.runtime.sessions import SessionOptions
    from stereo3d.stereo.near import near_from_depth

    nears = [near_from_depth(d) for d in depth]

    def stabilised(options, folder=None) -> tuple[np.ndarray, str]:
        stabiliser = open_stabiliser(folder or common.nvds_dir(), *common.NVDS_TIER, options, graphs="split")
        out = np.stack([stabiliser.step(frame, near) for frame, near in zip(rgb, nears)])
        return out, stabiliser._sessions["backbone"].get_providers()[0].removesuffix("ExecutionProvider")

    reference, _ = stabilised(SessionOptions(providers=("cpu",)))
    table = {}
    for name, options in (
        ("auto exact", SessionOptions(providers="auto", precision="exact")),
        ("auto fast", SessionOptions(providers="auto", precision="fast")),
        *_route_options(),
    ):
        out, provider = stabilised(options)
        table[f"NVDS {name} ({provider})"] = compare(reference, out, near=True)
    fp16_dir = _nvds_fp16_copies()
    if fp16_dir is not None:
        out, _ = stabilised(SessionOptions(providers=("cpu",)), fp16_dir)
        table["NVDS fp16 graphs (emulated on the CPU)"] = compare(reference, out, near=True)
    return table


def _route_options() -> list[tuple[str, object]]:
    """The bf16 route named (OpenVINO's own runtime), in both precisions, where it is installed."""
    from stereo3d.runtime import providers as P
    from stereo3d.runtime.sessions import SessionOptions

    if not any(d.ep == RUNTIME_EP for d in P.machine().devices):
        return []
    precision = "bf16" if cpu_flags()["bf16"] else "no bf16 here: float32"
    return [("openvino_runtime exact (f32)", SessionOptions(providers=("openvino_runtime",), precision="exact")),
            (f"openvino_runtime fast ({precision})",
             SessionOptions(providers=("openvino_runtime",), precision="fast"))]  # fmt: skip


def _nvds_fp16_copies():
    """The NVDS split graphs converted to float16, in a folder of their own under their own names."""
    from stereo3d.models.names import nvds_onnx_names

    folder = common.CACHE / "models" / "NVDS_fp16emu"
    names = nvds_onnx_names(f"{common.NVDS_TIER[0]}x{common.NVDS_TIER[1]}", "split")
    for name in names:
        if _fp16_copy(common.nvds_dir() / name, folder / name) is None:
            return None
    return folder


def compare(reference: np.ndarray, other: np.ndarray, near: bool = False) -> dict:
    """Relative differences of the model output, and of the parallax it gives at 1080p full SBS."""
    from stereo3d.stereo.near import near_from_depth
    from stereo3d.stereo.warp import StereoSettings, parallax_px

    finite = np.isfinite(reference) & np.isfinite(other)
    ref, oth = reference[finite].astype(np.float64), other[finite].astype(np.float64)
    scale = np.abs(ref).mean()
    rel = np.abs(oth - ref) / np.maximum(np.abs(ref), 1e-3 * scale)
    settings = StereoSettings()
    shifts = []
    for r, o in zip(reference, other):
        nr, no = (r, o) if near else (near_from_depth(r), near_from_depth(o))
        nr = cv2.resize(np.nan_to_num(nr).astype(np.float32), (WIDTH, HEIGHT), interpolation=cv2.INTER_LINEAR)
        no = cv2.resize(np.nan_to_num(no).astype(np.float32), (WIDTH, HEIGHT), interpolation=cv2.INTER_LINEAR)
        # The reference frame's screen plane for both (convergence auto finds one per frame): the difference is the
        # depth's alone, not a moved screen.
        frame = settings.for_frame(nr)
        shifts.append(np.abs(parallax_px(no, WIDTH, frame) - parallax_px(nr, WIDTH, frame)))
    shift = np.stack(shifts)
    return {
        "mean_rel": float(f"{np.abs(oth - ref).mean() / scale:.3g}"),
        "max_rel": float(f"{rel.max():.3g}"),
        "parallax_mean_px": float(f"{shift.mean():.3g}"),
        "parallax_max_px": float(f"{shift.max():.3g}"),
    }


def _fp16_copy(model, target=None):
    """The model's float16 copy as a CUDA session under ``fast`` opens it (``sessions.fp16_copy``: inputs and outputs
    kept float32, made once per content into the cache), copied to ``target`` where one is given (a graph that is
    opened by its name); None without ``onnx``."""
    import shutil

    from stereo3d.runtime.sessions import fp16_copy

    try:
        import onnx  # noqa: F401  (the converter's)
    except ImportError:
        return None
    copy = fp16_copy(model, common.CACHE / "fp16")
    if target is None:
        return copy
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(copy, target)  # each time: the model under that name may have been exported again
    return target


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    started = time.perf_counter()
    result = run(args.frames, args.repeats)
    result["seconds"] = round(time.perf_counter() - started, 1)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
