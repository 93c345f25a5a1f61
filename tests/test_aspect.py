"""DA3 at the video's own shape: a 16:9 and a 9:16 clip each run through their aspect tier's export, the depth
covers the whole frame (no bars), and switching between the aspect fit and the square moves only the depth on."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from harness import exported_workdir, snakemake, write_config

from stereo3d.demo.samples import make_clip
from stereo3d.io.mapstore import MapReader
from stereo3d.io.probe import probe_video

CLIPS = {"wide.mp4": (160, 90), "tall.mp4": (90, 160)}
TIERS = {"wide": "da3_small_140x84_u8_letterbox", "tall": "da3_small_84x140_u8_letterbox"}


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    workdir = exported_workdir(tmp_path_factory, "aspect")
    for name, (width, height) in CLIPS.items():
        make_clip(workdir / "videos" / name, width=width, height=height, frames=6, fps="6", pattern="boxes")
    write_config(workdir, report={"qc": False})
    snakemake(workdir)
    return workdir


def scheduled(workdir: Path) -> dict[str, int]:
    text = snakemake(workdir, "-n").stdout
    counts = {rule: int(n) for rule, n in re.findall(r"^(\w+)\s+(\d+)$", text, flags=re.MULTILINE)}
    return {rule: n for rule, n in counts.items() if rule not in ("total", "all")}


@pytest.mark.parametrize("video", sorted(TIERS))
def test_each_clip_runs_through_its_tier_and_its_depth_has_no_bars(library, video):
    (store,) = (library / "work" / video / "depth").glob("*/*.zarr")
    assert store.parent.name == TIERS[video]
    with MapReader(store) as depths:
        # 0.44 in the square export; at side 140 the 14-pixel grid leaves 6 % for 9:16 (1 % at 518), all cropped
        assert depths.attrs["bars"] < 0.07
        assert (depths.attrs["width"], depths.attrs["height"]) == ((140, 84) if video == "wide" else (84, 140))
        depth = depths.read()
    # The border rows and columns of the depth vary as any other: nothing of the frame was a constant bar.
    for border in (depth[:, 0], depth[:, -1], depth[:, :, 0], depth[:, :, -1]):
        assert np.ptp(border, axis=1).min() > 0
    (near_store,) = (library / "work" / video / "near").glob("*/*/*.zarr")
    with MapReader(near_store) as maps:
        assert maps.shape == depth.shape[1:] and maps.read().std(axis=(1, 2)).min() > 0
    out = probe_video(library / "results" / video / f"{video}_LRF_Full_SBS.mp4")
    assert (out["video"]["width"], out["video"]["height"]) == (2 * CLIPS[f"{video}.mp4"][0], CLIPS[f"{video}.mp4"][1])


def test_the_square_fit_and_back_move_only_depth_onward(library):
    write_config(library, report={"qc": False}, da3={"fit": "letterbox"})
    jobs = scheduled(library)
    assert jobs == {"depth": 2, "near_plan": 2, "near_maps": 2, "render": 2, "join": 2}  # the export is there
    write_config(library, report={"qc": False}, da3={"fit": "aspect", "aspect_tiers": ["16:9", "9:16", "1:1"]})
    assert scheduled(library) == {}  # the same tiers for these clips: nothing moves
    write_config(library, report={"qc": False})
    assert scheduled(library) == {}
