"""The probe stage: one source video's streams, frames and timing, written as JSON for the other stages.

A file that is not a video this workflow can convert (empty, truncated, no video stream, 1x1, ...) still gets its
probe, holding the one-line reason under ``error``: the job succeeds, so the rest of the library and its report
go on, and the file is not probed again until it changes (its fingerprint is a parameter of the rule).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from stereo3d.errors import BadVideo
from stereo3d.io.atomic import atomic_output
from stereo3d.io.probe import probe_video

log = logging.getLogger(__name__)


def write_probe(source: str | Path, out: str | Path, fingerprint: str | None = None) -> dict:
    """Probe ``source`` and write the result to ``out`` (atomically); returns it. ``fingerprint`` (the source's,
    see stereo3d.workflow.sources) is kept in the result."""
    try:
        info = probe_video(source)
    except BadVideo as exc:
        log.error("%s", exc)
        info = {"path": str(source), "error": str(exc)}
    if fingerprint is not None:
        info["fingerprint"] = fingerprint
    with atomic_output(out) as tmp:
        tmp.write_text(json.dumps(info, indent=1) + "\n")
    return info


def probe_failed(info: dict) -> str | None:
    """The one-line reason a probe result holds for a file that cannot be converted, else None."""
    return info.get("error")
