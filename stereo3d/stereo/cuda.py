"""The renderer on an NVIDIA GPU: every step of a view, from the near map to its filled holes, in numba-cuda kernels
compiled from the CPU renderer's own scalar code, so that the views are the CPU's bit for bit.

Per frame, with a thread per pixel unless said otherwise:

1. **The shift map** (``warp.ShiftRecipe``): the near map, scaled to fixed point at its own size on the CPU (a few
   hundred thousand values), is enlarged to the frame (``upsample.bilinear_value``) with its depth edges put on the
   picture's (``upsample.candidates`` and ``pick_span``, from each map sample's colour, reduced a thread a sample);
   then grown along rows and tapered at the borders.
2. **The splat** (``splat.row_columns``): serial along a row (each pixel's occlusion depends on every pixel to its
   left), so a block of threads per row: each thread first finds the farthest landing of its piece of the row
   (``splat.row_reach``), the block hands each piece the state of the pieces before it (a scan in shared memory),
   and each thread walks its piece from there: the serial walk's targets, each written by one thread.
3. **The resampling** (``splat.sample_pixel``), with neighbouring threads on neighbouring pixels so that their
   memory reads coalesce.
4. **The hole fill** (``stereo3d.stereo.fill``): each hole pixel finds its run (the holes left and right of it in
   its row), follows the run's background through the optical flow into the frames around, fills itself from two
   of them where they show it, else takes the run's background repeat; a second kernel evens the repeats out along
   columns.

Each frame is uploaded once: the render job's window of frames around (``fill.FrameWindow``) has a copy on the
device, its slots uploaded as frames enter it, with their near maps and the optical flow between them (the flow
itself is computed on the CPU at 320 px wide, by the window's own thread, beside the render). The views are written
into the device's copy of the packed frame where the caller renders into one (a side-by-side or top-bottom frame),
and it comes back in one download.

Without a GPU, ``NUMBA_ENABLE_CUDASIM=1`` runs the same kernels in numba's CUDA simulator (tests only: it interprets
every thread in Python).
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

import numpy as np

from stereo3d.stereo import fill, scalar, splat, upsample

if TYPE_CHECKING:
    from stereo3d.stereo.fill import Neighbours
    from stereo3d.stereo.warp import ShiftRecipe

# The renderer's check renders a small scene (a few blocks a kernel): numba-cuda's warning that so few blocks leave
# most of the GPU idle would print in every GPU render job's log (seen on the H200, 2026-12-04).
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
_PIXEL_BLOCK = (32, 8)  # threads per block of the per-pixel kernels: a warp along a row, 8 rows


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


class CudaRenderer:
    """Renders views on one CUDA device (see the module doc). Its device buffers live as long as it does (one per
    render job), each kept for the shape it was last used at."""

    def __init__(self, device_id: int = 0):
        device = cuda.select_device(device_id)
        name = getattr(device, "name", "numba's CUDA simulator")  # the simulator has no device object
        self.name = f"CUDA device {device_id} ({name.decode() if isinstance(name, bytes) else name})"
        self._stream = cuda.stream()
        self._kernels = _kernels()
        self._buffers: dict = {}
        self._window: _DeviceWindow | None = None

    def check(self) -> str | None:
        """Why this device cannot render (None: it can): the kernels are compiled (numba builds them here, at
        their first launch; a CUDA toolkit without NVVM fails now, not mid-video) and render the middle frame of a
        small moving scene, both eyes, its depth edges picked and its holes filled from the frames on either side
        (the fill takes a pixel from other frames where two show it: only the middle frame has two), as the CPU
        renderer does, bit for bit."""
        from stereo3d.stereo.warp import Renderer, StereoSettings, view_shift

        frames, nears = check_scene()
        settings = StereoSettings(divergence_pct=8, convergence=0.4)
        window = fill.FrameWindow(1)
        with Renderer("cpu", threads=1) as cpu:
            try:
                for index, (frame, near) in enumerate(zip(frames, nears)):
                    window.push(index, frame, near)
                window.close()
                middle = len(frames) // 2
                neighbours = window.neighbours(middle)
                recipe = view_shift(frames[middle], nears[middle], settings, 0.5)
                gpu = self.render_views(frames[middle], recipe, (False, True), None, neighbours)
                expected = cpu.render_views(frames[middle], recipe, (False, True), None, neighbours)
                if not all(np.array_equal(a, b) for a, b in zip(gpu, expected)):
                    return "the CUDA kernels render other pixels than the CPU on a test scene"
            except Exception as exc:  # numba's and the driver's errors have many types: one line for the log
                return f"the CUDA kernels do not run here ({type(exc).__name__}: {str(exc).splitlines()[0]})"
        return None

    def render_views(self, image: np.ndarray, recipe: ShiftRecipe, mirrored: tuple[bool, ...],
                     out: tuple[np.ndarray, ...] | None = None,
                     neighbours: Neighbours | None = None) -> list[np.ndarray]:  # fmt: skip
        """What ``warp.Renderer.render_views`` renders (one view of ``image`` per entry of ``mirrored``, shifted as
        ``recipe`` says, its holes filled from ``neighbours`` where given), into ``out`` (new arrays if None)."""
        image = np.asarray(image)
        height, width = image.shape[:2]
        channels = 1 if image.ndim == 2 else image.shape[2]
        stream = self._stream
        k = self._kernels
        grid = (-(-width // _PIXEL_BLOCK[0]), -(-height // _PIXEL_BLOCK[1]))
        source = self._source(image.reshape(height, width, channels), neighbours)
        shift = self._shift(recipe, source)
        targets, packed = self._targets(image, out, len(mirrored))
        columns = self._buffer("columns", (len(mirrored), height, width), np.int32)
        holes = self._buffer("holes", (len(mirrored), height, width), np.uint8)
        positions = self._buffer("positions", (len(mirrored), height, width), np.float32)
        scratch = self._buffer("scratch", (len(mirrored), height, width, channels), image.dtype)
        around = self._around(source, neighbours, width)
        top = int(np.iinfo(image.dtype).max)
        for index, direction in enumerate(mirrored):
            view = targets[index]
            k.columns[height, _ROW_THREADS, stream](shift, direction, recipe.bits, columns[index], holes[index])
            k.sample[grid, _PIXEL_BLOCK, stream](source, columns[index], view, positions[index])
            k.gather[grid, _PIXEL_BLOCK, stream](view, holes[index], positions[index], source, direction,
                                                 scratch[index], *around, top)  # fmt: skip
            k.smooth[grid, _PIXEL_BLOCK, stream](view, holes[index], scratch[index], fill.SMOOTH_ROWS)
        return self._download(image, out, targets, packed)

    # --- the frame and its shift map ---

    def _source(self, image: np.ndarray, neighbours: Neighbours | None):
        """The frame on the device: its slot of the window's copy where it has one (uploaded once, as it entered
        the window), else uploaded now."""
        if neighbours is not None and neighbours.frames.shape[1:] == image.shape:
            if self._window is None or not self._window.fits(neighbours):
                self._window = _DeviceWindow(neighbours)
            self._window.update(neighbours, self._stream)
            return self._window.frames[neighbours.index % len(neighbours.frames)]
        source = self._buffer("source", image.shape, image.dtype)
        source.copy_to_device(np.ascontiguousarray(image), stream=self._stream)
        return source

    def _shift(self, recipe: ShiftRecipe, source):
        """The recipe's shift map on the device (int16 [H, W])."""
        stream, k = self._stream, self._kernels
        height, width = recipe.shape
        rows, cols = recipe.small.shape
        grid = (-(-width // _PIXEL_BLOCK[0]), -(-height // _PIXEL_BLOCK[1]))
        small = self._buffer("small", recipe.small.shape, np.int16)
        small.copy_to_device(np.ascontiguousarray(recipe.small, np.int16), stream=stream)
        enlarged = small
        if (rows, cols) != (height, width):
            enlarged = self._buffer("enlarged", (height, width), np.int16)
            picks = recipe.threshold is not None and rows >= 2 and cols >= 2
            channels = source.shape[2]
            colours = self._buffer("colours", (rows, cols, channels), np.float32)
            known = self._constant("known", np.ones((rows, cols), np.bool_))
            row_at = self._constant(("row_at", height, rows), _places(height, rows))
            col_at = self._constant(("col_at", width, cols), _places(width, cols))
            if picks:
                sample_grid = (-(-cols // _PIXEL_BLOCK[0]), -(-rows // _PIXEL_BLOCK[1]))
                k.colours[sample_grid, _PIXEL_BLOCK, stream](source, colours)
            scale = upsample.channel_scale(source.dtype) * channels  # the constants are per 8-bit channel
            k.enlarge[grid, _PIXEL_BLOCK, stream](small, source, colours, known, picks, recipe.threshold or 0,
                                                  upsample.REACH, upsample.NEAR_ENOUGH * scale,
                                                  upsample.DISTANCE_COST * scale, upsample.MIXED_COST * scale,
                                                  row_at, col_at,
                                                  enlarged)  # fmt: skip
        if recipe.dilate_px == 0 and recipe.ramp is None:
            return enlarged
        shift = self._buffer("shift", (height, width), np.int16)
        tapered = recipe.ramp is not None
        ramp = self._constant(("ramp", width, recipe.ramp.tobytes() if tapered else b""),
                              recipe.ramp if tapered else np.zeros(1, np.float32))  # fmt: skip
        k.finish[grid, _PIXEL_BLOCK, stream](enlarged, recipe.dilate_px, recipe.grow, ramp, tapered, recipe.offset,
                                             shift)  # fmt: skip
        return shift

    def _around(self, source, neighbours: Neighbours | None, width: int) -> tuple:
        """The fill's arguments about the frames around (``fill._gather_runs``'), on the device."""
        anchor = fill.ANCHOR_PCT / 100.0 * width
        if neighbours is None:  # the frame alone: its own background, no neighbour
            empty = self._constant("empty", np.zeros(0, np.int64))
            return (anchor, empty, self._constant("flows", np.zeros((1, 1, 1, 2), np.float32)), empty,
                    self._constant("reaching", np.full((2, 1), -1, np.int64)),
                    self._constant("near", np.zeros((1, 1), np.float32)), source.reshape(1, *source.shape),
                    self._constant("nears", np.zeros((1, 1, 1), np.float32)), empty)  # fmt: skip
        window, stream = self._window, self._stream
        small = {name: cuda.to_device(np.ascontiguousarray(array, np.int64), stream=stream)
                 for name, array in (("steps", neighbours.steps), ("pair_slots", neighbours.pair_slots),
                                     ("slots", neighbours.slots),
                                     ("reaching", fill.neighbour_table(neighbours.steps)))}  # fmt: skip
        near = window.nears[neighbours.index % len(neighbours.frames)]
        return (anchor, small["steps"], window.flows, small["pair_slots"], small["reaching"], near, window.frames,
                window.nears, small["slots"])  # fmt: skip

    # --- where the views go ---

    def _targets(self, image: np.ndarray, out: tuple[np.ndarray, ...] | None, count: int):
        """The device views to render into: windows of the device's copy of the packed frame that ``out`` are
        windows of (returned too), else views of their own."""
        height, width = image.shape[:2]
        channels = 1 if image.ndim == 2 else image.shape[2]
        packed = None if out is None else _packed_frame(out, image.shape)
        if packed is not None:
            base, corners = packed
            device = self._buffer("packed", base.shape, base.dtype)
            if base.ndim == 2:
                device = device.reshape(*base.shape, 1)
            return [device[r : r + height, c : c + width] for r, c in corners], base
        views = self._buffer("views", (count, height, width, channels), image.dtype)
        return [views[index] for index in range(count)], None

    def _download(self, image: np.ndarray, out, targets, packed) -> list[np.ndarray]:
        stream = self._stream
        if packed is not None:  # one download: the eyes and what lies around them (the caller fills that in after)
            self._buffers["packed"].copy_to_host(packed, stream=stream)
            stream.synchronize()
            return list(out)
        results = [target.copy_to_host(stream=stream) for target in targets]
        stream.synchronize()
        views = [result.reshape(image.shape) for result in results]
        if out is None:
            return views
        for view, result in zip(out, views):
            np.copyto(view, result)
        return list(out)

    # --- device memory ---

    def _buffer(self, name: str, shape: tuple, dtype):
        """A device array kept under ``name`` while its shape and dtype stay the same."""
        held = self._buffers.get(name)
        if held is None or held.shape != tuple(shape) or held.dtype != np.dtype(dtype):
            held = self._buffers[name] = cuda.device_array(shape, dtype)
        return held

    def _constant(self, key, values: np.ndarray):
        """``values`` on the device, uploaded once per ``key``."""
        key = ("constant", key, values.shape, values.dtype.str)
        if key not in self._buffers:
            self._buffers[key] = cuda.to_device(np.ascontiguousarray(values))
        return self._buffers[key]


class _DeviceWindow:
    """The device's copy of a ``fill.FrameWindow``'s rings: frames, near maps and flows, each slot uploaded when the
    frame (or the pair of frames, for a flow) it holds changes."""

    def __init__(self, neighbours: Neighbours):
        self.frames = cuda.device_array(neighbours.frames.shape, neighbours.frames.dtype)
        self.nears = cuda.device_array(neighbours.nears.shape, np.float32)
        self.flows = cuda.device_array(neighbours.flows.shape, np.float32)
        size = len(neighbours.frames)
        self._held = [-1] * size  # the frame in each slot of frames and nears
        self._pairs = [-1] * size  # the first frame of the pair whose flow each slot of flows holds

    def fits(self, neighbours: Neighbours) -> bool:
        ours = (self.frames.shape, self.frames.dtype, self.nears.shape, self.flows.shape)
        return ours == (
            neighbours.frames.shape,
            neighbours.frames.dtype,
            neighbours.nears.shape,
            neighbours.flows.shape,
        )

    def update(self, neighbours: Neighbours, stream) -> None:
        size = len(neighbours.frames)
        wanted = {neighbours.index % size: neighbours.index}
        pairs = {}
        for step, slot, pair_slot in zip(neighbours.steps, neighbours.slots, neighbours.pair_slots):
            other = neighbours.index + int(step)
            wanted[int(slot)] = other
            pairs[int(pair_slot)] = min(other, other - (1 if step > 0 else -1))  # as FrameWindow.neighbours pairs
        for slot, index in wanted.items():
            if self._held[slot] != index:
                self.frames[slot].copy_to_device(neighbours.frames[slot], stream=stream)
                self.nears[slot].copy_to_device(neighbours.nears[slot], stream=stream)
                self._held[slot] = index
        for slot, pair in pairs.items():
            if self._pairs[slot] != pair:
                self.flows[slot].copy_to_device(neighbours.flows[slot], stream=stream)
                self._pairs[slot] = pair


def _packed_frame(out: tuple[np.ndarray, ...], shape: tuple) -> tuple[np.ndarray, list[tuple[int, int]]] | None:
    """The C-contiguous array (a packed frame) that every one of ``out`` is a window of, with each window's
    (row, column) in it; None where they are not."""
    base = out[0]
    while base.base is not None and isinstance(base.base, np.ndarray):
        base = base.base
    if not base.flags.c_contiguous or base.ndim != len(shape) or base.dtype != out[0].dtype:
        return None
    start = base.__array_interface__["data"][0]
    corners = []
    for view in out:
        offset = view.__array_interface__["data"][0] - start
        if view.shape != shape or view.strides != base.strides or not 0 <= offset < base.nbytes:
            return None
        row, rest = divmod(offset, base.strides[0])
        column, rest = divmod(rest, base.strides[1])
        if rest or row + shape[0] > base.shape[0] or column + shape[1] > base.shape[1]:
            return None
        corners.append((row, column))
    return base, corners


def _places(size: int, count: int) -> np.ndarray:
    """Each frame row or column's place on a map of ``count`` samples (``upsample.cell_place``, as the CPU finds
    it)."""
    return np.array([upsample.cell_place(index, count, size)[0] for index in range(size)], np.float64)


def check_scene() -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Three frames of a textured box moving over a textured wall, with their near maps at a quarter of the size:
    holes, depth edges to pick and frames around to fill from."""
    rng = np.random.default_rng(0)
    height, width = 16, 72  # (the optical flow needs 16 rows: fill.DIS_LEAST_PX)
    wall = rng.integers(0, 256, (height, width + 8, 3), dtype=np.uint8)
    box = rng.integers(0, 256, (8, 14, 3), dtype=np.uint8)
    frames, nears = [], []
    for index in range(3):
        frame = wall[:, 2 * index : 2 * index + width].copy()
        near = np.full((height, width), 0.1, np.float32)
        left = 20 + 5 * index
        frame[4:12, left : left + 14], near[4:12, left : left + 14] = box, 0.9
        frames.append(frame)
        nears.append(near[::4, ::4].copy())
    return frames, nears


def _kernels():
    """The kernels, built from the shared scalar code for one renderer (numba compiles them at their first launch,
    in the renderer's check)."""
    import types

    row_columns = cuda.jit(device=True)(splat.row_columns)
    row_reach = cuda.jit(device=True)(splat.row_reach)
    sample_pixel = cuda.jit(device=True)(splat.sample_pixel)
    shared = scalar.for_cuda({**upsample.SHARED, **fill.SHARED}, cuda)
    bilinear_value, cell_place, is_edge = shared["bilinear_value"], shared["cell_place"], shared["is_edge"]
    candidates, pick_span, sample_colour = shared["candidates"], shared["pick_span"], shared["sample_colour"]
    to_int16 = shared["to_int16"]
    run_moves, background_side = shared["run_moves"], shared["background_side"]
    background_depth, fill_from_neighbours = shared["background_depth"], shared["fill_from_neighbours"]
    background_repeat, smooth_pixel = shared["background_repeat"], shared["smooth_pixel"]
    fmul = scalar.device_products()["fmul"]
    threads = _ROW_THREADS
    most, channels_most = upsample.MOST_CANDIDATES, upsample.MOST_CHANNELS
    neighbours_most = fill.MOST_NEIGHBOURS
    places_most = fill.MOST_NEIGHBOURS + 1  # (local arrays' sizes are constants, not expressions)
    position_scale = np.float32(1.0 / splat.POSITION_ONE)

    @cuda.jit
    def colours(frame, out):
        j, i = cuda.grid(2)
        if i < out.shape[0] and j < out.shape[1]:
            sample_colour(frame, i, j, out.shape[0], out.shape[1], out[i, j])

    @cuda.jit
    def enlarge(small, frame, colours, known, picks, threshold, reach, near_enough, distance_cost, mixed_cost, row_at,
                col_at, out):  # fmt: skip
        x, y = cuda.grid(2)
        height, width = out.shape
        if y >= height or x >= width:
            return
        if picks:
            ci = cell_place(y, small.shape[0], height)[1]
            cj = cell_place(x, small.shape[1], width)[1]
            if is_edge(small, ci, cj, threshold):
                values = cuda.local.array(most, np.int16)
                at = cuda.local.array((most, 3), np.float64)
                samples = cuda.local.array((most, channels_most), np.float64)
                n, four = candidates(small, frame, colours, known, ci, cj, reach, values, at, samples)
                pick_span(out, frame, row_at, col_at, y, y + 1, x, x + 1, values, samples, at, n, four, near_enough,
                          distance_cost, mixed_cost)  # fmt: skip
                return
        out[y, x] = bilinear_value(small, y, x, height, width)

    @cuda.jit
    def finish(values, dilate_px, grow, ramp, tapered, offset, out):
        x, y = cuda.grid(2)
        height, width = out.shape
        if y >= height or x >= width:
            return
        value = values[y, x]
        for other in range(max(0, x - dilate_px), min(width, x + dilate_px + 1)):
            value = max(value, values[y, other]) if grow else min(value, values[y, other])
        if tapered:
            value = to_int16(fmul(np.float32(value), ramp[x]) + offset)
        out[y, x] = value

    @cuda.jit
    def columns(shift, mirrored, bits, columns, holes):
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
    def sample(source, columns, out, positions):
        col, row = cuda.grid(2)
        if row < source.shape[0] and col < source.shape[1]:
            sample_pixel(source[row], out[row], col, columns[row, col])
            positions[row, col] = np.float32(columns[row, col]) * position_scale  # as splat.source_map's

    @cuda.jit
    def gather(view, holes, positions, source, mirrored, scratch, anchor_px, steps, flows, pair_slots, reaching,
               near, frames, nears, slots, top):  # fmt: skip
        x, y = cuda.grid(2)
        height, width = holes.shape
        if y >= height or x >= width or holes[y, x] == 0:
            return
        # The pixel's hole run: marks change only from 1 to 2 meanwhile, both holes.
        start = x
        while start > 0 and holes[y, start - 1] != 0:
            start -= 1
        end = x + 1
        while end < width and holes[y, end] != 0:
            end += 1
        moves = cuda.local.array((neighbours_most, 2), np.float64)
        count = len(slots)
        if count:
            run_moves(y, start, end, positions, mirrored, steps, flows, pair_slots, anchor_px, reaching, moves)
            side = background_side(start, end, mirrored, width)
            if side >= 0:
                background = background_depth(near, positions, y, side, mirrored)
                found = cuda.local.array((2, channels_most), np.float32)
                fill_from_neighbours(view, holes, y, x, x + 1, background, moves, positions, near, frames, nears,
                                     slots, top, found)  # fmt: skip
        if holes[y, x] != 1:
            return
        values = cuda.local.array(places_most, np.float32)
        places = cuda.local.array((places_most, 3), np.int64)
        depths = cuda.local.array(places_most, np.float32)
        repeat = cuda.local.array(channels_most, np.float32)
        background_repeat(y, start, end, positions, source, mirrored, frames, slots, moves, near, nears, values,
                          places, depths, repeat)  # fmt: skip
        for c in range(view.shape[2]):
            scratch[y, x, c] = repeat[c]

    @cuda.jit
    def smooth(view, holes, repeated, radius):
        x, y = cuda.grid(2)
        if y < holes.shape[0] and x < holes.shape[1] and holes[y, x] == 1:
            smooth_pixel(view, holes, repeated, y, x, radius)

    return types.SimpleNamespace(colours=colours, enlarge=enlarge, finish=finish, columns=columns, sample=sample,
                                 gather=gather, smooth=smooth)  # fmt: skip
