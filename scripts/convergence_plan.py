"""The screen plane of every frame of a video, planned over its near maps (rule convergence_plan)."""

import json
from pathlib import Path

from stereo3d.stages.convergence_plan import make_convergence_plan
from stereo3d.workflow.scripting import run_guarded, setup_logging


def main():
    render = snakemake.params.render
    make_convergence_plan(
        near_segments=list(snakemake.input.near),
        depth_segments=list(snakemake.input.depth),
        out=snakemake.output.plan,
        divergence_pct=render["render.divergence_pct"],
        front_limit_pct=render["render.front_limit_pct"],
        fps=float(json.loads(Path(snakemake.input.probe).read_text())["video"]["fps"]),
    )


setup_logging(snakemake.log[0])
run_guarded(main)
