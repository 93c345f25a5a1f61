"""The cues of the subtitle track burnt in, drawn and placed in depth (rule subtitle_plan)."""

from stereo3d.stages.probe import load_probe
from stereo3d.stages.render import RenderSettings
from stereo3d.stages.subtitle_plan import plan_subtitles
from stereo3d.workflow.scripting import bad_source_record, render_job_picture, run_guarded, setup_logging, source_of


def main():
    plan_subtitles(
        video=source_of(snakemake),
        probe=load_probe(snakemake.input.probe, snakemake.input.frames),
        near=list(snakemake.input.near),
        out=snakemake.output.plan,
        settings=RenderSettings.from_params(snakemake.params.render),
        convergence_plan=next(iter(snakemake.input.convergence_plan), None),
        picture=render_job_picture(snakemake),
    )


setup_logging(snakemake.log[0])
run_guarded(main, bad_source_record(snakemake))
