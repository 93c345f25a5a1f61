"""The warp of one row, written once as plain scalar Python and compiled by numba for each device.

``row_columns`` turns a row of fixed-point shifts into the source position every target pixel shows (the forward
splat with its occlusion and hole rules, see ``stereo3d.stereo.warp``); ``sample_pixel`` resamples one target
pixel there. The CPU renderer compiles ``row_columns`` with ``numba.njit`` (``source_map``) and runs it a band
of rows at a time, without the GIL, on the render threads, then resamples with OpenCV's SIMD ``remap``. The GPU
renderer (``stereo3d.stereo.cuda``) compiles them as CUDA device functions: a block of threads per row for the
splat (each walks a piece of the row from the state ``row_reach`` gives the pieces before it) and one thread per
pixel for the resampling. ``warp_rows`` is that GPU computation compiled for the CPU, which the tests hold against
OpenCV's resampling at sizes the simulator would take minutes over. So CI, which has no GPU, tests the GPU's code
on the CPU: compiled here, and interpreted by numba's CUDA simulator (tests/test_render_cuda.py).

Positions are integers in 1/32 px, and resampling is exact integer arithmetic for what OpenCV's bilinear
``remap`` (replicated borders) computes at positions on that grid: ``p0 + (p1 - p0) * k / 32``, rounded half to
even. The views are the earlier renderer's (vectorised OpenCV) views, bit for bit (8 and 16 bits, checked on
random scenes). Every array read is cast to an int32 or wider first (``INT`` in ``row_columns``: int32 on a GPU,
int64 on the CPU): the simulator runs this as Python on numpy scalars, where int16 arithmetic would wrap.
"""

from __future__ import annotations

import types

import numpy as np
from numba import njit

POSITION_BITS = 5  # target positions in 1/32 px, as OpenCV's remap resolves them
POSITION_ONE = 1 << POSITION_BITS  # one pixel, in positions
INT = np.int32  # the integer of row_columns' arithmetic, as a GPU compiles it (the CPU's: with_int)


def row_columns(shift, columns, holes, bits, mirrored, scale, start, stop, reach, last, tail):
    """The source position (1/32 px, times ``scale``) of every target pixel of one row into ``columns``, and
    whether it is a disocclusion into ``holes`` (1) or not (0). ``shift`` is the row of int16 shifts in 1/2**bits
    px (the left view's direction), and the arrays are walked in the view's direction: the right view (``mirrored``:
    nearer content moves left, holes lie on the background's right) passes them reversed (``[::-1]``), and its
    positions count from the other end.

    One pass, each target written once: source column x lands on target ``round(x + shift)`` (half up; targets
    count from 1 here) and shows its sub-pixel position there (+1 px, so that 0 means "nothing to the left").
    It is hidden unless it lands beyond every column to its left (nearer pixels always lie left of farther ones
    landing on the same spot). So the visible columns land in increasing order, with increasing positions:
    every target between two of them is a disocclusion. A disocclusion gets its **hidden position**: where the
    background beside it, carried on with the background's own shift, would come from in the source, which the
    foreground covers there (``stereo3d.stereo.fill`` looks for it in other frames, and fills it). Integers of
    ``INT`` (int32 on a GPU, where int64 is twice as wide; the CPU compiles it with int64, its own width: int32 cost
    sign extensions, 1.4x on the mirrored walk), float32 stores, and a hot path (the next target, no hole) of one
    test and two stores.

    The walk covers source columns ``start:stop`` from the state the columns before them leave (``reach``, the
    farthest target they landed on, and ``last``, the position shown there: ``row_reach``; 0, 0 before the first
    column), and writes the targets past ``reach`` up to where they land; ``tail``: then every target after the
    last landing, as holes (the walk of the row's last columns). So the CPU walks a whole row at once (0, width,
    0, 0, True) and a GPU walks a row in pieces on many threads, each target written by one of them."""
    width = shift.shape[0]
    one = INT(1 << bits)
    half = one >> 1
    up = INT(POSITION_BITS - bits)
    # The source column that position p (+1 px) shows is (base + sign * p) / one, in the row's own coordinates.
    base, sign = (INT(width) * one, INT(-1)) if mirrored else (-one, INT(1))
    reach = INT(reach)  # targets 1..reach are written (landing at or left of 0 claims nothing)
    last = INT(last)  # the position shown at target ``reach``
    rounding = INT(start + 1) * one + half  # (x + 1) * one + half, the rounding of source column x's landing
    for x in range(start, stop):
        s = INT(shift[x])
        landing = (s + rounding) >> bits
        rounding += one
        if landing == reach + 1 and landing <= width:
            last = landing * one - s
            columns[reach] = np.float32((base + sign * last) << up) * scale
            holes[reach] = 0
            reach = landing
        elif landing > reach:
            end = min(landing - 1, width)
            for target in range(reach, end):
                hidden = last + (target + 1 - reach) * one
                columns[target] = np.float32((base + sign * hidden) << up) * scale
                holes[target] = 1
            reach = end
            if landing > width:
                break  # every target is written (reach is the width): the row's last columns land past its end
            last = landing * one - s
            columns[reach] = np.float32((base + sign * last) << up) * scale
            holes[reach] = 0
            reach = landing
    if tail:
        for target in range(reach, width):
            hidden = last + (target + 1 - reach) * one
            columns[target] = np.float32((base + sign * hidden) << up) * scale
            holes[target] = 1


def row_reach(shift, start, stop, bits):
    """The state ``row_columns`` carries past source columns ``start:stop`` of a row on its own: the farthest
    target they land on (0: none past the row's start) and the position shown there, that of the first column
    landing on it (a later one landing there is hidden). Of the pieces before a column, the one with the
    farthest landing (the first, on a tie) gives the walk's state at that column: its reach and position are the
    walk's after all of them (or reach past the row's end: nothing after is written)."""
    one = INT(1 << bits)
    reach = INT(0)
    last = INT(0)
    rounding = INT(start + 1) * one + (one >> 1)
    for x in range(start, stop):
        s = INT(shift[x])
        landing = (s + rounding) >> bits
        rounding += one
        if landing > reach:
            reach = landing
            last = landing * one - s
    return reach, last


def sample_pixel(src, out, col, position):
    """``out[col]``: the row ``src`` ([W, C]) resampled at ``position`` (1/32 px), every channel. int32
    arithmetic (an 8- or 16-bit pixel times 32 fits), half as wide as Python's int64 on either device."""
    width = src.shape[0]
    column = np.int32(position) >> POSITION_BITS
    weight = np.int32(position) & (POSITION_ONE - 1)
    left = min(max(column, 0), width - 1)
    right = min(max(column + 1, 0), width - 1)
    for channel in range(src.shape[1]):
        total = np.int32(src[left, channel]) * (POSITION_ONE - weight) + np.int32(src[right, channel]) * weight
        # total / 32 rounded half to even, without a branch (noisy pictures would mispredict one per channel).
        out[col, channel] = (total + (POSITION_ONE // 2 - 1) + ((total >> POSITION_BITS) & 1)) >> POSITION_BITS


def with_int(function, integer):
    """``function`` with its ``INT`` as ``integer``: one source, compiled at the integer width each device does
    best (the values never leave int32's range, so the results are the same)."""
    scope = {**function.__globals__, "INT": integer}
    return types.FunctionType(function.__code__, scope, function.__name__, function.__defaults__, function.__closure__)


_row_columns = njit(nogil=True, cache=True, inline="always")(with_int(row_columns, np.int64))
_sample_pixel = njit(nogil=True, cache=True, inline="always")(sample_pixel)


@njit(nogil=True, cache=True)
def warp_rows(src, shift, out, holes, top, bottom, mirrored, bits):
    """Rows ``top:bottom`` of one view: ``src`` [H, W, C] warped by ``shift`` [H, W] into ``out``, its
    disocclusions marked in ``holes`` [H, W], with the GPU's per-pixel resampling (``sample_pixel``): the GPU
    renderer's computation, compiled for the CPU."""
    width = shift.shape[1]
    columns = np.empty(width, np.int32)
    for row in range(top, bottom):
        if mirrored:
            _row_columns(shift[row, ::-1], columns[::-1], holes[row, ::-1], bits, True, 1, 0, width, 0, 0, True)
        else:
            _row_columns(shift[row], columns, holes[row], bits, False, 1, 0, width, 0, 0, True)
        source, view = src[row], out[row]
        for col in range(width):
            _sample_pixel(source, view, col, columns[col])


@njit(nogil=True, cache=True)
def source_map(shift, top, mirrored, bits, out, holes):
    """The source column (float32 px, as OpenCV's ``remap`` takes it) of every target pixel of rows
    ``top : top + len(out)`` of one view into ``out``, and their disocclusions into ``holes`` (same rows)."""
    scale = np.float32(1.0 / POSITION_ONE)
    width = shift.shape[1]
    for index in range(out.shape[0]):
        row = top + index
        if mirrored:
            _row_columns(
                shift[row, ::-1], out[index, ::-1], holes[index, ::-1], bits, True, scale, 0, width, 0, 0, True
            )
        else:
            _row_columns(shift[row], out[index], holes[index], bits, False, scale, 0, width, 0, 0, True)
