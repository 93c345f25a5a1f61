"""Shared fixtures: tiny generated videos (stereo3d.demo.samples) in each test's temporary folder;
``needs_export_extra``, which the export tests call instead of a bare ``pytest.importorskip``; and the list of the
tests that may skip in CI (``SKIPS_IN_CI``): any other skip fails a CI run."""

from __future__ import annotations

import fnmatch
import importlib
import os
from pathlib import Path

import pytest

from stereo3d.demo import samples


def in_ci() -> bool:
    """Whether this is a CI run (``CI=true``, as CI services set it): the export extra is installed there."""
    return os.environ.get("CI", "").strip().lower() in ("true", "1")


def needs_export_extra(*modules: str):
    """Import ``modules`` of the export extra (torch, onnx, onnxscript, safetensors, the DA3 model code), in a test,
    a fixture or at module level, and return the last one.

    Where one is missing the test is skipped, as ``pytest.importorskip`` would, except in CI: CI installs the
    extra, so there a missing module fails (a test error, or a collection error at module level) instead of
    letting the export tests vanish from the run without a word.
    """
    module = None
    for name in modules:
        try:
            module = importlib.import_module(name)
            continue
        except ImportError as exc:
            why = (
                f"{name} does not import ({exc}); it comes with the export extra: pip install -e '.[export]' "
                "and pip install --no-deps depth-anything-3 (README)"
            )
        if in_ci():
            pytest.fail(f"CI=true, and CI installs the export extra, but {why}", pytrace=False)
        pytest.skip(why, allow_module_level=True)
    return module


@pytest.fixture
def make_clip(tmp_path):
    """Factory: ``make_clip("name.mp4", **options)`` writes a clip into the test's tmp folder and returns its path.

    Options are those of ``stereo3d.demo.samples.make_clip`` (width, height, frames, fps, audio, subtitles, pattern,
    codec, pix_fmt, extra, vfr, rotation). A name with folders creates them.
    """

    def _make(name: str = "clip.mp4", **options) -> Path:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        return samples.make_clip(path, **options)

    return _make


@pytest.fixture
def lossless_clip(make_clip):
    """Factory for clips whose decoded frames are exact (FFV1 in Matroska), for array comparisons."""

    def _make(name: str = "lossless.mkv", **options) -> Path:
        options.setdefault("codec", "ffv1")
        return make_clip(name, **options)

    return _make


# The order in which the modules are handed to the two pytest-xdist workers, a module at a time (pyproject: -n 2
# --dist loadfile --no-loadscope-reorder; without it xdist hands them out by their number of tests, whatever their
# length, and a worker could wait on the exports' lock). The first module builds the session's exports
# (harness.export_cache: ~75 s on two cores) while the other worker runs modules that need none, longest first;
# then come the modules that need them, longest first (pytest --durations, two cores), so that only short modules
# are left for the end. Every other module follows in its usual order.
ORDER = (
    "test_aspect",  # the first to need the session's exports: it builds them
    # Needing no exports: these keep the other worker busy meanwhile.
    "test_nvds_export",
    "test_nvds_stabiliser",
    "test_delivery",
    "test_hostile_weights",
    "test_video_io",
    "test_da3_weights",
    "test_render_cuda",
    # Needing them.
    "test_da3_export",
    "test_hostile_videos",
    "test_faults",
    "test_preview",
    "test_real_library",
    "test_reruns",
    "test_segments",
    "test_nvds_workflow",
    "test_resume",
    "test_bars_workflow",
    "test_prune",
    "test_workflow",
    "test_providers",
    "test_report",
)


def pytest_collection_modifyitems(items):
    rank = {name: number for number, name in enumerate(ORDER)}
    items.sort(key=lambda item: rank.get(item.path.stem, len(rank)))


# The tests that may skip in CI, each with why: what they need is hardware or a platform a CI runner may lack. A skip
# of any other test fails the run when CI=true (pytest_runtest_makereport below), so that no test vanishes from CI
# without a word; outside CI a skip is only listed (-ra). Patterns are fnmatch patterns of node ids.
SKIPS_IN_CI = {
    "tests/test_providers.py::test_open_session_falls_back_to_the_next_attempt_with_its_own_options": (
        "needs an onnxruntime build with the CUDA provider (onnxruntime-gpu, x86-64 Linux/Windows only)"
    ),
    "tests/test_nvds_stabiliser.py::test_under_fast_a_cuda_session_opens_float16_copies_that_stabilise_as_float32_*": (
        "needs an onnxruntime build with the CUDA provider (onnxruntime-gpu, x86-64 Linux/Windows only)"
    ),
    "tests/test_render_cuda.py::test_without_a_gpu_a_gpu_renderer_falls_back_to_the_cpu": (
        "on a machine with a CUDA GPU there is nothing to fall back from"
    ),
    "tests/test_delivery.py::test_a_hardware_encoder_this_ffmpeg_lacks_gives_way_to_software*": (
        "a macOS build of ffmpeg has VideoToolbox, which is then not missing"
    ),
    "tests/test_faults.py::test_a_full_disk_under_results_fails_in_one_line_and_leaves_no_corrupt_file": (
        "mounting a tiny tmpfs needs root and a kernel that lets the runner mount"
    ),
    "tests/test_cuda_ptx.py*": (
        "needs numba-cuda and NVIDIA's compiler wheels, which the README's test environment has not: .ci/run runs the "
        "module in an environment of its own"
    ),
    "tests/test_accelerators.py::test_openvinos_runtime_serves_a_model_as_an_onnx_runtime_session_does": (
        "OpenVINO is a dependency on x86-64 Linux and Windows only (an ARM runner has none)"
    ),
    "tests/test_accelerators.py::test_a_gpu_machine_without_the_nvidia_extra_gets_one_warning_and_no_onnx_runtime_"
    "error": "on a machine with CUDA's libraries installed there is no missing extra to warn of",
    "tests/test_windows.py::test_without_any_link_the_source_is_read_by_its_own_path": (
        "needs a second filesystem for the work folder, which not every runner mounts"
    ),
}


def skip_allowed_in_ci(nodeid: str) -> bool:
    return any(fnmatch.fnmatchcase(nodeid, pattern) for pattern in SKIPS_IN_CI)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """In CI, a skip of a test that is not on ``SKIPS_IN_CI`` is a failure naming the skip's reason."""
    outcome = yield
    report = outcome.get_result()
    if report.skipped and not hasattr(report, "wasxfail") and in_ci() and not skip_allowed_in_ci(item.nodeid):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"skipped in CI, and not on tests/conftest.py SKIPS_IN_CI: {reason}"


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    """The same for a whole module skipped at collection."""
    outcome = yield
    report = outcome.get_result()
    if report.skipped and in_ci() and not skip_allowed_in_ci(report.nodeid):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"skipped in CI, and not on tests/conftest.py SKIPS_IN_CI: {reason}"


def pytest_assertrepr_compare(op, left, right):
    """Two files' bytes that differ, told in one line: pytest's own explanation of two bytes objects diffs them
    element by element (minutes for a video of a few MB, and a wall of numbers)."""
    if op == "==" and isinstance(left, bytes) and isinstance(right, bytes) and max(len(left), len(right)) > 4096:
        first = next((i for i, (a, b) in enumerate(zip(left, right)) if a != b), min(len(left), len(right)))
        return [f"{len(left)} bytes == {len(right)} bytes", f"they first differ at byte {first}"]
    return None
