"""Near maps of one preview clip, stabilised over the clip (rule preview_near_maps)."""

from pathlib import Path

from stereo3d.stages.preview import preview_near_maps
from stereo3d.stages.probe import load_probe
from stereo3d.workflow.keys import parse_depth_key
from stereo3d.workflow.scripting import bad_source_record, run_guarded, session_options, setup_logging, source_of


def main():
    key = parse_depth_key(snakemake.wildcards.dkey)
    preview_near_maps(
        video=source_of(snakemake),
        probe=load_probe(snakemake.input.probe, snakemake.input.frames),
        depth=snakemake.input.depth,
        lead=snakemake.input.lead,
        out=snakemake.output.maps,
        settings=snakemake.params.near,
        models_dir=Path(snakemake.input.models[0]).parent if snakemake.input.models else None,
        options=session_options(
            snakemake.config["runtime"],
            models_dir=snakemake.config["paths"]["models"],
            precision=key["precision"],
        ),
        picture=key["picture"],
    )


setup_logging(snakemake.log[0])
run_guarded(main, bad_source_record(snakemake))
