"""Subtitles placed in depth over a video's near maps: the subtitle plan (``subtitles.burn``: every cue of the chosen
track drawn once at the eye's size, where it is shown, and at what parallax, ``stereo3d.stereo.subtitles``; one plan
per video, so that a cue keeps one depth across the segments that render it), and the sidecar files
(``subtitles.sidecar``: each text track as ASS placed in both eyes at the same depths, ``stereo3d.stereo.sidecar``)."""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from stereo3d.errors import BadVideo
from stereo3d.io.atomic import atomic_output
from stereo3d.io.ffmpeg import ffmpeg_url, run_ffmpeg
from stereo3d.io.subtitles import BITMAP, TEXT, burnable, cue_pictures
from stereo3d.stages.render import RenderSettings, near_frames, plane_at_frames
from stereo3d.stereo.bars import Area
from stereo3d.stereo.layouts import get_layout
from stereo3d.stereo.sidecar import stereo_ass
from stereo3d.stereo.subtitles import PlacedCue, SubtitlePlan, blocks_of, box_of, for_transfer, into_picture
from stereo3d.stereo.warp import Parallax

log = logging.getLogger(__name__)


def plan_subtitles(video: str | Path, probe: dict, near: Sequence[str | Path], out: str | Path,
                   settings: RenderSettings, convergence_plan: str | Path | None = None,
                   picture: Area | None = None) -> dict:  # fmt: skip
    """Write the plan of the track ``settings.subtitle_stream`` of ``video`` to ``out``; ``near``: the video's
    near-map stores in frame order; ``picture``: the area of the frame they cover (None: the whole frame)."""
    track = next((t for t in probe["subtitles"] if t["index"] == settings.subtitle_stream), None)
    if track is None:
        raise BadVideo(video, f"subtitle stream #{settings.subtitle_stream} to burn is not in the file")
    cues = placed_cues(video, probe, track, near, settings, settings.subtitle_margin_pct, convergence_plan, picture)
    SubtitlePlan(cues).save(out)
    log.info("%s: %d subtitle cues of stream #%d (%s) in depth, parallax %s px", Path(video).name, len(cues),
             track["index"], track["codec"], f"{min(c.parallax for c in cues):.1f} .. "
             f"{max(c.parallax for c in cues):.1f}" if cues else "-")  # fmt: skip
    return {"cues": len(cues), "stream": track["index"]}


def placed_cues(video: str | Path, probe: dict, track: dict, near: Sequence[str | Path], settings: RenderSettings,
                margin_pct: float, convergence_plan: str | Path | None = None,
                picture: Area | None = None) -> list[PlacedCue]:  # fmt: skip
    """Every screen of ``track`` (a probe's subtitle entry: ``stereo3d.io.subtitles.screens``) drawn at the eye's
    size and placed in depth, as the render of ``settings`` shows the video (its layout's eye, its bars, its
    parallax), ``margin_pct`` of the width in front of the content under what it draws (each block of text or
    bitmap apart: a line at the bottom and a sign at the top are not one box over the middle of the picture). The
    screens a cue stays on across share one depth, the largest of theirs: a line keeps its depth while another comes
    and goes. Each frame shows the screen shown at its time; a screen shown only between two frames (a flash shorter
    than a frame), the frame after it where no other screen is shown."""
    if not burnable(track):
        raise BadVideo(video, f"subtitle stream #{track['index']} ({track['codec']}) cannot be drawn into the views")
    info = probe["video"]
    display = (info["display_width"], info["display_height"])
    if picture is not None and picture.is_full(*display):
        picture = None
    cropped = picture is not None and settings.bars == "crop"
    eye = picture.size if cropped else display  # (width, height) of each eye's view
    area = picture or Area(0, 0, *display)  # what the near maps cover, in the eye's coordinates unless cropped
    origin = (0, 0) if cropped else (area.x, area.y)
    stereo = settings.stereo if picture is None or cropped else settings.stereo.inside(display[0], area.width)
    times = info["pts_offset_s"] + np.asarray(probe["frame_pts_s"], np.float64)
    frames = len(times)
    # A bitmap track cropped with the bars: drawn for the whole frame, then its blocks moved into the picture.
    moved = cropped and track["codec"] in BITMAP
    placed, groups = [], []
    with tempfile.TemporaryDirectory(prefix="stereo3d-subtitles-") as work:
        for cue, canvas in cue_pictures(video, track, display if moved else eye, eye if cropped else display, work):
            if moved:
                canvas = into_picture(canvas, area)
            box = box_of(canvas)
            if box is None:
                continue
            first = int(np.searchsorted(times, cue.start_s, "left"))
            end = int(np.searchsorted(times, cue.end_s, "left"))
            if first >= frames:
                continue
            x, y, width, height = box
            image = for_transfer(canvas[y : y + height, x : x + width], info["color_transfer"], info["color_primaries"])
            placed.append([first, end, x, y, image.copy(), blocks_of(canvas)])
            groups.append(cue.group)
    # A flash between two frames takes the frame after it, unless a screen or an earlier flash is shown there.
    shown = {index for first, end, *_ in placed for index in range(first, end)}
    for item in placed:
        if item[1] <= item[0] and item[0] not in shown:
            item[1] = item[0] + 1
            shown.add(item[0])
    kept = [number for number, item in enumerate(placed) if item[1] > item[0]]
    placed, groups = [placed[number] for number in kept], np.asarray([groups[number] for number in kept], np.int64)
    parallax = _content_parallax(placed, near, frames, stereo, area, origin,
                                 plane_at_frames(convergence_plan, stereo, near[0], float(info["fps"])))  # fmt: skip
    for group in np.unique(groups):
        parallax[groups == group] = parallax[groups == group].max()
    margin = margin_pct / 100.0 * eye[0]
    return [PlacedCue(first, end, x, y, image, max(float(shift), 0.0) + margin)
            for (first, end, x, y, image, _), shift in zip(placed, parallax)]  # fmt: skip


def _content_parallax(placed: list, near: Sequence[str | Path], frames: int, stereo, area: Area,
                      origin: tuple[int, int], plane_at) -> np.ndarray:  # fmt: skip
    """The largest parallax (px) of the content under each screen's blocks (boxes of the eye) over the frames it is
    shown on (-inf where they cover none of the picture)."""
    largest = np.full(len(placed), -np.inf)
    if not placed:
        return largest
    by_frame: dict[int, list[int]] = {}
    for number, (first, end, *_) in enumerate(placed):
        for index in range(first, end):
            by_frame.setdefault(index, []).append(number)
    last = max(by_frame)
    for index, near_map in enumerate(near_frames(near, 0, last + 1)):
        if index not in by_frame:
            continue
        parallax = Parallax.of(stereo if plane_at is None else stereo.at_plane(plane_at(index)), area.width)
        for number in by_frame[index]:
            for x, y, width, height in placed[number][5]:
                region = _under(near_map, x - origin[0], y - origin[1], width, height, area)
                if region is None:
                    continue
                columns, value = region
                depth = (float(value) - parallax.zero_plane) * parallax.divergence_px
                if parallax.ramp is not None:  # the border taper: its largest effect over the box's columns
                    ramp = parallax.ramp[columns]
                    depth = depth * (float(ramp.max()) if depth > 0 else float(ramp.min()))
                largest[number] = max(largest[number], depth - parallax.ipd_px)
    return largest


def _under(near_map: np.ndarray, x: int, y: int, width: int, height: int, area: Area):
    """The picture's columns under a box (x, y, width, height, in the picture's coordinates) and the nearest value
    of the near map there; None where the box lies outside the picture."""
    left, top = max(x, 0), max(y, 0)
    right, bottom = min(x + width, area.width), min(y + height, area.height)
    if right <= left or bottom <= top:
        return None
    rows, cols = near_map.shape
    r0, r1 = top * rows // area.height, max(-(-bottom * rows // area.height), top * rows // area.height + 1)
    c0, c1 = left * cols // area.width, max(-(-right * cols // area.width), left * cols // area.width + 1)
    values = near_map[r0:r1, c0:c1]
    finite = values[np.isfinite(values)]
    if not finite.size:
        return None
    return np.arange(left, right), finite.max()


def write_sidecar(video: str | Path, probe: dict, stream: int, near: Sequence[str | Path], out: str | Path,
                  settings: RenderSettings, margin_pct: float, convergence_plan: str | Path | None = None,
                  picture: Area | None = None) -> dict:  # fmt: skip
    """Write the text subtitle stream ``stream`` of ``video`` to ``out`` as an ASS file with every event in both eyes
    of ``settings``' layout (``stereo3d.stereo.sidecar``), at the depth its cues are placed at (``placed_cues``)."""
    track = next((t for t in probe["subtitles"] if t["index"] == stream), None)
    if track is None or track["codec"] not in TEXT:
        raise BadVideo(video, f"subtitle stream #{stream} is not a text track of the file")
    arrangement = get_layout(settings.layout).stereo_mode
    cues = placed_cues(video, probe, track, near, settings, margin_pct, convergence_plan, picture)
    info = probe["video"]
    times = info["pts_offset_s"] + np.asarray(probe["frame_pts_s"], np.float64)
    margin = margin_pct / 100.0 * info["display_width"]

    def parallax_at(start_s: float, end_s: float) -> float:
        # The script's times count from the file's start; the frames' from the source's own clock.
        first = int(np.searchsorted(times, start_s + probe["start_s"], "left"))
        end = max(int(np.searchsorted(times, end_s + probe["start_s"], "left")), first + 1)
        return max((cue.parallax for cue in cues if cue.first < end and cue.end > first), default=margin)

    with tempfile.TemporaryDirectory(prefix="stereo3d-sidecar-") as work:
        ass = Path(work) / "track.ass"
        run_ffmpeg(["-y", "-i", ffmpeg_url(video), "-map", f"0:{stream}", "-c:s", "ass", "-f", "ass", ffmpeg_url(ass)],
                   video, "converting the subtitle track to ASS")  # fmt: skip
        text = stereo_ass(ass.read_text(encoding="utf-8", errors="replace"), arrangement, info["display_width"],
                          parallax_at)  # fmt: skip
    with atomic_output(Path(out)) as tmp:
        tmp.write_text(text, encoding="utf-8")
    log.info("%s: subtitle stream #%d (%s) written for the %s layout, both eyes placed: %s", Path(video).name,
             stream, track["codec"], settings.layout, Path(out).name)  # fmt: skip
    return {"stream": stream, "cues": len(cues)}
