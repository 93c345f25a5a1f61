"""Frames to the export's shape (square or an aspect tier) and back: both placements, both input contracts."""

import numpy as np
import pytest

from stereo3d.models.da3.runtime import BAR_RGB, IMAGENET_MEAN, IMAGENET_STD, place, placement_for, to_model_input


def test_letterbox_keeps_aspect_and_centres_content():
    p = placement_for(1920, 1080, (518, 518), "letterbox")
    assert (p.width, p.height) == (518, 291)
    assert (p.x, p.y) == (0, (518 - 291) // 2)


def test_portrait_letterbox_puts_bars_left_and_right():
    p = placement_for(1080, 1920, (140, 140), "letterbox")
    assert p.height == 140 and p.width == 79 and p.y == 0 and p.x == (140 - 79) // 2


def test_resize_fills_the_square():
    p = placement_for(640, 360, (140, 140), "resize")
    assert (p.x, p.y, p.width, p.height) == (0, 0, 140, 140)


def test_letterbox_round_trip_returns_the_content_exactly():
    rng = np.random.default_rng(1)
    p = placement_for(160, 90, (140, 140), "letterbox")
    frames = rng.integers(0, 256, (2, p.height, p.width, 3), dtype=np.uint8)
    canvas = place(frames, p)
    assert canvas.shape == (2, 140, 140, 3)
    np.testing.assert_array_equal(p.crop(canvas.transpose(0, 3, 1, 2)).transpose(0, 2, 3, 1), frames)
    assert (canvas[:, 0, 0] == BAR_RGB).all()


def test_bars_normalise_to_almost_zero_in_the_float_contract():
    p = placement_for(160, 90, (28, 28), "letterbox")
    canvas = place(np.zeros((1, p.height, p.width, 3), np.uint8), p)
    x = to_model_input(canvas, "float")
    assert np.abs(x[0, :, 0, 0]).max() < 0.01


def test_float_contract_is_imagenet_normalised_nchw():
    canvas = np.full((1, 14, 14, 3), 255, np.uint8)
    x = to_model_input(canvas, "float")
    assert x.shape == (1, 3, 14, 14) and x.dtype == np.float32
    np.testing.assert_allclose(x[0, :, 3, 3], (1 - IMAGENET_MEAN) / IMAGENET_STD, rtol=1e-6)


def test_uint8_contract_passes_nhwc_bytes_through():
    canvas = np.arange(14 * 14 * 3, dtype=np.uint8).reshape(1, 14, 14, 3)
    x = to_model_input(canvas, "uint8")
    assert x.dtype == np.uint8 and x.shape == (1, 14, 14, 3)
    np.testing.assert_array_equal(x, canvas)


def test_wrong_frame_size_is_refused():
    p = placement_for(160, 90, (140, 140), "letterbox")
    with pytest.raises(ValueError):
        place(np.zeros((1, 10, 10, 3), np.uint8), p)


def test_an_aspect_tier_holds_a_16_9_frame_with_almost_no_bars():
    p = placement_for(1920, 1080, (518, 294), "letterbox")
    assert (p.width, p.height, p.x, p.y) == (518, 291, 0, 1)
    assert p.bars < 0.011  # against 0.44 in the square
    assert placement_for(1920, 1080, (518, 518), "letterbox").bars > 0.43


def test_the_remainder_of_a_wider_film_is_letterboxed_in_its_tier():
    p = placement_for(1998, 1080, (518, 294), "letterbox")  # 1.85:1 in the 16:9 tier
    assert p.width == 518 and p.height == 280 and p.y == 7
    frames = np.full((1, p.height, p.width, 3), 7, np.uint8)
    canvas = place(frames, p)
    assert canvas.shape == (1, 294, 518, 3)
    assert (canvas[0, 0] == BAR_RGB).all() and (canvas[0, 7] == 7).all()


def test_a_portrait_frame_fills_the_portrait_tier():
    p = placement_for(1080, 1920, (294, 518), "letterbox")
    assert (p.width, p.height) == (291, 518) and p.x == 1
