"""The finished file: stereo video plus every stream of the source (rule mux)."""

import json
import logging

from stereo3d.scripting import run_guarded, setup_logging
from stereo3d.video import mux_with_source


def main():
    probe = json.loads(open(snakemake.input.probe).read())
    mux_with_source(snakemake.input.video, snakemake.input.source, snakemake.output[0], probe)
    v = probe["video"]
    logging.getLogger("stereo3d").info(
        "done: %s (%d frames at %.3f fps) -> %s",
        snakemake.input.source, v["frame_count"], v["fps"], snakemake.output[0],
    )


setup_logging(snakemake.log[0])
run_guarded(main)
