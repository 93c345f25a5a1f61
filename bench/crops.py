"""Crops of the generated scenes' disocclusions (``bench/viewing.py``'s), the truth beside each way of filling them.

    python -m bench.crops [--out bench/recorded/holes_before_after.png]

Columns: the true left eye; OpenCV Telea on the renderer's own holes (the classical fill, before this project had
its own); the renderer filling from the background beside each hole alone (``fill: background``); the renderer at
its defaults (``fill: temporal``: the frames around first); the holes it filled (red). Rows: the moving camera's
place with the most disoccluded pixels, then three consecutive frames of the still camera's place with the most
disoccluded pixels that see only still surfaces (where Q3's flicker is measured: a fill that changes there from
one frame to the next, while nothing moves, is seen as shimmer). Near maps at a depth model's size, as Q1-Q3.
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

import cv2
import numpy as np

from bench import viewing
from stereo3d.qc import truth

CROP = (72, 96)  # rows, columns of the scene (960x540) shown per panel
ZOOM = 3
OUT = Path(__file__).parent / "recorded" / "holes_before_after.png"


def left_views(sequence: dict, settings, method: str) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Every frame's left eye by ``method``, and the renderer's holes in it."""
    holes: list = []
    if method == "telea":
        views = viewing.telea_views(sequence, settings, "model", holes)
    else:
        views = viewing.renderer_views(sequence, replace(settings, fill=method), "model", holes_out=holes)
    return [eyes[0] for eyes in views], [eyes[0] for eyes in holes]


def busiest(weight: np.ndarray) -> tuple[slice, slice]:
    """The ``CROP`` window centred where ``weight`` ([H, W]) sums the most over a quarter of it (over all of it, a
    thin strip would sit anywhere in the window)."""
    sums = cv2.boxFilter(weight.astype(np.float32), -1, (CROP[1] // 4, CROP[0] // 4), normalize=False)
    y, x = np.unravel_index(np.argmax(sums), sums.shape)
    top = min(max(int(y) - CROP[0] // 2, 0), weight.shape[0] - CROP[0])
    left = min(max(int(x) - CROP[1] // 2, 0), weight.shape[1] - CROP[1])
    return slice(top, top + CROP[0]), slice(left, left + CROP[1])


def rows_of(sequence: dict, settings, still: bool) -> tuple[list[list[np.ndarray]], list[int]]:
    """The panels of the moving camera's middle frame, or of the still camera's three frames in a row over which
    the fills change most where the truth is still."""
    methods = {name: left_views(sequence, settings, name) for name in ("telea", "background", "temporal")}
    holes = sequence["left_class"] == truth.HOLE
    if still:
        still_holes = holes & sequence["left_static"]
        both = still_holes[1:] & still_holes[:-1]
        change = sum(np.abs(np.diff(np.stack(views).astype(np.float32), axis=0)).mean(axis=3) * both
                     for views, _ in methods.values())  # fmt: skip
        window = busiest(change.sum(axis=0))
        per_frame = change[:, window[0], window[1]].sum(axis=(1, 2))  # frame i + 1 against i
        start = int(np.argmax(per_frame[:-1] + per_frame[1:]))  # frames start .. start + 2: two changes
        frames = [start, start + 1, start + 2]
    else:
        frames = [len(sequence["source"]) // 2]
        window = busiest(holes[frames[0]])
    rows = []
    for index in frames:
        row = [sequence["left"][index]] + [views[index] for views, _ in methods.values()]
        marked = methods["temporal"][0][index].copy()
        marked[methods["temporal"][1][index]] = (255, 0, 0)
        rows.append([panel[window] for panel in [*row, marked]])
    return rows, frames


def draw(rows: list[list[np.ndarray]], labels: list[str], titles: list[str], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(len(rows), len(titles), figsize=(2.4 * len(titles), 1.9 * len(rows)), squeeze=False)
    for r, row in enumerate(rows):
        for c, panel in enumerate(row):
            axis = axes[r][c]
            axis.imshow(cv2.resize(panel, None, fx=ZOOM, fy=ZOOM, interpolation=cv2.INTER_NEAREST))
            axis.set_xticks([])
            axis.set_yticks([])
            if r == 0:
                axis.set_title(titles[c], fontsize=9)
            if c == 0:
                axis.set_ylabel(labels[r], fontsize=8)
    figure.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(out, dpi=80)
    plt.close(figure)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    from stereo3d.stereo.warp import StereoSettings

    settings = replace(StereoSettings(), divergence_pct=viewing.RIG.divergence_pct, convergence=viewing.RIG.convergence)
    data = viewing.sequences()
    moving, moving_frames = rows_of(data["street"], settings, still=False)
    still, still_frames = rows_of(data["still camera"], settings, still=True)
    labels = [f"moving camera, frame {i}" for i in moving_frames] + [f"still camera, frame {i}" for i in still_frames]
    rows = moving + still
    titles = ["truth (left eye)", "OpenCV Telea", "fill: background", "fill: temporal (default)", "holes filled (red)"]
    draw(rows, labels, titles, args.out)
    print(args.out)


if __name__ == "__main__":
    main()
