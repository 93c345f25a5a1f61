"""Drop intermediates of settings no longer configured (rule prune)."""

import logging
import sys

from stereo3d.workflow.paths import Paths
from stereo3d.workflow.prune import prune, summary_lines
from stereo3d.workflow.scripting import run_guarded, setup_logging


def main():
    pruned = prune(Paths(snakemake.config["paths"]), snakemake.params.videos, snakemake.params.segment_frames)
    for line in summary_lines(pruned):
        logging.getLogger("stereo3d").info("%s", line)
        print(line, file=sys.stderr)


setup_logging(snakemake.log[0])
run_guarded(main)
