"""Depth enlarged to the frame with its edges where the picture has them.

A depth model's near map is a few hundred pixels wide; the frame may be several times wider. Enlarged bilinearly,
each depth edge becomes a ramp several frame pixels wide, and the pixels on it are given depths between the two
surfaces: they are sheared apart in the views (the renderer's edge dilation hides some of it by pushing the whole
ramp onto the nearer surface, which then carries background pixels with it).

``pick_edges`` keeps the bilinear map wherever the depth is smooth, and at depth edges gives each frame pixel the
depth of one of the four map samples around it: the one whose own colour (the frame reduced to the map's size)
is closest to the pixel's. A pixel of the foreground takes the foreground's depth, a pixel of the background the
background's, and the edge lands on the picture's edge, to the frame's pixel. Unlike a guided or bilateral
filter it never makes new depths (textures are not copied into the depth), and it works only where the four samples
differ by more than ``EDGE_PX`` of parallax, a few percent of the frame (bench/viewing.py: +3 dB on the pixels both
eyes see against bilinear enlargement, at DA3's size for a 1080p frame).
"""

from __future__ import annotations

import numpy as np
from numba import njit

EDGE_PX = 0.5  # a depth edge: the four map samples around a pixel span more than this much parallax (frame px)


def pick_edges(enlarged: np.ndarray, small: np.ndarray, frame: np.ndarray, threshold: int) -> None:
    """At depth edges, replaces values of ``enlarged`` (int16 [H, W], the bilinear enlargement of ``small``
    [h, w], in place) by the sample of ``small`` whose colour in the reduced ``frame`` is closest to the pixel's.
    ``threshold``: the spread of four samples (in ``small``'s units) above which they make an edge."""
    height, width = enlarged.shape
    rows, cols = small.shape
    if (rows, cols) == (height, width) or rows < 2 or cols < 2:
        return
    if frame.ndim == 2:
        frame = frame[..., None]
    _pick(enlarged, small, frame, threshold)


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
def _pick(enlarged, small, frame, threshold):
    height, width = enlarged.shape
    rows, cols = small.shape
    channels = frame.shape[2]
    colours = np.empty((rows, cols, channels), np.float32)  # each sample's colour, once ``known``
    known = np.zeros((rows, cols), np.bool_)
    # Each frame row and column's map cell, as OpenCV's bilinear resize places them: between the samples i and
    # i + 1 around (y + 0.5) * rows / height - 0.5, clamped at the borders (cells -1 .. rows - 1, stored from 0).
    row_cell = np.empty(height, np.int64)
    for y in range(height):
        row_cell[y] = min(max(int(np.floor((y + 0.5) * rows / height - 0.5)), -1), rows - 1) + 1
    col_cell = np.empty(width, np.int64)
    for x in range(width):
        col_cell[x] = min(max(int(np.floor((x + 0.5) * cols / width - 0.5)), -1), cols - 1) + 1
    # Which cells hold an edge: their four samples spread wider than the threshold.
    edge = np.zeros((rows + 1, cols + 1), np.bool_)
    for ci in range(rows + 1):
        i0, i1 = max(ci - 1, 0), min(ci, rows - 1)
        for cj in range(cols + 1):
            j0, j1 = max(cj - 1, 0), min(cj, cols - 1)
            a, b, c, d = small[i0, j0], small[i0, j1], small[i1, j0], small[i1, j1]
            edge[ci, cj] = max(max(a, b), max(c, d)) - min(min(a, b), min(c, d)) > threshold
    # The frame rows and columns of each cell (contiguous: the cells increase along the frame).
    row_start, row_end = _spans(row_cell, rows + 1)
    col_start, col_end = _spans(col_cell, cols + 1)
    values = np.empty(4, small.dtype)
    samples = np.empty((4, channels), np.float64)
    for ci in range(rows + 1):
        i0, i1 = max(ci - 1, 0), min(ci, rows - 1)
        for cj in range(cols + 1):
            if not edge[ci, cj]:
                continue
            j0, j1 = max(cj - 1, 0), min(cj, cols - 1)
            # The cell's four samples (top left, top right, bottom left, bottom right) and their colours.
            for k in range(4):
                i = i0 if k < 2 else i1
                j = j0 if k % 2 == 0 else j1
                if not known[i, j]:
                    _sample_colour(frame, i, j, rows, cols, colours[i, j])
                    known[i, j] = True
                values[k] = small[i, j]
                for channel in range(channels):
                    samples[k, channel] = colours[i, j, channel]
            for y in range(row_start[ci], row_end[ci]):
                for x in range(col_start[cj], col_end[cj]):
                    best, value = -1.0, values[0]
                    for k in range(4):
                        distance = 0.0
                        for channel in range(channels):
                            distance += abs(float(frame[y, x, channel]) - samples[k, channel])
                        if best < 0 or distance < best:
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
