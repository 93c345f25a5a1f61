"""Generate the demo's sample library (rule demo_library)."""

from pathlib import Path

from stereo3d.demo.samples import make_demo_library
from stereo3d.workflow.scripting import run_guarded, setup_logging


def main():
    make_demo_library(Path(snakemake.output[0]).parent)


setup_logging(snakemake.log[0])
run_guarded(main)
