"""Raw DA3 depth of one segment (rule depth)."""

from stereo3d.stages.depth import DepthSettings, estimate_depth
from stereo3d.stages.probe import load_probe
from stereo3d.workflow.scripting import bad_source_record, depth_job, run_guarded, setup_logging, source_of


def main():
    settings = DepthSettings.from_params(snakemake.params.depth)
    start, end = (int(frame) for frame in snakemake.wildcards.seg.split("-"))
    estimate_depth(
        video=source_of(snakemake),
        probe=load_probe(snakemake.input.probe, snakemake.input.frames),
        model=snakemake.input.model,
        out=snakemake.output.maps,
        start=start,
        count=end - start,
        settings=settings,
        **depth_job(snakemake, settings),
    )


setup_logging(snakemake.log[0])
run_guarded(main, bad_source_record(snakemake))
