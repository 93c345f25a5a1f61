"""QC figures: the contact sheet (frame, raw depth, stabilised near map, anaglyph preview at a few timestamps),
the flicker plot and the parallax/comfort plot, as PNG files."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from pathlib import Path

import cv2
import numpy as np

from stereo3d.io.atomic import atomic_output
from stereo3d.qc.stats import PERCENTILES, MapSequence, check_counts, frame_times
from stereo3d.stereo.layouts import anaglyph_dubois
from stereo3d.stereo.near import near_from_depth
from stereo3d.stereo.warp import StereoSettings, render_stereo

# BGR colours of the figures
INK, GRID, PAPER = (40, 40, 40), (225, 225, 225), (255, 255, 255)
RAW_COLOUR, STABLE_COLOUR, LIMIT_COLOUR = (60, 120, 230), (180, 110, 30), (40, 40, 200)
TAIL_COLOUR, GRID_DARK, BAND_COLOUR = (120, 120, 230), (170, 170, 170), (235, 215, 190)


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
    from stereo3d.io.decode import FrameReader

    video = probe["video"]
    total = video["frame_count"]
    width, height = video["display_width"], video["display_height"]
    tile_w = min(tile_width, width) // 2 * 2
    tile_h = max(2, round(tile_w * height / width) // 2 * 2)
    times = frame_times(probe)
    depth_maps, near_maps = MapSequence(depth), MapSequence(near)
    check_counts(total, depth_maps, near_maps)
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


def write_png(path: str | Path, image: np.ndarray) -> None:
    with atomic_output(path) as tmp:
        if not cv2.imwrite(str(tmp), image):
            raise OSError(f"{path}: OpenCV could not write the PNG")
