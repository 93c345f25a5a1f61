"""A resumable table of per-frame values (float64 columns), for a job that computes something per frame of a
long video before it can write its output (the EMA plan's per-frame ranges): a Zarr v3 group written chunk by
chunk like a map store (``stereo3d.io.mapstore``), so a killed job keeps what it had stored."""

from __future__ import annotations

import contextlib
import json
import shutil
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from stereo3d.io.mapstore import CHUNK_FRAMES

TABLE_FORMAT = "stereo3d-frame-table/1"


class FrameTable:
    """Per-frame float64 columns (e.g. each frame's normalisation range) built frame by frame by a long job and
    resumable after a kill like a map store: a Zarr v3 group under ``.<name>.partial``, chunks of ``chunk`` rows,
    the number of safely written rows recorded after each. It is a job's working state, not an output: the job
    turns the finished table into its output and removes it (``discard``)."""

    def __init__(self, path: str | Path, columns: Iterable[str], identity: dict, chunk: int = CHUNK_FRAMES):
        import zarr

        self.path = Path(path)
        self.columns = tuple(columns)
        self.chunk = chunk
        self._pending: dict[str, list[float]] = {name: [] for name in self.columns}
        identity = json.loads(json.dumps(identity, sort_keys=True))
        header = {"format": TABLE_FORMAT, "columns": list(self.columns), "identity": identity}
        group = None
        with contextlib.suppress(Exception):  # unreadable leftovers: start again
            group = zarr.open_group(self.path, mode="r+", zarr_format=3)
            if any(group.attrs.get(key) != value for key, value in header.items()):
                group = None
        if group is None:
            shutil.rmtree(self.path, ignore_errors=True)
            group = zarr.open_group(self.path, mode="w", zarr_format=3)
            for name in self.columns:
                group.create_array(name, shape=(0,), chunks=(chunk,), dtype="float64", fill_value=np.nan)
            group.attrs.update({**header, "written": 0})
        self._group = group
        self.count = self.resumed = int(group.attrs["written"])
        for name in self.columns:
            group[name].resize((self.count,))

    def append(self, **values: float) -> None:
        """One frame's row; stored once a chunk is full."""
        for name in self.columns:
            self._pending[name].append(float(values[name]))
        self.count += 1
        if self.count % self.chunk == 0:
            self.flush()

    def flush(self) -> None:
        rows = len(self._pending[self.columns[0]])
        if not rows:
            return
        lo, hi = self.count - rows, self.count
        for name in self.columns:
            array = self._group[name]
            array.resize((hi,))
            array[lo:hi] = np.array(self._pending[name], dtype=np.float64)
            self._pending[name] = []
        self._group.attrs["written"] = hi

    def read(self) -> dict[str, np.ndarray]:
        """Every column, after a final flush."""
        self.flush()
        return {name: np.asarray(self._group[name][:], dtype=np.float64) for name in self.columns}

    def discard(self) -> None:
        """Remove the table: once the job's output is written, and before it is renamed into place. A kill between
        the two then leaves no output (the rerun starts again) rather than a finished output with the table beside
        it, which nothing would remove: a Snakemake run that finds the output whole, its dependants done, does not
        run the job again (tests/test_faults.py's random kills caught one)."""
        shutil.rmtree(self.path, ignore_errors=True)
