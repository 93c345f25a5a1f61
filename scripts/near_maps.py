"""Near maps from raw depth, stabilised over time (rule near_maps)."""

import json
from pathlib import Path

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
        plan=snakemake.input.plan or None,
        previous_depth=snakemake.input.previous_depth or None,
        nvds_models=Path(snakemake.input.nvds[0]).parent if snakemake.input.nvds else None,
        nvds_tier=tuple(int(v) for v in near.get("nvds_tier", "512x288").split("x")),
        options=session_options(snakemake.config["runtime"]),
    )


setup_logging(snakemake.log[0])
run_guarded(main)
