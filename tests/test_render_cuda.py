"""The GPU renderer's code on a CPU: its kernels in numba's CUDA simulator, and its per-pixel resampling compiled
for the CPU, give the CPU renderer's views bit for bit; without a GPU, asking for one falls back to the CPU."""

import logging
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from stereo3d.stereo import splat, warp
from stereo3d.stereo.warp import Renderer, StereoSettings


def random_scene(rng, height, width, dtype):
    top = np.iinfo(dtype).max
    frame = rng.integers(0, top + 1, (height, width, 3)).astype(dtype)
    near = np.round(rng.random((max(1, height // 3), max(1, width // 4))) * 4).astype(np.float32) / 4
    return frame, near


def test_the_gpu_kernels_render_the_cpu_views_in_the_cuda_simulator(tmp_path):
    # The simulator must be chosen before numba.cuda is first imported: a fresh interpreter.
    script = textwrap.dedent(
        """
        import numpy as np
        from stereo3d.stereo.warp import Renderer, StereoSettings

        rng = np.random.default_rng(7)
        cases = [(np.uint8, StereoSettings(10, 0.5, 1)), (np.uint16, StereoSettings(6, 0.2, 0, ipd_offset_pct=2)),
                 (np.uint8, StereoSettings(8, 0.7, 2, original_eye="right")),
                 (np.uint8, StereoSettings(9, 0.4, 1, ipd_offset_pct=1, border_taper_pct=20))]
        cpu_renderer, gpu_renderer = Renderer("cpu"), Renderer("cuda")
        assert cpu_renderer.device == "cpu"
        assert gpu_renderer.device == "cuda", "the simulator offers a device"
        for dtype, settings in cases:
            frame = rng.integers(0, np.iinfo(dtype).max + 1, (5, 37, 3)).astype(dtype)
            near = np.round(rng.random((3, 9)) * 4).astype(np.float32) / 4
            cpu = cpu_renderer.render_stereo(frame, near, settings)
            gpu = gpu_renderer.render_stereo(frame, near, settings)
            for a, b in zip(cpu, gpu, strict=True):
                assert a.dtype == b.dtype and np.array_equal(a, b), (dtype, settings)
        shift = (rng.random((4, 23)).astype(np.float32) - 0.5) * 30
        grey = rng.integers(0, 256, (4, 23)).astype(np.uint8)
        assert np.array_equal(gpu_renderer.warp_view(grey, shift), cpu_renderer.warp_view(grey, shift))
        print("same views")
        """
    )
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "1"}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "same views" in done.stdout


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16])
@pytest.mark.parametrize("mirrored", [False, True])
def test_the_gpu_resampling_compiled_for_the_cpu_equals_opencvs(dtype, mirrored):
    # The kernels' per-pixel arithmetic (splat.sample_pixel) against OpenCV's remap on the same source map,
    # at a size the simulator would take minutes over: wide parallax, holes, both borders.
    rng = np.random.default_rng(11)
    frame, near = random_scene(rng, 40, 301, dtype)
    settings = StereoSettings(10, 0.5, 2, ipd_offset_pct=3)
    shift = warp.fixed_shift_of_near(near, frame.shape[:2], settings, 0.5)
    compiled, compiled_holes = np.empty_like(frame), np.empty(frame.shape[:2], np.uint8)
    splat.warp_rows(frame, shift.values, compiled, compiled_holes, 0, frame.shape[0], mirrored, shift.bits)
    opencv = np.empty_like(frame)
    maps = (np.empty(frame.shape[:2], np.float32), np.empty(frame.shape[:2], np.uint8))
    Renderer()._render_on_cpu(frame, shift, (mirrored,), [opencv], [maps])
    np.testing.assert_array_equal(compiled, opencv)
    np.testing.assert_array_equal(compiled_holes, maps[1])


def test_without_a_gpu_a_gpu_renderer_falls_back_to_the_cpu(caplog):
    from stereo3d.stereo import cuda

    if cuda.unavailable() is None:
        pytest.skip("this machine has a CUDA GPU")
    rng = np.random.default_rng(3)
    frame, near = random_scene(rng, 6, 40, np.uint8)
    reference = Renderer("cpu").render_stereo(frame, near, StereoSettings())
    with caplog.at_level(logging.INFO, logger="stereo3d.stereo.warp"):
        asked_for_cuda = Renderer("cuda")
        assert asked_for_cuda.device == "cpu" and Renderer("auto").device == "cpu"
    assert any(r.levelname == "WARNING" and "rendering on the CPU" in r.message for r in caplog.records)
    views = asked_for_cuda.render_stereo(frame, near, StereoSettings())
    assert all(np.array_equal(a, b) for a, b in zip(views, reference))
    with pytest.raises(ValueError, match="render device"):
        Renderer("gpu")
