"""One typed settings object per stage, built once per video: the near-map stage's ``NearSettings`` and the depth
stage's ``DepthSettings`` read back from their params unchanged, and name their results by the very keys (and,
for the near maps, the very params) of before the objects, so a converted library reruns nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from stereo3d.stabilisers import NearSettings, get_stabiliser, stabilisers
from stereo3d.stages.depth import DepthSettings, estimate_depth
from stereo3d.stereo.bars import Area
from stereo3d.workflow.config import load_schema, validate_config
from stereo3d.workflow.keys import depth_key, near_key, parse_depth_key
from stereo3d.workflow.videos import VideoSettings, VideoShape

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = load_schema(ROOT / "workflow/schemas/config.schema.yaml")
PER_VIDEO = ("da3", "stabilise", "near", "render", "encode")

# The near keys and params of the schema's defaults per method, as keys.near_settings made them before NearSettings
# (computed at ef1f5ca): the hash names the work folders, the params' repr is what Snakemake records.
NEAR_BEFORE = {
    "ema": ("ema-626dfcf2", {"near.low_pct": 2.0, "near.high_pct": 98.0, "stabilise.method": "ema",
                             "stabilise.ema_alpha": 0.1, "stabilise.cut_threshold": 0.25}),
    "frame": ("frame-13ddd59b", {"near.low_pct": 2.0, "near.high_pct": 98.0, "stabilise.method": "frame"}),
    "nvds": ("nvds-31a6bb47", {"near.low_pct": 2.0, "near.high_pct": 98.0, "stabilise.method": "nvds",
                               "stabilise.nvds_tier": "512x288", "stabilise.nvds_graphs": "split",
                               "export.nvds_architecture": "full"}),
}  # fmt: skip


def video_settings(**overrides) -> VideoSettings:
    """A video's settings at the schema's defaults with ``overrides`` (``{section: {key: value}}``), as the
    workflow builds them (its per-video sections over the config)."""
    config, _ = validate_config(overrides, SCHEMA)
    return VideoSettings({section: config[section] for section in PER_VIDEO}, config)


@pytest.mark.parametrize("method", sorted(NEAR_BEFORE))
def test_the_near_key_and_params_are_those_of_before_the_settings_object(method):
    key, params = NEAR_BEFORE[method]
    settings = video_settings(stabilise={"method": method}).near()
    assert near_key(settings) == key
    assert repr(settings.params()) == repr(params)  # keys, order and value types: what Snakemake compares


@pytest.mark.parametrize("method", sorted(stabilisers()))
def test_near_settings_read_back_from_their_params(method):
    settings = video_settings(stabilise={"method": method}, near={"low_pct": 5.0}).near()
    assert NearSettings.from_params(settings.params()) == settings
    assert settings.low_pct == 5.0 and settings.stabiliser is get_stabiliser(method)


def test_near_settings_hold_the_options_their_method_declares_and_no_other():
    ema = video_settings(stabilise={"method": "ema", "ema_alpha": 0.3, "nvds_tier": "672x384"}).near()
    assert list(ema.options) == list(get_stabiliser("ema").keys)
    assert ema.option("stabilise.ema_alpha") == 0.3
    with pytest.raises(ValueError, match="stabilise.nvds_tier: not an option of the ema method"):
        NearSettings(method="ema", options={"stabilise.nvds_tier": "672x384"})


def test_near_settings_defaults_are_the_schemas():
    assert NearSettings() == video_settings().near()
    nvds = NearSettings(method="nvds")  # a method's options not given take the schema's defaults
    assert nvds == video_settings(stabilise={"method": "nvds"}).near()


def test_the_depth_key_is_that_of_before_the_settings_object():
    """keys.depth_key(da3, display, precision, picture) gave these (ef1f5ca)."""
    shape = VideoShape((1920, 1080), Area(0, 0, 1920, 1080))
    assert video_settings().depth_key(shape) == "da3_small_518x294_u8_letterbox"
    bars = VideoShape((1920, 1080), Area(0, 140, 1920, 800))
    fast = video_settings(runtime={"precision": "fast"})
    assert fast.depth_key(bars) == "da3_small_518x210_u8_letterbox_crop1920x800+0+140_fast"
    square = video_settings(da3={"fit": "letterbox", "contract": "float"})
    assert square.depth_key(shape) == "da3_small_518x518_float_letterbox"


@pytest.mark.parametrize(
    "overrides",
    [{}, {"da3": {"fit": "resize", "variant": "base"}}, {"runtime": {"precision": "fast"}}],
)
def test_depth_settings_read_back_from_their_params_and_their_key(overrides):
    shape = VideoShape((1440, 1080), Area(0, 60, 1440, 960))
    settings = video_settings(**overrides).depth(shape)
    assert settings.picture == Area(0, 60, 1440, 960)
    assert DepthSettings.from_params(settings.params()) == settings
    parsed = parse_depth_key(depth_key(settings))
    assert DepthSettings(variant=parsed["variant"], size=parsed["shape"], contract=parsed["contract"],
                         placement=parsed["placement"], picture=parsed["picture"],
                         precision=parsed["precision"]) == settings  # fmt: skip


def test_depth_settings_defaults_are_the_schemas():
    assert DepthSettings() == video_settings().depth(VideoShape((1080, 1080), Area(0, 0, 1080, 1080)))


def test_a_depth_jobs_session_computes_in_its_settings_precision(tmp_path):
    from stereo3d.runtime.sessions import SessionOptions

    with pytest.raises(ValueError, match="precision 'fast' is not the depth settings' 'exact'"):
        estimate_depth(tmp_path / "clip.mp4", {}, tmp_path / "model.onnx", tmp_path / "depth.zarr", DepthSettings(),
                       options=SessionOptions(precision="fast"))  # fmt: skip


@pytest.mark.parametrize("named", [DepthSettings(size=(140, 84)), DepthSettings(size=(84, 56), contract="float")])
def test_a_depth_job_refuses_an_export_other_than_the_one_its_settings_name(tmp_path, named):
    # The job's key names its settings' export: depth computed by another file would be stored under that name.
    from test_sky import sky_graph

    from stereo3d.errors import BadModel

    model = sky_graph(tmp_path / "model.onnx", 84, 56)  # an 84x56 export with DA3's uint8 input
    with pytest.raises(BadModel, match=r"model\.onnx: an export of 84x56 with uint8 input, where the depth settings"):
        estimate_depth(tmp_path / "clip.mp4", {}, model, tmp_path / "depth.zarr", named)
    assert not list(tmp_path.glob("*depth.zarr*"))
