"""Probe one source video to JSON (rule probe)."""

from stereo3d.stages.probe import write_probe
from stereo3d.workflow.scripting import run_guarded, setup_logging


def main():
    write_probe(snakemake.input.source, snakemake.output.json)


setup_logging(snakemake.log[0])
run_guarded(main)
