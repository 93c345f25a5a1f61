"""Disocclusions: what a new view shows where the source never saw the scene.

The warp (``stereo3d.stereo.splat``) marks every target pixel nobody landed on and gives it its *hidden
position*: where the background beside the hole, carried on with its own shift, lies in the source frame, behind
the foreground that covers it there. A hole is filled with background, never with the foreground's edge:

1. **From other frames** (``temporal``, where the render job passes neighbouring frames): the hidden position is
   followed into the frames before and after (``Neighbours``), moved with the background's motion between frames;
   a frame that shows background there (its depth is the background's, clearly behind the occluder) is a
   candidate, and the two nearest in time fill the pixel with their mean (one alone may be a moving object at the
   background's depth; the mean of two evens out the flow's misplacement and the grain; more, and so farther,
   frames scored worse against ground truth).
2. **From the background side** (``spatial``): each hole run repeats the source pixel of its background-side
   neighbour (the left one in the left view, the right one in the right view), taken at a whole pixel so that no
   foreground is resampled into it, as the median of that place over the frames around that show the background
   there: the farthest surface at least half of them show (a subject passing beside the hole for a few frames
   is not its background); then each filled pixel is the mean of the filled pixels of its column within
   ``SMOOTH_ROWS`` rows, so that the repeat does not draw the background's texture out into streaks.

The per-pixel and per-run work is scalar code that the CPU runs a band of rows at a time (``HoleFill``) and a GPU
with a thread per hole pixel (``stereo3d.stereo.cuda``), compiled from the same source (``stereo3d.stereo.scalar``):
the two fill the same pixels. The optical flow between frames is the CPU's on either device (``FrameWindow``, at
most ``MOTION_WIDTH`` wide, on a thread of its own beside the render).
"""

from __future__ import annotations

import math
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import cv2
import numpy as np
from numba import njit

from stereo3d.stereo.cuts import THUMB_SIZE, picture_change
from stereo3d.stereo.scalar import dmul, fmul

SMOOTH_ROWS = 3  # rows above and below whose filled pixels a filled pixel is averaged with (bench/viewing.py)
FILL_FRAMES = 4  # frames before and after a frame whose pictures fill its holes (render.fill_frames' default)
MOST_NEIGHBOURS = 2 * 16  # the frames around a frame that fill its holes, at render.fill_frames' largest
# A candidate's depth must be within this (near map units) of the background beside the hole, and this much farther
# than what covers the hidden position in the frame itself.
BACKGROUND_TOLERANCE = 0.04
OCCLUDER_MARGIN = 0.05
BACKGROUND_PX = 2  # the background's depth is read this far from the hole, away from the foreground's edge
# The background's motion is read this far (% of the width) into the background beside a hole: the optical flow of
# the foreground's edge spills over a few of the flow's pixels (0.3 % filled the bench's moving camera 0.5 dB worse
# than 3 %; of 2, 3, 4, 5, 6 and 8 %, the holes scored 17.42, 17.46, 17.46, 17.47, 17.47, 17.47 dB: 5 is the nearest
# of the plateau, to stay inside a small background).
ANCHOR_PCT = 5.0
# Frames are compared at this width (or less) to find the background's motion between them (DIS at its ultrafast
# preset: ~2 ms a pair; at 480 px and the fast preset the moving camera's holes scored 0.2-0.4 dB better, for 4x the
# time).
MOTION_WIDTH = 320
# The optical flow is left at zero for pictures smaller than this on a side: OpenCV's DIS (5.1, ultrafast) needs a few
# patches of 8 px, and crashes the process (a segmentation fault) on grey pictures under 16 rows.
DIS_LEAST_PX = 16
STILL_PX = 0.1  # background motion below this between two frames is taken as none (noise of a still camera)
STILL_GREY = 1.5  # ...and so where most of the farther half changed less than this (median, grey levels of 255)
# Frames of at least this many pixels are pushed into the window on a thread of their own (a smaller frame's push
# costs less than the hand-off: at 64x36, 0.45 ms a frame more with the thread than without).
THREADED_PUSH_PIXELS = 256 * 256
CUT_CHANGE = 0.25  # a picture change above this between two frames (mean grey level, 0..1) is a cut


class HoleFill:
    """The fill of one view's ``holes`` (uint8 [H, W], 1 = disocclusion) in ``view`` ([H, W, C], in place): from the
    frames around it where ``neighbours`` are given, then from the background side of the ``source`` frame it was
    warped from. ``positions`` are the view's source positions (float32 px); ``scratch`` an array like ``view`` to
    work in. ``holes`` is changed: pixels filled from other frames become 2.

    It runs in two passes over bands of rows, each band a call that may run on a thread of its own: ``gather``
    fills every hole run of its rows on its own (from other frames, and the background's repeat into ``scratch``),
    and once every band is gathered, ``smooth`` evens out its rows' repeats with the rows around them, which may
    belong to other bands. So the pixels are the same however the rows are cut (one band or many), and a machine
    with many cores fills a frame's holes on all of them, not on one thread a view."""

    def __init__(self, view: np.ndarray, holes: np.ndarray, positions: np.ndarray, source: np.ndarray,
                 mirrored: bool, scratch: np.ndarray, neighbours: Neighbours | None = None):  # fmt: skip
        if view.ndim == 2:
            view, source, scratch = view[..., None], source[..., None], scratch[..., None]
        self._view, self._holes, self._positions, self._source = view, holes, positions, source
        self._mirrored, self._scratch = mirrored, scratch
        self._neighbours = neighbours if neighbours is not None and neighbours.count else None
        self._runs: dict[tuple[int, int], np.ndarray] = {}  # each band's hole runs, from gather to smooth

    def gather(self, top: int, bottom: int) -> None:
        """The first pass over rows ``top:bottom``."""
        runs = hole_runs(self._holes[top:bottom])
        runs[:, 0] += top
        self._runs[(top, bottom)] = runs
        if not len(runs):
            return
        around = self._neighbours
        if around is not None:
            steps, flows, pair_slots = around.steps, around.flows, around.pair_slots
            frames, slots, near, nears = around.frames, around.slots, around.current_near, around.nears
        else:
            steps, flows, pair_slots = np.zeros(0, np.int64), np.zeros((1, 1, 1, 2), np.float32), np.zeros(0, np.int64)
            frames, slots = self._source[None], np.zeros(0, np.int64)
            near, nears = np.zeros((1, 1), np.float32), np.zeros((1, 1, 1), np.float32)
        _gather_runs(self._view, self._holes, runs, self._positions, self._mirrored, self._source, self._scratch,
                     ANCHOR_PCT / 100.0 * self._view.shape[1], steps, flows, pair_slots, neighbour_table(steps), near,
                     frames, nears, slots)  # fmt: skip

    def smooth(self, top: int, bottom: int) -> None:
        """The second pass over rows ``top:bottom``, once every band has had its first."""
        runs = self._runs.pop((top, bottom))
        if len(runs):
            _smooth_runs(self._view, self._holes, runs, self._scratch, SMOOTH_ROWS)


def hole_runs(holes: np.ndarray) -> np.ndarray:
    """The runs of hole pixels of each row ([n, 3]: row, first column, last column + 1): the fill then visits
    holes only (a frame has a few percent of them)."""
    height, width = holes.shape
    words = width // 8
    packed = holes[:, : words * 8]
    if not packed.flags.c_contiguous:
        packed = np.ascontiguousarray(packed)
    runs = np.empty((max(16, holes.size // 64), 3), np.int64)
    while True:
        count = _scan_runs(holes, packed.view(np.uint64).reshape(height, words), runs)
        if count >= 0:
            return runs[:count]
        runs = np.empty((runs.shape[0] * 4, 3), np.int64)


@dataclass
class Neighbours:
    """The frames around one frame that its holes may be filled from: neighbour ``k`` is ``steps[k]`` frames after
    this one (negative: before), its picture ``frames[slots[k]]`` and near map ``nears[slots[k]]`` (the window's
    ring of frames, shared, not copied), tried nearest in time first (the earlier of two equally near). To reach
    it from the neighbour before it on its side, the background moves by the optical flow ``flows[pair_slots[k]]``
    (px of the flow's own size; all zero where the camera stood still). Frames of another shot are not among
    them."""

    index: int  # this frame's (frame ``index + steps[k]`` lies in slot ``slots[k]``, this one in ``index % size``)
    current_near: np.ndarray
    frames: np.ndarray
    nears: np.ndarray
    slots: np.ndarray
    steps: np.ndarray
    flows: np.ndarray
    pair_slots: np.ndarray

    @property
    def count(self) -> int:
        return len(self.steps)


class FrameWindow:
    """The frames ``reach`` before and after the frame being rendered, as a render job walks through a video:
    ``push`` each frame with its near map, in order; ``neighbours(index)`` then gives what fills the holes of
    frame ``index`` once the frames ``reach`` after it are in (or the video has ended: ``close``). Frames, near
    maps and flows live in rings of ``2 * reach + 2`` (frame ``i`` in slot ``i % size``): each is copied once, and
    the next frame may be pushed while the neighbours of the frame ``reach`` before it are in use (``windowed``).

    Between consecutive frames the window keeps the optical flow (OpenCV's DIS, on grey frames at most
    ``MOTION_WIDTH`` wide). Where the flow over the farther half of the frame (by its near map: mostly scenery
    moving with the camera) has a median under ``STILL_PX``, the camera stood still and the flow is taken as zero
    (the flow of a still picture is noise), and so where most of that half hardly changed (the median change under
    ``STILL_GREY``: noise and grain; a subject moving across it changes only part of it). A picture change above
    ``CUT_CHANGE`` between two frames is a cut: no frame across it is a neighbour.

    Every decision depends only on the frames within ``reach``, so a segment that starts its window ``reach``
    frames early (and reads ``reach`` frames past its end) renders the very pixels of a whole-video job."""

    def __init__(self, reach: int = FILL_FRAMES):
        self.reach = reach
        self.size = 2 * reach + 2
        self._indices: deque = deque()  # the frames in the rings, in order
        self._frames = self._nears = self._flows = None  # the rings, made at the first frame
        self._greys: dict[int, np.ndarray] = {}
        self._cuts: dict[int, bool] = {}  # frame i -> whether a cut lies between it and i + 1
        self._dis = cv2.DISOpticalFlow_create(cv2.DISOPTICAL_FLOW_PRESET_ULTRAFAST)
        self._ended = False

    def push(self, index: int, frame: np.ndarray, near: np.ndarray) -> None:
        """Adds frame ``index`` (the next one) with its near map, and forgets frames no longer within reach of any
        frame still to be rendered."""
        grey = _grey(frame)
        near = np.asarray(near, np.float32)
        if self._frames is None or self._frames.shape[1:] != frame.shape or self._nears.shape[1:] != near.shape:
            self._frames = np.empty((self.size, *frame.shape), frame.dtype)
            self._nears = np.empty((self.size, *near.shape), np.float32)
            self._flows = np.zeros((self.size, *grey.shape, 2), np.float32)
        slot = index % self.size
        self._frames[slot] = frame
        self._nears[slot] = near
        previous = index - 1
        if previous in self._greys:
            before = self._greys[previous]
            cut = picture_change(_thumb(before), _thumb(grey)) > CUT_CHANGE
            self._cuts[previous] = cut
            if not cut:
                self._flows[previous % self.size] = _flow(self._dis, before, grey, self._nears[previous % self.size])
        self._greys[index] = grey
        self._indices.append(index)
        while len(self._indices) > self.size:
            gone = self._indices.popleft()
            self._greys.pop(gone, None)
            self._cuts.pop(gone, None)

    def ready(self, index: int) -> bool:
        """Whether frame ``index``'s neighbours are all in."""
        return self._ended or (bool(self._indices) and self._indices[-1] >= index + self.reach)

    def close(self) -> None:
        """The video has ended: the last frames have no neighbours after them."""
        self._ended = True

    def neighbours(self, index: int) -> Neighbours:
        """The neighbours of frame ``index`` (which must be in the window)."""
        held = set(self._indices)
        chosen, pairs = [], {}
        for direction in (-1, 1):
            for step in range(1, self.reach + 1):
                other = index + direction * step
                pair = min(other, other - direction)  # the pair (pair, pair + 1) crossed to reach it
                if other not in held or self._cuts.get(pair, True):
                    break  # the window's edge, or a cut
                chosen.append(direction * step)
                pairs[direction * step] = pair % self.size
        chosen.sort(key=lambda k: (abs(k), k))
        return Neighbours(
            index=index,
            current_near=self._nears[index % self.size],
            frames=self._frames,
            nears=self._nears,
            slots=np.array([(index + k) % self.size for k in chosen], np.int64),
            steps=np.array(chosen, np.int64),
            flows=self._flows,
            pair_slots=np.array([pairs[k] for k in chosen], np.int64),
        )


def windowed(items, reach: int, first: int, end: int):
    """Frames with their neighbours: ``items`` yields ``(index, frame, near)`` in order, from up to ``reach`` frames
    before ``first`` to up to ``reach`` frames after ``end`` (fewer at the video's ends); yields ``(index, frame,
    near, neighbours)`` for every index in ``first .. end - 1``, as soon as its neighbours are in (None where
    ``reach`` is 0: nothing to fill from).

    Each frame is pushed into the window on a thread of its own while the caller renders the frames before it
    (the push's optical flow and copies are serial work that would leave the other render threads idle), from
    ``THREADED_PUSH_PIXELS`` up; the neighbours are taken between pushes, so the window is never read while it
    changes."""
    if reach <= 0:
        for index, frame, near in items:
            if first <= index < end:
                yield index, frame, near, None
        return
    window = FrameWindow(reach)
    pending: deque = deque()
    with ThreadPoolExecutor(1, thread_name_prefix="fill-window") as pusher:
        pushing = None
        for index, frame, near in items:
            if pushing is not None:
                pushing.result()  # the frame before is in: its neighbours may be read
            ready = []
            while pending and window.ready(pending[0][0]):
                done = pending.popleft()
                ready.append((*done, window.neighbours(done[0])))
            # Frame ``index`` goes into the slot of frame ``index - size``, which no frame in ``ready`` uses.
            if frame.shape[0] * frame.shape[1] >= THREADED_PUSH_PIXELS:
                pushing = pusher.submit(window.push, index, frame, near)
            else:
                pushing = None
                window.push(index, frame, near)
            if first <= index < end:
                pending.append((index, frame, near))
            yield from ready
        if pushing is not None:
            pushing.result()
    window.close()
    while pending:
        done = pending.popleft()
        yield (*done, window.neighbours(done[0]))


def _grey(frame: np.ndarray) -> np.ndarray:
    """The frame in grey (8 bits) at most ``MOTION_WIDTH`` wide, for the optical flow: halved while twice as wide
    (a bilinear resize to exactly half is the mean of each 2 x 2 block, and OpenCV's fastest reduction), then
    area-reduced; grey once the frame is small."""
    if frame.dtype != np.uint8:
        frame = (frame >> 8).astype(np.uint8)
    while frame.shape[1] >= 2 * MOTION_WIDTH:
        frame = cv2.resize(frame, (frame.shape[1] // 2, frame.shape[0] // 2), interpolation=cv2.INTER_LINEAR)
    grey = cv2.cvtColor(frame, cv2.COLOR_RGB2GRAY) if frame.ndim == 3 else frame
    if grey.shape[1] > MOTION_WIDTH:
        height = max(1, round(grey.shape[0] * MOTION_WIDTH / grey.shape[1]))
        grey = cv2.resize(grey, (MOTION_WIDTH, height), interpolation=cv2.INTER_AREA)
    return grey


def _thumb(grey: np.ndarray) -> np.ndarray:
    """A small grey picture (0..1) to tell a cut by (``stereo3d.stereo.cuts``' size)."""
    return cv2.resize(grey, THUMB_SIZE, interpolation=cv2.INTER_AREA).astype(np.float32) * np.float32(1 / 255)


def _flow(dis, previous: np.ndarray, current: np.ndarray, near: np.ndarray) -> np.ndarray:
    """The optical flow from one grey frame to the next (px of their size), all zero where the camera stood still:
    the median flow over the farther half of the first frame, by its near map, under ``STILL_PX`` of the frame."""
    if min(previous.shape) < DIS_LEAST_PX:
        return np.zeros((*previous.shape, 2), np.float32)
    small = cv2.resize(near, (previous.shape[1], previous.shape[0]), interpolation=cv2.INTER_LINEAR)
    far = small <= np.median(small)
    # The camera stood still where the farther half of the picture did not change (a few grey levels of noise).
    if _median_grey(cv2.absdiff(previous, current)[far]) < STILL_GREY:
        return np.zeros((*previous.shape, 2), np.float32)
    field = dis.calc(previous, current, None)
    if np.hypot(*(np.median(field[..., axis][far]) for axis in (0, 1))) < STILL_PX * previous.shape[1] / MOTION_WIDTH:
        field[...] = 0.0
    return field


def _median_grey(values: np.ndarray) -> float:
    """``np.median`` of 8-bit values, from their histogram (a few times faster than sorting them)."""
    counts = np.cumsum(np.bincount(values, minlength=256))
    total = int(counts[-1])
    if not total:
        return float("nan")
    low = int(np.searchsorted(counts, (total - 1) // 2, side="right"))
    high = int(np.searchsorted(counts, total // 2, side="right"))
    return (low + high) / 2


# --- the scalar code both devices compile (stereo3d.stereo.scalar) -----------------------------------------------
# Per pixel or per run: the CPU walks them a band of rows at a time (``_gather_runs``, ``_smooth_runs``), a GPU
# with a thread per hole pixel (stereo3d.stereo.cuda). Comparisons with the module's float constants are in
# float64, as numba makes them (NumPy, in the CUDA simulator, would make them in float32).


@njit(nogil=True, cache=True, inline="always")
def near_at(near, y, x, height, width):
    """The near map (any size) at frame position (y, x) of a frame ``height`` x ``width``: the sample whose area
    holds it."""
    row = min(max(int((np.float64(y) + 0.5) * near.shape[0] / height), 0), near.shape[0] - 1)
    col = min(max(int((np.float64(x) + 0.5) * near.shape[1] / width), 0), near.shape[1] - 1)
    return near[row, col]


@njit(nogil=True, cache=True, inline="always")
def flow_at(flow, y, x, height, width):
    """The flow field (any size) at frame position (y, x), bilinear, in frame pixels."""
    fh, fw = flow.shape[0], flow.shape[1]
    sy, sx = fh / height, fw / width
    fy = min(max(dmul(np.float64(y) + 0.5, sy) - 0.5, 0.0), fh - 1.0)
    fx = min(max(dmul(np.float64(x) + 0.5, sx) - 0.5, 0.0), fw - 1.0)
    y0, x0 = int(fy), int(fx)
    y1, x1 = min(y0 + 1, fh - 1), min(x0 + 1, fw - 1)
    wy, wx = fy - y0, fx - x0
    a = dmul(np.float64(flow[y0, x0, 0]), 1.0 - wx) + dmul(np.float64(flow[y0, x1, 0]), wx)
    b = dmul(np.float64(flow[y1, x0, 0]), 1.0 - wx) + dmul(np.float64(flow[y1, x1, 0]), wx)
    c = dmul(np.float64(flow[y0, x0, 1]), 1.0 - wx) + dmul(np.float64(flow[y0, x1, 1]), wx)
    d = dmul(np.float64(flow[y1, x0, 1]), 1.0 - wx) + dmul(np.float64(flow[y1, x1, 1]), wx)
    return (dmul(a, 1.0 - wy) + dmul(b, wy)) / sx, (dmul(c, 1.0 - wy) + dmul(d, wy)) / sy


@njit(nogil=True, cache=True, inline="always")
def background_side(start, end, mirrored, width):
    """A hole run's background-side neighbour (the pixel left of it in the left view, right of it in the right
    view), -1 where that is beyond the frame's edge."""
    side = end if mirrored else start - 1
    return side if 0 <= side < width else -1


@njit(nogil=True, cache=True, inline="always")
def run_moves(y, start, end, positions, mirrored, steps, flows, pair_slots, anchor_px, reaching, moves):
    """Where the background of the hole run ``start:end`` of row ``y`` goes in each neighbour (``moves[k]``: x, y
    px; zero where the run is at the frame's edge): its anchor (``anchor_px`` into the background beside the run)
    followed through the flows, one frame at a time, outward. ``reaching[0 or 1, step]``: the neighbour ``step``
    frames before or after (``neighbour_table``)."""
    height, width = positions.shape
    count = len(steps)
    for k in range(count):
        moves[k, 0] = moves[k, 1] = 0.0
    side = background_side(start, end, mirrored, width)
    if side < 0:
        return  # the frame's edge: nothing to follow
    # (Sums and differences, not products by +-1: a GPU would fuse those with the sum.)
    anchor_x = np.float64(positions[y, side]) + (anchor_px if mirrored else -anchor_px)  # towards the background
    for after in range(2):
        ax, ay = anchor_x, np.float64(y)
        for step in range(1, count + 1):
            reached = reaching[after, step]
            if reached < 0:
                break
            motion_x, motion_y = flow_at(flows[pair_slots[reached]], ay, ax, height, width)
            ax, ay = (ax + motion_x, ay + motion_y) if after else (ax - motion_x, ay - motion_y)
            moves[reached, 0] = ax - anchor_x
            moves[reached, 1] = ay - y


@njit(nogil=True, cache=True, inline="always")
def background_depth(near, positions, y, side, mirrored):
    """The depth of the background beside a hole run whose background-side neighbour is ``side`` (``BACKGROUND_PX``
    beyond it, away from the foreground's edge)."""
    away = 1 if mirrored else -1  # from a hole towards its background side
    height, width = positions.shape
    return near_at(near, y, np.float64(positions[y, side]) + away * BACKGROUND_PX, height, width)


@njit(nogil=True, cache=True, inline="always")
def fill_from_neighbours(view, holes, y, first, last, background, moves, positions, near, frames, nears, slots, top,
                         candidates):  # fmt: skip
    """Hole pixels ``first:last`` of row ``y``, all of one run whose background has depth ``background``
    (``background_depth``; the run must not touch the frame's edge on its background side): each pixel where two
    neighbouring ``frames`` (tried nearest in time first) show that background takes the mean of the first two, and
    its mark in ``holes`` becomes 2. (Asking the two to agree in colour, within 10 grey levels, cost 0.18 dB in the
    holes against ground truth: the flow's misplacement on a texture is larger.) Each looks where its hidden
    position goes as the run's background moves (``moves``, from ``run_moves``). ``top``: the largest pixel value;
    ``candidates``: float32 [2, channels] to work in."""
    height, width = holes.shape
    channels = view.shape[2]
    count = len(slots)
    for target in range(first, last):
        hidden = positions[y, target]
        occluder = near_at(near, y, hidden, height, width)
        if np.float64(occluder - background) < OCCLUDER_MARGIN:
            continue  # nothing clearly in front: not a disocclusion other frames can show
        found = 0
        for index in range(count):
            cx = np.float64(hidden) + moves[index, 0]
            cy = y + moves[index, 1]
            if cx < 0 or cx > width - 1 or cy < 0 or cy > height - 1:
                continue
            slot = slots[index]
            there = near_at(nears[slot], cy, cx, height, width)
            if (np.float64(abs(there - background)) >= BACKGROUND_TOLERANCE
                    or np.float64(there) > np.float64(occluder) - OCCLUDER_MARGIN):  # fmt: skip
                continue
            # Bilinear sample of the neighbour at (cx, cy) (each product as numba types it: float64, and float32 by
            # float32).
            x0, y0 = int(cx), int(cy)
            x1, y1 = min(x0 + 1, width - 1), min(y0 + 1, height - 1)
            fx, fy = np.float32(cx - x0), np.float32(cy - y0)
            for c in range(channels):
                a = dmul(np.float64(frames[slot, y0, x0, c]), 1.0 - np.float64(fx)) + np.float64(
                    fmul(np.float32(frames[slot, y0, x1, c]), fx)
                )
                b = dmul(np.float64(frames[slot, y1, x0, c]), 1.0 - np.float64(fx)) + np.float64(
                    fmul(np.float32(frames[slot, y1, x1, c]), fx)
                )
                candidates[found, c] = dmul(a, 1.0 - np.float64(fy)) + dmul(b, np.float64(fy))
            found += 1
            if found == 2:
                for c in range(channels):
                    value = fmul(candidates[0, c] + candidates[1, c], np.float32(0.5))
                    view[y, target, c] = min(max(int(math.floor(value + np.float32(0.5))), 0), top)
                holes[y, target] = 2
                break


@njit(nogil=True, cache=True, inline="always")
def background_repeat(y, start, end, positions, source, mirrored, frames, slots, moves, near, nears, values, places,
                      depths, out):  # fmt: skip
    """The repeat of the hole run ``start:end`` of row ``y`` (every channel, into ``out``): its background-side
    source pixel, the median of that pixel over this frame and, where ``frames`` around it are given, each of them
    where the run's background went (``moves``), among those whose depth there (``near``, ``nears``) is the
    background's: the farthest that at least half of them show (``farthest_shown``). A background pixel is steadier
    over time than in one frame: grain, or a subject passing, change it for a frame or two, not the median.
    ``values`` (float32), ``places`` (int64 [k, 3]) and ``depths`` (float32) are arrays to work in, one more than
    the neighbours."""
    height, width = positions.shape
    channels = source.shape[2]
    count = len(slots)
    # The background side: left in the left view, right in the right view; a run at the frame's edge on that side
    # shows what lies beyond the frame: the edge column.
    if not mirrored:
        column = 0 if start == 0 else int(math.ceil(positions[y, start - 1] - np.float32(0.5)))
    else:
        column = width - 1 if end == width else int(math.floor(positions[y, end] + np.float32(0.5)))
    column = min(max(column, 0), width - 1)
    # The background there is the farthest surface that at least half the frames show at it: a subject passing in
    # front of it for a few frames is not (its colour would come and go in the hole).
    own = near_at(near, y, column, height, width) if count else np.float32(0.0)
    reached = 0
    for k in range(count):
        row = int(math.floor(y + moves[k, 1] + 0.5))
        col = int(math.floor(column + moves[k, 0] + 0.5))
        if 0 <= row < height and 0 <= col < width:
            places[reached, 0], places[reached, 1], places[reached, 2] = slots[k], row, col
            depths[reached] = near_at(nears[slots[k]], row, col, height, width)
            reached += 1
    depths[reached] = own
    background = farthest_shown(depths, reached + 1)
    found = 0  # the neighbours that show the background there (the same for every channel)
    for k in range(reached):
        if np.float64(abs(depths[k] - background)) < BACKGROUND_TOLERANCE:
            places[found, 0], places[found, 1], places[found, 2] = places[k, 0], places[k, 1], places[k, 2]
            found += 1
    first = 1 if np.float64(abs(own - background)) < BACKGROUND_TOLERANCE else 0  # the frame itself shows it
    for c in range(channels):
        values[0] = source[y, column, c]
        for k in range(found):
            values[first + k] = frames[places[k, 0], places[k, 1], places[k, 2], c]
        out[c] = median(values, found + first)


@njit(nogil=True, cache=True, inline="always")
def farthest_shown(depths, count):
    """The farthest of ``depths[:count]`` (one place's near value in the frames around, this frame's last) that at
    least half of them show (within ``BACKGROUND_TOLERANCE``): the background there. A subject passing in front of it
    for a few frames is not (its colour would come and go in the holes beside it), nor a farther surface one frame
    shows by the flow's misplacement."""
    background = depths[count - 1]
    farthest = background
    for k in range(count - 1):
        farthest = min(farthest, depths[k])
    if farthest >= background:
        return background  # (most places: nothing farther shows there)
    for k in range(count - 1):
        if depths[k] >= background:
            continue
        seen = 0
        for j in range(count):
            if np.float64(abs(depths[j] - depths[k])) < BACKGROUND_TOLERANCE:
                seen += 1
        if seen >= max(1, count // 2):
            background = depths[k]
    return background


@njit(nogil=True, cache=True, inline="always")
def median(values, count):
    """The median of ``values[:count]`` (the lower of the middle two), sorting them in place (a few values)."""
    for i in range(1, count):
        key = values[i]
        j = i - 1
        while j >= 0 and values[j] > key:
            values[j + 1] = values[j]
            j -= 1
        values[j + 1] = key
    return values[(count - 1) // 2]


@njit(nogil=True, cache=True, inline="always")
def smooth_pixel(view, holes, repeated, y, x, radius):
    """Hole pixel (y, x) (marked 1) of ``view``: the mean (rounded) of the pixels of its column within ``radius``
    rows that were filled from other frames (2) where there are any (a pixel that found no two frames showing it,
    amid pixels that did, takes what they found rather than stand out as a speck), else of the ``repeated`` values
    of the hole pixels (1) there."""
    height = holes.shape[0]
    low, high = max(0, y - radius), min(height, y + radius + 1)
    found = repeats = 0
    for row in range(low, high):
        kind = holes[row, x]
        if kind == 2:
            found += 1
        elif kind == 1:
            repeats += 1
    wanted, count = (2, found) if found else (1, repeats)
    for c in range(view.shape[2]):
        total = np.int64(0)
        for row in range(low, high):
            if holes[row, x] == wanted:
                total += np.int64(view[row, x, c] if wanted == 2 else repeated[row, x, c])
        view[y, x, c] = rounded_mean(total, count)


@njit(nogil=True, cache=True, inline="always")
def rounded_mean(total, count):
    """``(total + count // 2) // count`` for a non-negative total and a small count, by a multiplication (an integer
    division per pixel and channel cost more than the rest of the smoothing): the quotient's fraction is 0 or at
    least 1 / count, so the 1e-9 that covers the float's rounding never reaches the next integer."""
    return np.int64(dmul(np.float64(total + count // 2), 1.0 / count) + 1e-9)


# The functions a GPU compiles (stereo3d.stereo.cuda, through stereo3d.stereo.scalar.for_cuda).
SHARED = {f.__name__: f for f in (near_at, flow_at, background_side, run_moves, background_depth, fill_from_neighbours,
                                  background_repeat, farthest_shown, median, smooth_pixel, rounded_mean)}  # fmt: skip


def neighbour_table(steps: np.ndarray) -> np.ndarray:
    """``[2, len(steps) + 1]``: the neighbour (its index in ``steps``) ``step`` frames before (row 0) or after (row
    1), -1 where there is none."""
    table = np.full((2, len(steps) + 1), -1, np.int64)
    for k, step in enumerate(steps):
        table[0 if step < 0 else 1, abs(int(step))] = k
    return table


# --- the CPU's bands -------------------------------------------------------------------------------------------


@njit(nogil=True, cache=True)
def _gather_runs(view, holes, runs, positions, mirrored, source, scratch, anchor_px, steps, flows, pair_slots,
                 reaching, near, frames, nears, slots):  # fmt: skip
    """``HoleFill.gather`` of ``runs``: each run's pixels filled from the neighbours where two show them
    (``fill_from_neighbours``), and its repeat (``background_repeat``) into ``scratch`` at the others."""
    width, channels = view.shape[1], view.shape[2]
    count = len(slots)
    top = np.iinfo(view.dtype).max
    moves = np.zeros((count, 2))
    candidates = np.empty((2, channels), np.float32)
    values = np.empty(count + 1, np.float32)
    places = np.empty((count + 1, 3), np.int64)
    depths = np.empty(count + 1, np.float32)
    repeat = np.empty(channels, np.float32)
    for run in range(runs.shape[0]):
        y, start, end = runs[run, 0], runs[run, 1], runs[run, 2]
        side = background_side(start, end, mirrored, width)
        if count:  # (zero where the run is at the frame's edge)
            run_moves(y, start, end, positions, mirrored, steps, flows, pair_slots, anchor_px, reaching, moves)
        if count and side >= 0:  # (a run at the frame's edge: what lies beyond it)
            background = background_depth(near, positions, y, side, mirrored)
            fill_from_neighbours(view, holes, y, start, end, background, moves, positions, near, frames, nears, slots,
                                 top, candidates)  # fmt: skip
        background_repeat(y, start, end, positions, source, mirrored, frames, slots, moves, near, nears, values, places,
                          depths, repeat)  # fmt: skip
        for target in range(start, end):
            if holes[y, target] == 1:  # (2: filled from another frame)
                for c in range(channels):
                    scratch[y, target, c] = repeat[c]


@njit(nogil=True, cache=True)
def _smooth_runs(view, holes, runs, repeated, radius):
    """``HoleFill.smooth`` of ``runs``: each of their pixels marked 1 (``smooth_pixel``)."""
    for run in range(runs.shape[0]):
        y = runs[run, 0]
        for x in range(runs[run, 1], runs[run, 2]):
            if holes[y, x] == 1:
                smooth_pixel(view, holes, repeated, y, x, radius)


@njit(nogil=True, cache=True)
def _scan_runs(holes, words, runs):
    """The runs of nonzero pixels into ``runs``, skipping eight zero pixels at a time (``words``: the row's first
    ``8 * n`` pixels as uint64); their count, or -1 if ``runs`` is too short."""
    height, width = holes.shape
    count = 0
    for y in range(height):
        x = 0
        while x < width:
            if x % 8 == 0 and x // 8 < words.shape[1] and words[y, x // 8] == 0:
                x += 8
                continue
            if holes[y, x] == 0:
                x += 1
                continue
            start = x
            while x < width and holes[y, x] != 0:
                x += 1
            if count == runs.shape[0]:
                return -1
            runs[count, 0], runs[count, 1], runs[count, 2] = y, start, x
            count += 1
    return count
