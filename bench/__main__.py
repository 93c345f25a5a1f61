"""Every figure of bench/README.md in one run: prints a table and writes bench/results.json.

    python -m bench [--only P1,P5] [--fresh] [--smoke] [--out bench/results.json]

Each figure is a ratio of two things measured in the same run (machine noise cancels); P8 and P11 are in seconds,
P13 in frames.
Smoke models are exported once into the cache (bench/.cache, or $STEREO3D_BENCH_CACHE); ``--fresh`` empties
it first (a cold run: the exports add a few minutes).

A figure that fails does not cost the others theirs: its record holds the error (and its last good value), the
rest are measured and written, and the run exits 1. ``--smoke`` runs every figure at a tiny size in a cache of
its own (bench/.cache-smoke) and writes bench/results-smoke.json: it proves each figure runs (CI runs it); its
values mean nothing.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import shutil
import sys
import time
import traceback
from pathlib import Path

from bench import common
from bench.figures import BY_NAME, FIGURES


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=",".join(BY_NAME), help="comma-separated figures (default: all)")
    parser.add_argument("--fresh", action="store_true", help="empty the model/clip cache first")
    parser.add_argument("--smoke", action="store_true", help="every figure at a tiny size: proves each one runs")
    parser.add_argument("--out", type=Path, default=None, help="default: bench/results.json (smoke: results-smoke)")
    args = parser.parse_args()
    if args.smoke and not common.SMOKE:
        # Started again with the flag in the environment: every module's sizes, and every child's, follow it.
        os.execve(sys.executable, [sys.executable, "-m", "bench", *sys.argv[1:]], {**os.environ, common.SMOKE_ENV: "1"})
    out = args.out or common.ROOT / "bench" / ("results-smoke.json" if common.SMOKE else "results.json")
    wanted = [f.strip().upper() for f in args.only.split(",") if f.strip()]
    unknown = sorted(set(wanted) - set(BY_NAME))
    if unknown:
        parser.error(f"unknown figures {unknown}; choose among {', '.join(BY_NAME)}")
    logging.basicConfig(level=logging.ERROR, format="%(levelname)s %(name)s: %(message)s")
    if args.fresh:
        shutil.rmtree(common.CACHE, ignore_errors=True)
    started = time.perf_counter()

    chosen = [figure for figure in FIGURES if figure.name in wanted]
    # Every export the chosen figures need, side by side, before anything is timed. Should one fail, each figure
    # that needs it fails on its own when it asks for it again.
    da3, nvds = set(), {}
    for figure in chosen:
        da3.update(figure.da3)
        for tier, modes in figure.nvds:
            nvds.setdefault(tier, set()).update(modes)
    try:
        common.ensure_models(da3=sorted(da3, key=str), nvds=[(tier, tuple(sorted(m))) for tier, m in nvds.items()])
    except Exception as exc:
        common.say(f"the exports failed ({exc}); the figures that need them will say so")

    results: dict = {}
    timings: dict[str, float] = {}
    by_products: dict = {}  # what one figure's function hands to a later one (P1/P2's depth store to P7)
    measured = set()
    for figure in chosen:
        # One function may measure several figures (P1 and P2): it runs once, and each of them takes its time.
        if (figure.module, figure.function) in measured:
            continue
        measured.add((figure.module, figure.function))
        names = [f.name for f in chosen if (f.module, f.function) == (figure.module, figure.function)]
        start = time.perf_counter()
        try:
            got = figure.measure(by_products)
        except Exception as exc:
            traceback.print_exc()
            got = {name: failure(exc) for name in names}
        seconds = round(time.perf_counter() - start, 1)
        by_products.update({key[1:]: got.pop(key) for key in list(got) if key.startswith("_")})
        for name in names:
            results[name] = got.get(name) or {"error": f"{figure.module}.{figure.function} returned no {name}"}
            timings[name] = seconds

    total = time.perf_counter() - started
    ordered = {name: results[name] for name in BY_NAME if name in results}
    # Figures not measured this time keep their last values (each says when it was measured); a failed one keeps
    # its last good value beside its error.
    earlier = json.loads(out.read_text()) if out.is_file() else {}
    for name, fig in ordered.items():
        fig["bench_seconds"] = timings[name]
        fig["date"] = time.strftime("%Y-%m-%d")
        last = earlier.get(name, {})
        if "error" in fig and last:
            fig["last_good"] = last.get("last_good") if "error" in last else last
    kept = {name: earlier[name] for name in BY_NAME if name in earlier and name not in ordered}
    merged = {name: ordered.get(name) or kept[name] for name in BY_NAME if name in ordered or name in kept}
    report = {**merged, "_run": {"seconds": round(total, 1), "python": sys.version.split()[0], "smoke": common.SMOKE,
                                  "machine": platform.machine(), "cpu": _cpu(), "cpus": _cpus(),
                                  "cache": str(common.CACHE), "date": time.strftime("%Y-%m-%d %H:%M:%S"),
                                  "figures": list(ordered)}}  # fmt: skip
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(table(ordered))
    failed = [name for name, fig in ordered.items() if "error" in fig]
    met = sum(bool(fig.get("met")) for fig in ordered.values())
    note = " (a smoke run: its sizes are too small for the figures to mean anything)" if common.SMOKE else ""
    print(f"\n{met}/{len(ordered)} goals met in {total:.0f} s{note}; figures in {out}")
    if failed:
        print(f"{len(failed)} figure(s) failed: {', '.join(failed)}")
    return 1 if failed else 0


def failure(exc: BaseException) -> dict:
    """A figure's record when measuring it raised: the error, and where (the innermost frame of the bench or the
    package)."""
    frames = [
        f for f in traceback.extract_tb(exc.__traceback__) if "/bench/" in f.filename or "/stereo3d/" in f.filename
    ]
    where = f"{Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else ""
    message = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return {"error": f"{type(exc).__name__}: {message}", "where": where, "met": False}


def table(figures: dict) -> str:
    rows = [("fig", "what", "ratio", "goal", "met", "baseline", "measured")]
    for name, fig in figures.items():
        if "error" in fig:
            rows.append((name, BY_NAME[name].title, "-", "", "FAILED", fig["error"][:80], fig.get("where", "")))
            continue
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
    return len(os.sched_getaffinity(0))


def _cpu() -> str:
    """The CPU's model name (a speed figure names the CPU it ran on)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as info:
            return next((line.split(":", 1)[1].strip() for line in info if line.startswith("model name")), "")
    except OSError:
        return platform.processor()


if __name__ == "__main__":
    sys.exit(main())
