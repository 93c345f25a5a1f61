"""The bf16 path of every x86 CPU that has one: OpenVINO's own runtime reading the ONNX file, behind the interface of
an ONNX Runtime session (provider short name ``openvino_runtime``).

Why this route. A CPU with AVX-512-BF16 or AMX (Intel since Cooper Lake and Sapphire Rapids, AMD since Zen 4)
multiplies bf16 matrices at twice float32's rate or more, and DA3 and NVDS are made of such products. ONNX Runtime
cannot get there on every vendor's CPU: its OpenVINO plugin offers devices of Intel only (on an AMD EPYC with
AVX-512-BF16, ``auto`` + ``fast`` ran at 1.01x the CPU provider), and its own CPU provider has no bf16 on x86 (its
one bf16 option, ``mlas.enable_gemm_fastmath_arm64_bfloat16``, is for Arm). OpenVINO's runtime runs on any x86 CPU
and computes in bf16 where the CPU has it (``INFERENCE_PRECISION_HINT``): 1.85x the CPU provider on that EPYC, at
0.87 % mean relative difference of the depth (bench P16). Where the CPU has no bf16, the hint falls back to
float32, and ``auto`` does not take this route at all (``providers.plan``).

``exact`` asks OpenVINO for float32 (``f32``); ``fast`` for bf16. An Intel CPU keeps ONNX Runtime's OpenVINO plugin
(same runtime, same arithmetic, and ONNX Runtime's I/O binding); this route is taken where the plugin offers no CPU.

The session implements what the package asks of an ONNX Runtime session: inputs, outputs, metadata, ``run`` and I/O
binding with host arrays (OpenVINO's CPU device reads and writes host memory, so binding is a plain hand-over).
"""

from __future__ import annotations

import importlib.util
import platform
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from stereo3d.runtime.onnxfile import graph_inputs, model_metadata

RUNTIME_EP = "OpenVINORuntime"  # this route's name among ONNX Runtime's providers (in plans, logs, get_providers)
# CPU features that give bf16 arithmetic: Linux's names in /proc/cpuinfo, and OpenVINO's capability (other systems).
BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16", "bf16"})
PRECISION_HINTS = {"exact": "f32", "fast": "bf16"}
_ORT_TYPES = {"f32": "tensor(float)", "f16": "tensor(float16)", "bf16": "tensor(bfloat16)", "u8": "tensor(uint8)",
              "i8": "tensor(int8)", "i32": "tensor(int32)", "i64": "tensor(int64)",
              "boolean": "tensor(bool)"}  # fmt: skip


def installed() -> bool:
    return importlib.util.find_spec("openvino") is not None


def has_bf16(flags) -> bool:
    """Whether a CPU with these features (``cpu_flags()``) has bf16 arithmetic."""
    return bool(BF16_FLAGS & {flag.lower() for flag in flags})


def cpu_flags() -> frozenset[str]:
    """This CPU's features: the ``flags`` line of /proc/cpuinfo on Linux; elsewhere (Windows, macOS) OpenVINO's
    ``OPTIMIZATION_CAPABILITIES`` of its CPU device (``bf16`` where it has bf16), or nothing without OpenVINO."""
    if platform.system() == "Linux":
        try:
            with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as info:
                for line in info:
                    if line.startswith("flags"):
                        return frozenset(line.partition(":")[2].split())
        except OSError:
            return frozenset()
        return frozenset()
    if not installed() or platform.machine().lower() not in ("x86_64", "amd64"):
        return frozenset()
    try:
        import openvino as ov

        return frozenset(str(c).lower() for c in ov.Core().get_property("CPU", "OPTIMIZATION_CAPABILITIES"))
    except Exception:  # an OpenVINO that cannot start: no route through it
        return frozenset()


@dataclass(frozen=True)
class NodeArg:
    """What ``get_inputs()``/``get_outputs()`` of an ONNX Runtime session give: name, type and shape."""

    name: str
    type: str
    shape: list


class RuntimeSession:
    """An ONNX model compiled by OpenVINO for the CPU, used as an ONNX Runtime ``InferenceSession`` is."""

    def __init__(self, path: str | Path, precision: str = "exact", threads: int = 0):
        import openvino as ov

        path = Path(path)
        core = ov.Core()
        self.config = {"INFERENCE_PRECISION_HINT": PRECISION_HINTS[precision], "PERFORMANCE_HINT": "LATENCY"}
        if threads:
            self.config["INFERENCE_NUM_THREADS"] = int(threads)
        model = core.read_model(str(path))
        self._compiled = core.compile_model(model, "CPU", self.config)
        self._request = self._compiled.create_infer_request()
        # What OpenVINO computes in: bf16 where asked and the CPU has it, else f32.
        self.precision = self._compiled.get_property("INFERENCE_PRECISION_HINT").get_type_name()
        dims = graph_inputs(path)
        self._inputs = [NodeArg(p.get_any_name(), _ort_type(p), dims.get(p.get_any_name(), _dims(p)))
                        for p in self._compiled.inputs]  # fmt: skip
        self._outputs = [NodeArg(p.get_any_name(), _ort_type(p), _dims(p)) for p in self._compiled.outputs]
        self._metadata = model_metadata(path)

    def get_inputs(self) -> list[NodeArg]:
        return list(self._inputs)

    def get_outputs(self) -> list[NodeArg]:
        return list(self._outputs)

    def get_providers(self) -> list[str]:
        return [RUNTIME_EP]

    def get_provider_options(self) -> dict:
        return {RUNTIME_EP: {key: str(value) for key, value in self.config.items()}}

    def get_modelmeta(self):
        return SimpleNamespace(custom_metadata_map=dict(self._metadata))

    def run(self, output_names, input_feed: dict, run_options=None) -> list[np.ndarray]:
        """The outputs named (all with None), as arrays of their own: OpenVINO reuses its output tensors."""
        results = self._request.infer({name: np.ascontiguousarray(value) for name, value in input_feed.items()})
        by_name = {port.get_any_name(): np.array(array) for port, array in results.items()}
        return [by_name[name] for name in (output_names or [o.name for o in self._outputs])]

    def io_binding(self) -> RuntimeBinding:
        return RuntimeBinding(self)

    def run_with_iobinding(self, binding: RuntimeBinding, run_options=None) -> None:
        binding.outputs = self.run(binding.output_names, binding.inputs)


class RuntimeBinding:
    """ONNX Runtime's I/O binding as far as the package uses it, on host arrays (OrtValues on the CPU)."""

    def __init__(self, session: RuntimeSession):
        self.session = session
        self.inputs: dict[str, np.ndarray] = {}
        self.output_names: list[str] = []
        self.outputs: list[np.ndarray] | None = None

    def bind_cpu_input(self, name: str, array: np.ndarray) -> None:
        self.inputs[name] = array

    def bind_ortvalue_input(self, name: str, value) -> None:
        self.inputs[name] = value.numpy()

    def bind_output(self, name: str, device_type: str = "cpu", device_id: int = 0, *args, **kwargs) -> None:
        if device_type != "cpu":
            raise ValueError(f"{RUNTIME_EP} keeps its outputs on the CPU, not on {device_type}")
        self.output_names.append(name)

    def copy_outputs_to_cpu(self) -> list[np.ndarray]:
        return list(self._ran())

    def get_outputs(self) -> list:
        import onnxruntime as ort

        return [ort.OrtValue.ortvalue_from_numpy(array) for array in self._ran()]

    def _ran(self) -> list[np.ndarray]:
        if self.outputs is None:
            raise RuntimeError("run_with_iobinding has not run this binding")
        return self.outputs


def _ort_type(port) -> str:
    name = port.get_element_type().get_type_name()
    return _ORT_TYPES.get(name, f"tensor({name})")


def _dims(port) -> list:
    return [d.get_length() if d.is_static else None for d in port.get_partial_shape()]
