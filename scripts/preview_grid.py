"""The settings grid of one video: anaglyphs of a still at each divergence x convergence (rule preview_grid)."""

from stereo3d.stages.preview import preview_grid
from stereo3d.stages.probe import load_probe
from stereo3d.stereo.warp import StereoSettings
from stereo3d.workflow.keys import parse_depth_key
from stereo3d.workflow.scripting import bad_source_record, run_guarded, setup_logging, source_of


def main():
    grid = snakemake.params.grid
    preview_grid(
        video=source_of(snakemake),
        probe=load_probe(snakemake.input.probe, snakemake.input.frames),
        near=snakemake.input.near,
        frame=snakemake.params.frame,
        out=snakemake.output.grid,
        stereo=StereoSettings(**snakemake.params.stereo),
        divergences=grid["divergence_pct"],
        convergences=grid["convergence"],
        tile_width=snakemake.params.tile_width,
        picture=parse_depth_key(snakemake.wildcards.dkey)["picture"],
    )


setup_logging(snakemake.log[0])
run_guarded(main, bad_source_record(snakemake))
