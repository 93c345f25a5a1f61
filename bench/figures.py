"""The bench's figures, one row each: what it is, the function that measures it, the exports it needs.

``python -m bench`` reads this table and nothing else to choose, prepare, run and print its figures; the rows are
in the order of the table it prints and of ``bench/results.json``, and the figures are measured in that order.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field

from bench import common

# DA3 exports ((contract, size): a square side or (width, height)) and NVDS ones ((tier, modes)), as
# common.ensure_models takes them.
DA3Export = tuple[str, object]
NVDSExport = tuple[tuple[int, int], tuple[str, ...]]


@dataclass(frozen=True)
class Figure:
    name: str
    title: str
    module: str  # under bench/; imported only when the figure is measured (some import torch or numba)
    function: str  # returns {figure name: figure, ...} for every figure it measures, by-products under "_" keys
    da3: tuple[DA3Export, ...] = ()  # exported side by side before anything is timed
    nvds: tuple[NVDSExport, ...] = ()
    takes: tuple[str, ...] = ()  # by-products of an earlier figure's function, passed by keyword when there
    # The function's arguments in a smoke run (``--smoke``: every figure at a tiny size, to prove it runs; the sizes
    # of the exports and the cache are common's). The rows of one function share them.
    smoke: dict = field(default_factory=dict)

    def measure(self, by_products: dict) -> dict:
        function = getattr(importlib.import_module(f"bench.{self.module}"), self.function)
        arguments = {name: by_products[name] for name in self.takes if name in by_products}
        return function(**arguments, **(self.smoke if common.SMOKE else {}))


# The depth stage's exports at the usual side: the 16:9 tier (P1, P2), the square and the float one (P2's seed).
_DEPTH = (("uint8", common.DA3_SIZE), ("float", common.DA3_SIZE), ("uint8", common.da3_tier(common.DA3_SIZE)))
# Workflow runs at the small side: the square export and the 16:9 tier the demo-shaped clips pick.
_SMALL = (("uint8", common.SMALL_DA3_SIZE), ("uint8", common.da3_tier(common.SMALL_DA3_SIZE)))
_SQUARE = (("uint8", common.DA3_SIZE),)
_TIER = (("uint8", common.da3_tier(common.DA3_SIZE)),)
_SPLIT = ((common.NVDS_TIER, ("split",)),)
_BOTH = ((common.NVDS_TIER, ("monolith", "split")),)

# P15 exports its tiers itself: their export seconds are part of its record. P7 also measures P1/P2's (smoke)
# depth store when they run before it.
# fmt: off
FIGURES = (
    Figure("P1", "depth stage fps / bare session.run fps", "depth", "run", da3=_DEPTH,
           smoke={"frames": 4, "repeats": 1, "batch": 2}),
    Figure("P2", "depth stage fps / seed per-frame loop fps", "depth", "run", da3=_DEPTH,
           smoke={"frames": 4, "repeats": 1, "batch": 2}),
    Figure("P3", "NVDS split fps / monolith fps", "nvds_split", "figure", nvds=_BOTH, smoke={"repeats": 1}),
    Figure("P4", "render stage fps / its encoder alone fps", "render_encode", "figure",
           smoke={"frames": 8, "repeats": 1}),
    Figure("P5", "demo wall time / inference time", "pipeline", "p5", da3=_SQUARE, nvds=_SPLIT, smoke={"frames": 8}),
    Figure("P6", "peak RSS 10x clip / 1x clip", "pipeline", "p6", da3=_SMALL,
           smoke={"frames": 8, "factor": 2, "repeats": 1}),
    Figure("P7", "depth store bytes / float16 bytes (moving camera)", "storage", "run", takes=("smoke_store",),
           smoke={"frames": 8}),
    Figure("P8", "snakemake -n, 100 videos (s)", "pipeline", "p8", da3=_SMALL,
           smoke={"videos": 4, "frames": 8, "repeats": 1}),
    Figure("P10", "PyAV decode fps / ffmpeg pipe fps (worst case)", "decode", "figure",
           smoke={"frames": 4, "repeats": 1}),
    Figure("P11", "snakemake -n, 100 probed 2-hour films (s)", "library", "p11", da3=_SMALL,
           smoke={"films": 3, "repeats": 1, "film_frames": 240}),
    Figure("P12", "work/ bytes / results/ bytes, converted clip", "library", "p12", da3=_SQUARE, nvds=_SPLIT,
           smoke={"frames": 8}),
    Figure("P13", "frames of finished work lost per kill (worst)", "library", "p13", da3=_SMALL,
           smoke={"frames": 96, "kills": 1}),
    Figure("P14", "fixed cost / stage job wall time (2-hour film)", "library", "p14", da3=_SMALL,
           smoke={"short": 8, "long": 24}),
    Figure("P15", "DA3 fps at the 16:9 tier / at the square (518)", "tiers", "run",
           smoke={"size": common.DA3_SIZE, "frames": 2, "batch": 2, "repeats": 1, "aspects": ("16:9", "1:1")}),
    Figure("P16", "depth stage fps, providers auto + precision fast / plain CPU provider", "accel", "run",
           da3=_TIER, nvds=_SPLIT, smoke={"frames": 4, "repeats": 1, "batch": 2}),
    Figure("P17", "NVDS stage fps / the network's, a stand-in of the H200's speed", "nvds_stage", "figure",
           smoke={"frames": 8, "width": 320, "height": 180, "repeats": 1}),
    Figure("P18", "depth stage fps / the model's, a stand-in of the H200's speed", "depth_stage", "figure",
           smoke={"frames": 16, "repeats": 1}),
    Figure("Q1", "visible PSNR, renderer - nearest-pixel warp (dB, ground truth)", "viewing", "figures",
           smoke={"size": (192, 108), "frames": 6}),
    Figure("Q2", "hole PSNR, renderer's fill - Telea on the same holes (dB)", "viewing", "figures",
           smoke={"size": (192, 108), "frames": 6}),
    Figure("Q3", "hole flicker, renderer's fill / Telea's", "viewing", "figures",
           smoke={"size": (192, 108), "frames": 6}),
    Figure("Q4", "subject parallax after easing, convergence auto (% of width)", "convergence", "figure"),
    Figure("Q5", "hole PSNR of a single picture's fill - Telea's, the garden (dB)", "viewing", "hard_figures",
           smoke={"size": (192, 108), "frames": 2}),
    Figure("Q6", "visible PSNR, renderer at model-size depth - nearest warp at exact depth, the garden (dB)",
           "viewing", "hard_figures", smoke={"size": (192, 108), "frames": 2}),
)
# fmt: on
BY_NAME = {figure.name: figure for figure in FIGURES}
