"""GPU device allocation for jobs that declare ``resources: gpu=1``.

Snakemake counts the ``gpu`` resource but does not say *which* device a local job may use (it sets no
``CUDA_VISIBLE_DEVICES``). So each GPU job picks one itself:

1. A scheduler that sets ``CUDA_VISIBLE_DEVICES`` (SLURM with ``--gres``/``--gpus``, a GPU-aware runner)
   has already chosen: the job uses device 0 of what it sees and takes no lock.
2. Otherwise the job takes a free slot of the configured devices (``runtime.gpus``), each device offering
   ``runtime.gpu_jobs_per_device`` slots, by an exclusive lock (``stereo3d.io.locks``: ``flock``, or
   ``LockFileEx`` on Windows) on one lock file per slot in a lock folder shared by every job of the machine. The
   lock lives as long as the returned ``DeviceLease`` (in practice: the job's process); the operating system
   drops it when the process dies, so a crashed or killed job never leaves a device marked busy. When every slot
   is taken the job waits for one.
3. A machine without NVIDIA devices runs on the CPU: no device, no lock. Linux shows its NVIDIA devices as
   ``/dev/nvidia<N>``; Windows and WSL2 have no such nodes, and there the driver's management library (NVML)
   counts them.

``runtime.gpus`` should list as many devices as the profile's ``resources: gpu=N`` allows, times
``gpu_jobs_per_device``: then Snakemake never starts a GPU job that would have to wait here.
"""

from __future__ import annotations

import ctypes
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
from stereo3d.io import locks

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
            locks.unlock(self._fd)
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
    """Ordinals of the NVIDIA devices this machine exposes: its ``/dev/nvidia0``, ``/dev/nvidia1``, ... nodes
    (Linux), else as many as NVML counts (Windows, WSL2), else none."""
    found = (_NVIDIA_NODE.match(path) for path in glob.glob("/dev/nvidia[0-9]*"))
    nodes = sorted(int(m.group(1)) for m in found if m)
    return nodes or list(range(nvml_device_count()))


# The NVIDIA driver's management library: in System32 on Windows (older drivers: NVSMI), in /usr/lib/wsl/lib under
# WSL2, beside the driver on Linux.
NVML_LIBRARIES = ("nvml.dll", r"C:\Program Files\NVIDIA Corporation\NVSMI\nvml.dll", "libnvidia-ml.so.1")


def nvml_device_count(libraries: tuple[str, ...] = NVML_LIBRARIES) -> int:
    """How many NVIDIA GPUs the driver's NVML reports (0 where no driver is installed). NVML does not create a
    CUDA context, so asking costs no GPU memory and leaves no state behind."""
    for name in libraries:
        try:
            nvml = ctypes.CDLL(name)
        except OSError:
            continue
        try:
            if nvml.nvmlInit_v2() != 0:
                return 0
            count = ctypes.c_uint(0)
            ok = nvml.nvmlDeviceGetCount_v2(ctypes.byref(count)) == 0
            nvml.nvmlShutdown()
            return count.value if ok else 0
        except AttributeError:  # a library of that name without NVML's functions
            continue
    return 0


def default_lock_dir() -> Path:
    """One folder per user in the system temp folder: shared by every job (and workflow) of this user."""
    return Path(tempfile.gettempdir()) / f"{LOCK_DIR_NAME}-{_user()}"


def _user() -> str:
    """This user's name, for the lock folder: ``USER`` (POSIX), ``USERNAME`` (Windows), else the login name."""
    import getpass

    try:
        name = os.environ.get("USER") or os.environ.get("USERNAME") or getpass.getuser()
    except (OSError, KeyError, ImportError):  # no name anywhere: one folder for every such user
        name = "user"
    return re.sub(r"[^A-Za-z0-9._-]", "_", name) or "user"


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
    fd = locks.try_lock(path)
    if fd is None:
        return None
    # Who holds it, for a person looking at the folder (the lock itself is the file lock, not this text).
    os.ftruncate(fd, 0)
    os.write(fd, f"pid {os.getpid()} gpu {gpu} slot {slot}\n".encode())
    return DeviceLease(device_id=gpu, source="lock", slot=slot, lock_path=path, _fd=fd)
