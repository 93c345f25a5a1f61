"""The preview stages: a few short clips of a video at the current settings, and a grid of 3D strength x
convergence on one still, for the report, without converting the whole video.

Depth and the full run's cache. A clip placed at the start of a depth segment (``stereo3d.workflow.preview``) has
its depth computed *as the first frames of that segment's full-run depth job*: the same job identity (source,
model, segment range, fit, batch), written into that job's partial store (``.<segment>.zarr.partial``) and left
there unfinished after the clip's whole chunks. The full run's depth job finds it, as it would find what a killed
attempt of itself left, and continues after it: the preview's depth is computed once. If the full run's store is
already finished, the preview reads its frames from it. The preview copies the clip's frames into a small store of
its own either way, so the full run may later finish, move or prune its store without touching the preview's. A
clip that starts no segment (one whole-video segment, or a clip between segment starts) gets depth of its own.

Near maps are stabilised over the clip alone: the EMA's plan is made over the clip's frames (so its ranges start
afresh at the clip's first frame, where the full run's carry the frames before: the first second or so may differ
slightly), and NVDS is primed with the raw depth of the frames before the clip, as a segment of the full run is,
so its near maps are the full run's.
"""

from __future__ import annotations

import dataclasses
import logging
import tempfile
from pathlib import Path

from stereo3d.io.atomic import atomic_output
from stereo3d.io.ffmpeg import BITEXACT, ffmpeg_url, run_ffmpeg
from stereo3d.io.mapstore import CHUNK_FRAMES, MapReader, MapWriter, finished_by, partial_path, store_lock, write_maps
from stereo3d.qc.figures import settings_grid, write_png
from stereo3d.stabilisers import NearSettings
from stereo3d.stages.depth import DepthSettings, depth_identity, estimate_depth, estimate_first_frames
from stereo3d.stages.near_maps import make_near_maps
from stereo3d.stages.render import RenderSettings, render_video
from stereo3d.stereo.bars import Area
from stereo3d.stereo.warp import Renderer, StereoSettings

log = logging.getLogger(__name__)


def preview_depth(video: str | Path, probe: dict, model: str | Path, clip: tuple[int, int],
                  segment: tuple[int, int] | None, out: str | Path, lead_out: str | Path, lead: int,
                  full_depth: str | Path | None, **depth_options) -> dict:  # fmt: skip
    """Raw DA3 depth of the ``clip``'s frames (start, count) in the map store ``out``, and of the ``lead`` frames
    before it (the window of a stabiliser that reaches back; fewer at the video's start) in ``lead_out``.

    ``segment``: the full run's depth segment (start, count) whose first frames the clip is, or None; its store is
    ``full_depth``: read when finished, else its first frames (the clip's, in whole chunks) are computed into its
    partial store for the full run to continue. ``depth_options``: ``settings`` (the ``DepthSettings``),
    ``batch``, ``options`` of :func:`estimate_depth`."""
    name = Path(video).name
    start, count = clip
    if segment is None or full_depth is None:
        estimate_depth(video, probe, model, out, start=start, count=count, **depth_options)
        source = "its own"
    else:
        first, frames = segment
        settings = depth_options.get("settings", DepthSettings())
        identity = depth_identity(video, model, first, frames, settings.placement, depth_options["batch"],
                                  settings.picture)  # fmt: skip
        if not finished_by(full_depth, identity):
            shared = -(-count // CHUNK_FRAMES) * CHUNK_FRAMES  # a store is continued after its last whole chunk
            estimate_first_frames(video, probe, model, full_depth, shared, start=first, count=frames,
                                  **depth_options)  # fmt: skip
        source = _copy_first_frames(full_depth, start, count, out, identity)
    log.info("%s: preview depth of frames %d..%d: %s", name, start, start + count - 1, source)
    before = min(lead, start)
    if before:
        estimate_depth(video, probe, model, lead_out, start=start - before, count=before, **depth_options)
    else:
        write_maps(lead_out, [], "inverse", attrs={"start": start})
    return {"frames": count, "lead": before, "depth": source}


def _copy_first_frames(full_depth: str | Path, start: int, count: int, out: str | Path, identity: dict) -> str:
    """The clip's ``count`` frames (the first of the full run's segment store, finished or partial) into the store
    ``out`` (its frames counted from ``start``); says which it read. Under the store's lock: the full run's job may
    be continuing it right now."""
    with store_lock(full_depth):
        finished = finished_by(full_depth, identity)
        if not finished and not partial_path(full_depth).is_dir():
            raise FileNotFoundError(f"{full_depth}: neither finished nor partial after the preview's depth")
        with MapReader(full_depth, partial=not finished) as segment:
            maps = segment.read(0, count)
            changes = segment.series("changes")[:count]
            attrs = {**segment.attrs, "start": start, "source_depth": Path(full_depth).name,
                     "source_complete": finished}  # fmt: skip
            with MapWriter(out, "inverse", attrs=attrs, series=("changes",), masked=segment.masked) as store:
                store.append(maps, changes=changes)
    return f"the first frames of the full run's {'finished' if finished else 'partial'} {Path(full_depth).name}"


def preview_near_maps(video: str | Path, probe: dict, depth: str | Path, lead: str | Path, out: str | Path,
                      settings: NearSettings, models_dir: str | Path | None = None,
                      **near_options) -> dict:  # fmt: skip
    """Near maps of a clip, stabilised over the clip: a method with a plan plans over the clip's depth alone; a
    method that reaches back reads the raw depth before the clip from ``lead``."""
    stabiliser = settings.stabiliser
    with MapReader(lead) as before:
        previous = str(lead) if before.frames else None
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent, prefix=f".{out.name}.plan-") as work:
        plan = None
        if stabiliser.plan is not None:
            plan = Path(work) / "plan.npz"
            stabiliser.plan([Path(depth)], plan, settings)
        return make_near_maps(video, probe, depth, out, settings, plan=plan, previous_depth=previous,
                              models_dir=models_dir, **near_options)  # fmt: skip


def preview_clip(video: str | Path, probe: dict, near: str | Path, out: str | Path, settings: RenderSettings,
                 renderer: Renderer | None = None, picture: Area | None = None) -> dict:  # fmt: skip
    """The clip of ``near``'s frames rendered as ``settings`` say, as an MP4 a browser plays: H.264 in 8-bit 4:2:0
    at the configured quality and preset, whatever codec the full run encodes with."""
    browser = dataclasses.replace(settings.encode, codec="libx264", pix_fmt="yuv420p", deep_codec="same",
                                  stereo_signal="none")  # fmt: skip
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent, prefix=f".{out.name}.render-") as work:
        rendered = Path(work) / "clip.mkv"
        summary = render_video(video, probe, near, rendered, dataclasses.replace(settings, encode=browser),
                               renderer=renderer, picture=picture)  # fmt: skip
        with atomic_output(out) as tmp:
            # faststart: the index first, so the report's player starts before the whole file has loaded
            run_ffmpeg(["-i", ffmpeg_url(rendered), "-map", "0:v", "-c", "copy", "-movflags", "+faststart",
                        *BITEXACT, "-f", "mp4", "-y", ffmpeg_url(tmp)], video, "preview clip remux")  # fmt: skip
    return summary


def preview_grid(video: str | Path, probe: dict, near: str | Path, frame: int, out: str | Path,
                 stereo: StereoSettings, divergences: list[float], convergences: list[float | str],
                 tile_width: int, picture: Area | None = None) -> None:  # fmt: skip
    """A PNG of red-cyan anaglyphs of the still ``frame`` (one of ``near``'s frames), one tile per
    (``render.divergence_pct``, ``render.convergence``) pair; the rest of ``stereo`` as configured. ``picture``:
    the area inside baked-in bars that the near maps cover (None: the whole frame)."""
    with MapReader(near) as maps:
        start = int(maps.attrs.get("start", 0))
        still_near = maps.read(frame - start, 1)[0]
    image = settings_grid(video, probe, frame, still_near, stereo, divergences, convergences, tile_width, picture)
    write_png(out, image)
