"""Raw DA3 depth of one preview clip, shared with the full run's depth job where the clip starts its segment
(rule preview_depth)."""

from stereo3d.stages.depth import DepthSettings
from stereo3d.stages.preview import preview_depth
from stereo3d.stages.probe import load_probe
from stereo3d.workflow.scripting import bad_source_record, depth_job, run_guarded, setup_logging, source_of


def main():
    settings = DepthSettings.from_params(snakemake.params.depth)
    start, end = (int(frame) for frame in snakemake.wildcards.seg.split("-"))
    segment = snakemake.params.segment  # [start, count] of the full run's segment the clip starts, or []
    preview_depth(
        video=source_of(snakemake),
        probe=load_probe(snakemake.input.probe, snakemake.input.frames),
        model=snakemake.input.model,
        clip=(start, end - start),
        segment=tuple(segment) if segment else None,
        out=snakemake.output.maps,
        lead_out=snakemake.output.lead,
        lead=snakemake.params.lead,
        full_depth=snakemake.params.full_depth or None,
        settings=settings,
        **depth_job(snakemake, settings),  # the full run's depth job's own arguments: the clip may be its first frames
    )


setup_logging(snakemake.log[0])
run_guarded(main, bad_source_record(snakemake))
