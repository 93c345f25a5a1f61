"""Subtitles burnt into both eyes, in depth: each cue in front of the nearest content under it over the time it is
shown, at one depth for the whole cue, never behind the screen. What is placed is a screen (every cue shown between
two changes, in one picture, as a player lays them out); the screens a cue stays on across share its depth.

A subtitle drawn once over a side-by-side frame lands in one eye only, or across both; drawn at the same place in
each eye it sits on the screen plane, inside any content in front of the screen (the eyes then disagree about which
is nearer, which is tiring to read). As 3D Blu-ray does with a depth offset per subtitle plane, each cue here gets a
parallax: the largest parallax of the content under the blocks it draws (``blocks_of``) in any frame of the cue
(the near maps, at each frame's screen plane), never less than the screen's (0), plus ``margin_pct`` of the
width; the left eye takes it shifted right by half of it, the right eye left (``warp``'s sign: positive = in front
of the screen). A cue's picture is drawn by ``stereo3d.io.subtitles``; its place and parallax are the plan
(``SubtitlePlan``), made once per video (``stereo3d.stages.subtitle_plan``) so that every segment of it draws a cue
the same.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from stereo3d.io.atomic import atomic_output


@dataclass(frozen=True)
class PlacedCue:
    """A cue's picture (RGBA uint8, the box it draws in) at (``x``, ``y``) of the eye, shown on frames ``first`` ..
    ``end - 1``, with ``parallax`` px between the eyes (positive: in front of the screen)."""

    first: int
    end: int
    x: int
    y: int
    picture: np.ndarray
    parallax: float

    def shifts(self) -> tuple[int, int]:
        """Whole-pixel shifts of the left and right eye's copy (their difference is the parallax, rounded)."""
        total = int(round(self.parallax))
        return (total + 1) // 2, -(total // 2)


class SubtitlePlan:
    """Every placed cue of a video, and the cues of each frame."""

    def __init__(self, cues: list[PlacedCue]):
        self.cues = sorted(cues, key=lambda cue: cue.first)
        self._next = 0  # the first cue not yet begun at the frame asked last
        self._shown: list[PlacedCue] = []  # the cues begun by then and not yet over
        self._last = -1

    def at(self, index: int) -> list[PlacedCue]:
        """The cues shown on video frame ``index``: in constant time a frame while the frames are asked in order,
        as a render walks them (a film has thousands of cues)."""
        if index < self._last:
            self._next, self._shown = 0, []
        self._last = index
        while self._next < len(self.cues) and self.cues[self._next].first <= index:
            self._shown.append(self.cues[self._next])
            self._next += 1
        self._shown = [cue for cue in self._shown if cue.end > index]
        return list(self._shown)

    def save(self, path: str | Path) -> None:
        pictures = [cue.picture.reshape(-1) for cue in self.cues]
        with atomic_output(Path(path)) as tmp, open(tmp, "wb") as stream:
            np.savez_compressed(
                stream,
                frames=np.array([(cue.first, cue.end) for cue in self.cues], np.int64).reshape(-1, 2),
                boxes=np.array([(cue.x, cue.y, *cue.picture.shape[:2]) for cue in self.cues], np.int64).reshape(-1, 4),
                parallax=np.array([cue.parallax for cue in self.cues], np.float64),
                pixels=np.concatenate(pictures) if pictures else np.zeros(0, np.uint8),
            )

    @classmethod
    def load(cls, path: str | Path) -> SubtitlePlan:
        with np.load(path) as data:
            frames, boxes, parallax, pixels = data["frames"], data["boxes"], data["parallax"], data["pixels"]
        cues, offset = [], 0
        for (first, end), (x, y, height, width), shift in zip(frames, boxes, parallax):
            size = int(height) * int(width) * 4
            picture = pixels[offset : offset + size].reshape(int(height), int(width), 4)
            offset += size
            cues.append(PlacedCue(int(first), int(end), int(x), int(y), picture, float(shift)))
        return cls(cues)


def burn(eyes: tuple[np.ndarray, np.ndarray], cues: list[PlacedCue]) -> None:
    """Draws ``cues`` into the left and right eye (RGB, uint8 or uint16, in place), each shifted by its half of the
    cue's parallax, over what the eye shows (alpha blending), clipped at the eye's edges."""
    for cue in cues:
        for eye, shift in zip(eyes, cue.shifts()):
            draw(eye, cue.picture, cue.x + shift, cue.y)


def draw(eye: np.ndarray, picture: np.ndarray, x: int, y: int) -> None:
    """``picture`` (RGBA uint8) over ``eye`` (RGB) with its top-left corner at (x, y), clipped to the eye."""
    height, width = eye.shape[:2]
    top, left = max(y, 0), max(x, 0)
    bottom, right = min(y + picture.shape[0], height), min(x + picture.shape[1], width)
    if bottom <= top or right <= left:
        return
    part = picture[top - y : bottom - y, left - x : right - x]
    alpha = part[..., 3:4].astype(np.uint32)
    scale = 257 if eye.dtype == np.uint16 else 1  # an 8-bit picture over a 16-bit eye
    colour = part[..., :3].astype(np.uint32) * scale
    under = eye[top:bottom, left:right].astype(np.uint32)
    eye[top:bottom, left:right] = (colour * alpha + under * (255 - alpha) + 127) // 255


def box_of(picture: np.ndarray) -> tuple[int, int, int, int] | None:
    """(x, y, width, height) of what a cue's picture draws (alpha above 0), None where it draws nothing."""
    rows = np.flatnonzero(picture[..., 3].any(axis=1))
    if not len(rows):
        return None
    columns = np.flatnonzero(picture[..., 3].any(axis=0))
    return int(columns[0]), int(rows[0]), int(columns[-1] - columns[0] + 1), int(rows[-1] - rows[0] + 1)


def blocks_of(picture: np.ndarray) -> list[tuple[int, int, int, int]]:
    """The blocks a picture draws, each (x, y, width, height): its bands of rows apart (lines with a clear row
    between them), and in each band its pieces apart where a gap of clear columns is wider than the band is high
    (wider than any space between words: two speakers' lines side by side). The depth of a screen is that of the
    content under its blocks, not under the box around them all."""
    drawn = picture[..., 3] > 0
    blocks = []
    for top, bottom in _runs(drawn.any(axis=1), 1):
        for left, right in _runs(drawn[top:bottom].any(axis=0), bottom - top + 1):
            blocks.append((left, top, right - left, bottom - top))
    return blocks


# A subtitle's white in an HDR picture: graphics white of ITU-R BT.2408 (203 cd/m² in PQ; 75 % of the HLG signal,
# which the HLG OETF gives at this share of its peak scene light). Drawn at full code value, white text in a PQ
# film would be the format's 10,000 cd/m².
GRAPHICS_WHITE_NITS = 203.0
HLG_GRAPHICS_WHITE = 0.26496
# Linear BT.709 RGB to BT.2020 (ITU-R BT.2087): the cue's sRGB colours in a wide-gamut picture's primaries.
BT709_TO_BT2020 = np.array([[0.6274, 0.3293, 0.0433], [0.0691, 0.9195, 0.0114], [0.0164, 0.0880, 0.8956]])


def for_transfer(picture: np.ndarray, transfer: str | None, primaries: str | None) -> np.ndarray:
    """A cue's picture (RGBA uint8, sRGB as libass and bitmap tracks draw it) in the code values of a video of
    ``transfer`` and ``primaries`` (the probe's names): PQ (``smpte2084``) and HLG (``arib-std-b67``) pictures
    get its colours at graphics white's level in their primaries; any other is returned as it is."""
    if transfer not in ("smpte2084", "arib-std-b67"):
        return picture
    rgb = picture[..., :3].astype(np.float64) / 255.0
    linear = np.where(rgb <= 0.04045, rgb / 12.92, ((rgb + 0.055) / 1.055) ** 2.4)
    if primaries == "bt2020":
        linear = np.clip(linear @ BT709_TO_BT2020.T, 0.0, 1.0)
    if transfer == "smpte2084":
        light = (linear * (GRAPHICS_WHITE_NITS / 10000.0)) ** (2610 / 16384)
        code = ((3424 / 4096 + 2413 / 128 * light) / (1 + 2392 / 128 * light)) ** (2523 / 32)
    else:
        scene = linear * HLG_GRAPHICS_WHITE
        a, b, c = 0.17883277, 0.28466892, 0.55991073
        code = np.where(scene <= 1 / 12, np.sqrt(3 * scene), a * np.log(np.maximum(12 * scene - b, 1e-12)) + c)
    out = picture.copy()
    out[..., :3] = np.clip(np.rint(code * 255.0), 0, 255).astype(np.uint8)
    return out


def into_picture(canvas: np.ndarray, area) -> np.ndarray:
    """A subtitle canvas drawn for the whole frame (RGBA), as the eye of ``render.bars: crop`` shows it: the picture
    ``area`` (``stereo3d.stereo.bars.Area``) alone, every block (``blocks_of``) at its own shape and place, those
    reaching into a bar moved into the picture, each bar's as one with the blocks stacked against them (the lines of
    one cue keep their spacing), cut where the picture is smaller. Scaled onto the picture instead, a cue authored for
    the frame (a Blu-ray's, in the bottom bar of a scope film) came out squashed."""
    out = np.zeros((area.height, area.width, 4), np.uint8)
    blocks = blocks_of(canvas)
    moves = {block: [0, 0] for block in blocks}
    for axis, (start, size) in enumerate(((area.x, area.width), (area.y, area.height))):
        for block, move in _into_span(blocks, axis, start, start + size).items():
            moves[block][axis] = move
    for (x, y, width, height), (dx, dy) in moves.items():
        left, top = x + dx - area.x, y + dy - area.y  # the block's place in the picture
        x0, y0 = max(left, 0), max(top, 0)
        x1, y1 = min(left + width, area.width), min(top + height, area.height)
        if x1 <= x0 or y1 <= y0:
            continue
        part = canvas[y0 - top + y : y1 - top + y, x0 - left + x : x1 - left + x]
        drawn = part[..., 3] > 0
        out[y0:y1, x0:x1][drawn] = part[drawn]
    return out


def _into_span(blocks: list, axis: int, start: int, end: int) -> dict:
    """The moves along ``axis`` (0: x, 1: y) that bring the blocks reaching past ``start`` or ``end`` inside, with
    the blocks stacked against them (within the tallest one's size) moved alike."""
    moves: dict = {}
    for far in (False, True):
        group = {b for b in blocks if (b[axis] + b[axis + 2] > end if far else b[axis] < start)}
        while group:
            reach = max(b[axis + 2] for b in group)
            if far:
                edge = min(b[axis] for b in group)
                stacked = {b for b in blocks if b[axis] + b[axis + 2] >= edge - reach}
            else:
                edge = max(b[axis] + b[axis + 2] for b in group)
                stacked = {b for b in blocks if b[axis] <= edge + reach}
            if stacked <= group:
                break
            group |= stacked
        if group:
            move = end - max(b[axis] + b[axis + 2] for b in group) if far else start - min(b[axis] for b in group)
            moves.update({b: move for b in group if b not in moves})
    return moves


def _runs(marked: np.ndarray, gap: int) -> list[tuple[int, int]]:
    """The runs (start, end) of True in ``marked``, those less than ``gap`` apart joined."""
    places = np.flatnonzero(marked)
    if not len(places):
        return []
    cuts = np.flatnonzero(np.diff(places) > gap) + 1
    return [(int(part[0]), int(part[-1]) + 1) for part in np.split(places, cuts)]
