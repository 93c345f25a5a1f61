"""The GPU allocator: fake device ids, real flocks, concurrent jobs as real processes."""

import multiprocessing as mp
import os
import signal
import time

import pytest

from stereo3d.errors import BadConfig
from stereo3d.runtime.devices import NoDeviceFree, acquire_device
from stereo3d.workflow import scripting

NO_SCHEDULER: dict = {}
FAKE = [0, 1, 2, 3, 5]  # ids the fake machine "has"
CTX = mp.get_context("fork")  # each job its own process: flocks are per open file, dropped at process death


def _hold(gpus, per_device, lock_dir, hold_s, queue):
    """A GPU job: take a device, report (pid, device, time), keep it ``hold_s`` seconds."""
    lease = acquire_device(gpus, per_device, lock_dir, environ=NO_SCHEDULER, present=FAKE, poll_s=0.05)
    queue.put((os.getpid(), lease.device_id, time.monotonic()))
    time.sleep(hold_s)
    queue.put((os.getpid(), "done", time.monotonic()))


def _jobs(n, gpus, per_device, lock_dir, hold_s):
    queue = CTX.Queue()
    procs = [CTX.Process(target=_hold, args=(gpus, per_device, str(lock_dir), hold_s, queue)) for _ in range(n)]
    for proc in procs:
        proc.start()
    return procs, queue


def _events(procs, queue, count):
    events = [queue.get(timeout=60) for _ in range(count)]
    for proc in procs:
        proc.join(60)
        assert proc.exitcode == 0
    return events


def test_concurrent_jobs_get_distinct_devices(tmp_path):
    procs, queue = _jobs(3, [1, 3, 0], 1, tmp_path, hold_s=1.0)
    events = _events(procs, queue, 6)
    devices = [device for _, device, _ in events if device != "done"]
    assert sorted(devices) == [0, 1, 3]


def test_a_job_waits_while_every_device_is_busy_and_gets_the_freed_one(tmp_path):
    procs, queue = _jobs(3, [2, 3], 1, tmp_path, hold_s=1.0)
    events = _events(procs, queue, 6)
    got = sorted((t, pid, device) for pid, device, t in events if device != "done")
    done = {pid: t for pid, device, t in events if device == "done"}
    first_two, third = got[:2], got[2]
    assert {device for _, _, device in first_two} == {2, 3}
    # The third job starts only after one of the first two finished, on the device that one released.
    freed_by = min(first_two, key=lambda e: done[e[1]])
    assert third[0] >= done[freed_by[1]] - 0.01
    assert third[2] in {2, 3}


def test_jobs_per_device_lets_that_many_jobs_share_one_and_spreads_first(tmp_path):
    procs, queue = _jobs(4, [0, 1], 2, tmp_path, hold_s=1.0)
    events = _events(procs, queue, 8)
    got = sorted(t for pid, device, t in events if device != "done")
    devices = [device for _, device, _ in events if device != "done"]
    assert sorted(devices) == [0, 0, 1, 1]
    assert got[-1] - got[0] < 1.0  # nobody waited: four slots for four jobs


def test_a_crashed_job_releases_its_device(tmp_path):
    queue = CTX.Queue()
    victim = CTX.Process(target=_hold, args=([5], 1, str(tmp_path), 60.0, queue))
    victim.start()
    _, device, _ = queue.get(timeout=60)
    assert device == 5
    with pytest.raises(NoDeviceFree):
        acquire_device([5], 1, tmp_path, environ=NO_SCHEDULER, present=[5], timeout_s=0.2, poll_s=0.05)
    os.kill(victim.pid, signal.SIGKILL)  # no cleanup code runs: the kernel drops the flock
    victim.join(10)
    lease = acquire_device([5], 1, tmp_path, environ=NO_SCHEDULER, present=[5], timeout_s=5, poll_s=0.05)
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
