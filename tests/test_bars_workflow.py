"""Baked-in bars through the whole workflow: a 4:3 picture pillarboxed in a 16:9 frame runs its depth through the
4:3 tier on the picture alone, keeps the source's bars in both eyes (lossless output: exactly) with straight
picture edges, or crops them away; switching the bars setting or the area reruns exactly what it changes."""

from __future__ import annotations

import re

import numpy as np
import pytest
from harness import exported_workdir, planned_jobs, snakemake, write_config

from stereo3d.demo.samples import make_clip
from stereo3d.io.decode import FrameReader
from stereo3d.io.mapstore import MapReader
from stereo3d.io.probe import probe_video

W, H, FRAMES = 160, 90, 12
PICTURE = (20, 0, 120, 90)  # x, y, width, height: 4:3 in 16:9
TV_KEY = "da3_small_140x112_u8_letterbox_crop120x90+20+0"  # the 4:3 tier (140x112) on the picture
# Lossless x264: the bars of the output can be compared with the source's exactly. No floating window: it would
# mask the picture's edge columns on purpose (tests/test_window.py), where this module checks they are picture.
LOSSLESS = {"encode": {"crf": 0, "preset": "ultrafast", "piece_frames": 8}}
NO_WINDOW = {"floating_window": "off"}


def pillarboxed(path):
    # The "boxes" pattern's background (0x1c2a3a) is never black: every picture pixel is above the bars' level.
    return make_clip(path, width=120, height=90, frames=FRAMES, fps="12", pattern="boxes",
                     extra=("-vf", "pad=160:90:20:0:black", "-qp", "0"))  # fmt: skip


def decoded(path) -> np.ndarray:
    with FrameReader(path, probe_video(path)) as frames:
        return np.stack(list(frames))


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    workdir = exported_workdir(
        tmp_path_factory, "bars", exports=("da3_small_140x112_u8.onnx", "da3_small_140x84_u8.onnx")
    )
    pillarboxed(workdir / "videos" / "tv.mp4")
    write_config(workdir, **LOSSLESS, render=NO_WINDOW)
    snakemake(workdir)
    return workdir


def test_the_probe_finds_the_picture_and_says_so(library):
    import json

    probe = json.loads((library / "work/tv/probe.json").read_text())
    assert probe["video"]["picture"] == list(PICTURE)
    assert "picture 120x90+20+0 of 160x90: pillarbox" in (library / "logs/probe/tv.log").read_text()


def test_a_video_probed_before_bars_were_looked_for_is_taken_as_without_bars(library):
    """A probe.json of an older version has no ``picture``: the video's depth then covers the whole frame, through
    the tier of the frame's aspect (16:9), and none of its keys names a picture area."""
    import json
    import os

    path = library / "work/tv/probe.json"
    kept, times = path.read_text(), (path.stat().st_atime, path.stat().st_mtime)
    old = json.loads(kept)
    del old["video"]["picture"]
    try:
        path.write_text(json.dumps(old))
        os.utime(path, times)
        planned = snakemake(library, "-n").stdout
        depth_jobs = sorted(set(re.findall(r"work/tv/depth/([^/\s]+)/", planned)))
        assert depth_jobs == ["da3_small_140x84_u8_letterbox"], planned[-3000:]
    finally:
        path.write_text(kept)
        os.utime(path, times)


def test_depth_runs_on_the_picture_through_the_tier_of_its_aspect(library):
    (store,) = (library / "work/tv/depth").glob("*/*.zarr")
    assert store.parent.name == TV_KEY
    with MapReader(store) as depths:
        assert (depths.attrs["width"], depths.attrs["height"]) == (140, 112)
        assert depths.attrs["picture"] == list(PICTURE)
        # 4:3 in the 4:3 tier: at side 140 the 14-pixel grid leaves 6 % bars (1 % at 518); the 16:9 frame would
        # leave 30 % there, and the picture's own bars on top
        assert depths.attrs["bars"] < 0.07
        assert depths.shape == (105, 140)


def test_the_bars_are_the_sources_in_both_eyes_and_the_picture_edges_are_straight(library):
    source = decoded(library / "videos/tv.mp4")
    out = decoded(library / "results/tv/tv_LRF_Full_SBS.mp4")
    assert out.shape == (FRAMES, H, 2 * W, 3)
    x, _, width, _ = PICTURE
    for eye in (out[:, :, :W], out[:, :, W:]):
        assert np.array_equal(eye[:, :, :x], source[:, :, :x])
        assert np.array_equal(eye[:, :, x + width :], source[:, :, x + width :])
        for column in (x, x + width - 1):  # picture in every row of every frame, never a bar moved in
            assert (eye[:, :, column].max(axis=-1) > 24).all()
    assert not np.array_equal(out[:, :, x : x + width], out[:, :, W + x : W + x + width])  # the picture has 3D


def test_the_bars_setting_reruns_the_render_and_crop_gives_the_picture_alone(library):
    write_config(
        library, **LOSSLESS, render={**NO_WINDOW, "bars": "ignore"}
    )  # all picture: depth from the frame, 16:9 tier
    assert planned_jobs(library) == {"depth": 1, "near_plan": 1, "near_maps": 1, "convergence_plan": 1, "render": 1,
                                     "join": 1,
                                     "qc_video": 1, "qc_library": 1, "qc_exports": 1}  # fmt: skip
    write_config(library, **LOSSLESS, render={**NO_WINDOW, "bars": "crop"})
    assert planned_jobs(library) == {"render": 1, "join": 1, "qc_library": 1}
    snakemake(library)
    out = decoded(library / "results/tv/tv_LRF_Full_SBS.mp4")
    assert out.shape == (FRAMES, H, 2 * 120, 3)
    assert (out[:, :, [0, 119, 120, 239]].max(axis=-1) > 24).all()  # each eye is picture to its edges
    write_config(library, **LOSSLESS, render=NO_WINDOW)  # back to keep: the depth and near maps are still there
    assert planned_jobs(library) == {"render": 1, "join": 1, "qc_library": 1}


def test_another_area_gets_its_own_depth_and_bars_that_change_mid_clip_give_their_union(library):
    # The same file name, now letterboxed: 20 px bars, opening up to 10 px for the second half of the clip.
    video = library / "videos/tv.mp4"
    video.unlink()
    box = "drawbox=x=0:y={y}:w=iw:h={h}:color=black:t=fill"
    until6 = ":enable=lt(n\\,6)"
    boxes = [box.format(y=0, h=20) + until6, box.format(y="ih-20", h=20) + until6,
             box.format(y=0, h=10), box.format(y="ih-10", h=10)]  # fmt: skip
    make_clip(video, width=W, height=H, frames=FRAMES, fps="12", pattern="boxes",
              extra=("-vf", ",".join(boxes), "-qp", "0"))  # fmt: skip
    snakemake(library)
    keys = sorted(path.name for path in (library / "work/tv/depth").iterdir())
    assert keys == sorted([TV_KEY, "da3_small_140x84_u8_letterbox_crop160x70+0+10"])  # the old depth is kept
    source = decoded(video)
    out = decoded(library / "results/tv/tv_LRF_Full_SBS.mp4")
    # The encoder's RGB -> 4:2:0 conversion filters chroma over more than a row pair: the two bar rows next to
    # the picture take a trace of its colour (a few levels); the rows beyond are the source's exactly.
    source = source.astype(int)
    for eye in (out[:, :, :W].astype(int), out[:, :, W:].astype(int)):
        assert np.array_equal(eye[:, :8], source[:, :8]) and np.array_equal(eye[:, 82:], source[:, 82:])
        assert np.abs(eye[:, 8:10] - source[:, 8:10]).max() <= 8 and np.abs(eye[:, 80:82] - source[:, 80:82]).max() <= 8


def test_nvds_in_the_workflow_stabilises_the_picture_alone(tmp_path_factory):
    """NVDS reads the frames too: the workflow hands it the picture inside the bars (the depth key's area), so its
    near maps are those of the stage given that picture, not those of the whole frame."""
    from harness import NVDS_EXPORT, NVDS_TIER

    from stereo3d.runtime.sessions import SessionOptions
    from stereo3d.stabilisers import NearSettings
    from stereo3d.stages.near_maps import make_near_maps
    from stereo3d.workflow.keys import parse_depth_key

    workdir = exported_workdir(tmp_path_factory, "bars-nvds", exports=("da3_small_140x112_u8.onnx",), nvds=True)
    pillarboxed(workdir / "videos" / "tv.mp4")
    write_config(workdir, **LOSSLESS, render=NO_WINDOW, stabilise={"method": "nvds", "nvds_tier": NVDS_TIER},
                 export=NVDS_EXPORT, report={"qc": False})  # fmt: skip
    snakemake(workdir)
    (depth,) = (workdir / "work/tv/depth").glob("*/*.zarr")
    (near,) = (workdir / "work/tv/near").glob("*/nvds-*/*.zarr")
    assert depth.parent.name == TV_KEY
    picture = parse_depth_key(TV_KEY)["picture"]
    video = workdir / "videos" / "tv.mp4"
    probe = probe_video(video)
    settings = NearSettings(method="nvds", options={"stabilise.nvds_tier": NVDS_TIER, "stabilise.nvds_graphs": "split",
                            "export.nvds_architecture": NVDS_EXPORT["nvds_architecture"]})  # fmt: skip
    cpu = SessionOptions(providers=("cpu",), threads=1)
    expected = {}
    for name, area in (("picture", picture), ("frame", None)):
        out = workdir / f"{name}.zarr"
        make_near_maps(video, probe, depth, out, settings, models_dir=workdir / "models/NVDS", options=cpu,
                       picture=area)  # fmt: skip
        with MapReader(out) as maps:
            expected[name] = maps.read()
    with MapReader(near) as maps:
        assert maps.shape == (105, 140) and maps.frames == FRAMES
        made = maps.read()
    np.testing.assert_array_equal(made, expected["picture"])
    assert np.abs(made - expected["frame"]).max() > 1e-3  # the whole frame would have given other maps
