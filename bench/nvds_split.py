"""Per-frame cost of NVDS split graphs (backbone once per frame + head) vs the monolith, on ONNX Runtime CPU.

    python -m bench.nvds_split [--full-models DIR] [--no-full] [--repeats N]

Prints figures and the split/monolith ratio; ``run()`` returns them. Smoke weights: timing only. Without
``--full-models`` the full-size graphs are exported first (minutes on a CPU).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np

WIDTH, HEIGHT = 512, 288


def run(full_models: str | Path | None = None, include_full: bool = True, repeats: int = 3,
        threads: int = 0) -> dict:
    """Median per-frame milliseconds of split vs monolith for the tiny and (optionally) the full config."""
    from stereo3d.nvds.checkpoint import write_smoke_checkpoint
    from stereo3d.nvds.export import export_nvds
    from stereo3d.nvds.model import NvdsConfig

    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        configs = [("tiny", NvdsConfig.tiny(), None)]
        if include_full:
            configs.append(("full", NvdsConfig(), full_models))
        for name, config, models in configs:
            if models is None:
                models = tmp / name
                weights = write_smoke_checkpoint(models / "NVDS_Stabilizer.pth", config)
                export_nvds(weights, models, WIDTH, HEIGHT, config=config, ort_check=False)
            results[name] = time_graphs(Path(models), repeats, threads)
    return results


def time_graphs(models: Path, repeats: int = 3, threads: int = 0) -> dict:
    """Median ms per frame: split = one backbone run + one head run; monolith = one window run."""
    from stereo3d.nvds.export import validation_window
    from stereo3d.runtime import SessionOptions, open_session

    options = SessionOptions(providers=("cpu",), threads=threads)
    tier = f"{WIDTH}x{HEIGHT}"
    backbone = open_session(models / f"NVDS_Backbone_{tier}.onnx", options)
    head = open_session(models / f"NVDS_Head_{tier}.onnx", options)
    monolith = open_session(models / f"NVDS_Stabilizer_{tier}.onnx", options)
    window = validation_window(WIDTH, HEIGHT)
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
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=0)
    args = parser.parse_args()
    results = run(args.full_models, not args.no_full, args.repeats, args.threads)
    for name, fig in results.items():
        print(f"{name:5s} {fig['tier']}: split {fig['split_ms_per_frame']:.1f} ms/frame "
              f"(backbone {fig['backbone_ms']:.1f} + head {fig['head_ms']:.1f}) vs monolith "
              f"{fig['monolith_ms_per_frame']:.1f} ms/frame: ratio {fig['split_over_monolith']:.3f}")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
