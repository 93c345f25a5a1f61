"""DA3 export: Small at side 140 with smoke weights, both contracts, shared across the tests below; every aspect
tier (the workflow's exports of the session); Mono-Large with its sky output."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from conftest import needs_export_extra
from harness import export_cache

from stereo3d.errors import BadConfig
from stereo3d.models.da3.export import da3_onnx_name, export_da3, parse_da3_onnx_name
from stereo3d.models.da3.model import CONTRACTS, VARIANTS, normalise_image
from stereo3d.models.validation import read_metadata, validation_path

SIZE = 140
SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "da3_to_onnx.py"


def _needs_export_stack():
    needs_export_extra("torch", "onnx", "onnxscript", "onnxruntime", "safetensors", "depth_anything_3.cfg")


@pytest.fixture(scope="module")
def smoke_weights(tmp_path_factory):
    _needs_export_stack()
    from stereo3d.demo.smoke import write_smoke_weights

    return write_smoke_weights(tmp_path_factory.mktemp("weights") / "Small" / "model.safetensors", "small")


@pytest.fixture(scope="module")
def exported(smoke_weights, tmp_path_factory):
    """contract -> (onnx path, report); each export takes tens of seconds on 2 CPU cores. The uint8 one is the
    session's 1:1 tier, made by the workflow from the same seeded weights (the same bytes as smoke_weights)."""
    out_dir = tmp_path_factory.mktemp("models")
    result = {}
    for contract in CONTRACTS:
        path = out_dir / da3_onnx_name("small", SIZE, contract)
        if contract == "uint8":
            path = export_cache(tmp_path_factory) / "models/DA3" / path.name
            result[contract] = path, json.loads(validation_path(path).read_text())
            continue
        result[contract] = path, export_da3(smoke_weights, path, "small", size=SIZE, contract=contract)
    return result


def _session(path):
    from stereo3d.runtime.sessions import SessionOptions, open_session

    return open_session(path, SessionOptions(providers=("cpu",)))


def _rgb(batch, seed=1):
    return np.random.default_rng(seed).integers(0, 256, (batch, SIZE, SIZE, 3), dtype=np.uint8)


def _rel(a, b):
    return float(np.mean(np.abs(a - b)) / np.mean(np.abs(a)))


# -- names -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "name"),
    [
        (("small", 518, "float"), "da3_small.onnx"),
        (("base", 518, "float"), "da3_base.onnx"),
        (("small", 280, "float"), "da3_small_280.onnx"),
        (("small", 518, "uint8"), "da3_small_u8.onnx"),
        (("base", 280, "uint8"), "da3_base_280_u8.onnx"),
        (("small", (518, 294), "uint8"), "da3_small_518x294_u8.onnx"),
        (("base", (294, 518), "float"), "da3_base_294x518.onnx"),
        (("mono_large", 518, "uint8"), "da3_mono_large_u8.onnx"),
        (("mono_large", (140, 84), "float"), "da3_mono_large_140x84.onnx"),
    ],
)
def test_names_follow_the_seed_keep_contracts_apart_and_carry_both_sides_of_a_tier(args, name):
    assert da3_onnx_name(*args) == name
    variant, size, contract = args
    assert parse_da3_onnx_name(name) == (variant, size if isinstance(size, tuple) else (size, size), contract)


def test_variants_and_contracts_are_the_workflow_names():
    from stereo3d.models import names

    assert (tuple(VARIANTS), CONTRACTS) == (names.DA3_VARIANTS, names.DA3_CONTRACTS)


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("size", [14, 140, 518, 1036])
@pytest.mark.parametrize("contract", CONTRACTS)
def test_name_round_trip(variant, size, contract):
    assert parse_da3_onnx_name(da3_onnx_name(variant, size, contract)) == (variant, (size, size), contract)
    shape = (size, max(14, size // 2 // 14 * 14))
    assert parse_da3_onnx_name(da3_onnx_name(variant, shape, contract)) == (variant, shape, contract)


@pytest.mark.parametrize(
    "name",
    [
        "da3_large.onnx",
        "da3_small_518.onnx",
        "da3_small_141.onnx",
        "nvds.onnx",
        "da3_small_u8_280.onnx",
        "da3_small_140x140.onnx",  # a square is named by its side
        "da3_small_518x300.onnx",  # 300 is not a multiple of 14
    ],
)
def test_bad_names_are_rejected(name):
    with pytest.raises(BadConfig):
        parse_da3_onnx_name(name)


@pytest.mark.parametrize("size", [141, 0, 500])
def test_size_not_multiple_of_14_is_rejected(size, tmp_path):
    with pytest.raises(BadConfig, match="multiple of 14"):
        export_da3(tmp_path / "missing.safetensors", tmp_path / "m.onnx", "small", size=size)
    assert not list(tmp_path.iterdir())


# -- the exported graphs -----------------------------------------------------------------------------


@pytest.mark.parametrize("contract", CONTRACTS)
def test_onnx_matches_pytorch(exported, contract):
    report = exported[contract][1]
    assert report["rel_mean_err"] <= 1e-5
    assert report["batches"]["1"]["output_shape"] == [1, SIZE, SIZE]
    assert report["batches"]["2"]["output_shape"] == [2, SIZE, SIZE]


def test_onnx_checker_full_check_passes(exported):
    import onnx

    onnx.checker.check_model(str(exported["float"][0]), full_check=True)


def test_only_the_batch_axis_is_dynamic(exported):
    import onnx

    model = onnx.load(str(exported["float"][0]), load_external_data=False)
    (inp,), (out,) = model.graph.input, model.graph.output
    dims = [[d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim] for v in (inp, out)]
    assert dims == [["batch", 3, SIZE, SIZE], ["batch", SIZE, SIZE]]


@pytest.mark.parametrize("contract", CONTRACTS)
def test_batch_of_three_equals_three_single_frames(exported, contract):
    session = _session(exported[contract][0])
    rgb = _rgb(3)
    x = rgb if contract == "uint8" else normalise_image(rgb)
    batched = session.run(["depth"], {"image": x})[0]
    assert batched.shape == (3, SIZE, SIZE) and batched.dtype == np.float32
    singles = np.concatenate([session.run(["depth"], {"image": x[i : i + 1]})[0] for i in range(3)])
    assert _rel(singles, batched) < 1e-5


@pytest.mark.parametrize("contract", CONTRACTS)
def test_the_depth_stages_bound_batches_give_the_sessions_own_outputs(exported, contract):
    # DepthModel.infer feeds the batch by I/O binding (on a GPU: one upload, one download); the same numbers.
    from stereo3d.models.da3.runtime import DepthModel

    path = exported[contract][0]
    model = DepthModel(_session(path), path)
    rgb = _rgb(3, seed=4)
    x = rgb if contract == "uint8" else normalise_image(rgb)
    assert model.device == ("cpu", 0)
    np.testing.assert_array_equal(model.infer(x)[0], model.session.run(["depth"], {"image": x})[0])


def test_float_and_uint8_contracts_agree(exported):
    rgb = _rgb(2, seed=7)
    from_float = _session(exported["float"][0]).run(["depth"], {"image": normalise_image(rgb)})[0]
    from_uint8 = _session(exported["uint8"][0]).run(["depth"], {"image": rgb})[0]
    assert np.max(np.abs(from_float - from_uint8) / np.abs(from_float)) <= 1e-4


def test_smoke_depth_is_not_flat(exported):
    low, high = exported["float"][1]["reference_depth_range"]
    assert high > 2 * low > 0  # the demo renders it: visible variation


@pytest.mark.parametrize("contract", CONTRACTS)
def test_metadata_states_the_contract(exported, contract, smoke_weights):
    from stereo3d.models.validation import sha256_file

    meta = read_metadata(exported[contract][0])
    assert meta["stereo3d.model"] == "da3"
    assert (meta["stereo3d.variant"], meta["stereo3d.size"], meta["stereo3d.contract"]) == ("small", "140", contract)
    assert (meta["stereo3d.width"], meta["stereo3d.height"], meta["stereo3d.outputs"]) == ("140", "140", "depth")
    assert (meta["stereo3d.input_name"], meta["stereo3d.output_name"]) == ("image", "depth")
    assert meta["stereo3d.input_layout"] == ("NCHW" if contract == "float" else "NHWC")
    assert json.loads(meta["stereo3d.norm_mean"]) == [0.485, 0.456, 0.406]
    assert json.loads(meta["stereo3d.norm_std"]) == [0.229, 0.224, 0.225]
    assert "smaller = nearer" in meta["stereo3d.output_semantics"]
    assert meta["stereo3d.weights_sha256"] == sha256_file(smoke_weights)
    assert meta["stereo3d.smoke"] == "true"


def test_validation_json_sits_beside_the_model(exported):
    path, report = exported["uint8"]
    on_disk = json.loads(validation_path(path).read_text())
    assert on_disk == json.loads(json.dumps(report))
    for key in (
        "output_shape",
        "max_abs_err",
        "mean_abs_err",
        "rel_mean_err",
        "providers",
        "opset",
        "exporter",
        "variant",
        "size",
        "width",
        "height",
        "contract",
        "weights_sha256",
        "positional_embedding",
        "export_seconds",
        "file_bytes",
    ):
        assert key in on_disk, key
    assert on_disk["providers"] == ["CPUExecutionProvider"]
    assert on_disk["file_bytes"] == path.stat().st_size
    assert (on_disk["variant"], on_disk["size"], on_disk["contract"], on_disk["opset"]) == ("small", 140, "uint8", 18)


def test_reexport_is_byte_identical(exported, smoke_weights, tmp_path):
    first = exported["uint8"][0]
    again = tmp_path / first.name
    export_da3(smoke_weights, again, "small", size=SIZE, contract="uint8", validate=False)
    assert again.read_bytes() == first.read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == [first.name, first.name + ".validation.json"]


def test_export_patches_are_undone():
    _needs_export_stack()
    from depth_anything_3.model.dinov2.layers import rope

    from stereo3d.models.da3.model import export_patches

    before = rope.PositionGetter.__call__, rope.RotaryPositionEmbedding2D.forward
    with export_patches():
        assert rope.PositionGetter.__call__ is not before[0]
    assert (rope.PositionGetter.__call__, rope.RotaryPositionEmbedding2D.forward) == before


def _seeded_small():
    """A seeded random DA3 Small, depth only: (net, float-contract module)."""
    _needs_export_stack()
    import torch

    from stereo3d.models.da3.model import build_da3, depth_module

    torch.manual_seed(0)
    net = build_da3("small")
    net.cam_enc = net.cam_dec = None
    return net, depth_module(net)


def test_patched_rope_path_matches_upstream():
    import torch

    from stereo3d.models.da3.model import export_patches

    _, model = _seeded_small()
    x = torch.from_numpy(normalise_image(_rgb(1)))
    with torch.no_grad():
        upstream = model(x)
        with export_patches():
            patched = model(x)
    assert torch.equal(upstream, patched)


# -- the script adapter ------------------------------------------------------------------------------


def _load_script():
    spec = importlib.util.spec_from_file_location("da3_to_onnx_script", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def recorded_exports(monkeypatch):
    import stereo3d.models.da3.export as da3

    calls = []
    monkeypatch.setattr(da3, "export_da3", lambda **kwargs: calls.append(kwargs) or {})
    return calls


def test_cli_maps_seed_options(recorded_exports, tmp_path):
    rc = _load_script().main(
        [
            "--variant",
            "both",
            "--src-root",
            str(tmp_path),
            "--out-dir",
            "out",
            "--size",
            "280",
            "--fold-preprocess",
            "--no-validate",
            "--fail-rel-mean-err",
            "1e-3",
        ]
    )
    assert rc == 0
    assert [
        (c["variant"], Path(c["weights"]).relative_to(tmp_path).as_posix(), Path(c["out_path"]).as_posix())
        for c in recorded_exports
    ] == [
        ("small", "Small/model.safetensors", "out/da3_small_280_u8.onnx"),
        ("base", "Base/model.safetensors", "out/da3_base_280_u8.onnx"),
    ]
    assert {(c["contract"], c["validate"], c["fail_rel_mean_err"], c["size"]) for c in recorded_exports} == {
        ("uint8", False, 1e-3, (280, 280))
    }


def test_cli_exports_an_aspect_tier(recorded_exports, tmp_path):
    argv = ["--src-root", str(tmp_path), "--out-dir", "out", "--aspect", "16:9", "--fold-preprocess"]
    assert _load_script().main(argv) == 0
    ((name, size),) = [(Path(c["out_path"]).name, c["size"]) for c in recorded_exports]
    assert (name, size) == ("da3_small_518x294_u8.onnx", (518, 294))


def test_cli_reports_bad_input_in_one_line(tmp_path, caplog):
    assert _load_script().main(["--src-root", str(tmp_path), "--out-dir", str(tmp_path), "--size", "141"]) == 1
    (record,) = [r for r in caplog.records if r.levelname == "ERROR"]
    assert "multiple of 14" in record.getMessage() and "\n" not in record.getMessage()


@pytest.fixture
def restore_logging():
    import logging

    root = logging.getLogger()
    saved = root.handlers[:], root.level
    yield
    for handler in root.handlers:
        if handler not in saved[0]:
            handler.close()
    root.handlers[:], root.level = saved[0], saved[1]
    logging.captureWarnings(False)


def test_snakemake_adapter_passes_params(recorded_exports, tmp_path, restore_logging):
    class Named(SimpleNamespace):
        def get(self, key, default=None):
            return getattr(self, key, default)

        def keys(self):
            return vars(self).keys()

    onnx = tmp_path / "da3_small_140x84_u8.onnx"
    smk = SimpleNamespace(
        input=Named(weights="w/Small/model.safetensors"),
        output=Named(onnx=str(onnx), validation=str(onnx) + ".validation.json"),
        params=Named(
            model={"variant": "small", "width": 140, "height": 84, "contract": "uint8"},
            opset=18,
            validate=True,
            exporter="dynamo",
        ),
        config={"export": {"fail_rel_mean_err": 0.01}},
        log=[str(tmp_path / "export.log")],
    )
    _load_script().run_snakemake(smk)
    assert (tmp_path / "export.log").is_file()
    assert recorded_exports == [
        dict(
            weights="w/Small/model.safetensors",
            out_path=onnx,
            variant="small",
            size=(140, 84),
            contract="uint8",
            opset=18,
            device="cpu",
            validate=True,
            fail_rel_mean_err=0.01,
            exporter="dynamo",
        )
    ]


def test_legacy_exporter_also_gives_static_output_dims(smoke_weights, tmp_path):
    import onnx

    path = tmp_path / "da3_small_140.onnx"
    report = export_da3(smoke_weights, path, "small", size=SIZE, exporter="legacy")
    assert report["rel_mean_err"] <= 1e-5
    (out,) = onnx.load(str(path), load_external_data=False).graph.output
    assert [d.dim_param or d.dim_value for d in out.type.tensor_type.shape.dim] == ["batch", SIZE, SIZE]


def test_mismatch_above_the_limit_leaves_no_model(exported, smoke_weights, tmp_path, monkeypatch):
    import onnx

    import stereo3d.models.da3.export as da3
    from stereo3d.errors import ExportMismatch

    # Reuse the fixture's graph instead of exporting again: only the validation outcome matters here.
    monkeypatch.setattr(da3, "_export_graph", lambda *args: onnx.load(str(exported["float"][0])))
    out = tmp_path / exported["float"][0].name
    with pytest.raises(ExportMismatch, match="exceeds the limit 1e-12"):
        export_da3(smoke_weights, out, "small", size=SIZE, fail_rel_mean_err=1e-12)
    assert list(tmp_path.iterdir()) == []


# -- aspect tiers ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tier_exports(tmp_path_factory):
    """The session's exports of every default tier at longest side 140 (`snakemake exports`, validated)."""
    _needs_export_stack()
    return export_cache(tmp_path_factory) / "models/DA3"


@pytest.mark.parametrize("tier", ["16:9", "4:3", "1:1", "2.39:1", "9:16"])
def test_every_aspect_tier_exports_and_validates(tier_exports, tier):
    import onnx

    from stereo3d.models.da3.tiers import parse_aspect, tier_shape

    width, height = tier_shape(parse_aspect(tier), SIZE)
    path = tier_exports / da3_onnx_name("small", (width, height), "uint8")
    report = json.loads(validation_path(path).read_text())
    assert report["rel_mean_err"] <= 1e-5
    assert report["batches"]["1"]["output_shape"] == [1, height, width]
    assert (report["width"], report["height"], report["size"]) == (width, height, SIZE)
    meta = read_metadata(path)
    assert (meta["stereo3d.width"], meta["stereo3d.height"]) == (str(width), str(height))
    # The positional embedding is a constant at this grid, and the 37x37 table it came from is not in the graph.
    model = onnx.load(str(path), load_external_data=False)
    (inp,) = model.graph.input
    assert [d.dim_param or d.dim_value for d in inp.type.tensor_type.shape.dim] == ["batch", height, width, 3]
    tables = {tuple(t.dims) for t in model.graph.initializer if len(t.dims) == 3 and t.dims[-1] == 384}
    assert (1, 1 + (width // 14) * (height // 14), 384) in tables
    assert (1, 1370, 384) not in tables
    assert report["positional_embedding"] == {"folded": True, "patches": [height // 14, width // 14]}


def test_folding_the_positions_changes_no_value_and_is_undone():
    import torch

    from stereo3d.models.da3.model import folded_positions

    net, model = _seeded_small()
    x = torch.from_numpy(normalise_image(np.random.default_rng(2).integers(0, 256, (1, 84, 140, 3), dtype=np.uint8)))
    vit = net.backbone.pretrained
    with torch.no_grad():
        upstream = model(x)
        with folded_positions(net, 140, 84):
            folded = model(x)
            with pytest.raises(ValueError, match="folded for 140x84"):
                model(torch.zeros(1, 3, 140, 140))
    assert torch.equal(upstream, folded)
    assert "interpolate_pos_encoding" not in vars(vit) and "folded_pos_embed" not in dict(vit.named_buffers())


# -- Mono-Large ----------------------------------------------------------------------------------------


def test_mono_large_builds_and_exports_with_its_sky_output(tmp_path):
    """ViT-L + DPT with a sky head, from smoke weights in the hub layout, at 140x84 (a minute on two cores)."""
    _needs_export_stack()
    from stereo3d.demo.smoke import write_smoke_weights
    from stereo3d.models.da3.runtime import DepthModel, placement_for

    weights = write_smoke_weights(tmp_path / "Mono-Large" / "model.safetensors", "mono_large")
    path = tmp_path / da3_onnx_name("mono_large", (140, 84), "uint8")
    report = export_da3(weights, path, "mono_large", size=(140, 84), contract="uint8", fail_rel_mean_err=1e-5)
    weights.unlink()  # 1.3 GB
    assert report["outputs"] == ["depth", "sky"] and report["rel_mean_err"] <= 1e-5
    assert set(report["outputs_compared"]) == {"depth", "sky"}
    meta = read_metadata(path)
    assert (meta["stereo3d.variant"], meta["stereo3d.outputs"]) == ("mono_large", "depth,sky")
    assert ">= 0.3" in meta["stereo3d.sky_semantics"]
    model = DepthModel(_session(path), path)
    assert model.has_sky and model.shape == (140, 84)
    placement = placement_for(160, 90, model.shape, "letterbox")
    depth = model.run(np.zeros((2, placement.height, placement.width, 3), np.uint8), placement)
    assert depth.shape == (2, placement.height, placement.width)
