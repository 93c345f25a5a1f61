"""The finished file: encoded segments joined, plus every stream of the source (rule join)."""

import logging

from stereo3d.stages.join import join_segments
from stereo3d.stages.probe import load_probe
from stereo3d.workflow.scripting import bad_source_record, run_guarded, setup_logging, source_of


def main():
    probe = load_probe(snakemake.input.probe, snakemake.input.frames)
    join_segments(
        list(snakemake.input.segments),
        list(snakemake.params.starts),
        source_of(snakemake),
        snakemake.output[0],
        probe,
        keep_subtitles=snakemake.params.keep_subtitles,
    )
    v = probe["video"]
    logging.getLogger("stereo3d").info(
        "done: %s (%d frames at %.3f fps) -> %s",
        source_of(snakemake),
        v["frame_count"],
        v["fps"],
        snakemake.output[0],
    )


setup_logging(snakemake.log[0])
run_guarded(main, bad_source_record(snakemake))
