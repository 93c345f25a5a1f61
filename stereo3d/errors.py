"""Errors the workflow reports in one line: the file, then what is wrong with it."""

from __future__ import annotations

from pathlib import Path


class StereoError(Exception):
    """Base: carries the offending file and the cause, printed as one line."""

    kind = "error"

    def __init__(self, path: str | Path | None, cause: str):
        self.path = None if path is None else Path(path)
        self.cause = cause
        where = f"{self.path}: " if self.path is not None else ""
        super().__init__(f"{self.kind}: {where}{cause}")


class BadVideo(StereoError):
    """A source video that cannot be probed, decoded or converted."""

    kind = "bad video"


class BadWeights(StereoError):
    """A weights file that is missing, truncated, of another model or mis-shaped."""

    kind = "bad weights"


class BadModel(StereoError):
    """An exported ONNX file whose contract the runtime cannot honour."""

    kind = "bad model"


class BadConfig(StereoError):
    """A configuration value that is invalid; raised before any job runs."""

    kind = "bad config"


class ExportMismatch(StereoError):
    """An export whose ONNX output disagrees with PyTorch beyond the configured limit."""

    kind = "export mismatch"
