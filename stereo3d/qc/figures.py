"""QC figures, as PNG files: the contact sheet (frame, raw depth, stabilised near map, anaglyph preview at a few
timestamps), composed from picture tiles with OpenCV, and the flicker and parallax/comfort line plots, drawn by
matplotlib (Agg, no display). Every figure is a BGR array, so one writer (``write_png``) stores them all; the same
input gives the same bytes, which keeps re-runs of the report from looking like changes."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

import cv2
import matplotlib.style
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from stereo3d.io.atomic import atomic_output
from stereo3d.qc.stats import PERCENTILES, MapSequence, check_counts, frame_times
from stereo3d.stereo.bars import Area
from stereo3d.stereo.layouts import anaglyph_dubois
from stereo3d.stereo.near import near_from_depth
from stereo3d.stereo.warp import Renderer, StereoSettings

PLOT_SIZE_PX = (1000, 420)  # width, height of the line plots
_DPI = 100
# Plot colours (matplotlib, RGB) and the contact sheet's (OpenCV, BGR).
INK, RAW_COLOUR, STABLE_COLOUR = "#282828", "#e6783c", "#1e6eb4"
LIMIT_COLOUR, TAIL_COLOUR, BAND_COLOUR, ZERO_COLOUR = "#c82828", "#e67878", "#bed7eb", "#aaaaaa"
EDGE_COLOUR, WINDOW_COLOUR = "#7a3c9c", "#2a9d4a"
SHEET_INK, PAPER, CURRENT_COLOUR = (40, 40, 40), (255, 255, 255), (40, 40, 220)
# The library's defaults, so a local matplotlibrc does not change the plots. Long paths (a feature
# film has 10^5 frames) are drawn in chunks: faster, and Agg refuses a single path beyond its cell limit.
_STYLE = {"agg.path.chunksize": 10_000, "font.size": 9, "axes.titlesize": 10, "legend.fontsize": 9}


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
    """BGR image: one row per timestamp (evenly spread), columns source | raw depth | near map | anaglyph. Of a
    video with baked-in bars, the picture the depth covers (its stores' ``picture`` attribute)."""
    from stereo3d.io.decode import FrameReader
    from stereo3d.io.mapstore import MapReader

    video = probe["video"]
    total = video["frame_count"]
    with MapReader(depth[0]) as first:
        picture = Area.of(first.attrs.get("picture"))
    width, height = (video["display_width"], video["display_height"]) if picture is None else picture.size
    tile_w = min(tile_width, width) // 2 * 2
    tile_h = max(2, round(tile_w * height / width) // 2 * 2)
    times = frame_times(probe)
    depth_maps, near_maps = MapSequence(depth), MapSequence(near)
    check_counts(total, depth_maps, near_maps)
    picks = sorted({min(total - 1, int((k + 0.5) * total / rows)) for k in range(rows)})
    header = ["source", "raw depth (per frame)", "stabilised near map", "anaglyph preview"]
    lines = [_label_row(header, tile_w)]
    renderer = Renderer()
    for index in picks:
        with FrameReader(source, probe, start=index, count=1, size=(tile_w, tile_h), crop=picture) as reader:
            frame = next(iter(reader))  # RGB
        raw = near_from_depth(depth_maps.frame(index), *near_pct)
        stable = near_maps.frame(index)
        left, right = renderer.render_stereo(frame, stable, settings)
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


def settings_grid(
    source: str | Path,
    probe: dict,
    frame: int,
    near: np.ndarray,
    settings: StereoSettings,
    divergences: Sequence[float],
    convergences: Sequence[float | str],
    tile_width: int = 320,
    picture: Area | None = None,
) -> np.ndarray:
    """BGR image: the still ``frame`` (with its near map ``near``) as red-cyan anaglyphs, one row per divergence
    and one column per convergence; the rest of ``settings`` as configured. The tile of the configured pair, if
    the grid holds it, is framed in red. A video with baked-in bars shows its ``picture`` alone (the area ``near``
    covers), at the parallax the settings give it inside the frame."""
    from stereo3d.io.decode import FrameReader

    video = probe["video"]
    width, height = (video["display_width"], video["display_height"]) if picture is None else picture.size
    tile_w = min(tile_width, width) // 2 * 2
    tile_h = max(2, round(tile_w * height / width) // 2 * 2)
    with FrameReader(source, probe, start=frame, count=1, size=(tile_w, tile_h), crop=picture) as reader:
        still = next(iter(reader))  # RGB
    times = frame_times(probe)
    lines = [
        _label_row([f"frame {frame}  t = {times[frame]:.2f} s"], (tile_w + 4) * len(convergences), align_left=True),
        _label_row([f"convergence {c}" if c == "auto" else f"convergence {c:g}" for c in convergences], tile_w),
    ]  # fmt: skip
    with Renderer() as renderer:
        for divergence in divergences:
            tiles = []
            for convergence in convergences:
                chosen = dataclasses.replace(
                    settings,
                    divergence_pct=float(divergence),
                    convergence=convergence if convergence == "auto" else float(convergence),
                )
                if picture is not None:
                    chosen = chosen.inside(video["display_width"], picture.width)
                left, right = renderer.render_stereo(still, near, chosen)
                current = (divergence, convergence) == (settings.divergence_pct, settings.convergence)
                tile = cv2.cvtColor(anaglyph_dubois(left, right), cv2.COLOR_RGB2BGR)
                tiles.append(_pad(tile, colour=CURRENT_COLOUR if current else PAPER))
            row = np.concatenate(tiles, axis=1)
            lines += [_label_row([f"divergence {divergence:g} %"], row.shape[1], align_left=True), row]
    return np.concatenate(lines, axis=0)


def colourise(near: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """A 0..1 near map as a BGR picture (inferno: bright = near), resized to ``size`` = (width, height)."""
    grey = np.clip(np.asarray(near, dtype=np.float32), 0.0, 1.0)
    grey = cv2.resize(grey, size, interpolation=cv2.INTER_AREA if grey.shape[1] > size[0] else cv2.INTER_LINEAR)
    return cv2.applyColorMap(np.rint(grey * 255).astype(np.uint8), cv2.COLORMAP_INFERNO)


def flicker_figure(times: np.ndarray, raw: np.ndarray, stable: np.ndarray, name: str) -> np.ndarray:
    """BGR line plot: mean |Δnear| between consecutive frames, raw (per-frame normalised) against stabilised."""
    raw, stable = np.asarray(raw, dtype=np.float64), np.asarray(stable, dtype=np.float64)
    x = np.asarray(times, dtype=np.float64)[1 : len(raw) + 1]  # a change belongs to the later frame
    ratio = f"{stable.mean() / raw.mean():.2f}" if raw.size and raw.mean() > 0 else "-"
    title = f"{name}: flicker, mean |dnear| between consecutive frames (stabilised / raw = {ratio})"
    with _style():
        figure, axes = _plot_axes(title, "time (s)", "mean |dnear|")
        _line(axes, x, raw, RAW_COLOUR, 1.2, "raw (per-frame normalised)")
        _line(axes, x, stable, STABLE_COLOUR, 1.5, "stabilised")
        axes.set_ylim(bottom=0.0)
        if not raw.size:
            _note(axes, "fewer than two frames: no change to measure")
        axes.legend(loc="upper right")
        return _render(figure)


def parallax_figure(times: np.ndarray, per_frame: np.ndarray, limit_pct: float, stats: dict, name: str,
                    window_per_frame: np.ndarray | None = None) -> np.ndarray:  # fmt: skip
    """BGR line plot: per-frame percentiles of screen parallax (% of the width) against the comfort limit; with
    ``window_per_frame`` (``stats.window_statistics``) also the larger edge parallax of the left/right edges
    (window violations) and, under ``floating_window: auto``, the floating window's larger width."""
    per_frame = np.asarray(per_frame, dtype=np.float64).reshape(-1, len(PERCENTILES))
    x = np.asarray(times, dtype=np.float64)[: len(per_frame)]
    column = {p: per_frame[:, i] for i, p in enumerate(PERCENTILES)}
    beyond = stats["comfort"]["beyond_pct"]
    title = (
        f"{name}: screen parallax (% of width, + = in front of the screen); "
        f"{beyond:.1f} % of frames beyond +-{limit_pct:g} %"
    )
    window = stats.get("window")
    if window is not None and window_per_frame is not None:
        # A second line: the first is already as long as the plot is wide.
        title += f"\nwindow violations (in front at the left/right edge) on {window['violation_pct']:.1f} % of frames"
        if window["floating_window"] == "auto":
            title += f", {window['after_window_pct']:.1f} % with the floating window"
    with _style():
        figure, axes = _plot_axes(title, "time (s)", "parallax (% width)")
        axes.fill_between(x, column[5], column[95], color=BAND_COLOUR, linewidth=0, zorder=1)
        _line(axes, x, column[1], TAIL_COLOUR, 0.8, "p1 / p99")
        _line(axes, x, column[99], TAIL_COLOUR, 0.8)
        _line(axes, x, column[5], STABLE_COLOUR, 1.5, "p5 / p95")
        _line(axes, x, column[95], STABLE_COLOUR, 1.5)
        _line(axes, x, column[50], INK, 1.5, "median")
        if window is not None and window_per_frame is not None and len(window_per_frame):
            edges = np.asarray(window_per_frame, dtype=np.float64).reshape(-1, 4)[: len(x)]
            _line(axes, x, edges[:, :2].max(axis=1), EDGE_COLOUR, 1.2, "in front at the left/right edge")
            if window["floating_window"] == "auto":
                axes.plot(x, edges[:, 2:].max(axis=1), color=WINDOW_COLOUR, linewidth=1.2, linestyle=(0, (4, 3)),
                          label="floating window", zorder=2)  # fmt: skip
        axes.axhline(0.0, color=ZERO_COLOUR, linewidth=0.8, zorder=1.5)
        for value, label in ((limit_pct, f"+{limit_pct:g} % comfort"), (-limit_pct, f"-{limit_pct:g} %")):
            axes.axhline(value, color=LIMIT_COLOUR, linewidth=1.0, linestyle=(0, (6, 6)), zorder=1.5)
            # The limits are labelled on the plot, at their line: the legend is for the measured curves.
            axes.annotate(label, (0.0, value), xycoords=axes.get_yaxis_transform(), xytext=(6, 3),
                          textcoords="offset points", color=LIMIT_COLOUR, fontsize=8)  # fmt: skip
        if not len(per_frame):
            _note(axes, "no frames")
        axes.legend(loc="upper right")
        return _render(figure)


def convergence_figure(times: np.ndarray, zero_planes: np.ndarray, subjects: np.ndarray | None,
                       fronts: np.ndarray | None, shots: np.ndarray, divergence_pct: float, front_limit_pct: float,
                       name: str, mode: str) -> np.ndarray:  # fmt: skip
    """BGR line plot of the screen plane over time (``render.convergence``: a number, or ``auto``): where it lies
    in the near maps (0 = the farthest content, 1 = the nearest), with, under ``auto``, the subject found in each
    frame and the floor the front limit sets; cuts as vertical lines."""
    x = np.asarray(times, dtype=np.float64)[: len(zero_planes)]
    planes = np.asarray(zero_planes, dtype=np.float64)
    cuts = np.nonzero(np.diff(np.asarray(shots)) != 0)[0] + 1
    title = (f"{name}: the screen plane (convergence {mode}), {len(cuts) + 1} shot(s)\na subject at the plane has "
             f"no parallax; content {front_limit_pct:g} % of the width in front of it is the front limit")  # fmt: skip
    with _style():
        figure, axes = _plot_axes(title, "time (s)", "near value at the screen")
        if subjects is not None:
            _line(axes, x, np.asarray(subjects)[: len(x)], RAW_COLOUR, 1.0, "subject found in the frame")
        if fronts is not None and divergence_pct > 0:
            floor = np.asarray(fronts, dtype=np.float64)[: len(x)] - front_limit_pct / divergence_pct
            axes.plot(x, floor, color=LIMIT_COLOUR, linewidth=1.0, linestyle=(0, (6, 6)),
                      label="front limit (the plane may not go below)", zorder=1.5)  # fmt: skip
        _line(axes, x, planes, STABLE_COLOUR, 1.8, "screen plane")
        for cut in cuts:
            if cut < len(x):
                axes.axvline(x[cut], color=ZERO_COLOUR, linewidth=0.8, zorder=1)
        axes.set_ylim(0.0, 1.0)
        if not len(x):
            _note(axes, "no frames")
        axes.legend(loc="upper right")
        return _render(figure)


def write_png(path: str | Path, image: np.ndarray) -> None:
    """Store a BGR figure as a PNG, atomically (a killed job leaves no half-written picture)."""
    with atomic_output(path) as tmp:
        if not cv2.imwrite(str(tmp), image):
            raise OSError(f"{path}: OpenCV could not write the PNG")


def _style():
    return matplotlib.style.context(["default", _STYLE])


def _plot_axes(title: str, xlabel: str, ylabel: str):
    """A figure of ``PLOT_SIZE_PX`` on the Agg canvas (no display, no pyplot state) and its one set of axes."""
    width, height = PLOT_SIZE_PX
    figure = Figure(figsize=(width / _DPI, height / _DPI), dpi=_DPI, facecolor="white")
    FigureCanvasAgg(figure)
    # Fixed margins, not a layout engine: the plot area stays put whatever the tick labels, and is cheap.
    figure.subplots_adjust(left=0.075, right=0.985, top=0.9, bottom=0.12)
    axes = figure.add_subplot()
    axes.set_title(title, loc="left")
    axes.set_xlabel(xlabel)
    axes.set_ylabel(ylabel)
    axes.grid(True, color="#e1e1e1", linewidth=0.8)
    axes.set_axisbelow(True)
    return figure, axes


def _line(axes, x: np.ndarray, y: np.ndarray, colour: str, width: float, label: str | None = None) -> None:
    # A lone point (a 1-frame video) is no line; a marker keeps it visible.
    marker = "o" if len(x) == 1 else None
    axes.plot(x, y, color=colour, linewidth=width, marker=marker, markersize=4, label=label or "_nolegend_", zorder=2)


def _note(axes, text: str) -> None:
    axes.text(0.5, 0.5, text, transform=axes.transAxes, ha="center", va="center", color=INK)


def _render(figure: Figure) -> np.ndarray:
    figure.canvas.draw()
    rgba = np.asarray(figure.canvas.buffer_rgba())
    return cv2.cvtColor(rgba, cv2.COLOR_RGBA2BGR)


def _text(img: np.ndarray, text: str, origin: tuple[int, int], scale: float = 0.45, centred: bool = False) -> None:
    (width, _), _ = cv2.getTextSize(text, cv2.FONT_HERSHEY_SIMPLEX, scale, 1)
    u, v = origin
    u = u - width // 2 if centred else u
    cv2.putText(img, text, (int(u), int(v)), cv2.FONT_HERSHEY_SIMPLEX, scale, SHEET_INK, 1, cv2.LINE_AA)


def _pad(tile: np.ndarray, border: int = 2, colour: tuple[int, int, int] = PAPER) -> np.ndarray:
    return cv2.copyMakeBorder(tile, border, border, border, border, cv2.BORDER_CONSTANT, value=colour)


def _label_row(labels: Sequence[str], width: int, align_left: bool = False) -> np.ndarray:
    """A strip of text: one centred label per column (``width`` is the column width), or one line at the left."""
    strip_h = 26
    if align_left:
        strip = np.full((strip_h, width, 3), PAPER, dtype=np.uint8)
        _text(strip, labels[0], (6, 18))
        return strip
    column = width + 4  # tiles carry a 2-pixel border on each side
    strip = np.full((strip_h, column * len(labels), 3), PAPER, dtype=np.uint8)
    for i, label in enumerate(labels):
        _text(strip, label, (i * column + column // 2, 18), centred=True)
    return strip
