"""Quality-control figures of one video for the report (rule qc_video)."""

from stereo3d.qc.report import video_report
from stereo3d.stabilisers import NearSettings
from stereo3d.stages.probe import load_probe
from stereo3d.stereo.warp import StereoSettings
from stereo3d.workflow.scripting import bad_source_record, run_guarded, setup_logging, source_of


def main():
    video_report(
        source=source_of(snakemake),
        probe=load_probe(snakemake.input.probe, snakemake.input.frames),
        depth=list(snakemake.input.depth),
        near=list(snakemake.input.near),
        stereo=StereoSettings(**snakemake.params.render),
        near_settings=NearSettings.from_params(snakemake.params.near),
        comfort_limit_pct=snakemake.params.comfort_limit_pct,
        out_contact_sheet=snakemake.output.contact_sheet,
        out_flicker=snakemake.output.flicker,
        out_parallax=snakemake.output.parallax,
        out_convergence=snakemake.output.convergence,
        convergence_plan=next(iter(snakemake.input.convergence_plan), None),
        out_stats=snakemake.output.stats,
        rows=snakemake.params.rows,
        tile_width=snakemake.params.tile_width,
    )


setup_logging(snakemake.log[0])
run_guarded(main, bad_source_record(snakemake))
