"""The compressed map store: faithful to its stated precision, streaming, resumable after a kill, atomic, and a
fraction of float16."""

import hashlib
import os
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from stereo3d.errors import BadVideo
from stereo3d.io.mapstore import BadMaps, MapReader, MapWriter, partial_path, store_bytes, write_maps


def smooth_maps(n=10, h=36, w=64):
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    return [(2.0 + np.sin(xx / 9 + t / 3) + yy / 20).astype(np.float32) for t in range(n)]


@pytest.mark.parametrize("bits", [10, 14])
def test_log_transfer_has_uniform_relative_precision_of_half_a_step(tmp_path, bits):
    frames = np.stack([m * 100 for m in smooth_maps()])  # depth spanning a wide range
    write_maps(tmp_path / "d.maps", frames, "log", chunk=4, bits=bits)
    with MapReader(tmp_path / "d.maps") as store:
        got = store.read()
    assert got.shape == frames.shape
    logs = np.log(frames)
    step = (logs.max(axis=(1, 2)) - logs.min(axis=(1, 2))) / (2**bits - 1)  # each frame's own range
    # Half a step in the log domain, plus float32 rounding of the arithmetic.
    bound = np.expm1(step / 2)[:, None, None] + 1e-5
    assert np.all(np.abs(got - frames) / frames <= bound)


def test_inverse_transfer_has_uniform_precision_in_inverse_depth(tmp_path):
    frames = np.stack([m * 10 for m in smooth_maps()])
    write_maps(tmp_path / "d.maps", frames, "inverse", chunk=4)
    with MapReader(tmp_path / "d.maps") as store:
        got = store.read()
    inverse = 1 / frames
    step = (inverse.max(axis=(1, 2)) - inverse.min(axis=(1, 2))) / 1023
    assert np.all(np.abs(1 / got - inverse) <= (step / 2 * 1.001)[:, None, None] + 1e-7)


def test_linear_transfer_round_trip(tmp_path):
    frames = np.stack([m / 4 for m in smooth_maps()])
    write_maps(tmp_path / "n.maps", frames, "linear", chunk=3)
    with MapReader(tmp_path / "n.maps") as store:
        got = store.read()
    span = frames.max(axis=(1, 2)) - frames.min(axis=(1, 2))
    assert np.all(np.abs(got - frames) <= (span / 1023 / 2)[:, None, None] + 1e-6)


def test_range_reads_match_full_reads_across_chunks(tmp_path):
    write_maps(tmp_path / "d.maps", smooth_maps(11), "log", chunk=4)
    with MapReader(tmp_path / "d.maps") as store:
        full = store.read()
        np.testing.assert_array_equal(store.read(3, 6), full[3:9])
        np.testing.assert_array_equal(np.stack(list(store)), full)
        np.testing.assert_array_equal(np.stack(list(store.from_frame(5))), full[5:])
        assert len(store) == 11 and store.from_frame(5).frames == 6


def test_constant_maps_survive(tmp_path):
    write_maps(tmp_path / "c.maps", [np.full((4, 5), 1.5, np.float32)] * 3, "log")
    with MapReader(tmp_path / "c.maps") as store:
        np.testing.assert_allclose(store.read(), 1.5, rtol=1e-6)


def test_series_and_attrs_come_back(tmp_path):
    with MapWriter(tmp_path / "d.maps", "log", attrs={"start": 7}, series=("changes",), chunk=4) as store:
        for index, frame in enumerate(smooth_maps(6)):
            store.append(frame, changes=np.nan if index == 0 else index / 10)
    with MapReader(tmp_path / "d.maps") as store:
        assert store.attrs == {"start": 7}
        np.testing.assert_array_equal(store.series("changes"), [np.nan, 0.1, 0.2, 0.3, 0.4, 0.5])
        assert store.series("other") is None


def test_smooth_maps_take_a_fraction_of_float16(tmp_path):
    frames = smooth_maps(32, 144, 256)
    write_maps(tmp_path / "d.maps", frames, "log")
    assert store_bytes(tmp_path / "d.maps") < 0.25 * 32 * 144 * 256 * 2


def test_depth_of_a_moving_camera_takes_a_fifteenth_of_float16_and_barely_moves_the_views(tmp_path):
    """The README's figures (bench P7, 96 frames): 1/15 of float16, views 0.08 grey levels off. On 32 frames of
    the same synthetic DA3-like scene the first frame, which nothing predicts, weighs more: 1/14."""
    from bench.storage import scene_depth, view_error

    depth = scene_depth(32)
    write_maps(tmp_path / "d.maps", depth, "inverse")  # as the depth stage stores it
    assert store_bytes(tmp_path / "d.maps") <= depth.size * 2 / 14
    with MapReader(tmp_path / "d.maps") as store:
        assert view_error(depth, store.read(), every=16)["mean_grey"] <= 0.15


def test_any_zarr_reader_opens_the_store(tmp_path):
    import zarr

    write_maps(tmp_path / "d.maps", smooth_maps(5), "log")
    group = zarr.open_group(tmp_path / "d.maps", mode="r")
    assert group["codes"].shape == (5, 36, 64) and group["ranges"].shape == (5, 2)
    assert group.attrs["transfer"] == "log" and group.attrs["bits"] == 10


@pytest.mark.parametrize("frames_at_once", [1, 3, None])
@pytest.mark.parametrize("transfer,bits", [("inverse", 10), ("log", 10), ("linear", 14)])
def test_the_store_holds_the_codes_its_coding_states_and_reads_them_back_bit_for_bit(
    tmp_path, monkeypatch, transfer, bits, frames_at_once
):
    # The coding as the module states it, in whole-array NumPy (each frame quantised over its own range in the
    # transfer's domain, the plane predictor, the zigzag) and undone so by any Zarr reader: the writer stores these
    # very codes and ranges, and the reader gives these very values, however many frames it codes at once (a
    # whole chunk here, unless told fewer: large maps go a frame at a time).
    import zarr

    from stereo3d.io import mapstore

    if frames_at_once:
        monkeypatch.setattr(mapstore, "CODING_VALUES", frames_at_once * 37 * 61)

    rng = np.random.default_rng(3)
    frames = np.stack(smooth_maps(5, 37, 61)) * 3
    frames[:, 10:20, 15:40] *= 4  # a depth edge: large residuals of both signs
    frames += rng.random(frames.shape, np.float32) * 0.05
    frames[2] = 1.5  # a constant frame: an empty range
    write_maps(tmp_path / "d.maps", frames, transfer, chunk=4, bits=bits)
    group = zarr.open_group(tmp_path / "d.maps", mode="r")
    top = 2**bits - 1
    domain = {"log": np.log, "inverse": np.reciprocal, "linear": np.asarray}[transfer](frames)
    lo, hi = domain.min(axis=(1, 2)).astype(np.float64), domain.max(axis=(1, 2)).astype(np.float64)
    scale = (top / np.where(hi > lo, hi - lo, 1.0)).astype(np.float32)[:, None, None]
    level = np.clip(np.rint((domain - lo.astype(np.float32)[:, None, None]) * scale), 0, top).astype(np.int32)
    level[:, :, 1:] = level[:, :, 1:] - level[:, :, :-1]
    level[:, 1:, :] = level[:, 1:, :] - level[:, :-1, :]
    np.testing.assert_array_equal(group["codes"][:], ((level << 1) ^ (level >> 31)).astype(np.uint16))
    np.testing.assert_array_equal(group["ranges"][:], np.stack([lo, hi], axis=1))
    zigzag = group["codes"][:].astype(np.int32)
    levels = np.cumsum(np.cumsum((zigzag >> 1) ^ -(zigzag & 1), axis=1, dtype=np.int32), axis=2, dtype=np.int32)
    values = levels.astype(np.float32)
    values *= ((hi - lo) / top).astype(np.float32)[:, None, None]
    values += lo.astype(np.float32)[:, None, None]
    if transfer == "log":
        np.exp(values, out=values)
    elif transfer == "inverse":
        np.reciprocal(np.maximum(values, np.float32(1e-12)), out=values)
    with MapReader(tmp_path / "d.maps") as store:
        np.testing.assert_array_equal(store.read(), values)


def test_a_failed_write_leaves_nothing(tmp_path):
    with pytest.raises(RuntimeError):
        with MapWriter(tmp_path / "d.maps", "log") as writer:
            writer.append(smooth_maps(1)[0])
            raise RuntimeError("killed")
    assert list(tmp_path.iterdir()) == []


def test_a_bad_input_discards_even_a_resumable_store(tmp_path):
    # A rerun of the same job would fail the same way: nothing is kept for it.
    with pytest.raises(BadVideo):
        with MapWriter(tmp_path / "d.maps", "log", chunk=2, resume={"job": 1}) as writer:
            writer.append(np.stack(smooth_maps(3)))
            raise BadVideo(tmp_path / "clip.mp4", "decoding frames 3..9: damaged")
    assert list(tmp_path.iterdir()) == []


def test_an_incomplete_or_missing_store_is_refused_with_its_name(tmp_path):
    with pytest.raises(BadMaps, match="d.maps"):
        MapReader(tmp_path / "d.maps")
    write_maps(tmp_path / "d.maps", smooth_maps(3), "log")
    (tmp_path / "d.maps" / "zarr.json").write_text("{")
    with pytest.raises(BadMaps, match="d.maps"):
        MapReader(tmp_path / "d.maps")


def digest(folder):
    """Every file of a store, names and bytes (what the writer wrote; Zarr tools read the same)."""
    h = hashlib.sha256()
    for root, _, names in sorted(os.walk(folder)):
        for name in sorted(names):
            path = os.path.join(root, name)
            h.update(os.path.relpath(path, folder).encode() + open(path, "rb").read())
    return h.hexdigest()


WRITER = textwrap.dedent(
    """
    import os, signal, sys, time
    import numpy as np
    from stereo3d.io.mapstore import MapWriter
    frames = np.load(sys.argv[1])
    kill_at = int(sys.argv[3])
    with MapWriter(sys.argv[2], "log", chunk=8, series=("changes",), resume={"job": sys.argv[4]}) as store:
        for index in range(store.count, len(frames)):
            store.append(frames[index], changes=index / 100)
            if index == kill_at:
                time.sleep(0.5)  # let the writer thread store the chunk before this one
                os.kill(os.getpid(), signal.SIGKILL)
    """
)


def write_in_process(tmp_path, frames_file, out, kill_at, job="a"):
    return subprocess.run([sys.executable, "-c", WRITER, str(frames_file), str(out), str(kill_at), job])


def test_a_killed_writer_resumes_after_its_last_chunk_to_the_same_bytes(tmp_path):
    frames = np.stack(smooth_maps(30))
    np.save(tmp_path / "frames.npy", frames)
    write_in_process(tmp_path, tmp_path / "frames.npy", tmp_path / "whole.maps", kill_at=-1)
    killed = write_in_process(tmp_path, tmp_path / "frames.npy", tmp_path / "d.maps", kill_at=20)
    assert killed.returncode == -signal.SIGKILL
    assert not (tmp_path / "d.maps").exists() and partial_path(tmp_path / "d.maps").is_dir()
    # A kill inside one of zarr's file writes also leaves that write's temporary (seen in CI): not to be kept.
    (partial_path(tmp_path / "d.maps") / "ranges" / f"zarr.{'0' * 32}.partial").write_bytes(b'{"half')
    with MapWriter(tmp_path / "d.maps", "log", chunk=8, series=("changes",), resume={"job": "a"}) as store:
        assert store.resumed == 16  # the two chunks before the kill's; frames 16..20 are lost, no more
        for index in range(store.count, len(frames)):
            store.append(frames[index], changes=index / 100)
    assert digest(tmp_path / "d.maps") == digest(tmp_path / "whole.maps")
    assert not partial_path(tmp_path / "d.maps").exists()


def test_another_jobs_leftover_is_not_continued(tmp_path):
    frames = np.stack(smooth_maps(30))
    np.save(tmp_path / "frames.npy", frames)
    write_in_process(tmp_path, tmp_path / "frames.npy", tmp_path / "d.maps", kill_at=20, job="old input")
    with MapWriter(tmp_path / "d.maps", "log", chunk=8, series=("changes",), resume={"job": "new input"}) as store:
        assert store.resumed == 0
        store.append(frames, changes=0.0)
    with MapReader(tmp_path / "d.maps") as store:
        assert store.frames == 30


def test_a_killed_ema_plan_resumes_after_its_last_chunk_to_the_same_plan(tmp_path, caplog):
    """The plan reads every depth frame of a video (minutes for a film): a kill keeps its finished chunks."""
    import logging

    from stereo3d.io.mapstore import partial_path
    from stereo3d.stabilisers import NearSettings
    from stereo3d.stabilisers.ema import plan, range_table
    from stereo3d.stereo.near import percentile_range, reciprocal

    settings = NearSettings(method="ema", options={"stabilise.ema_alpha": 0.3, "stabilise.cut_threshold": 0.25})
    frames = np.stack([m * (1 + t / 10) for t, m in enumerate(smooth_maps(70))])
    write_maps(tmp_path / "a.zarr", frames[:40], "inverse", chunk=8, attrs={"start": 0})
    write_maps(tmp_path / "b.zarr", frames[40:], "inverse", chunk=8, attrs={"start": 40})
    segments = [tmp_path / "a.zarr", tmp_path / "b.zarr"]
    plan(segments, tmp_path / "whole.npz", settings)
    # What a killed attempt leaves: its first 40 rows appended, the first 32 of them stored (a whole chunk).
    out = tmp_path / "plan.npz"
    table = range_table(segments, out, settings)  # chunks of 32 rows
    with MapReader(segments[0]) as depths:
        for raw in depths:
            lo, hi = percentile_range(reciprocal(raw), settings.low_pct, settings.high_pct)
            table.append(lo=lo, hi=hi, change=np.nan)
    del table
    with caplog.at_level(logging.INFO, logger="stereo3d"):
        plan(segments, out, settings)
    assert "resuming the plan at frame 32 of 70" in caplog.text
    assert out.read_bytes() == (tmp_path / "whole.npz").read_bytes()
    assert not partial_path(out).exists()
