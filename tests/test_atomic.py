"""Atomic writes: nothing half-written looks finished, and a killed attempt's temporary goes with the next one."""

from __future__ import annotations

import os

import pytest

from stereo3d.io.atomic import atomic_output


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
