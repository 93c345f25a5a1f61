"""Compressed on-disk storage of per-frame maps (raw DA3 depth, near maps), written and read streaming.

A store is one zip file (written under a temporary name, renamed when complete) holding
``meta.json``, one ``range-NNNNNN.npy`` and one ``chunk-NNNNNN.bin`` per chunk of frames. Each
frame is quantised to 16 bits over its own value range, so precision follows the content; depth
is quantised in the log domain (uniform *relative* precision from near to far), near maps
linearly. Codes pass a plane predictor (left + up - up-left, as in lossless image coders) and a
byte split before zlib: smooth maps then cost a fraction of raw float16.

Chunks are encoded and written by a background thread (numpy and zlib release the GIL), so the
producer — the depth stage feeding ONNX Runtime — is not held up by compression; at most one
chunk waits for it, so memory stays bounded.
"""

from __future__ import annotations

import io
import json
import queue
import threading
import zipfile
import zlib
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from stereo3d.errors import StereoError
from stereo3d.io.atomic import atomic_output
from stereo3d.io.pipes import END, patient_put

FORMAT = "stereo3d-maps/1"
TRANSFERS = ("log", "linear")
_LEVELS = 65535.0
_TINY = 1e-12  # depth is clamped here before the log; DA3 depth is positive
# zlib level of the chunks. Level 1 is several times faster than 6 on map residuals, for a few percent
# more bytes (still well under half of float16 on smooth depth; see bench/README.md, P7).
ZLIB_LEVEL = 1


class BadMaps(StereoError):
    kind = "bad map store"


def write_maps(path: str | Path, frames, transfer: str, attrs: dict | None = None, chunk: int = 32) -> int:
    """Write an iterable of float [h, w] maps (or [n, h, w] blocks) to ``path``; returns the frame count."""
    with MapWriter(path, transfer, attrs=attrs, chunk=chunk) as writer:
        for block in frames:
            writer.append(block)
    return writer.count


class MapWriter:
    """Append maps, chunk by chunk; only a completed store appears under its final name.

    Full chunks go to a background thread that encodes, compresses and writes them; an error there is
    raised by the next ``append`` or by leaving the ``with`` block.
    """

    def __init__(self, path: str | Path, transfer: str, attrs: dict | None = None, chunk: int = 32):
        if transfer not in TRANSFERS:
            raise ValueError(f"unknown transfer {transfer!r}")
        self.path = Path(path)
        self.transfer = transfer
        self.attrs = dict(attrs or {})
        self.chunk = chunk
        self.count = 0  # frames appended
        self.shape: tuple[int, int] | None = None
        self._pending: list[np.ndarray] = []
        self._chunks = 0
        self._atomic = atomic_output(self.path)
        self._zip: zipfile.ZipFile | None = None
        self._queue: queue.Queue = queue.Queue(maxsize=1)
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    def __enter__(self) -> MapWriter:
        tmp = self._atomic.__enter__()
        self._zip = zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_STORED)
        self._thread = threading.Thread(target=self._work, name="map-writer", daemon=True)
        self._thread.start()
        return self

    def append(self, maps: np.ndarray) -> None:
        maps = np.asarray(maps, dtype=np.float32)
        if maps.ndim == 2:
            maps = maps[None]
        if self.shape is None:
            self.shape = maps.shape[1:]
        elif maps.shape[1:] != self.shape:
            raise ValueError(f"map size changed from {self.shape} to {maps.shape[1:]}")
        if self._error is not None:
            raise self._error
        for frame in maps:
            self._pending.append(frame)
            self.count += 1
            if len(self._pending) == self.chunk:
                self._submit()

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            if exc_type is None:
                self._submit()
            self._stop()
            if exc_type is None:
                if self._error is not None:
                    raise self._error
                meta = {
                    "format": FORMAT,
                    "transfer": self.transfer,
                    "frames": self.count,
                    "height": self.shape[0] if self.shape else 0,
                    "width": self.shape[1] if self.shape else 0,
                    "chunk": self.chunk,
                    "chunks": self._chunks,
                    "attrs": self.attrs,
                }
                self._zip.writestr("meta.json", json.dumps(meta, sort_keys=True))
        except BaseException as failure:
            self._zip.close()
            self._atomic.__exit__(type(failure), failure, failure.__traceback__)
            raise
        self._zip.close()
        self._atomic.__exit__(exc_type, exc, tb)

    def _submit(self) -> None:
        """Hand the pending frames to the writer thread (blocks while it is still busy with the last chunk)."""
        if not self._pending:
            return
        block = np.stack(self._pending)
        self._pending = []
        patient_put(self._queue, block, self._writer_ok)

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
            block = self._queue.get()
            if block is END:
                return
            if self._error is not None:
                continue  # drain: the producer raises the error
            try:
                self._write(block)
            except BaseException as exc:  # handed to the producer's thread
                self._error = exc

    def _write(self, block: np.ndarray) -> None:
        codes, ranges = encode(block, self.transfer)
        buf = io.BytesIO()
        np.save(buf, ranges)
        name = f"{self._chunks:06d}"
        self._zip.writestr(f"range-{name}.npy", buf.getvalue())
        self._zip.writestr(f"chunk-{name}.bin", zlib.compress(_split_bytes(codes), ZLIB_LEVEL))
        self._chunks += 1


class MapReader:
    """Read a store back, whole-chunk streaming; ``read(start, count)`` for a frame range."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        try:
            self._zip = zipfile.ZipFile(self.path)
            self.meta = json.loads(self._zip.read("meta.json"))
        except (OSError, KeyError, zipfile.BadZipFile, ValueError) as exc:
            raise BadMaps(self.path, f"unreadable or incomplete map store ({exc})") from exc
        if self.meta.get("format") != FORMAT:
            raise BadMaps(self.path, f"unknown format {self.meta.get('format')!r}")
        self.frames: int = self.meta["frames"]
        self.shape: tuple[int, int] = (self.meta["height"], self.meta["width"])
        self.attrs: dict = self.meta.get("attrs", {})

    def __enter__(self) -> MapReader:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self._zip.close()

    def __len__(self) -> int:
        return self.frames

    def chunks(self) -> Iterator[np.ndarray]:
        """float32 blocks [n, h, w] in frame order."""
        for index in range(self.meta["chunks"]):
            yield self._chunk(index)

    def __iter__(self) -> Iterator[np.ndarray]:
        for block in self.chunks():
            yield from block

    def read(self, start: int = 0, count: int | None = None) -> np.ndarray:
        """Frames [start, start + count) as one float32 array."""
        count = self.frames - start if count is None else count
        if start < 0 or count < 0 or start + count > self.frames:
            raise BadMaps(self.path, f"frames [{start}, {start + count}) outside 0..{self.frames}")
        size = self.meta["chunk"]
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
        name = f"{index:06d}"
        ranges = np.load(io.BytesIO(self._zip.read(f"range-{name}.npy")))
        raw = zlib.decompress(self._zip.read(f"chunk-{name}.bin"))
        codes = _join_bytes(raw).reshape(ranges.shape[0], *self.shape)
        return decode(codes, ranges, self.meta["transfer"])


def encode(block: np.ndarray, transfer: str) -> tuple[np.ndarray, np.ndarray]:
    """float32 [n, h, w] → (predictor residuals as uint16, per-frame [lo, hi] float64 ranges)."""
    block = np.asarray(block, dtype=np.float32)
    # float32 arithmetic: its error (~1e-7 relative) is far below the 16-bit step of any range.
    values = np.log(np.maximum(block, np.float32(_TINY))) if transfer == "log" else block
    lo = values.min(axis=(1, 2)).astype(np.float64)
    hi = values.max(axis=(1, 2)).astype(np.float64)
    span = np.where(hi > lo, hi - lo, 1.0)
    scaled = (values - lo.astype(np.float32)[:, None, None]) * (_LEVELS / span).astype(np.float32)[:, None, None]
    np.rint(scaled, out=scaled)
    np.clip(scaled, 0, _LEVELS, out=scaled)  # float32 rounding may step a hair outside 0..65535
    codes = scaled.astype(np.uint16)
    # Residual of the plane predictor, mod 2^16: a horizontal then a vertical difference. On
    # smooth surfaces (most of any depth map) it is close to zero.
    codes[:, :, 1:] = codes[:, :, 1:] - codes[:, :, :-1]
    codes[:, 1:, :] = codes[:, 1:, :] - codes[:, :-1, :]
    return codes, np.stack([lo, hi], axis=1)


def decode(codes: np.ndarray, ranges: np.ndarray, transfer: str) -> np.ndarray:
    """Inverse of :func:`encode`."""
    # uint16 sums wrap mod 2^16, undoing the differences exactly.
    levels = np.cumsum(np.cumsum(codes, axis=1, dtype=np.uint16), axis=2, dtype=np.uint16)
    lo = ranges[:, 0].astype(np.float32)[:, None, None]
    step = ((ranges[:, 1] - ranges[:, 0]) / _LEVELS).astype(np.float32)[:, None, None]
    values = levels.astype(np.float32)
    values *= step
    values += lo
    if transfer == "log":
        np.exp(values, out=values)
    return values


def _split_bytes(codes: np.ndarray) -> bytes:
    """High bytes, then low bytes: residuals near zero make long runs in the high plane."""
    pairs = codes.astype("<u2").view(np.uint8).reshape(-1, 2)
    return pairs[:, 1].tobytes() + pairs[:, 0].tobytes()


def _join_bytes(raw: bytes) -> np.ndarray:
    planes = np.frombuffer(raw, dtype=np.uint8).reshape(2, -1)
    return (planes[0].astype(np.uint16) << 8) | planes[1]
