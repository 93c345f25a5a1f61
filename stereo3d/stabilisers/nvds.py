"""``nvds``: the NVDS stabiliser network on RGBD frames (RGB at the tier + the per-frame near map).

Its output is already a stabilised near map and is stored as it is. The network's window is causal: a segment
after the first (or a resumed job) primes it with the raw inputs of the frames before it (their depth, their
pictures decoded again), so segments and resumed jobs agree with an unbroken run.
"""

from __future__ import annotations

import logging
from contextlib import closing

from stereo3d.io.decode import FrameReader
from stereo3d.io.pipes import read_ahead
from stereo3d.models.names import nvds_onnx_names
from stereo3d.models.nvds.runtime import WINDOW_FRAMES, open_stabiliser
from stereo3d.stabilisers.registry import NearJob, Stabiliser
from stereo3d.stabilisers.settings import NearSettings
from stereo3d.stereo.near import near_from_depth, sky_to_far

log = logging.getLogger(__name__)

HISTORY = WINDOW_FRAMES - 1  # frames before the target in the window
READ_AHEAD = 4  # frames prepared ahead of the network (a few: decoding's pace varies, a key frame costs more)


def models(settings: NearSettings) -> list[str]:
    names = nvds_onnx_names(settings.option("stabilise.nvds_tier"), settings.option("stabilise.nvds_graphs"))
    return [f"NVDS/{name}" for name in names]


def run(job: NearJob) -> None:
    name = job.settings.option("stabilise.nvds_tier")
    tier = tuple(int(v) for v in name.split("x"))
    low, high = job.settings.low_pct, job.settings.high_pct
    graphs = job.settings.option("stabilise.nvds_graphs")
    stabiliser = open_stabiliser(job.models_dir, *tier, job.options, graphs=graphs)
    log.info("NVDS %s: %s graphs", name, stabiliser.mode)
    history = min(HISTORY, job.start)
    if history and job.earlier is None:
        raise ValueError("an NVDS segment after the first needs the depth before it")
    video = job.probe["video"]
    shown = (video["display_width"], video["display_height"]) if job.picture is None else job.picture.size
    size = fit_inside(shown, tier)
    count = job.depths.frames + history
    with FrameReader(job.video, job.probe, start=job.start - history, count=count, size=size,
                     crop=job.picture) as frames:  # fmt: skip
        if history:
            # Causal: the window sees the raw inputs of the frames before the segment, never their output.
            stabiliser.prime((next(frames), near_from_depth(raw, low, high)) for raw in job.earlier(history))
        # The next frames' inputs (decoded, their depth read and mapped, prepared for the network) are made while
        # the network runs: on a GPU the network is fast enough that this host work, done in turn, cost a third of
        # the stage's speed (bench/nvds_stage.py).
        inputs = ((raw, stabiliser.prepare(rgb, near_from_depth(raw, low, high)))
                  for raw, rgb in zip(job.depths, frames, strict=True))  # fmt: skip
        with closing(read_ahead(inputs, READ_AHEAD)) as ready:
            for raw, prepared in ready:
                # The network sees sky at the far plane in its input; its output is put back there exactly.
                job.write(sky_to_far(stabiliser.run(prepared), raw))


def fit_inside(shown: tuple[int, int], tier: tuple[int, int]) -> tuple[int, int]:
    """The size that fits a frame (or the picture in its bars) of ``shown`` size into the NVDS tier keeping the
    aspect (decoded at this size directly)."""
    width, height = shown
    scale = min(tier[0] / width, tier[1] / height)
    return max(2, round(width * scale) // 2 * 2), max(2, round(height * scale) // 2 * 2)


STABILISER = Stabiliser(
    name="nvds",
    summary="the NVDS stabiliser network (needs NVDS weights; a GPU is strongly advised)",
    run=run,
    keys=("stabilise.nvds_tier", "stabilise.nvds_graphs", "export.nvds_architecture"),
    history=HISTORY,
    models=models,
)
