"""The warp of one row, written once as plain scalar Python and compiled by numba for each device.

``row_columns`` turns a row of fixed-point shifts into the source position every target pixel shows (the forward
splat with its occlusion and hole rules, see ``stereo3d.stereo.warp``); ``sample_pixel`` resamples one target
pixel there. The CPU renderer compiles both with ``numba.njit`` and runs them a slice of rows at a time, without
the GIL, on the render threads (``warp_rows``); the GPU renderer (``stereo3d.stereo.cuda``) compiles the very
same functions as CUDA device functions, one GPU thread per row for the splat and one per pixel for the
resampling. So CI, which has no GPU, tests the GPU's code on the CPU: compiled here, and interpreted by numba's
CUDA simulator (tests/test_render_cuda.py).

Positions are integers in 1/32 px, and resampling is exact integer arithmetic for what OpenCV's bilinear
``remap`` (replicated borders) computes at positions on that grid: ``p0 + (p1 - p0) * k / 32``, rounded half to
even. The views are the renderer's earlier OpenCV views, bit for bit (8 and 16 bits, checked on random scenes).
Every array read is cast to ``int`` first: the simulator runs this as Python on numpy scalars, where int16
arithmetic would wrap.
"""

from __future__ import annotations

import numpy as np
from numba import njit

POSITION_BITS = 5  # target positions in 1/32 px, as OpenCV's remap resolves them
_ONE = 1 << POSITION_BITS


def row_columns(shift, row, mirrored, bits, columns, scale):
    """The source position (1/32 px, times ``scale``; -32 or ``32 * width``: nothing lands at or before it,
    which the border replicates) of every target pixel of ``row`` into ``columns``. ``shift`` holds int16 shifts
    in 1/2**bits px (the left view's direction); ``mirrored`` renders the right view's (nearer content moves
    left, holes take the pixel to their right) by walking the row back to front.

    One pass, each target written once: source column x (in the walk's coordinates) lands on target
    ``round(x + shift)`` (half up; targets count from 1 here) and shows its sub-pixel position there (+1 px, so
    that 0 means "nothing to the left"). It is hidden unless it lands beyond every column to its left (nearer
    pixels always lie left of farther ones landing on the same spot). So the visible columns land in increasing
    order, and with increasing positions: every target between two of them is a disocclusion, and repeats the
    last position to its left, taken to a whole pixel rounded half down (a fractional position, or rounding up,
    would take in the foreground across the gap)."""
    width = shift.shape[1]
    one = 1 << bits
    half = one >> 1
    up = POSITION_BITS - bits
    reach = 0  # the furthest target landed on so far (landing at or left of 0 claims nothing)
    done = 0  # targets 1..done are written
    last = 0  # the position shown at target ``done``
    for x in range(width + 1):
        if x < width:
            s = int(shift[row, width - 1 - x]) if mirrored else int(shift[row, x])
            landing = (s + (x + 1) * one + half) >> bits
            if landing <= reach:
                continue
            reach = landing
        else:  # past the row's end: the targets left are holes
            s, landing = 0, width + 1
        shown = landing * one - s
        hole = (last + half - 1) & ~(one - 1)
        end = min(landing, width)
        for target in range(done + 1, end + 1):
            position = shown if target == landing else hole
            if mirrored:
                columns[width - target] = ((width * one - position) << up) * scale
            else:
                columns[target - 1] = ((position - one) << up) * scale
        if landing <= width:
            last = shown
        done = end
        if done == width:
            break


def sample_pixel(src, out, col, position):
    """``out[col]``: the row ``src`` ([W, C]) resampled at ``position`` (1/32 px), every channel. int32
    arithmetic (an 8- or 16-bit pixel times 32 fits), half as wide as Python's int64 on either device."""
    width = src.shape[0]
    column = np.int32(position) >> POSITION_BITS
    weight = np.int32(position) & (_ONE - 1)
    left = min(max(column, 0), width - 1)
    right = min(max(column + 1, 0), width - 1)
    for channel in range(src.shape[1]):
        total = np.int32(src[left, channel]) * (_ONE - weight) + np.int32(src[right, channel]) * weight
        # total / 32 rounded half to even, without a branch (noisy pictures would mispredict one per channel).
        out[col, channel] = (total + (_ONE // 2 - 1) + ((total >> POSITION_BITS) & 1)) >> POSITION_BITS


_row_columns = njit(nogil=True, cache=True, inline="always")(row_columns)
_sample_pixel = njit(nogil=True, cache=True, inline="always")(sample_pixel)


@njit(nogil=True, cache=True)
def warp_rows(src, shift, out, top, bottom, mirrored, bits):
    """Rows ``top:bottom`` of one view: ``src`` [H, W, C] warped by ``shift`` [H, W] into ``out``."""
    width = shift.shape[1]
    columns = np.empty(width, np.int32)
    for row in range(top, bottom):
        _row_columns(shift, row, mirrored, bits, columns, 1)
        source, view = src[row], out[row]
        for col in range(width):
            _sample_pixel(source, view, col, columns[col])


@njit(nogil=True, cache=True)
def source_map(shift, top, mirrored, bits, out):
    """The source column (float32 px, as OpenCV's ``remap`` takes it) of every target pixel of rows
    ``top : top + len(out)`` of one view into ``out``."""
    for index in range(out.shape[0]):
        _row_columns(shift, top + index, mirrored, bits, out[index], np.float32(1.0 / _ONE))
