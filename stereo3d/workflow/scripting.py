"""What every thin script shares: logging into the rule's log, runtime options, one-line failures."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from stereo3d.errors import BadVideo, StereoError
from stereo3d.runtime.devices import DeviceLease, acquire_device
from stereo3d.runtime.providers import NVIDIA, parse_request
from stereo3d.runtime.sessions import SessionOptions
from stereo3d.workflow.failures import record_failure, record_path
from stereo3d.workflow.sources import fingerprint

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
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


@dataclass(frozen=True)
class SourceFailure:
    """Where a stage records that its source file is unusable (see stereo3d.workflow.failures)."""

    record: Path
    source: Path  # the real file (not the workflow's link to it)
    rule: str


def run_guarded(main: Callable[[], object], on_bad_source: SourceFailure | None = None) -> None:
    """Run ``main``; a StereoError becomes one line (log and stderr) and exit status 1. A ``BadVideo`` about the
    source itself is also recorded (``on_bad_source``), so the library goes on without that file until it
    changes."""
    try:
        main()
    except StereoError as exc:
        logging.getLogger("stereo3d").error("%s", exc)
        if on_bad_source is not None and isinstance(exc, BadVideo) and _is(exc.path, on_bad_source.source):
            record_failure(on_bad_source.record, str(exc), on_bad_source.rule, fingerprint(on_bad_source.source))
        sys.exit(1)


def source_of(smk) -> str:
    """The real file behind a rule's ``source`` input (a link under the work folder, see
    stereo3d.workflow.sources): what the stage reads, and what its messages name."""
    return os.path.realpath(smk.input.source)


def bad_source_record(smk) -> SourceFailure:
    """The failure record of the video a per-video rule works on."""
    return SourceFailure(
        record=record_path(smk.config["paths"]["work"], smk.wildcards.video),
        source=Path(source_of(smk)),
        rule=smk.rule,
    )


def _is(path: Path | None, source: Path) -> bool:
    return path is not None and os.path.realpath(path) == os.path.realpath(source)


def session_options(
    runtime: dict,
    gpu_mem_limit: bool = True,
    models_dir: str | None = None,
    precision: str = "exact",
    max_batch: int | None = None,
    fp16: bool = False,
) -> SessionOptions:
    """SessionOptions from the config's ``runtime`` section, on the device this job may use.

    ``precision`` comes from the job's depth settings (not from the config: they are what its depth key names,
    under which its outputs are stored). When an NVIDIA provider may be used (``auto`` or named), the job takes its
    device from :func:`gpu_lease` (a scheduler's CUDA_VISIBLE_DEVICES, else a locked slot of ``runtime.gpus``; none on a
    machine without NVIDIA GPUs); the lock is held until the process ends. TensorRT engines are cached in
    ``runtime.trt_cache_dir``, else in ``<models_dir>/TensorRT``, one folder per model content and precision
    (building one takes minutes; every later job of the same model reuses it), with a profile for batches 1 ..
    ``max_batch``. With ``fp16`` (a model that no TensorRT engine serves), a CUDA session under ``fast`` opens a
    float16 copy of the model, made once into ``<models_dir>/fp16`` (``stereo3d.runtime.sessions.fp16_copy``).
    """
    providers = runtime.get("providers", "auto")
    nvidia = any(name in NVIDIA for name, _ in parse_request(providers))
    lease = gpu_lease(runtime) if nvidia else None
    device_id = lease.device_id if lease is not None and lease.device_id is not None else 0
    return SessionOptions(
        providers=providers if isinstance(providers, str) else tuple(providers),
        precision=precision,
        device_id=device_id,
        threads=int(runtime.get("threads", 0)),
        gpu_mem_limit_mb=int(runtime["gpu_mem_limit_mb"]) if gpu_mem_limit else None,
        trt_cache_dir=runtime.get("trt_cache_dir") or (f"{models_dir}/TensorRT" if models_dir else None),
        max_batch=max_batch,
        fp16_dir=f"{models_dir}/fp16" if fp16 and models_dir else None,
    )


def depth_job(smk, settings) -> dict:
    """The depth stage's arguments that a job (rule depth, preview_depth) of ``settings`` (its ``DepthSettings``,
    from the rule's params) takes from the config: the batch and the session. Batch and runtime are speed settings:
    read from config, not params, so they trigger no rerun (the batch is part of a depth job's identity, so the
    preview takes the full run's). The session computes in the settings' precision."""
    batch = smk.config["da3"]["batch"]
    options = session_options(smk.config["runtime"], gpu_mem_limit=False, models_dir=smk.config["paths"]["models"],
                              precision=settings.precision, max_batch=batch)  # fmt: skip
    return {"batch": batch, "options": options}


def near_job(smk) -> dict:
    """The near-map stage's arguments that a job (rule near_maps, preview_near_maps) takes besides its settings,
    from its inputs, depth key and config: the NVDS models' folder, the session (runtime: speed only, read from
    config; NVDS runs in the precision of the depth it stabilises, whose key its maps are stored under: under
    ``fast`` on CUDA, its graphs' float16 copies, as no TensorRT engine serves it) and the picture inside bars."""
    from stereo3d.workflow.keys import parse_depth_key

    key = parse_depth_key(smk.wildcards.dkey)
    return {
        "models_dir": Path(smk.input.models[0]).parent if smk.input.models else None,
        "options": session_options(
            smk.config["runtime"], models_dir=smk.config["paths"]["models"], precision=key["precision"], fp16=True
        ),  # fmt: skip
        "picture": key["picture"],
    }


def render_job(smk) -> dict:
    """What a render job (rule render, preview_render) takes besides its settings, from its depth key and the
    config: the picture inside bars, and a renderer on the job's device (a speed setting: read from config, so it
    triggers no rerun)."""
    from stereo3d.stereo.warp import Renderer

    runtime = smk.config["runtime"]
    return {
        "renderer": Renderer(runtime["render_device"], render_device_id(runtime), threads=smk.threads),
        "picture": render_job_picture(smk),
    }


def render_job_picture(smk):
    """The picture inside bars that a job's near maps cover (None: the whole frame): named by the depth key they
    are stored under."""
    from stereo3d.workflow.keys import parse_depth_key

    return parse_depth_key(smk.wildcards.dkey)["picture"]


def render_device_id(runtime: dict) -> int:
    """The GPU a render job draws on: device 0 of what a scheduler made visible (CUDA_VISIBLE_DEVICES), else the
    first of ``runtime.gpus``. No slot is locked: rendering takes a few MB and milliseconds per frame, and may
    share the device with a depth or NVDS job."""
    return 0 if os.environ.get("CUDA_VISIBLE_DEVICES") is not None else int(runtime.get("gpus", [0])[0])


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
