"""The bf16 path of x86 CPUs that ONNX Runtime cannot reach (OpenVINO's own runtime), and the NVIDIA path's log and
arithmetic: which CPUs take the bf16 route (from their feature flags), what a session on it computes, the count of
nodes left on the CPU, TensorRT's float32 without TF32, and a GPU machine without the ``nvidia`` extra.

Sessions are real where they run here (ONNX Runtime's CPU provider, OpenVINO's runtime on this CPU); plans for other
CPUs are checked on machines described by their flags.
"""

from __future__ import annotations

import logging
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from test_windows import da3_graph

from stereo3d.runtime import openvino_runtime as OV
from stereo3d.runtime import providers as P
from stereo3d.runtime import sessions
from stereo3d.runtime.sessions import SessionOptions, open_session

CPU, OPENVINO, TRT = (P.PROVIDERS[n].ep for n in ("cpu", "openvino", "tensorrt"))
# /proc/cpuinfo flags (abridged) of the CPUs in question.
ZEN4_EPYC = "fpu sse2 avx2 avx512f avx512bw avx512_bf16 avx512_vnni vaes".split()  # AMD since Zen 4
SAPPHIRE_RAPIDS = "fpu sse2 avx2 avx512f avx512_bf16 amx_bf16 amx_tile amx_int8".split()  # Intel AMX
THIS_KIND = "fpu sse2 avx avx2 fma f16c bmi2".split()  # an AVX2 CPU (as this machine's EPYC)


def machine(flags, vendor="AMD", intel_plugin=False, runtime=True) -> P.Machine:
    """A CPU machine with these flags: the CPU provider, OpenVINO's runtime where installed, and the OpenVINO plugin's
    CPU device where the CPU is Intel's."""
    devices = [P.Device(CPU, "cpu", vendor)]
    installed = {CPU, OPENVINO}
    if intel_plugin:
        devices.append(P.Device(OPENVINO, "cpu", vendor, "cpu"))
    if runtime:
        devices.append(P.Device(OV.RUNTIME_EP, "cpu", vendor))
        installed.add(OV.RUNTIME_EP)
    return P.Machine(tuple(devices), frozenset(installed), cpu_bf16=OV.has_bf16(flags))


def first(plan: P.Plan) -> str:
    return P.short_name(plan.attempts[0].device.ep)


@pytest.mark.parametrize(
    ("flags", "bf16"),
    [(ZEN4_EPYC, True), (SAPPHIRE_RAPIDS, True), (THIS_KIND, False), (["FP32", "BF16", "INT8"], True), ([], False)],
    ids=["zen4", "sapphire_rapids", "avx2", "openvino_capabilities", "unknown"],
)
def test_bf16_arithmetic_is_read_from_the_cpus_flags(flags, bf16):
    assert OV.has_bf16(flags) is bf16


def test_auto_fast_takes_openvinos_runtime_on_a_non_intel_cpu_with_bf16_and_exact_never():
    zen4 = machine(ZEN4_EPYC)
    assert first(P.plan("auto", zen4, P.Request(precision="fast"))) == "openvino_runtime"
    assert [a.device.ep for a in P.plan("auto", zen4, P.Request(precision="fast")).attempts] == [OV.RUNTIME_EP, CPU]
    exact = P.plan("auto", zen4, P.Request(precision="exact"))
    assert [a.device.ep for a in exact.attempts] == [CPU] and "openvino_runtime" not in dict(exact.skipped)


def test_a_cpu_without_bf16_keeps_the_cpu_provider_and_says_why():
    plan = P.plan("auto", machine(THIS_KIND), P.Request(precision="fast"))
    assert first(plan) == "cpu"
    assert dict(plan.skipped)["openvino_runtime"] == "this CPU has no bf16 arithmetic (AVX-512-BF16 or AMX)"
    assert first(P.plan("auto", machine(ZEN4_EPYC, runtime=False), P.Request(precision="fast"))) == "cpu"


def test_an_intel_cpu_keeps_onnx_runtimes_openvino_plugin_first():
    intel = machine(SAPPHIRE_RAPIDS, vendor="Intel", intel_plugin=True)
    fast = P.plan("auto", intel, P.Request(precision="fast"))
    assert [P.short_name(a.device.ep) for a in fast.attempts] == ["openvino", "openvino_runtime", "cpu"]
    assert [P.short_name(a.device.ep) for a in P.plan("auto", intel, P.Request()).attempts] == ["openvino", "cpu"]


def test_this_machine_takes_the_route_only_if_its_cpu_has_bf16():
    here = P.machine()
    assert here.has_cpu_bf16() == OV.has_bf16(OV.cpu_flags())
    taken = first(P.plan("auto", here, P.Request(precision="fast"))) == "openvino_runtime"
    assert taken == (here.has_cpu_bf16() and OV.installed() and not any(d.ep == OPENVINO for d in here.devices))


@pytest.fixture(scope="module")
def graph(tmp_path_factory) -> Path:
    return da3_graph(tmp_path_factory.mktemp("graph") / "da3.onnx", 70, 42)


def test_openvinos_runtime_serves_a_model_as_an_onnx_runtime_session_does(graph, caplog):
    if not OV.installed():
        pytest.skip("openvino is not installed")
    from stereo3d.models.da3.runtime import DepthModel, placement_for

    with caplog.at_level(logging.INFO, logger=sessions.log.name):
        session = open_session(graph, SessionOptions(providers=("openvino_runtime",), precision="fast"))
    line = next(r.getMessage() for r in caplog.records if r.name == sessions.log.name)
    assert "with provider openvino_runtime" in line
    assert ("precision fast (bf16)" in line) == OV.has_bf16(OV.cpu_flags())
    reference = open_session(graph, SessionOptions(providers=("cpu",)))
    assert session.get_providers() == [OV.RUNTIME_EP]
    assert [(i.name, i.type, i.shape) for i in session.get_inputs()] == [
        (i.name, i.type, i.shape) for i in reference.get_inputs()
    ]
    assert session.get_modelmeta().custom_metadata_map == reference.get_modelmeta().custom_metadata_map
    frames = np.random.default_rng(0).integers(0, 256, (3, 42, 70, 3), dtype=np.uint8)
    ours, theirs = (DepthModel(s, graph) for s in (session, reference))  # through I/O binding, as the stage runs
    depth, expected = (m.run(frames, placement_for(70, 42, (70, 42), "letterbox")) for m in (ours, theirs))
    tolerance = 1e-2 if OV.has_bf16(OV.cpu_flags()) else 1e-6  # bf16 keeps 8 bits of mantissa
    np.testing.assert_allclose(depth, expected, rtol=tolerance)
    first_run = session.run(None, {"image": frames[:1]})[0]
    session.run(None, {"image": frames[1:]})
    np.testing.assert_allclose(first_run, expected[:1], rtol=tolerance)  # an output is ours, not OpenVINO's buffer


def test_the_log_line_counts_the_nodes_left_on_the_cpu(graph):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.add_session_config_entry(sessions.PLACEMENT_KEY, "1")
    session = ort.InferenceSession(str(graph), options, providers=["CPUExecutionProvider"])
    placement = sessions.node_placement(session)
    assert set(placement) == {"cpu"} and sum(placement["cpu"].values()) >= 3  # the graph as optimised
    assert sessions.cpu_nodes_text(placement).startswith(f"nodes on the CPU: {sum(placement['cpu'].values())} of ")
    on_gpu = {"cuda": Counter({"Conv": 90, "MatMul": 10}), "cpu": Counter({"Shape": 2, "Range": 1})}
    assert sessions.cpu_nodes_text(on_gpu) == "nodes on the CPU: 3 of 103 (Shape 2, Range)"
    assert sessions.cpu_nodes_text({"tensorrt": Counter({"TRTKernel": 1})}) == "nodes on the CPU: 0 of 1"
    bare = ort.InferenceSession(str(graph), providers=["CPUExecutionProvider"])  # recorded only when asked
    assert sessions.node_placement(bare) is None


def test_tensorrt_exact_turns_tf32_off_before_its_engine_is_built_and_keys_it_apart(tmp_path):
    tensorrt = P.Attempt(P.Device(TRT, "gpu", "NVIDIA"), ((TRT, {}),))
    cuda = P.Attempt(P.Device(P.PROVIDERS["cuda"].ep, "gpu", "NVIDIA"), ())
    environ: dict[str, str] = {}
    assert not sessions.keep_float32(tensorrt, "fast", environ) and environ == {}
    assert not sessions.keep_float32(cuda, "exact", environ) and environ == {}  # CUDA has its own switch (use_tf32)
    assert sessions.keep_float32(tensorrt, "exact", environ) and environ == {"NVIDIA_TF32_OVERRIDE": "0"}
    assert not sessions.keep_float32(tensorrt, "exact", environ)  # once
    model = tmp_path / "m.onnx"
    model.write_bytes(b"weights")
    assert sessions.engine_key(model, "exact").endswith("-fp32-no-tf32")  # never an engine built with TF32
    assert sessions.engine_key(model, "fast").endswith("-fp16")


def test_windows_names_the_nvidia_libraries_as_its_loader_does():
    assert P.nvidia_libraries("CUDAExecutionProvider", "13", windows=True) == [
        "cudart64_13.dll", "cublasLt64_13.dll", "cublas64_13.dll", "cudnn64_9.dll"]  # fmt: skip
    assert P.nvidia_libraries("TensorrtExecutionProvider", "13", windows=False)[-1] == "libnvinfer.so.10"
    assert P.nvidia_libraries("TensorrtExecutionProvider", "13", windows=True)[-1] == "nvinfer_10.dll"


def test_a_gpu_machine_without_the_nvidia_extra_gets_one_warning_and_no_onnx_runtime_error():
    """A machine whose system shows an NVIDIA GPU (ordinal 0, as /dev/nvidia0 or NVML would) while CUDA 13's
    libraries are not installed, as here: ONNX Runtime's library loader runs for real, in a child process so that
    what it prints past Python's logging shows."""
    code = (
        "import logging, sys; logging.basicConfig(level=logging.WARNING, stream=sys.stdout)\n"
        "from stereo3d.runtime import providers as P\n"
        "machine = P.discover([0])\n"
        "print('problem:', machine.problems.get('CUDAExecutionProvider'))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True)
    output = done.stdout + done.stderr
    if "problem: None" in output:
        pytest.skip("CUDA's libraries are installed here")
    warnings = [line for line in output.splitlines() if line.startswith("WARNING")]
    assert len(warnings) == 1 and "pip install -e '.[nvidia]'" in warnings[0], output
    for sign in ("Failed to load", "Please follow", "EP Error", "[E:onnxruntime"):
        assert sign not in output, output
