"""Every figure of bench/README.md in one run: prints a table and writes bench/results.json.

    python -m bench [--only P1,P5] [--fresh] [--out bench/results.json]

Each figure is a ratio of two things measured in the same run (machine noise cancels); P8 and P11 are in seconds,
P13 in frames.
Smoke models are exported once into the cache (bench/.cache, or $STEREO3D_BENCH_CACHE); ``--fresh`` empties
it first (a cold run: the exports add a few minutes).
"""

from __future__ import annotations

import argparse
import json
import logging
import platform
import shutil
import sys
import time
from pathlib import Path

from bench import common

FIGURES = ("P1", "P2", "P3", "P4", "P5", "P6", "P7", "P8", "P10", "P11", "P12", "P13", "P14", "P15", "P16")
NAMES = {
    "P1": "depth stage fps / bare session.run fps",
    "P2": "depth stage fps / seed per-frame loop fps",
    "P3": "NVDS split fps / monolith fps",
    "P4": "renderer fps / libx264 veryfast fps",
    "P5": "demo wall time / inference time",
    "P6": "peak RSS 10x clip / 1x clip",
    "P7": "depth store bytes / float16 bytes (moving camera)",
    "P8": "snakemake -n, 100 videos (s)",
    "P10": "PyAV decode fps / ffmpeg pipe fps (worst case)",
    "P11": "snakemake -n, 100 probed 2-hour films (s)",
    "P12": "work/ bytes / results/ bytes, converted clip",
    "P13": "frames of finished work lost per kill (worst)",
    "P14": "fixed cost / stage job wall time (2-hour film)",
    "P15": "DA3 fps at the 16:9 tier / at the square (518)",
    "P16": "depth stage fps, providers auto + precision fast / plain CPU provider",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=",".join(FIGURES), help="comma-separated figures (default: all)")
    parser.add_argument("--fresh", action="store_true", help="empty the model/clip cache first")
    parser.add_argument("--out", type=Path, default=common.ROOT / "bench" / "results.json")
    args = parser.parse_args()
    wanted = [f.strip().upper() for f in args.only.split(",") if f.strip()]
    unknown = sorted(set(wanted) - set(FIGURES))
    if unknown:
        parser.error(f"unknown figures {unknown}; choose among {', '.join(FIGURES)}")
    logging.basicConfig(level=logging.ERROR, format="%(levelname)s %(name)s: %(message)s")
    if args.fresh:
        shutil.rmtree(common.CACHE, ignore_errors=True)
    started = time.perf_counter()

    # Every export the chosen figures need, side by side, before anything is timed.
    da3, nvds = set(), {}
    if {"P1", "P2"} & set(wanted):
        da3 |= {("uint8", common.DA3_SIZE), ("float", common.DA3_SIZE), ("uint8", common.da3_tier(common.DA3_SIZE))}
    if {"P5", "P12"} & set(wanted):
        da3.add(("uint8", common.DA3_SIZE))
        nvds.setdefault(common.NVDS_TIER, set()).add("split")
    if "P3" in wanted:
        nvds.setdefault(common.NVDS_TIER, set()).update({"split", "monolith"})
    if {"P6", "P8", "P11", "P13", "P14"} & set(wanted):
        da3 |= {("uint8", common.SMALL_DA3_SIZE), ("uint8", common.da3_tier(common.SMALL_DA3_SIZE))}
    common.ensure_models(da3=sorted(da3, key=str), nvds=[(tier, tuple(sorted(modes))) for tier, modes in nvds.items()])

    results: dict = {}
    timings: dict[str, float] = {}

    def measure(names: tuple[str, ...], fn) -> dict:
        start = time.perf_counter()
        out = fn()
        for name in names:
            timings[name] = round(time.perf_counter() - start, 1)
        return out

    store = None
    if {"P1", "P2"} & set(wanted):
        from bench import depth

        got = measure(("P1", "P2"), depth.run)
        store = got.pop("_store")
        got.pop("_size")
        results.update({k: v for k, v in got.items() if k in wanted})
    if "P3" in wanted:
        from bench import nvds_split

        results.update(measure(("P3",), nvds_split.figure))
    if "P4" in wanted:
        from bench import render_encode

        results.update(measure(("P4",), render_encode.figure))
    if "P5" in wanted:
        from bench import pipeline

        results.update(measure(("P5",), pipeline.p5))
    if "P6" in wanted:
        from bench import pipeline

        results.update(measure(("P6",), pipeline.p6))
    if "P7" in wanted:
        from bench import storage

        results.update(measure(("P7",), lambda: storage.run(smoke_store=store)))
    if "P8" in wanted:
        from bench import pipeline

        results.update(measure(("P8",), pipeline.p8))

    if "P10" in wanted:
        from bench import decode

        results.update(measure(("P10",), decode.figure))
    if "P15" in wanted:
        from bench import tiers

        results.update(measure(("P15",), tiers.run))
    if "P16" in wanted:
        from bench import accel

        results.update(measure(("P16",), accel.run))
    for name in ("P11", "P12", "P13", "P14"):
        if name in wanted:
            from bench import library

            results.update(measure((name,), library.FIGURES[name]))

    total = time.perf_counter() - started
    ordered = {name: results[name] for name in FIGURES if name in results}
    for name, fig in ordered.items():
        fig["bench_seconds"] = timings[name]
        fig["date"] = time.strftime("%Y-%m-%d")
    # Figures not measured this time keep their last values (each says when it was measured).
    earlier = json.loads(args.out.read_text()) if args.out.is_file() else {}
    kept = {name: earlier[name] for name in FIGURES if name in earlier and name not in ordered}
    merged = {name: ordered.get(name) or kept[name] for name in FIGURES if name in ordered or name in kept}
    report = {**merged, "_run": {"seconds": round(total, 1), "python": sys.version.split()[0],
                                  "machine": platform.machine(), "cpus": _cpus(), "cache": str(common.CACHE),
                                  "date": time.strftime("%Y-%m-%d %H:%M:%S"), "figures": list(ordered)}}  # fmt: skip
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(table(ordered))
    met = sum(fig["met"] for fig in ordered.values())
    print(f"\n{met}/{len(ordered)} goals met in {total:.0f} s; figures in {args.out}")


def table(figures: dict) -> str:
    rows = [("fig", "what", "ratio", "goal", "met", "baseline", "measured")]
    for name, fig in figures.items():
        rows.append((name, NAMES[name], f"{fig['ratio']:.3f}", fig["goal"], "yes" if fig["met"] else "NO",
                     _value(fig["baseline"]), _value(fig["measured"])))  # fmt: skip
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(lines)


def _value(side: dict) -> str:
    for key, unit in (("fps", "fps"), ("ms_per_frame", "ms/frame"), ("inference_s", "s"), ("wall_s", "s"),
                      ("tree_peak_rss_mib", "MiB"), ("bytes_per_frame", "B/frame"), ("seconds", "s")):  # fmt: skip
        if key in side:
            value = side[key]
            if isinstance(value, list):
                value = min(value)
            return f"{value:g} {unit}"
    return side.get("what", "")


def _cpus() -> int:
    import os

    return len(os.sched_getaffinity(0))


if __name__ == "__main__":
    main()
