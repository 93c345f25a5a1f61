"""Raw DA3 depth of one segment (rule depth)."""

from stereo3d.stages.depth import estimate_depth
from stereo3d.stages.probe import load_probe
from stereo3d.workflow.keys import parse_depth_key
from stereo3d.workflow.scripting import bad_source_record, run_guarded, session_options, setup_logging, source_of


def main():
    probe = load_probe(snakemake.input.probe, snakemake.input.frames)
    start, end = (int(frame) for frame in snakemake.wildcards.seg.split("-"))
    key = parse_depth_key(snakemake.wildcards.dkey)
    batch = snakemake.config["da3"]["batch"]
    estimate_depth(
        video=source_of(snakemake),
        probe=probe,
        model=snakemake.input.model,
        out=snakemake.output.maps,
        placement=key["placement"],
        # Batch and runtime are speed settings: read from config, not params, so they trigger no rerun. The
        # precision changes the numbers: it comes from the depth key, under which the maps are stored.
        batch=batch,
        options=session_options(
            snakemake.config["runtime"],
            gpu_mem_limit=False,
            models_dir=snakemake.config["paths"]["models"],
            precision=key["precision"],
            max_batch=batch,
        ),
        start=start,
        count=end - start,
        picture=key["picture"],
    )


setup_logging(snakemake.log[0])
run_guarded(main, bad_source_record(snakemake))
