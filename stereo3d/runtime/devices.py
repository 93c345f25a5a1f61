"""GPU device allocation for jobs that declare ``resources: gpu=1``.

Snakemake counts the ``gpu`` resource but does not say *which* device a local job may use (it sets no
``CUDA_VISIBLE_DEVICES``). So each GPU job picks one itself:

1. A scheduler that sets ``CUDA_VISIBLE_DEVICES`` (SLURM with ``--gres``/``--gpus``, a GPU-aware runner)
   has already chosen: the job uses device 0 of what it sees and takes no lock.
2. Otherwise the job takes a free slot of the configured devices (``runtime.gpus``), each device offering
   ``runtime.gpu_jobs_per_device`` slots, by an exclusive ``fcntl.flock`` on one lock file per slot in a lock
   folder shared by every job of the machine. The lock lives as long as the returned ``DeviceLease`` (in
   practice: the job's process); the kernel drops it when the process dies, so a crashed or killed job never
   leaves a device marked busy. When every slot is taken the job waits for one.
3. A machine without NVIDIA devices (no ``/dev/nvidia<N>``) runs on the CPU: no device, no lock.

``runtime.gpus`` should list as many devices as the profile's ``resources: gpu=N`` allows, times
``gpu_jobs_per_device``: then Snakemake never starts a GPU job that would have to wait here.
"""

from __future__ import annotations

import errno
import fcntl
import glob
import logging
import os
import re
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from stereo3d.errors import BadConfig, StereoError

log = logging.getLogger(__name__)

LOCK_DIR_NAME = "stereo3d-gpu-locks"
_NVIDIA_NODE = re.compile(r"/dev/nvidia(\d+)$")


class NoDeviceFree(StereoError):
    kind = "no GPU free"


@dataclass
class DeviceLease:
    """The device a job runs on. ``device_id`` is the CUDA ordinal to hand to ONNX Runtime (None: CPU).

    ``source`` says how it was chosen: ``scheduler`` (CUDA_VISIBLE_DEVICES), ``lock`` (a slot of
    ``runtime.gpus``) or ``cpu``. Keep the lease alive while the device is in use; ``release()`` (or the end
    of the process) frees the slot.
    """

    device_id: int | None
    source: str
    slot: int | None = None
    lock_path: Path | None = None
    _fd: int | None = field(default=None, repr=False)

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> DeviceLease:
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def acquire_device(
    gpus: Sequence[int] = (0,),
    jobs_per_device: int = 1,
    lock_dir: str | Path | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    present: Sequence[int] | None = None,
    timeout_s: float | None = None,
    poll_s: float = 1.0,
) -> DeviceLease:
    """The device this job may use, locked for as long as the lease lives (see the module doc).

    ``environ`` (default ``os.environ``) and ``present`` (default: the ``/dev/nvidia<N>`` nodes) are
    what the machine offers; tests pass fakes. Waits for a free slot, at most ``timeout_s`` if given
    (then ``NoDeviceFree``).
    """
    environ = os.environ if environ is None else environ
    visible = environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return _scheduled(visible)
    gpus = [int(g) for g in gpus]
    if not gpus:
        raise BadConfig("runtime.gpus", "the list of GPU ids is empty")
    if jobs_per_device < 1:
        raise BadConfig("runtime.gpu_jobs_per_device", f"must be at least 1, not {jobs_per_device}")
    present = nvidia_devices() if present is None else [int(p) for p in present]
    if not present:
        log.info("no NVIDIA GPU on this machine: running on the CPU")
        return DeviceLease(device_id=None, source="cpu")
    usable = [g for g in gpus if g in present]
    missing = sorted(set(gpus) - set(usable))
    if missing:
        log.warning("runtime.gpus lists %s, which this machine lacks (it has %s)", missing, sorted(present))
    if not usable:
        raise BadConfig("runtime.gpus", f"none of {gpus} exists on this machine (it has {sorted(present)})")
    folder = Path(lock_dir) if lock_dir else default_lock_dir()
    folder.mkdir(parents=True, exist_ok=True)
    # Slot-major order: every device's first slot before any device's second, so jobs spread out.
    slots = [(slot, gpu) for slot in range(jobs_per_device) for gpu in usable]
    started = time.monotonic()
    waiting_logged = False
    while True:
        for slot, gpu in slots:
            lease = _try_lock(folder / f"gpu{gpu}.slot{slot}.lock", gpu, slot)
            if lease is not None:
                log.info(
                    "GPU %d (slot %d of %d) locked for this job: %s", gpu, slot + 1, jobs_per_device, lease.lock_path
                )
                return lease
        waited = time.monotonic() - started
        if timeout_s is not None and waited >= timeout_s:
            raise NoDeviceFree(folder, f"all {len(slots)} slots of GPUs {usable} stayed busy for {waited:.0f} s")
        if not waiting_logged:
            log.info("all %d slots of GPUs %s are busy; waiting for one (locks in %s)", len(slots), usable, folder)
            waiting_logged = True
        time.sleep(poll_s)


def nvidia_devices() -> list[int]:
    """Ordinals of the NVIDIA devices this machine exposes (``/dev/nvidia0``, ``/dev/nvidia1``, ...)."""
    found = (_NVIDIA_NODE.match(path) for path in glob.glob("/dev/nvidia[0-9]*"))
    return sorted(int(m.group(1)) for m in found if m)


def default_lock_dir() -> Path:
    """One folder per user in the system temp folder: shared by every job (and workflow) of this user."""
    user = os.environ.get("USER") or str(os.getuid())
    return Path(tempfile.gettempdir()) / f"{LOCK_DIR_NAME}-{user}"


def _scheduled(visible: str) -> DeviceLease:
    ids = [v.strip() for v in visible.split(",") if v.strip()]
    if not ids or ids[0] == "-1":
        log.info("CUDA_VISIBLE_DEVICES=%r hides every GPU: running on the CPU", visible)
        return DeviceLease(device_id=None, source="cpu")
    if len(ids) > 1:
        log.warning(
            "CUDA_VISIBLE_DEVICES=%s lists %d devices; this job uses the first (%s). Unset it to let jobs "
            "share runtime.gpus by locks instead",
            visible,
            len(ids),
            ids[0],
        )
    log.info("device chosen by the scheduler: CUDA_VISIBLE_DEVICES=%s, device 0 of those", visible)
    return DeviceLease(device_id=0, source="scheduler")


def _try_lock(path: Path, gpu: int, slot: int) -> DeviceLease | None:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        os.close(fd)
        if exc.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
            return None
        raise
    # Who holds it, for a person looking at the folder (the lock itself is the flock, not this text).
    os.ftruncate(fd, 0)
    os.write(fd, f"pid {os.getpid()} gpu {gpu} slot {slot}\n".encode())
    return DeviceLease(device_id=gpu, source="lock", slot=slot, lock_path=path, _fd=fd)
