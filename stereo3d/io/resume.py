"""What a stage job that resumes inside itself is: the identity of its inputs and settings.

A killed job leaves its partial output (see ``stereo3d.io.mapstore`` and the render's pieces); its rerun continues
that output only if it is the very same job. Snakemake reruns a job under the same output name when an input was
remade (a new export, a changed source behind the same id), so the names alone do not tell: each input file's
size and modification time do, as they tell Snakemake itself that a file changed.
"""

from __future__ import annotations

import os
from pathlib import Path


def file_identity(path: str | Path) -> list:
    """Name, size and modification time of a file, or of a store folder's metadata file."""
    path = Path(path)
    target = path / "zarr.json" if path.is_dir() else path
    try:
        stat = os.stat(target)
    except FileNotFoundError:  # an input a method does not read (a job's own checks name missing ones)
        return [path.name, None, None]
    return [path.name, stat.st_size, stat.st_mtime_ns]


def job_identity(inputs: list[str | Path | None], **settings) -> dict:
    """The identity of a job: its input files (None entries skipped) and the settings that shape its output."""
    return {"inputs": [file_identity(p) for p in inputs if p], "settings": settings}
