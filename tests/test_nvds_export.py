"""NVDS export at the tiny configuration: ONNX agrees with PyTorch, split with monolith; graphs are static."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import onnx
import pytest
import torch
from harness import shared_folder

from stereo3d.demo.smoke import write_smoke_checkpoint
from stereo3d.errors import BadConfig
from stereo3d.models.nvds.export import export_nvds, onnx_names
from stereo3d.models.nvds.graph import FORBIDDEN_OPS, op_census
from stereo3d.models.nvds.model import NvdsConfig
from stereo3d.models.validation import read_metadata, validation_path

WIDTH, HEIGHT = 96, 64
REPO = Path(__file__).resolve().parents[1]


def tiny_export(tmp_path_factory) -> Path:
    """Smoke weights + split and monolith exports, made once per session (shared with the stabiliser tests)."""

    def build(out: Path) -> None:
        torch.set_num_threads(1)
        write_smoke_checkpoint(out / "NVDS_Stabilizer.pth", NvdsConfig.tiny(), seed=0)
        export_nvds(out / "NVDS_Stabilizer.pth", out, WIDTH, HEIGHT, config=NvdsConfig.tiny())

    return shared_folder(tmp_path_factory, "nvds_tiny", build)


@pytest.fixture(scope="session")
def models(tmp_path_factory) -> Path:
    return tiny_export(tmp_path_factory)


def _report(models: Path, role: str) -> dict:
    return json.loads(validation_path(models / onnx_names(WIDTH, HEIGHT)[role]).read_text())


def onnx_run(path: Path, feeds: dict) -> list:
    """The graph's outputs in a plain ONNX Runtime CPU session (not the package's sessions module)."""
    import onnxruntime

    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    arrays = {name: value.numpy() if hasattr(value, "numpy") else value for name, value in feeds.items()}
    return session.run(None, arrays)


def test_the_monolith_and_the_chained_split_graphs_compute_what_pytorch_computes(models):
    """On a window the exporter never saw: the monolith, and the backbone run per frame chained into the head, give
    the PyTorch model's output (the faithful reference, loaded from the same checkpoint) within 1e-5."""
    import numpy as np

    from stereo3d.models.nvds.checkpoint import load_nvds
    from stereo3d.models.nvds.export import validation_window

    window = torch.from_numpy(validation_window(WIDTH, HEIGHT, seed=7))
    reference = load_nvds(models / "NVDS_Stabilizer.pth", NvdsConfig.tiny(), attention="faithful").eval()
    with torch.no_grad():
        expected = reference(window).numpy()
    names = onnx_names(WIDTH, HEIGHT)
    (monolith,) = onnx_run(models / names["monolith"], {graph_input(models / names["monolith"]): window})
    np.testing.assert_allclose(monolith, expected, atol=1e-5, rtol=0)
    backbone, head = models / names["backbone"], models / names["head"]
    per_frame = [onnx_run(backbone, {graph_input(backbone): window[:, t].contiguous()}) for t in range(4)]
    stacked = [np.concatenate([frame[s] for frame in per_frame]) for s in range(len(per_frame[0]))]
    head_inputs = [i.name for i in onnx.load(str(head), load_external_data=False).graph.input]
    feeds = dict(zip(head_inputs, [*stacked, window[:, -1, 0:3].contiguous().numpy()], strict=True))
    (split,) = onnx_run(head, feeds)
    np.testing.assert_allclose(split, expected, atol=1e-5, rtol=0)
    for role in ("backbone", "head", "monolith"):
        report = _report(models, role)
        assert report["opset"] == 17 and report["tier"] == "96x64" and report["smoke"] is True


def graph_input(path: Path) -> str:
    (only,) = onnx.load(str(path), load_external_data=False).graph.input
    return only.name


def test_head_and_monolith_graphs_have_no_dynamic_ops(models):
    for role in ("head", "monolith", "backbone"):
        model = onnx.load(str(models / onnx_names(WIDTH, HEIGHT)[role]))
        census = op_census(model)
        assert not FORBIDDEN_OPS & set(census), (role, census)
        assert all(d.dim_value > 0 for i in model.graph.input for d in i.type.tensor_type.shape.dim)
        assert {o.version for o in model.opset_import if o.domain in ("", "ai.onnx")} == {17}


def test_head_graph_moves_little_data(models):
    # The static attention gathers each window's keys from one table: the 2-block tiny head has ~60 layout
    # operators (most of them folded into constants by ONNX Runtime), where rolls, pad + slice unfolds and
    # per-group concatenations gave 511.
    census = op_census(onnx.load(str(models / onnx_names(WIDTH, HEIGHT)["head"])))
    layout_ops = ("Transpose", "Slice", "Concat", "Pad", "Gather", "Split", "Unsqueeze", "Squeeze")
    layout = sum(census[op] for op in layout_ops)
    assert layout <= 80, census
    assert census["Slice"] <= 16 and census["Concat"] <= 8, census


def test_gelus_are_exported_in_the_order_onnx_runtime_fuses(models, tmp_path):
    import onnxruntime as ort

    for role in ("backbone", "head", "monolith"):
        path = models / onnx_names(WIDTH, HEIGHT)[role]
        erfs = op_census(onnx.load(str(path)))["Erf"]
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
        options.optimized_model_filepath = str(tmp_path / f"{role}.onnx")
        ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        fused = op_census(onnx.load(options.optimized_model_filepath))
        assert erfs > 0 and fused["Gelu"] == erfs and fused["Erf"] == 0, (role, fused)


def test_contract_facts_are_in_the_metadata(models):
    meta = read_metadata(models / "NVDS_Head_96x64.onnx")
    assert meta["stereo3d.model"] == "nvds" and meta["stereo3d.mode"] == "split-head"
    assert (meta["stereo3d.tier_width"], meta["stereo3d.tier_height"]) == ("96", "64")
    assert meta["stereo3d.output"] == "near" and "do not invert" in meta["stereo3d.output_semantics"]
    assert meta["stereo3d.smoke"] == "1" and len(meta["stereo3d.weights_sha256"]) == 64
    assert read_metadata(models / "NVDS_Backbone_96x64.onnx")["stereo3d.outputs"] == "feat0,feat1,feat2,feat3"


@pytest.mark.parametrize(("mode", "roles"), [("monolith", ["monolith"]), ("split", ["backbone", "head"])])
def test_reexport_is_byte_identical(models, tmp_path, mode, roles):
    # The session's export made both modes at once, from another checkpoint path into another folder, with the
    # ONNX Runtime check: the bytes of each graph must depend on none of that. The split pair is what the
    # workflow runs.
    checkpoint = tmp_path / "weights" / "NVDS_Stabilizer.pth"
    checkpoint.parent.mkdir()
    shutil.copy(models / "NVDS_Stabilizer.pth", checkpoint)
    out = tmp_path / "exports"
    again = export_nvds(checkpoint, out, WIDTH, HEIGHT, modes=(mode,), ort_check=False, config=NvdsConfig.tiny())
    names = [onnx_names(WIDTH, HEIGHT)[role] for role in roles]
    assert again == [out / name for name in names]
    for name in names:
        assert (out / name).read_bytes() == (models / name).read_bytes(), name


def test_tier_sides_must_be_multiples_of_32(models, tmp_path):
    with pytest.raises(BadConfig, match="multiples of 32"):
        export_nvds(models / "NVDS_Stabilizer.pth", tmp_path, 100, 64, config=NvdsConfig.tiny())


def test_cli_rejects_a_bad_tier_in_one_line():
    result = subprocess.run(
        [
            sys.executable,
            str(REPO / "scripts/export_nvds_onnx.py"),
            "--split",
            "--width",
            "500",
            "--height",
            "288",
            "--checkpoint",
            "absent.pth",
        ],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 1
    assert "must be positive multiples of 32" in result.stderr and "Traceback" not in result.stderr


def test_source_root_supplies_the_reference_model(tmp_path):
    from stereo3d.demo.smoke import random_state_dict
    from stereo3d.models.nvds.export import _reference_model

    (tmp_path / "full_model.py").write_text(
        "from stereo3d.models.nvds.model import NVDS as _Ours, NvdsConfig\n"
        "class NVDS(_Ours):\n"
        "    def __init__(self):\n"
        "        super().__init__(NvdsConfig.tiny())\n"
    )
    state = random_state_dict(NvdsConfig.tiny(), seed=0)
    ref = _reference_model(NvdsConfig.tiny(), state, tmp_path / "w.pth", tmp_path)
    assert type(ref).__module__ == "full_model" and not ref.training
    with pytest.raises(BadConfig, match="no full_model.py"):
        _reference_model(NvdsConfig.tiny(), state, tmp_path / "w.pth", tmp_path / "nowhere")
