"""Quality control for ``snakemake --report``: what a person checks before spending hours on a library.

Per video (:func:`video_report`):

- a **contact sheet**: at a few timestamps, the source frame, the raw DA3 depth (each frame normalised
  alone, as inverse depth), the stabilised near map and a red-cyan anaglyph preview of the configured 3D;
- a **flicker plot**: mean |Δnear| between consecutive frames over time, for the raw per-frame normalised
  maps and for the stabilised ones (what stabilisation buys);
- a **parallax plot**: per-frame percentiles of screen parallax in % of the frame width, the comfort limit,
  and the share of frames beyond it;
- ``stats.json`` with the numbers, which :func:`library_table` gathers into one table.

For the library: :func:`validation_table` (every export's validation JSON) and :func:`benchmark_table` (the
rules' ``benchmark:`` files). Figures are drawn with OpenCV (no plotting dependency); tables are small,
self-contained HTML pages.

Map stores are given as lists (one per segment, in frame order) and read as one sequence. Statistics run on
maps shrunk to at most ``STATS_WIDTH`` pixels wide: the measures are means and percentiles of relative
quantities, which shrinking barely changes, and a feature film then costs minutes, not an hour.
"""

from __future__ import annotations

import csv
import dataclasses
import html
import json
import logging
import math
from collections.abc import Iterator, Sequence
from pathlib import Path

import cv2
import numpy as np

from stereo3d.atomic import atomic_output
from stereo3d.layouts import anaglyph_dubois
from stereo3d.mapstore import MapReader
from stereo3d.near import near_from_depth
from stereo3d.progress import Progress
from stereo3d.render import StereoSettings, parallax_px, render_stereo

log = logging.getLogger(__name__)

STATS_WIDTH = 160  # pixels: maps are shrunk to this width for the statistics (see the module doc)
PERCENTILES = (1, 5, 50, 95, 99)  # of screen parallax, per frame
HIST_RANGE_PCT = 25.0  # parallax histogram covers ±this % of the width (divergence ≤ 10 plus IPD offset ≤ 5)
HIST_BINS = 5000  # 0.01 % of the width per bin
# BGR colours of the figures
INK, GRID, PAPER = (40, 40, 40), (225, 225, 225), (255, 255, 255)
RAW_COLOUR, STABLE_COLOUR, LIMIT_COLOUR = (60, 120, 230), (180, 110, 30), (40, 40, 200)
TAIL_COLOUR, GRID_DARK, BAND_COLOUR = (120, 120, 230), (170, 170, 170), (235, 215, 190)


# --- per video ---------------------------------------------------------------------------------------------------
def video_report(
    source: str | Path,
    probe: dict,
    depth: Sequence[str | Path],
    near: Sequence[str | Path],
    render: dict,
    near_pct: tuple[float, float],
    comfort_limit_pct: float,
    out_contact_sheet: str | Path,
    out_flicker: str | Path,
    out_parallax: str | Path,
    out_stats: str | Path,
    rows: int = 4,
    tile_width: int = 320,
) -> dict:
    """Every per-video figure and the stats; returns the stats."""
    settings = stereo_settings(render)
    name = Path(source).name
    times = frame_times(probe)
    sheet = contact_sheet(source, probe, depth, near, settings, near_pct, rows=rows, tile_width=tile_width)
    _write_png(out_contact_sheet, sheet)
    stats = map_statistics(depth, near, settings, near_pct, comfort_limit_pct)
    raw, stable = stats.pop("flicker_raw"), stats.pop("flicker_stabilised")
    per_frame = stats.pop("parallax_per_frame")
    _write_png(out_flicker, flicker_figure(times, raw, stable, name))
    _write_png(out_parallax, parallax_figure(times, per_frame, comfort_limit_pct, stats, name))
    stats = {"video": name, "frames": len(times), "duration_s": _duration(probe, times), **stats}
    with atomic_output(out_stats) as tmp:
        tmp.write_text(json.dumps(stats, indent=2, sort_keys=True))
    log.info("%s: flicker raw %.4f → stabilised %.4f; parallax p1..p99 %.2f..%.2f %% of width; %.1f %% of frames "
             "beyond ±%.1f %%", name, stats["flicker"]["raw_mean"], stats["flicker"]["stabilised_mean"],
             stats["parallax_pct"]["p1"], stats["parallax_pct"]["p99"], stats["comfort"]["beyond_pct"],
             comfort_limit_pct)
    return stats


def stereo_settings(render: dict) -> StereoSettings:
    """The renderer's settings out of the config's ``render`` (+ ``encode``) section; other keys are ignored."""
    names = {f.name for f in dataclasses.fields(StereoSettings)}
    return StereoSettings(**{k: v for k, v in render.items() if k in names})


def frame_times(probe: dict) -> np.ndarray:
    """Presentation time (s) of every frame: exact for VFR, from the frame rate where the probe lacks them."""
    video = probe["video"]
    pts = probe.get("frame_pts_s")
    if pts and len(pts) == video["frame_count"]:
        return np.asarray(pts, dtype=np.float64) - float(pts[0])
    return np.arange(video["frame_count"], dtype=np.float64) / float(video["fps"])


def contact_sheet(
    source: str | Path,
    probe: dict,
    depth: Sequence[str | Path],
    near: Sequence[str | Path],
    settings: StereoSettings,
    near_pct: tuple[float, float] = (2.0, 98.0),
    rows: int = 4,
    tile_width: int = 320,
) -> np.ndarray:
    """BGR image: one row per timestamp (evenly spread), columns source | raw depth | near map | anaglyph."""
    from stereo3d.video import FrameReader

    video = probe["video"]
    total = video["frame_count"]
    width, height = video["display_width"], video["display_height"]
    tile_w = min(tile_width, width) // 2 * 2
    tile_h = max(2, round(tile_w * height / width) // 2 * 2)
    times = frame_times(probe)
    depth_maps, near_maps = MapSequence(depth), MapSequence(near)
    _check_counts(total, depth_maps, near_maps)
    picks = sorted({min(total - 1, int((k + 0.5) * total / rows)) for k in range(rows)})
    header = ["source", "raw depth (per frame)", "stabilised near map", "anaglyph preview"]
    lines = [_label_row(header, tile_w)]
    for index in picks:
        with FrameReader(source, probe, start=index, count=1, size=(tile_w, tile_h)) as reader:
            frame = next(iter(reader))  # RGB
        raw = near_from_depth(depth_maps.frame(index), *near_pct)
        stable = near_maps.frame(index)
        left, right = render_stereo(frame, stable, settings)
        tiles = [
            cv2.cvtColor(frame, cv2.COLOR_RGB2BGR),
            colourise(raw, (tile_w, tile_h)),
            colourise(stable, (tile_w, tile_h)),
            cv2.cvtColor(anaglyph_dubois(left, right), cv2.COLOR_RGB2BGR),
        ]
        row = np.concatenate([_pad(t) for t in tiles], axis=1)
        caption = _label_row([f"frame {index}  t = {times[index]:.2f} s"], row.shape[1], align_left=True)
        lines += [caption, row]
    return np.concatenate(lines, axis=0)


def colourise(near: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """A 0..1 near map as a BGR picture (inferno: bright = near), resized to ``size`` = (width, height)."""
    grey = np.clip(np.asarray(near, dtype=np.float32), 0.0, 1.0)
    grey = cv2.resize(grey, size, interpolation=cv2.INTER_AREA if grey.shape[1] > size[0] else cv2.INTER_LINEAR)
    return cv2.applyColorMap(np.rint(grey * 255).astype(np.uint8), cv2.COLORMAP_INFERNO)


def map_statistics(
    depth: Sequence[str | Path],
    near: Sequence[str | Path],
    settings: StereoSettings,
    near_pct: tuple[float, float],
    comfort_limit_pct: float,
) -> dict:
    """Flicker of raw (per-frame normalised) and stabilised maps, parallax percentiles and comfort, in one pass."""
    depth_maps, near_maps = MapSequence(depth), MapSequence(near)
    _check_counts(None, depth_maps, near_maps)
    raw_flicker, stable_flicker, per_frame = [], [], []
    hist = np.zeros(HIST_BINS, dtype=np.int64)
    previous_raw = previous_stable = None
    progress = Progress(log, "qc maps", len(near_maps))
    for depth_map, near_map in zip(depth_maps, near_maps, strict=True):
        raw = _shrink(near_from_depth(depth_map, *near_pct))
        stable = _shrink(near_map)
        if previous_raw is not None:
            raw_flicker.append(_change(previous_raw, raw))
            stable_flicker.append(_change(previous_stable, stable))
        previous_raw, previous_stable = raw, stable
        width = stable.shape[1]
        pct = parallax_px(stable, width, settings) * np.float32(100.0 / width)
        per_frame.append(np.percentile(pct, PERCENTILES))
        hist += np.histogram(pct, bins=HIST_BINS, range=(-HIST_RANGE_PCT, HIST_RANGE_PCT))[0]
        progress.advance(1)
    progress.finish()
    per_frame = np.asarray(per_frame, dtype=np.float64).reshape(-1, len(PERCENTILES))
    raw_flicker, stable_flicker = np.asarray(raw_flicker), np.asarray(stable_flicker)
    extreme = np.maximum(np.abs(per_frame[:, 0]), np.abs(per_frame[:, -1])) if len(per_frame) else np.zeros(0)
    beyond = extreme > comfort_limit_pct
    raw_mean = float(raw_flicker.mean()) if raw_flicker.size else 0.0
    stable_mean = float(stable_flicker.mean()) if stable_flicker.size else 0.0
    return {
        "flicker": {
            "raw_mean": raw_mean,
            "stabilised_mean": stable_mean,
            "raw_p95": float(np.percentile(raw_flicker, 95)) if raw_flicker.size else 0.0,
            "stabilised_p95": float(np.percentile(stable_flicker, 95)) if stable_flicker.size else 0.0,
            "ratio": stable_mean / raw_mean if raw_mean > 0 else None,
        },
        "parallax_pct": {f"p{p}": _hist_percentile(hist, p) for p in PERCENTILES},
        "comfort": {
            "limit_pct": float(comfort_limit_pct),
            "beyond_frames": int(beyond.sum()),
            "beyond_pct": float(100.0 * beyond.mean()) if beyond.size else 0.0,
            "rule": "a frame is beyond when its 1st or 99th parallax percentile exceeds the limit in magnitude",
        },
        "flicker_raw": raw_flicker,
        "flicker_stabilised": stable_flicker,
        "parallax_per_frame": per_frame,
    }


def mean_abs_change(frames) -> np.ndarray:
    """Flicker measure: mean |Δ| between each pair of consecutive maps (length n - 1)."""
    frames = [np.asarray(f, dtype=np.float32) for f in frames]
    return np.array([_change(a, b) for a, b in zip(frames, frames[1:])], dtype=np.float64)


def flicker_figure(times: np.ndarray, raw: np.ndarray, stable: np.ndarray, name: str) -> np.ndarray:
    x = np.asarray(times[1 : len(raw) + 1])
    ratio = f"{stable.mean() / raw.mean():.2f}" if raw.size and raw.mean() > 0 else "-"
    return line_plot(
        [Series("raw (per-frame normalised)", x, raw, RAW_COLOUR),
         Series("stabilised", x, stable, STABLE_COLOUR)],
        title=f"{name}: flicker, mean |dnear| between consecutive frames (stabilised / raw = {ratio})",
        xlabel="time (s)", ylabel="mean |dnear|", y_from_zero=True,
    )  # fmt: skip


def parallax_figure(times: np.ndarray, per_frame: np.ndarray, limit_pct: float, stats: dict, name: str) -> np.ndarray:
    x = np.asarray(times[: len(per_frame)])
    columns = {p: per_frame[:, i] for i, p in enumerate(PERCENTILES)}
    beyond = stats["comfort"]["beyond_pct"]
    return line_plot(
        [Series("p1 / p99", x, columns[1], TAIL_COLOUR, 1),
         Series("", x, columns[99], TAIL_COLOUR, 1),
         Series("p5 / p95", x, columns[5], STABLE_COLOUR),
         Series("", x, columns[95], STABLE_COLOUR),
         Series("median", x, columns[50], INK)],
        title=f"{name}: screen parallax (% of width, + = in front of the screen); "
              f"{beyond:.1f} % of frames beyond +-{limit_pct:g} %",
        xlabel="time (s)", ylabel="parallax (% width)",
        hlines=[(limit_pct, LIMIT_COLOUR, f"+{limit_pct:g} % comfort"), (-limit_pct, LIMIT_COLOUR, f"-{limit_pct:g} %"),
                (0.0, GRID_DARK, "")],
        band=(x, columns[5], columns[95], BAND_COLOUR),
    )  # fmt: skip


# --- the library -------------------------------------------------------------------------------------------------
VALIDATION_COLUMNS = (
    ("model", "model"), ("opset", "opset"), ("contract / mode", "contract|mode"), ("size / tier", "size|tier"),
    ("max abs err", "max_abs_err"), ("mean abs err", "mean_abs_err"), ("rel mean err", "rel_mean_err"),
    ("validated", "validated|onnx_checker"), ("providers", "providers"), ("export s", "export_seconds"),
    ("MB", "file_bytes"), ("smoke weights", "smoke"), ("weights sha256", "weights_sha256"),
)  # fmt: skip


def validation_table(paths: Sequence[str | Path], out: str | Path) -> list[dict]:
    """One row per export validation JSON (``<model>.onnx.validation.json``), as an HTML page."""
    rows = []
    for path in sorted(map(Path, paths)):
        data = json.loads(path.read_text())
        errors = data.get("onnx_vs_pytorch", {})  # NVDS nests its errors; DA3 keeps them at the top
        row = {"file": path.name.removesuffix(".validation.json")}
        for title, keys in VALIDATION_COLUMNS:
            value = next((src[k] for k in keys.split("|") for src in (data, errors) if k in src), None)
            row[title] = value
        if row["model"] is None:
            row["model"] = "nvds" if row["file"].startswith("NVDS_") else None
        rows.append(row)
    for row in rows:
        if isinstance(row["MB"], int | float):
            row["MB"] = row["MB"] / 1e6
        if isinstance(row["weights sha256"], str):
            row["weights sha256"] = row["weights sha256"][:12]
        if isinstance(row["providers"], list):
            row["providers"] = ", ".join(p.removesuffix("ExecutionProvider") for p in row["providers"])
    note = ("ONNX Runtime against PyTorch on the same inputs, from each export's validation report. "
            "<b>smoke weights</b>: seeded random weights of the demo (meaningless depth).")
    _write_html(out, "Export validation", [("Exports", note, rows)])
    return rows


BENCH_FIELDS = ("s", "max_rss", "cpu_time", "mean_load", "io_in", "io_out")


def benchmark_table(bench_dir: str | Path, out: str | Path, csv_out: str | Path | None = None) -> list[dict]:
    """Summary of every ``benchmark:`` TSV under ``bench_dir`` (``<rule>/<job...>.tsv``): per rule and per job."""
    bench_dir = Path(bench_dir)
    jobs = []
    for path in sorted(bench_dir.rglob("*.tsv")):
        parts = path.relative_to(bench_dir).with_suffix("").parts
        values = _read_benchmark(path)
        if values is None:
            log.warning("%s: not a Snakemake benchmark table; skipped", path)
            continue
        jobs.append({"rule": parts[0], "job": "/".join(parts[1:]) or parts[0], **values})
    rules = []
    for rule in sorted({j["rule"] for j in jobs}):
        mine = [j for j in jobs if j["rule"] == rule]
        seconds = [j["s"] for j in mine]
        rules.append({"rule": rule, "jobs": len(mine), "total s": sum(seconds), "mean s": sum(seconds) / len(mine),
                      "max s": max(seconds), "max RSS MB": max(j["max_rss"] for j in mine),
                      "CPU s": sum(j["cpu_time"] for j in mine)})  # fmt: skip
    job_rows = [{"rule": j["rule"], "job": j["job"], "s": j["s"], "max RSS MB": j["max_rss"],
                 "CPU s": j["cpu_time"], "mean load %": j["mean_load"]} for j in jobs]  # fmt: skip
    note = (f"From the rules' <code>benchmark:</code> files under <code>{html.escape(str(bench_dir))}</code> "
            "(wall-clock s, peak resident memory, CPU time; the mean of repeats where a job ran several).")
    _write_html(out, "Benchmarks", [("Per rule", note, rules), ("Per job", "", job_rows)])
    if csv_out:
        _write_csv(csv_out, job_rows)
    return rules


def library_table(stats_paths: Sequence[str | Path], out: str | Path) -> list[dict]:
    """One row per video from the per-video ``stats.json``: flicker and parallax/comfort at a glance."""
    rows = []
    for path in sorted(map(Path, stats_paths)):
        s = json.loads(path.read_text())
        p, f, c = s["parallax_pct"], s["flicker"], s["comfort"]
        rows.append({"video": s["video"], "frames": s["frames"], "duration s": s["duration_s"],
                     "flicker raw": f["raw_mean"], "flicker stabilised": f["stabilised_mean"],
                     "stabilised / raw": f["ratio"], "parallax p1 %": p["p1"], "p50 %": p["p50"],
                     "p99 %": p["p99"], f"frames beyond ±{c['limit_pct']:g} %": c["beyond_pct"]})  # fmt: skip
    note = ("Flicker: mean |&Delta;near| between consecutive frames (0..1 maps). Parallax: screen parallax in % of "
            "the frame width over every pixel of every frame (+ = in front of the screen). A frame is beyond the "
            "comfort limit when its 1st or 99th parallax percentile exceeds it in magnitude.")
    _write_html(out, "Videos", [("Library", note, rows)])
    return rows


# --- plotting with OpenCV ----------------------------------------------------------------------------------------
@dataclasses.dataclass
class Series:
    label: str
    x: np.ndarray
    y: np.ndarray
    colour: tuple[int, int, int]
    thickness: int = 2


def line_plot(
    series: Sequence[Series],
    title: str,
    xlabel: str,
    ylabel: str,
    size: tuple[int, int] = (1000, 420),
    hlines: Sequence[tuple[float, tuple[int, int, int], str]] = (),
    band: tuple | None = None,
    y_from_zero: bool = False,
) -> np.ndarray:
    """A BGR line plot with axes, ticks, grid, labels and a legend."""
    width, height = size
    left, right, top, bottom = 80, 20, 44, 52
    img = np.full((height, width, 3), PAPER, dtype=np.uint8)
    xs = np.concatenate([np.asarray(s.x, float) for s in series] or [np.zeros(1)])
    ys = np.concatenate([np.asarray(s.y, float) for s in series] + [np.array([h[0] for h in hlines])])
    ys = ys[np.isfinite(ys)]
    x0, x1 = (float(xs.min()), float(xs.max())) if xs.size else (0.0, 1.0)
    y0, y1 = (float(ys.min()), float(ys.max())) if ys.size else (0.0, 1.0)
    if y_from_zero:
        y0 = min(0.0, y0)
    x0, x1 = _padded(x0, x1, 0.0)
    y0, y1 = _padded(y0, y1, 0.05)
    plot_w, plot_h = width - left - right, height - top - bottom

    def px(x, y):
        u = left + (np.asarray(x, float) - x0) / (x1 - x0) * plot_w
        v = top + (1.0 - (np.asarray(y, float) - y0) / (y1 - y0)) * plot_h
        return np.stack([u, v], axis=-1)

    font = cv2.FONT_HERSHEY_SIMPLEX
    for value in nice_ticks(y0, y1):
        v = int(round(px(x0, value)[1]))
        cv2.line(img, (left, v), (left + plot_w, v), GRID, 1)
        _text(img, _fmt(value), (left - 6, v + 4), align="right")
    for value in nice_ticks(x0, x1):
        u = int(round(px(value, y0)[0]))
        cv2.line(img, (u, top), (u, top + plot_h), GRID, 1)
        _text(img, _fmt(value), (u, top + plot_h + 18), align="centre")
    if band is not None:
        bx, lo, hi, colour = band
        if len(bx) > 1:
            poly = np.concatenate([px(bx, hi), px(bx[::-1], lo[::-1])])
            cv2.fillPoly(img, [np.rint(poly).astype(np.int32)], colour, cv2.LINE_AA)
    for value, colour, label in hlines:
        v = int(round(px(x0, value)[1]))
        for u in range(left, left + plot_w, 12):
            cv2.line(img, (u, v), (min(u + 6, left + plot_w), v), colour, 1, cv2.LINE_AA)
        if label:
            _text(img, label, (left + 6, v - 5), colour=colour)
    for s in series:
        points = np.rint(px(s.x, s.y)).astype(np.int32)
        if len(points) == 1:
            cv2.circle(img, tuple(points[0]), 3, s.colour, -1, cv2.LINE_AA)
        elif len(points) > 1:
            cv2.polylines(img, [points], False, s.colour, s.thickness, cv2.LINE_AA)
    cv2.rectangle(img, (left, top), (left + plot_w, top + plot_h), INK, 1)
    _text(img, title, (left, 26), scale=0.5, thickness=1)
    _text(img, xlabel, (left + plot_w // 2, height - 10), align="centre")
    label = np.full((22, plot_h, 3), PAPER, dtype=np.uint8)
    _text(label, ylabel, (plot_h // 2, 15), align="centre")
    img[top : top + plot_h, 8:30] = np.rot90(label)
    legend = [s for s in series if s.label]
    for i, s in enumerate(legend):
        v = top + 16 + 18 * i
        (tw, _), _ = cv2.getTextSize(s.label, font, 0.42, 1)
        u = left + plot_w - tw - 40
        cv2.rectangle(img, (u - 6, v - 12), (left + plot_w - 4, v + 5), PAPER, -1)
        cv2.line(img, (u, v - 4), (u + 24, v - 4), s.colour, 2, cv2.LINE_AA)
        _text(img, s.label, (u + 30, v))
    return img


def nice_ticks(lo: float, hi: float, target: int = 6) -> list[float]:
    """Round tick values (1, 2, 5 × 10^k steps) covering [lo, hi]."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        return [lo]
    raw = (hi - lo) / target
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw)
    first = math.ceil(lo / step - 1e-9) * step
    count = int(math.floor((hi - first) / step + 1e-9)) + 1
    return [round(first + i * step, 12) for i in range(count)]


# --- map stores read as one sequence -----------------------------------------------------------------------------
class MapSequence:
    """Several map stores (the segments of one video, in order) read as one run of frames."""

    def __init__(self, paths: Sequence[str | Path] | str | Path):
        self.paths = [Path(paths)] if isinstance(paths, str | Path) else [Path(p) for p in paths]
        self.counts = []
        for path in self.paths:
            with MapReader(path) as reader:
                self.counts.append(reader.frames)
        self.starts = np.concatenate([[0], np.cumsum(self.counts)]).astype(int)

    def __len__(self) -> int:
        return int(self.starts[-1])

    def __iter__(self) -> Iterator[np.ndarray]:
        for path in self.paths:
            with MapReader(path) as reader:
                yield from reader

    def frame(self, index: int) -> np.ndarray:
        part = int(np.searchsorted(self.starts, index, side="right")) - 1
        if not 0 <= index < len(self) or part >= len(self.paths):
            raise IndexError(f"frame {index} outside 0..{len(self)}")
        with MapReader(self.paths[part]) as reader:
            return reader.read(index - int(self.starts[part]), 1)[0]


# --- helpers -----------------------------------------------------------------------------------------------------
def _change(previous: np.ndarray, current: np.ndarray) -> float:
    return float(np.mean(np.abs(current - previous)))


def _check_counts(total: int | None, *sequences: MapSequence) -> None:
    counts = {len(s) for s in sequences} | ({total} if total is not None else set())
    if len(counts) > 1:
        names = ", ".join(str(p) for s in sequences for p in s.paths)
        raise ValueError(f"frame counts disagree ({sorted(counts)}) between the video and {names}")


def _shrink(near: np.ndarray) -> np.ndarray:
    near = np.asarray(near, dtype=np.float32)
    height, width = near.shape
    if width <= STATS_WIDTH:
        return near
    size = (STATS_WIDTH, max(1, round(height * STATS_WIDTH / width)))
    return cv2.resize(near, size, interpolation=cv2.INTER_AREA)


def _hist_percentile(hist: np.ndarray, pct: float) -> float:
    total = hist.sum()
    if total == 0:
        return 0.0
    cdf = np.cumsum(hist)
    index = int(np.searchsorted(cdf, pct / 100.0 * total))
    width = 2 * HIST_RANGE_PCT / HIST_BINS
    return round(-HIST_RANGE_PCT + (index + 0.5) * width, 4)


def _duration(probe: dict, times: np.ndarray) -> float:
    return float(probe["video"].get("duration_s") or (times[-1] if len(times) else 0.0))


def _padded(lo: float, hi: float, frac: float) -> tuple[float, float]:
    if hi - lo < 1e-12:
        pad = max(abs(hi), 1.0) * 0.1
        return lo - pad, hi + pad
    pad = (hi - lo) * frac
    return lo - pad, hi + pad


def _fmt(value: float) -> str:
    return f"{value:.4g}" if abs(value) >= 1e-3 or value == 0 else f"{value:.1e}"


def _text(img, text, origin, scale=0.42, colour=INK, thickness=1, align="left") -> None:
    (tw, _), _ = cv2.getTextSize(text, cv2.FONT_HERSHEY_SIMPLEX, scale, thickness)
    u, v = origin
    u = u - tw if align == "right" else u - tw // 2 if align == "centre" else u
    cv2.putText(img, text, (int(u), int(v)), cv2.FONT_HERSHEY_SIMPLEX, scale, colour, thickness, cv2.LINE_AA)


def _pad(tile: np.ndarray, border: int = 2) -> np.ndarray:
    return cv2.copyMakeBorder(tile, border, border, border, border, cv2.BORDER_CONSTANT, value=PAPER)


def _label_row(labels: Sequence[str], width: int, align_left: bool = False) -> np.ndarray:
    """A strip of text: one centred label per column (``width`` is the column width), or one line at the left."""
    strip_h = 26
    if align_left:
        strip = np.full((strip_h, width, 3), PAPER, dtype=np.uint8)
        _text(strip, labels[0], (6, 18), scale=0.45)
        return strip
    column = width + 4  # tiles carry a 2-pixel border on each side
    strip = np.full((strip_h, column * len(labels), 3), PAPER, dtype=np.uint8)
    for i, label in enumerate(labels):
        _text(strip, label, (i * column + column // 2, 18), scale=0.45, align="centre")
    return strip


def _write_png(path: str | Path, image: np.ndarray) -> None:
    with atomic_output(path) as tmp:
        if not cv2.imwrite(str(tmp), image):
            raise OSError(f"{path}: OpenCV could not write the PNG")


def _read_benchmark(path: Path) -> dict | None:
    with path.open(newline="") as handle:
        records = list(csv.DictReader(handle, delimiter="\t"))
    if not records or "s" not in records[0]:
        return None
    values = {}
    for name in BENCH_FIELDS:
        numbers = [_number(r.get(name)) for r in records]
        numbers = [n for n in numbers if n is not None]
        values[name] = sum(numbers) / len(numbers) if numbers else 0.0
    return values


def _number(text) -> float | None:
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def _cell(value) -> str:
    if value is None:
        return "&ndash;"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if value != 0 and abs(value) < 1e-2:
            return f"{value:.3g}"
        return f"{value:,.3f}".rstrip("0").rstrip(".")
    return html.escape(str(value))


PAGE = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>{title}</title><style>
body {{ font-family: system-ui, sans-serif; margin: 1em; color: #222; }}
table {{ border-collapse: collapse; margin-bottom: 1.5em; font-size: 0.9em; }}
th, td {{ border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: right; }}
th {{ background: #f0f0f0; }} td:first-child, th:first-child {{ text-align: left; }}
p.note {{ color: #555; max-width: 60em; }}
</style></head><body>
<h2>{title}</h2>
{sections}
</body></html>
"""


def _write_html(out: str | Path, title: str, sections: Sequence[tuple[str, str, list[dict]]]) -> None:
    parts = []
    for heading, note, rows in sections:
        parts.append(f"<h3>{html.escape(heading)}</h3>")
        if note:
            parts.append(f'<p class="note">{note}</p>')
        if not rows:
            parts.append("<p>(none)</p>")
            continue
        columns = list(rows[0])
        head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
        body = "".join("<tr>" + "".join(f"<td>{_cell(r.get(c))}</td>" for c in columns) + "</tr>\n" for r in rows)
        parts.append(f"<table><thead><tr>{head}</tr></thead><tbody>\n{body}</tbody></table>")
    with atomic_output(out) as tmp:
        tmp.write_text(PAGE.format(title=html.escape(title), sections="\n".join(parts)), encoding="utf-8")


def _write_csv(out: str | Path, rows: list[dict]) -> None:
    with atomic_output(out) as tmp, tmp.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]) if rows else ["rule"], delimiter=",")
        writer.writeheader()
        writer.writerows(rows)
