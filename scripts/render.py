"""Stereo rendering and encoding of one video (rule render)."""

import json

from stereo3d.convert import EncodeSettings, render_video
from stereo3d.render import StereoSettings, set_render_threads
from stereo3d.scripting import run_guarded, setup_logging


def main():
    s = snakemake.params.render  # {**config["render"], **config["encode"]}
    set_render_threads(snakemake.threads)
    render_video(
        video=snakemake.input.source,
        probe=json.loads(open(snakemake.input.probe).read()),
        near=snakemake.input.near,
        out=snakemake.output.video,
        stereo=StereoSettings(
            divergence_pct=s["divergence_pct"],
            convergence=s["convergence"],
            edge_dilate_px=s["edge_dilate_px"],
            ipd_offset_pct=s["ipd_offset_pct"],
            border_taper_pct=s["border_taper_pct"],
            original_eye=s["original_eye"],
        ),
        layout=s["layout"],
        encode=EncodeSettings(
            codec=s["codec"],
            crf=s["crf"],
            preset=s["preset"],
            pix_fmt=s["pix_fmt"],
            deep_codec=s["deep_codec"],
            stereo_signal=s["stereo_signal"],
        ),
        fov_deg=s["vr180_fov_deg"],
        eye_px=s["vr180_eye_px"],
    )


setup_logging(snakemake.log[0])
run_guarded(main)
