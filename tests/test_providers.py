"""Which provider runs a model: ``auto`` on the devices ONNX Runtime really finds, explicit names, the precision's
options, the fallback from one provider to the next with its own options, TensorRT's engine key and profile.

Sessions are real where the provider runs here (the CPU provider everywhere; OpenVINO on a machine with an Intel
device and the plugin installed). The plans for GPUs are checked on the options handed to ONNX Runtime, on a
machine described as having them: TensorRT and CUDA cannot run on this CPU machine.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

import harness
import numpy as np
import onnxruntime
import pytest

from stereo3d.errors import BadModel
from stereo3d.runtime import providers as P
from stereo3d.runtime import sessions
from stereo3d.runtime.onnxfile import graph_inputs
from stereo3d.runtime.sessions import SessionOptions, engine_key, open_session, trt_profile

TRT, CUDA, CPU, OPENVINO = (P.PROVIDERS[n].ep for n in ("tensorrt", "cuda", "cpu", "openvino"))
NVIDIA_MACHINE = P.Machine(
    devices=(P.Device(TRT, "gpu", "NVIDIA"), P.Device(CUDA, "gpu", "NVIDIA"), P.Device(CPU, "cpu", "AMD")),
    installed=frozenset({TRT, CUDA, CPU}),
)
INTEL_MACHINE = P.Machine(
    devices=(P.Device(CPU, "cpu", "Intel"), P.Device(OPENVINO, "npu", "Intel", "npu"),
             P.Device(OPENVINO, "gpu", "Intel", "gpu"), P.Device(OPENVINO, "cpu", "Intel", "cpu")),
    installed=frozenset({TRT, CUDA, CPU, OPENVINO}),
    problems={TRT: "no NVIDIA GPU", CUDA: "no NVIDIA GPU"},
)  # fmt: skip


@pytest.fixture(scope="module")
def da3_model(tmp_path_factory) -> Path:
    """A smoke DA3 export (16:9 tier at 140, uint8, dynamic batch) from the session's export cache."""
    return harness.export_cache(tmp_path_factory) / harness.DA3_MODELS / "da3_small_140x84_u8.onnx"


def _eps(attempt: P.Attempt) -> list[str]:
    return [ep for ep, _ in attempt.providers]


def test_auto_prefers_tensorrt_then_cuda_then_the_cpu_on_an_nvidia_machine():
    plan = P.plan("auto", NVIDIA_MACHINE, P.Request())
    assert [_eps(a) for a in plan.attempts] == [[TRT, CUDA, CPU], [CUDA, CPU], [CPU]]
    assert plan.skipped == ()


def test_cuda_keeps_its_options_when_tensorrt_cannot_open():
    # ONNX Runtime's own retry reopens CUDA without options; our next attempt is CUDA with the job's device and bound.
    request = P.Request(device_id=3, gpu_mem_limit_mb=1024, precision="exact")
    after_tensorrt = P.plan(["tensorrt", "cuda", "cpu"], NVIDIA_MACHINE, request).attempts[1]
    assert after_tensorrt.providers[0] == (CUDA, {"device_id": "3", "use_tf32": "0",
                                                   "gpu_mem_limit": str(1024 << 20),
                                                   "arena_extend_strategy": "kSameAsRequested"})  # fmt: skip


def test_open_session_falls_back_to_the_next_attempt_with_its_own_options(da3_model, monkeypatch, caplog):
    # TensorRT and CUDA are described as present; on this machine they fail to open for real, and each next
    # attempt is opened with the options the plan gave it (what ONNX Runtime is handed is recorded).
    handed = []
    real_open = sessions._open

    def recording(ort, path, attempt, options):
        handed.append(attempt.providers)
        return real_open(ort, path, attempt, options)

    monkeypatch.setattr(sessions, "_open", recording)
    monkeypatch.setattr(P, "machine", lambda: NVIDIA_MACHINE)
    if CUDA not in onnxruntime.get_available_providers():
        pytest.skip("this onnxruntime build has no CUDA provider to fail with")
    with caplog.at_level(logging.INFO, logger=sessions.log.name):
        session = open_session(da3_model, SessionOptions(providers="auto", device_id=1, gpu_mem_limit_mb=512))
    assert session.get_providers() == [CPU]
    assert [[ep for ep, _ in providers] for providers in handed] == [[TRT, CUDA, CPU], [CUDA, CPU], [CPU]]
    assert dict(handed[1])[CUDA]["device_id"] == "1" and dict(handed[1])[CUDA]["gpu_mem_limit"] == str(512 << 20)
    lines = [r.getMessage() for r in caplog.records if r.name == sessions.log.name and "running on" in r.getMessage()]
    assert len(lines) == 1 and "the CPU" in lines[0] and "tensorrt" in lines[0] and "failed to open it" in lines[0]


def test_precision_sets_each_providers_arithmetic():
    exact, fast = P.Request(precision="exact"), P.Request(precision="fast")
    assert P.PROVIDERS["tensorrt"].options(exact, "gpu")["trt_fp16_enable"] == "False"
    assert P.PROVIDERS["tensorrt"].options(fast, "gpu")["trt_fp16_enable"] == "True"
    assert P.PROVIDERS["cuda"].options(exact, "gpu")["use_tf32"] == "0"
    assert P.PROVIDERS["cuda"].options(fast, "gpu")["use_tf32"] == "1"
    # OpenVINO's default on an AMX CPU is bf16: exact asks for float32 explicitly, fast leaves the device's default
    assert json.loads(P.PROVIDERS["openvino"].options(exact, "cpu")["load_config"]) == {
        "CPU": {"INFERENCE_PRECISION_HINT": "f32"}
    }
    assert "load_config" not in P.PROVIDERS["openvino"].options(fast, "gpu")


def test_auto_takes_an_intel_gpu_then_the_cpus_fast_path_and_leaves_the_npu_to_those_who_name_it():
    auto = P.plan("auto", INTEL_MACHINE, P.Request())
    assert [(a.device.ep, a.device.kind) for a in auto.attempts] == [(OPENVINO, "gpu"), (OPENVINO, "cpu"), (CPU, "cpu")]
    assert dict(auto.skipped) == {"tensorrt": "no NVIDIA GPU", "cuda": "no NVIDIA GPU"}
    cpu_only = P.Machine(tuple(d for d in INTEL_MACHINE.devices if d.kind == "cpu"), INTEL_MACHINE.installed)
    assert [a.device.ep for a in P.plan("auto", cpu_only, P.Request()).attempts] == [OPENVINO, CPU]
    assert "openvino" not in dict(P.plan("auto", cpu_only, P.Request()).skipped)  # it runs, on the CPU
    assert auto.attempts[0].handles[0] == "gpu" and not auto.attempts[0].built_in_only  # a plugin: on its device
    named = P.plan(["openvino:npu", "cpu"], INTEL_MACHINE, P.Request())
    assert [(a.device.ep, a.device.kind) for a in named.attempts] == [(OPENVINO, "npu"), (CPU, "cpu")]


def test_a_named_provider_that_cannot_run_is_skipped_with_its_reason():
    plan = P.plan(["tensorrt", "openvino", "nosuch", "cpu"], INTEL_MACHINE, P.Request())
    assert dict(plan.skipped) == {"tensorrt": "no NVIDIA GPU", "nosuch": "not installed"}
    assert [a.device.ep for a in plan.attempts] == [OPENVINO, OPENVINO, OPENVINO, CPU]
    with pytest.raises(ValueError, match="device kind"):
        P.plan(["openvino:tpu"], INTEL_MACHINE, P.Request())


def test_a_model_can_exclude_a_provider():
    plan = P.plan("auto", NVIDIA_MACHINE, P.Request(), exclude=("tensorrt",))
    assert [_eps(a) for a in plan.attempts] == [[CUDA, CPU], [CPU]]


def test_auto_on_this_machine_opens_a_real_session_and_logs_one_line(da3_model, caplog):
    with caplog.at_level(logging.INFO, logger=sessions.log.name):
        session = open_session(da3_model, SessionOptions(providers="auto", threads=1))
    device = P.plan("auto", P.machine(), P.Request()).attempts[0].device
    assert session.get_providers()[0] == device.ep
    lines = [r.getMessage() for r in caplog.records if r.name == sessions.log.name]
    assert len(lines) == 1 and f"running on {device.label}, precision exact" in lines[0]
    for ep, why in P.machine().problems.items():  # a better provider that is installed and cannot run says why
        assert f"{P.short_name(ep)}: {why}" in lines[0]


def test_auto_asks_no_provider_without_a_device_so_onnx_runtime_prints_no_error(da3_model):
    # ONNX Runtime writes its provider errors ("Failed to load library", "EP Error") to the process's own
    # stdout/stderr, past Python's logging: a child process shows them.
    code = (
        "import logging, sys; logging.basicConfig(level=logging.INFO, stream=sys.stdout)\n"
        "from stereo3d.runtime.sessions import SessionOptions, open_session\n"
        f"open_session({str(da3_model)!r}, SessionOptions(providers='auto', threads=1))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True)
    output = done.stdout + done.stderr
    assert "running on" in output
    for sign in ("EP Error", "Failed to load library", "Failed to create", "[E:onnxruntime"):
        assert sign not in output


def test_openvino_exact_depth_matches_the_cpu_provider(da3_model):
    devices = [d for d in P.machine().devices if d.ep == OPENVINO]
    if not devices:
        reason = P.machine().why_not(OPENVINO)
        pytest.skip(f"OpenVINO cannot run here: {reason}")
    frames = np.random.default_rng(0).integers(0, 256, (2, 84, 140, 3), dtype=np.uint8)
    reference = open_session(da3_model, SessionOptions(providers=("cpu",))).run(["depth"], {"image": frames})[0]
    session = open_session(da3_model, SessionOptions(providers=("openvino",), precision="exact"))
    assert session.get_providers()[0] == OPENVINO
    depth = session.run(["depth"], {"image": frames})[0]
    # the export's own validation tolerance (export.fail_rel_mean_err): float32 rounding of another provider
    assert np.mean(np.abs(depth - reference)) / np.mean(np.abs(reference)) < 1e-3


def test_a_bad_provider_list_is_one_clear_error(da3_model):
    with pytest.raises(BadModel, match="neither 'auto' nor a list"):
        open_session(da3_model, SessionOptions(providers="fastest"))


def test_the_tensorrt_engine_folder_is_keyed_by_the_models_bytes_and_precision(tmp_path):
    first, second = tmp_path / "a" / "da3.onnx", tmp_path / "b" / "da3.onnx"
    for path, content in ((first, b"smoke weights"), (second, b"real weights")):
        path.parent.mkdir()
        path.write_bytes(content)
    assert engine_key(first, "exact") != engine_key(second, "exact")  # same name, other bytes: another engine
    assert engine_key(first, "exact") != engine_key(first, "fast")
    second.write_bytes(b"smoke weights")
    assert engine_key(first, "fast") == engine_key(second, "fast")  # moved or renamed: the same engine
    request = sessions.tensorrt_request(first, SessionOptions(trt_cache_dir=str(tmp_path / "trt"), precision="fast"))
    assert Path(request.trt_cache_dir) == tmp_path / "trt" / engine_key(first, "fast")
    assert P.PROVIDERS["tensorrt"].options(request, "gpu")["trt_engine_cache_path"] == request.trt_cache_dir


def test_the_tensorrt_profile_spans_batch_one_to_the_configured_batch(da3_model):
    inputs = graph_inputs(da3_model)
    assert inputs == {"image": ["batch", 84, 140, 3]}
    assert trt_profile(inputs, 8) == {
        "trt_profile_min_shapes": "image:1x84x140x3",
        "trt_profile_opt_shapes": "image:8x84x140x3",
        "trt_profile_max_shapes": "image:8x84x140x3",
    }
    assert trt_profile({"rgbd": [1, 4, 64, 96]}, 8) == {}  # NVDS's fixed shapes need no profile


def test_graph_inputs_reads_what_onnx_reads(da3_model):
    from conftest import needs_export_extra

    onnx = needs_export_extra("onnx")
    model = onnx.load(str(da3_model))
    expected = {
        i.name: [d.dim_value if d.HasField("dim_value") else d.dim_param for d in i.type.tensor_type.shape.dim]
        for i in model.graph.input
    }
    assert graph_inputs(da3_model) == expected
