"""What tests/test_windows.py runs in a Python whose POSIX-only modules are missing to the package (sitecustomize
beside this file): import every module of ``stereo3d``, then plan, convert and resume a one-video library through
the package's stages, on a machine that refuses symbolic links (as Windows does to a user without Developer Mode).

    python tests/missing/windows_run.py ROOT MODEL      (ROOT/videos holds the library; MODEL: a DA3-contract graph)

Prints one JSON object: the modules that failed to import, and what the conversion made.
"""

from __future__ import annotations

import errno
import importlib
import json
import logging
import os
import pkgutil
import sys
from pathlib import Path


def import_everything() -> dict:
    import stereo3d

    names = [m.name for m in pkgutil.walk_packages(stereo3d.__path__, "stereo3d.")]
    failed = {}
    for name in names:
        try:
            importlib.import_module(name)
        except Exception as exc:  # every failure, named, not the first only
            failed[name] = f"{type(exc).__name__}: {exc}"
    return {"modules": len(names), "failed": failed}


def refuse_symlinks(src, dst, *args, **kwargs):
    raise OSError(errno.EPERM, "A required privilege is not held by the client")


def convert(root: Path, model: Path, lines: list[str]) -> dict:
    from stereo3d.io.probe import probe_video
    from stereo3d.stabilisers import NearSettings
    from stereo3d.stages.depth import estimate_depth, estimate_first_frames
    from stereo3d.stages.join import join_segments
    from stereo3d.stages.near_maps import make_near_maps
    from stereo3d.stages.near_plan import make_near_plan
    from stereo3d.stages.render import EncodeSettings, RenderSettings, render_video
    from stereo3d.workflow.library import discover
    from stereo3d.workflow.sources import Sources

    os.symlink = refuse_symlinks
    videos = discover(root / "videos", [".mp4"])
    ((video, path),) = videos.items()
    work = root / "work" / video
    source = Sources(root / "work").link(video, path)
    probe = probe_video(source)
    depth = work / "depth.zarr"
    estimate_first_frames(source, probe, model, depth, 32, batch=4)  # a job stopped after one chunk...
    estimate_depth(source, probe, model, depth, batch=4)  # ...and continued
    settings = NearSettings(method="ema", options={"stabilise.ema_alpha": 0.5, "stabilise.cut_threshold": 0.25})
    make_near_plan([depth], work / "plan.npz", settings)
    make_near_maps(source, probe, depth, work / "near.zarr", settings, plan=work / "plan.npz")
    render_video(
        source,
        probe,
        work / "near.zarr",
        work / "render.mkv",
        RenderSettings(encode=EncodeSettings(preset="ultrafast")),
    )
    result = root / "results" / video / f"{video}_LRF_Full_SBS.mp4"
    result.parent.mkdir(parents=True)
    join_segments([work / "render.mkv"], [0], source, result, probe)
    out = probe_video(result)["video"]
    return {"video": video, "source": str(source), "source_is_symlink": source.is_symlink(),
            "source_is_the_file": os.path.samefile(source, path), "result": str(result),
            "frames": out["frame_count"], "size": [out["width"], out["height"]],
            "resumed": any("resuming depth at frame 32" in line for line in lines)}  # fmt: skip


class _Lines(logging.Handler):
    def __init__(self, lines: list[str]):
        super().__init__(logging.INFO)
        self.lines = lines

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def main() -> None:
    root, model = Path(sys.argv[1]), Path(sys.argv[2])
    lines: list[str] = []
    logging.basicConfig(level=logging.WARNING)
    logging.getLogger("stereo3d").setLevel(logging.INFO)
    logging.getLogger("stereo3d").addHandler(_Lines(lines))
    try:  # the hook is armed: the package's own import of a POSIX-only module fails
        exec("import fcntl", {"__name__": "stereo3d.example"})
        armed = False
    except ModuleNotFoundError:
        armed = True
    report = {"armed": armed, "imports": import_everything()}
    report["conversion"] = convert(root, model, lines)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
