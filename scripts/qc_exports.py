"""The export validation table for the report (rule qc_exports)."""

from stereo3d.qc.tables import validation_table
from stereo3d.workflow.scripting import run_guarded, setup_logging


def main():
    validation_table(paths=list(snakemake.input.validations), out=snakemake.output.table)


setup_logging(snakemake.log[0])
run_guarded(main)
