"""Compressed on-disk storage of per-frame maps (raw DA3 depth, near maps), written and read streaming, and
resumable: a job killed while writing one loses less than two chunks of frames (63).

A store is a Zarr v3 group (a folder) holding

- ``codes``: uint16 [frames, height, width], chunks of ``CHUNK_FRAMES`` frames: each frame quantised over its own
  value range to ``bits`` bits in the domain of its ``transfer``: ``inverse`` (1/depth, linearly: the domain near
  maps and so parallax are made in, so precision goes where the views need it: none is spent on the difference
  between two far walls), ``log`` (uniform relative precision) or ``linear`` (near maps); then passed through a
  plane predictor (left + up - up-left, as lossless image coders do) whose
  residuals are zigzag-mapped (small of either sign → small) and compressed by Blosc (zstd over bit planes);
- ``ranges``: float64 [frames, 2], each frame's (lo, hi) in the transfer's domain;
- optional per-frame series (float64 [frames]; the depth stage keeps each frame's picture change there);
- optionally (``masked``) ``mask``: uint8 [frames, height, width], 1 where a map has no value (NaN: sky, for the
  depth of a model with a sky head), chunked like the codes. Masked pixels are coded as the frame's farthest
  value, so the predictor sees no edge there, and read back as NaN;
- the group's attributes: ``format``, ``transfer``, ``bits``, ``chunk``, ``frames`` and the writer's ``attrs``.

Any Zarr v3 reader opens it; :func:`decode` undoes the predictor and the quantisation.

The chunked layout is what makes resuming possible. A store is written under ``.<name>.partial`` beside its final
name, chunk by chunk (each chunk file written atomically by Zarr), and the number of frames safely written is
recorded after every chunk. A writer asked to resume (``resume=identity``) finds such a folder, checks that it
was written for the same job (the identity: inputs and settings), and continues after its last complete chunk;
the finished folder is renamed onto the final name, so nothing half-written ever looks finished. The progress is
kept outside the name a workflow declares, so Snakemake's removal of an incomplete job's output keeps it.

A writer may also stop on purpose after some whole chunks (``suspend``) and leave its partial store for the full job
to continue: the preview computes the first frames of a depth segment that way, and reads them back from the
partial store (``MapReader(path, partial=True)``). Writers and readers of one store's partial take its lock
(``store_lock``) so that two jobs never write the same partial store at once.

Quantisation (bench P7, a moving-camera sequence at 518x291; raw float16 is 301 KB per frame): depth at 10 bits
inverse takes ~19.5 KB per frame (log at 10 bits: 25 KB; 16 bits: ~50 KB), and the views rendered from it differ
from those of unquantised depth by 0.08 grey levels mean. Plain temporal prediction (the difference to the
previous frame, on a shared range) was measured as well and costs more bytes than the plane predictor once the
camera moves: frame-to-frame coherence pays only with motion compensation, and even x265's lossless mode, which
has it, is within 10 % of this coding at 12 bits (specs/depth_storage.md); the lever is the quantisation.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import shutil
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np

from stereo3d.errors import StereoError
from stereo3d.io import locks
from stereo3d.io.pipes import END, POLL_S, patient_put

FORMAT = "stereo3d-maps/2"
TRANSFERS = ("log", "inverse", "linear")
# Frames per chunk, the unit of every read and write. While one chunk is being written the next is filled, and a
# third waits for the first to be on disk, so a killed job loses at most 2 * 32 - 1 = 63 frames of finished work.
CHUNK_FRAMES = 32
DEFAULT_BITS = {"log": 10, "inverse": 10, "linear": 10}
MAX_BITS = 14  # plane-predictor residuals span 4x the levels; zigzag-mapped, that still fits in 16 bits
_TINY = 1e-12  # depth is clamped here before the log; DA3 depth is positive
CODING_VALUES = 1 << 17  # map values coded in one go (``_frames_at_once``): arrays of 0.5 MB, in the caches
# Blosc with zstd over bit planes: of zlib, zstd and Blosc at several levels, the smallest at a few ms per
# 518x291 frame (bench P7), so compression keeps up with the depth model on a GPU.
_COMPRESSOR = {"name": "blosc", "configuration": {"cname": "zstd", "clevel": 6, "shuffle": "bitshuffle",
                                                  "typesize": 2, "blocksize": 0}}  # fmt: skip
_MASK_COMPRESSOR = {"name": "blosc", "configuration": {"cname": "zstd", "clevel": 6, "shuffle": "bitshuffle",
                                                       "typesize": 1, "blocksize": 0}}  # fmt: skip
# Every chunk is written, even one all of the fill value: Zarr otherwise compares each whole chunk with it first
# (~0.7 ms of the writer's CPU a 518x294 frame, some 7 % of the depth stage's own work while a GPU runs the model:
# bench/README *Notes*), and a store's chunks are never empty but by chance. A setting of the open array (Zarr
# 3.1.6's ``with_config``), not stored with it: each write asks for it.
_WRITE_CONFIG = {"write_empty_chunks": True}


# zarr is imported where a store is opened: it takes ~0.3 s to import, and planning a run imports this module
# (through the stabilisers) without opening any store.


class BadMaps(StereoError):
    kind = "bad map store"


def partial_path(path: str | Path) -> Path:
    """Where the store ``path`` is written until complete (and kept, for resuming, if the writer is killed)."""
    path = Path(path)
    return path.with_name(f".{path.name}.partial")


@contextlib.contextmanager
def store_lock(path: str | Path) -> Iterator[None]:
    """Hold the lock of the store ``path`` and its partial store (``.<name>.lock`` beside it; waits for another
    holder). The lock file stays: removing it would let a waiting process lock a file nobody else sees."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with locks.held(path.with_name(f".{path.name}.lock")):
        yield


def finished_by(path: str | Path, identity: dict) -> bool:
    """Whether ``path`` is a finished store written by the job ``identity`` (not by an earlier job under the same
    name, e.g. of a source file since replaced, which the workflow is about to redo)."""
    if not Path(path).is_dir():
        return False
    try:
        with MapReader(path) as store:
            return store.identity == json.loads(json.dumps(identity, sort_keys=True))
    except BadMaps:
        return False


def write_maps(path: str | Path, frames, transfer: str, attrs: dict | None = None, chunk: int = CHUNK_FRAMES,
               bits: int | None = None) -> int:  # fmt: skip
    """Write an iterable of float [h, w] maps (or [n, h, w] blocks) to ``path``; returns the frame count."""
    with MapWriter(path, transfer, attrs=attrs, chunk=chunk, bits=bits) as writer:
        for block in frames:
            writer.append(block)
    return writer.count


class MapWriter:
    """Append maps (and per-frame ``series`` values), chunk by chunk; only a complete store appears under its
    final name.

    With ``resume`` (a JSON-able identity of the job: its inputs and settings), a store left half-written by a
    killed attempt of the same job is continued: ``self.count`` starts at the frames it already holds (a whole
    number of chunks), and the caller appends from there. Without it, any such leftover is discarded.

    Full chunks go to a background thread that encodes, compresses and writes them; an error there is raised by
    the next ``append`` or by leaving the ``with`` block.
    """

    def __init__(self, path: str | Path, transfer: str, attrs: dict | None = None, chunk: int = CHUNK_FRAMES,
                 bits: int | None = None, series: Iterable[str] = (), resume: dict | None = None,
                 masked: bool = False):  # fmt: skip
        if transfer not in TRANSFERS:
            raise ValueError(f"unknown transfer {transfer!r}")
        self.path = Path(path)
        self.transfer = transfer
        self.attrs = dict(attrs or {})
        self.chunk = chunk
        self.bits = bits or DEFAULT_BITS[transfer]
        if not 1 <= self.bits <= MAX_BITS:
            raise ValueError(f"bits must be 1..{MAX_BITS}, not {self.bits}")
        self.series_names = tuple(series)
        self.masked = bool(masked)
        self.identity = json.loads(json.dumps(resume, sort_keys=True)) if resume is not None else None
        self.count = 0  # frames appended (including those a resumed store already held)
        self.resumed = 0  # frames found written by an earlier attempt
        self.shape: tuple[int, int] | None = None
        self._partial = partial_path(self.path)
        self._group = None
        self._pending: list[np.ndarray] = []
        self._pending_series: dict[str, list[float]] = {name: [] for name in self.series_names}
        self._queue: queue.Queue = queue.Queue(maxsize=1)
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self._written = 0  # frames the writer thread has stored
        self._suspended = False

    def __enter__(self) -> MapWriter:
        import zarr

        self.path.parent.mkdir(parents=True, exist_ok=True)
        group = self._resumable() if self.identity is not None else None
        if group is None:
            shutil.rmtree(self._partial, ignore_errors=True)
            group = zarr.open_group(self._partial, mode="w", zarr_format=3)
            group.attrs.update(self._header(written=0))
        self._group = group
        self._thread = threading.Thread(target=self._work, name="map-writer", daemon=True)
        self._thread.start()
        return self

    def _header(self, written: int) -> dict:
        return {"format": FORMAT, "transfer": self.transfer, "bits": self.bits, "chunk": self.chunk,
                "masked": self.masked, "identity": self.identity, "written": written, "complete": False}  # fmt: skip

    def _resumable(self):
        """The partial store of an earlier attempt of this very job, trimmed to its complete chunks; or None."""
        import zarr

        if not self._partial.is_dir():
            return None
        try:
            group = zarr.open_group(self._partial, mode="r+", zarr_format=3)
            header = dict(group.attrs)
        except Exception:  # unreadable leftovers: start again
            return None
        expected = self._header(written=header.get("written", 0))
        if any(header.get(key) != value for key, value in expected.items()):
            return None  # another job's, or another format's: not ours to continue
        written = int(header["written"])
        if not written:
            return None  # nothing to continue, and a kill may have left its arrays half created: start again
        # zarr writes each file through a temporary beside it (<name>.<uuid>.partial) and renames it when whole: a
        # kill inside a write leaves one, which nothing reads and which would travel into the finished store.
        for leftover in self._partial.rglob("*.partial"):
            leftover.unlink()
        if "codes" in group:
            self.shape = tuple(group["codes"].shape[1:])
        for name in ("codes", "ranges", "mask", *self.series_names):
            if name in group:
                array = group[name]
                array.resize((written, *array.shape[1:]))  # drop a chunk begun after the last recorded one
        self.count = self.resumed = self._written = written
        return group

    def append(self, maps: np.ndarray, **series) -> None:
        """Add maps [h, w] or [n, h, w]; ``series`` gives each declared series' value(s) for these frames."""
        maps = np.asarray(maps, dtype=np.float32)
        if maps.ndim == 2:
            maps = maps[None]
        if self.shape is None:
            self.shape = maps.shape[1:]
        elif maps.shape[1:] != self.shape:
            raise ValueError(f"map size changed from {self.shape} to {maps.shape[1:]}")
        if set(series) != set(self.series_names):
            raise ValueError(f"series {sorted(series)} given, {sorted(self.series_names)} declared")
        if not self.masked and np.isnan(maps).any():
            raise ValueError("NaN in the maps of a store without a mask")
        if self._error is not None:
            raise self._error
        values = {name: np.broadcast_to(np.asarray(v, dtype=np.float64), (len(maps),)) for name, v in series.items()}
        for index, frame in enumerate(maps):
            self._pending.append(frame)
            for name in self.series_names:
                self._pending_series[name].append(float(values[name][index]))
            self.count += 1
            if self.count % self.chunk == 0:  # chunks count from the store's first frame, resumed or not
                self._submit()

    def suspend(self) -> None:
        """Leave the store partial when the ``with`` block ends, holding the frames appended so far (a whole number
        of chunks: checked then), for a later writer of the same job to continue (``resume`` with the same identity).
        """
        if self.identity is None:
            raise ValueError("only a resumable store (resume=identity) can be left for a later writer")
        self._suspended = True

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            if exc_type is None:
                if self._suspended and self.count % self.chunk:
                    raise ValueError(f"{self.count} frames are not whole chunks of {self.chunk}: a writer that "
                                     "continues the store would take the last one for complete")  # fmt: skip
                self._submit()
            self._stop()
            if exc_type is None:
                if self._error is not None:
                    raise self._error
                if not self._suspended:
                    self._finish()
        except BaseException as failure:
            self._abandon(failure)
            raise
        if exc is not None:
            self._abandon(exc)

    def _abandon(self, failure: BaseException) -> None:
        """After a failure: keep the partial store for a resuming writer, unless the input itself is at fault (a
        rerun of the same job would fail the same way; a changed input is another job)."""
        if self.identity is None or isinstance(failure, StereoError):
            shutil.rmtree(self._partial, ignore_errors=True)

    def _finish(self) -> None:
        height, width = self.shape if self.shape else (0, 0)
        if "codes" not in self._group:
            self._create_arrays((0, 0))
        attrs = self._header(written=self.count)
        attrs.update(complete=True, frames=self.count, height=height, width=width, attrs=self.attrs)
        self._group.attrs.update(attrs)
        if self.path.exists():
            shutil.rmtree(self.path) if self.path.is_dir() else self.path.unlink()
        os.replace(self._partial, self.path)

    def _submit(self) -> None:
        """Hand the pending frames to the writer thread, once it has stored the chunk before (at most one chunk is
        ever in flight: what a kill can lose stays within two chunks)."""
        if not self._pending:
            return
        block = np.stack(self._pending)
        series = {name: np.array(values, dtype=np.float64) for name, values in self._pending_series.items()}
        self._pending = []
        self._pending_series = {name: [] for name in self.series_names}
        with self._queue.all_tasks_done:
            while self._queue.unfinished_tasks and self._writer_ok():
                self._queue.all_tasks_done.wait(POLL_S)
        patient_put(self._queue, (block, series), self._writer_ok)

    def _writer_ok(self) -> bool:
        if self._error is not None:
            raise self._error
        return True

    def _stop(self) -> None:
        if self._thread is None:
            return
        patient_put(self._queue, END, self._thread.is_alive)
        self._thread.join()
        self._thread = None

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            try:
                if item is END:
                    return
                if self._error is None:  # after an error, drain: the producer raises it
                    self._write(*item)
            except BaseException as exc:  # handed to the producer's thread
                self._error = exc
            finally:
                self._queue.task_done()

    def _create_arrays(self, shape: tuple[int, int]) -> None:
        """Every array of the store, ``codes`` last: its presence says they all exist."""
        group = self._group
        group.create_array("ranges", shape=(0, 2), chunks=(self.chunk, 2), dtype="float64", fill_value=0.0)
        if self.masked:
            group.create_array("mask", shape=(0, *shape), chunks=(self.chunk, *shape), dtype="uint8",
                               compressors=[_MASK_COMPRESSOR], fill_value=0)  # fmt: skip
        for name in self.series_names:
            group.create_array(name, shape=(0,), chunks=(self.chunk,), dtype="float64", fill_value=np.nan)
        group.create_array("codes", shape=(0, *shape), chunks=(self.chunk, *shape), dtype="uint16",
                           compressors=[_COMPRESSOR], fill_value=0)  # fmt: skip

    def _write(self, block: np.ndarray, series: dict[str, np.ndarray]) -> None:
        if "codes" not in self._group:
            self._create_arrays(block.shape[1:])
        arrays = []
        if self.masked:
            mask = np.isnan(block)
            block = fill_masked(block, mask, self.transfer)
            arrays.append(("mask", mask.view(np.uint8)))
        codes, ranges = encode(block, self.transfer, self.bits)
        lo, hi = self._written, self._written + len(block)
        # The small arrays first, the codes last, then the count: a chunk is only counted once all of it is on
        # disk, and a chunk begun after the count is dropped by a resuming writer.
        for name, data in [("ranges", ranges), *series.items(), *arrays, ("codes", codes)]:
            array = self._group[name].with_config(_WRITE_CONFIG)
            array.resize((hi, *array.shape[1:]))
            array[lo:hi] = data
        self._written = hi
        self._group.attrs["written"] = hi


class MapReader:
    """Read a store back, whole-chunk streaming; ``read(start, count)`` for a frame range.

    ``partial``: read the complete chunks of the store's partial folder instead (``.<name>.partial``, a suspended
    or killed writer's); ``attrs`` are then empty (a writer stores them when it finishes), ``identity`` is the job's.
    """

    def __init__(self, path: str | Path, partial: bool = False):
        import zarr

        self.path = partial_path(path) if partial else Path(path)
        try:
            self._group = zarr.open_group(self.path, mode="r", zarr_format=3)
            self.meta = dict(self._group.attrs)
        except Exception as exc:  # any failure to open is the same to the user: the store is not usable
            raise BadMaps(self.path, f"unreadable or incomplete map store ({exc})") from exc
        if self.meta.get("format") != FORMAT:
            raise BadMaps(self.path, f"unknown format {self.meta.get('format')!r}")
        if not partial and not self.meta.get("complete"):
            raise BadMaps(self.path, "incomplete map store (its writer did not finish)")
        self.identity: dict | None = self.meta.get("identity")
        self.chunk: int = self.meta["chunk"]
        try:
            self._codes, self._ranges = self._group["codes"], self._group["ranges"]
            self._mask = self._group["mask"] if self.meta.get("masked") else None
        except KeyError as exc:
            raise BadMaps(self.path, f"incomplete map store (no {exc})") from exc
        if partial:  # the chunks counted as written; a chunk begun after them is not read
            self.frames: int = int(self.meta.get("written", 0))
            self.shape: tuple[int, int] = tuple(self._codes.shape[1:])
            self.attrs: dict = {}
        else:
            self.frames = self.meta["frames"]
            self.shape = (self.meta["height"], self.meta["width"])
            self.attrs = self.meta.get("attrs", {})
        self.masked: bool = self._mask is not None

    def __enter__(self) -> MapReader:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self._group = None

    def __len__(self) -> int:
        return self.frames

    def series(self, name: str) -> np.ndarray | None:
        """A per-frame series (float64 [frames]), or None if the store has none of that name."""
        if name not in self._group:
            return None
        return np.asarray(self._group[name][:], dtype=np.float64)

    def chunks(self, start: int = 0) -> Iterator[np.ndarray]:
        """float32 blocks [n, h, w] in frame order, from frame ``start`` on."""
        for first in range(start - start % self.chunk, self.frames, self.chunk):
            block = self._chunk(first // self.chunk)
            yield block[max(start - first, 0) :]

    def __iter__(self) -> Iterator[np.ndarray]:
        for block in self.chunks():
            yield from block

    def from_frame(self, start: int) -> MapSlice:
        """The frames from ``start`` on, as a reader of their own (what a resumed job reads)."""
        return MapSlice(self, start)

    def read(self, start: int = 0, count: int | None = None) -> np.ndarray:
        """Frames [start, start + count) as one float32 array."""
        count = self.frames - start if count is None else count
        if start < 0 or count < 0 or start + count > self.frames:
            raise BadMaps(self.path, f"frames [{start}, {start + count}) outside 0..{self.frames}")
        size = self.chunk
        parts = []
        for index in range(start // size, (start + count + size - 1) // size):
            block = self._chunk(index)
            lo = max(start - index * size, 0)
            hi = min(start + count - index * size, block.shape[0])
            parts.append(block[lo:hi])
        if not parts:
            return np.empty((0, *self.shape), dtype=np.float32)
        return np.concatenate(parts)

    def _chunk(self, index: int) -> np.ndarray:
        lo, hi = index * self.chunk, min((index + 1) * self.chunk, self.frames)
        try:
            codes, ranges = self._codes[lo:hi], self._ranges[lo:hi]
            mask = self._mask[lo:hi] if self._mask is not None else None
        except Exception as exc:  # a damaged chunk file
            raise BadMaps(self.path, f"frames {lo}..{hi - 1} unreadable ({exc})") from exc
        maps = decode(codes, ranges, self.meta["transfer"], self.meta["bits"])
        if mask is not None:
            maps[mask.view(bool)] = np.nan
        return maps


class MapSlice:
    """The frames of a store from one frame on: iterable, with ``frames`` and ``attrs`` like a reader."""

    def __init__(self, reader: MapReader, start: int):
        self.reader, self.start = reader, start
        self.frames = reader.frames - start
        self.attrs = reader.attrs

    def __len__(self) -> int:
        return self.frames

    def __iter__(self) -> Iterator[np.ndarray]:
        for block in self.reader.chunks(self.start):
            yield from block


def encode(block: np.ndarray, transfer: str, bits: int) -> tuple[np.ndarray, np.ndarray]:
    """float32 [n, h, w] → (zigzag-mapped predictor residuals as uint16, per-frame [lo, hi] float64 ranges), a few
    frames at a time (``_frames_at_once``)."""
    block = np.asarray(block, dtype=np.float32)
    codes = np.empty(block.shape, np.uint16)
    ranges = np.empty((len(block), 2), np.float64)
    step = _frames_at_once(block.shape)
    for first in range(0, len(block), step):
        part = slice(first, first + step)
        codes[part], ranges[part] = _encode_frames(block[part], transfer, bits)
    return codes, ranges


def decode(codes: np.ndarray, ranges: np.ndarray, transfer: str, bits: int) -> np.ndarray:
    """Inverse of :func:`encode` (float32 [n, h, w]), a few frames at a time."""
    values = np.empty(codes.shape, np.float32)
    step = _frames_at_once(codes.shape)
    for first in range(0, len(codes), step):
        part = slice(first, first + step)
        values[part] = _decode_frames(codes[part], ranges[part], transfer, bits)
    return values


def _frames_at_once(shape: tuple[int, ...]) -> int:
    """How many frames of ``shape`` (n, h, w) are coded in one go: as many as ``CODING_VALUES`` hold, at least one.
    The coding's passes over a whole chunk (32 frames of a 518x291 map: each temporary 19 MB) faulted in fresh pages
    and left the caches at every step, 1.4 ms a frame to decode alone, 4-7 inside a render job; in steps of ~0.5 MB
    arrays, 0.7 and 0.9-1.4 (encoding 1.2 -> 0.4). Small maps go many frames at a time: per frame, the calls would cost
    more than the passes."""
    return max(1, CODING_VALUES // max(1, shape[1] * shape[2]))


def _encode_frames(block: np.ndarray, transfer: str, bits: int) -> tuple[np.ndarray, np.ndarray]:
    levels = float(2**bits - 1)
    # float32 arithmetic: its error (~1e-7 relative) is far below the quantisation step of any range.
    values = _forward(block, transfer)
    lo = values.min(axis=(1, 2)).astype(np.float64)
    hi = values.max(axis=(1, 2)).astype(np.float64)
    span = np.where(hi > lo, hi - lo, 1.0)
    scaled = (values - lo.astype(np.float32)[:, None, None]) * (levels / span).astype(np.float32)[:, None, None]
    np.rint(scaled, out=scaled)
    np.clip(scaled, 0, levels, out=scaled)  # float32 rounding may step a hair outside the levels
    codes = scaled.astype(np.int32)
    # Residual of the plane predictor: a horizontal then a vertical difference. On smooth surfaces (most of any
    # depth map) it is close to zero; zigzag maps 0, -1, 1, -2, ... to 0, 1, 2, 3, ... so it stays small.
    codes[:, :, 1:] = codes[:, :, 1:] - codes[:, :, :-1]
    codes[:, 1:, :] = codes[:, 1:, :] - codes[:, :-1, :]
    zigzag = (codes << 1) ^ (codes >> 31)
    return zigzag.astype(np.uint16), np.stack([lo, hi], axis=1)


def _decode_frames(codes: np.ndarray, ranges: np.ndarray, transfer: str, bits: int) -> np.ndarray:
    levels = float(2**bits - 1)
    zigzag = codes.astype(np.int32)
    residual = (zigzag >> 1) ^ -(zigzag & 1)
    quantised = np.cumsum(np.cumsum(residual, axis=1, dtype=np.int32), axis=2, dtype=np.int32)
    lo = ranges[:, 0].astype(np.float32)[:, None, None]
    step = ((ranges[:, 1] - ranges[:, 0]) / levels).astype(np.float32)[:, None, None]
    values = quantised.astype(np.float32)
    values *= step
    values += lo
    return _inverse(values, transfer)


def fill_masked(block: np.ndarray, mask: np.ndarray, transfer: str) -> np.ndarray:
    """The maps with their masked (NaN) pixels set to each frame's farthest value (largest depth; smallest near
    value), which the predictor codes almost for free; a frame masked everywhere gets 1."""
    if not mask.any():
        return block
    far = np.nanmax if transfer in ("log", "inverse") else np.nanmin
    filled = block.copy()
    for index in np.flatnonzero(mask.any(axis=(1, 2))):
        frame_mask = mask[index]
        value = far(block[index]) if not frame_mask.all() else 1.0
        filled[index][frame_mask] = value
    return filled


def _forward(block: np.ndarray, transfer: str) -> np.ndarray:
    if transfer == "log":
        return np.log(np.maximum(block, np.float32(_TINY)))
    if transfer == "inverse":
        return np.float32(1.0) / np.maximum(block, np.float32(_TINY))
    return block


def _inverse(values: np.ndarray, transfer: str) -> np.ndarray:
    if transfer == "log":
        np.exp(values, out=values)
    elif transfer == "inverse":
        np.reciprocal(np.maximum(values, np.float32(_TINY)), out=values)
    return values


def store_bytes(path: str | Path) -> int:
    """The bytes a store takes on disk (all its files)."""
    total = 0
    for folder, _, names in os.walk(path):
        for name in names:
            with contextlib.suppress(FileNotFoundError):
                total += os.path.getsize(os.path.join(folder, name))
    return total
