"""The video library: which files are videos, and a stable wildcard-safe id for each.

Ids are what Snakemake sees in paths and wildcards, so they keep to ``[A-Za-z0-9._-]``, stay short (every path
component a job writes must fit the filesystem's 255 bytes) and never end in a run of repeats (Snakemake takes
a wildcard value whose end repeats 20 times for a cyclic dependency) and are legal file names on Windows too (no
device name such as ``CON`` or ``NUL``, alone or before a dot, and no trailing dot). A name that is already safe,
short and not repetitive is its own id (readable results); any other name is transliterated, shortened, and gets a
short hash of the original name, so two names never collapse into one id by accident.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import unicodedata
from pathlib import Path

from stereo3d.errors import BadConfig, BadVideo

log = logging.getLogger(__name__)

SAFE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
ID_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._-]*"  # the wildcard constraint matching SAFE
MAX_OWN_ID = 64  # characters: a safe name up to this long is its own id
SLUG_CHARS = 48  # the readable part of a hashed id
# Snakemake's PeriodicityDetector refuses a wildcard value ending in 20 or more repeats of one substring.
_PERIODIC = re.compile(r"(.+?)\1{19,}$")
# Device names Windows reserves in every folder, in any case, alone or before a dot ("nul", "Con.2024").
WINDOWS_DEVICES = frozenset(["CON", "PRN", "AUX", "NUL", *(f"{port}{n}" for port in ("COM", "LPT") for n in range(10))])


def video_id(relative: str | Path) -> str:
    """Stable id for a video given its path relative to the library folder (suffix dropped)."""
    relative = Path(relative)
    stem = relative.with_suffix("").as_posix().replace("/", "__")
    if (SAFE.fullmatch(stem) and "__" not in stem and len(stem) <= MAX_OWN_ID and not _PERIODIC.search(stem)
            and windows_legal(stem)):  # fmt: skip
        return stem
    ascii_stem = unicodedata.normalize("NFKD", stem).encode("ascii", "ignore").decode()
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", ascii_stem).strip("._-")[:SLUG_CHARS].strip("._-") or "video"
    if not windows_legal(f"{slug}-"):  # "nul.x": its hash goes after the dot, so the device name stays
        slug = slug.replace(".", "_", 1)
    digest = hashlib.sha1(relative.as_posix().encode()).hexdigest()[:6]
    return f"{slug}-{digest}"


def windows_legal(name: str) -> bool:
    """Whether a name of ``SAFE``'s characters is a legal file name on Windows: not a device name (alone or before
    a dot) and no trailing dot (Windows drops it, so ``a.`` would be ``a``)."""
    return name.split(".")[0].upper() not in WINDOWS_DEVICES and not name.endswith(".")


def discover(folder: str | Path, extensions, recursive: bool = True) -> dict[str, Path]:
    """Map id → path for every video in ``folder``; raises BadConfig on id collisions."""
    folder = Path(folder)
    if not folder.is_dir():
        raise BadConfig(folder, "library folder not found (set library.folder in config.yaml)")
    wanted = {e.lower() if e.startswith(".") else f".{e.lower()}" for e in extensions}
    pattern = "**/*" if recursive else "*"
    found: dict[str, Path] = {}
    for path in sorted(folder.glob(pattern)):
        if path.suffix.lower() not in wanted or path.is_dir() or path.name.startswith("."):
            continue
        if path.is_symlink() and not path.exists():
            # A dangling link would stop the whole run (Snakemake refuses a missing input when it builds the
            # job graph), so it is left out here, loudly, and the rest of the library converts.
            log.warning("skipped %s: broken symbolic link (points to %s)", path, os.readlink(path))
            continue
        vid = video_id(path.relative_to(folder))
        if vid in found:
            raise BadConfig(path, f"maps to the same id {vid!r} as {found[vid]}; rename one of them")
        found[vid] = path
    return found


class Library:
    """The videos of a run: ``all_videos`` (id → source path) and, of them, ``videos`` to convert (those whose
    current file did not fail before: ``failed``), each read through its link under the work folder (no braces or
    other pattern characters) and known by its content's fingerprint (``stereo3d.workflow.sources``)."""

    def __init__(self, videos: dict[str, Path], work: str | Path):
        self.work = Path(work)
        self.all_videos = dict(videos)
        self.videos = dict(videos)
        self.fingerprints: dict[str, str] = {}
        self.links: dict[str, str] = {}
        self.failed: dict[str, dict] = {}

    def link_sources(self) -> None:
        """Give each source its link and fingerprint under the work folder, and leave out the videos whose current
        file failed before (stereo3d.workflow.failures), listing them in ``failed``. The demo's clips do not exist
        when it is parsed, and are read where they are made."""
        from stereo3d.workflow.failures import current_failure, record_path
        from stereo3d.workflow.sources import Sources

        sources = Sources(self.work)
        for video, path in self.all_videos.items():
            self.fingerprints[video] = sources.fingerprint(path)
            try:
                self.links[video] = str(sources.link(video, path))
            except BadVideo as exc:  # a path Snakemake cannot read, and no link to it allowed here
                self.failed[video] = {"reason": str(exc)}
                continue
            record = current_failure(record_path(self.work, video), self.fingerprints[video])
            if record is not None:
                self.failed[video] = record
        sources.save()
        self.videos = {video: path for video, path in self.all_videos.items() if video not in self.failed}

    def failures(self, summary_of) -> dict[str, str]:
        """Video -> one-line reason, for every video that cannot be converted: those remembered as failed, and
        those whose probe summary (``summary_of(video)``, None where there is none yet) says so."""
        from stereo3d.stages.probe import probe_failed

        found = {video: record["reason"] for video, record in self.failed.items()}
        for video in self.videos:
            summary = summary_of(video)
            reason = None if summary is None else probe_failed(summary)
            if reason is not None:
                found[video] = reason
        return dict(sorted(found.items()))

    def source(self, video: str) -> str:
        """What the rules read the video through: its link, else the file itself (the demo's clips before they are
        generated, tests without links)."""
        return self.links.get(video) or str(self.videos[video])

    def fingerprint(self, video: str) -> str:
        """The source's content fingerprint ("" before the file exists: the demo's clips)."""
        return self.fingerprints.get(video, "")
