"""The video's preview clips on one page of the report (rule preview_page)."""

from stereo3d.qc.preview import clips_page
from stereo3d.workflow.scripting import run_guarded, setup_logging


def main():
    clips_page(
        clips=list(snakemake.input.clips),
        labels=list(snakemake.params.labels),
        title=f"{snakemake.wildcards.video}: preview clips",
        out=snakemake.output.page,
        shown_as=list(snakemake.input.clips),  # the full-quality files, by their paths in the workflow's folder
    )


setup_logging(snakemake.log[0])
run_guarded(main)
