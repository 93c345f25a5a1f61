"""Near maps from raw depth, stabilised over time (rule near_maps)."""

import json

from stereo3d.scripting import run_guarded, session_options, setup_logging
from stereo3d.stabilise import make_near_maps


def main():
    near = snakemake.params.near
    make_near_maps(
        video=snakemake.input.source,
        probe=json.loads(open(snakemake.input.probe).read()),
        depth=snakemake.input.depth,
        out=snakemake.output.maps,
        method=near["method"],
        low_pct=near["low_pct"],
        high_pct=near["high_pct"],
        ema_alpha=near["ema_alpha"],
        cut_threshold=near["cut_threshold"],
        options=session_options(snakemake.config["runtime"]),
    )


setup_logging(snakemake.log[0])
run_guarded(main)
