"""The GPU allocator: fake device ids, real flocks, concurrent jobs as real processes."""

from __future__ import annotations

import logging
import multiprocessing as mp
import os
import signal

import pytest

from stereo3d.errors import BadConfig
from stereo3d.runtime.devices import NoDeviceFree, acquire_device
from stereo3d.workflow import scripting

NO_SCHEDULER: dict = {}
FAKE = [0, 1, 2, 3, 5]  # ids the fake machine "has"
CTX = mp.get_context("fork")  # each job its own process: flocks are per open file, dropped at process death
HANG_S = 60  # only so that a broken allocator fails instead of hanging the suite; never what a test asserts


class _SetOnWaiting(logging.Handler):
    """Sets an event when the allocator logs that every slot is busy and it waits for one."""

    def __init__(self, event):
        super().__init__()
        self.event = event

    def emit(self, record):
        if "waiting" in record.getMessage():
            self.event.set()


def _job(gpus, per_device, lock_dir, acquired, waiting, release, releasing, freed=None):
    """A GPU job: take a device (setting ``waiting`` if it finds every slot busy), report it on ``acquired``
    (with whether ``freed`` was already set when it got it), hold it until ``release`` is set, set ``releasing``,
    then let go."""
    devices_log = logging.getLogger("stereo3d.runtime.devices")
    devices_log.addHandler(_SetOnWaiting(waiting))
    devices_log.setLevel(logging.INFO)
    lease = acquire_device(
        gpus, per_device, lock_dir, environ=NO_SCHEDULER, present=FAKE, timeout_s=HANG_S, poll_s=0.02
    )
    acquired.put((lease.device_id, None if freed is None else freed.is_set()))
    if not release.wait(HANG_S):
        raise SystemExit(3)
    releasing.set()  # before the release: a job that got this device afterwards must see it set
    lease.release()


class Job:
    """One GPU job in a process of its own, driven by events (no sleeping, no clocks)."""

    def __init__(self, gpus, per_device, lock_dir, freed=None):
        self.acquired = CTX.Queue()
        self.waiting, self.release, self.releasing = CTX.Event(), CTX.Event(), CTX.Event()
        args = (gpus, per_device, str(lock_dir), self.acquired, self.waiting, self.release, self.releasing, freed)
        self.proc = CTX.Process(target=_job, args=args)
        self.device = self.saw_freed = None

    def launch(self) -> Job:
        self.proc.start()
        return self

    def wait_for_device(self) -> Job:
        self.device, self.saw_freed = self.acquired.get(timeout=HANG_S)
        return self

    def start(self) -> Job:
        """Launch the job and return once it holds a device."""
        return self.launch().wait_for_device()

    def finish(self) -> None:
        self.release.set()
        self.proc.join(HANG_S)
        assert self.proc.exitcode == 0


def test_concurrent_jobs_get_distinct_devices(tmp_path):
    jobs = [Job([1, 3, 0], 1, tmp_path).launch() for _ in range(3)]
    for job in jobs:  # every one holds its device until all three have one
        job.wait_for_device()
    assert sorted(job.device for job in jobs) == [0, 1, 3]
    for job in jobs:
        job.finish()


def test_a_job_waits_while_every_device_is_busy_and_gets_the_one_freed_first(tmp_path):
    first = Job([2, 3], 1, tmp_path).start()
    second = Job([2, 3], 1, tmp_path).start()
    assert (first.device, second.device) == (2, 3)  # in the configured order
    # The third job finds both busy. The second job lets go first (the first keeps device 2 to the end), so the
    # third must get device 3, and only after the second job started releasing it.
    third = Job([2, 3], 1, tmp_path, freed=second.releasing).launch()
    assert third.waiting.wait(HANG_S), "the third job never found both devices busy"
    second.finish()
    third.wait_for_device()
    assert third.device == 3
    assert third.saw_freed is True  # it did not take device 3 while the second job still held it
    assert first.proc.is_alive()  # ...and device 2 was never free in between
    first.finish()
    third.finish()


def test_jobs_per_device_lets_that_many_jobs_share_one_and_spreads_first(tmp_path):
    jobs = []
    for _ in range(4):  # one after the other, each holding its slot: nobody can wait, four slots for four jobs
        jobs.append(Job([0, 1], 2, tmp_path).start())
    devices = [job.device for job in jobs]
    assert sorted(devices[:2]) == [0, 1]  # every device's first slot before any device's second
    assert sorted(devices) == [0, 0, 1, 1]
    for job in jobs:
        job.finish()


def test_a_crashed_job_releases_its_device(tmp_path):
    victim = Job([5], 1, tmp_path).start()
    assert victim.device == 5
    with pytest.raises(NoDeviceFree):
        acquire_device([5], 1, tmp_path, environ=NO_SCHEDULER, present=[5], timeout_s=0, poll_s=0.05)
    os.kill(victim.proc.pid, signal.SIGKILL)  # no cleanup code runs: the kernel drops the flock
    victim.proc.join(HANG_S)
    assert victim.proc.exitcode == -signal.SIGKILL and not victim.releasing.is_set()
    lease = acquire_device([5], 1, tmp_path, environ=NO_SCHEDULER, present=[5], timeout_s=0)
    assert lease.device_id == 5 and lease.held
    lease.release()


def test_release_frees_the_slot_within_one_process(tmp_path):
    first = acquire_device([0], 1, tmp_path, environ=NO_SCHEDULER, present=[0])
    with pytest.raises(NoDeviceFree):
        acquire_device([0], 1, tmp_path, environ=NO_SCHEDULER, present=[0], timeout_s=0, poll_s=0.01)
    first.release()
    with acquire_device([0], 1, tmp_path, environ=NO_SCHEDULER, present=[0], timeout_s=0) as second:
        assert second.device_id == 0


@pytest.mark.parametrize("visible", ["3", "GPU-8a1b2c3d", "2,3"])
def test_a_scheduler_choice_is_device_zero_of_the_visible_ones_without_a_lock(tmp_path, visible):
    lease = acquire_device([0, 1], 1, tmp_path, environ={"CUDA_VISIBLE_DEVICES": visible}, present=FAKE)
    assert (lease.device_id, lease.source, lease.held) == (0, "scheduler", False)
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("visible", ["", "-1"])
def test_an_empty_visible_list_means_cpu(tmp_path, visible):
    lease = acquire_device([0], 1, tmp_path, environ={"CUDA_VISIBLE_DEVICES": visible}, present=FAKE)
    assert (lease.device_id, lease.source) == (None, "cpu")


def test_a_machine_without_gpus_runs_on_cpu_without_locks(tmp_path):
    lease = acquire_device([0, 1], 1, tmp_path, environ=NO_SCHEDULER, present=[])
    assert (lease.device_id, lease.source, lease.held) == (None, "cpu", False)


def test_configured_devices_the_machine_lacks_are_skipped_or_refused(tmp_path):
    lease = acquire_device([7, 1], 1, tmp_path, environ=NO_SCHEDULER, present=[0, 1])
    assert lease.device_id == 1
    lease.release()
    with pytest.raises(BadConfig, match="runtime.gpus"):
        acquire_device([7], 1, tmp_path, environ=NO_SCHEDULER, present=[0, 1])


def test_session_options_keeps_the_lease_for_the_process(tmp_path, monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setattr(scripting, "_LEASE", None)
    monkeypatch.setattr("stereo3d.runtime.devices.nvidia_devices", lambda: [0, 1])
    runtime = {
        "providers": ["cuda", "cpu"],
        "threads": 0,
        "gpu_mem_limit_mb": 1024,
        "gpus": [1, 0],
        "gpu_jobs_per_device": 1,
        "gpu_lock_dir": str(tmp_path),
    }
    options = scripting.session_options(runtime)
    again = scripting.session_options(runtime)
    assert options.device_id == again.device_id == 1
    assert scripting._LEASE.held
    scripting._LEASE.release()


def test_session_options_takes_no_device_for_cpu_only_providers(monkeypatch):
    monkeypatch.setattr(scripting, "_LEASE", None)
    options = scripting.session_options({"providers": ["cpu"], "gpu_mem_limit_mb": 1024})
    assert options.device_id == 0 and scripting._LEASE is None
    # NVDS's jobs ask for float16 copies (used by CUDA under `fast`), kept beside the TensorRT engines.
    assert options.fp16_dir is None
    nvds = scripting.session_options({"providers": ["cpu"], "gpu_mem_limit_mb": 1024}, models_dir="m", fp16=True)
    assert (nvds.fp16_dir, nvds.trt_cache_dir) == ("m/fp16", "m/TensorRT")


def test_auto_providers_lease_a_gpu_only_where_an_nvidia_gpu_exists(tmp_path, monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setattr(scripting, "_LEASE", None)
    monkeypatch.setattr("stereo3d.runtime.devices.nvidia_devices", lambda: [])
    runtime = {"providers": "auto", "gpu_mem_limit_mb": 1024, "gpus": [0], "gpu_lock_dir": str(tmp_path)}
    options = scripting.session_options(runtime, precision="fast", max_batch=4)
    assert options.providers == "auto" and options.precision == "fast" and options.max_batch == 4
    assert options.device_id == 0 and not scripting._LEASE.held and not list(tmp_path.iterdir())
    monkeypatch.setattr(scripting, "_LEASE", None)
    monkeypatch.setattr("stereo3d.runtime.devices.nvidia_devices", lambda: [0])
    scripting.session_options(runtime)
    assert scripting._LEASE.held  # auto may run on the NVIDIA GPU: the job locks its slot
    scripting._LEASE.release()
