"""Every variable part is one table, and the schema, the workflow and the docs agree with it: a method, layout,
variant or graph mode added in its module is accepted by the config, and one the schema lists exists."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
import yaml

from stereo3d.io.codecs import CODECS, PIX_FMTS, PRESETS, get_codec, software_codec
from stereo3d.io.mapstore import MapWriter
from stereo3d.models.da3.tiers import DEFAULT_TIERS, FITS
from stereo3d.models.da3.variants import VARIANTS as DA3_TABLE
from stereo3d.models.names import DA3_CONTRACTS, NVDS_GRAPHS, nvds_onnx_names
from stereo3d.stabilisers import NearSettings, Stabiliser, get_stabiliser, stabilisers
from stereo3d.stages.render import AUTO_CODEC, EncodeSettings, RenderSettings
from stereo3d.stereo.layouts import LAYOUTS, SIGNALS
from stereo3d.stereo.warp import FLOATING_WINDOW, StereoSettings
from stereo3d.workflow.config import load_schema, validate_config
from stereo3d.workflow.keys import MUX_ONLY, SIDECAR_ONLY, near_key, render_key
from stereo3d.workflow.videos import VideoSettings

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = load_schema(ROOT / "workflow/schemas/config.schema.yaml")
CONFIG_DOC = (ROOT / "config.yaml").read_text()


def prop(dotted: str) -> dict:
    node = SCHEMA
    for part in dotted.split("."):
        node = node["properties"][part]
    return node


@pytest.mark.parametrize(
    ("key", "table"),
    [
        ("stabilise.method", lambda: stabilisers()),
        ("render.layout", lambda: LAYOUTS),
        ("encode.stereo_signal", lambda: SIGNALS),
        ("encode.codec", lambda: {*CODECS, AUTO_CODEC}),  # auto: NVENC where the GPU has it, else libx264
        ("encode.preset", lambda: PRESETS),
        ("da3.variant", lambda: DA3_TABLE),
        ("da3.contract", lambda: DA3_CONTRACTS),
        ("da3.fit", lambda: FITS),
        ("stabilise.nvds_graphs", lambda: NVDS_GRAPHS),
        ("render.floating_window", lambda: FLOATING_WINDOW),
    ],
)
def test_the_schema_enum_is_the_table(key, table):
    assert set(prop(key)["enum"]) == set(table())


def test_the_default_aspect_tiers_are_the_table():
    assert prop("da3.aspect_tiers")["default"] == list(DEFAULT_TIERS)
    assert str(list(DEFAULT_TIERS)).replace("'", '"') in CONFIG_DOC


def test_export_modes_and_extra_variants_follow_the_tables_too():
    assert set(prop("export.nvds_modes")["items"]["enum"]) == set(NVDS_GRAPHS)
    assert set(prop("export.da3_extra")["items"]["properties"]["variant"]["enum"]) == set(DA3_TABLE)


def comment_above(section: str, key: str) -> str:
    """The comment block right above ``key`` in ``section`` of config.yaml, its words on one line."""
    lines = CONFIG_DOC.splitlines()
    start = lines.index(f"{section}:")
    end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith(f"  {key}:"))
    block = []
    for line in reversed(lines[start + 1 : end]):
        if not line.lstrip().startswith("#"):
            break
        block.insert(0, line.lstrip().removeprefix("#"))
    return " ".join(" ".join(block).split())


@pytest.mark.parametrize("name", list(DA3_TABLE))
def test_each_da3_variant_is_documented_in_config_yaml_as_its_row_says(name):
    row = DA3_TABLE[name]
    line = f"{row.name}: folder {row.folder}, hub {row.hub}: {row.description}"
    assert line in comment_above("da3", "variant"), line


def test_the_da3_variants_are_told_apart_by_folder_file_name_and_vit_width():
    rows = DA3_TABLE.values()
    assert all(row.name == key for key, row in DA3_TABLE.items())
    for part in ("folder", "onnx_part", "config"):
        assert len({getattr(row, part) for row in rows}) == len(DA3_TABLE), part
    # The header check tells variants apart by their ViT width alone.
    assert len({row.vit_width for row in rows}) == len(DA3_TABLE)


def test_a_new_da3_variant_is_named_by_its_row_alone(monkeypatch):
    """The file names and both wildcard regexes of stereo3d.models.names come from the table."""
    import importlib

    import stereo3d.models.names as names
    from stereo3d.models.da3.variants import VARIANTS, Variant

    row = Variant("giant", "Giant", "DA3-GIANT", "da3-giant", 1536, False, "giant", "ViT-G. CC BY-NC 4.0.")
    monkeypatch.setitem(VARIANTS, row.name, row)
    importlib.reload(names)
    try:
        assert "giant" in names.DA3_VARIANTS
        assert names.da3_onnx_name("giant", (140, 84), "uint8") == "da3_giant_140x84_u8.onnx"
        assert names.parse_da3_onnx_name("da3_giant_280.onnx") == ("giant", (280, 280), "float")
        assert re.fullmatch(names.DA3_STEM, "da3_giant_518x294_u8")
        assert (names.da3_weights_name("giant"), names.da3_variant_of_folder("Giant")) == (
            "DA3/Giant/model.safetensors",
            "giant",
        )
    finally:
        monkeypatch.undo()
        importlib.reload(names)
    assert "giant" not in names.DA3_VARIANTS and not re.fullmatch(names.DA3_STEM, "da3_giant_280")


@pytest.mark.parametrize("name", sorted(stabilisers()))
def test_each_stabiliser_keys_on_settings_the_schema_has_and_config_yaml_documents(name):
    stabiliser = get_stabiliser(name)
    assert f" {name}:" in CONFIG_DOC or f"{name} (" in CONFIG_DOC or f"| {name}" in CONFIG_DOC, name
    for dotted in stabiliser.keys:
        assert "default" in prop(dotted), dotted
        section, leaf = dotted.split(".")
        assert f"  {leaf}:" in CONFIG_DOC, f"{dotted} is not documented in config.yaml"


@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_each_layout_is_documented_with_its_tag(name):
    assert name in CONFIG_DOC and LAYOUTS[name].tag in CONFIG_DOC


def test_the_pixel_formats_and_deep_encoders_are_those_of_the_codec_rows():
    assert prop("encode.pix_fmt")["enum"] == ["auto", *PIX_FMTS]
    deep = {name for name, codec in CODECS.items() if codec.family != "h264" and max(codec.depths) > 8}
    assert set(prop("encode.deep_codec")["enum"]) == {*deep, "same"}
    assert "libx264" not in deep and {"libx265", "libsvtav1", "hevc_nvenc"} <= deep


@pytest.mark.parametrize("name", sorted(CODECS))
def test_each_codec_is_documented_and_serves_every_setting_the_schema_allows(name):
    codec = get_codec(name)
    assert f" {name} " in CONFIG_DOC or f" {name}\n" in CONFIG_DOC or f" {name}:" in CONFIG_DOC, name
    assert codec.family in ("h264", "hevc", "av1") and codec.encoder
    for preset in PRESETS:  # every preset the schema allows has a meaning for this encoder
        options = codec.quality(prop("encode.crf")["maximum"], preset)
        assert options and all(isinstance(o, str) for o in options)
    assert codec.quality(0, "medium") != codec.quality(51, "medium")  # crf reaches the encoder
    for container in prop("encode.container")["enum"]:  # the finished file may be any the schema offers
        assert f".{container}" in codec.containers
    assert "yuv420p" in codec.pix_fmts  # auto on an 8-bit source
    fallback = software_codec(codec.family)
    assert fallback.hardware is None and set(codec.pix_fmts) <= set(fallback.pix_fmts)
    assert (codec.hardware is None) == (fallback is codec)


def test_the_settings_defaults_are_the_schemas():
    config, _ = validate_config({}, SCHEMA)
    assert EncodeSettings.from_config(config["encode"]) == EncodeSettings()
    assert StereoSettings.from_config(config["render"]) == StereoSettings()
    assert RenderSettings.from_sections(config) == RenderSettings()
    assert StereoSettings().floating_window == prop("render.floating_window")["default"] == "auto"


def test_the_render_stage_names_every_key_that_changes_its_results_by_its_dotted_name():
    sections = SCHEMA["properties"]
    render, encode = sections["render"]["properties"], sections["encode"]["properties"]
    subtitles = sections["subtitles"]["properties"]
    config, _ = validate_config({"render": {"layout": "vr180", "vr180_fov_deg": 100}, "subtitles": {"burn": "auto"}},
                                SCHEMA)  # fmt: skip
    # A video with bars and a subtitle track burnt in (stream 3, the choice subtitles.burn made of its tracks), in
    # the layout with options.
    settings = RenderSettings.from_sections(config, bars=True, subtitle_stream=3)
    params = settings.params()
    # subtitles.burn reaches the render as the stream it chose (by the probe): a video without one is not rerun.
    named = {*params, *MUX_ONLY, *SIDECAR_ONLY} - {"subtitles.burn_stream"} | {"subtitles.burn"}
    assert named == {f"render.{k}" for k in render} | {f"encode.{k}" for k in encode} | {
        f"subtitles.{k}" for k in subtitles}  # fmt: skip
    assert params["render.vr180_fov_deg"] == 100 and params["encode.crf"] == config["encode"]["crf"]
    assert params["subtitles.burn_stream"] == 3
    assert RenderSettings.from_params(params) == settings
    plain = RenderSettings.from_sections(config | {"render": {**config["render"], "layout": "full_sbs"}})
    assert set(params) - set(plain.params()) == {"render.bars", "render.vr180_fov_deg", "render.vr180_eye_px",
                                                 "subtitles.burn_stream", "subtitles.margin_pct"}  # fmt: skip


# The render's params as keys.RENDER_KEYS listed them before the settings object (7b5ceb2), in their order.
RENDER_KEYS_BEFORE = [
    "render.layout", "render.divergence_pct", "render.convergence", "render.edge_dilate_px", "render.ipd_offset_pct",
    "render.border_taper_pct", "render.original_eye", "render.floating_window",
    "encode.codec", "encode.crf", "encode.preset", "encode.pix_fmt", "encode.deep_codec", "encode.stereo_signal",
    "encode.piece_frames",
]  # fmt: skip


def test_the_render_params_and_key_are_those_of_before_the_settings_object():
    """The params' order is what Snakemake compares (their repr) and the hash names the work folders: both as the
    dotted lists of keys.RENDER_KEYS made them (a library converted then reruns nothing). A render setting added
    since comes in its field's place and changes the key (once: a new setting)."""
    config, _ = validate_config({"encode": {"preset": "ultrafast", "piece_frames": 8}}, SCHEMA)
    settings = RenderSettings.from_sections(config)
    params = list(settings.params())
    assert [key for key in params if key in RENDER_KEYS_BEFORE] == RENDER_KEYS_BEFORE
    if params == RENDER_KEYS_BEFORE:
        assert render_key(settings) == "full_sbs-bca19271"  # the tests' render key before (logs of 7b5ceb2's runs)


def test_the_near_stage_names_every_key_that_changes_its_results_by_its_dotted_name():
    config, _ = validate_config({}, SCHEMA)
    sections = {s: config[s] for s in ("da3", "stabilise", "near", "render", "encode")}
    near = VideoSettings({**sections, "stabilise": {**config["stabilise"], "method": "nvds"}}, config).near()
    params = near.params()
    assert list(params) == ["near.low_pct", "near.high_pct", "stabilise.method", *get_stabiliser("nvds").keys]
    assert set(params) == {"near.low_pct", "near.high_pct", "stabilise.method", "stabilise.nvds_tier",
                           "stabilise.nvds_graphs", "export.nvds_architecture"}  # fmt: skip
    assert params["export.nvds_architecture"] == config["export"]["nvds_architecture"]  # not a per-video section
    assert NearSettings.from_params(params) == near


def test_near_key_changes_with_the_methods_own_keys_only():
    config, _ = validate_config({}, SCHEMA)
    sections = {s: config[s] for s in ("da3", "stabilise", "near", "render", "encode")}

    def key(**stabilise):
        video = {**sections, "stabilise": {**config["stabilise"], **stabilise}}
        return near_key(VideoSettings(video, config).near())

    ema = key(method="ema")
    assert key(method="ema", nvds_tier="672x384", nvds_graphs="monolith") == ema  # another method's settings
    assert key(method="ema", ema_alpha=0.3) != ema
    nvds = key(method="nvds")
    assert key(method="nvds", ema_alpha=0.3) == nvds
    assert key(method="nvds", nvds_graphs="monolith") != nvds  # the graphs run are part of the maps
    assert key(method="nvds", nvds_tier="672x384") != nvds


def test_nvds_declares_the_models_of_its_graphs():
    nvds = get_stabiliser("nvds")
    for graphs in NVDS_GRAPHS:
        options = {"stabilise.nvds_tier": "96x64", "stabilise.nvds_graphs": graphs}
        settings = NearSettings(method="nvds", options=options)
        assert nvds.models(settings) == [f"NVDS/{name}" for name in nvds_onnx_names("96x64", graphs)]
    assert nvds_onnx_names("96x64", "split") == ["NVDS_Backbone_96x64.onnx", "NVDS_Head_96x64.onnx"]
    assert nvds_onnx_names("96x64", "monolith") == ["NVDS_Stabilizer_96x64.onnx"]


def test_the_registry_finds_a_new_method_by_its_module_alone(tmp_path, monkeypatch):
    """Adding a method is its module (plus schema/config doc and a test): nothing else lists it."""
    import numpy as np

    import stereo3d.stabilisers as package
    from stereo3d.io.mapstore import MapReader
    from stereo3d.stabilisers import registry
    from stereo3d.stages.near_maps import make_near_maps

    extra = tmp_path / "methods"
    extra.mkdir()
    (extra / "constant.py").write_text(
        "import numpy as np\n"
        "from stereo3d.stabilisers.registry import Stabiliser\n"
        "def run(job):\n"
        "    for raw in job.depths:\n"
        "        job.write(np.full(raw.shape, job.settings.option('stabilise.level'), np.float32))\n"
        "STABILISER = Stabiliser(name='constant', summary='test only', run=run, keys=('stabilise.level',))\n"
    )
    monkeypatch.setattr(package, "__path__", [*package.__path__, str(extra)])
    registry.stabilisers.cache_clear()
    try:
        assert "constant" in stabilisers()
        depth = tmp_path / "depth.maps"
        with MapWriter(depth, "log", attrs={"start": 0}) as store:
            for _ in range(3):
                store.append(np.ones((4, 6), np.float32))
        settings = NearSettings(method="constant", options={"stabilise.level": 0.25})
        make_near_maps("clip.mp4", {}, depth, tmp_path / "near.maps", settings)
        with MapReader(tmp_path / "near.maps") as near:
            assert near.frames == 3
            np.testing.assert_allclose(near.read(), 0.25, atol=1e-4)
    finally:
        monkeypatch.undo()
        registry.stabilisers.cache_clear()
        sys.modules.pop("stereo3d.stabilisers.constant", None)
    assert "constant" not in stabilisers()


def test_an_unknown_method_names_the_valid_ones():
    with pytest.raises(ValueError, match="valid: ema, frame, nvds"):
        get_stabiliser("median")


def test_stabiliser_rows_say_what_each_method_needs():
    # What each method is, from its paper or its design: the EMA plans its ranges over the whole video and
    # looks at no frame before a segment; NVDS's window is 4 frames (3 before the one it stabilises) from
    # exported graphs; a frame's own range needs neither.
    rows = stabilisers()
    assert all(isinstance(row, Stabiliser) and row.summary for row in rows.values())
    needs = {name: (row.history, row.plan is not None, row.models is not None) for name, row in rows.items()}
    assert needs == {"ema": (0, True, False), "frame": (0, False, False), "nvds": (3, False, True)}


def test_config_yaml_is_valid_and_complete_against_the_schema():
    config = yaml.safe_load(CONFIG_DOC)
    checked, warnings = validate_config(config, SCHEMA)
    assert warnings == []

    def leaves(node, prefix=""):
        for k, v in node["properties"].items():
            if v.get("type") == "object" and "properties" in v:
                yield from leaves(v, f"{prefix}{k}.")
            else:
                yield f"{prefix}{k}"

    for dotted in leaves(SCHEMA):
        node = config
        for part in dotted.split("."):
            assert part in node, f"{dotted} is in the schema but not documented in config.yaml"
            node = node[part]
