"""A seeded random NVDS checkpoint in the real file layout, for the demo (rule smoke_nvds_weights)."""

import logging

from stereo3d.demo.smoke import write_smoke_checkpoint
from stereo3d.models.nvds.model import NvdsConfig
from stereo3d.workflow.scripting import run_guarded, setup_logging


def main():
    config = NvdsConfig.tiny() if snakemake.params.tiny else NvdsConfig()
    write_smoke_checkpoint(snakemake.output[0], config=config, seed=0)
    logging.getLogger("stereo3d").warning(
        "SMOKE NVDS checkpoint written to %s: random, so its stabilised depth is meaningless. "
        "Place the real NVDS_Stabilizer.pth there for real stabilisation.",
        snakemake.output[0],
    )


setup_logging(snakemake.log[0])
run_guarded(main)
