"""A failure that is the file's fault is remembered with the file's fingerprint, and only then: the video is
left out while the file stays the same, and tried again once it changes."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from stereo3d.errors import BadVideo, StereoError
from stereo3d.workflow.config import load_schema, validate_config
from stereo3d.workflow.failures import current_failure, record_path
from stereo3d.workflow.scripting import SourceFailure, run_guarded
from stereo3d.workflow.sources import Sources, fingerprint
from stereo3d.workflow.targets import Targets

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def source(tmp_path) -> Path:
    path = tmp_path / "videos" / "film{1}.mp4"
    path.parent.mkdir()
    path.write_bytes(os.urandom(3 << 20))  # longer than both ends read for the fingerprint
    return path


def guarded(error: StereoError, failure: SourceFailure) -> None:
    def main():
        raise error

    with pytest.raises(SystemExit) as stop:
        run_guarded(main, failure)
    assert stop.value.code == 1


def test_a_bad_video_naming_the_source_is_recorded_with_its_fingerprint(tmp_path, source):
    failure = SourceFailure(record=tmp_path / "work/film/failed.json", source=source, rule="depth")
    guarded(BadVideo(source, "decoding frames 0..9: got 3 of 10 frames"), failure)
    record = json.loads(failure.record.read_text())
    assert record == {
        "reason": f"bad video: {source}: decoding frames 0..9: got 3 of 10 frames",
        "rule": "depth",
        "fingerprint": fingerprint(source),
    }


@pytest.mark.parametrize(
    "error",
    [
        BadVideo("elsewhere/out.mkv", "encoding: Broken pipe"),  # the encoder's output, not the source
        StereoError("results/x.mp4", "cannot write the result: No space left on device"),  # not the file's fault
    ],
)
def test_failures_that_are_not_the_files_fault_are_not_recorded(tmp_path, source, error):
    failure = SourceFailure(record=tmp_path / "work/film/failed.json", source=source, rule="join")
    guarded(error, failure)
    assert not failure.record.exists()


def test_a_record_holds_while_the_file_is_the_same_and_goes_when_it_changes(tmp_path, source):
    record = tmp_path / "failed.json"
    record.write_text(json.dumps({"reason": "bad video: x: y", "rule": "probe", "fingerprint": fingerprint(source)}))
    assert current_failure(record, fingerprint(source))["reason"] == "bad video: x: y"
    with source.open("r+b") as fh:  # the same size, another first MiB: another file
        fh.write(b"changed")
    assert current_failure(record, fingerprint(source)) is None
    assert not record.exists()


def test_the_fingerprint_ignores_path_and_time_but_not_content(tmp_path, source):
    copy = tmp_path / "elsewhere.mp4"
    copy.write_bytes(source.read_bytes())
    os.utime(copy, (1, 1))
    assert fingerprint(copy) == fingerprint(source)
    with copy.open("ab") as fh:
        fh.write(b"\0")
    assert fingerprint(copy) != fingerprint(source)


def test_sources_reach_snakemake_through_links_as_old_as_their_files(tmp_path, source):
    sources = Sources(tmp_path / "work")
    link = sources.link("film_1-abc123", source)
    assert link == tmp_path / "work/film_1-abc123/source.mp4" and link.resolve() == source.resolve()
    assert link.lstat().st_mtime_ns == source.stat().st_mtime_ns
    moved = tmp_path / "Films" / source.name
    moved.parent.mkdir()
    source.rename(moved)
    again = sources.link("film_1-abc123", moved)
    assert again == link and link.resolve() == moved.resolve()
    assert link.lstat().st_mtime_ns == moved.stat().st_mtime_ns
    assert [p.name for p in link.parent.iterdir()] == ["source.mp4"]  # no temporary left behind


def test_fingerprints_are_cached_until_the_file_changes(tmp_path, source):
    sources = Sources(tmp_path / "work")
    first = sources.fingerprint(source)
    sources.save()
    cache = json.loads((tmp_path / "work/.sources.json").read_text())
    assert cache[str(source.resolve())][3] == first
    source.write_bytes(b"new")
    assert Sources(tmp_path / "work").fingerprint(source) == fingerprint(source) != first


def test_a_video_with_a_current_record_is_left_out_and_listed(tmp_path, source):
    schema = load_schema(ROOT / "workflow/schemas/config.schema.yaml")
    config, _ = validate_config(yaml.safe_load(f"paths: {{work: {tmp_path / 'work'}}}"), schema)
    sections = {s: config[s] for s in ("da3", "stabilise", "near", "render", "encode")}
    good = tmp_path / "videos" / "good.mp4"
    good.write_bytes(b"good")
    videos = {"film_1-abc123": source, "good": good}
    record = record_path(tmp_path / "work", "film_1-abc123")
    record.parent.mkdir(parents=True)
    record.write_text(json.dumps({"reason": "bad video: x", "rule": "depth", "fingerprint": fingerprint(source)}))
    targets = Targets(config, {v: sections for v in videos}, videos)
    targets.library.link_sources()
    assert list(targets.videos) == ["good"] and list(targets.library.failed) == ["film_1-abc123"]
    assert targets.results() == ["results/good/good_LRF_Full_SBS.mp4"]
    # The library's list of failures: the remembered one, and one whose probe (on disk, or not yet) says so.
    assert targets.library.failures(lambda video: None) == {"film_1-abc123": "bad video: x"}
    probes = {"good": {"error": "empty file (0 bytes)"}}
    assert targets.library.failures(probes.get) == {"film_1-abc123": "bad video: x", "good": "empty file (0 bytes)"}
