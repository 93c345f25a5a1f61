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

The samples along an edge blend both surfaces, in depth as in colour, and a pixel on the picture's soft edge often
matches such a blend's colour best: taking its depth shears the pixel between the surfaces in the views. A sample
is charged ``MIXED_COST`` for how far inside the candidates' range of depths it lies, so that a pixel takes a
surface's own depth unless a blend matches it clearly better (bench Q5/Q6 on the garden: the model's size costs
0.89 dB where both eyes see against the exact depth, 1.05 without; Q1 +0.11 dB, Q2 +0.05 dB, Q3 0.452 -> 0.466).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from numba import njit

from stereo3d.stereo.scalar import dmul, fmul

EDGE_PX = 0.5  # a depth edge: the four map samples around a pixel span more than this much parallax (frame px)
REACH = 2  # how many samples beyond its four a pixel at an edge may take its depth from
# Colour differences in mean levels per channel (8-bit; 16-bit frames scale them): a pixel this close to one of its
# four samples takes the best of the four; a sample's difference grows by DISTANCE_COST per sample of distance.
NEAR_ENOUGH = 20.0
DISTANCE_COST = 5.0
# A sample whose depth lies between the largest and smallest of a pixel's candidates is a blend of the surfaces
# around it (a depth model's output and an area reduction alike are soft at edges): its difference grows by
# MIXED_COST times how far inside that range it lies (0 at either end, 0.5 halfway), so that a pixel takes a
# surface's own depth where one matches about as well.
MIXED_COST = 16.0
MOST_CANDIDATES = (2 + 2 * REACH) ** 2  # the samples a pixel at an edge may take its depth from
MOST_CHANNELS = 4


def enlarge(small: np.ndarray, enlarged: np.ndarray, frame: np.ndarray | None = None, threshold: int = 0,
            run: Callable[[list[tuple]], None] | None = None, parts: int = 1) -> None:  # fmt: skip
    """``enlarged`` (int16 [H, W]): ``small`` (int16 [h, w]) enlarged bilinearly, and where ``frame`` ([H, W, C]
    or [H, W]) is given, with the depth edges on the frame's: at a pixel whose four samples spread wider than
    ``threshold`` (in ``small``'s units), the sample near it whose colour in the reduced ``frame`` best matches the
    pixel's. ``run``: runs ``(function, *arguments)`` calls, side by side where it can (a renderer's threads): the
    map is then enlarged in ``parts`` bands of rows.

    The bilinear values are OpenCV's ``resize`` (``INTER_LINEAR``, its own code), computed here so that they are the
    same on every CPU and on a GPU: OpenCV hands int16 maps to Intel's IPP where it is built with it, which rounds
    about 1 % of them one unit otherwise."""
    height, width = enlarged.shape
    rows, cols = small.shape
    picks = frame is not None and (rows, cols) != (height, width) and rows >= 2 and cols >= 2
    if frame is None:
        frame = np.zeros((1, 1, 1), np.uint8)
    elif frame.ndim == 2:
        frame = frame[..., None]
    scale = channel_scale(frame.dtype) * frame.shape[2]  # the constants are per 8-bit channel
    # Bands of the map's cells (rows + 1 of them, the borders' included): each writes its own frame rows.
    parts = max(1, min(parts, rows + 1, height))
    cuts = [round((rows + 1) * k / parts) for k in range(parts + 1)]
    calls = [(_enlarge_cells, small, enlarged, frame, picks, threshold, REACH, NEAR_ENOUGH * scale,
              DISTANCE_COST * scale, MIXED_COST * scale, top, bottom)
             for top, bottom in zip(cuts, cuts[1:]) if bottom > top]  # fmt: skip
    if run is None or len(calls) == 1:
        for function, *arguments in calls:
            function(*arguments)
    else:
        run(calls)


def channel_scale(dtype: np.dtype) -> float:
    """A frame's levels per 8-bit level (16-bit frames: 257)."""
    return np.iinfo(dtype).max / 255.0 if np.issubdtype(dtype, np.integer) else 1.0


# --- the scalar code both devices compile (stereo3d.stereo.scalar) -----------------------------------------------


@njit(nogil=True, cache=True, inline="always")
def bilinear_at(index, count, size):
    """Where output pixel ``index`` of ``size`` reads a line of ``count`` samples, as OpenCV's bilinear resize
    places it: (first sample, weight of the next, float32), the weight 0 past either end."""
    place = np.float32(dmul(index + 0.5, 1.0 / (size / count)) - 0.5)
    first = int(math.floor(place))
    weight = np.float32(place - np.float32(first))
    if first < 0:
        first, weight = 0, np.float32(0.0)
    if first >= count - 1:
        first, weight = count - 1, np.float32(0.0)
    return first, weight


@njit(nogil=True, cache=True, inline="always")
def blend(a, b, weight):
    """``a * (1 - weight) + b * weight`` in float32, each product rounded (OpenCV's order)."""
    return fmul(np.float32(a), np.float32(1.0) - weight) + fmul(np.float32(b), weight)


@njit(nogil=True, cache=True, inline="always")
def to_int16(value):
    """A float32 rounded half to even and saturated to int16, as OpenCV's ``saturate_cast<short>``."""
    return np.int16(min(max(round(value), -32768), 32767))


@njit(nogil=True, cache=True, inline="always")
def bilinear_value(small, y, x, height, width):
    """The bilinear enlargement of ``small`` at frame pixel (y, x) of a frame ``height`` x ``width``."""
    rows, cols = small.shape
    i, wy = bilinear_at(y, rows, height)
    j, wx = bilinear_at(x, cols, width)
    i1, j1 = min(i + 1, rows - 1), min(j + 1, cols - 1)
    above = blend(small[i, j], small[i, j1], wx)
    below = blend(small[i1, j], small[i1, j1], wx)
    return to_int16(blend(above, below, wy))


@njit(nogil=True, cache=True, inline="always")
def cell_place(index, count, size):
    """Where frame row or column ``index`` of ``size`` lies on a map of ``count`` samples (in samples), and its cell:
    between the samples ``cell - 1`` and ``cell``, as OpenCV's bilinear resize places it (cells 0 .. count, the
    borders' included)."""
    place = (index + 0.5) * count / size - 0.5
    return place, min(max(int(math.floor(place)), -1), count - 1) + 1


@njit(nogil=True, cache=True, inline="always")
def is_edge(small, ci, cj, threshold):
    """Whether the four samples of cell (ci, cj) spread wider than ``threshold``."""
    rows, cols = small.shape
    i0, i1 = max(ci - 1, 0), min(ci, rows - 1)
    j0, j1 = max(cj - 1, 0), min(cj, cols - 1)
    a, b, c, d = small[i0, j0], small[i0, j1], small[i1, j0], small[i1, j1]
    return max(max(a, b), max(c, d)) - min(min(a, b), min(c, d)) > threshold


@njit(nogil=True, cache=True)
def sample_colour(frame, i, j, rows, cols, out):
    """The mean colour of the frame pixels whose area falls in map sample (i, j) (an area reduction, for the
    samples at edges only: reducing the whole frame costs more than the rest of the pick)."""
    height, width, channels = frame.shape
    y0, y1 = (i * height) // rows, max((i + 1) * height // rows, (i * height) // rows + 1)
    x0, x1 = (j * width) // cols, max((j + 1) * width // cols, (j * width) // cols + 1)
    for c in range(channels):
        total = np.float64(0.0)
        for y in range(y0, min(y1, height)):
            for x in range(x0, min(x1, width)):
                total += np.float64(frame[y, x, c])
        out[c] = total / ((min(y1, height) - y0) * (min(x1, width) - x0))


@njit(nogil=True, cache=True, inline="always")
def candidates(small, frame, colours, known, ci, cj, reach, values, at, samples):
    """The samples a pixel of edge cell (ci, cj) may take its depth from, into ``values``, ``at`` (their place in its
    first two columns; ``pick_span`` keeps each one's blend cost in the third) and
    ``samples`` (their colours, from ``colours`` once ``known``, else reduced from the frame now): the cell's four
    first, then those up to ``reach`` beyond them. Returns how many, and how many of them are the four."""
    rows, cols = small.shape
    channels = frame.shape[2]
    i0, i1 = max(ci - 1, 0), min(ci, rows - 1)
    j0, j1 = max(cj - 1, 0), min(cj, cols - 1)
    n = 0
    four = 0
    for ring in range(2):
        for i in range(max(ci - 1 - ring * reach, 0), min(ci + ring * reach, rows - 1) + 1):
            for j in range(max(cj - 1 - ring * reach, 0), min(cj + ring * reach, cols - 1) + 1):
                if ring == 1 and i0 <= i <= i1 and j0 <= j <= j1:
                    continue
                if not known[i, j]:
                    sample_colour(frame, i, j, rows, cols, colours[i, j])
                    known[i, j] = True
                values[n] = small[i, j]
                at[n, 0], at[n, 1] = i, j
                for channel in range(channels):
                    samples[n, channel] = colours[i, j, channel]
                n += 1
        if ring == 0:
            four = n
    return n, four


@njit(nogil=True, cache=True)
def pick_span(enlarged, frame, row_at, col_at, top, bottom, left, right, values, samples, at, n, four, near_enough,
              distance_cost, mixed_cost):  # fmt: skip
    """Frame pixels ``top:bottom, left:right`` of ``enlarged``, all in one edge cell: each takes the value of the
    candidate (``candidates``) whose colour is closest to the pixel's, each candidate's difference raised by
    ``distance_cost`` per sample of distance from the pixel's place on the map (``row_at``, ``col_at``) and by
    ``mixed_cost`` times how far inside the candidates' range of values its own lies (``MIXED_COST``); the four
    alone where one of them scores within ``near_enough``."""
    channels = frame.shape[2]
    largest, smallest = np.float64(values[0]), np.float64(values[0])
    for k in range(n):
        largest, smallest = max(largest, np.float64(values[k])), min(smallest, np.float64(values[k]))
    spread = max(largest - smallest, 1.0)
    for k in range(n):  # each candidate's cost for being a blend, the same for every pixel of the span
        at[k, 2] = dmul(mixed_cost, min(np.float64(values[k]) - smallest, largest - np.float64(values[k])) / spread)
    for y in range(top, bottom):
        for x in range(left, right):
            best, value = np.inf, values[0]
            for k in range(n):
                if k == four and best <= near_enough:
                    break  # one of the four matches: a thin structure's pixel would match none
                distance = dmul(distance_cost, abs(row_at[y] - at[k, 0]) + abs(col_at[x] - at[k, 1])) + at[k, 2]
                if distance >= best:
                    continue
                for channel in range(channels):
                    distance += abs(np.float64(frame[y, x, channel]) - samples[k, channel])
                if distance < best:
                    best, value = distance, values[k]
            enlarged[y, x] = value


# --- the CPU's bands ---------------------------------------------------------------------------------------------


@njit(nogil=True, cache=True)
def _enlarge_cells(small, enlarged, frame, picks, threshold, reach, near_enough, distance_cost, mixed_cost, top,
                   bottom):  # fmt: skip
    """``enlarge`` over the map's cells ``top`` to ``bottom`` (cell i lies between sample rows i - 1 and i): the
    frame rows of those cells enlarged a row at a time from two rows of horizontal blends (each blend as
    ``bilinear_value`` computes it), then their edge pixels picked."""
    height, width = enlarged.shape
    rows, cols = small.shape
    # Each frame row and column's place on the map and its cell; the frame rows and columns of each cell
    # (contiguous: the cells increase along the frame).
    row_at = np.empty(height, np.float64)
    row_cell = np.empty(height, np.int64)
    for y in range(height):
        row_at[y], row_cell[y] = cell_place(y, rows, height)
    col_at = np.empty(width, np.float64)
    col_cell = np.empty(width, np.int64)
    for x in range(width):
        col_at[x], col_cell[x] = cell_place(x, cols, width)
    row_start, row_end = _spans(row_cell, rows + 1)
    col_start, col_end = _spans(col_cell, cols + 1)
    first_row, end_row = height, 0
    for ci in range(top, bottom):
        if row_end[ci] > row_start[ci]:
            first_row, end_row = min(first_row, row_start[ci]), max(end_row, row_end[ci])
    # The bilinear enlargement of the band's rows.
    x_first = np.empty(width, np.int64)
    x_weight = np.empty(width, np.float32)
    for x in range(width):
        x_first[x], x_weight[x] = bilinear_at(x, cols, width)
    blends = np.empty((2, width), np.float32)
    held = np.full(2, -1, np.int64)  # the map row each line of ``blends`` holds
    for y in range(first_row, end_row):
        i, wy = bilinear_at(y, rows, height)
        for line in range(2):
            wanted = i if line == 0 else min(i + 1, rows - 1)
            if held[line] == wanted:
                continue
            if line == 0 and held[1] == wanted:
                blends[0] = blends[1]
            else:
                source = small[wanted]
                for x in range(width):
                    j = x_first[x]
                    blends[line, x] = blend(source[j], source[min(j + 1, cols - 1)], x_weight[x])
            held[line] = wanted
        out = enlarged[y]
        for x in range(width):
            out[x] = to_int16(blend(blends[0, x], blends[1, x], wy))
    if not picks:
        return
    channels = frame.shape[2]
    colours = np.empty((rows, cols, channels), np.float32)  # each sample's colour, once ``known``
    known = np.zeros((rows, cols), np.bool_)
    values = np.empty(MOST_CANDIDATES, small.dtype)
    samples = np.empty((MOST_CANDIDATES, channels), np.float64)
    at = np.empty((MOST_CANDIDATES, 3), np.float64)
    for ci in range(top, bottom):
        for cj in range(cols + 1):
            if not is_edge(small, ci, cj, threshold):
                continue
            n, four = candidates(small, frame, colours, known, ci, cj, reach, values, at, samples)
            pick_span(enlarged, frame, row_at, col_at, row_start[ci], row_end[ci], col_start[cj], col_end[cj], values,
                      samples, at, n, four, near_enough, distance_cost, mixed_cost)  # fmt: skip


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


# The functions a GPU compiles (stereo3d.stereo.cuda, through stereo3d.stereo.scalar.for_cuda).
SHARED = {f.__name__: f for f in (bilinear_at, blend, to_int16, bilinear_value, cell_place, is_edge, sample_colour,
                                  candidates, pick_span)}  # fmt: skip
