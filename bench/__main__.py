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
from bench.figures import BY_NAME, FIGURES


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=",".join(BY_NAME), help="comma-separated figures (default: all)")
    parser.add_argument("--fresh", action="store_true", help="empty the model/clip cache first")
    parser.add_argument("--out", type=Path, default=common.ROOT / "bench" / "results.json")
    args = parser.parse_args()
    wanted = [f.strip().upper() for f in args.only.split(",") if f.strip()]
    unknown = sorted(set(wanted) - set(BY_NAME))
    if unknown:
        parser.error(f"unknown figures {unknown}; choose among {', '.join(BY_NAME)}")
    logging.basicConfig(level=logging.ERROR, format="%(levelname)s %(name)s: %(message)s")
    if args.fresh:
        shutil.rmtree(common.CACHE, ignore_errors=True)
    started = time.perf_counter()

    chosen = [figure for figure in FIGURES if figure.name in wanted]
    # Every export the chosen figures need, side by side, before anything is timed.
    da3, nvds = set(), {}
    for figure in chosen:
        da3.update(figure.da3)
        for tier, modes in figure.nvds:
            nvds.setdefault(tier, set()).update(modes)
    common.ensure_models(da3=sorted(da3, key=str), nvds=[(tier, tuple(sorted(modes))) for tier, modes in nvds.items()])

    results: dict = {}
    timings: dict[str, float] = {}
    by_products: dict = {}  # what one figure's function hands to a later one (P1/P2's depth store to P7)
    measured = set()
    for figure in chosen:
        # One function may measure several figures (P1 and P2): it runs once, and each of them takes its time.
        if (figure.module, figure.function) in measured:
            continue
        measured.add((figure.module, figure.function))
        start = time.perf_counter()
        got = figure.measure(by_products)
        seconds = round(time.perf_counter() - start, 1)
        by_products.update({key[1:]: got.pop(key) for key in list(got) if key.startswith("_")})
        for name, value in got.items():
            if name in wanted:
                results[name] = value
                timings[name] = seconds

    total = time.perf_counter() - started
    ordered = {name: results[name] for name in BY_NAME if name in results}
    for name, fig in ordered.items():
        fig["bench_seconds"] = timings[name]
        fig["date"] = time.strftime("%Y-%m-%d")
    # Figures not measured this time keep their last values (each says when it was measured).
    earlier = json.loads(args.out.read_text()) if args.out.is_file() else {}
    kept = {name: earlier[name] for name in BY_NAME if name in earlier and name not in ordered}
    merged = {name: ordered.get(name) or kept[name] for name in BY_NAME if name in ordered or name in kept}
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
        rows.append((name, BY_NAME[name].title, f"{fig['ratio']:.3f}", fig["goal"], "yes" if fig["met"] else "NO",
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
