"""The library's source files as the workflow sees them.

Each video reaches Snakemake only through a link under its id, ``<work>/<id>/source<ext>``: no source path, with
whatever braces, repeats or newlines its name holds, is ever read by Snakemake as a pattern. The link is retargeted
when the library moves, and its own time is set to its target's, so a moved, renamed or re-mounted library looks
unchanged to Snakemake.

What says a source changed is its fingerprint: its size and a hash of its first and last MiB (not its path or time,
so a copy is the same file). It reaches the probe as a parameter: a new fingerprint reprobes the video, and every
stage after the probe reruns. A file edited in its middle without changing size or ends is not noticed; nothing
that rewrites a video file does that. Fingerprints are cached by path, size, time and inode, so a library is read
again only where a file changed.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import uuid
from pathlib import Path

from stereo3d.io.atomic import atomic_output

log = logging.getLogger(__name__)

FINGERPRINT_BYTES = 1 << 20  # read at each end of a file
CACHE_NAME = ".sources.json"


def fingerprint(path: str | Path) -> str:
    """16 hex digits of the file's size and the hash of its first and last MiB."""
    path = Path(path)
    size = path.stat().st_size
    digest = hashlib.sha256(str(size).encode())
    with path.open("rb") as fh:
        digest.update(fh.read(FINGERPRINT_BYTES))
        if size > FINGERPRINT_BYTES:
            fh.seek(max(FINGERPRINT_BYTES, size - FINGERPRINT_BYTES))
            digest.update(fh.read(FINGERPRINT_BYTES))
    return digest.hexdigest()[:16]


class Sources:
    """The links and fingerprints of a library's sources, under ``work``."""

    def __init__(self, work: str | Path):
        self.work = Path(work)
        self._cache_path = self.work / CACHE_NAME
        self._cache = self._read_cache()
        self._dirty = False

    def fingerprint(self, path: str | Path) -> str:
        path = Path(path).resolve()
        st = path.stat()
        stamp = [st.st_size, st.st_mtime_ns, st.st_ino]
        cached = self._cache.get(str(path))
        if cached is not None and cached[:3] == stamp:
            return cached[3]
        value = fingerprint(path)
        self._cache[str(path)] = [*stamp, value]
        self._dirty = True
        return value

    def link(self, video: str, path: str | Path) -> Path:
        """``<work>/<video>/source<ext>``, pointing at ``path`` (made or retargeted as needed)."""
        target = Path(path).resolve()
        link = self.work / video / f"source{_safe_suffix(target)}"
        if not (link.is_symlink() and os.readlink(link) == str(target)):
            link.parent.mkdir(parents=True, exist_ok=True)
            for old in link.parent.glob("source.*"):  # a source that changed its extension
                if old.is_symlink() and old != link:
                    old.unlink()
            # Not atomic_output's temporary name: another parse of the workflow (a cluster job's) may be relinking
            # the same video at the same moment, and must not take this one for a dead attempt's leftover.
            tmp = link.with_name(f".{link.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}")
            os.symlink(target, tmp)
            os.replace(tmp, link)
        st = target.stat()
        if link.lstat().st_mtime_ns != st.st_mtime_ns:
            # Snakemake dates a linked input by the newer of the link and its target: the link is as old as its
            # target, so retargeting it after a move makes nothing look newer.
            os.utime(link, ns=(st.st_atime_ns, st.st_mtime_ns), follow_symlinks=False)
        return link

    def save(self) -> None:
        """Keep the fingerprints for the next run (only if any was computed)."""
        if not self._dirty:
            return
        self.work.mkdir(parents=True, exist_ok=True)
        with atomic_output(self._cache_path) as tmp:
            tmp.write_text(json.dumps(self._cache, sort_keys=True), encoding="utf-8")
        self._dirty = False

    def _read_cache(self) -> dict:
        try:
            cache = json.loads(self._cache_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return cache if isinstance(cache, dict) else {}


def _safe_suffix(path: Path) -> str:
    suffix = path.suffix.lower()
    return suffix if suffix[1:].isalnum() else ".video"
