"""A text subtitle track beside the result, placed in both eyes (rule subtitle_sidecar)."""

from stereo3d.stages.probe import load_probe
from stereo3d.stages.render import RenderSettings
from stereo3d.stages.subtitle_plan import write_sidecar
from stereo3d.workflow.keys import parse_depth_key
from stereo3d.workflow.scripting import bad_source_record, run_guarded, setup_logging, source_of


def main():
    params = snakemake.params.sidecar
    write_sidecar(
        video=source_of(snakemake),
        probe=load_probe(snakemake.input.probe, snakemake.input.frames),
        stream=params["stream"],
        near=list(snakemake.input.near),
        out=snakemake.output[0],
        settings=RenderSettings.from_params(params["render"]),
        margin_pct=params["margin_pct"],
        convergence_plan=next(iter(snakemake.input.convergence_plan), None),
        picture=parse_depth_key(params["dkey"])["picture"],
    )


setup_logging(snakemake.log[0])
run_guarded(main, bad_source_record(snakemake))
