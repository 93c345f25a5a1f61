"""One preview clip rendered at the current settings, as an MP4 for the report (rule preview_render)."""

from stereo3d.stages.preview import preview_clip
from stereo3d.stages.probe import load_probe
from stereo3d.stages.render import RenderSettings
from stereo3d.workflow.scripting import bad_source_record, render_job, run_guarded, setup_logging, source_of


def main():
    job = render_job(snakemake)
    with job["renderer"]:
        preview_clip(
            video=source_of(snakemake),
            probe=load_probe(snakemake.input.probe, snakemake.input.frames),
            near=snakemake.input.near,
            out=snakemake.output.clip,
            settings=RenderSettings.from_params(snakemake.params.render),
            **job,
        )


setup_logging(snakemake.log[0])
run_guarded(main, bad_source_record(snakemake))
