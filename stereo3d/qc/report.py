"""Quality control for ``snakemake --report``: what a person checks before spending hours on a library.

Per video (:func:`video_report`): a **contact sheet** (at a few timestamps, the source frame, the raw DA3 depth
normalised alone, the stabilised near map and a red-cyan anaglyph preview of the configured 3D), a **flicker
plot** (mean |Δnear| between consecutive frames, raw against stabilised: what stabilisation buys), a **parallax
plot** (per-frame percentiles of screen parallax in % of the width, the comfort limit, the share of frames
beyond it; the parallax of in-front content at the left/right frame edges, i.e. window violations, and the
floating window where one is drawn) and ``stats.json`` with the numbers, which ``tables.library_table``
gathers into one table.
Statistics: ``qc.stats``; figures: ``qc.figures``; library tables: ``qc.tables``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from stereo3d.io.atomic import atomic_output
from stereo3d.io.mapstore import MapReader
from stereo3d.qc.figures import contact_sheet, convergence_figure, flicker_figure, parallax_figure, write_png
from stereo3d.qc.stats import frame_times, map_statistics
from stereo3d.stabilisers import NearSettings
from stereo3d.stereo.convergence import shots_of
from stereo3d.stereo.warp import StereoSettings

log = logging.getLogger(__name__)


def video_report(
    source: str | Path,
    probe: dict,
    depth: Sequence[str | Path],
    near: Sequence[str | Path],
    stereo: StereoSettings,
    near_settings: NearSettings,
    comfort_limit_pct: float,
    out_contact_sheet: str | Path,
    out_flicker: str | Path,
    out_parallax: str | Path,
    out_stats: str | Path,
    rows: int = 4,
    tile_width: int = 320,
    out_convergence: str | Path | None = None,
    convergence_plan: str | Path | None = None,
) -> dict:
    """Every per-video figure and the stats, drawn with the renderer's ``stereo`` settings (and, under
    ``convergence: auto``, the video's ``convergence_plan``) and the near maps' ``near_settings`` (the raw depth's
    range where the figures put it beside the near maps); returns the stats."""
    settings = stereo
    near_pct = (near_settings.low_pct, near_settings.high_pct)
    name = Path(source).name
    times = frame_times(probe)
    sheet = contact_sheet(source, probe, depth, near, settings, near_pct, rows=rows, tile_width=tile_width)
    write_png(out_contact_sheet, sheet)
    video = probe["video"]
    plan = _plan(convergence_plan) if settings.convergence == "auto" and convergence_plan else None
    stats = map_statistics(depth, near, settings, near_pct, comfort_limit_pct, frame_width=video["display_width"],
                           fps=float(video["fps"]), planes=None if plan is None else plan["zero_plane"])  # fmt: skip
    raw, stable = stats.pop("flicker_raw"), stats.pop("flicker_stabilised")
    per_frame, window = stats.pop("parallax_per_frame"), stats.pop("window_per_frame")
    write_png(out_flicker, flicker_figure(times, raw, stable, name))
    write_png(out_parallax, parallax_figure(times, per_frame, comfort_limit_pct, stats, name, window))
    if out_convergence is not None:
        write_png(out_convergence, _convergence(times, depth, settings, plan, name))
    stats = {"video": name, "frames": len(times), "duration_s": _duration(probe, times), **stats}
    with atomic_output(out_stats) as tmp:
        tmp.write_text(json.dumps(stats, indent=2, sort_keys=True))
    log.info(
        "%s: flicker raw %.4f → stabilised %.4f; parallax p1..p99 %.2f..%.2f %% of width; %.1f %% of frames "
        "beyond ±%.1f %%; window violations on %.1f %% of frames (worst %.2f %% of width)",
        name,
        stats["flicker"]["raw_mean"],
        stats["flicker"]["stabilised_mean"],
        stats["parallax_pct"]["p1"],
        stats["parallax_pct"]["p99"],
        stats["comfort"]["beyond_pct"],
        comfort_limit_pct,
        stats["window"]["violation_pct"],
        stats["window"]["worst_pct"],
    )
    return stats


def _plan(path: str | Path) -> dict:
    with np.load(path) as data:
        return {key: np.asarray(data[key]) for key in data.files}


def _convergence(times: np.ndarray, depth: Sequence[str | Path], settings: StereoSettings, plan: dict | None,
                 name: str) -> np.ndarray:  # fmt: skip
    """The screen-plane figure: the plan's (``auto``), or the fixed plane with the video's cuts."""
    if plan is not None:
        return convergence_figure(times, plan["zero_plane"], plan["subject"], plan["front"], plan["shot"],
                                  settings.divergence_pct, settings.front_limit_pct, name, "auto")  # fmt: skip
    changes = []
    for path in depth:
        with MapReader(path) as reader:
            series = reader.series("changes")
            changes.append(np.full(reader.frames, np.nan) if series is None else np.asarray(series))
    shots = shots_of(np.concatenate(changes)) if changes else np.zeros(0, np.int64)
    planes = np.full(len(shots), settings.zero_plane() if settings.convergence != "auto" else np.nan)
    return convergence_figure(times, planes, None, None, shots, settings.divergence_pct, settings.front_limit_pct,
                              name, str(settings.convergence))  # fmt: skip


def _duration(probe: dict, times: np.ndarray) -> float:
    return float(probe["video"].get("duration_s") or (times[-1] if len(times) else 0.0))
