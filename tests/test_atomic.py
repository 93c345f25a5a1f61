"""Atomic writes: nothing half-written looks finished, and a killed attempt's temporary goes with the next one."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from stereo3d.io.atomic import atomic_output
from stereo3d.io.mapstore import write_maps


def test_a_killed_attempts_temporary_is_removed_by_the_next_write(tmp_path):
    target = tmp_path / "seg [1].maps"  # glob characters in the name are taken literally
    stale = tmp_path / ".seg [1].partial-999999.maps"  # what a SIGKILLed job leaves
    other = tmp_path / ".seg [1]x.partial-999999.maps"  # another target's temporary
    sidecar = tmp_path / ".seg [1].partial-999999.maps.bsf"  # a file the killed job wrote beside its temporary
    unrelated = tmp_path / ".seg [1].partial-999999.mkv"
    for path in (stale, other, sidecar, unrelated):
        path.write_bytes(b"half")
    with atomic_output(target) as tmp:
        assert tmp.name == f".seg [1].partial-{os.getpid()}.maps"
        tmp.write_bytes(b"whole")
    assert target.read_bytes() == b"whole"
    assert not stale.exists() and not sidecar.exists() and other.exists() and unrelated.exists()
    assert not tmp.exists()


def test_a_failed_write_leaves_neither_the_target_nor_its_temporary(tmp_path):
    target = tmp_path / "out.maps"
    with pytest.raises(RuntimeError), atomic_output(target) as tmp:
        tmp.write_bytes(b"half")
        raise RuntimeError("disk full")
    assert list(tmp_path.iterdir()) == []


@pytest.fixture
def watched_renames(monkeypatch):
    """``watch(out, working)``: from then on, each rename onto ``out`` records whether ``working`` (the job's
    resumable state beside it) still exists at that moment; returns the list of those records."""
    renamed, replace = [], os.replace
    watching: dict[Path, Path] = {}

    def watched(src, dst):
        if Path(dst) in watching:
            renamed.append((Path(dst).name, watching[Path(dst)].exists()))
        return replace(src, dst)

    monkeypatch.setattr(os, "replace", watched)

    def watch(out: Path, working: Path) -> list:
        watching[out] = working
        return renamed

    return watch


def test_an_output_appears_only_once_the_jobs_resumable_state_is_gone(tmp_path, watched_renames):
    """The EMA and convergence plans keep a resumable table beside their output while they read a video, a render
    job its encoded pieces. A kill after the output is renamed into place but before that state is removed would
    leave it there for good (Snakemake does not come back for an output it finds whole; tests/test_faults.py's
    random kills caught a plan's table): it goes first."""
    from stereo3d.io.mapstore import partial_path
    from stereo3d.stabilisers import NearSettings
    from stereo3d.stabilisers.ema import plan
    from stereo3d.stages.convergence_plan import make_convergence_plan
    from stereo3d.stages.render import Piece, Pieces

    maps = tmp_path / "a.zarr"
    write_maps(maps, np.linspace(0.1, 1.0, 20 * 36 * 64, dtype=np.float32).reshape(20, 36, 64), "inverse", chunk=8)
    ema, convergence, video = tmp_path / "ema.npz", tmp_path / "convergence.npz", tmp_path / "render.mkv"
    settings = NearSettings(method="ema", options={"stabilise.ema_alpha": 0.3, "stabilise.cut_threshold": 0.25})
    watched_renames(ema, partial_path(ema))
    plan([maps], ema, settings)
    watched_renames(convergence, partial_path(convergence))
    make_convergence_plan([maps], [maps], convergence, 2.0, 1.0, 24.0)
    pieces = Pieces(video, {"job": 1}, 0, 20, (Piece(0, 20),))
    pieces.path(0).write_bytes(b"an encoded piece")
    renamed = watched_renames(video, pieces.folder)
    pieces.join({})
    assert renamed == [("ema.npz", False), ("convergence.npz", False), ("render.mkv", False)]
    assert video.read_bytes() == b"an encoded piece"
