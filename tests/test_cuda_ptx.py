"""The renderer's CUDA kernels, as ``stereo3d.stereo.cuda`` builds them, compile to PTX for every NVIDIA GPU
generation users own, Turing (sm_75) to Blackwell's consumer cards (sm_120), with NVIDIA's compiler as pip installs
it (numba-cuda's NVVM: the nvidia-nvvm and nvidia-cuda-nvrtc wheels) on a machine without a GPU or driver.

CI runs this module in a step of its own (``.ci/run``: "CUDA kernels to PTX"), in a small environment that has
those wheels; the README's test environment has no CUDA compiler, and there the module is skipped.
"""

from __future__ import annotations

import types
from importlib.metadata import PackageNotFoundError, version

import numpy as np
import pytest

try:  # the CUDA target the gpu extra installs (numba's own, older numba.cuda is not it)
    version("numba-cuda")
except PackageNotFoundError:
    pytest.skip("numba-cuda is not installed (CI's PTX step installs it)", allow_module_level=True)
from numba import cuda  # noqa: E402

# (major, minor) of each generation: Turing, Ampere (A100; RTX 30), Ada (RTX 40), Hopper, Blackwell (B200; RTX 50).
COMPUTE_CAPABILITIES = [(7, 5), (8, 0), (8, 6), (8, 9), (9, 0), (10, 0), (12, 0)]


def _nvvm_problem() -> str | None:
    try:
        from numba.cuda.cudadrv.nvvm import NVVM

        NVVM()
    except Exception as exc:  # no NVVM library found: the wheels are not installed
        return f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
    return None


@pytest.fixture(scope="module")
def kernels():
    problem = _nvvm_problem()
    if problem:
        pytest.skip(f"no NVVM here ({problem}); CI's PTX step installs nvidia-nvvm")
    from stereo3d.stereo import cuda as renderer

    return renderer._kernels()


def launch_types(dtype, packed: bool = False) -> dict[str, tuple]:
    """The argument types ``CudaRenderer.render_views`` launches each kernel with, for frames of ``dtype``: arrays
    as the device holds them (a view of a [views, H, W] buffer is C-contiguous; a window of a packed frame is not,
    where ``packed``), and the scalars as Python passes them."""
    from numba import typeof
    from numba.core import types as nb

    frame = typeof(np.zeros((4, 8, 3), dtype))
    view = typeof(np.zeros((4, 16, 3), dtype)[:, :8]) if packed else frame
    plane = {kind: typeof(np.zeros((2, 4, 8), kind)[0]) for kind in (np.int16, np.int32, np.uint8, np.float32)}
    line = {kind: typeof(np.zeros(3, kind)) for kind in (np.int64, np.float32, np.float64)}
    return {
        "colours": (frame, typeof(np.zeros((2, 3, 3), np.float32))),
        "enlarge": (
            plane[np.int16],
            frame,
            typeof(np.zeros((2, 3, 3), np.float32)),
            typeof(np.zeros((2, 3), bool)),
            nb.boolean,
            nb.int64,
            nb.int64,
            nb.float64,
            nb.float64,
            nb.float64,
            line[np.float64],
            line[np.float64],
            plane[np.int16],
        ),  # fmt: skip
        "finish": (plane[np.int16], nb.int64, nb.boolean, line[np.float32], nb.boolean, nb.float32, plane[np.int16]),
        "columns": (plane[np.int16], nb.boolean, nb.int64, plane[np.int32], plane[np.uint8]),
        "sample": (frame, plane[np.int32], view, plane[np.float32]),
        "gather": (
            view,
            plane[np.uint8],
            plane[np.float32],
            frame,
            nb.boolean,
            frame,
            nb.float64,
            line[np.int64],
            typeof(np.zeros((2, 3, 4, 2), np.float32)),
            line[np.int64],
            typeof(np.zeros((2, 3), np.int64)),
            plane[np.float32],
            typeof(np.zeros((2, 4, 8, 3), dtype)),
            typeof(np.zeros((2, 3, 4), np.float32)),
            line[np.int64],
            nb.int64,
        ),  # fmt: skip
        "smooth": (view, plane[np.uint8], frame, nb.int64),
    }


def _kernel_ptx(kernels, cc, dtype, packed=False):
    for name, signature in launch_types(dtype, packed).items():
        kernel = getattr(kernels, name)
        ptx, _ = cuda.compile_ptx(kernel.py_func, signature, cc=cc)
        yield name, kernel, ptx


@pytest.fixture
def current_device(monkeypatch):
    """A kernel calling a device function compiles that function for the current device's compute capability;
    without a GPU there is none, so the one asked for stands in (the PTX itself is made for the ``cc`` asked)."""
    import numba.cuda.dispatcher as dispatcher

    def stand_in(cc):
        monkeypatch.setattr(dispatcher, "get_current_device", lambda: types.SimpleNamespace(compute_capability=cc))

    return stand_in


@pytest.mark.parametrize("cc", COMPUTE_CAPABILITIES, ids=lambda cc: f"sm_{cc[0]}{cc[1]}")
def test_the_kernels_compile_to_ptx_for_each_generation(kernels, cc, current_device):
    current_device(cc)
    for dtype in (np.uint8, np.uint16):
        for name, kernel, ptx in _kernel_ptx(kernels, cc, dtype, packed=dtype == np.uint16):
            assert f".target sm_{cc[0]}{cc[1]}" in ptx
            assert ".entry" in ptx and kernel.py_func.__name__ in ptx, name


def test_no_kernel_fuses_a_multiplication_with_an_addition(kernels, current_device):
    # NVIDIA's compiler fuses a product and a sum into one rounding unless told not to; the CPU rounds twice. The
    # shared code multiplies with libdevice's __fmul_rn/__dmul_rn where a product meets a sum
    # (stereo3d.stereo.scalar), so no kernel holds a fused multiply-add and the GPU's floats are the CPU's.
    current_device((8, 6))
    for name, _, ptx in _kernel_ptx(kernels, (8, 6), np.uint8):
        fused = [line.strip() for line in ptx.splitlines() if "fma." in line]
        assert not fused, (name, fused[:3])
