"""`snakemake prune` drops the intermediates of settings no longer configured, keeps what the current ones read
(and what a killed job of theirs can resume from), and leaves videos that are not in the library alone."""

from __future__ import annotations

import re

from harness import exported_workdir, planned_jobs, snakemake, write_config

from stereo3d.demo.samples import make_clip


def folders(workdir, stage):
    return sorted(p.relative_to(workdir / "work/clip" / stage).as_posix()
                  for p in (workdir / "work/clip" / stage).glob("*/*.zarr"))  # fmt: skip


def test_prune_keeps_the_current_settings_and_drops_the_rest(tmp_path_factory):
    workdir = exported_workdir(tmp_path_factory, "prune")
    make_clip(workdir / "videos/clip.mp4", width=64, height=36, frames=20, fps="10")
    write_config(workdir, report={"qc": False})
    snakemake(workdir)
    first_depth = folders(workdir, "depth")
    write_config(workdir, report={"qc": False}, da3={"fit": "resize"}, segments={"frames": 16})
    snakemake(workdir)
    current_depth = sorted(set(folders(workdir, "depth")) - set(first_depth))
    assert len(first_depth) == 1 and len(current_depth) == 2  # two depth keys now; the second in segments
    # A library converted before the keys hashed the settings' dotted names has its near maps and renders under
    # other keys, and Snakemake's record of its result names them (README): one run recomputes the near maps and
    # the render (no depth), the next has nothing to do.
    (current_near,) = (workdir / "work/clip/near" / current_depth[0].split("/")[0]).iterdir()
    current_near.rename(current_near.with_name("ema-00000000"))
    as_an_old_version_made_it(workdir, current_near.name, "ema-00000000")
    assert planned_jobs(workdir) == {"near_plan": 1, "near_maps": 2, "convergence_plan": 1, "render": 2, "join": 1}
    snakemake(workdir)
    assert planned_jobs(workdir) == {}
    result = (workdir / "results/clip/clip_LRF_Full_SBS.mp4").read_bytes()

    # Something a killed job of the current settings left to resume from, and a video no longer in the library.
    current_store = workdir / "work/clip/depth" / current_depth[0]
    resumable = current_store.with_name(f".{current_store.name}.partial")
    resumable.mkdir()
    (workdir / "work/gone").mkdir()
    (workdir / "work/gone/probe.json").write_text("{}")

    run = snakemake(workdir, "prune")
    assert folders(workdir, "depth") == current_depth
    assert len(list((workdir / "work/clip/near").glob("*/*"))) == 1  # one near key folder left, the old ones gone
    assert not list((workdir / "work/clip/near").glob("*/ema-00000000"))
    assert resumable.is_dir() and (workdir / "work/gone/probe.json").is_file()
    assert re.search(r"pruned \d+ intermediates of settings no longer configured", run.stderr)
    assert "left alone: 1 work folders of videos not in the library" in run.stderr
    assert (workdir / "work/clip/probe.json").is_file()

    # Nothing the current settings read was touched: nothing to do, and the result is the same.
    dry = snakemake(workdir, "-n").stdout
    assert "Nothing to be done" in dry or "nothing to be done" in dry.lower()
    assert (workdir / "results/clip/clip_LRF_Full_SBS.mp4").read_bytes() == result


def as_an_old_version_made_it(workdir, key: str, old_key: str) -> None:
    """Snakemake's records of the files made from the near maps under ``key`` name them under ``old_key``."""
    import base64
    import json

    for record in (workdir / ".snakemake/metadata").iterdir():
        made = json.loads(record.read_text())
        if any(f"/{key}/" in path for path in made.get("input", [])):
            made["input"] = [path.replace(f"/{key}/", f"/{old_key}/") for path in made["input"]]
            record.write_text(json.dumps(made))
            assert base64.b64decode(record.name, altchars=b"+_").decode().startswith(("results/", "work/"))


def test_a_video_whose_keys_need_its_probe_is_left_alone_until_probed(tmp_path):
    """Under fit aspect the depth key names the video's export, known from its probe: with no probe on disk,
    prune cannot tell current from old, so nothing of that video goes."""
    from stereo3d.workflow.paths import Paths
    from stereo3d.workflow.prune import prune, summary_lines

    old = tmp_path / "work/clip/depth/da3_small_140x84_u8_letterbox/00000000-00000020.zarr"
    old.mkdir(parents=True)
    paths = Paths({"weights": "w", "models": "m", "work": str(tmp_path / "work"), "results": "r", "logs": "l",
                   "benchmarks": "b"})  # fmt: skip
    pruned = prune(paths, {"clip": None}, 0)
    assert old.is_dir() and pruned.removed == [] and pruned.unprobed == ["clip"]
    assert any("not probed yet" in line and "clip" in line for line in summary_lines(pruned))
