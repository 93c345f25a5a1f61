"""Stereo rendering and encoding of one video (rule render)."""

import json

from stereo3d.convert import EncodeSettings, render_video
from stereo3d.render import StereoSettings
from stereo3d.scripting import run_guarded, setup_logging


def main():
    s = snakemake.params.render
    render_video(
        video=snakemake.input.source,
        probe=json.loads(open(snakemake.input.probe).read()),
        near=snakemake.input.near,
        out=snakemake.output.video,
        stereo=StereoSettings(s["divergence_pct"], s["convergence"], s["edge_dilate_px"]),
        layout=s["layout"],
        encode=EncodeSettings(s["codec"], s["crf"], s["preset"], s["pix_fmt"]),
    )


setup_logging(snakemake.log[0])
run_guarded(main)
