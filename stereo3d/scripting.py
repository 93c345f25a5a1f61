"""What every thin script shares: logging into the rule's log, runtime options, one-line failures."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable

from stereo3d.errors import StereoError
from stereo3d.runtime import SessionOptions

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


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


def session_options(runtime: dict, gpu_mem_limit: bool = True) -> SessionOptions:
    """SessionOptions from the config's ``runtime`` section, on the device this job may use.

    A scheduler (SLURM, a GPU-aware runner) that sets CUDA_VISIBLE_DEVICES has already chosen the
    device: it is device 0 of what this process sees.
    """
    return SessionOptions(providers=tuple(runtime["providers"]), device_id=0, threads=int(runtime.get("threads", 0)),
                          gpu_mem_limit_mb=int(runtime["gpu_mem_limit_mb"]) if gpu_mem_limit else None,
                          trt_cache_dir=runtime.get("trt_cache_dir"))
