"""The table of stabilisers. A method is a module of this package that defines ``STABILISER``; it is found by
looking, so adding one touches its module, the config schema and documentation, and its test."""

from __future__ import annotations

import functools
import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from stereo3d.runtime.sessions import SessionOptions
from stereo3d.stereo.bars import Area

if TYPE_CHECKING:  # the settings module reads this table
    from stereo3d.stabilisers.settings import NearSettings


@dataclass(frozen=True)
class Stabiliser:
    name: str  # the value of stabilise.method
    summary: str  # one line, for logs and docs
    run: Callable[[NearJob], None]  # writes one segment's near maps, in frame order, through job.write
    # Its options: the dotted config keys beyond near.* whose values change its maps (NearSettings.options). They
    # join its params and its cache key, so a setting of another method never moves this one's results.
    keys: tuple[str, ...] = ()
    # A plan over the whole video, made from every depth segment in order before any segment runs (rule
    # near_plan): plan(depth_segments, out, settings: NearSettings) -> summary. It keeps segments exactly equal to an
    # unsegmented run where a method looks at the whole video.
    plan: Callable[[list[Path], Path, NearSettings], dict] | None = None
    # Raw frames before a segment that its first outputs depend on (a causal window): read through job.earlier
    # (the raw depth before the job's first frame, from this segment's store or the previous one's), never from
    # any output.
    history: int = 0
    # The model files (paths under the models folder) it opens, for its settings; the workflow exports them.
    models: Callable[[NearSettings], list[str]] | None = None


@dataclass
class NearJob:
    """One segment (or what is left of it for a resumed job), as a stabiliser sees it."""

    video: Path
    probe: dict
    depths: object  # the raw depth from the job's first frame on (iterate for frames; .frames, .attrs)
    start: int  # the job's first frame in the video
    settings: NearSettings  # the near range, the method and its options
    write: Callable[[np.ndarray], None]  # stores the next near map
    plan: Path | None = None
    earlier: Callable[[int], np.ndarray] | None = None  # earlier(n): raw depth [n, h, w] of the n frames before
    models_dir: Path | None = None
    options: SessionOptions = field(default_factory=SessionOptions)
    # The area of the frame the depth covers (the picture inside baked-in bars), None for the whole frame: a
    # method that reads the frames too reads this area of them.
    picture: Area | None = None


@functools.cache
def stabilisers() -> dict[str, Stabiliser]:
    """Every stabiliser, by name: the modules of this package that define ``STABILISER``."""
    package = importlib.import_module(__name__.rpartition(".")[0])
    found: dict[str, Stabiliser] = {}
    for module in pkgutil.iter_modules(package.__path__):
        if module.name == "registry":
            continue
        stabiliser = getattr(importlib.import_module(f"{package.__name__}.{module.name}"), "STABILISER", None)
        if isinstance(stabiliser, Stabiliser):
            if stabiliser.name in found:
                raise RuntimeError(f"two stabilisers are named {stabiliser.name!r}")
            found[stabiliser.name] = stabiliser
    return dict(sorted(found.items()))


def get_stabiliser(name: str) -> Stabiliser:
    try:
        return stabilisers()[name]
    except KeyError:
        raise ValueError(f"unknown stabilisation method {name!r} (valid: {', '.join(stabilisers())})") from None
