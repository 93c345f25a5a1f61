"""NVDS runtime: causal window over cached features, letterboxing, graph choice, providers; no torch needed."""

from __future__ import annotations

import dataclasses
import logging
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from stereo3d.errors import BadModel
from stereo3d.models.nvds import runtime
from stereo3d.models.nvds.runtime import letterbox, open_stabiliser, prepare_frame
from stereo3d.runtime import providers as P
from stereo3d.runtime.sessions import SessionOptions

WIDTH, HEIGHT = 96, 64
CPU = SessionOptions(providers=("cpu",), threads=1)
SPLIT_FILES = ["NVDS_Backbone_96x64.onnx", "NVDS_Head_96x64.onnx"]
MONOLITH_FILES = ["NVDS_Stabilizer_96x64.onnx"]


@pytest.fixture(scope="session")
def models(tmp_path_factory):
    from test_nvds_export import tiny_export  # one export per session, shared with the export tests

    return tiny_export(tmp_path_factory)


@pytest.fixture
def opened(monkeypatch):
    """``(file name, SessionOptions)`` of every session the stabiliser opens; the real sessions are opened."""
    calls = []
    real = runtime.open_session

    def recording(path, options=SessionOptions()):
        calls.append((Path(path).name, options))
        return real(path, options)

    monkeypatch.setattr(runtime, "open_session", recording)
    return calls


def _names(providers: list) -> list[str]:
    return [p if isinstance(p, str) else p[0] for p in providers]


def _frames(n, h, w, seed=0):
    """Moving gradient scenes with a near map that follows them."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    frames = []
    for i in range(n):
        near = (0.5 + 0.5 * np.sin((xx + 3 * i) / 9.0) * np.cos(yy / 7.0)).astype(np.float32)
        rgb = np.stack([near * 255, (xx / w) * 255, rng.uniform(0, 255, (h, w))], axis=-1).astype(np.uint8)
        frames.append((rgb, near))
    return frames


def test_split_graphs_are_preferred_and_outputs_have_the_near_size(models):
    stab = open_stabiliser(models, WIDTH, HEIGHT, CPU)
    assert stab.mode == "split" and stab.smoke
    for rgb, near in _frames(5, 80, 120):
        out = stab.step(rgb, near)
        assert out.shape == (80, 120) and out.dtype == np.float32 and np.isfinite(out).all()


def test_warm_up_frames_see_the_current_frame_four_times(models):
    frames = _frames(5, 64, 96)
    stab = open_stabiliser(models, WIDTH, HEIGHT, CPU)
    sequential = [stab.step(*f) for f in frames]
    alone = open_stabiliser(models, WIDTH, HEIGHT, CPU)
    for i in (1, 2):
        alone.reset()
        np.testing.assert_array_equal(alone.step(*frames[i]), sequential[i])
    alone.reset()
    assert not np.array_equal(alone.step(*frames[3]), sequential[3])  # frame 3 has its real window


def test_priming_with_the_three_previous_frames_continues_the_sequence(models):
    frames = _frames(5, 64, 96)
    stab = open_stabiliser(models, WIDTH, HEIGHT, CPU)
    sequential = [stab.step(*f) for f in frames]
    stab.reset()
    stab.prime(frames[1:4])
    np.testing.assert_array_equal(stab.step(*frames[4]), sequential[4])


def test_other_aspects_are_letterboxed_and_cropped_back():
    box = letterbox(90, 160, WIDTH, HEIGHT)  # 16:9 into 3:2
    assert (box.left, box.width) == (0, 96) and box.height == 54 and box.top == 5
    rgb = np.full((90, 160, 3), 200, np.uint8)
    near = np.full((90, 160), 0.75, np.float32)
    rgbd, box = prepare_frame(rgb, near, WIDTH, HEIGHT)
    assert rgbd.shape == (4, HEIGHT, WIDTH)
    assert np.all(rgbd[:, : box.top] == 0) and np.all(
        rgbd[:, box.top + box.height :] == 0
    )  # pads: normalised 0, near 0
    np.testing.assert_allclose(box.crop(rgbd[3]), 0.75, atol=1e-6)


def test_a_non_tier_aspect_runs_end_to_end(models):
    stab = open_stabiliser(models, WIDTH, HEIGHT, CPU)
    for rgb, near in _frames(2, 90, 160):
        out = stab.step(rgb, near)
        assert out.shape == (90, 160) and np.isfinite(out).all()


def test_monolith_is_the_fallback_and_agrees_with_the_split(models, tmp_path):
    shutil.copy(models / "NVDS_Stabilizer_96x64.onnx", tmp_path)
    mono = open_stabiliser(tmp_path, WIDTH, HEIGHT, CPU)
    split = open_stabiliser(models, WIDTH, HEIGHT, CPU)
    assert mono.mode == "monolith"
    for rgb, near in _frames(5, 64, 96):
        np.testing.assert_allclose(mono.step(rgb, near), split.step(rgb, near), rtol=0, atol=1e-5)


@pytest.mark.parametrize(
    ("graphs", "mode", "files"),
    [("monolith", "monolith", MONOLITH_FILES), ("split", "split", SPLIT_FILES), (None, "split", SPLIT_FILES)],
)
def test_the_graphs_asked_for_are_the_graphs_run(models, opened, graphs, mode, files):
    # Both the split pair and the monolith are in `models`: the choice alone decides which are opened.
    stab = open_stabiliser(models, WIDTH, HEIGHT, CPU, graphs=graphs)
    assert stab.mode == mode
    assert [name for name, _ in opened] == files
    rgb, near = _frames(1, 64, 96)[0]
    assert stab.step(rgb, near).shape == (64, 96)


@pytest.mark.parametrize(
    ("graphs", "present", "missing"),
    [("split", MONOLITH_FILES, SPLIT_FILES), ("monolith", SPLIT_FILES, MONOLITH_FILES)],
)
def test_graphs_asked_for_but_absent_are_named(models, tmp_path, graphs, present, missing):
    for name in present:
        shutil.copy(models / name, tmp_path)
    with pytest.raises(BadModel) as info:
        open_stabiliser(tmp_path, WIDTH, HEIGHT, CPU, graphs=graphs)
    message = str(info.value)
    assert "\n" not in message and f"({graphs}: {', '.join(missing)} missing" in message
    assert not any(name in message for name in present)


def test_missing_graphs_are_one_bad_model_line(tmp_path):
    with pytest.raises(BadModel, match="no NVDS graphs for tier 96x64"):
        open_stabiliser(tmp_path, WIDTH, HEIGHT, CPU)


def test_a_graph_of_another_tier_is_refused(models, tmp_path):
    shutil.copy(models / "NVDS_Stabilizer_96x64.onnx", tmp_path / "NVDS_Stabilizer_128x64.onnx")
    with pytest.raises(BadModel, match="for tier 96x64, expected 128x64"):
        open_stabiliser(tmp_path, 128, 64, CPU)


def test_tensorrt_requests_are_served_by_cuda(models, opened, caplog, monkeypatch):
    monkeypatch.setattr(runtime, "_warned_tensorrt", False)  # it warns once per process: start from none
    asked = SessionOptions(providers=("tensorrt", "cpu"), threads=1, gpu_mem_limit_mb=256)
    with caplog.at_level(logging.WARNING, logger=runtime.log.name):
        open_stabiliser(models, WIDTH, HEIGHT, asked)
        open_stabiliser(models, WIDTH, HEIGHT, asked, graphs="monolith")
    # Every session gets the request with TensorRT replaced by CUDA, the other settings kept (the arena bound).
    served = dataclasses.replace(asked, providers=("cuda", "cpu"), exclude=("tensorrt",))
    assert opened == [(name, served) for name in SPLIT_FILES + MONOLITH_FILES]
    nvidia = P.Machine(tuple(P.Device(P.PROVIDERS[n].ep, "gpu", "NVIDIA") for n in ("tensorrt", "cuda")),
                       frozenset())  # fmt: skip
    for providers in (served.providers, "auto"):  # auto on an NVIDIA machine leaves TensorRT out for NVDS too
        plan = P.plan(providers, nvidia, P.Request(), served.exclude)
        assert all("TensorrtExecutionProvider" not in _names(a.providers) for a in plan.attempts)
    warnings = [r for r in caplog.records if r.name == runtime.log.name and "TensorRT requested" in r.getMessage()]
    assert len(warnings) == 1 and warnings[0].levelno == logging.WARNING


def test_runtime_module_does_not_import_torch():
    code = "import sys, stereo3d.models.nvds.runtime; assert 'torch' not in sys.modules"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


def test_the_window_is_joined_by_a_concat_graph_written_as_onnx_writes_it():
    # The features stay on the sessions' device; a one-node graph, written by hand, joins each window there.
    from conftest import needs_export_extra

    from stereo3d.runtime.concat import concat_model, concat_session, join

    onnx = needs_export_extra("onnx")
    helper = onnx.helper
    inputs = [helper.make_tensor_value_info(f"x{i}", onnx.TensorProto.FLOAT, None) for i in range(4)]
    output = helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)
    node = helper.make_node("Concat", [f"x{i}" for i in range(4)], ["y"], axis=0)
    model = helper.make_model(helper.make_graph([node], "concat", inputs, [output]),
                              opset_imports=[helper.make_opsetid("", 13)], ir_version=8)  # fmt: skip
    assert concat_model() == model.SerializeToString()
    import onnxruntime as ort

    cpu = ort.InferenceSession(concat_model(), providers=["CPUExecutionProvider"])
    parts = [np.full((1, 2, 3), float(i), np.float32) for i in range(4)]
    values = [ort.OrtValue.ortvalue_from_numpy(part) for part in parts]
    joined = join(concat_session(cpu), values, ("cpu", 0))
    np.testing.assert_array_equal(joined.numpy(), np.concatenate(parts))


def test_under_fast_a_cuda_session_opens_float16_copies_that_stabilise_as_float32_does(models, tmp_path, monkeypatch):
    # NVDS has no TensorRT engine: under `fast` its CUDA sessions open float16 copies of the graphs (made once,
    # under the graph's content key), and any other provider the graphs themselves. CUDA is described as present;
    # here it fails to open for real and the CPU provider opens the float32 graph.
    import onnx
    import onnxruntime

    from stereo3d.runtime import sessions

    if "CUDAExecutionProvider" not in onnxruntime.get_available_providers():
        pytest.skip("this onnxruntime build has no CUDA provider to hand the copies to")
    handed = []
    real_open = sessions._open

    def recording(ort, path, attempt, options):
        handed.append((Path(path), attempt.device.ep))
        return real_open(ort, path, attempt, options)

    monkeypatch.setattr(sessions, "_open", recording)
    nvidia = P.Machine((P.Device(P.PROVIDERS["cuda"].ep, "gpu", "NVIDIA"), *P.machine().devices), frozenset())
    monkeypatch.setattr(P, "machine", lambda: nvidia)
    fast = SessionOptions(providers=("cuda", "cpu"), precision="fast", threads=1, fp16_dir=str(tmp_path / "fp16"))
    open_stabiliser(models, WIDTH, HEIGHT, fast)
    copies = sorted((tmp_path / "fp16").glob("*.onnx"))
    assert [path.name.split("-", 1)[1] for path in copies] == SPLIT_FILES
    cuda = [path for path, ep in handed if ep == "CUDAExecutionProvider"]
    cpu = [path for path, ep in handed if ep == "CPUExecutionProvider"]
    assert sorted(cuda) == copies and cpu == [models / name for name in SPLIT_FILES]
    # Float16 inside, the graphs' float32 inputs and outputs kept.
    for copy, name in zip(copies, SPLIT_FILES):
        graph, original = onnx.load(str(copy)).graph, onnx.load(str(models / name)).graph
        assert {i.data_type for i in graph.initializer} >= {onnx.TensorProto.FLOAT16}
        for ours, theirs in ((graph.input, original.input), (graph.output, original.output)):
            assert [(v.name, v.type.tensor_type.elem_type) for v in ours] == [
                (v.name, v.type.tensor_type.elem_type) for v in theirs
            ]
    # Made once: the next job opens the same copies, untouched; `exact` and other providers never see them.
    stamps = [path.stat().st_mtime_ns for path in copies]
    handed.clear()
    open_stabiliser(models, WIDTH, HEIGHT, fast)
    assert [path.stat().st_mtime_ns for path in copies] == stamps and sorted(p for p, _ in handed[::2]) == copies
    handed.clear()
    open_stabiliser(models, WIDTH, HEIGHT, dataclasses.replace(fast, precision="exact"))
    assert all(path.parent == models for path, _ in handed)
    # What the copies compute, run on the CPU under the graphs' own names: the float32 near maps within float16's
    # rounding (the precision table has the full-size figure: bench/accel.py).
    as_named = tmp_path / "as-named"
    as_named.mkdir()
    for copy, name in zip(copies, SPLIT_FILES):
        shutil.copy(copy, as_named / name)
    half, full = open_stabiliser(as_named, WIDTH, HEIGHT, CPU), open_stabiliser(models, WIDTH, HEIGHT, CPU)
    for rgb, near in _frames(6, 64, 96):
        ours, theirs = half.step(rgb, near), full.step(rgb, near)
        assert np.abs(ours - theirs).max() <= 2e-2 and np.abs(ours - theirs).mean() <= 5e-3
