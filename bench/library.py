"""P11-P14: feature films at library scale: planning, disk, kills, fixed costs.

    python -m bench.library [--only P11,P13]

* P11 = seconds of ``snakemake -n`` over a library of 100 probed 2-hour films (hard links to one generated 2-hour
  64x36 film with audio, 172,800 frames at 24 fps), at the default settings; the jobs per film are beside it.
* P12 = bytes of ``work/`` ÷ bytes of ``results/`` after converting a 1280x720 clip at the default settings
  (what a finished conversion keeps beside its result; the encoded video is gone once muxed).
* P13 = the most frames of finished work lost by a kill: the depth stage and the render, each killed (SIGKILL) at
  random moments and resumed; a frame counts as finished once computed (depth) or handed to the encoder (render),
  and as kept if the resumed job does not compute it again. Each resumed store or result equals an
  uninterrupted one, byte for byte.
* P14 = the largest share of fixed costs (Python start, imports, sessions, the first frame's set-up) in a stage
  job's wall time at the default segmenting (one job per stage and film, a 2-hour film), on this CPU. Fixed cost
  and per-frame time come from Snakemake's benchmark of each job on two clip lengths.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from bench import common
from bench.pipeline import _job_stats, _snakemake, workdir

FILM_FRAMES = 2 * 3600 * 24  # a 2-hour film at 24 fps


def _du(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink())


# --- P11 ----------------------------------------------------------------------------------------------------
def p11(films: int = 100, repeats: int = 2, film_frames: int = FILM_FRAMES) -> dict:
    common.say(f"P11: a {film_frames}-frame 64x36 film (generated once into the cache), {films} hard links, probed, "
               "then snakemake -n")  # fmt: skip
    name = "film_2h" if film_frames == FILM_FRAMES else f"film_{film_frames}"
    film = common.clip(name, width=64, height=36, frames=film_frames, fps="24", audio=True)
    work = workdir("p11")
    for n in range(films):
        os.link(film, work / "videos" / f"film{n:03d}.mp4")
    probes = [f"work/film{n:03d}/probe.json" for n in range(films)]
    _, probe_s = common.timed(lambda: _snakemake(work, "--cores", "2", *probes, timeout=1800, no_slurm=True))
    runs = []
    for _ in range(repeats):
        done, seconds = common.timed(lambda: _snakemake(work, "-n", timeout=1800, no_slurm=True))
        runs.append(round(seconds, 2))
    stats = _job_stats(done.stdout)
    total = stats.get("total", 0)
    per_film = {rule: n / films for rule, n in stats.items() if rule not in ("total", "all") and n >= films}
    return {
        "P11": common.figure(
            min(runs),
            "<= 10",
            baseline={"what": "goal: 10 s", "films": films, "frames_per_film": film_frames},
            measured={
                "what": "snakemake -n wall seconds (best of the runs)",
                "seconds": runs,
                "jobs": total,
                "jobs_per_film": round(sum(per_film.values()), 2),
                "jobs_per_film_by_rule": per_film,
                "probe_all_s": round(probe_s, 1),
            },
            jobs_per_film_met=sum(per_film.values()) <= 25,
            setup=f"{films} hard links to one {film_frames}-frame 64x36 film, probed; default settings; unit: seconds",
        )
    }


# --- P12 ----------------------------------------------------------------------------------------------------
def p12(frames: int = 96) -> dict:
    common.say("P12: converting a 1280x720 clip at the default settings; work/ against results/")
    work = workdir("p12", size=common.DA3_SIZE)
    shutil.copy2(common.clip("p12_720p", width=1280, height=720, frames=frames, fps="24", audio=True),
                 work / "videos/clip.mp4")  # fmt: skip
    _snakemake(work, "--cores", "2", timeout=1800, no_slurm=True)
    kept, result = _du(work / "work"), _du(work / "results")
    by_stage = {p.name: _du(p) for p in sorted((work / "work/clip").iterdir()) if p.is_dir()}
    encoded_left = sum(p.stat().st_size for p in (work / "work/clip").rglob("render/**/*.mkv"))
    return {
        "P12": common.figure(
            kept / result,
            "<= 2",  # a second copy of the result alone would add 1.0
            baseline={"what": "results/", "bytes": result},
            measured={
                "what": "work/ after the run",
                "bytes": kept,
                "by_folder": by_stage,
                "encoded_video_left_bytes": encoded_left,
            },
            no_second_copy=encoded_left == 0,
            setup=f"1280x720 clip, {frames} frames, DA3 smoke at {common.DA3_SIZE} (random weights: depth that "
            "compresses like noise, so more bytes than real depth); default settings",
        )
    }


# --- P13 ----------------------------------------------------------------------------------------------------
# The stage in a child process, counting the frames it finishes into a file (one line per batch or frame).
CHILD = textwrap.dedent(
    """
    import json, sys
    stage, args, counter = sys.argv[1], json.loads(sys.argv[2]), open(sys.argv[3], "a")
    def count(n):
        counter.write(f"{n}\\n"); counter.flush()
    if stage == "depth":
        from stereo3d.models.da3.runtime import DepthModel
        depth_of = DepthModel.depth_of
        def counting(self, results, placement):
            out = depth_of(self, results, placement); count(len(out)); return out
        DepthModel.depth_of = counting
        from stereo3d.io.probe import probe_video
        from stereo3d.stages.depth import estimate_depth
        from stereo3d.runtime.sessions import SessionOptions
        estimate_depth(args["video"], probe_video(args["video"]), args["model"], args["out"], batch=4,
                       options=SessionOptions(providers=("cpu",)))
    else:
        from stereo3d.io.encode import VideoEncoder
        write = VideoEncoder.write
        def counting(self, frame, owned=False):
            write(self, frame, owned=owned); count(1)
        VideoEncoder.write = counting
        from stereo3d.io.probe import probe_video
        from stereo3d.stages.render import EncodeSettings, RenderSettings, render_video
        render_video(args["video"], probe_video(args["video"]), args["near"], args["out"],
                     RenderSettings(encode=EncodeSettings(preset="ultrafast")))
    """
)


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    files = sorted(path.rglob("*")) if path.is_dir() else [path]
    for file in files:
        if file.is_file():
            h.update(file.relative_to(path).as_posix().encode() if path.is_dir() else b"")
            h.update(file.read_bytes())
    return h.hexdigest()


def _child(stage: str, args: dict, counter: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", CHILD, stage, json.dumps(args), str(counter)],
                            cwd=common.ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)  # fmt: skip


def _counted(counter: Path) -> int:
    return sum(int(line) for line in counter.read_text().split()) if counter.exists() else 0


def _kept(stage: str, out: Path, frames: int) -> int:
    """Frames of finished work on disk after a kill: all of them where the kill came after the result was complete
    (it appears under its name only then), else the resume state's."""
    if out.exists():
        return frames
    if stage == "depth":
        meta = json.loads((out.with_name(f".{out.name}.partial") / "zarr.json").read_text())
        return int(meta["attributes"]["written"])
    from stereo3d.stages.render import EncodeSettings

    pieces = out.with_name(f".{out.name}.partial")
    done = [p for p in pieces.glob("*.mkv") if ".partial-" not in p.name]
    return len(done) * EncodeSettings().piece_frames


def p13(frames: int = 600, kills: int = 3, seed: int = 13) -> dict:
    import numpy as np

    from stereo3d.io.mapstore import write_maps

    common.ensure_models(da3=[("uint8", common.SMALL_DA3_SIZE)])
    work = common.scratch("p13")
    video = common.clip("p13", width=160, height=90, frames=frames, fps="24")
    model = common.da3_model_path("uint8", common.SMALL_DA3_SIZE)
    write_maps(work / "near.maps", (np.full((90, 160), 0.5, np.float32) for _ in range(frames)), "linear",
               attrs={"start": 0})  # fmt: skip
    stages = {
        "depth": {"video": str(video), "model": str(model)},
        "render": {"video": str(video), "near": str(work / "near.maps")},
    }
    rng = random.Random(seed)
    lost: dict[str, list[int]] = {}
    equal: dict[str, bool] = {}
    for stage, args in stages.items():
        common.say(f"P13: the {stage} stage of a {frames}-frame clip, killed {kills} times at random moments")
        suffix = ".maps" if stage == "depth" else ".mkv"
        reference = work / f"{stage}-whole{suffix}"
        started = time.perf_counter()
        whole = _child(stage, {**args, "out": str(reference)}, work / f"{stage}-whole.count")
        if whole.wait() != 0:
            raise RuntimeError(f"{stage}: {whole.stderr.read()[-2000:]}")
        duration = time.perf_counter() - started
        out = work / f"{stage}{suffix}"
        lost[stage], kept = [], 0
        for attempt in range(kills):
            counter = work / f"{stage}-{attempt}.count"
            child = _child(stage, {**args, "out": str(out)}, counter)
            while _counted(counter) == 0 and child.poll() is None:
                time.sleep(0.01)  # the attempt is producing: kill it at a random moment of its work
            time.sleep(rng.uniform(0.05, 0.2) * duration)
            if child.poll() is not None:
                raise RuntimeError(f"{stage}: the attempt ended before its kill; use a longer clip")
            child.send_signal(signal.SIGKILL)
            child.wait()
            finished = kept + _counted(counter)  # frames this attempt had finished (it began after the kept ones)
            kept = _kept(stage, out, frames)
            lost[stage].append(finished - kept)
        child = _child(stage, {**args, "out": str(out)}, work / f"{stage}-last.count")
        if child.wait() != 0:
            raise RuntimeError(f"{stage}: {child.stderr.read()[-2000:]}")
        equal[stage] = _digest(out) == _digest(reference)
    worst = max(max(v) for v in lost.values())
    return {
        "P13": common.figure(
            worst,
            "<= 64",
            baseline={"what": "goal: at most one chunk (64 frames)"},
            measured={
                "what": "frames of finished work recomputed after a kill",
                "frames_lost": lost,
                "resumed_equals_uninterrupted": equal,
            },
            setup=f"{frames}-frame 160x90 clip; depth: DA3 smoke at {common.SMALL_DA3_SIZE}, batch 4, chunks of 32 "
            "frames; render: full SBS, x264 ultrafast, pieces of 64; unit: frames",
        )
    }


# --- P14 ----------------------------------------------------------------------------------------------------
STAGES = ("depth", "near_maps", "render")


def p14(short: int = 48, long: int = 240) -> dict:
    common.say(f"P14: fixed cost per stage job, from jobs on clips of {short} and {long} frames")
    work = workdir("p14", report={"qc": False})
    for frames in (short, long):
        shutil.copy2(common.clip(f"p14_{frames}", width=320, height=180, frames=frames, fps="24"),
                     work / "videos" / f"clip{frames}.mp4")  # fmt: skip
    _snakemake(work, "--cores", "2", timeout=1800, no_slurm=True)
    shares, fixed, per_frame = {}, {}, {}
    for stage in STAGES:
        seconds = {}
        for frames in (short, long):
            (tsv,) = (work / "benchmarks" / stage / f"clip{frames}").rglob("*.tsv")
            header, row = tsv.read_text().splitlines()[:2]
            seconds[frames] = float(row.split("\t")[header.split("\t").index("s")])
        per_frame[stage] = (seconds[long] - seconds[short]) / (long - short)
        fixed[stage] = max(seconds[short] - short * per_frame[stage], 0.0)
        film = fixed[stage] + FILM_FRAMES * per_frame[stage]
        segment = fixed[stage] + 1024 * per_frame[stage]
        shares[stage] = {"film_job": round(fixed[stage] / film, 5), "segment_of_1024": round(fixed[stage] / segment, 4)}
    worst = max(s["film_job"] for s in shares.values())
    return {
        "P14": common.figure(
            worst,
            "<= 0.05",
            baseline={"what": "a stage job of a 2-hour film (one job per stage and film, the default)"},
            measured={
                "what": "fixed cost / job wall time",
                "shares": shares,
                "fixed_s": {k: round(v, 2) for k, v in fixed.items()},
                "per_frame_ms": {k: round(1000 * v, 2) for k, v in per_frame.items()},
            },
            setup=f"320x180 clips of {short} and {long} frames, DA3 smoke at {common.SMALL_DA3_SIZE}, EMA, full SBS, "
            "x264 medium; Snakemake's benchmark of each job (its script's process, start to end)",
        )
    }


def main() -> None:
    from bench.figures import FIGURES

    here = {figure.name: figure for figure in FIGURES if figure.module == "library"}
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=",".join(here))
    args = parser.parse_args()
    results = {}
    for name in args.only.split(","):
        results.update(here[name.strip().upper()].measure({}))
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
