"""Seeded random weights in the real file layout, for the demo (rule smoke_da3_weights)."""

import logging

from stereo3d.demo.smoke import write_smoke_weights
from stereo3d.models.names import da3_variant_of_folder
from stereo3d.workflow.scripting import run_guarded, setup_logging


def main():
    variant = da3_variant_of_folder(snakemake.wildcards.folder)
    write_smoke_weights(snakemake.output[0], variant, seed=0)
    logging.getLogger("stereo3d").warning(
        "SMOKE weights written to %s: random, so the demo's depth is meaningless. "
        "Place the real DA3 %s model.safetensors there for real 3D.",
        snakemake.output[0],
        variant,
    )


setup_logging(snakemake.log[0])
run_guarded(main)
