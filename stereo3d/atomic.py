"""Nothing half-written looks finished: write beside the target, then rename."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path


def temp_path_for(path: str | Path) -> Path:
    """A temporary name in the same folder (so the final rename is atomic), keeping the suffix.

    The suffix is kept because tools such as ffmpeg and onnx pick formats from it.
    """
    path = Path(path)
    return path.with_name(f".{path.stem}.partial-{os.getpid()}{path.suffix}")


@contextlib.contextmanager
def atomic_output(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path; on success rename it onto ``path``, on failure delete it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_path_for(path)
    try:
        yield tmp
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise
