"""The preview: short clips spread over each video and a settings grid, in the report, without converting whole
videos; its depth is the first frames of the full run's depth jobs, which the full run continues."""

from __future__ import annotations

import base64
import dataclasses
import re
from collections import Counter
from pathlib import Path

import av
import cv2
import numpy as np
import pytest
from harness import config_of, exported_workdir, planned_jobs_each, snakemake, write_config

from stereo3d.demo.samples import make_clip
from stereo3d.io.mapstore import MapReader, MapWriter, finished_by, partial_path
from stereo3d.qc.preview import DATA_URL_LIMIT
from stereo3d.workflow.preview import Clip, grid_still, preview_clips

DKEY = "da3_small_140x84_u8_letterbox"
# Segments of 40 frames (a multiple of the tests' 8-frame pieces), clips of 0.5 s at 24 fps (12 frames): a clip
# computes one 32-frame chunk of its segment, less than the segment, so it can leave the rest to the full run.
SETTINGS = dict(
    segments={"frames": 40},
    preview={"clips": 3, "seconds": 0.5, "grid": {"divergence_pct": [2.0, 3.0], "convergence": ["auto", 0.25, 0.5]}},
    report={"qc": False},
    runtime={"providers": "auto"},  # the default: each job that runs a model takes a device lease and logs it
)
FRAMES = {"alpha": 120, "beta": 80}
# A 1080p film of noise (every pixel new each frame: an encoder's worst case), whose clip at the configured quality
# is far larger than a page of the report may be: half a second, so one clip (of its whole length).
FILM = {"name": "film", "frames": 12, "starts": [0]}


def test_clips_are_spread_over_the_video_and_start_its_segments_where_they_can():
    # Three parts of 40 frames: each clip moves from its part's middle to the segment start in it.
    assert preview_clips(120, 24.0, 3, 0.5, 40) == [
        Clip(0, 12, (0, 40)),
        Clip(40, 12, (40, 40)),
        Clip(80, 12, (80, 40)),
    ]
    # The last segment is taken: the third clip stays in the middle of its part, with depth of its own.
    assert preview_clips(80, 24.0, 3, 0.5, 40) == [Clip(0, 12, (0, 40)), Clip(40, 12, (40, 40)), Clip(61, 12)]
    # One whole-video segment: only the first clip can start it.
    assert preview_clips(1000, 25.0, 3, 2.0, 0) == [Clip(0, 50, (0, 1000)), Clip(475, 50), Clip(808, 50)]
    # A segment the clip's chunk would finish is not shared; a video shorter than the clips gives fewer.
    assert preview_clips(30, 24.0, 3, 1.0, 32) == [Clip(0, 24)]
    # The second clip took the last segment start: the third, which would overlap it, moves past it.
    assert preview_clips(96, 24.0, 3, 1.0, 48) == [Clip(0, 24, (0, 48)), Clip(48, 24, (48, 48)), Clip(72, 24)]
    assert grid_still(preview_clips(120, 24.0, 3, 0.5, 40)) == (Clip(40, 12, (40, 40)), 46)


def test_a_suspended_store_is_read_partial_and_continued_by_the_same_job(tmp_path):
    maps = np.random.default_rng(0).uniform(1, 5, (20, 6, 8)).astype(np.float32)
    with MapWriter(tmp_path / "d.zarr", "inverse", chunk=8, series=("changes",), resume={"job": 1}) as store:
        store.append(maps[:16], changes=np.arange(16.0))
        store.suspend()
    assert not (tmp_path / "d.zarr").exists() and partial_path(tmp_path / "d.zarr").is_dir()
    with MapReader(tmp_path / "d.zarr", partial=True) as partial:
        assert partial.frames == 16 and partial.identity == {"job": 1}
        np.testing.assert_allclose(partial.read(0, 16), maps[:16], rtol=2e-3)
    with MapWriter(tmp_path / "d.zarr", "inverse", chunk=8, series=("changes",), resume={"job": 1}) as store:
        assert store.resumed == 16
        store.append(maps[16:], changes=np.arange(16.0, 20.0))
    with MapReader(tmp_path / "d.zarr") as whole:
        assert whole.frames == 20
        np.testing.assert_array_equal(whole.series("changes"), np.arange(20.0))
    # The preview reads a finished store only if the job it would continue wrote it (not an older source's).
    assert finished_by(tmp_path / "d.zarr", {"job": 1}) and not finished_by(tmp_path / "d.zarr", {"job": 2})


def test_a_store_is_not_left_for_a_later_writer_with_a_chunk_begun(tmp_path):
    with pytest.raises(ValueError, match="not whole chunks"):
        with MapWriter(tmp_path / "d.zarr", "inverse", chunk=8, resume={"job": 1}) as store:
            store.append(np.ones((10, 4, 4), np.float32))
            store.suspend()


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    """Three videos previewed, then the report built with the preview."""
    workdir = exported_workdir(tmp_path_factory, "preview", exports=("da3_small_140x84_u8.onnx",))
    make_clip(workdir / "videos" / "alpha.mp4", width=128, height=72, frames=FRAMES["alpha"], fps="24")
    make_clip(workdir / "videos" / "beta.mp4", width=128, height=72, frames=FRAMES["beta"], fps="24", pattern="boxes")
    make_clip(workdir / "videos" / "film.mp4", width=1920, height=1080, frames=FILM["frames"], fps="24",
              extra=("-vf", "noise=alls=40:allf=t+u"))  # fmt: skip
    write_config(workdir, **SETTINGS)
    snakemake(workdir, "preview")
    snakemake(workdir, "--report", "report.html", "preview")
    return workdir, jobs_run(workdir)


def jobs_run(workdir: Path) -> dict[str, int]:
    """The jobs that ran, by rule: each writes its benchmark file (a checkpoint's run prints no table of the jobs
    planned after it)."""
    return dict(Counter(path.relative_to(workdir / "benchmarks").parts[0]
                        for path in (workdir / "benchmarks").rglob("*.tsv")))  # fmt: skip


def clips_of(workdir: Path, video: str) -> list[Path]:
    return sorted((workdir / "work" / video / "preview" / "clips").rglob("*.mp4"))


def test_the_preview_renders_short_clips_spread_over_each_video_and_converts_none(library):
    workdir, jobs = library
    assert jobs == {"probe": 3, "preview_depth": 7, "preview_near_maps": 7, "preview_render": 7, "preview_page": 3,
                    "preview_grid": 3}  # fmt: skip
    for video, starts, size in [("alpha", [0, 40, 80], (256, 72)), ("beta", [0, 40, 61], (256, 72)),
                                ("film", FILM["starts"], (3840, 1080))]:  # fmt: skip
        clips = clips_of(workdir, video)
        assert [int(re.match(r"(\d+)-", clip.name).group(1)) for clip in clips] == starts
        for clip in clips:
            with av.open(str(clip)) as container:
                stream = container.streams.video[0]
                assert stream.codec_context.name == "h264" and (stream.width, stream.height) == size
                assert sum(1 for _ in container.decode(stream)) == 12
    assert not (workdir / "results").exists()


def test_the_preview_jobs_that_run_models_and_only_they_take_a_device_lease(library):
    from test_workflow import LEASE

    workdir, _ = library
    leased = {log.relative_to(workdir / "logs").parts[0] for log in (workdir / "logs").rglob("*.log")
              if LEASE.search(log.read_text())}  # fmt: skip
    assert leased == {"preview_depth", "preview_near_maps"}


def test_the_grid_shows_the_still_at_each_divergence_and_convergence_and_frames_the_current_pair(library):
    from stereo3d.io.decode import FrameReader
    from stereo3d.io.probe import probe_video
    from stereo3d.qc.figures import CURRENT_COLOUR
    from stereo3d.stereo.layouts import anaglyph_dubois
    from stereo3d.stereo.warp import Renderer

    workdir, _ = library
    grid = SETTINGS["preview"]["grid"]
    current = stereo_defaults()
    assert (current.divergence_pct, current.convergence) == (2.0, "auto")  # the grid's first row, first column
    for video, frames in FRAMES.items():
        (path,) = (workdir / "work" / video / "preview" / "grid").rglob("grid.png")
        image = cv2.imread(str(path))
        # Three columns of 128x72 tiles with their 2-px borders; a label strip (26 px) above each row and two (the
        # still's frame, the convergences) above all.
        assert image.shape == (2 * (72 + 4) + 4 * 26, 3 * (128 + 4), 3)
        clip, frame = grid_still(preview_clips(frames, 24.0, 3, 0.5, 40))
        (store,) = (workdir / "work" / video / "preview" / "near").rglob(f"{clip.name}.zarr")
        with MapReader(store) as maps:
            near = maps.read(frame - clip.start, 1)[0]
        source = workdir / "videos" / f"{video}.mp4"
        with FrameReader(source, probe_video(source), start=frame, count=1, size=(128, 72)) as reader:
            still = next(iter(reader))
        for row, divergence in enumerate(grid["divergence_pct"]):
            for column, convergence in enumerate(grid["convergence"]):
                top, left = 2 * 26 + row * (26 + 76) + 26, column * 132
                framed = image[top : top + 76, left : left + 132]
                settings = dataclasses.replace(current, divergence_pct=divergence, convergence=convergence)
                views = Renderer().render_stereo(still, near, settings)
                expected = cv2.cvtColor(anaglyph_dubois(*views), cv2.COLOR_RGB2BGR)
                where = f"{video} {divergence} {convergence}"
                np.testing.assert_array_equal(framed[2:-2, 2:-2], expected, err_msg=where)
                border = np.concatenate([framed[:2].reshape(-1, 3), framed[-2:].reshape(-1, 3)])
                colour = CURRENT_COLOUR if (divergence, convergence) == (2.0, "auto") else (255, 255, 255)
                assert (border == colour).all(), (video, divergence, convergence)


def stereo_defaults():
    """The renderer's settings the tests' config gives (the schema's defaults)."""
    from stereo3d.stereo.warp import StereoSettings
    from stereo3d.workflow.config import load_schema, validate_config

    schema = load_schema(Path(__file__).resolve().parents[1] / "workflow/schemas/config.schema.yaml")
    config, _ = validate_config(config_of(**SETTINGS), schema)
    return StereoSettings.from_config(config["render"])


def test_the_report_holds_each_videos_clips_page_and_grid(library):
    workdir, _ = library
    report = (workdir / "report.html").read_text(encoding="utf-8")
    for video in (*FRAMES, FILM["name"]):
        assert re.search(rf'"labels": {{"video": "{video}", "preview": "clips"}}', report)
        assert re.search(rf'"labels": {{"video": "{video}", "preview": "settings grid"}}', report)
    # Small clips are embedded as the preview rendered them; the film's, far larger, as smaller copies.
    alpha = next((workdir / "work" / "alpha" / "preview" / "clips").rglob("clips.html")).read_text()
    embedded = re.findall(r'src="data:video/mp4;base64,([^"]+)"', alpha)
    assert [base64.b64decode(data) for data in embedded] == [clip.read_bytes() for clip in clips_of(workdir, "alpha")]
    film = next((workdir / "work" / "film" / "preview" / "clips").rglob("clips.html")).read_text()
    assert sum(clip.stat().st_size for clip in clips_of(workdir, "film")) > DATA_URL_LIMIT  # would not load
    assert film.count("<video") == 1 and film.count("a smaller copy for this page; full quality: work/film/") == 1
    for data in re.findall(r'src="data:video/mp4;base64,([^"]+)"', film):
        copy = workdir / "copy.mp4"
        copy.write_bytes(base64.b64decode(data))
        with av.open(str(copy)) as container:
            stream = container.streams.video[0]
            assert (stream.width, stream.height) == (1280, 360) and sum(1 for _ in container.decode(stream)) == 12


def test_every_item_of_the_report_is_within_the_browsers_data_url_limit(library):
    workdir, _ = library
    results = report_results(workdir / "report.html")
    assert len(results) == 6
    for path, entry in results.items():
        assert len(entry["data_uri"]) <= DATA_URL_LIMIT, path


def report_results(report: Path) -> dict:
    """The report's items by path, each with its ``data_uri`` (Snakemake's ``var results = {...};``)."""
    import json

    text = report.read_text(encoding="utf-8")
    start = text.index("var results = ", text.index('<script id="results">')) + len("var results = ")
    return json.JSONDecoder().raw_decode(text, start)[0]


def test_each_videos_clips_play_inside_the_report_in_chromium(library):
    """The report in headless Chromium (the browser whose data: URL limit is the lowest): each clips page, shown as
    the report shows it (its result button sets the page as an iframe's data: URL), loads and plays every clip."""
    from browser import Browser, file_url, find_chromium

    chromium = find_chromium()
    if chromium is None:
        pytest.skip("no Chromium here (apt-get install chromium); CI installs it")
    workdir, _ = library
    pages = {path: entry for path, entry in report_results(workdir / "report.html").items()
             if path.endswith("clips.html")}  # fmt: skip
    assert len(pages) == 3
    with Browser(chromium) as browser:
        browser.navigate(file_url(workdir / "report.html"))
        for path in sorted(pages):
            browser.evaluate(
                f"app.setView({{content: 'html', contentPath: results[{path!r}].data_uri, resultPath: {path!r}}})"
            )
            # The frame showing this page (the app makes a new frame for each page shown); Chromium leaves a frame
            # whose data: URL is too long at about:blank.
            start = pages[path]["data_uri"][:200]

            def shown(start=start):
                return [frame for frame in browser.frames() if frame["url"].startswith(start)]

            try:
                (frame,) = browser.poll(shown, timeout=20)
            except TimeoutError:
                pytest.fail(f"{path}: the report's frame did not load it: {[f['url'][:40] for f in browser.frames()]}")
            played = browser.evaluate(PLAYED, frame["id"])
            clips = len(FILM["starts"]) if path.startswith("work/film/") else 3
            assert played is not None and len(played) == clips, (path, played)
            for width, height, seconds in played:
                assert width > 0 and height > 0 and seconds > 0, (path, played)


# In a clips page: once every video has a decoded picture and has moved past its start, their sizes and times.
PLAYED = """new Promise(resolve => {
    const check = () => {
        const videos = [...document.querySelectorAll('video')];
        if (videos.length && videos.every(v => v.readyState >= 2 && v.currentTime > 0)) {
            resolve(videos.map(v => [v.videoWidth, v.videoHeight, v.currentTime]));
        } else {
            setTimeout(check, 100);
        }
    };
    check();
    setTimeout(() => resolve(null), 30000);
})"""


def test_a_render_setting_reruns_the_renders_and_grid_and_a_near_setting_the_near_maps_onward(library):
    workdir, _ = library
    plans = planned_jobs_each(workdir, {"render": {**SETTINGS, "render": {"divergence_pct": 3.0}},
                                        "near": {**SETTINGS, "near": {"low_pct": 5.0}}}, "preview")  # fmt: skip
    renders = {"preview_render": 7, "preview_page": 3, "preview_grid": 3}
    assert plans["render"] == {"preview": 1, **renders}
    assert plans["near"] == {"preview": 1, "preview_near_maps": 7, **renders}  # no depth: the near maps onward


def test_the_full_run_continues_the_depth_the_preview_computed(library):
    workdir, _ = library
    depth = workdir / "work" / "alpha" / "depth" / DKEY
    with MapReader(depth / "00000040-00000080.zarr", partial=True) as partial:
        assert partial.frames == 32  # the clip's 12 frames in whole chunks, left for the full run
    # The full run's depth jobs (what the preview shares with it); the stages after them are the workflow's tests'.
    segments = [f"work/{video}/depth/{DKEY}/{start:08d}-{min(start + 40, frames):08d}.zarr"
                for video, frames in FRAMES.items() for start in range(0, frames, 40)]  # fmt: skip
    snakemake(workdir, *segments)
    logs = {
        path.relative_to(workdir).as_posix(): path.read_text() for path in (workdir / "logs").rglob("depth/*/*/*.log")
    }
    resumed = {job for job, text in logs.items() if "resuming depth at frame" in text}
    # Every segment a clip started (alpha's three, beta's first two) computed 8 of its 40 frames; beta's last
    # clip (frames 61..72) started no segment.
    assert len(logs) == 5 and len(resumed) == 5, logs
    assert all(re.search(r"depth \S+: 8/8 frames", text) for text in logs.values()), logs
    for video, start in [("alpha", 40), ("beta", 0)]:
        segment = workdir / "work" / video / "depth" / DKEY / f"{start:08d}-{start + 40:08d}.zarr"
        (clip,) = (workdir / "work" / video / "preview" / "depth" / DKEY).glob(f"{start:08d}-*[0-9].zarr")
        with MapReader(segment) as full, MapReader(clip) as preview:
            np.testing.assert_allclose(preview.read(), full.read(0, 12), rtol=2e-3)


# --- the preview's stages, without Snakemake -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def stage_models(tmp_path_factory) -> Path:
    """The session's DA3 export (16:9 at 140) and the tiny NVDS split pair, in a folder of this module."""
    return exported_workdir(tmp_path_factory, "preview-stages", exports=("da3_small_140x84_u8.onnx",), nvds=True)


def is_locked(store: Path) -> bool:
    """Whether another holder has the store's lock (stereo3d.io.mapstore.store_lock) right now: another open file
    of its lock file cannot take it."""
    from stereo3d.io.locks import try_lock, unlock

    fd = try_lock(store.with_name(f".{store.name}.lock"))
    if fd is None:
        return True
    unlock(fd)
    return False


def test_the_preview_computes_its_segments_first_frames_under_the_lock_and_reads_a_finished_segment(
    stage_models, tmp_path, monkeypatch, caplog
):
    import logging

    from stereo3d.io.probe import probe_video
    from stereo3d.runtime.sessions import SessionOptions
    from stereo3d.stages import depth as depth_stage
    from stereo3d.stages.depth import DepthSettings, estimate_depth
    from stereo3d.stages.preview import preview_depth

    video = make_clip(tmp_path / "clip.mp4", width=128, height=72, frames=48, fps="24")
    probe = probe_video(video)
    model = stage_models / "models/DA3/da3_small_140x84_u8.onnx"
    job = dict(settings=DepthSettings(size=(140, 84)), batch=2, options=SessionOptions(providers=("cpu",), threads=1))
    full = tmp_path / "depth" / "00000000-00000048.zarr"
    locked = []
    real_run = None

    def run_checked(self, *args, **kwargs):  # each batch: is the segment's store locked meanwhile?
        locked.append(is_locked(full))
        return real_run(self, *args, **kwargs)

    from stereo3d.models.da3.runtime import DepthModel

    real_run = DepthModel.infer
    monkeypatch.setattr(DepthModel, "infer", run_checked)
    clip, segment = (0, 12), (0, 48)
    first = preview_depth(video, probe, model, clip, segment, tmp_path / "p1.zarr", tmp_path / "p1-lead.zarr", 0, full,
                          **job)  # fmt: skip
    assert "partial" in first["depth"] and not full.exists()
    with MapReader(full, partial=True) as partial:
        assert partial.frames == 32  # the clip's frames in whole chunks, left for the full run
    assert locked and all(locked)  # the preview never computed without the lock
    locked.clear()
    with caplog.at_level(logging.INFO, logger=depth_stage.log.name):
        estimate_depth(video, probe, model, full, start=0, count=48, **job)
    assert "resuming depth at frame 32 of 48" in caplog.text  # the full run continued the preview's frames
    assert len(locked) == 8 and all(locked)  # 16 frames in batches of 2, under the lock too
    # Once the segment is finished the preview reads it: no frame computed.
    locked.clear()
    second = preview_depth(video, probe, model, clip, segment, tmp_path / "p2.zarr", tmp_path / "p2-lead.zarr", 0,
                           full, **job)  # fmt: skip
    assert "finished" in second["depth"] and locked == []
    # The preview's stores copy the segment's frames by decoding and storing them again: the same maps to float32
    # rounding (quantising 1 / depth a second time moved some values by an ulp or two on an AVX-512 EPYC, none on
    # an AVX2 one). That the second preview computed nothing is shown above: no batch ran.
    with MapReader(full) as segment, MapReader(tmp_path / "p1.zarr") as one, MapReader(tmp_path / "p2.zarr") as two:
        np.testing.assert_allclose(one.read(), segment.read(0, 12), rtol=1e-6, atol=0)
        np.testing.assert_allclose(two.read(), segment.read(0, 12), rtol=1e-6, atol=0)


def test_the_previews_nvds_maps_are_the_full_runs(stage_models, tmp_path):
    """A clip in the middle of a video, with depth of its own: NVDS primed with the raw depth of the 3 frames before
    it gives the near maps of the full run's job over the whole video."""
    from harness import NVDS_TIER

    from stereo3d.io.probe import probe_video
    from stereo3d.runtime.sessions import SessionOptions
    from stereo3d.stabilisers import NearSettings, get_stabiliser
    from stereo3d.stages.depth import DepthSettings, estimate_depth
    from stereo3d.stages.near_maps import make_near_maps
    from stereo3d.stages.preview import preview_depth, preview_near_maps

    video = make_clip(tmp_path / "clip.mp4", width=128, height=72, frames=30, fps="24", pattern="boxes")
    probe = probe_video(video)
    model = stage_models / "models/DA3/da3_small_140x84_u8.onnx"
    cpu = SessionOptions(providers=("cpu",), threads=1)
    job = dict(settings=DepthSettings(size=(140, 84)), batch=2, options=cpu)
    settings = NearSettings(method="nvds", options={"stabilise.nvds_tier": NVDS_TIER, "stabilise.nvds_graphs": "split",
                                                    "export.nvds_architecture": "tiny"})  # fmt: skip
    models = stage_models / "models/NVDS"
    estimate_depth(video, probe, model, tmp_path / "depth.zarr", **job)
    make_near_maps(video, probe, tmp_path / "depth.zarr", tmp_path / "near.zarr", settings, models_dir=models,
                   options=cpu)  # fmt: skip
    clip = (15, 9)
    lead = get_stabiliser("nvds").history
    assert lead == 3
    preview_depth(video, probe, model, clip, None, tmp_path / "p.zarr", tmp_path / "p-lead.zarr", lead, None, **job)
    preview_near_maps(video, probe, tmp_path / "p.zarr", tmp_path / "p-lead.zarr", tmp_path / "p-near.zarr", settings,
                      models_dir=models, options=cpu)  # fmt: skip
    with MapReader(tmp_path / "near.zarr") as full, MapReader(tmp_path / "p-near.zarr") as preview:
        np.testing.assert_array_equal(preview.read(), full.read(15, 9))
