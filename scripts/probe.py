"""Probe one source video to JSON (rule probe)."""

import json

from stereo3d.atomic import atomic_output
from stereo3d.probe import probe_video
from stereo3d.scripting import run_guarded, setup_logging


def main():
    info = probe_video(snakemake.input.source)
    with atomic_output(snakemake.output.json) as tmp:
        tmp.write_text(json.dumps(info, indent=1) + "\n")


setup_logging(snakemake.log[0])
run_guarded(main)
