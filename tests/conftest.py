"""Shared fixtures: tiny generated videos (stereo3d.demo.samples) in each test's temporary folder; and
``needs_export_extra``, which the export tests call instead of a bare ``pytest.importorskip``."""

from __future__ import annotations

import importlib
import os
from pathlib import Path

import pytest

from stereo3d.demo import samples


def in_ci() -> bool:
    """Whether this is a CI run (``CI=true``, as CI services set it): the export extra is installed there."""
    return os.environ.get("CI", "").strip().lower() in ("true", "1")


def needs_export_extra(*modules: str):
    """Import ``modules`` of the export extra (torch, onnx, onnxscript, safetensors, the DA3 model code), in a test,
    a fixture or at module level, and return the last one.

    Where one is missing the test is skipped, as ``pytest.importorskip`` would, except in CI: CI installs the
    extra, so there a missing module fails (a test error, or a collection error at module level) instead of
    letting the export tests vanish from the run without a word.
    """
    module = None
    for name in modules:
        try:
            module = importlib.import_module(name)
            continue
        except ImportError as exc:
            why = (
                f"{name} does not import ({exc}); it comes with the export extra: pip install -e '.[export]' "
                "and pip install --no-deps depth-anything-3 (README)"
            )
        if in_ci():
            pytest.fail(f"CI=true, and CI installs the export extra, but {why}", pytrace=False)
        pytest.skip(why, allow_module_level=True)
    return module


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
