"""``snakemake prune``: drop the intermediates of settings no longer configured.

Every setting that changes a stage's bytes is in the cache key of that stage's folder (``work/<video>/depth/<dkey>``,
``near/<dkey>/<nkey>``, ``render/<dkey>/<nkey>/<rkey>``), so trying settings leaves one folder per setting ever
tried. Pruning keeps, for each video of the library, what the current configuration reads: the folders of its
current keys and in them the stores of its current segments; everything else under the stage folders goes,
including what killed jobs left (partial stores and pieces). The probe, the source's link and fingerprint, failure
records and the report are kept. Folders of videos no longer in the library are left alone and listed: a library
folder that is not mounted today looks the same as one whose films were deleted.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from stereo3d.workflow.paths import Paths, fill, frame_ranges, segment_name

log = logging.getLogger(__name__)

STAGE_FOLDERS = ("depth", "near", "render")


@dataclass
class Pruned:
    removed: list[Path] = field(default_factory=list)
    freed_bytes: int = 0
    unprobed: list[str] = field(default_factory=list)  # videos whose probe is missing: little or nothing pruned
    strangers: list[Path] = field(default_factory=list)  # work folders of videos not in the library


def current_paths(paths: Paths, video: str, keys: dict[str, str], segments: list[str] | None,
                  plan: bool) -> set[Path]:  # fmt: skip
    """What the current configuration reads for ``video``: its stores per segment (and what a killed job of
    them left to resume from), or, while its segments are unknown, its key folders whole."""
    k = dict(video=video, **keys)
    templates = (paths.depth, paths.near_maps, paths.render)
    if segments is None:
        return {Path(fill(template, seg="any", **k)).parent for template in templates}
    kept = set()
    for seg in segments:
        for template in templates:
            store = Path(fill(template, seg=seg, **k))
            # its partial store (a killed job's, or the first frames the preview computed) and their lock
            kept |= {store, store.with_name(f".{store.name}.partial"), store.with_name(f".{store.name}.lock")}
    if plan:
        kept.add(Path(fill(paths.near_plan, **k)))
    return kept


def prune(paths: Paths, videos: dict[str, dict], segment_frames: int) -> Pruned:
    """Remove what the current configuration does not read from the stage folders of ``videos`` (id → its
    ``dkey``, ``nkey``, ``rkey`` and ``plan``: whether its stabiliser has a plan file; None when its keys are not
    known yet: its folders are left alone)."""
    pruned = Pruned()
    work = Path(paths.work)
    for video, wanted in sorted(videos.items()):
        if wanted is None:  # its keys are not known before its probe: nothing of it is pruned
            pruned.unprobed.append(video)
            continue
        keys = {name: wanted[name] for name in ("dkey", "nkey", "rkey")}
        segments = _segments(Path(fill(paths.probe, video=video)), segment_frames)
        if segments is None:
            pruned.unprobed.append(video)
        keep = current_paths(paths, video, keys, segments, wanted["plan"])
        for stage in STAGE_FOLDERS:
            _prune_below(work / video / stage, keep, pruned)
    if work.is_dir():
        for folder in sorted(work.iterdir()):
            if folder.is_dir() and folder.name not in videos and (folder / "probe.json").exists():
                pruned.strangers.append(folder)
    return pruned


def _segments(probe: Path, segment_frames: int) -> list[str] | None:
    try:
        summary = json.loads(probe.read_text(encoding="utf-8"))
        frames = int(summary["video"]["frame_count"])
    except (OSError, ValueError, KeyError, TypeError):  # not probed yet, or a failed probe
        return None
    return [segment_name(start, count) for start, count in frame_ranges(frames, segment_frames)]


def _prune_below(folder: Path, keep: set[Path], pruned: Pruned) -> None:
    if not folder.is_dir():
        return
    for child in sorted(folder.iterdir()):
        if child in keep:
            continue
        if child.is_dir() and not child.is_symlink() and any(child in k.parents for k in keep):
            _prune_below(child, keep, pruned)  # a folder on the way to something kept
            continue
        pruned.freed_bytes += _size(child)
        pruned.removed.append(child)
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()


def _size(path: Path) -> int:
    if path.is_file() or path.is_symlink():
        return path.lstat().st_size
    return sum(os.path.getsize(os.path.join(root, name)) for root, _, names in os.walk(path) for name in names)


def summary_lines(pruned: Pruned) -> list[str]:
    """What a person reads at the end of ``snakemake prune``."""
    lines = [f"pruned {len(pruned.removed)} intermediates of settings no longer configured, "
             f"{pruned.freed_bytes / 1e9:.3f} GB freed"]  # fmt: skip
    lines += [f"  removed {path}" for path in pruned.removed]
    if pruned.unprobed:
        lines.append(f"not probed yet (only what is surely unused was pruned): {', '.join(pruned.unprobed)}")
    if pruned.strangers:
        lines.append(f"left alone: {len(pruned.strangers)} work folders of videos not in the library "
                     "(delete them by hand if those videos are gone for good):")  # fmt: skip
        lines += [f"  {path}" for path in pruned.strangers]
    return lines
