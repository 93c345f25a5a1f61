"""Baked-in bars: where a video's picture lies in its frame (a 2.39:1 film letterboxed in 16:9, 4:3 television
pillarboxed in 16:9), found from a sample of frames spread over the video.

A bar is black and flat. In each sampled frame a row (or column) *shows content* where most of its pixels are
above ``BLACK_LEVEL`` (its median is), or where most of them differ from their neighbour by more than
``FLAT_STEP`` (a dark but textured night scene). Most, not any: subtitles or a channel logo drawn into a bar cover
a minority of its row, so they leave it a bar. (Counts, not medians: a median per row of a 1080p frame costs a
second in numpy, these counts a few milliseconds.) A frame in which nothing shows content (a fade to black)
tells nothing and is skipped; a row of a dark picture may show nothing in many frames, so a row is picture when
it shows content in ``MIN_VOTES`` of the sampled frames, however few: the picture area is the band from the first
such row to the last, and likewise for columns.

Where the area changes during the video (an IMAX film opening up from 2.39:1 to 1.9:1 in some scenes), the area
is the **union** of the picture over the whole video, the largest area that ever holds picture. The depth of a
video is stored at one shape for the whole video, and a per-shot area would change the depth model's input from
shot to shot and would cut picture away wherever one decision went wrong; the union costs a scene in the
narrower shape its bars inside the picture area, rendered as flat black content.

Sides are snapped outward to even numbers (4:2:0 chroma), and a bar thinner than ``MIN_BAR_PX`` or
``MIN_BAR_SHARE`` of its side is no bar (an encoder's edge, a scanner's border row): the picture then runs to
that edge. Pure numpy; the frames come from ``stereo3d.io.decode.sample_frames``.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

log = logging.getLogger(__name__)

# 8-bit levels of the brightest RGB channel. Video black (16 in limited range) decodes to 0 and compression noise
# moves it by a few levels; a picture row, even in a dark scene, rarely has its median this low and flat.
BLACK_LEVEL = 24
FLAT_STEP = 4  # a step between neighbouring pixels larger than this is texture, not a flat bar's noise
MIN_VOTES = 2  # frames in which a row must show content to be picture (1 where fewer frames tell anything)
MIN_BAR_PX = 4
MIN_BAR_SHARE = 0.01
# A "picture" narrower or lower than this share of the frame is no letterbox but a mostly black video (a title
# card, a small logo on black): the whole frame is kept.
MIN_PICTURE_SHARE = 1 / 3
SAMPLE_FRAMES = 32  # frames the probe samples, spread over the video


@dataclass(frozen=True)
class Area:
    """A rectangle of the frame, in display pixels (square pixels, after rotation): the picture."""

    x: int
    y: int
    width: int
    height: int

    @classmethod
    def full(cls, width: int, height: int) -> Area:
        return cls(0, 0, width, height)

    @classmethod
    def of(cls, values) -> Area | None:
        """An area from ``[x, y, width, height]`` (as stored in the probe), None from None."""
        return None if values is None else cls(*(int(v) for v in values))

    def as_list(self) -> list[int]:
        return [self.x, self.y, self.width, self.height]

    def is_full(self, width: int, height: int) -> bool:
        return (self.x, self.y, self.width, self.height) == (0, 0, width, height)

    @property
    def size(self) -> tuple[int, int]:
        return self.width, self.height

    def cut(self, frame: np.ndarray) -> np.ndarray:
        """The area of a frame ``[H, W, ...]`` (a view, not a copy)."""
        return frame[self.y : self.y + self.height, self.x : self.x + self.width]

    def __str__(self) -> str:
        return f"{self.width}x{self.height}+{self.x}+{self.y}"


def picture_area(frames: Iterable[np.ndarray], width: int, height: int) -> Area:
    """The picture area of a video from a sample of its frames (RGB or grey, ``[height, width(, C)]``, uint8 or
    uint16): the union of what shows content in them, the whole frame where nothing does."""
    row_votes = np.zeros(height, np.int32)
    column_votes = np.zeros(width, np.int32)
    telling = 0
    for frame in frames:
        found = _frame_content(_levels(frame))
        if found is None:
            continue  # black: a fade, a black title card
        rows, columns = found
        row_votes += rows
        column_votes += columns
        telling += 1
    if not telling:
        return Area.full(width, height)
    votes = min(MIN_VOTES, telling)
    rows = _span(row_votes >= votes, height)
    columns = _span(column_votes >= votes, width)
    if rows is None or columns is None:
        return Area.full(width, height)
    (top, bottom), (left, right) = rows, columns
    if bottom - top < MIN_PICTURE_SHARE * height or right - left < MIN_PICTURE_SHARE * width:
        log.warning("the content found (%dx%d+%d+%d of %dx%d) is too small for a picture in bars: the whole frame "
                    "is kept", right - left, bottom - top, left, top, width, height)  # fmt: skip
        return Area.full(width, height)
    return Area(left, top, right - left, bottom - top)


def describe(area: Area, width: int, height: int) -> str:
    """One line for the probe's log: ``picture 1920x800+0+140 of 1920x1080: letterbox``."""
    if area.is_full(width, height):
        return f"picture fills the {width}x{height} frame: no bars"
    kinds = []
    if area.height < height:
        kinds.append("letterbox")
    if area.width < width:
        kinds.append("pillarbox")
    return f"picture {area} of {width}x{height}: {' and '.join(kinds)}"


# --- helpers -------------------------------------------------------------------------------------------------


def _levels(frame: np.ndarray) -> np.ndarray:
    """The brightest channel of each pixel, as 8-bit levels."""
    frame = np.asarray(frame)
    # Channel by channel: numpy's reduction over a last axis of 3 is ~20x slower.
    levels = np.maximum(np.maximum(frame[..., 0], frame[..., 1]), frame[..., 2]) if frame.ndim == 3 else frame
    if levels.dtype == np.uint16:
        levels = (levels >> 8).astype(np.uint8)
    return levels


def _frame_content(levels: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """Which rows and columns of one frame show content (bool arrays), or None for a frame that shows none.

    Rows are judged over the columns that hold content and columns over the rows that do, refined once from the
    whole frame: a pillarboxed frame's bars would otherwise pull each row's count down by their share."""
    height, width = levels.shape
    content = _Content(levels)
    rows = content.rows(slice(0, width))
    if not rows.any():
        return None
    columns = content.columns(_band(rows, height))
    if columns.any():
        rows = content.rows(_band(columns, width))
        if rows.any():
            columns = content.columns(_band(rows, height))
    return rows, columns


class _Content:
    """Per row or column of a part of the frame: whether most of its pixels are above black, or most of its steps
    between neighbours (along it) are texture. The masks are made once per frame; each question only counts."""

    def __init__(self, levels: np.ndarray):
        self.bright = levels > BLACK_LEVEL
        signed = levels.astype(np.int16)
        self.across = np.abs(np.diff(signed, axis=1)) > FLAT_STEP  # steps along each row
        self.down = np.abs(np.diff(signed, axis=0)) > FLAT_STEP  # steps along each column

    def rows(self, columns: slice) -> np.ndarray:
        length = columns.stop - columns.start
        bright = np.count_nonzero(self.bright[:, columns], axis=1)
        steps = np.count_nonzero(self.across[:, columns.start : columns.stop - 1], axis=1)
        return (2 * bright > length) | (2 * steps > length - 1)

    def columns(self, rows: slice) -> np.ndarray:
        length = rows.stop - rows.start
        bright = np.count_nonzero(self.bright[rows], axis=0)
        steps = np.count_nonzero(self.down[rows.start : rows.stop - 1], axis=0)
        return (2 * bright > length) | (2 * steps > length - 1)


def _band(mask: np.ndarray, size: int) -> slice:
    found = np.flatnonzero(mask)
    return slice(int(found[0]), int(found[-1]) + 1) if found.size else slice(0, size)


def _span(mask: np.ndarray, size: int) -> tuple[int, int] | None:
    """(first, end) of the picture along one side: from the first to the last row that is picture, widened to
    even numbers, with bars too thin to count given back to the picture."""
    found = np.flatnonzero(mask)
    if not found.size:
        return None
    first, end = int(found[0]), int(found[-1]) + 1
    first -= first % 2
    end = min(size, end + end % 2)
    least = max(MIN_BAR_PX, math.ceil(MIN_BAR_SHARE * size))
    if first < least:
        first = 0
    if size - end < least:
        end = size
    return first, end


def paste_bars(eye: np.ndarray, frame: np.ndarray, picture: Area) -> None:
    """Copy the frame's bars (all of it outside ``picture``) into an eye view of the frame's size, as they are:
    the bars stay on the screen plane, the same in both eyes."""
    top, bottom = picture.y, picture.y + picture.height
    left, right = picture.x, picture.x + picture.width
    eye[:top] = frame[:top]
    eye[bottom:] = frame[bottom:]
    eye[top:bottom, :left] = frame[top:bottom, :left]
    eye[top:bottom, right:] = frame[top:bottom, right:]
