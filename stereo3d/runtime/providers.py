"""Which ONNX Runtime execution provider runs a model: the providers we know (one table), the devices this machine
really has, and the plan a session follows (one provider after another until one opens).

* **Devices** come from ONNX Runtime's own discovery (``get_ep_devices()``), which lists only devices that exist,
  after every installed plugin provider (a package ``onnxruntime_ep_*``: OpenVINO, TensorRT-RTX, WebGPU, ...) is
  registered. onnxruntime-gpu's TensorRT and CUDA are built in; where the discovery does not list them, they
  count as present when an NVIDIA device node exists and their libraries load (after ``preload_dlls()``, which
  finds the ones pip installs). A provider with no device is never asked for: asking prints ONNX Runtime's red
  library and "EP Error" lines and falls back without the options we gave.
* **``auto``** tries, in this order, every provider that has a device: NVIDIA GPUs (TensorRT, TensorRT-RTX,
  CUDA), other GPUs (MIGraphX, DirectML, OpenVINO, WebGPU, CoreML), any other plugin's GPU, then the
  CPU's fast path (OpenVINO on an Intel CPU; with ``fast``, OpenVINO's own runtime on any other x86 CPU with bf16
  arithmetic: ``stereo3d.runtime.openvino_runtime``), then ONNX Runtime's own CPU provider. NPUs are tried only when
  named (``openvino:npu``): they compile static shapes, and the DA3 graph has a dynamic batch axis.
* **Precision** (``exact`` | ``fast``) sets each provider's arithmetic: ``fast`` is fp16 on TensorRT, TF32 on CUDA
  (or a float16 copy of the graph where the session asks for one: ``sessions.fp16_copy``, for NVDS), the device's
  default on OpenVINO (bf16 on CPUs with AMX or AVX-512-BF16, f16 on Intel GPUs and NPUs); ``exact``
  keeps float32 everywhere it can be asked for (TensorRT's float32 engines included: ``sessions`` turns TF32 off).
* **An NVIDIA GPU without the ``nvidia`` extra** (CUDA 13 and cuDNN 9 not installed): the GPU is seen, its providers
  are left out with the missing library named, and one warning says which extra to install; ONNX Runtime's own
  attempts to load the libraries print nothing.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import importlib
import importlib.util
import io
import json
import logging
import os
import pkgutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from stereo3d.runtime import openvino_runtime
from stereo3d.runtime.devices import nvidia_devices
from stereo3d.runtime.openvino_runtime import RUNTIME_EP

log = logging.getLogger(__name__)

PRECISIONS = ("exact", "fast")
KINDS = ("gpu", "npu", "cpu")
PLUGIN_PREFIX = "onnxruntime_ep_"  # the module prefix every plugin provider package on PyPI uses


@dataclass(frozen=True)
class Provider:
    """One execution provider: its short name (in ``runtime.providers``), ONNX Runtime's name, what ``fast`` means
    on it, and its options for a request (``options(request, kind)`` → ONNX Runtime's provider options)."""

    name: str
    ep: str
    fast: str
    options: Callable[[Request, str], dict[str, str]] = lambda request, kind: {}


@dataclass(frozen=True)
class Request:
    """What a session asks of its provider: precision, device, threads, memory bound, TensorRT's cache and
    profile (filled in by ``sessions.open_session``)."""

    precision: str = "exact"
    device_id: int = 0
    threads: int = 0
    gpu_mem_limit_mb: int | None = None
    trt_cache_dir: str | None = None  # the engine folder, already keyed by the model's content and precision
    trt_profile: dict[str, str] = field(default_factory=dict)  # trt_profile_{min,opt,max}_shapes


def _tensorrt(request: Request, kind: str) -> dict[str, str]:
    options = {"device_id": str(request.device_id), "trt_fp16_enable": str(request.precision == "fast")}
    if request.trt_cache_dir:
        options.update(
            trt_engine_cache_enable="True",
            trt_engine_cache_path=request.trt_cache_dir,
            trt_timing_cache_enable="True",
            trt_timing_cache_path=request.trt_cache_dir,
        )
    options.update(request.trt_profile)
    return options


def _cuda(request: Request, kind: str) -> dict[str, str]:
    # CUDA's default arithmetic for float32 matrix products on Ampere and newer is TF32 (10-bit mantissa): that is
    # its fast path; exact asks for float32.
    options = {"device_id": str(request.device_id), "use_tf32": "1" if request.precision == "fast" else "0"}
    if request.gpu_mem_limit_mb:
        options["gpu_mem_limit"] = str(int(request.gpu_mem_limit_mb) * 1024 * 1024)
        options["arena_extend_strategy"] = "kSameAsRequested"
    return options


def _openvino(request: Request, kind: str) -> dict[str, str]:
    options: dict[str, str] = {}
    if request.precision == "exact":
        # OpenVINO's own default on a CPU with AMX or AVX-512-BF16 is bf16, and "precision: ACCURACY" keeps it
        # (measured: 0.87 % mean relative depth difference); only the inference precision hint gives float32.
        options["load_config"] = json.dumps({kind.upper(): {"INFERENCE_PRECISION_HINT": "f32"}})
    if request.threads and kind == "cpu":
        options["num_of_threads"] = str(request.threads)
    return options


# Every provider we know, by short name. Others a plugin brings work too, by their ONNX Runtime name or its short
# form (``MLXExecutionProvider`` or ``mlx``), with no options of ours.
PROVIDERS = {
    p.name: p
    for p in (
        Provider("tensorrt", "TensorrtExecutionProvider", "fp16 engine", _tensorrt),
        Provider("tensorrt_rtx", "NvTensorRTRTXExecutionProvider", "none (runs the graph's float32)"),
        Provider("cuda", "CUDAExecutionProvider", "TF32 matrix products", _cuda),
        Provider("migraphx", "MIGraphXExecutionProvider", "none"),
        Provider("dml", "DmlExecutionProvider", "none"),
        Provider("openvino", "OpenVINOExecutionProvider", "bf16 on AMX/AVX-512-BF16 CPUs, f16 on GPUs", _openvino),
        Provider("openvino_runtime", RUNTIME_EP, "bf16 on AMX/AVX-512-BF16 CPUs (OpenVINO's runtime)"),
        Provider("webgpu", "WebGpuExecutionProvider", "none"),
        Provider("coreml", "CoreMLExecutionProvider", "none"),
        Provider("cpu", "CPUExecutionProvider", "none"),
    )
}
# ``auto``'s order: (provider, device kind). Plugins not in the table come after the known GPUs.
AUTO_ORDER = (
    ("tensorrt", "gpu"),
    ("tensorrt_rtx", "gpu"),
    ("cuda", "gpu"),
    ("migraphx", "gpu"),
    ("dml", "gpu"),
    ("openvino", "gpu"),
    ("webgpu", "gpu"),
    ("coreml", "gpu"),
    ("coreml", "npu"),
    ("*", "gpu"),
    ("openvino", "cpu"),
    ("openvino_runtime", "cpu"),  # precision fast on a CPU with bf16 only (see plan)
    ("cpu", "cpu"),
)
# A TensorRT session also lists CUDA (on the same device) for the nodes its engine does not take.
COMPANIONS = {"tensorrt": ("cuda",)}
NVIDIA_BUILT_IN = ("TensorrtExecutionProvider", "CUDAExecutionProvider")
NVIDIA = {"tensorrt", "tensorrt_rtx", "cuda"}  # providers that run on a CUDA device (a job leases one)


def short_name(ep: str) -> str:
    """``OpenVINOExecutionProvider`` → ``openvino`` (the table's name where it has one)."""
    for provider in PROVIDERS.values():
        if provider.ep == ep:
            return provider.name
    return ep.removesuffix("ExecutionProvider").lower()


def provider_of(ep: str) -> Provider:
    name = short_name(ep)
    return PROVIDERS.get(name) or Provider(name, ep, "none")


@dataclass(frozen=True)
class Device:
    """A provider that can run here, on one device. ``handle`` is ONNX Runtime's ``OrtEpDevice`` (None for a
    built-in NVIDIA provider found by its libraries rather than by the discovery)."""

    ep: str
    kind: str  # gpu | npu | cpu
    vendor: str
    handle: object | None = None

    @property
    def label(self) -> str:
        """``the GPU (NVIDIA) with provider cuda``"""
        vendor = f" ({self.vendor})" if self.vendor else ""
        return f"the {self.kind.upper()}{vendor} with provider {provider_of(self.ep).name}"


@dataclass(frozen=True)
class Machine:
    """What ONNX Runtime can use on this machine: ``devices``, the providers ``installed`` (built in or plugins,
    with or without a device), and why an installed NVIDIA provider cannot run (``problems``)."""

    devices: tuple[Device, ...]
    installed: frozenset[str]
    problems: dict[str, str] = field(default_factory=dict)
    # Whether the CPU has bf16 arithmetic (AVX-512-BF16 or AMX): openvino_runtime's fast path. None: this machine's
    # CPU, asked when a plan with precision fast needs it (outside Linux that asks OpenVINO, ~0.5 s).
    cpu_bf16: bool | None = None

    def has_cpu_bf16(self) -> bool:
        return this_cpu_bf16() if self.cpu_bf16 is None else self.cpu_bf16

    def why_not(self, ep: str | None, kind: str | None = None) -> str:
        if ep in self.problems:
            return self.problems[ep]
        if ep not in self.installed:
            return "not installed"
        if ep == PROVIDERS["openvino"].ep:
            return f"no {kind.upper() + ' ' if kind else ''}device (the OpenVINO plugin serves Intel devices only)"
        if ep == RUNTIME_EP:
            return "this CPU has no bf16 arithmetic (AVX-512-BF16 or AMX)"
        return f"no {kind.upper() + ' ' if kind else ''}device"


@dataclass(frozen=True)
class Attempt:
    """One way to open a session: providers with their options, in ONNX Runtime's order (the CPU provider, always
    there, takes what they leave), and the device it runs on."""

    device: Device
    providers: tuple[tuple[str, dict[str, str]], ...]
    handles: tuple[object | None, ...] = ()

    @property
    def built_in_only(self) -> bool:
        """True when every provider is compiled into onnxruntime (opened by name), False for a plugin (opened on
        its device handle)."""
        return all(handle is None for handle in self.handles)


@dataclass(frozen=True)
class Plan:
    attempts: tuple[Attempt, ...]
    skipped: tuple[tuple[str, str], ...]  # (name, why) of what was asked for, or better in auto, and cannot run


def parse_request(providers: str | Sequence[str]) -> list[tuple[str, str | None]]:
    """``auto`` or a list of names (``cuda``, ``openvino:cpu``, ``MLXExecutionProvider``) → (name, kind) pairs;
    kind None: any of the provider's devices, in the order gpu, npu, cpu."""
    if isinstance(providers, str):
        if providers != "auto":
            raise ValueError(f"runtime.providers: {providers!r} is neither 'auto' nor a list of provider names")
        return [(name, kind) for name, kind in AUTO_ORDER]
    pairs = []
    for entry in providers:
        name, _, kind = str(entry).partition(":")
        if kind and kind not in KINDS:
            raise ValueError(f"runtime.providers: {entry!r}: the device kind is one of {', '.join(KINDS)}")
        pairs.append((short_name(name) if name.endswith("ExecutionProvider") else name.lower(), kind or None))
    return pairs


def plan(
    providers: str | Sequence[str],
    machine: Machine,
    request: Request,
    exclude: Sequence[str] = (),
) -> Plan:
    """The attempts a session makes, best first, for ``providers`` (``auto`` or names) on ``machine``; the CPU
    provider is always the last. ``exclude``: short names never tried for this model."""
    auto = isinstance(providers, str)
    attempts: list[Attempt] = []
    skipped: list[tuple[str, str]] = []
    taken: set[tuple[str, str]] = set()
    for name, kind in parse_request(providers):
        if name == "*":  # auto: plugins not in the table, on the kind given
            matches = [d for d in machine.devices if short_name(d.ep) not in PROVIDERS and d.kind == kind]
        else:
            matches = [d for d in machine.devices if short_name(d.ep) == name and (kind is None or d.kind == kind)]
            matches.sort(key=lambda d: KINDS.index(d.kind))
        if name in exclude:
            if not auto:
                skipped.append((name, "not used for this model"))
            continue
        if auto and name == "openvino_runtime" and matches:
            # Only bf16 is worth a second runtime: exact stays on ONNX Runtime's float32 (the reference), and a CPU
            # without bf16 computes float32 either way.
            if request.precision != "fast":
                continue
            if not machine.has_cpu_bf16():
                skipped.append((name, machine.why_not(RUNTIME_EP)))
                continue
        if not matches:
            ep = PROVIDERS[name].ep if name in PROVIDERS else None  # a name no table row or plugin has
            if name != "*" and (not auto or ep in machine.installed or ep in machine.problems):
                label = f"{name}:{kind}" if kind and not auto else name
                if not any(s[0] == label for s in skipped):
                    skipped.append((label, machine.why_not(ep, None if auto else kind)))
            continue
        for device in matches:
            key = (device.ep, device.kind)
            if key not in taken:
                taken.add(key)
                attempts.append(_attempt(device, machine, request, exclude))
    if auto:  # a provider that found no GPU but runs on this CPU (OpenVINO) was not skipped
        used = {short_name(a.device.ep) for a in attempts}
        skipped = [entry for entry in skipped if entry[0] not in used]
    if ("CPUExecutionProvider", "cpu") not in taken:
        cpu = Device("CPUExecutionProvider", "cpu", "")
        attempts.append(Attempt(cpu, (("CPUExecutionProvider", {}),), (None,)))
    return Plan(tuple(attempts), tuple(skipped))


def _attempt(device: Device, machine: Machine, request: Request, exclude: Sequence[str]) -> Attempt:
    provider = provider_of(device.ep)
    entries = [(device.ep, provider.options(request, device.kind))]
    handles = [device.handle]
    for companion in COMPANIONS.get(provider.name, ()):
        partner = PROVIDERS[companion]
        found = next((d for d in machine.devices if d.ep == partner.ep and d.kind == device.kind), None)
        if found is not None and companion not in exclude:
            entries.append((partner.ep, partner.options(request, device.kind)))
            handles.append(found.handle)
    if device.ep != "CPUExecutionProvider":
        entries.append(("CPUExecutionProvider", {}))
        handles.append(None)
    return Attempt(device, tuple(entries), tuple(handles))


@functools.cache
def machine() -> Machine:
    """This machine as ONNX Runtime sees it (once per process: plugins are registered on the first call)."""
    return discover(nvidia_devices())


def discover(nodes: Sequence[int]) -> Machine:
    """What ONNX Runtime can use here, given the NVIDIA GPUs the system shows (``nodes``, their ordinals)."""
    import onnxruntime as ort

    plugins = register_plugins()
    if nodes:
        _preload_nvidia_libraries(ort)
    # ONNX Runtime 1.31 lists a registered plugin's providers among the available ones too; opened by name, a plugin
    # does not start (ONNX Runtime silently runs the CPU provider: OpenVINO on an Intel CPU, 2026-12-05).
    built_in = frozenset(
        ep for ep in ort.get_available_providers() if ep not in plugins and not _meta_device(ep, plugins)
    )
    # A built-in provider opens by its name (with a device id where it takes one); a plugin on its device handle.
    # A plugin's meta device (OpenVINO's "OpenVINOExecutionProvider.AUTO") is left out: it only picks among the
    # devices listed on their own.
    devices = [
        Device(d.ep_name, _kind(d.device.type), str(d.device.vendor or ""), None if d.ep_name in built_in else d)
        for d in ort.get_ep_devices()
        if _kind(d.device.type) in KINDS and not _meta_device(d.ep_name, plugins)
    ]
    problems: dict[str, str] = {}
    for ep in NVIDIA_BUILT_IN:
        if ep not in built_in or any(d.ep == ep for d in devices):
            continue
        problem = "no NVIDIA GPU" if not nodes else nvidia_libraries_problem(ep)
        if problem is None:
            devices.append(Device(ep, "gpu", "NVIDIA"))
        else:
            problems[ep] = problem
    if nodes and "CUDAExecutionProvider" in problems:  # the one line a GPU machine without the extra prints
        log.warning("this machine has an NVIDIA GPU, but ONNX Runtime cannot use it: %s; until then models run "
                    "on the CPU", problems["CUDAExecutionProvider"])  # fmt: skip
    installed = built_in | frozenset(plugins)
    if openvino_runtime.installed():
        cpu = next((d for d in devices if d.ep == "CPUExecutionProvider"), None)
        devices.append(Device(RUNTIME_EP, "cpu", cpu.vendor if cpu else ""))
        installed |= {RUNTIME_EP}
    return Machine(tuple(devices), installed, problems)


def _meta_device(ep: str, plugins: dict[str, str]) -> bool:
    """Whether ``ep`` is a registered plugin's variant of one of its providers (``OpenVINOExecutionProvider.AUTO``)."""
    return ep not in plugins and ep.partition(".")[0] in plugins


@functools.cache
def this_cpu_bf16() -> bool:
    """Whether this machine's CPU has bf16 arithmetic (``openvino_runtime.cpu_flags``)."""
    return openvino_runtime.has_bf16(openvino_runtime.cpu_flags())


def register_plugins() -> dict[str, str]:
    """Register every installed plugin provider package with ONNX Runtime; ``{provider name: package}``."""
    import onnxruntime as ort

    registered = {}
    for module in sorted(m.name for m in pkgutil.iter_modules() if m.name.startswith(PLUGIN_PREFIX)):
        try:
            package = importlib.import_module(module)
            names = package.get_ep_names() if hasattr(package, "get_ep_names") else [package.get_ep_name()]
            ort.register_execution_provider_library(module, package.get_library_path())
        except Exception as exc:  # a broken plugin must not stop the others, nor the CPU
            if "already registered" not in str(exc).lower():
                log.warning("provider plugin %s could not be registered: %s", module, str(exc).splitlines()[0])
                continue
        registered.update((name, module) for name in names)
    return registered


def _preload_nvidia_libraries(ort) -> None:
    """CUDA, cuDNN and TensorRT as pip installs them (nvidia-* wheels, tensorrt_libs), loaded before anything asks
    for them: their folders are not on the loader's path. ONNX Runtime's ``preload_dlls`` prints a line for each
    library it cannot load; those lines go to the debug log (the library check names what is missing, once)."""
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
            ort.preload_dlls()
    except Exception as exc:  # a partial install: the library check names what is missing
        log.debug("preload_dlls: %s", exc)
    for line in printed.getvalue().splitlines():
        log.debug("preload_dlls: %s", line)
    spec = importlib.util.find_spec("tensorrt_libs")
    for folder in spec.submodule_search_locations if spec and spec.submodule_search_locations else ():
        for library in TENSORRT_LIBRARIES[os.name == "nt"]:
            try:
                ctypes.CDLL(os.path.join(folder, library), mode=ctypes.RTLD_GLOBAL)
            except OSError as exc:
                log.debug("%s: %s", library, exc)


# The libraries of TensorRT 10 (what onnxruntime-gpu's TensorRT provider links), on Linux and on Windows.
TENSORRT_LIBRARIES = {
    False: ("libnvinfer.so.10", "libnvinfer_plugin.so.10", "libnvonnxparser.so.10"),
    True: ("nvinfer_10.dll", "nvinfer_plugin_10.dll", "nvonnxparser_10.dll"),
}


def nvidia_libraries(ep: str, cuda_major: str, windows: bool) -> list[str]:
    """The libraries onnxruntime-gpu's ``ep`` loads, by the names the system's loader knows (Linux or Windows)."""
    if windows:
        needed = [f"cudart64_{cuda_major}.dll", f"cublasLt64_{cuda_major}.dll", f"cublas64_{cuda_major}.dll",
                  "cudnn64_9.dll"]  # fmt: skip
    else:
        needed = [f"libcudart.so.{cuda_major}", f"libcublasLt.so.{cuda_major}", f"libcublas.so.{cuda_major}",
                  "libcudnn.so.9"]  # fmt: skip
    if ep == "TensorrtExecutionProvider":
        needed.append(TENSORRT_LIBRARIES[windows][0])
    return needed


def nvidia_libraries_problem(ep: str) -> str | None:
    """Why onnxruntime-gpu's ``ep`` cannot start on this machine's NVIDIA GPU (a library it needs does not load),
    or None."""
    try:
        from onnxruntime.capi.build_and_package_info import cuda_version
    except ImportError:
        cuda_version = ""
    hint = "pip install -e '.[tensorrt]'" if ep == "TensorrtExecutionProvider" else "pip install -e '.[nvidia]'"
    for library in nvidia_libraries(ep, (cuda_version or "12").split(".")[0], os.name == "nt"):
        try:
            ctypes.CDLL(library)
        except OSError:
            return f"{library} not found ({hint})"
    return None


def _kind(device_type) -> str:
    return str(getattr(device_type, "name", device_type)).lower()
