"""Stereo rendering and encoding of one segment (rule render)."""

from stereo3d.stages.probe import load_probe
from stereo3d.stages.render import RenderSettings, render_video
from stereo3d.workflow.scripting import bad_source_record, render_job, run_guarded, setup_logging, source_of


def main():
    job = render_job(snakemake)
    with job["renderer"]:
        render_video(
            video=source_of(snakemake),
            probe=load_probe(snakemake.input.probe, snakemake.input.frames),
            near=snakemake.input.near,
            out=snakemake.output.video,
            settings=RenderSettings.from_params(snakemake.params.render),
            window_near=list(snakemake.input.window_near),
            convergence_plan=next(iter(snakemake.input.convergence_plan), None),
            subtitle_plan=next(iter(snakemake.input.subtitle_plan), None),
            **job,
        )


setup_logging(snakemake.log[0])
run_guarded(main, bad_source_record(snakemake))
