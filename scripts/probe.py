"""Probe one source video to JSON (rule probe)."""

from stereo3d.stages.probe import probe_failed, write_probe
from stereo3d.workflow.failures import record_failure
from stereo3d.workflow.scripting import bad_source_record, run_guarded, setup_logging, source_of


def main():
    info = write_probe(
        source_of(snakemake), snakemake.output.json, snakemake.output.frames, fingerprint=snakemake.params.fingerprint
    )
    reason = probe_failed(info)
    if reason is not None and snakemake.params.fingerprint:
        # This run's report lists it from the probe; later runs leave it out from the start, until it changes.
        failure = bad_source_record(snakemake)
        record_failure(failure.record, reason, snakemake.rule, snakemake.params.fingerprint)


setup_logging(snakemake.log[0])
run_guarded(main)
