"""Scalar code written once and compiled for both devices, with the same roundings on each.

The renderer's per-pixel work (the warp of ``stereo3d.stereo.splat``, the depth map's enlargement and edge picks of
``stereo3d.stereo.upsample``, the hole fill of ``stereo3d.stereo.fill``) is plain scalar Python that numba compiles
for the CPU (``njit``) and, through ``for_cuda``, as CUDA device functions (``stereo3d.stereo.cuda``). Integer
arithmetic is the same everywhere; floating point is too, as long as every operation rounds once, as IEEE 754 says.
One thing breaks that: NVIDIA's compiler fuses a multiplication and the addition after it into one fused
multiply-add (rounded once instead of twice) unless told not to, and numba-cuda does not tell it. So wherever a
product is added to something, the shared code multiplies with ``fmul`` (float32) or ``dmul`` (float64): a plain
product on the CPU, and on a GPU libdevice's ``__fmul_rn`` / ``__dmul_rn``, which the compiler never fuses
(tests/test_cuda_ptx.py checks that the kernels' PTX holds no ``fma``).

Types follow numba's rules, not NumPy's, and the CUDA simulator (which the tests use on machines without a GPU)
runs the code with NumPy's: so the shared code states its float types where the two would differ (a Python int
or float mixed with a float32 is float64 to numba, float32 to NumPy 2).
"""

from __future__ import annotations

import types

from numba import njit


@njit(nogil=True, cache=True, inline="always")
def fmul(a, b):
    """A float32 product, rounded once, never fused with an addition after it."""
    return a * b


@njit(nogil=True, cache=True, inline="always")
def dmul(a, b):
    """A float64 product, rounded once, never fused with an addition after it."""
    return a * b


def for_cuda(functions: dict, cuda) -> dict:
    """CUDA device functions of the shared ``functions`` ({name: numba CPU dispatcher or Python function}): each
    one's Python source compiled for ``cuda`` (numba's CUDA module, or its simulator), where the names of the
    others and ``fmul``/``dmul`` mean their device versions."""
    overrides = device_products()
    clones = {}
    for name, function in functions.items():
        source = getattr(function, "py_func", function)
        clones[name] = types.FunctionType(source.__code__, dict(source.__globals__), name, source.__defaults__,
                                          source.__closure__)  # fmt: skip
    compiled = {name: cuda.jit(device=True)(clone) for name, clone in clones.items()}
    for clone in clones.values():  # numba reads a function's globals when it compiles it, at its first launch
        clone.__globals__.update(overrides)
        clone.__globals__.update(compiled)
    return compiled


def device_products() -> dict:
    """``fmul`` and ``dmul`` as a GPU's code calls them: libdevice's unfused products, or under numba's CUDA
    simulator (which runs Python, whose products are rounded once already) the plain ones."""
    from numba import config

    if config.ENABLE_CUDASIM:
        return {"fmul": fmul.py_func, "dmul": dmul.py_func}
    from numba.cuda import libdevice

    return {"fmul": libdevice.fmul_rn, "dmul": libdevice.dmul_rn}
