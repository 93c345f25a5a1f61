"""A text subtitle track as an ASS file placed in both eyes of a packed frame, for players that draw a sidecar file
over the frame they show (``subtitles.sidecar``).

A player draws a subtitle file once over the whole picture it decodes: over a side-by-side frame, across both eyes.
Here every event is written twice, once inside each eye's half of the script's canvas (twice the source's width
for side by side, twice its height for top and bottom), with its own styles, alignment and line breaks kept: its
margins move it into its half, and by half its cue's parallax (``stereo3d.stereo.subtitles``: the left eye's copy
to the right), so the player's own drawing lands at the same depth as a burnt cue. A half-width (or half-height)
packing needs nothing more: the player scales the script's canvas to the frame as it scales the picture.
"""

from __future__ import annotations

import re
from collections.abc import Callable

# The script's canvas when its header gives none (libass's, and ASS's own default).
DEFAULT_PLAY_RES = (384, 288)
ARRANGEMENTS = ("left_right", "top_bottom")  # the layouts' Matroska stereo modes that a sidecar can follow
EVENT_FIELDS = ("Layer", "Start", "End", "Style", "Name", "MarginL", "MarginR", "MarginV", "Effect", "Text")
_TIME = re.compile(r"(\d+):(\d{2}):(\d{2})[.](\d{2})")
_ALIGN = re.compile(r"\\an([1-9])")
_LEGACY_ALIGN = re.compile(r"\\a(\d{1,2})(?![0-9n])")
_POINTS = re.compile(r"\\(pos|move|org)\(([^)]*)\)")
# Legacy \a codes (SSA: 1-3 bottom, 5-7 top, 9-11 middle) as numpad alignments.
_LEGACY = {1: 1, 2: 2, 3: 3, 5: 7, 6: 8, 7: 9, 9: 4, 10: 5, 11: 6}


def stereo_ass(ass: str, arrangement: str, eye_width_px: int,
               parallax_at: Callable[[float, float], float]) -> str:  # fmt: skip
    """The ASS script ``ass`` (one track, as ffmpeg converts it) with every event in both eyes of a frame packed
    ``arrangement`` (left_right, top_bottom): ``parallax_at(start_s, end_s)`` gives each event's parallax (px of an
    eye ``eye_width_px`` wide, positive in front of the screen)."""
    if arrangement not in ARRANGEMENTS:
        raise ValueError(f"a sidecar follows {', '.join(ARRANGEMENTS)} packings, not {arrangement!r}")
    lines = ass.splitlines()
    width, height = _play_res(lines)
    side = arrangement == "left_right"
    styles = _styles(lines)
    out, section, fields = [], "", []
    for line in lines:
        stripped = line.strip()
        if stripped.startswith("["):
            section = stripped.lower()
        if section == "[script info]" and re.match(r"(?i)(PlayResX|PlayResY|LayoutResX|LayoutResY)\s*:", stripped):
            continue  # written anew below
        if section == "[events]" and stripped.lower().startswith("format:"):
            fields = [name.strip().lower() for name in stripped.split(":", 1)[1].split(",")]
            out.append("Format: " + ", ".join(EVENT_FIELDS))  # every event written with its margins
            continue
        if section == "[events]" and stripped.lower().startswith("dialogue:") and fields:
            values = [value for value in stripped.split(":", 1)[1].lstrip().split(",", len(fields) - 1)]
            event = {name.lower(): "" for name in EVENT_FIELDS} | {"layer": "0"} | dict(zip(fields, values))
            scale = width / eye_width_px  # script units per pixel of the eye
            half = parallax_at(_seconds(event["start"]), _seconds(event["end"])) * scale / 2
            for eye in (0, 1):
                placed = _placed(event, styles, eye, half if eye == 0 else -half, (width, height), side)
                out.append("Dialogue: " + ",".join(placed[name.lower()] for name in EVENT_FIELDS))
            continue
        out.append(line)
        if stripped.lower() == "[script info]":
            out += [f"PlayResX: {width * 2 if side else width}", f"PlayResY: {height if side else height * 2}"]
    return "\n".join(out) + "\n"


def _placed(event: dict, styles: dict, eye: int, shift: float, size: tuple[int, int], side: bool) -> dict:
    """``event`` moved into ``eye`` (0: left or top) of the doubled canvas and ``shift`` script units sideways."""
    width, height = size
    style = styles.get(event.get("style", "").strip().lstrip("*").lower(), styles.get("default", (2, 10, 10, 10)))
    alignment, left, right, vertical = style
    text = event.get("text", "")
    found = _ALIGN.search(text)
    legacy = _LEGACY_ALIGN.search(text)
    if found:
        alignment = int(found.group(1))
    elif legacy and int(legacy.group(1)) in _LEGACY:
        alignment = _LEGACY[int(legacy.group(1))]
    left = _margin(event.get("marginl"), left)
    right = _margin(event.get("marginr"), right)
    vertical = _margin(event.get("marginv"), vertical)
    dx = (eye * width if side else 0) + shift
    dy = 0 if side else eye * height
    if side:
        left, right = left + eye * width + shift, right + (1 - eye) * width - shift
    else:
        left, right = left + shift, right - shift
        if alignment in (1, 2, 3):  # bottom: above the bottom eye's edge, or the top eye's
            vertical += (1 - eye) * height
        elif alignment in (7, 8, 9):
            vertical += eye * height
        elif not _POINTS.search(text):  # middle: the eye's own middle, which no margin reaches
            x = {4: left, 5: (left + width - right) / 2, 6: width - right}[alignment]
            text = f"{{\\pos({x:.1f},{dy + height / 2:.1f})}}" + text
    text = _POINTS.sub(lambda match: _moved(match, dx, dy), text)
    return {**event, "marginl": _whole(left), "marginr": _whole(right), "marginv": _whole(vertical), "text": text}


def _moved(match: re.Match, dx: float, dy: float) -> str:
    """A \\pos, \\move or \\org tag with its points moved by (dx, dy) (\\move's times kept)."""
    values = [value.strip() for value in match.group(2).split(",")]
    points = 4 if match.group(1) == "move" else 2
    for index in range(min(points, len(values))):
        try:
            number = float(values[index]) + (dx if index % 2 == 0 else dy)
        except ValueError:
            return match.group(0)
        values[index] = f"{number:.1f}"
    return f"\\{match.group(1)}({','.join(values)})"


def _play_res(lines: list[str]) -> tuple[int, int]:
    found = {}
    for line in lines:
        match = re.match(r"(?i)\s*(PlayResX|PlayResY)\s*:\s*(\d+)", line)
        if match:
            found[match.group(1).lower()] = int(match.group(2))
    width, height = found.get("playresx"), found.get("playresy")
    if width is None and height is None:
        return DEFAULT_PLAY_RES
    if width is None:  # libass's rule for a canvas given by one side: 4:3 (1280 x 1024 for a height of 1024)
        width = 1280 if height == 1024 else height * 4 // 3
    if height is None:
        height = 1024 if width == 1280 else width * 3 // 4
    return width, height


def _styles(lines: list[str]) -> dict[str, tuple[int, float, float, float]]:
    """Style name (lower case) -> (alignment as numpad, left, right and vertical margin)."""
    styles, fields, section = {}, [], ""
    for line in lines:
        stripped = line.strip()
        if stripped.startswith("["):
            section = stripped.lower()
        if not section.startswith("[v4"):
            continue
        if stripped.lower().startswith("format:"):
            fields = [name.strip().lower() for name in stripped.split(":", 1)[1].split(",")]
        elif stripped.lower().startswith("style:") and fields:
            values = dict(zip(fields, (value.strip() for value in stripped.split(":", 1)[1].split(","))))
            alignment = int(values.get("alignment", 2) or 2)
            if section == "[v4 styles]":  # SSA's own alignment codes
                alignment = _LEGACY.get(alignment, 2)
            margins = [float(values.get(name, 10) or 0) for name in ("marginl", "marginr", "marginv")]
            styles[values.get("name", "").lower()] = (alignment, *margins)
    return styles


def _margin(value: str | None, default: float) -> float:
    """An event's margin: its own where it gives one (not 0), else its style's."""
    try:
        number = float(value) if value is not None else 0.0
    except ValueError:
        number = 0.0
    return number or default


def _whole(value: float) -> str:
    return str(max(0, int(round(value))))


def _seconds(stamp: str) -> float:
    match = _TIME.match(stamp.strip())
    if not match:
        return 0.0
    hours, minutes, seconds, hundredths = (int(part) for part in match.groups())
    return hours * 3600 + minutes * 60 + seconds + hundredths / 100
