"""The renderer on an NVIDIA GPU: ``stereo3d.stereo.splat``'s row functions compiled by numba-cuda.

A block of GPU threads per row works out the row's source positions: the splat is serial along a row (each
pixel's occlusion depends on every pixel to its left), so each thread first finds the farthest landing of its
piece of the row (``splat.row_reach``), the block hands each piece the state of the pieces before it (a scan in
shared memory), and each thread walks its piece from there (``splat.row_columns``): the serial walk's targets,
each written by one thread. Then one thread per pixel resamples the image there, with neighbouring threads on
neighbouring pixels so that their memory reads coalesce. Each frame is uploaded once for
both views, and the device buffers live as long as the renderer (one per render job). The views come back to the
host for packing and encoding: the encoder reads them from a pipe either way.

Without a GPU, ``NUMBA_ENABLE_CUDASIM=1`` runs the same kernels in numba's CUDA simulator (tests only: it
interprets every thread in Python).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from stereo3d.stereo import splat

# The renderer's check renders a 6-row scene (6 blocks of the row kernel): numba-cuda's warning that so few blocks
# leave most of the GPU idle would print in every GPU render job's log (seen on the H200, 2026-12-04).
warnings.filterwarnings("ignore", message=r".*Grid size \d+ will likely result in GPU under-utilization")

if not hasattr(np, "row_stack"):  # NumPy 2.5 removed this alias; numba-cuda's NumPy typing still names it
    np.row_stack = np.vstack

try:  # a module global, not a local: numba's simulator swaps this name for its fake device module in kernels
    from numba import cuda
except ImportError as _missing:  # numba without its CUDA target
    cuda = None
    _why = f"numba has no CUDA target ({_missing}; pip install numba-cuda)"

# Threads a row (one block) of the row kernel: pieces of 15 columns at 1920 (a 1080p view: 1080 blocks of 128).
# Fewer threads walk longer pieces; more spend longer in the block's scan, which one thread runs.
_ROW_THREADS = 128
_PIXEL_BLOCK = (32, 8)  # threads per block of the pixel kernel: a warp along a row, 8 rows


def unavailable() -> str | None:
    """Why the GPU renderer cannot run here (None: it can)."""
    if cuda is None:
        return _why
    try:
        if not cuda.is_available():
            return "numba finds no CUDA GPU and driver"
    except Exception as exc:  # a broken driver or toolkit: say so, render on the CPU
        return f"numba's CUDA target fails: {str(exc).splitlines()[0]}"
    return None


def open_renderer(device_id: int = 0) -> tuple[CudaRenderer | None, str | None]:
    """A renderer on CUDA device ``device_id`` that has passed its check, or None and why not."""
    reason = unavailable()
    if reason is not None:
        return None, reason
    try:
        renderer = CudaRenderer(device_id)
    except Exception as exc:  # a device id out of range, a driver error: one line for the log
        return None, f"CUDA device {device_id} cannot be used ({type(exc).__name__}: {str(exc).splitlines()[0]})"
    reason = renderer.check()
    return (renderer, None) if reason is None else (None, reason)


@dataclass
class _Buffers:
    """Device arrays for frames of one shape and dtype."""

    source: object
    shift: object
    columns: object  # [views, H, W] int32: source positions
    holes: object  # [views, H, W] uint8: disocclusions
    views: object  # [views, H, W, C]


class CudaRenderer:
    """Renders views on one CUDA device (see the module doc)."""

    def __init__(self, device_id: int = 0):
        device = cuda.select_device(device_id)
        name = getattr(device, "name", "numba's CUDA simulator")  # the simulator has no device object
        self.name = f"CUDA device {device_id} ({name.decode() if isinstance(name, bytes) else name})"
        self._stream = cuda.stream()
        self._buffers: _Buffers | None = None
        self._key = None
        self._columns_kernel, self._sample_kernel = _kernels()

    def check(self) -> str | None:
        """Why this device cannot render (None: it can): the kernels are compiled (numba builds them here, at
        their first launch; a CUDA toolkit without NVVM fails now, not mid-video) and render a small random scene
        as the same code compiled for the CPU does, bit for bit."""
        rng = np.random.default_rng(0)
        source = rng.integers(0, 256, (6, 40, 3), dtype=np.uint8)
        shift = rng.integers(-200, 200, (6, 40), dtype=np.int16)  # +-6 px at 5 bits: occlusions and holes
        try:
            views = self.render(source, shift, 5, (False, True))
        except Exception as exc:  # numba's and the driver's errors have many types: one line for the log
            return f"the CUDA kernels do not run here ({type(exc).__name__}: {str(exc).splitlines()[0]})"
        for (view, holes, _), mirrored in zip(views, (False, True)):
            expected = np.empty_like(source)
            expected_holes = np.empty(shift.shape, np.uint8)
            splat.warp_rows(source, shift, expected, expected_holes, 0, source.shape[0], mirrored, 5)
            if not (np.array_equal(view, expected) and np.array_equal(holes, expected_holes)):
                return "the CUDA kernels render other pixels than the CPU on a test scene"
        return None

    def render(self, source: np.ndarray, shift: np.ndarray, bits: int,
               mirrored: tuple[bool, ...]) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:  # fmt: skip
        """One view of ``source`` ([H, W, C], contiguous) per entry of ``mirrored``, warped by the int16
        ``shift`` [H, W] in 1/2**bits px, as ``splat.warp_rows`` renders it on the CPU: (view, its disocclusions
        (uint8), its source positions (int32, 1/32 px)) each."""
        height, width, _ = source.shape
        buffers = self._buffers_for(source, len(mirrored))
        stream = self._stream
        buffers.source.copy_to_device(source, stream=stream)
        buffers.shift.copy_to_device(shift, stream=stream)
        pixel_blocks = (-(-width // _PIXEL_BLOCK[0]), -(-height // _PIXEL_BLOCK[1]))
        for index, direction in enumerate(mirrored):
            columns, holes = buffers.columns[index], buffers.holes[index]
            self._columns_kernel[height, _ROW_THREADS, stream](buffers.shift, direction, bits, columns, holes)
            self._sample_kernel[pixel_blocks, _PIXEL_BLOCK, stream](buffers.source, columns, buffers.views[index])
        # The fill (stereo3d.stereo.fill) runs on the CPU for both devices: it needs each view's holes and positions.
        views = [(buffers.views[index].copy_to_host(stream=stream), buffers.holes[index].copy_to_host(stream=stream),
                  buffers.columns[index].copy_to_host(stream=stream)) for index in range(len(mirrored))]  # fmt: skip
        stream.synchronize()
        return views

    def _buffers_for(self, source: np.ndarray, count: int) -> _Buffers:
        key = (source.shape, source.dtype, count)
        if key != self._key:
            height, width, channels = source.shape
            self._buffers = _Buffers(
                source=cuda.device_array(source.shape, source.dtype),
                shift=cuda.device_array((height, width), np.int16),
                columns=cuda.device_array((count, height, width), np.int32),
                holes=cuda.device_array((count, height, width), np.uint8),
                views=cuda.device_array((count, height, width, channels), source.dtype),
            )
            self._key = key
        return self._buffers


def _kernels():
    """The two kernels, built from splat's functions for one renderer (numba compiles them at their first launch,
    in the renderer's check)."""
    row_columns = cuda.jit(device=True)(splat.row_columns)
    row_reach = cuda.jit(device=True)(splat.row_reach)
    sample_pixel = cuda.jit(device=True)(splat.sample_pixel)
    threads = _ROW_THREADS

    @cuda.jit
    def columns_kernel(shift, mirrored, bits, columns, holes):
        row, lane = cuda.blockIdx.x, cuda.threadIdx.x
        width = shift.shape[1]
        piece = (width + threads - 1) // threads
        start = min(lane * piece, width)
        stop = min(start + piece, width)
        reaches = cuda.shared.array(threads, np.int32)
        lasts = cuda.shared.array(threads, np.int32)
        if mirrored:
            reach, last = row_reach(shift[row, ::-1], start, stop, bits)
        else:
            reach, last = row_reach(shift[row], start, stop, bits)
        reaches[lane], lasts[lane] = reach, last
        cuda.syncthreads()
        if lane == 0:  # each piece's entry becomes the state of the pieces before it
            reach, last = np.int32(0), np.int32(0)
            for index in range(threads):
                here, position = reaches[index], lasts[index]
                reaches[index], lasts[index] = reach, last
                if here > reach:
                    reach, last = here, position
        cuda.syncthreads()
        tail = lane == threads - 1
        if mirrored:
            row_columns(shift[row, ::-1], columns[row, ::-1], holes[row, ::-1], bits, True, 1, start, stop,
                        reaches[lane], lasts[lane], tail)  # fmt: skip
        else:
            row_columns(shift[row], columns[row], holes[row], bits, False, 1, start, stop, reaches[lane],
                        lasts[lane], tail)  # fmt: skip

    @cuda.jit
    def sample_kernel(source, columns, out):
        col, row = cuda.grid(2)
        if row < source.shape[0] and col < source.shape[1]:
            sample_pixel(source[row], out[row], col, columns[row, col])

    return columns_kernel, sample_kernel
