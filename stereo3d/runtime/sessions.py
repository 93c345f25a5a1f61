"""ONNX Runtime sessions: opened on the best device the machine has (``stereo3d.runtime.providers``), in the
precision asked for, with one log line naming the device and provider really used and why a better one was not.

A session follows its plan: the first provider that has a device is tried, with its own options; if it cannot open
the model, the next one is, each with its own options (ONNX Runtime's own retry is off: it would reopen CUDA
without the device id and memory bound). The CPU provider is always the last resort.

The log line of a session on anything but the CPU counts the graph's nodes that ONNX Runtime left on the CPU (a
GPU session copies tensors to the host and back around each of them): ``nodes on the CPU: 3 of 1012 (Range,
Shape)``. ONNX Runtime records where it put each node when asked (``session.record_ep_graph_assignment_info``).

TensorRT computes float32 layers in TF32 unless told not to (its builder's default on Ampere and newer), and ONNX
Runtime offers no switch for it; NVIDIA's libraries read ``NVIDIA_TF32_OVERRIDE=0`` instead. An ``exact`` TensorRT
session sets it for its process before its engine is built, so ``exact`` is float32 there too, and its engines
are kept apart from those built before (``engine_key``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import os
import threading
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from stereo3d.errors import BadModel
from stereo3d.runtime import providers as P
from stereo3d.runtime.onnxfile import graph_inputs
from stereo3d.runtime.openvino_runtime import RUNTIME_EP, RuntimeSession

log = logging.getLogger(__name__)

# Optional instrumentation for bench/: with STEREO3D_PROFILE set (to anything but "" or "0") when a session
# is opened, every ``run`` of that session adds its wall time to these totals (read them with
# ``inference_totals()``). Off by default: sessions are then returned bare, with no wrapper at all.
PROFILE_ENV = "STEREO3D_PROFILE"
TF32_ENV = "NVIDIA_TF32_OVERRIDE"  # read by cuBLAS, cuDNN and TensorRT: "0" keeps float32 products float32
PLACEMENT_KEY = "session.record_ep_graph_assignment_info"  # ONNX Runtime 1.24+: where each node runs
_totals = {"calls": 0, "seconds": 0.0}
_totals_lock = threading.Lock()
_warned: set[str] = set()  # one warning per process for a provider named in the config that cannot run


@dataclass(frozen=True)
class SessionOptions:
    """How to run a model: the providers (``auto``, or short names in order of preference), the precision, and the
    providers' settings. The default is the plain CPU provider; the workflow passes ``runtime.providers``."""

    providers: str | Sequence[str] = ("cpu",)
    precision: str = "exact"  # exact | fast (see stereo3d.runtime.providers)
    device_id: int = 0
    threads: int = 0  # 0: ONNX Runtime's default (all cores)
    gpu_mem_limit_mb: int | None = None  # bounds the CUDA arena (NVDS is VRAM-heavy)
    trt_cache_dir: str | None = None  # TensorRT engines, in a folder per model content and precision
    max_batch: int | None = None  # TensorRT's profile: batch 1 .. max_batch on a dynamic first axis
    exclude: tuple[str, ...] = ()  # short names never tried for this model
    # Under ``fast``, a CUDA session opens a float16 copy of the model kept in this folder (``fp16_copy``): the CUDA
    # provider computes a float32 graph in float32 (TF32 at most). None: the model as it is.
    fp16_dir: str | None = None
    extra: dict = field(default_factory=dict)


def open_session(model_path: str | Path, options: SessionOptions = SessionOptions()):
    """An InferenceSession on the best device ``options`` allow here; logs the device and provider in use."""
    import onnxruntime as ort

    # ONNX Runtime's process-wide logger warns at every session handed a device_id that no plugin provider claims
    # (1.31: "No registered plugin EP device found for 'CUDAExecutionProvider'", where CUDA then runs fine); the
    # line this function logs says what runs and why the others did not. Its errors still print.
    ort.set_default_logger_severity(3)
    model_path = Path(model_path)
    if not model_path.is_file():
        raise BadModel(model_path, "model file not found (run the export rule first)")
    if options.precision not in P.PRECISIONS:
        raise ValueError(f"unknown precision {options.precision!r} (valid: {', '.join(P.PRECISIONS)})")
    try:
        plan = P.plan(options.providers, P.machine(), request_of(options), options.exclude)
        if any(P.short_name(a.device.ep) == "tensorrt" for a in plan.attempts):  # its engine cache and profile
            plan = P.plan(options.providers, P.machine(), tensorrt_request(model_path, options), options.exclude)
    except ValueError as exc:
        raise BadModel(model_path, str(exc)) from None
    explicit = not isinstance(options.providers, str)
    for name, why in plan.skipped:
        if explicit and name not in _warned:  # a name in the config that cannot run here: said once per process
            _warned.add(name)
            log.warning("runtime.providers names %s, which cannot run here: %s", name, why)
    failures = []
    started = time.perf_counter()
    for attempt in plan.attempts:
        try:
            session = _open(ort, _graph_for(model_path, attempt, options), attempt, options)
            if session.get_providers()[0] != attempt.device.ep:  # a built-in provider that did not start
                raise RuntimeError(f"ONNX Runtime started {session.get_providers()[0]} instead")
        except Exception as exc:  # ORT raises its own types (Fail, InvalidGraph, EPFail, ...)
            reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            if attempt is plan.attempts[-1]:
                raise BadModel(model_path, f"ONNX Runtime cannot load it: {reason}") from exc
            failures.append((attempt.device.label, f"failed to open it ({reason})"))
            log.warning("%s: %s could not open it, trying the next provider: %s", model_path.name,
                        attempt.device.label, reason)  # fmt: skip
            continue
        opened_s = time.perf_counter() - started
        log.info("%s", _in_use(model_path.name, session, attempt, options, plan.skipped + tuple(failures), opened_s))
        if os.environ.get(PROFILE_ENV, "") not in ("", "0"):
            return TimedSession(session)
        return session
    raise AssertionError("a plan always ends with the CPU provider")


def _graph_for(model_path: Path, attempt: P.Attempt, options: SessionOptions) -> Path:
    """The graph an attempt opens: the model, or on CUDA under ``fast`` its float16 copy where ``fp16_dir`` is
    given. Where the copy cannot be made (the converter needs the ``onnx`` package, of the export extra; a full
    disk), CUDA opens the model itself, in TF32, with one warning: not the next provider, which may be the CPU."""
    if options.fp16_dir is None or options.precision != "fast" or P.short_name(attempt.device.ep) != "cuda":
        return model_path
    try:
        return fp16_copy(model_path, options.fp16_dir)
    except Exception as exc:  # ImportError, OSError, or the converter's own
        if "fp16" not in _warned:
            _warned.add("fp16")
            reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            log.warning("%s: no float16 copy for CUDA (%s); its float32 graph runs, in TF32", model_path.name, reason)
        return model_path


def fp16_copy(model_path: str | Path, folder: str | Path) -> Path:
    """A float16 copy of a float32 ONNX model, its inputs and outputs kept as they are (ONNX Runtime's converter:
    a cast at each end), made once into ``folder`` under the model's content key (``<sha256, 16 hex
    digits>-<name>``: other weights under the same file name never meet an old copy). Made under a lock beside it
    (jobs of other videos may open the model at the same time) and written atomically, so a job killed while
    converting leaves no copy that looks whole."""
    from stereo3d.io import locks
    from stereo3d.io.atomic import atomic_output

    model_path = Path(model_path)
    target = Path(folder) / f"{_content_key(model_path)}-{model_path.name}"
    if target.is_file():
        return target
    import onnx
    from onnxruntime.transformers.float16 import convert_float_to_float16

    target.parent.mkdir(parents=True, exist_ok=True)
    with locks.held(target.with_name(f".{target.name}.lock")):
        if not target.is_file():  # another job may have made it while this one waited
            started = time.perf_counter()
            converted = convert_float_to_float16(onnx.load(str(model_path)), keep_io_types=True)
            with atomic_output(target) as partial:
                onnx.save(converted, str(partial))
            log.info("%s: its float16 copy for CUDA made in %.1f s: %s", model_path.name,
                     time.perf_counter() - started, target)  # fmt: skip
    return target


def request_of(options: SessionOptions) -> P.Request:
    return P.Request(
        precision=options.precision,
        device_id=options.device_id,
        threads=options.threads,
        gpu_mem_limit_mb=options.gpu_mem_limit_mb,
    )


def tensorrt_request(model_path: Path, options: SessionOptions) -> P.Request:
    """The request of a TensorRT session: its engine folder keyed by the model's bytes and the precision (an
    engine built from other weights under the same file name is never reused), and a profile for batches 1 ..
    ``max_batch`` (one engine per model, whatever the size of a job's last batch)."""
    cache = None
    if options.trt_cache_dir:
        cache = str(Path(options.trt_cache_dir) / engine_key(model_path, options.precision))
        os.makedirs(cache, exist_ok=True)
    profile = trt_profile(graph_inputs(model_path), options.max_batch) if options.max_batch else {}
    return dataclasses.replace(request_of(options), trt_cache_dir=cache, trt_profile=profile)


# The engine folder's suffix per precision. Float32 engines built before TF32 was turned off for them were named
# "-fp32" and computed TF32: their folders are never read again.
ENGINE_PRECISIONS = {"fast": "fp16", "exact": "fp32-no-tf32"}


def engine_key(model_path: str | Path, precision: str) -> str:
    """``<sha256 of the model's bytes, 16 hex digits>-<fp16|fp32-no-tf32>``: the TensorRT engine folder of a
    model."""
    return f"{_content_key(model_path)}-{ENGINE_PRECISIONS[precision]}"


def _content_key(model_path: str | Path) -> str:
    """The first 16 hex digits of the sha256 of the model's bytes."""
    digest = hashlib.sha256()
    with open(model_path, "rb") as file:
        for block in iter(lambda: file.read(1 << 22), b""):
            digest.update(block)
    return digest.hexdigest()[:16]


def keep_float32(attempt: P.Attempt, precision: str, environ=os.environ) -> bool:
    """Before an ``exact`` TensorRT session: ``NVIDIA_TF32_OVERRIDE=0`` for this process (see the module doc).
    Returns whether it was set now. It holds for every later CUDA session of the process too, which only makes
    their float32 exact as well."""
    if precision != "exact" or P.short_name(attempt.device.ep) != "tensorrt" or environ.get(TF32_ENV) == "0":
        return False
    if environ.get(TF32_ENV):
        log.warning("%s=%s replaced by 0: precision exact is float32, not TF32", TF32_ENV, environ[TF32_ENV])
    environ[TF32_ENV] = "0"
    return True


def trt_profile(inputs: dict[str, list], max_batch: int) -> dict[str, str]:
    """TensorRT's optimisation profile for batches 1 .. ``max_batch`` (optimised for ``max_batch``), over every input
    whose first axis is dynamic; empty for a model of fixed shapes."""
    dynamic = {name: dims for name, dims in inputs.items() if dims and not isinstance(dims[0], int)}
    if not dynamic:
        return {}
    if any(not isinstance(d, int) for dims in dynamic.values() for d in dims[1:]):
        raise ValueError(f"only the first axis may be dynamic for a TensorRT profile: {dynamic}")

    def shapes(batch: int) -> str:
        return ",".join(f"{name}:{'x'.join(str(d) for d in [batch, *dims[1:]])}" for name, dims in dynamic.items())

    return {
        "trt_profile_min_shapes": shapes(1),
        "trt_profile_opt_shapes": shapes(max_batch),
        "trt_profile_max_shapes": shapes(max_batch),
    }


def _open(ort, model_path: Path, attempt: P.Attempt, options: SessionOptions):
    if attempt.device.ep == RUNTIME_EP:  # OpenVINO's own runtime, not an ONNX Runtime provider
        return RuntimeSession(model_path, options.precision, options.threads)
    if keep_float32(attempt, options.precision):
        log.info("%s: TF32 off for this process (%s=0): TensorRT's float32 engine computes float32", model_path.name,
                 TF32_ENV)  # fmt: skip
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    if options.threads:
        so.intra_op_num_threads = options.threads
    # No busy-waiting between operators: the decoder, the map writer, ffmpeg and other jobs share the cores,
    # and spinning threads take their time (bench/README.md: faster on a shared CPU, and on a GPU the CPU
    # pool is mostly idle anyway).
    so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    so.add_session_config_entry("session.inter_op.allow_spinning", "0")
    if attempt.device.ep == "CPUExecutionProvider":
        # The CPU arena alone reuses blocks as well; the memory pattern adds a second, planned block per input
        # shape (about +140 MB peak for DA3 small at 280, batch 4) for no measurable speed.
        so.enable_mem_pattern = False
    so.log_severity_level = 3  # ORT's own chatter; the device really used is logged by open_session
    if attempt.device.ep != "CPUExecutionProvider":
        so.add_session_config_entry(PLACEMENT_KEY, "1")  # for the count of nodes left on the CPU
    if attempt.built_in_only:
        return ort.InferenceSession(
            str(model_path), sess_options=so, providers=list(attempt.providers), enable_fallback=0
        )
    # A plugin provider opens on its device handle (ONNX Runtime's SessionOptionsAppendExecutionProvider_V2);
    # the CPU provider takes what it leaves.
    for (_, ep_options), handle in zip(attempt.providers, attempt.handles):
        if handle is not None:
            so.add_provider_for_devices([handle], ep_options)
    return ort.InferenceSession(str(model_path), sess_options=so, enable_fallback=0)


def _in_use(name: str, session, attempt: P.Attempt, options: SessionOptions, skipped, opened_s: float) -> str:
    active = session.get_providers()
    provider = P.provider_of(attempt.device.ep)
    precision = options.precision
    if precision == "fast" and provider.fast.startswith("none"):
        precision = f"fast requested, none on {provider.name}: float32"
    elif provider.name == "openvino_runtime" and precision == "fast" and session.precision != "bf16":
        precision = "fast requested, no bf16 on this CPU: float32"
    elif provider.name == "openvino_runtime":
        precision += f" ({session.precision})"
    elif provider.name == "tensorrt" and precision == "exact":
        precision += " (float32, TF32 off)"
    line = f"{name}: running on {attempt.device.label}, precision {precision}; opened in {opened_s:.2f} s"
    if len(active) > 1:
        line += f" (providers: {', '.join(P.short_name(ep) for ep in active)})"
    if attempt.device.ep not in ("CPUExecutionProvider", RUNTIME_EP):
        line += "; " + cpu_nodes_text(node_placement(session))
    if skipped:
        line += "; not used: " + "; ".join(f"{label}: {reason}" for label, reason in skipped)
    return line


def node_placement(session) -> dict[str, Counter] | None:
    """``{provider short name: Counter of op types}`` of the nodes ONNX Runtime assigned to each provider (the graph
    as optimised), or None where it recorded none (an ONNX Runtime before 1.24, or a session opened without
    ``PLACEMENT_KEY``)."""
    try:
        assigned = session.get_provider_graph_assignment_info()
    except Exception:  # no such method (older ONNX Runtime), or ONNX Runtime's Fail: not recorded
        return None
    placement: dict[str, Counter] = {}
    for subgraph in assigned:
        ops = placement.setdefault(P.short_name(subgraph.ep_name), Counter())
        ops.update(node.op_type for node in subgraph.get_nodes())
    return placement or None


def cpu_nodes_text(placement: dict[str, Counter] | None) -> str:
    """``nodes on the CPU: 3 of 1012 (Shape 2, Range)``: how many of the graph's nodes run on the CPU, and their most
    frequent op types."""
    if placement is None:
        return "nodes on the CPU: not reported by this ONNX Runtime"
    total = sum(sum(ops.values()) for ops in placement.values())
    on_cpu = placement.get("cpu", Counter())
    text = f"nodes on the CPU: {sum(on_cpu.values())} of {total}"
    if on_cpu:
        common = on_cpu.most_common(5)
        text += " (" + ", ".join(op if n == 1 else f"{op} {n}" for op, n in common)
        text += ", ...)" if len(on_cpu) > len(common) else ")"
    return text


class TimedSession:
    """An InferenceSession whose ``run`` wall time is summed into the module's totals (STEREO3D_PROFILE)."""

    def __init__(self, session):
        self._session = session

    def run(self, *args, **kwargs):
        return self._timed(self._session.run, *args, **kwargs)

    def run_with_iobinding(self, *args, **kwargs):
        return self._timed(self._session.run_with_iobinding, *args, **kwargs)

    @staticmethod
    def _timed(call, *args, **kwargs):
        start = time.perf_counter()
        try:
            return call(*args, **kwargs)
        finally:
            elapsed = time.perf_counter() - start
            with _totals_lock:
                _totals["calls"] += 1
                _totals["seconds"] += elapsed

    def __getattr__(self, name):
        return getattr(self._session, name)


def inference_totals(reset: bool = False) -> dict:
    """``{"calls": n, "seconds": s}`` summed over the ``run`` calls of profiled sessions (see PROFILE_ENV)."""
    with _totals_lock:
        totals = dict(_totals)
        if reset:
            _totals.update(calls=0, seconds=0.0)
    return totals


def session_device(session) -> tuple[str, int]:
    """``(device type, device id)`` where the session's first provider keeps its tensors: ``("cuda", n)`` for
    CUDA and TensorRT, ``("cpu", 0)`` otherwise (what I/O binding names for OrtValues)."""
    first = session.get_providers()[0]
    if first in P.NVIDIA_BUILT_IN:
        return "cuda", int(session.get_provider_options().get(first, {}).get("device_id", 0))
    return "cpu", 0


def model_metadata(session) -> dict[str, str]:
    """Contract facts the exporter stored in the ONNX metadata."""
    return dict(session.get_modelmeta().custom_metadata_map)
