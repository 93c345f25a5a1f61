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


def test_the_gpu_kernels_render_the_cpu_views_in_the_cuda_simulator():
    # Every step on the device (the shift map with its depth-edge picks, dilation and taper; the splat; the
    # resampling; the hole fill from the frames around and from the background), on moving scenes walked through
    # the fill's window (the middle frame, frames around on both sides; the first, frames after it only), rendered
    # into a packed frame (one download) and into views of their own, 8 and 16 bits: the CPU renderer's pixels, bit
    # for bit. The renderer's own check (a moving scene's middle frame, both eyes) runs at its opening. The
    # simulator must be chosen before numba.cuda is first imported: a fresh interpreter.
    script = textwrap.dedent(
        """
        import numpy as np
        from stereo3d.stereo import fill
        from stereo3d.stereo.cuda import check_scene
        from stereo3d.stereo.warp import Renderer, StereoSettings
        from stereo3d.stages.render import stereo_frame

        cpu, gpu = Renderer("cpu", threads=2), Renderer("cuda")
        assert gpu.device == "cuda", "the simulator offers a device, and the renderer's check passes"
        frames, nears = check_scene()
        deep = [frame.astype(np.uint16) * 257 for frame in frames]
        cases = [(frames, StereoSettings(8, 0.4, 1)),
                 (deep, StereoSettings(6, 0.3, 0, ipd_offset_pct=2, border_taper_pct=20, original_eye="right")),
                 (frames, StereoSettings(9, 0.6, 2, depth_upsample="bilinear", fill="background"))]
        for case, (pictures, settings) in enumerate(cases):
            window = fill.FrameWindow(settings.fill_frames)
            for index, (frame, near) in enumerate(zip(pictures, nears)):
                window.push(index, frame, near)
            window.close()
            around = window.neighbours(1)  # the middle frame: a frame around on either side
            packed = [stereo_frame(renderer, pictures[1], nears[1], settings, "full_sbs", {}, (1, 0),
                                   neighbours=around) for renderer in (cpu, gpu)]
            assert packed[0].dtype == packed[1].dtype and np.array_equal(*packed), settings
            if case == 0:  # views of their own, not windows of a packed frame; the first frame: frames after it only
                views = [renderer.render_stereo(pictures[0], nears[0], settings, neighbours=window.neighbours(0))
                         for renderer in (cpu, gpu)]
                assert all(np.array_equal(a, b) for a, b in zip(*views)), settings
        # Rows wider than the row kernel's threads (pieces of 6 columns), shifts of +-40 px: columns landing past
        # both ends of the row, occlusions and holes across pieces.
        rng = np.random.default_rng(7)
        shift = np.clip(np.cumsum(rng.integers(-60, 61, (3, 700)), axis=1), -1280, 1280).astype(np.float32) / 32
        grey = rng.integers(0, 256, (3, 700)).astype(np.uint8)
        assert np.array_equal(gpu.warp_view(grey, shift), cpu.warp_view(grey, shift))
        print("same views")
        """
    )
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "1"}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "same views" in done.stdout


def test_the_check_scene_fills_holes_from_the_frames_around_and_picks_depth_edges():
    # What the GPU renderer's check and the simulator's test render of the scene's middle frame must exercise:
    # holes that the two frames around fill (marked 2), holes that only the background fills (1), and depth edges
    # the enlargement picks.
    from stereo3d.stereo import fill, upsample
    from stereo3d.stereo.cuda import check_scene

    frames, nears = check_scene()
    window = fill.FrameWindow(1)
    for index, (frame, near) in enumerate(zip(frames, nears)):
        window.push(index, frame, near)
    window.close()
    marks = []
    real = fill.HoleFill.smooth

    def smooth(self, top, bottom):
        marks.append(np.bincount(self._holes.ravel(), minlength=3))
        real(self, top, bottom)

    settings = StereoSettings(divergence_pct=8, convergence=0.4)
    with pytest.MonkeyPatch.context() as patch, Renderer("cpu", threads=1) as renderer:
        patch.setattr(fill.HoleFill, "smooth", smooth)
        renderer.render_stereo(frames[1], nears[1], settings, neighbours=window.neighbours(1))
    total = np.sum(marks, axis=0)
    assert total[1] > 0 and total[2] > 0, total
    recipe = warp.view_shift(frames[1], nears[1], settings, 0.5)
    picked, bilinear = np.empty(recipe.shape, np.int16), np.empty(recipe.shape, np.int16)
    upsample.enlarge(recipe.small, picked, frames[1], recipe.threshold)
    upsample.enlarge(recipe.small, bilinear)
    assert (picked != bilinear).sum() > 10


def test_the_enlargement_is_opencvs_own_bilinear_resize_on_every_cpu():
    # OpenCV hands int16 resizes to Intel's IPP where it is built with it (the PyPI wheels are), which rounds about
    # 1 % of them one unit otherwise; the renderer's enlargement is OpenCV's own formula, which a GPU computes too.
    import cv2

    from stereo3d.stereo import upsample

    rng = np.random.default_rng(3)
    for rows, cols, height, width in ((291, 518, 1080, 1920), (84, 140, 720, 1280), (5, 7, 5, 7), (3, 9, 5, 37)):
        small = rng.integers(-3000, 3000, (rows, cols)).astype(np.int16)
        ours = np.empty((height, width), np.int16)
        upsample.enlarge(small, ours)
        ipp = cv2.ipp.useIPP()
        cv2.ipp.setUseIPP(False)
        try:
            opencv = cv2.resize(small, (width, height), interpolation=cv2.INTER_LINEAR)
        finally:
            cv2.ipp.setUseIPP(ipp)
        np.testing.assert_array_equal(ours, opencv)


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
