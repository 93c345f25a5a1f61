"""The probe stage: one source video's streams, frames and timing, written as JSON for the other stages."""

from __future__ import annotations

import json
from pathlib import Path

from stereo3d.io.atomic import atomic_output
from stereo3d.io.probe import probe_video


def write_probe(source: str | Path, out: str | Path) -> dict:
    """Probe ``source`` and write the result to ``out`` (atomically); returns it."""
    info = probe_video(source)
    with atomic_output(out) as tmp:
        tmp.write_text(json.dumps(info, indent=1) + "\n")
    return info
