"""Near maps of one preview clip, stabilised over the clip (rule preview_near_maps)."""

from stereo3d.stabilisers import NearSettings
from stereo3d.stages.preview import preview_near_maps
from stereo3d.stages.probe import load_probe
from stereo3d.workflow.scripting import bad_source_record, near_job, run_guarded, setup_logging, source_of


def main():
    preview_near_maps(
        video=source_of(snakemake),
        probe=load_probe(snakemake.input.probe, snakemake.input.frames),
        depth=snakemake.input.depth,
        lead=snakemake.input.lead,
        out=snakemake.output.maps,
        settings=NearSettings.from_params(snakemake.params.near),
        **near_job(snakemake),
    )


setup_logging(snakemake.log[0])
run_guarded(main, bad_source_record(snakemake))
