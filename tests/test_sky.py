"""Sky goes to the far plane: a sky head's output marks depth NaN, the map store keeps it as a mask, and every
stabiliser puts those pixels at near 0 without letting them set the normalisation range."""

from __future__ import annotations

import numpy as np
import pytest

from stereo3d.io.mapstore import MapReader, MapWriter
from stereo3d.stabilisers import NearJob, NearSettings, get_stabiliser
from stereo3d.stereo.near import near_from_depth, percentile_range, reciprocal, sky_to_far

EMA_OPTIONS = {"stabilise.ema_alpha": 0.5, "stabilise.cut_threshold": 0.25}


def scene(frames: int = 3, height: int = 24, width: int = 40) -> np.ndarray:
    """A ground plane receding towards the horizon (depth 1 at the bottom .. 5 at mid-height) under a sky."""
    rows = np.linspace(5.0, 1.0, height // 2, dtype=np.float32)
    ground = np.repeat(rows[:, None], width, axis=1)
    depth = np.full((frames, height, width), np.nan, dtype=np.float32)
    depth[:, height // 2 :] = ground
    return depth


def test_sky_sets_no_range_and_lands_on_the_far_plane():
    depth = scene()[0]
    inverse = reciprocal(depth)
    assert percentile_range(inverse, 0, 100) == pytest.approx((0.2, 1.0))
    near = near_from_depth(depth, 0, 100)
    assert (near[:12] == 0).all() and not np.isnan(near).any()
    assert near[-1].min() == pytest.approx(1.0) and near[12].max() == pytest.approx(0.0, abs=1e-6)
    assert percentile_range(np.full((4, 4), np.nan, np.float32), 2, 98) == (0.0, 0.0)
    assert (near_from_depth(np.full((4, 4), np.nan, np.float32)) == 0).all()  # a frame of sky only


def test_the_store_keeps_sky_as_a_mask(tmp_path):
    depth = scene(frames=40)
    depth[5, -1, -1] = np.nan  # a single sky pixel low in one frame
    with MapWriter(tmp_path / "d.zarr", "inverse", chunk=16, masked=True) as store:
        store.append(depth)
    with MapReader(tmp_path / "d.zarr") as maps:
        back = maps.read()
        assert maps.masked
    np.testing.assert_array_equal(np.isnan(back), np.isnan(depth))
    finite = ~np.isnan(depth)
    np.testing.assert_allclose(back[finite], depth[finite], rtol=2e-3)


def test_an_unmasked_store_refuses_nan(tmp_path):
    with pytest.raises(ValueError, match="NaN"), MapWriter(tmp_path / "d.zarr", "inverse") as store:
        store.append(scene(frames=1))
    assert not (tmp_path / "d.zarr").exists()


@pytest.mark.parametrize("method", ["frame", "ema"])
def test_each_stabiliser_puts_the_sky_far(tmp_path, method):
    from stereo3d.stabilisers.ema import plan

    depth = scene(frames=5)
    with MapWriter(tmp_path / "d.zarr", "inverse", masked=True, series=("changes",)) as store:
        store.append(depth, changes=0.0)
    settings = NearSettings(method=method, options=EMA_OPTIONS if method == "ema" else {})
    plan_path = None
    if method == "ema":
        plan_path = tmp_path / "plan.npz"
        plan([tmp_path / "d.zarr"], plan_path, settings)
        with np.load(plan_path) as ranges:
            assert np.isfinite(ranges["lo"]).all() and (ranges["hi"] > ranges["lo"]).all()
    written = []
    with MapReader(tmp_path / "d.zarr") as depths:
        get_stabiliser(method).run(
            NearJob(
                video=tmp_path / "v.mp4",
                probe={},
                depths=depths.from_frame(0),
                start=0,
                settings=settings,
                write=written.append,
                plan=plan_path,
                earlier=None,
                models_dir=None,
                options=None,
            )  # fmt: skip
        )
    near = np.stack(written)
    assert (near[:, :12] == 0).all()
    assert near[:, 12:].max() > 0.9  # the ground still spans the range: the sky did not compress it


def test_a_network_output_gets_the_sky_back_at_any_size():
    depth = scene()[0]
    out = sky_to_far(np.full((12, 20), 0.7, np.float32), depth)
    assert (out[:6] == 0).all() and (out[6:] == np.float32(0.7)).all()
    untouched = np.full((24, 40), 0.7, np.float32)
    assert sky_to_far(untouched, np.ones((24, 40), np.float32)) is untouched


def sky_graph(path, width: int, height: int):
    """An ONNX graph with DA3's export contract and two outputs, as Mono-Large's: depth = 1 + R/255, sky = G/255
    (so a test paints its sky in the green channel)."""
    import onnx
    from onnx import TensorProto, helper

    image = helper.make_tensor_value_info("image", TensorProto.UINT8, ["batch", height, width, 3])
    outputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, ["batch", height, width]) for n in ("depth", "sky")]
    const = [
        helper.make_tensor("scale", TensorProto.FLOAT, [], [1 / 255]),
        helper.make_tensor("one", TensorProto.FLOAT, [], [1.0]),
    ]
    starts = [
        helper.make_tensor(n, TensorProto.INT64, [1], [v]) for n, v in (("r0", 0), ("r1", 1), ("g1", 2), ("ax", 3))
    ]
    nodes = [
        helper.make_node("Cast", ["image"], ["f"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["f", "scale"], ["s"]),
        helper.make_node("Slice", ["s", "r0", "r1", "ax"], ["red"]),
        helper.make_node("Slice", ["s", "r1", "g1", "ax"], ["green"]),
        helper.make_node("Squeeze", ["red", "ax"], ["r"]),
        helper.make_node("Squeeze", ["green", "ax"], ["sky"]),
        helper.make_node("Add", ["r", "one"], ["depth"]),
    ]
    graph = helper.make_graph(nodes, "sky", [image], outputs, initializer=const + starts)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=9)
    helper.set_model_props(model, {"stereo3d.model": "da3", "stereo3d.contract": "uint8"})
    onnx.save(model, str(path))
    return path


def test_a_sky_head_output_marks_depth_nan(tmp_path):
    """A real ONNX Runtime session of a graph with DA3's two outputs (Mono-Large's contract): sky >= 0.3 → NaN."""
    from stereo3d.models.da3.runtime import DepthModel, placement_for
    from stereo3d.runtime.sessions import SessionOptions, open_session

    path = sky_graph(tmp_path / "sky.onnx", 42, 28)
    da3 = DepthModel(open_session(path, SessionOptions(providers=("cpu",))), path)
    assert da3.has_sky and da3.shape == (42, 28)
    placement = placement_for(42, 28, da3.shape, "letterbox")
    frames = np.zeros((1, 28, 42, 3), np.uint8)
    frames[..., 0] = 100
    frames[:, :10, :, 1] = 200  # sky score 0.78 in the top rows
    frames[:, 10:14, :, 1] = 60  # 0.24: below DA3's threshold, not sky
    depth = da3.run(frames, placement)
    assert np.isnan(depth[0, :10]).all() and not np.isnan(depth[0, 10:]).any()
    np.testing.assert_allclose(depth[0, 10:], 1 + 100 / 255, rtol=1e-6)


def test_the_depth_stage_stores_the_sky_and_near_maps_put_it_far(tmp_path, lossless_clip):
    """The depth stage on a real clip through a two-output graph: the store is masked where the sky head says
    sky, and the near maps stage puts exactly those pixels at 0."""
    from stereo3d.io.probe import probe_video
    from stereo3d.stages.depth import DepthSettings, estimate_depth
    from stereo3d.stages.near_maps import make_near_maps

    clip = lossless_clip(width=84, height=56, frames=5, pattern="boxes")  # coloured boxes on a dark ground
    probe = probe_video(clip)
    model = sky_graph(tmp_path / "sky.onnx", 84, 56)
    estimate_depth(clip, probe, model, tmp_path / "depth.zarr", DepthSettings(size=(84, 56)), batch=2)
    with MapReader(tmp_path / "depth.zarr") as depths:
        assert depths.masked and depths.attrs["sky"]
        depth = depths.read()
    sky = np.isnan(depth)
    assert 0 < sky.mean() < 0.5  # the green-rich boxes, not the ground
    make_near_maps(clip, probe, tmp_path / "depth.zarr", tmp_path / "near.zarr", NearSettings(method="frame"))
    with MapReader(tmp_path / "near.zarr") as maps:
        near = maps.read()
    assert (near[sky] == 0).all() and near[~sky].max() > 0.9
