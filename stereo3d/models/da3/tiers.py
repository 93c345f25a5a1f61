"""Which DA3 export a video runs through: the input shape (width x height, multiples of the patch side) for its
display aspect.

DA3 takes any shape whose sides are multiples of 14; its own inference keeps the aspect and fixes the longest
side. A fixed-shape ONNX graph per video shape would mean one export per film, so videos snap to a short list of
aspect *tiers* (16:9, 4:3, 1:1, 2.39:1, 9:16 by default) and only the small remainder is letterboxed. A 16:9
film in the square 518x518 export is 44 % bars: tokens the model pays for, and edges it sees. In the 16:9 tier
(518x294) it is 1 % bars and 43 % fewer tokens.

Torch-free and numpy-free: the Snakefile resolves every video's export through these functions.
"""

from __future__ import annotations

import math
import re

PATCH = 14  # DINOv2 patch side: both sides of an export are multiples of it
# fit: aspect (the tier nearest the video's shape, remainder letterboxed) | letterbox (the square export, bars
# around the content: the seed's contract) | resize (the square export, content stretched).
FITS = ("aspect", "letterbox", "resize")
# How the content is placed in the chosen export: aspect and letterbox both letterbox (so a square video gets the
# same depth from both, under the same cache key).
FIT_PLACEMENT = {"aspect": "letterbox", "letterbox": "letterbox", "resize": "resize"}
DEFAULT_TIERS = ("16:9", "4:3", "1:1", "2.39:1", "9:16")
_ASPECT = re.compile(r"([0-9]+(?:\.[0-9]+)?):([0-9]+(?:\.[0-9]+)?)")


def parse_aspect(text: str) -> float:
    """``"16:9"`` → 1.777…, ``"2.39:1"`` → 2.39 (width over height); ValueError for anything else."""
    match = _ASPECT.fullmatch(str(text).strip())
    if not match or float(match.group(2)) == 0 or float(match.group(1)) == 0:
        raise ValueError(f"aspect tier {text!r} is not WIDTH:HEIGHT (e.g. 16:9, 2.39:1)")
    return float(match.group(1)) / float(match.group(2))


def tier_shape(aspect: float, longest: int) -> tuple[int, int]:
    """(width, height) of the tier of ``aspect`` with ``longest`` as its longest side: the short side is the
    multiple of 14 nearest ``longest`` / aspect (518 → 518x294 at 16:9, 518x392 at 4:3, 294x518 at 9:16)."""
    if longest % PATCH or longest <= 0:
        raise ValueError(f"the longest side {longest} is not a positive multiple of {PATCH}")
    ratio = aspect if aspect >= 1 else 1 / aspect
    short = max(PATCH, min(longest, PATCH * math.floor(longest / ratio / PATCH + 0.5)))
    return (longest, short) if aspect >= 1 else (short, longest)


def nearest_tier(width: int, height: int, tiers) -> str:
    """The tier (as written) whose aspect is nearest the frame's, on a log scale (a 1.85:1 film goes to 16:9,
    a 2.35:1 one to 2.39:1); the first listed wins a tie."""
    if not tiers:
        raise ValueError("no aspect tiers configured")
    own = math.log(width / height)
    return min(tiers, key=lambda tier: abs(math.log(parse_aspect(tier)) - own))


def export_shape(da3: dict, display: tuple[int, int] | None) -> tuple[int, int]:
    """The (width, height) of the export a video of ``display`` size runs through under the ``da3`` settings
    (``size``, ``fit``, ``aspect_tiers``). The square fits need no display size; ``aspect`` does."""
    size = int(da3["size"])
    fit = da3["fit"]
    if fit not in FITS:
        raise ValueError(f"unknown fit {fit!r} (valid: {', '.join(FITS)})")
    if fit != "aspect":
        return size, size
    if display is None:
        raise ValueError("fit aspect needs the video's display size")
    tier = nearest_tier(*display, da3["aspect_tiers"])
    return tier_shape(parse_aspect(tier), size)


def tier_shapes(da3: dict) -> list[tuple[int, int]]:
    """Every export shape the ``da3`` settings can choose (one per tier, or the square), without duplicates."""
    if da3["fit"] != "aspect":
        return [export_shape(da3, None)]
    shapes = [tier_shape(parse_aspect(tier), int(da3["size"])) for tier in da3["aspect_tiers"]]
    return list(dict.fromkeys(shapes))
