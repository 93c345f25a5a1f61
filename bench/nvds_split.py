"""P3: per-frame cost of NVDS split graphs (backbone once per frame + head) vs the monolith, ONNX Runtime CPU.

    python -m bench.nvds_split [--full-models DIR] [--no-full] [--tiny] [--repeats N] [--tier WxH]

P3 = split per-frame speed ÷ monolith per-frame speed (= monolith ms ÷ split ms), full configuration, same
tier. The harness (``python -m bench``) measures the demo's tier, 256x128: the full model at 512x288 takes
several seconds per window on this CPU. Smoke weights: timing only. Without ``--full-models`` the full-size
graphs come from the bench cache (exported once, minutes on a CPU); ``--tiny`` adds the tiny configuration.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np

from bench import common


def figure(tier: tuple[int, int] = common.NVDS_TIER, repeats: int = 3) -> dict:
    """P3 for the harness: the full configuration at ``tier``, models from the bench cache."""
    common.ensure_models(nvds=[(tier, ("split", "monolith"))])
    common.say(f"P3: NVDS split vs monolith, full configuration at {tier[0]}x{tier[1]}, {repeats} repeats")
    fig = time_graphs(common.nvds_dir(), repeats, width=tier[0], height=tier[1])
    return {"P3": common.figure(
        fig["monolith_ms_per_frame"] / fig["split_ms_per_frame"], ">= 1.6",
        baseline={"what": "monolith: the 4-frame window graph once per frame",
                  "ms_per_frame": fig["monolith_ms_per_frame"], "fps": round(1000 / fig["monolith_ms_per_frame"], 3)},
        measured={"what": "split: backbone once per frame + head", "ms_per_frame": fig["split_ms_per_frame"],
                  "fps": round(1000 / fig["split_ms_per_frame"], 3), "backbone_ms": fig["backbone_ms"],
                  "head_ms": fig["head_ms"]},
        setup=f"NVDS full configuration (smoke weights), tier {fig['tier']}, CPU, median of {repeats}")}


def run(full_models: str | Path | None = None, include_full: bool = True, repeats: int = 3,
        threads: int = 0, include_tiny: bool = True, width: int = 512, height: int = 288) -> dict:
    """Median per-frame milliseconds of split vs monolith for the tiny and (optionally) the full config."""
    from stereo3d.nvds.checkpoint import write_smoke_checkpoint
    from stereo3d.nvds.export import export_nvds
    from stereo3d.nvds.model import NvdsConfig

    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        configs = [("tiny", NvdsConfig.tiny(), None)] if include_tiny else []
        if include_full:
            if full_models is None:
                common.ensure_models(nvds=[((width, height), ("split", "monolith"))])
                full_models = common.nvds_dir()
            configs.append(("full", NvdsConfig(), full_models))
        for name, config, models in configs:
            if models is None:
                models = tmp / name
                weights = write_smoke_checkpoint(models / "NVDS_Stabilizer.pth", config)
                export_nvds(weights, models, width, height, config=config, ort_check=False)
            results[name] = time_graphs(Path(models), repeats, threads, width, height)
    return results


def time_graphs(models: Path, repeats: int = 3, threads: int = 0, width: int = 512, height: int = 288) -> dict:
    """Median ms per frame: split = one backbone run + one head run; monolith = one window run."""
    from stereo3d.nvds.export import validation_window
    from stereo3d.runtime import SessionOptions, open_session

    options = SessionOptions(providers=("cpu",), threads=threads)
    tier = f"{width}x{height}"
    backbone = open_session(models / f"NVDS_Backbone_{tier}.onnx", options)
    head = open_session(models / f"NVDS_Head_{tier}.onnx", options)
    monolith = open_session(models / f"NVDS_Stabilizer_{tier}.onnx", options)
    window = validation_window(width, height)
    feat_names = [o.name for o in backbone.get_outputs()]
    feats = backbone.run(feat_names, {"frame_rgbd": window[:, -1]})
    feeds = {n: np.concatenate([f] * 4) for n, f in zip(feat_names, feats)}
    feeds["last_rgb"] = np.ascontiguousarray(window[:, -1, 0:3])

    def median_ms(fn):
        fn()  # warm-up: arena growth and first-run allocations
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
        return 1000 * float(np.median(times))

    backbone_ms = median_ms(lambda: backbone.run(feat_names, {"frame_rgbd": window[:, -1]}))
    head_ms = median_ms(lambda: head.run(None, feeds))
    monolith_ms = median_ms(lambda: monolith.run(None, {"window_rgbd": window}))
    split_ms = backbone_ms + head_ms
    return {"tier": tier, "backbone_ms": round(backbone_ms, 1), "head_ms": round(head_ms, 1),
            "split_ms_per_frame": round(split_ms, 1), "monolith_ms_per_frame": round(monolith_ms, 1),
            "split_over_monolith": round(split_ms / monolith_ms, 3), "repeats": repeats}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full-models", type=Path, help="folder holding the full-size 512x288 exports")
    parser.add_argument("--no-full", action="store_true", help="tiny configuration only")
    parser.add_argument("--tiny", action="store_true", help="also the tiny configuration")
    parser.add_argument("--tier", default="512x288", help="WIDTHxHEIGHT (default 512x288)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=0)
    args = parser.parse_args()
    width, height = (int(v) for v in args.tier.split("x"))
    results = run(args.full_models, not args.no_full, args.repeats, args.threads, args.tiny or args.no_full,
                  width, height)
    for name, fig in results.items():
        print(f"{name:5s} {fig['tier']}: split {fig['split_ms_per_frame']:.1f} ms/frame "
              f"(backbone {fig['backbone_ms']:.1f} + head {fig['head_ms']:.1f}) vs monolith "
              f"{fig['monolith_ms_per_frame']:.1f} ms/frame: ratio {fig['split_over_monolith']:.3f}")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
