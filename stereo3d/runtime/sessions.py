"""ONNX Runtime sessions: provider choice, the real provider logged, contract facts from metadata.

onnxruntime-gpu lists CUDA/TensorRT as available even where no GPU exists and then falls back to
CPU without a word, so every session reports what ``get_providers()`` really holds.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from stereo3d.errors import BadModel

log = logging.getLogger(__name__)

# Optional instrumentation for bench/: with STEREO3D_PROFILE set (to anything but "" or "0") when a session
# is opened, every ``run`` of that session adds its wall time to these totals (read them with
# ``inference_totals()``). Off by default: sessions are then returned bare, with no wrapper at all.
PROFILE_ENV = "STEREO3D_PROFILE"
_totals = {"calls": 0, "seconds": 0.0}
_totals_lock = threading.Lock()

PROVIDER_NAMES = {
    "tensorrt": "TensorrtExecutionProvider",
    "cuda": "CUDAExecutionProvider",
    "cpu": "CPUExecutionProvider",
}


@dataclass(frozen=True)
class SessionOptions:
    """How to run a model: requested providers in order of preference, and their settings."""

    providers: Sequence[str] = ("cpu",)  # names from PROVIDER_NAMES
    device_id: int = 0
    threads: int = 0  # 0: ONNX Runtime's default (all cores)
    gpu_mem_limit_mb: int | None = None  # bounds the CUDA arena (NVDS is VRAM-heavy)
    trt_cache_dir: str | None = None  # TensorRT engine cache, so engines are built once
    trt_fp16: bool = True
    extra: dict = field(default_factory=dict)


def provider_list(options: SessionOptions) -> list:
    """ORT's provider list for ``options``, restricted to what this build offers."""
    import onnxruntime as ort

    available = set(ort.get_available_providers())
    chosen = []
    for name in options.providers:
        if name not in PROVIDER_NAMES:
            raise ValueError(f"unknown provider {name!r} (valid: {', '.join(PROVIDER_NAMES)})")
        full = PROVIDER_NAMES[name]
        if full not in available:
            log.warning("provider %s requested but this onnxruntime build lacks it", name)
            continue
        if name == "tensorrt":
            cfg = {"device_id": options.device_id, "trt_fp16_enable": options.trt_fp16}
            if options.trt_cache_dir:
                os.makedirs(options.trt_cache_dir, exist_ok=True)
                cfg.update(
                    trt_engine_cache_enable=True,
                    trt_engine_cache_path=options.trt_cache_dir,
                    trt_timing_cache_enable=True,
                    trt_timing_cache_path=options.trt_cache_dir,
                )
            chosen.append((full, cfg))
        elif name == "cuda":
            cfg = {"device_id": options.device_id}
            if options.gpu_mem_limit_mb:
                cfg["gpu_mem_limit"] = int(options.gpu_mem_limit_mb) * 1024 * 1024
                cfg["arena_extend_strategy"] = "kSameAsRequested"
            chosen.append((full, cfg))
        else:
            chosen.append(full)
    if "CPUExecutionProvider" not in [c if isinstance(c, str) else c[0] for c in chosen]:
        chosen.append("CPUExecutionProvider")  # the last resort is always there, and logged below
    return chosen


def open_session(model_path: str | Path, options: SessionOptions = SessionOptions()):
    """An InferenceSession on the best available provider; logs the provider actually in use."""
    import onnxruntime as ort

    model_path = Path(model_path)
    if not model_path.is_file():
        raise BadModel(model_path, "model file not found (run the export rule first)")
    providers = provider_list(options)
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    if options.threads:
        so.intra_op_num_threads = options.threads
    # No busy-waiting between operators: the decoder, the map writer, ffmpeg and other jobs share the cores,
    # and spinning threads take their time (bench/README.md: faster on a shared CPU, and on a GPU the CPU
    # pool is mostly idle anyway).
    so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    so.add_session_config_entry("session.inter_op.allow_spinning", "0")
    if all((p if isinstance(p, str) else p[0]) == "CPUExecutionProvider" for p in providers):
        # The CPU arena alone reuses blocks as well; the memory pattern adds a second, planned block per input
        # shape (about +140 MB peak for DA3 small at 280, batch 4) for no measurable speed.
        so.enable_mem_pattern = False
    so.log_severity_level = 3  # ORT's own fallback chatter; the real provider is logged below
    started = time.perf_counter()
    try:
        session = ort.InferenceSession(str(model_path), sess_options=so, providers=providers)
    except Exception as exc:  # ORT raises its own types (Fail, InvalidGraph, ...): one line for the user
        raise BadModel(model_path, f"ONNX Runtime cannot load it: {str(exc).splitlines()[0]}") from exc
    opened_s = time.perf_counter() - started
    active = session.get_providers()
    requested = [PROVIDER_NAMES[p] for p in options.providers if p in PROVIDER_NAMES]
    if requested and active[0] != requested[0]:
        log.warning("%s: requested %s but running on %s", model_path.name, requested[0], active[0])
    # Opening is a job's fixed cost (graph optimisation; on a GPU, the provider's start), paid once per job.
    log.info("%s: opened in %.2f s; providers in use: %s", model_path.name, opened_s, ", ".join(active))
    if os.environ.get(PROFILE_ENV, "") not in ("", "0"):
        return TimedSession(session)
    return session


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
    if first in (PROVIDER_NAMES["cuda"], PROVIDER_NAMES["tensorrt"]):
        return "cuda", int(session.get_provider_options().get(first, {}).get("device_id", 0))
    return "cpu", 0


def model_metadata(session) -> dict[str, str]:
    """Contract facts the exporter stored in the ONNX metadata."""
    return dict(session.get_modelmeta().custom_metadata_map)
