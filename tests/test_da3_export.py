"""DA3 export with smoke weights. Exports cost 40 CPU-s each (dynamo, the default; legacy 8), so each point reads an
export made once: the session's workflow exports (`snakemake exports`: DA3 Small, uint8, the legacy exporter the
tests' config names, at every aspect tier of longest side 140, from another process) and, made here,

- Small's float contract at the 16:9 tier's 140x84 by the dynamo exporter (its static output dims, and agreement
  with the workflow's uint8 export of the same shape);
- re-exports for the byte-identity test: the same float export by another process (the script), the workflow's
  16:9 tier in this one;
- Mono-Large at 42x28 with the float contract (dynamo): its sky output.

Independent references: eager PyTorch with the same smoke weights, the weights' own sha256, the known shapes."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from conftest import needs_export_extra
from harness import DA3_MODELS, export_cache

from stereo3d.errors import BadConfig
from stereo3d.models.da3.export import da3_onnx_name, export_da3, parse_da3_onnx_name
from stereo3d.models.da3.model import CONTRACTS, VARIANTS, normalise_image
from stereo3d.models.validation import read_metadata, validation_path

SIZE = 140  # the session's exports' longest side (tests/harness.py)
WIDTH, HEIGHT = SHAPE = (140, 84)  # its 16:9 tier: an aspect shape
MONO_SHAPE = (42, 28)  # 3x2 patches: Mono-Large's ViT-L costs by the token
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
    """contract -> (onnx path, report) of DA3 Small at 140x84. uint8: the workflow's 16:9 tier (the legacy exporter,
    as the tests' config says), its report read from disk; float: exported here by the dynamo exporter (the
    default), the report it returned."""
    uint8 = export_cache(tmp_path_factory) / DA3_MODELS / da3_onnx_name("small", SHAPE, "uint8")
    path = tmp_path_factory.mktemp("models") / da3_onnx_name("small", SHAPE, "float")
    report = export_da3(smoke_weights, path, "small", size=SHAPE, contract="float")
    return {"uint8": (uint8, json.loads(validation_path(uint8).read_text())), "float": (path, report)}


@pytest.fixture(scope="module")
def sessions(exported):
    """contract -> one ONNX Runtime (CPU) session on that export, shared: opening one takes seconds."""
    return {contract: _session(path) for contract, (path, _) in exported.items()}


@pytest.fixture(scope="module")
def reference(smoke_weights):
    """contract -> eager PyTorch DA3 Small (upstream code, unpatched) with the smoke weights, depth only."""
    from stereo3d.models.da3.checkpoint import load_da3_weights
    from stereo3d.models.da3.model import build_da3, depth_module

    net = build_da3("small")
    load_da3_weights(net, smoke_weights)
    net.cam_enc = net.cam_dec = None
    return {contract: depth_module(net, contract) for contract in CONTRACTS}


def _session(path):
    from stereo3d.runtime.sessions import SessionOptions, open_session

    return open_session(path, SessionOptions(providers=("cpu",)))


def _rgb(batch, seed=1, shape=SHAPE):
    width, height = shape
    return np.random.default_rng(seed).integers(0, 256, (batch, height, width, 3), dtype=np.uint8)


def _feed(rgb, contract):
    return rgb if contract == "uint8" else normalise_image(rgb)


def _torch_depth(module, x):
    import torch

    with torch.no_grad():
        return module(torch.from_numpy(x)).numpy()


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
def test_onnx_matches_pytorch(exported, sessions, reference, contract):
    report = exported[contract][1]
    x = _feed(_rgb(2, seed=3), contract)
    depth = sessions[contract].run(["depth"], {"image": x})[0]
    assert depth.shape == (2, HEIGHT, WIDTH) and depth.dtype == np.float32
    assert _rel(_torch_depth(reference[contract], x), depth) <= 1e-5
    # The export's own figures agree (its validation ran on another seeded image).
    assert report["rel_mean_err"] <= 1e-5
    assert report["batches"]["1"]["output_shape"] == [1, HEIGHT, WIDTH]
    assert report["batches"]["2"]["output_shape"] == [2, HEIGHT, WIDTH]


@pytest.mark.parametrize("contract", CONTRACTS)
def test_onnx_checker_full_check_passes(exported, contract):
    import onnx

    onnx.checker.check_model(str(exported[contract][0]), full_check=True)


@pytest.mark.parametrize(
    ("contract", "exporter", "image"),
    [("uint8", "legacy", ["batch", HEIGHT, WIDTH, 3]), ("float", "dynamo", ["batch", 3, HEIGHT, WIDTH])],
)
def test_only_the_batch_axis_is_dynamic_with_either_exporter(exported, contract, exporter, image):
    import onnx

    path, report = exported[contract]
    assert report["exporter"] == exporter
    model = onnx.load(str(path), load_external_data=False)
    (inp,), (out,) = model.graph.input, model.graph.output
    dims = [[d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim] for v in (inp, out)]
    assert dims == [image, ["batch", HEIGHT, WIDTH]]


@pytest.mark.parametrize("contract", CONTRACTS)
def test_batch_of_three_equals_three_single_frames(sessions, contract):
    session = sessions[contract]
    x = _feed(_rgb(3), contract)
    batched = session.run(["depth"], {"image": x})[0]
    assert batched.shape == (3, HEIGHT, WIDTH) and batched.dtype == np.float32
    singles = np.concatenate([session.run(["depth"], {"image": x[i : i + 1]})[0] for i in range(3)])
    assert _rel(singles, batched) < 1e-5


@pytest.mark.parametrize("contract", CONTRACTS)
def test_the_depth_stages_bound_batches_give_the_sessions_own_outputs(exported, sessions, contract):
    # DepthModel.infer feeds the batch by I/O binding (on a GPU: one upload, one download); the same numbers.
    from stereo3d.models.da3.runtime import DepthModel

    path = exported[contract][0]
    model = DepthModel(sessions[contract], path)
    x = _feed(_rgb(3, seed=4), contract)
    assert model.device == ("cpu", 0) and model.shape == SHAPE
    np.testing.assert_array_equal(model.infer(x)[0], model.session.run(["depth"], {"image": x})[0])


def test_float_and_uint8_contracts_agree(sessions):
    rgb = _rgb(2, seed=7)
    from_float = sessions["float"].run(["depth"], {"image": normalise_image(rgb)})[0]
    from_uint8 = sessions["uint8"].run(["depth"], {"image": rgb})[0]
    assert np.max(np.abs(from_float - from_uint8) / np.abs(from_float)) <= 1e-4


def test_smoke_depth_is_not_flat(sessions):
    depth = sessions["uint8"].run(["depth"], {"image": _rgb(1, seed=5)})[0]
    assert depth.max() > 2 * depth.min() > 0  # the demo renders it: visible variation


@pytest.mark.parametrize("contract", CONTRACTS)
def test_metadata_states_the_contract(exported, contract, smoke_weights):
    from stereo3d.models.validation import sha256_file

    meta = read_metadata(exported[contract][0])
    assert meta["stereo3d.model"] == "da3"
    assert (meta["stereo3d.variant"], meta["stereo3d.size"], meta["stereo3d.contract"]) == ("small", "140", contract)
    assert (meta["stereo3d.width"], meta["stereo3d.height"], meta["stereo3d.outputs"]) == ("140", "84", "depth")
    assert (meta["stereo3d.input_name"], meta["stereo3d.output_name"]) == ("image", "depth")
    assert meta["stereo3d.input_layout"] == ("NCHW" if contract == "float" else "NHWC")
    assert json.loads(meta["stereo3d.norm_mean"]) == [0.485, 0.456, 0.406]
    assert json.loads(meta["stereo3d.norm_std"]) == [0.229, 0.224, 0.225]
    assert "smaller = nearer" in meta["stereo3d.output_semantics"]
    # The workflow's export too came from these bytes: the same seed writes the same file.
    assert meta["stereo3d.weights_sha256"] == sha256_file(smoke_weights)
    assert meta["stereo3d.smoke"] == "true"


@pytest.mark.parametrize(("contract", "exporter"), [("uint8", "legacy"), ("float", "dynamo")])
def test_validation_json_sits_beside_the_model(exported, smoke_weights, contract, exporter):
    from stereo3d.models.validation import sha256_file

    path, report = exported[contract]
    on_disk = json.loads(validation_path(path).read_text())
    if contract == "float":  # exported in this process: the file holds what export_da3 returned
        assert on_disk == json.loads(json.dumps(report))
    for key in ("max_abs_err", "mean_abs_err", "rel_mean_err", "export_seconds", "nodes"):
        assert isinstance(on_disk[key], (int, float)) and on_disk[key] >= 0, key
    known = {
        "model": "da3",
        "variant": "small",
        "size": SIZE,
        "width": WIDTH,
        "height": HEIGHT,
        "contract": contract,
        "opset": 18,  # the schema's default (the workflow) and export_da3's
        "exporter": exporter,
        "device": "cpu",
        "weights_sha256": sha256_file(smoke_weights),
        "smoke": True,
        "outputs": ["depth"],
        "positional_embedding": {"folded": True, "patches": [HEIGHT // 14, WIDTH // 14]},
        "validated": True,
        "onnx_checker": "full_check passed",
        "output_shape": [2, HEIGHT, WIDTH],
        "providers": ["CPUExecutionProvider"],
        "file_bytes": path.stat().st_size,
    }
    assert {key: on_disk.get(key) for key in known} == known


def test_reexport_is_byte_identical(exported, smoke_weights, tmp_path):
    """Exports are reproducible, by either exporter: the dynamo export made here and the script's in another process
    and folder give the same bytes, and so do the workflow's legacy export (another process) and this one."""
    import subprocess
    import sys

    dynamo = exported["float"][0]
    script = [sys.executable, str(SCRIPT), "--src-root", str(smoke_weights.parents[1]), "--out-dir",
              str(tmp_path / "script"), "--size", str(SIZE), "--aspect", "16:9", "--no-validate"]  # fmt: skip
    subprocess.run(script, check=True, capture_output=True, timeout=600)
    assert (tmp_path / "script" / dynamo.name).read_bytes() == dynamo.read_bytes()
    legacy = exported["uint8"][0]
    again = tmp_path / legacy.name
    export_da3(smoke_weights, again, "small", size=SHAPE, contract="uint8", validate=False, exporter="legacy")
    assert again.read_bytes() == legacy.read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_file()) == [legacy.name, legacy.name + ".validation.json"]


def test_export_patches_are_undone():
    _needs_export_stack()
    from depth_anything_3.model.dinov2.layers import rope

    from stereo3d.models.da3.model import export_patches

    before = rope.PositionGetter.__call__, rope.RotaryPositionEmbedding2D.forward
    with export_patches():
        assert rope.PositionGetter.__call__ is not before[0]
    assert (rope.PositionGetter.__call__, rope.RotaryPositionEmbedding2D.forward) == before


def test_patched_rope_path_matches_upstream(reference):
    import torch

    from stereo3d.models.da3.model import export_patches

    model = reference["float"]
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
    """The params export.smk passes (model, opset, exporter); the workflow traces on the CPU and validates."""

    class Named(SimpleNamespace):
        def keys(self):
            return vars(self).keys()

    onnx = tmp_path / "da3_small_140x84_u8.onnx"
    smk = SimpleNamespace(
        input=Named(weights="w/Small/model.safetensors"),
        output=Named(onnx=str(onnx), validation=str(onnx) + ".validation.json"),
        params=Named(
            model={"variant": "small", "width": 140, "height": 84, "contract": "uint8"},
            opset=18,
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


def test_mismatch_above_the_limit_leaves_no_model(exported, smoke_weights, tmp_path, monkeypatch):
    import onnx

    import stereo3d.models.da3.export as da3
    from stereo3d.errors import ExportMismatch

    # Reuse the fixture's graph instead of exporting again: only the validation outcome matters here.
    monkeypatch.setattr(da3, "_export_graph", lambda *args: onnx.load(str(exported["float"][0])))
    out = tmp_path / exported["float"][0].name
    with pytest.raises(ExportMismatch, match="exceeds the limit 1e-12"):
        export_da3(smoke_weights, out, "small", size=SHAPE, fail_rel_mean_err=1e-12)
    assert list(tmp_path.iterdir()) == []


# -- aspect tiers ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tier_exports(tmp_path_factory):
    """The session's exports of the tests' tiers at longest side 140 (`snakemake exports`, validated): the default
    tiers less 2.39:1, whose shape test_tiers.py checks (tests/harness.py)."""
    _needs_export_stack()
    return export_cache(tmp_path_factory) / DA3_MODELS


@pytest.mark.parametrize(
    ("tier", "shape"),
    [("16:9", (140, 84)), ("4:3", (140, 112)), ("1:1", (140, 140)), ("9:16", (84, 140))],
)
def test_every_aspect_tier_exports_and_validates(tier_exports, reference, tier, shape):
    import onnx

    from stereo3d.models.da3.tiers import parse_aspect, tier_shape

    assert tier_shape(parse_aspect(tier), SIZE) == shape
    width, height = shape
    path = tier_exports / da3_onnx_name("small", shape, "uint8")
    # ONNX Runtime against eager PyTorch (the same seeded smoke weights as the session's exports) at this tier
    x = _rgb(2, seed=5, shape=shape)
    depth = _session(path).run(["depth"], {"image": x})[0]
    assert depth.shape == (2, height, width)
    assert _rel(_torch_depth(reference["uint8"], x), depth) <= 1e-5
    report = json.loads(validation_path(path).read_text())
    assert report["batches"]["1"]["output_shape"] == [1, height, width]
    assert (report["width"], report["height"], report["size"]) == (width, height, SIZE)
    meta = read_metadata(path)
    assert (meta["stereo3d.width"], meta["stereo3d.height"]) == (str(width), str(height))
    # Fixed sides in and out, and the positional embedding a constant at this grid, without the 37x37 table it
    # came from.
    model = onnx.load(str(path), load_external_data=False)
    (inp,), (out,) = model.graph.input, model.graph.output
    dims = [[d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim] for v in (inp, out)]
    assert dims == [["batch", height, width, 3], ["batch", height, width]]
    # (an initializer, or a Constant node as the legacy exporter leaves it)
    constants = [
        *model.graph.initializer,
        *(a.t for n in model.graph.node if n.op_type == "Constant" for a in n.attribute if a.name == "value"),
    ]
    tables = {tuple(t.dims) for t in constants if len(t.dims) == 3 and t.dims[-1] == 384}  # fmt: skip
    assert (1, 1 + (width // 14) * (height // 14), 384) in tables
    assert (1, 1370, 384) not in tables
    assert report["positional_embedding"] == {"folded": True, "patches": [height // 14, width // 14]}


def test_folding_the_positions_changes_no_value_and_is_undone(reference):
    import torch

    from stereo3d.models.da3.model import folded_positions

    model = reference["float"]
    net = model.net
    x = torch.from_numpy(normalise_image(_rgb(1, seed=2)))
    vit = net.backbone.pretrained
    with torch.no_grad():
        upstream = model(x)
        with folded_positions(net, WIDTH, HEIGHT):
            folded = model(x)
            with pytest.raises(ValueError, match="folded for 140x84"):
                model(torch.zeros(1, 3, 140, 140))
    assert torch.equal(upstream, folded)
    assert "interpolate_pos_encoding" not in vars(vit) and "folded_pos_embed" not in dict(vit.named_buffers())


# -- Mono-Large ----------------------------------------------------------------------------------------


def test_mono_large_exports_its_sky_output_with_the_float_contract_through_dynamo(tmp_path):
    """ViT-L + DPT with a sky head, from smoke weights in the hub layout (1.3 GB), at 42x28."""
    _needs_export_stack()
    from stereo3d.demo.smoke import write_smoke_weights
    from stereo3d.models.da3.runtime import SKY_THRESHOLD, DepthModel, place, placement_for, to_model_input

    weights = write_smoke_weights(tmp_path / "Mono-Large" / "model.safetensors", "mono_large")
    path = tmp_path / da3_onnx_name("mono_large", MONO_SHAPE, "float")
    report = export_da3(weights, path, "mono_large", size=MONO_SHAPE, contract="float", fail_rel_mean_err=1e-5)
    weights.unlink()
    assert (report["exporter"], report["contract"]) == ("dynamo", "float")
    assert report["outputs"] == ["depth", "sky"] and report["rel_mean_err"] <= 1e-5
    assert set(report["outputs_compared"]) == {"depth", "sky"}
    meta = read_metadata(path)
    assert (meta["stereo3d.variant"], meta["stereo3d.outputs"]) == ("mono_large", "depth,sky")
    assert ">= 0.3" in meta["stereo3d.sky_semantics"]
    model = DepthModel(_session(path), path)
    assert model.has_sky and model.shape == MONO_SHAPE
    placement = placement_for(160, 90, model.shape, "letterbox")  # 42x24 in the 42x28 canvas
    frames = _rgb(2, seed=8, shape=(placement.width, placement.height))
    depth = model.run(frames, placement)
    assert depth.shape == (2, 24, 42)
    # Sky (the head's score >= 0.3) comes back as NaN, and only sky.
    sky = placement.crop(model.infer(to_model_input(place(frames, placement), "float"))[1])
    np.testing.assert_array_equal(np.isnan(depth), sky >= SKY_THRESHOLD)
