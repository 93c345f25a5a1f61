"""A library as people keep one: any file name converts, a bad file is a row of the report and is not tried
again until it changes, a moved or copied library recomputes nothing, mkv keeps every stream, and the demo
keeps to its own folder."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest
from harness import exported_workdir, planned_jobs, snakemake, write_config

from stereo3d.demo.samples import make_clip
from stereo3d.io.ffmpeg import ffmpeg_url, run_ffmpeg
from stereo3d.io.probe import probe_video
from stereo3d.workflow.library import ID_PATTERN, video_id

# Names a filesystem allows and a user's library holds: Snakemake patterns ({braces}), a value whose end repeats
# (Snakemake takes that for a cycle), a name that fills the filesystem's 255 bytes, a newline, a leading dash.
NAMES = [
    "clip{1}.mp4",
    "L" * 196 + ".mp4",
    "Holiday1_" + "x" * 237 + ".mp4",
    "two\nlines.mp4",
    "-rf.mp4",
    "Überraschung 🎬.mkv",
]
TINY = dict(width=64, height=36, frames=8, fps="8")


def put_clip(folder: Path, name: str, **options) -> Path:
    """A clip under any name (written under a short one first: the encoder's temporary name must fit too)."""
    short = make_clip(folder / f"tmp-{len(list(folder.glob('tmp-*')))}.mp4", **{**TINY, **options})
    return short.rename(folder / name)


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    workdir = exported_workdir(tmp_path_factory, "real-library")
    videos = workdir / "videos"
    videos.mkdir()
    for name in NAMES:
        put_clip(videos, name, audio=True)
    (videos / "empty.mp4").write_bytes(b"")
    write_config(workdir, segments={"frames": 0})
    run = snakemake(workdir)
    return workdir, run


def result_of(workdir: Path, name: str) -> Path:
    vid = video_id(name)
    return workdir / "results" / vid / f"{vid}_LRF_Full_SBS.mp4"


@pytest.mark.parametrize("name", NAMES, ids=lambda n: repr(n[:16]))
def test_any_file_name_converts(library, name):
    workdir, _ = library
    vid = video_id(name)
    assert re.fullmatch(ID_PATTERN, vid) and len(vid) <= 64
    out = probe_video(result_of(workdir, name))
    assert out["video"]["frame_count"] == 8 and out["audio"]
    # No path component the workflow writes passes the filesystem's limit.
    for path in workdir.rglob("*"):
        assert len(path.name.encode()) <= 255, path.name


def test_a_bad_file_is_a_row_of_the_report_not_a_blocker(library):
    workdir, run = library
    # The run succeeds: every good video is converted and the library's report is built, listing the bad one.
    assert all(result_of(workdir, name).is_file() for name in NAMES)
    assert "1 of 7 videos not converted" in run.stderr and "empty.mp4: empty file (0 bytes)" in run.stderr
    table = (workdir / "work/qc/videos.html").read_text()
    assert "Not converted" in table and "empty file (0 bytes)" in table
    record = json.loads((workdir / "work/empty/failed.json").read_text())
    assert record["rule"] == "probe" and "empty file" in record["reason"]


def test_a_failed_file_is_not_tried_again_until_it_changes(library):
    workdir, _ = library
    assert planned_jobs(workdir) == {"qc_library": 1}  # the failure is now known before any job: the table moves
    snakemake(workdir)
    assert planned_jobs(workdir) == {}
    # To try it again anyway (README): delete its work folder, and it is probed again.
    shutil.rmtree(workdir / "work/empty")
    assert planned_jobs(workdir) == {"probe": 1, "qc_exports": 1, "qc_library": 1}
    snakemake(workdir)  # tried again: still empty, so it failed again, and is remembered again
    assert (workdir / "work/empty/failed.json").is_file()
    assert planned_jobs(workdir) == {"qc_library": 1}  # as after its first failure
    put_clip(workdir / "videos", "replacement.mp4")
    os.replace(workdir / "videos/replacement.mp4", workdir / "videos/empty.mp4")
    # The rest follows once it is probed (the exports table too: which export a video uses depends on its shape).
    assert planned_jobs(workdir) == {"probe": 1, "qc_exports": 1, "qc_library": 1}
    snakemake(workdir)
    assert result_of(workdir, "empty.mp4").is_file()
    assert not (workdir / "work/empty/failed.json").exists()


def test_a_moved_renamed_or_copied_library_recomputes_nothing(library):
    workdir, _ = library
    snakemake(workdir)
    assert planned_jobs(workdir) == {}
    (workdir / "videos").rename(workdir / "Films")
    write_config(workdir, segments={"frames": 0}, library={"folder": "Films"})
    assert planned_jobs(workdir) == {}
    # A copy has new file times but the same content: still nothing.
    shutil.copytree(workdir / "Films", workdir / "Copied", copy_function=shutil.copy)
    write_config(workdir, segments={"frames": 0}, library={"folder": "Copied"})
    assert planned_jobs(workdir) == {}
    # Changed content reprobes it (and everything after, once the probe has run).
    first = workdir / "Copied" / NAMES[0]
    with first.open("ab") as fh:
        fh.write(b"\0" * 16)
    assert planned_jobs(workdir) == {"probe": 1, "qc_exports": 1, "qc_library": 1}


def styled_source(make_clip, tmp_path: Path) -> Path:
    """A Matroska source with ASS subtitles, their font attached, and PCM audio."""
    base = make_clip("base.mkv", width=64, height=36, frames=12, fps="12", audio=True)
    ass = tmp_path / "styled.ass"
    ass.write_text(
        "[Script Info]\nScriptType: v4.00+\n\n[V4+ Styles]\nFormat: Name, Fontname, Fontsize\n"
        "Style: Default,Fancy,12\n\n[Events]\nFormat: Layer, Start, End, Style, Text\n"
        "Dialogue: 0,0:00:00.10,0:00:00.80,Default,{\\i1}Bonjour{\\i0}\n",
        encoding="utf-8",
    )
    font = tmp_path / "Fancy.ttf"
    font.write_bytes(b"\0\1\0\0" + b"\0" * 60)  # stands for a font: what matters is that it travels along
    out = tmp_path / "styled.mkv"
    run_ffmpeg(
        ["-i", ffmpeg_url(base), "-i", ffmpeg_url(ass), "-attach", ffmpeg_url(font),
         "-metadata:s:t", "mimetype=font/ttf", "-map", "0:v", "-map", "0:a", "-map", "1", "-c:v", "copy",
         "-c:a", "pcm_s16le", "-c:s", "copy", "-y", ffmpeg_url(out)],
        out, "making the test source",
    )  # fmt: skip
    return out


@pytest.mark.parametrize("container", ["mp4", "mkv"])
def test_the_container_of_the_result(make_clip, tmp_path, container):
    from test_delivery import FAST, joined, st3d_mode

    final = joined(tmp_path, styled_source(make_clip, tmp_path), "full_sbs", FAST, out=f"final.{container}")
    out = probe_video(final)
    banner = run_ffmpeg(["-i", ffmpeg_url(final)], final, "reading", check=False).stderr.decode()
    assert out["video"]["frame_count"] == 12
    if container == "mp4":  # plays everywhere; holds less
        assert st3d_mode(final) == 2  # side by side
        assert [a["codec"] for a in out["audio"]] == ["aac"]
        assert [s["codec"] for s in out["subtitles"]] == ["mov_text"]
        assert out["attachments"] == 0
    else:  # every stream as it came, the subtitles' font too
        assert [a["codec"] for a in out["audio"]] == ["pcm_s16le"]
        assert [s["codec"] for s in out["subtitles"]] == ["ass"]
        assert out["attachments"] == 1 and "Fancy.ttf" in banner
        assert "Stereo 3D: side by side" in banner  # Matroska's own StereoMode


def test_the_container_setting_names_the_result_and_reruns_the_encode_and_mux_only(library):
    workdir, _ = library
    snakemake(workdir)  # whatever the tests before left to do
    # One video shows it: the container set on its own sheet row (encode is a per-video section).
    (workdir / "videos.tsv").write_text(f"video\tencode.container\n{NAMES[-1]}\tmkv\n", encoding="utf-8")
    write_config(workdir, segments={"frames": 0}, library={"folder": "Copied", "sheet": "videos.tsv"})
    # No model job: the encoded video was removed once muxed (no second copy of every result in work/).
    assert planned_jobs(workdir) == {"render": 1, "join": 1, "qc_library": 1}
    snakemake(workdir)
    vid = video_id(NAMES[-1])
    out = probe_video(workdir / "results" / vid / f"{vid}_LRF_Full_SBS.mkv")
    assert out["container"].startswith("matroska") and out["audio"]
    assert not list((workdir / "work" / vid / "render").rglob("*.mkv"))  # no second copy of the result


def test_kept_encoded_videos_make_a_container_change_a_remux(library):
    workdir, _ = library
    vid = video_id(NAMES[-1])
    for result in (workdir / "results" / vid).iterdir():
        result.unlink()
    sheet = workdir / "videos.tsv"  # one video shows it: its container on its sheet row
    sheet.write_text(f"video\tencode.container\n{NAMES[-1]}\tmp4\n", encoding="utf-8")
    write_config(
        workdir, segments={"frames": 0, "keep_encoded": True}, library={"folder": "Copied", "sheet": sheet.name}
    )
    snakemake(workdir)  # encoded again, and kept this time
    assert len(list((workdir / "work" / vid / "render").rglob("*.mkv"))) == 1
    sheet.write_text(f"video\tencode.container\n{NAMES[-1]}\tmkv\n", encoding="utf-8")
    assert planned_jobs(workdir) == {"join": 1, "qc_library": 1}  # the mux alone


def test_the_demo_keeps_to_its_own_folder(tmp_path):
    root = Path(__file__).resolve().parents[1]
    (tmp_path / "mine").mkdir()
    cmd_config = ["--configfile", str(root / "demo/config.yaml"), "--config", "library={folder: mine}"]
    done = snakemake_plain(tmp_path, "demo", "-n", *cmd_config)
    assert "the demo makes its clips in demo/videos; library.folder mine is left alone" in done.stderr
    assert "demo/videos/demo_shapes_16x9.mp4" in done.stdout
    assert list((tmp_path / "mine").iterdir()) == []


def snakemake_plain(workdir: Path, *args: str):
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(root / "Snakefile"), "--directory", str(workdir),
           "--cores", "1", *args]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return done
