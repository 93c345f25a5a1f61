"""Shared fixtures: tiny generated videos (stereo3d.demo.samples) in each test's temporary folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from stereo3d.demo import samples


@pytest.fixture
def make_clip(tmp_path):
    """Factory: ``make_clip("name.mp4", **options)`` writes a clip into the test's tmp folder and returns its path.

    Options are those of ``stereo3d.demo.samples.make_clip`` (width, height, frames, fps, audio, subtitles, pattern,
    codec, pix_fmt, extra, vfr, rotation). A name with folders creates them.
    """

    def _make(name: str = "clip.mp4", **options) -> Path:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        return samples.make_clip(path, **options)

    return _make


@pytest.fixture
def lossless_clip(make_clip):
    """Factory for clips whose decoded frames are exact (FFV1 in Matroska), for array comparisons."""

    def _make(name: str = "lossless.mkv", **options) -> Path:
        options.setdefault("codec", "ffv1")
        return make_clip(name, **options)

    return _make
