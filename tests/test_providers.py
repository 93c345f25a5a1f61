"""Which provider runs a model: ``auto`` on the devices ONNX Runtime really finds, explicit names, the precision's
options, the fallback from one provider to the next with its own options, TensorRT's engine key and profile.

Sessions are real where the provider runs here (the CPU provider everywhere; OpenVINO on a machine with an Intel
device and the plugin installed). The plans for GPUs are checked on the options handed to ONNX Runtime, on a
machine described as having them: TensorRT and CUDA cannot run on this CPU machine.
"""

from __future__ import annotations

import json
import logging
import re
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


def test_open_session_falls_back_to_the_next_attempt_with_its_own_options(da3_model, monkeypatch, caplog, capfd):
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
    # ONNX Runtime 1.31 warns of a device_id that no plugin provider claims, also where CUDA then runs (the H200
    # lease of 2026-12-04: one line a session in every GPU job's log); our line above says what ran.
    assert "No registered plugin EP device" not in capfd.readouterr().err


@pytest.mark.parametrize("failure", [ImportError("No module named 'onnx'"), OSError("No space left on device")])
def test_a_float16_copy_that_cannot_be_made_leaves_cuda_its_float32_graph_with_one_warning(
    failure, tmp_path, monkeypatch, caplog
):
    # Only CUDA under `fast` with a copies' folder asks for a copy; where making it fails (no onnx package, a full
    # disk), CUDA itself opens the model (not the next provider, the CPU perhaps), and the log says so once.
    def cannot(model_path, folder):
        raise failure

    monkeypatch.setattr(sessions, "fp16_copy", cannot)
    monkeypatch.setattr(sessions, "_warned", set())
    model = tmp_path / "graph.onnx"
    fast = SessionOptions(providers=("cuda", "cpu"), precision="fast", fp16_dir=str(tmp_path / "fp16"))
    cuda, cpu = P.plan(fast.providers, NVIDIA_MACHINE, sessions.request_of(fast)).attempts
    with caplog.at_level(logging.WARNING, logger=sessions.log.name):
        assert sessions._graph_for(model, cuda, fast) == model
        assert sessions._graph_for(model, cuda, fast) == model
    warnings = [r.getMessage() for r in caplog.records if r.name == sessions.log.name]
    assert len(warnings) == 1 and f"graph.onnx: no float16 copy for CUDA ({failure})" in warnings[0]
    # Nothing is asked for where no copy is wanted: the CPU, `exact`, no folder.
    monkeypatch.setattr(sessions, "fp16_copy", lambda model_path, folder: pytest.fail("no copy was wanted"))
    for attempt, options in ((cpu, fast), (cuda, SessionOptions(providers=("cuda", "cpu"), fp16_dir="f")),
                             (cuda, SessionOptions(providers=("cuda", "cpu"), precision="fast"))):  # fmt: skip
        assert sessions._graph_for(model, attempt, options) == model


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


# The README's order of preference (section "Accelerators"), by provider and device kind; an NPU is tried only when
# named. The oracle of what ``auto`` opens, written apart from stereo3d.runtime.providers' own table.
README_ORDER = (
    ("TensorrtExecutionProvider", "GPU"), ("NvTensorRTRTXExecutionProvider", "GPU"), ("CUDAExecutionProvider", "GPU"),
    ("MIGraphXExecutionProvider", "GPU"), ("DmlExecutionProvider", "GPU"), ("OpenVINOExecutionProvider", "GPU"),
    ("WebGpuExecutionProvider", "GPU"), ("CoreMLExecutionProvider", "GPU"), ("OpenVINOExecutionProvider", "CPU"),
    ("CPUExecutionProvider", "CPU"),
)  # fmt: skip
NVIDIA_BUILT_IN = {"TensorrtExecutionProvider", "CUDAExecutionProvider"}


def best_by_the_readme() -> set[str]:
    """The providers ``auto`` may open first here, by the README's order over the devices ONNX Runtime itself lists
    (``get_ep_devices``); its built-in NVIDIA providers are listed by no discovery: where nvidia-smi sees a GPU, the
    best is TensorRT or CUDA (whichever has its libraries)."""
    import shutil

    listed = {(d.ep_name, d.device.type.name) for d in onnxruntime.get_ep_devices()}
    nvidia = shutil.which("nvidia-smi") and subprocess.run(["nvidia-smi", "-L"], capture_output=True).returncode == 0
    if nvidia and NVIDIA_BUILT_IN <= set(onnxruntime.get_available_providers()):
        return NVIDIA_BUILT_IN
    return {next(ep for ep, kind in README_ORDER if (ep, kind) in listed)}


def test_auto_on_this_machine_opens_the_best_device_onnx_runtime_lists_and_logs_one_line(da3_model, caplog):
    with caplog.at_level(logging.INFO, logger=sessions.log.name):
        session = open_session(da3_model, SessionOptions(providers="auto", threads=1))
    used = session.get_providers()[0]
    assert used in best_by_the_readme()
    lines = [r.getMessage() for r in caplog.records if r.name == sessions.log.name]
    assert len(lines) == 1, lines
    listed = {(d.ep_name, d.device.type.name) for d in onnxruntime.get_ep_devices()}
    kind = "GPU" if used in NVIDIA_BUILT_IN else next(k for ep, k in README_ORDER if (ep, k) in listed and ep == used)
    assert re.match(rf"da3_small_140x84_u8\.onnx: running on the {kind}( \(\w+\))? with provider "
                    rf"{P.short_name(used)}, precision exact; opened in", lines[0]), lines[0]  # fmt: skip
    for ep, why in P.machine().problems.items():  # a better provider that is installed and cannot run says why
        assert f"{P.short_name(ep)}: {why}" in lines[0]


def test_a_plugins_devices_open_on_their_handles_and_its_meta_devices_are_left_out():
    # ONNX Runtime 1.31 lists a registered plugin among its available providers; opened by that name it silently ran
    # the CPU provider instead (OpenVINO on an Intel AMX Xeon). Its meta device (OpenVINO's AUTO) doubles the others.
    plugins = P.register_plugins()
    for device in P.machine().devices:
        assert device.ep.partition(".")[0] == device.ep, device
        if device.ep in plugins:
            assert device.handle is not None, device
            assert not P.plan((P.short_name(device.ep),), P.machine(), P.Request()).attempts[0].built_in_only


def test_a_named_provider_that_cannot_run_here_gets_one_warning_line(da3_model, monkeypatch, caplog):
    # A provider this machine cannot run (CoreML runs on macOS only; CUDA, TensorRT or MIGraphX lack a device on
    # most machines), named in the config before the CPU.
    machine = P.machine()
    names = ("coreml", "migraphx", "cuda", "tensorrt")
    name = next(n for n in names if P.plan([n, "cpu"], machine, P.Request()).skipped)
    monkeypatch.setattr(sessions, "_warned", set())  # as in a new job's process
    with caplog.at_level(logging.WARNING, logger=sessions.log.name):
        for _ in range(3):  # a job opens several sessions (NVDS: backbone and head)
            assert open_session(da3_model, SessionOptions(providers=(name, "cpu"), threads=1)).get_providers()[0] == CPU
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and warnings[0].startswith(f"runtime.providers names {name}, which cannot run here: ")


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


def test_every_providers_float32_agrees_with_the_cpu_providers_within_the_validation_tolerance(da3_model):
    """Every provider with a device here (README: so the provider is not part of any key), in exact precision:
    relative mean error below 1e-3, export.fail_rel_mean_err's default (on a CPU-only machine the CPU provider
    alone; the device check runs it on GPUs)."""
    frames = np.random.default_rng(0).integers(0, 256, (2, 84, 140, 3), dtype=np.uint8)
    reference = open_session(da3_model, SessionOptions(providers=("cpu",))).run(["depth"], {"image": frames})[0]
    machine = P.machine()
    names = {P.short_name(d.ep) + (f":{d.kind}" if d.ep == OPENVINO else "")
             for d in machine.devices if d.kind != "npu"}  # fmt: skip
    assert "cpu" in names
    for name in sorted(names):
        session = open_session(da3_model, SessionOptions(providers=(name,), precision="exact"))
        assert P.short_name(session.get_providers()[0]) == name.split(":")[0]
        depth = session.run(["depth"], {"image": frames})[0]
        assert np.mean(np.abs(depth - reference)) / np.mean(np.abs(reference)) < 1e-3, name


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


def test_a_depth_jobs_short_batches_lie_inside_the_one_tensorrt_profile(da3_model, make_clip, tmp_path, monkeypatch):
    """A job's last batch, and a batch cut short at a chunk's end, run on the engine built for the profile of batch
    1 .. da3.batch that the job's session options ask for (README: a short batch builds no engine)."""
    from types import SimpleNamespace

    from stereo3d.io.probe import probe_video
    from stereo3d.models.da3.runtime import DepthModel
    from stereo3d.stages.depth import DepthSettings, estimate_depth
    from stereo3d.workflow.scripting import depth_job

    batch = 3
    settings = DepthSettings(size=(140, 84))
    smk = SimpleNamespace(
        config={"da3": {"batch": batch}, "paths": {"models": str(tmp_path / "models")},
                "runtime": {"providers": ["cpu"], "threads": 1, "gpu_mem_limit_mb": 0}},
    )  # fmt: skip
    job = depth_job(smk, settings)
    assert job["options"].max_batch == batch and job["batch"] == batch
    profile = trt_profile(graph_inputs(da3_model), job["options"].max_batch)
    low, high = (int(profile[f"trt_profile_{end}_shapes"].split(":")[1].split("x")[0]) for end in ("min", "max"))
    sizes = []
    real_infer = DepthModel.infer

    def recorded(self, feed):
        sizes.append(len(feed))
        return real_infer(self, feed)

    monkeypatch.setattr(DepthModel, "infer", recorded)
    video = make_clip("clip.mp4", width=140, height=84, frames=34, fps="24")
    estimate_depth(video, probe_video(video), da3_model, tmp_path / "depth.zarr", settings, **job)
    assert sizes == [3] * 10 + [2, 2]  # the first chunk ends after 32 frames, the job after 34
    assert all(low <= size <= high for size in sizes) and (low, high) == (1, batch)
