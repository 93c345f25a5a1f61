"""The library's source files as the workflow sees them.

Each video reaches Snakemake through a link under its id, ``<work>/<id>/source<ext>``: no source path, with
whatever braces, repeats or newlines its name holds, is ever read by Snakemake as a pattern. The link is retargeted
when the library moves, and its time is its target's, so a moved, renamed or re-mounted library looks unchanged to
Snakemake.

Which link (``LINKS``, tried in order, the next where the filesystem or the user's rights refuse one):

* a **symbolic link** (first on Linux and macOS): it follows the library wherever it moves; its own time is set to
  its target's.
* a **hard link** (first on Windows, where a symbolic link needs administrator rights or Developer Mode, and where
  a link's own time cannot be set): the file itself under a second name, so its time is the file's own. It needs
  the library and the work folder on one drive (NTFS, ext4, APFS; not FAT or exFAT), and it keeps a deleted
  video's bytes on disk until its work folder goes (``prune`` lists such folders).
* neither (a FAT or exFAT drive, the library on another drive): the video is read **by its own path**, with one
  warning per run. Snakemake then sees a moved library as new inputs (it reprobes and reconverts), and a path
  holding ``{`` or ``}``, which Snakemake would read as a pattern, cannot be read at all: that video alone is
  reported as not converted.

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
from collections.abc import Sequence
from pathlib import Path

from stereo3d.errors import BadVideo
from stereo3d.io.atomic import atomic_output

log = logging.getLogger(__name__)

FINGERPRINT_BYTES = 1 << 20  # read at each end of a file
CACHE_NAME = ".sources.json"
# Which links are tried, in order (the module doc says why Windows takes a hard link first).
LINKS = ("hardlink", "symlink") if os.name == "nt" else ("symlink", "hardlink")
PATTERN_CHARACTERS = "{}"  # what Snakemake reads in an input path as a wildcard


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

    def __init__(self, work: str | Path, links: Sequence[str] = LINKS):
        self.work = Path(work)
        self.links = tuple(links)
        self._cache_path = self.work / CACHE_NAME
        self._cache = self._read_cache()
        self._dirty = False
        self._refused: str | None = None  # why no link could be made, once said

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
        """What Snakemake reads ``path`` through: ``<work>/<video>/source<ext>``, a link made or retargeted as
        needed, else ``path`` itself where no link can be made here (``BadVideo`` if Snakemake cannot read that
        path)."""
        target = Path(path).resolve()
        link = self.work / video / f"source{_safe_suffix(target)}"
        if _links_to(link, target):
            self._match_time(link, target)
            return link
        link.parent.mkdir(parents=True, exist_ok=True)
        for old in link.parent.glob("source.*"):  # a source that changed its extension
            if old != link and (old.is_symlink() or old.is_file()):
                old.unlink()
        # Not atomic_output's temporary name: another parse of the workflow (a cluster job's) may be relinking the
        # same video at the same moment, and must not take this one for a dead attempt's leftover.
        tmp = link.with_name(f".{link.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}")
        refused = []
        for kind in self.links:
            try:
                (os.symlink if kind == "symlink" else os.link)(target, tmp)
            except OSError as exc:  # not allowed to this user, not on this filesystem, another drive
                refused.append(f"{kind}: {exc.strerror or exc}")
                continue
            os.replace(tmp, link)
            self._match_time(link, target)
            return link
        link.unlink(missing_ok=True)  # an old link to a file replaced since
        return self._unlinked(target, "; ".join(refused) or "no link kind allowed")

    def _unlinked(self, target: Path, why: str) -> Path:
        """``target`` itself, where no link can be made (see the module doc)."""
        if self._refused is None:
            self._refused = why
            log.warning("no link to the videos can be made under %s (%s): Snakemake reads them by their own paths, "
                        "so moving the library reconverts it; allow symbolic links (Windows: Developer Mode) or put "
                        "the work folder on the library's drive", self.work, why)  # fmt: skip
        if any(c in str(target) for c in PATTERN_CHARACTERS):
            raise BadVideo(target, "its path holds { or }, which Snakemake reads as a pattern, and no link to it "
                                   f"can be made here ({why}): rename it, or allow links")  # fmt: skip
        return target

    @staticmethod
    def _match_time(link: Path, target: Path) -> None:
        """Give a symbolic link its target's time: Snakemake dates a linked input by the newer of the link and its
        target, so retargeting it after a move makes nothing look newer. (A hard link is the file: same time.)"""
        if not link.is_symlink():
            return
        st = target.stat()
        if link.lstat().st_mtime_ns != st.st_mtime_ns and os.utime in os.supports_follow_symlinks:
            os.utime(link, ns=(st.st_atime_ns, st.st_mtime_ns), follow_symlinks=False)

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


def _links_to(link: Path, target: Path) -> bool:
    """Whether ``link`` is a link to ``target``: a symbolic link to its path, or a hard link to its file."""
    try:
        if link.is_symlink():
            return os.readlink(link) == str(target)
        return link.is_file() and os.path.samefile(link, target)
    except OSError:
        return False


def _safe_suffix(path: Path) -> str:
    suffix = path.suffix.lower()
    return suffix if suffix[1:].isalnum() else ".video"
