"""Depth enlarged to the frame with its edges where the picture has them.

A depth model's near map is a few hundred pixels wide; the frame may be several times wider. Enlarged bilinearly,
each depth edge becomes a ramp several frame pixels wide, and the pixels on it are given depths between the two
surfaces: they are sheared apart in the views (the renderer's edge dilation hides some of it by pushing the whole
ramp onto the nearer surface, which then carries background pixels with it).

``pick_edges`` keeps the bilinear map wherever the depth is smooth, and at depth edges gives each frame pixel the
depth of a map sample near it: the one whose own colour (the frame reduced to the map's size) is closest to the
pixel's. A pixel of the foreground takes the foreground's depth, a pixel of the background the background's, and
the edge lands on the picture's edge, to the frame's pixel. Unlike a guided or bilateral filter it never makes new
depths (textures are not copied into the depth), and it works only where the four samples around a pixel differ by
more than ``EDGE_PX`` of parallax, a few percent of the frame (bench/viewing.py: +3 dB on the pixels both eyes see
against bilinear enlargement, at DA3's size for a 1080p frame).

The four samples around a pixel are not always enough: where something is thinner than two samples (a post, the
gap between a post and the box behind it), each of the four blends it with its surroundings, in depth and colour
alike, and none holds the depth of the pixel's surface. A pixel that none of the four matches within
``NEAR_ENOUGH`` looks ``REACH`` samples farther, where a sample wholly on its surface lies, and takes the best
match there, each sample's colour difference raised by ``DISTANCE_COST`` per sample of distance so that a far
sample must match clearly better than a near one (bench/viewing.py, DA3's size for a 1080p frame, against the four
alone: Q3's flicker 0.575 -> 0.45 of Telea's, +0.2 dB where both eyes see; its cost, a few percent of a frame's
render, is spread over the render threads).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numba import njit

EDGE_PX = 0.5  # a depth edge: the four map samples around a pixel span more than this much parallax (frame px)
REACH = 2  # how many samples beyond its four a pixel at an edge may take its depth from
# Colour differences in mean levels per channel (8-bit; 16-bit frames scale them): a pixel this close to one of its
# four samples takes the best of the four; a sample's difference grows by DISTANCE_COST per sample of distance.
NEAR_ENOUGH = 20.0
DISTANCE_COST = 5.0


def pick_edges(enlarged: np.ndarray, small: np.ndarray, frame: np.ndarray, threshold: int,
               run: Callable[[list[tuple]], None] | None = None, parts: int = 1) -> None:  # fmt: skip
    """At depth edges, replaces values of ``enlarged`` (int16 [H, W], the bilinear enlargement of ``small``
    [h, w], in place) by the sample of ``small`` near the pixel whose colour in the reduced ``frame`` best matches
    the pixel's. ``threshold``: the spread of four samples (in ``small``'s units) above which they make an edge.
    ``run``: runs ``(function, *arguments)`` calls, side by side where it can (a renderer's threads): the map is
    then picked in ``parts`` bands of rows."""
    height, width = enlarged.shape
    rows, cols = small.shape
    if (rows, cols) == (height, width) or rows < 2 or cols < 2:
        return
    if frame.ndim == 2:
        frame = frame[..., None]
    scale = channel_scale(frame.dtype) * frame.shape[2]  # the constants are per 8-bit channel
    # Bands of the map's cells (rows + 1 of them, the borders' included): each writes its own frame rows.
    parts = max(1, min(parts, rows + 1))
    cuts = [round((rows + 1) * k / parts) for k in range(parts + 1)]
    calls = [(_pick, enlarged, small, frame, threshold, REACH, NEAR_ENOUGH * scale, DISTANCE_COST * scale, top,
              bottom) for top, bottom in zip(cuts, cuts[1:]) if bottom > top]  # fmt: skip
    if run is None or len(calls) == 1:
        for function, *arguments in calls:
            function(*arguments)
    else:
        run(calls)


def channel_scale(dtype: np.dtype) -> float:
    """A frame's levels per 8-bit level (16-bit frames: 257)."""
    return np.iinfo(dtype).max / 255.0 if np.issubdtype(dtype, np.integer) else 1.0


@njit(nogil=True, cache=True)
def _sample_colour(frame, i, j, rows, cols, out):
    """The mean colour of the frame pixels whose area falls in map sample (i, j) (an area reduction, for the
    samples at edges only: reducing the whole frame costs more than the rest of the pick)."""
    height, width, channels = frame.shape
    y0, y1 = (i * height) // rows, max((i + 1) * height // rows, (i * height) // rows + 1)
    x0, x1 = (j * width) // cols, max((j + 1) * width // cols, (j * width) // cols + 1)
    for c in range(channels):
        total = 0.0
        for y in range(y0, min(y1, height)):
            for x in range(x0, min(x1, width)):
                total += frame[y, x, c]
        out[c] = total / ((min(y1, height) - y0) * (min(x1, width) - x0))


@njit(nogil=True, cache=True)
def _pick(enlarged, small, frame, threshold, reach, near_enough, distance_cost, top, bottom):
    """``pick_edges`` over the map's cells ``top`` to ``bottom`` (cell i lies between sample rows i - 1 and i)."""
    height, width = enlarged.shape
    rows, cols = small.shape
    channels = frame.shape[2]
    colours = np.empty((rows, cols, channels), np.float32)  # each sample's colour, once ``known``
    known = np.zeros((rows, cols), np.bool_)
    # Each frame row and column's place on the map (``*_at``: in samples) and its cell, as OpenCV's bilinear
    # resize places them: between the samples i and i + 1 around (y + 0.5) * rows / height - 0.5, clamped at the
    # borders (cells -1 .. rows - 1, stored from 0).
    row_at = np.empty(height, np.float64)
    row_cell = np.empty(height, np.int64)
    for y in range(height):
        row_at[y] = (y + 0.5) * rows / height - 0.5
        row_cell[y] = min(max(int(np.floor(row_at[y])), -1), rows - 1) + 1
    col_at = np.empty(width, np.float64)
    col_cell = np.empty(width, np.int64)
    for x in range(width):
        col_at[x] = (x + 0.5) * cols / width - 0.5
        col_cell[x] = min(max(int(np.floor(col_at[x])), -1), cols - 1) + 1
    # The frame rows and columns of each cell (contiguous: the cells increase along the frame).
    row_start, row_end = _spans(row_cell, rows + 1)
    col_start, col_end = _spans(col_cell, cols + 1)
    most = (2 + 2 * reach) ** 2
    values = np.empty(most, small.dtype)
    samples = np.empty((most, channels), np.float64)
    at = np.empty((most, 2), np.float64)
    for ci in range(top, bottom):
        i0, i1 = max(ci - 1, 0), min(ci, rows - 1)
        for cj in range(cols + 1):
            j0, j1 = max(cj - 1, 0), min(cj, cols - 1)
            # An edge: the cell's four samples spread wider than the threshold.
            a, b, c, d = small[i0, j0], small[i0, j1], small[i1, j0], small[i1, j1]
            if max(max(a, b), max(c, d)) - min(min(a, b), min(c, d)) <= threshold:
                continue
            # The candidates: the cell's four samples first, then those up to ``reach`` beyond them.
            n = 0
            four = 0
            for ring in range(2):
                for i in range(max(ci - 1 - ring * reach, 0), min(ci + ring * reach, rows - 1) + 1):
                    for j in range(max(cj - 1 - ring * reach, 0), min(cj + ring * reach, cols - 1) + 1):
                        if ring == 1 and i0 <= i <= i1 and j0 <= j <= j1:
                            continue
                        if not known[i, j]:
                            _sample_colour(frame, i, j, rows, cols, colours[i, j])
                            known[i, j] = True
                        values[n] = small[i, j]
                        at[n, 0], at[n, 1] = i, j
                        for channel in range(channels):
                            samples[n, channel] = colours[i, j, channel]
                        n += 1
                if ring == 0:
                    four = n
            for y in range(row_start[ci], row_end[ci]):
                for x in range(col_start[cj], col_end[cj]):
                    best, value = np.inf, values[0]
                    for k in range(n):
                        if k == four and best <= near_enough:
                            break  # one of the four matches: a thin structure's pixel would match none
                        distance = distance_cost * (abs(row_at[y] - at[k, 0]) + abs(col_at[x] - at[k, 1]))
                        if distance >= best:
                            continue
                        for channel in range(channels):
                            distance += abs(float(frame[y, x, channel]) - samples[k, channel])
                        if distance < best:
                            best, value = distance, values[k]
                    enlarged[y, x] = value


@njit(nogil=True, cache=True)
def _spans(cells, count):
    """The first and last + 1 index of each of ``count`` cell numbers in a non-decreasing array (empty: 0, 0)."""
    start = np.zeros(count, np.int64)
    end = np.zeros(count, np.int64)
    for index in range(len(cells) - 1, -1, -1):
        start[cells[index]] = index
    for index in range(len(cells)):
        end[cells[index]] = index + 1
    return start, end
