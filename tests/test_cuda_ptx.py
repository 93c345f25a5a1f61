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


def launch_types(dtype) -> dict[str, tuple]:
    """The argument types ``CudaRenderer.render`` launches each kernel with, for sources of ``dtype``: the int16
    shift [H, W], the view's direction (bool), the fraction bits (int), the int32 source columns [H, W] (one view of
    a [views, H, W] buffer), the source and each view [H, W, C]."""
    from numba import typeof
    from numba.core import types as nb

    frame = np.zeros((4, 8, 3), dtype)
    columns = typeof(np.zeros((2, 4, 8), np.int32)[0])
    return {
        "columns_kernel": (typeof(np.zeros((4, 8), np.int16)), nb.boolean, nb.int64, columns),
        "sample_kernel": (typeof(frame), columns, typeof(np.zeros((2, *frame.shape), dtype)[0])),
    }


@pytest.mark.parametrize("cc", COMPUTE_CAPABILITIES, ids=lambda cc: f"sm_{cc[0]}{cc[1]}")
def test_the_kernels_compile_to_ptx_for_each_generation(kernels, cc, monkeypatch):
    import numba.cuda.dispatcher as dispatcher

    # A kernel calling a device function compiles that function for the current device's compute capability;
    # without a GPU there is none, so the one asked for stands in (the PTX itself is made for ``cc`` below).
    monkeypatch.setattr(dispatcher, "get_current_device", lambda: types.SimpleNamespace(compute_capability=cc))
    for dtype in (np.uint8, np.uint16):
        for kernel, signature in zip(kernels, launch_types(dtype).values(), strict=True):
            ptx, _ = cuda.compile_ptx(kernel.py_func, signature, cc=cc)
            assert f".target sm_{cc[0]}{cc[1]}" in ptx
            assert ".entry" in ptx and kernel.py_func.__name__ in ptx
