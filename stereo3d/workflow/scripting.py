"""What every thin script shares: logging into the rule's log, runtime options, one-line failures."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable

from stereo3d.errors import StereoError
from stereo3d.runtime.devices import DeviceLease, acquire_device
from stereo3d.runtime.sessions import SessionOptions

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
GPU_PROVIDERS = {"cuda", "tensorrt"}
_LEASE: DeviceLease | None = None  # the device lock lives as long as the job's process


def setup_logging(log_path: str | None = None, level: int = logging.INFO) -> None:
    """Log to the rule's log file (if any) and warnings/errors to stderr as well."""
    handlers: list[logging.Handler] = []
    if log_path:
        os.makedirs(os.path.dirname(log_path) or ".", exist_ok=True)
        handlers.append(logging.FileHandler(log_path, mode="w", encoding="utf-8"))
    console = logging.StreamHandler(sys.stderr)
    console.setLevel(logging.WARNING if log_path else level)
    handlers.append(console)
    logging.basicConfig(level=level, format=FORMAT, handlers=handlers, force=True)


def run_guarded(main: Callable[[], object]) -> None:
    """Run ``main``; a StereoError becomes one line (log and stderr) and exit status 1."""
    try:
        main()
    except StereoError as exc:
        logging.getLogger("stereo3d").error("%s", exc)
        sys.exit(1)


def session_options(runtime: dict, gpu_mem_limit: bool = True, models_dir: str | None = None) -> SessionOptions:
    """SessionOptions from the config's ``runtime`` section, on the device this job may use.

    When a GPU provider is asked for, the job takes its device from :func:`gpu_lease` (a scheduler's
    CUDA_VISIBLE_DEVICES, else a locked slot of ``runtime.gpus``); the lock is held until the process ends.
    TensorRT engines are cached in ``runtime.trt_cache_dir``, else in ``<models_dir>/TensorRT`` (building one
    takes minutes; every later job of the same model and device reuses it).
    """
    lease = gpu_lease(runtime) if set(runtime["providers"]) & GPU_PROVIDERS else None
    device_id = lease.device_id if lease is not None and lease.device_id is not None else 0
    return SessionOptions(
        providers=tuple(runtime["providers"]),
        device_id=device_id,
        threads=int(runtime.get("threads", 0)),
        gpu_mem_limit_mb=int(runtime["gpu_mem_limit_mb"]) if gpu_mem_limit else None,
        trt_cache_dir=runtime.get("trt_cache_dir") or (f"{models_dir}/TensorRT" if models_dir else None),
    )


def gpu_lease(runtime: dict) -> DeviceLease:
    """This process's device, acquired once and kept (with its lock) for the rest of the process."""
    global _LEASE
    if _LEASE is None:
        _LEASE = acquire_device(
            gpus=runtime.get("gpus", [0]),
            jobs_per_device=int(runtime.get("gpu_jobs_per_device", 1)),
            lock_dir=runtime.get("gpu_lock_dir") or None,
        )
    return _LEASE
