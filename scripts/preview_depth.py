"""Raw DA3 depth of one preview clip, shared with the full run's depth job where the clip starts its segment
(rule preview_depth)."""

from stereo3d.stages.preview import preview_depth
from stereo3d.stages.probe import load_probe
from stereo3d.workflow.keys import parse_depth_key
from stereo3d.workflow.preview import Clip
from stereo3d.workflow.scripting import bad_source_record, run_guarded, session_options, setup_logging, source_of


def main():
    start, end = (int(frame) for frame in snakemake.wildcards.seg.split("-"))
    segment = snakemake.params.segment  # [start, count] of the full run's segment the clip starts, or []
    key = parse_depth_key(snakemake.wildcards.dkey)
    # Batch must be the full run's (it is part of its depth job's identity); like runtime, read from config.
    batch = snakemake.config["da3"]["batch"]
    preview_depth(
        video=source_of(snakemake),
        probe=load_probe(snakemake.input.probe, snakemake.input.frames),
        model=snakemake.input.model,
        clip=Clip(start, end - start, tuple(segment) if segment else None),
        out=snakemake.output.maps,
        lead_out=snakemake.output.lead,
        lead=snakemake.params.lead,
        full_depth=snakemake.params.full_depth or None,
        placement=key["placement"],
        batch=batch,
        picture=key["picture"],  # the picture inside baked-in bars, as the full run's depth job has it
        options=session_options(
            snakemake.config["runtime"],
            gpu_mem_limit=False,
            models_dir=snakemake.config["paths"]["models"],
            precision=key["precision"],
            max_batch=batch,
        ),
    )


setup_logging(snakemake.log[0])
run_guarded(main, bad_source_record(snakemake))
