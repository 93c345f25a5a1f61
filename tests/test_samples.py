"""Generated clips: moving, reproducible, and the demo library the workflow expects."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from stereo3d.demo import samples
from stereo3d.io.decode import FrameReader
from stereo3d.io.probe import probe_video


def digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_same_options_give_the_same_bytes(tmp_path):
    a = samples.make_clip(tmp_path / "a.mp4", audio=True, subtitles=True)
    b = samples.make_clip(tmp_path / "b.mp4", audio=True, subtitles=True)
    assert digest(a) == digest(b)


@pytest.mark.parametrize("pattern", samples.PATTERNS)
def test_every_pattern_moves(make_clip, pattern):
    path = make_clip(f"{pattern}.mkv", frames=12, pattern=pattern)
    probe = probe_video(path)
    with FrameReader(path, probe) as reader:
        frames = list(reader)
    assert len(frames) == 12
    assert not np.array_equal(frames[0], frames[-1])


def test_options_reach_the_file(make_clip):
    probe = probe_video(make_clip("opts.mkv", width=64, height=64, frames=10, fps="30000/1001", codec="ffv1"))
    video = probe["video"]
    assert (video["width"], video["height"], video["frame_count"]) == (64, 64, 10)
    assert video["codec"] == "ffv1" and video["fps_fraction"] == "30000/1001"


def test_bad_options_are_refused(tmp_path):
    with pytest.raises(ValueError, match="unknown pattern"):
        samples.make_clip(tmp_path / "x.mp4", pattern="sunset")
    with pytest.raises(ValueError, match="multiple of 90"):
        samples.make_clip(tmp_path / "x.mp4", rotation=45)
    assert list(tmp_path.iterdir()) == []


def test_demo_library_matches_its_announced_names(tmp_path):
    paths = samples.make_demo_library(tmp_path / "videos")
    assert tuple(p.name for p in paths) == samples.DEMO_CLIPS
    probes = [probe_video(p) for p in paths]
    assert any(p["audio"] for p in probes)
    assert any(p["video"]["width"] * 9 != p["video"]["height"] * 16 for p in probes)  # not everything is 16:9
    for probe in probes:
        assert 2.0 <= probe["duration_s"] <= 5.0
        assert probe["video"]["width"] * probe["video"]["height"] <= 320 * 240
    mtimes = [p.stat().st_mtime_ns for p in paths]
    samples.make_demo_library(tmp_path / "videos")  # idempotent: existing clips are kept
    assert [p.stat().st_mtime_ns for p in paths] == mtimes
