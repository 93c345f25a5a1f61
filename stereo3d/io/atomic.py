"""Nothing half-written looks finished: write beside the target, then rename."""

from __future__ import annotations

import contextlib
import glob
import hashlib
import os
import re
from collections.abc import Iterator
from pathlib import Path

MAX_NAME_BYTES = 255  # the longest file name common filesystems take


def temp_path_for(path: str | Path) -> Path:
    """A temporary name in the same folder (so the final rename is atomic), keeping the suffix.

    The suffix is kept because tools such as ffmpeg and onnx pick formats from it.
    """
    path = Path(path)
    _remove_stale_partials(path)
    return path.with_name(f".{_temp_stem(path)}.partial-{os.getpid()}{path.suffix}")


def _temp_stem(path: Path) -> str:
    """The target's stem, or a hash of it where the temporary name would pass the filesystem's limit."""
    longest = f".{path.stem}.partial-{2**22}{path.suffix}"  # pids stay below 2**22 on Linux
    if len(longest.encode()) <= MAX_NAME_BYTES:
        return path.stem
    return hashlib.sha1(path.stem.encode()).hexdigest()[:16]


def _remove_stale_partials(path: Path) -> None:
    """Delete temporaries another process left for ``path``, and the side files written beside them (such as
    the muxer's ``.bsf``): a job killed mid-write (SIGKILL, a node lost) cannot clean up after itself.
    Snakemake never runs two jobs for one output at once, so any other process's temporary for this target
    belongs to a dead attempt."""
    stem = _temp_stem(path)
    mine = re.compile(rf"\.{re.escape(stem)}\.partial-(\d+){re.escape(path.suffix)}(\..*)?")
    with contextlib.suppress(FileNotFoundError):  # the folder may not exist yet
        for stale in path.parent.glob(f".{glob.escape(stem)}.partial-*"):
            match = mine.fullmatch(stale.name)
            if match and int(match.group(1)) != os.getpid():
                with contextlib.suppress(FileNotFoundError):
                    stale.unlink()


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
