"""Near maps of one segment from its raw depth, stabilised over time (rule near_maps)."""

from stereo3d.stabilisers import NearSettings
from stereo3d.stages.near_maps import make_near_maps
from stereo3d.stages.probe import load_probe
from stereo3d.workflow.scripting import bad_source_record, near_job, run_guarded, setup_logging, source_of


def main():
    make_near_maps(
        video=source_of(snakemake),
        probe=load_probe(snakemake.input.probe, snakemake.input.frames),
        depth=snakemake.input.depth,
        out=snakemake.output.maps,
        settings=NearSettings.from_params(snakemake.params.near),
        plan=snakemake.input.plan or None,
        previous_depth=snakemake.input.previous_depth or None,
        **near_job(snakemake),
    )


setup_logging(snakemake.log[0])
run_guarded(main, bad_source_record(snakemake))
