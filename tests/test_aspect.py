"""DA3 at the video's own shape: a 16:9 and a 9:16 clip each run through their aspect tier's export, the depth
covers the whole frame (no bars), and switching between the aspect fit and the square moves only the depth on."""

from __future__ import annotations

import numpy as np
import pytest
from harness import exported_workdir, planned_jobs, snakemake, write_config

from stereo3d.demo.samples import make_clip
from stereo3d.io.mapstore import MapReader
from stereo3d.io.probe import probe_video

CLIPS = {"wide.mp4": (160, 90), "tall.mp4": (90, 160)}
TIERS = {"wide": "da3_small_140x84_u8_letterbox", "tall": "da3_small_84x140_u8_letterbox"}
# Coded 120x90 with pixels 4:3 wide (as a DVD's): shown 160x90, 16:9, and converted as such.
ANAMORPHIC = dict(width=120, height=90, frames=6, fps="6", pattern="boxes", extra=("-vf", "setsar=4/3"))


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    workdir = exported_workdir(tmp_path_factory, "aspect")
    for name, (width, height) in CLIPS.items():
        make_clip(workdir / "videos" / name, width=width, height=height, frames=6, fps="6", pattern="boxes")
    make_clip(workdir / "videos" / "dvd.mp4", **ANAMORPHIC)
    write_config(workdir, report={"qc": False})
    snakemake(workdir)
    return workdir


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


def test_an_anamorphic_source_runs_through_the_tier_of_its_display_shape(library):
    (store,) = (library / "work/dvd/depth").glob("*/*.zarr")
    assert store.parent.name == TIERS["wide"]  # 160x90 as shown, not 4:3 as coded
    out = probe_video(library / "results/dvd/dvd_LRF_Full_SBS.mp4")["video"]
    # Each eye at the display size in square pixels, side by side.
    assert (out["width"], out["height"], out["sar"], out["display_width"]) == (320, 90, "1:1", 320)
    assert out["frame_count"] == 6


def test_the_square_fit_and_back_move_only_depth_onward(library):
    write_config(library, report={"qc": False}, da3={"fit": "letterbox"})
    jobs = planned_jobs(library)
    assert jobs == {
        "depth": 3,
        "near_plan": 3,
        "near_maps": 3,
        "convergence_plan": 3,
        "render": 3,
        "join": 3,
    }  # the export is there
    write_config(library, report={"qc": False}, da3={"fit": "aspect", "aspect_tiers": ["16:9", "9:16", "1:1"]})
    assert planned_jobs(library) == {}  # the same tiers for these clips: nothing moves
    write_config(library, report={"qc": False})
    assert planned_jobs(library) == {}
