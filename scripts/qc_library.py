"""Library tables for the report: per-video QC numbers and the rules' benchmarks (rule qc_library)."""

from stereo3d.qc.tables import benchmark_table, library_table
from stereo3d.workflow.scripting import run_guarded, setup_logging


def main():
    library_table(
        stats_paths=list(snakemake.input.stats), out=snakemake.output.videos, failures=dict(snakemake.params.failures)
    )
    benchmark_table(
        bench_dir=snakemake.params.benchmarks,
        out=snakemake.output.benchmarks,
        csv_out=snakemake.output.benchmarks_csv,
    )


setup_logging(snakemake.log[0])
run_guarded(main)
