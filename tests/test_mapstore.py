"""The compressed map store: faithful, streaming, atomic, and smaller than float16."""

import numpy as np
import pytest

from stereo3d.io.mapstore import BadMaps, MapReader, MapWriter, write_maps


def smooth_maps(n=10, h=36, w=64):
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    return [(2.0 + np.sin(xx / 9 + t / 3) + yy / 20).astype(np.float32) for t in range(n)]


def test_log_transfer_round_trip_has_uniform_relative_precision(tmp_path):
    frames = [m * 100 for m in smooth_maps()]  # depth spanning a wide range
    write_maps(tmp_path / "d.maps", frames, "log", chunk=4)
    with MapReader(tmp_path / "d.maps") as store:
        got = store.read()
    ref = np.stack(frames)
    assert got.shape == ref.shape
    assert np.max(np.abs(got - ref) / ref) < 1e-4


def test_linear_transfer_round_trip(tmp_path):
    frames = [m / 4 for m in smooth_maps()]
    write_maps(tmp_path / "n.maps", frames, "linear", chunk=3)
    with MapReader(tmp_path / "n.maps") as store:
        np.testing.assert_allclose(store.read(), np.stack(frames), atol=2e-5)


def test_range_reads_match_full_reads_across_chunks(tmp_path):
    write_maps(tmp_path / "d.maps", smooth_maps(11), "log", chunk=4)
    with MapReader(tmp_path / "d.maps") as store:
        full = store.read()
        np.testing.assert_array_equal(store.read(3, 6), full[3:9])
        np.testing.assert_array_equal(np.stack(list(store)), full)
        assert len(store) == 11


def test_constant_maps_survive(tmp_path):
    write_maps(tmp_path / "c.maps", [np.full((4, 5), 1.5, np.float32)] * 3, "log")
    with MapReader(tmp_path / "c.maps") as store:
        np.testing.assert_allclose(store.read(), 1.5, rtol=1e-6)


def test_smooth_maps_take_under_half_of_float16(tmp_path):
    frames = smooth_maps(32, 144, 256)
    write_maps(tmp_path / "d.maps", frames, "log")
    size = (tmp_path / "d.maps").stat().st_size
    assert size < 0.5 * 32 * 144 * 256 * 2


def test_a_failed_write_leaves_nothing(tmp_path):
    with pytest.raises(RuntimeError):
        with MapWriter(tmp_path / "d.maps", "log") as writer:
            writer.append(smooth_maps(1)[0])
            raise RuntimeError("killed")
    assert list(tmp_path.iterdir()) == []


def test_a_truncated_store_is_refused_with_its_name(tmp_path):
    write_maps(tmp_path / "d.maps", smooth_maps(3), "log")
    data = (tmp_path / "d.maps").read_bytes()
    (tmp_path / "d.maps").write_bytes(data[: len(data) // 2])
    with pytest.raises(BadMaps, match="d.maps"):
        MapReader(tmp_path / "d.maps")
