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
        # Rows wider than the row kernel's threads (pieces of 6 columns), shifts of +-40 px: columns landing past
        # both ends of the row, occlusions and holes across pieces; every target's position and hole mark too.
        from stereo3d.stereo import splat
        from stereo3d.stereo.cuda import CudaRenderer

        source = rng.integers(0, 256, (3, 700, 3), dtype=np.uint8)
        shift = np.clip(np.cumsum(rng.integers(-60, 61, (3, 700)), axis=1), -1280, 1280).astype(np.int16)  # 1/32 px
        views = CudaRenderer().render(source, shift, 5, (False, True))
        for (view, holes, columns), mirrored in zip(views, (False, True)):
            expected, expected_holes = np.empty_like(source), np.empty(shift.shape, np.uint8)
            splat.warp_rows(source, shift, expected, expected_holes, 0, 3, mirrored, 5)
            positions, map_holes = np.empty(shift.shape, np.float32), np.empty(shift.shape, np.uint8)
            splat.source_map(shift, 0, mirrored, 5, positions, map_holes)
            assert np.array_equal(view, expected) and np.array_equal(holes, expected_holes), mirrored
            assert np.array_equal(columns / np.float32(splat.POSITION_ONE), positions), mirrored
            assert 0.05 < holes.mean() < 0.6, holes.mean()
        print("same views")
        """
    )
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "1"}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "same views" in done.stdout


@pytest.mark.parametrize("mirrored", [False, True])
def test_a_row_walked_in_pieces_from_the_state_before_each_writes_the_whole_rows_walk(mirrored):
    # How the GPU's row kernel splits the serial splat among its threads (splat.row_reach, then row_columns from
    # the farthest landing of the pieces before), run as plain Python on rows of every kind: smooth, steep, landing
    # past either end, all hidden; pieces of every size, empty ones included. Each target is written by exactly one
    # piece, with what the whole row's walk writes there.
    rng = np.random.default_rng(5)
    width, bits = 50, 5
    rows = [np.cumsum(rng.integers(-90, 90, width)), rng.integers(-800, 800, width), np.full(width, 1700),
            np.full(width, -1700), np.arange(width) * -40, np.arange(width) * 40 - 900]  # fmt: skip
    for row in rows:
        shift = np.clip(row, -2000, 2000).astype(np.int16)
        view = shift[::-1] if mirrored else shift
        whole = np.full(width, -1.0, np.float32), np.full(width, 9, np.uint8)
        splat.row_columns(view, *(a[::-1] if mirrored else a for a in whole), bits, mirrored, 1, 0, width, 0, 0, True)
        for piece in (1, 3, 7, 16, 50, 64):
            starts = [min(k * piece, width) for k in range(-(-width // piece) + 2)]  # two empty pieces at the end
            columns, holes = np.full(width, -1.0, np.float32), np.full(width, 9, np.uint8)
            reach, last = 0, 0
            for k, start in enumerate(starts):
                stop = min(start + piece, width)
                mine = np.full(width, -1.0, np.float32), np.full(width, 9, np.uint8)  # what this piece writes
                splat.row_columns(view, *(a[::-1] if mirrored else a for a in mine), bits, mirrored, 1, start, stop,
                                  reach, last, k == len(starts) - 1)  # fmt: skip
                wrote = mine[1] != 9
                assert not (wrote & (holes != 9)).any(), (piece, k)  # no target written twice
                columns[wrote], holes[wrote] = mine[0][wrote], mine[1][wrote]
                here, position = splat.row_reach(view, start, stop, bits)
                if here > reach:
                    reach, last = here, position
            np.testing.assert_array_equal(columns, whole[0])
            np.testing.assert_array_equal(holes, whole[1])


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
