"""Normalisation ranges of a whole video, smoothed over time (rule ema_plan)."""

from stereo3d.scripting import run_guarded, setup_logging
from stereo3d.stabilise import make_ema_plan


def main():
    near = snakemake.params.near
    make_ema_plan(list(snakemake.input.depth), snakemake.output.plan, low_pct=near["low_pct"],
                  high_pct=near["high_pct"], ema_alpha=near["ema_alpha"], cut_threshold=near["cut_threshold"])


setup_logging(snakemake.log[0])
run_guarded(main)
