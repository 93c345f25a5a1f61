"""A stabiliser's plan over a whole video, e.g. the EMA's smoothed ranges (rule near_plan)."""

from stereo3d.stabilisers import NearSettings
from stereo3d.stages.near_plan import make_near_plan
from stereo3d.workflow.scripting import run_guarded, setup_logging


def main():
    make_near_plan(list(snakemake.input.depth), snakemake.output.plan, NearSettings.from_params(snakemake.params.near))


setup_logging(snakemake.log[0])
run_guarded(main)
