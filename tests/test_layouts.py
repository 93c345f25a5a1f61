"""Stereo layouts: each packs the two views into the right size and order, with the right tag and signalling."""

import numpy as np
import pytest

from stereo3d.stereo.layouts import (
    DUBOIS_LEFT,
    DUBOIS_RIGHT,
    LAYOUT_TAGS,
    LAYOUTS,
    container_args,
    encoder_args,
    output_size,
    pack,
    vr180_eye_px,
)

H, W = 24, 40


def views(dtype=np.uint8):
    rng = np.random.default_rng(3)
    top = 255 if dtype == np.uint8 else 65535
    left = rng.integers(0, top, (H, W, 3)).astype(dtype)
    right = rng.integers(0, top, (H, W, 3)).astype(dtype)
    return left, right


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_every_layout_has_the_size_it_announces(layout):
    left, right = views()
    out = pack(left, right, layout, fov_deg=90.0)
    assert (out.shape[1], out.shape[0]) == output_size(W, H, layout, fov_deg=90.0)
    assert out.dtype == np.uint8 and out.shape[2] == 3


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_every_layout_keeps_16_bit_views_16_bit(layout):
    left, right = views(np.uint16)
    assert pack(left, right, layout).dtype == np.uint16


def test_sizes_of_each_layout():
    sizes = {name: output_size(1920, 1080, name, fov_deg=90.0) for name in LAYOUTS}
    assert sizes == {
        "full_sbs": (3840, 1080),
        "half_sbs": (1920, 1080),
        "full_tb": (1920, 2160),
        "half_tb": (1920, 1080),
        "cross_eyed": (3840, 1080),
        "anaglyph_dubois": (1920, 1080),
        "anaglyph_color": (1920, 1080),
        "vr180": (5760, 2880),  # pi * 960 px per radian would be 3016 per eye: capped at the delivery size
    }


def test_full_layouts_place_each_eye_unchanged():
    left, right = views()
    sbs, tb, cross = (pack(left, right, name) for name in ("full_sbs", "full_tb", "cross_eyed"))
    assert np.array_equal(sbs[:, :W], left) and np.array_equal(sbs[:, W:], right)
    assert np.array_equal(tb[:H], left) and np.array_equal(tb[H:], right)
    assert np.array_equal(cross[:, :W], right) and np.array_equal(cross[:, W:], left)


def test_half_layouts_squeeze_each_eye_into_its_half():
    left = np.full((H, W, 3), 10, np.uint8)
    right = np.full((H, W, 3), 200, np.uint8)
    sbs, tb = pack(left, right, "half_sbs"), pack(left, right, "half_tb")
    assert (sbs[:, : W // 2] == 10).all() and (sbs[:, W // 2 :] == 200).all()
    assert (tb[: H // 2] == 10).all() and (tb[H // 2 :] == 200).all()


def test_dubois_anaglyph_applies_the_published_matrices():
    left, right = views()
    expected = left.astype(float) @ DUBOIS_LEFT.T.astype(float) + right.astype(float) @ DUBOIS_RIGHT.T.astype(float)
    expected = np.clip(np.rint(expected), 0, 255)
    assert np.abs(pack(left, right, "anaglyph_dubois").astype(float) - expected).max() <= 1


def test_colour_anaglyph_takes_red_from_the_left_eye_and_cyan_from_the_right():
    left, right = views()
    out = pack(left, right, "anaglyph_color")
    assert np.array_equal(out[..., 0], left[..., 0]) and np.array_equal(out[..., 1:], right[..., 1:])


def test_vr180_looks_straight_ahead_at_the_frame_centre_and_is_black_outside_the_field_of_view():
    left = np.zeros((H, W, 3), np.uint8)
    left[H // 2 - 2 : H // 2 + 2, W // 2 - 2 : W // 2 + 2] = 250  # a bright patch in the middle
    right = left.copy()
    out = pack(left, right, "vr180", fov_deg=60.0, eye_px=200)
    assert out.shape == (200, 400, 3)
    for eye in (out[:, :200], out[:, 200:]):
        assert eye[100, 100].min() > 200  # the centre of each eye's sphere shows the centre of the frame
        assert eye[100, 5].max() == 0 and eye[5, 100].max() == 0  # 84 degrees off axis: outside the 60 degree view


def test_vr180_keeps_the_source_pixel_density_at_the_centre():
    assert vr180_eye_px(640, 360, fov_deg=90.0) == 1004  # pi * 320 = 1005.3 px per radian, down to even


def test_vr180_refuses_a_field_of_view_of_180_degrees_or_more():
    with pytest.raises(ValueError, match="field of view"):
        output_size(W, H, "vr180", fov_deg=180.0)


def test_tags_are_the_ones_players_key_on():
    assert LAYOUT_TAGS == {
        "full_sbs": "_LRF_Full_SBS",
        "half_sbs": "_LR",
        "full_tb": "_TBF_fulltb",
        "half_tb": "_TB",
        "cross_eyed": "_RLF_cross",
        "anaglyph_dubois": "_Anaglyph_dubois",
        "anaglyph_color": "_Anaglyph_color",
        "vr180": "_180x180_LR",
    }


def test_unknown_layout_is_refused_naming_the_valid_ones():
    with pytest.raises(ValueError, match="unknown layout 'sbs'.*full_sbs"):
        output_size(W, H, "sbs")


def test_signalling_goes_to_the_container_by_default_and_to_the_sei_on_request():
    assert container_args("full_sbs", ".mkv") == ["-metadata:s:v:0", "stereo_mode=left_right"]
    assert container_args("half_tb", ".mkv") == ["-metadata:s:v:0", "stereo_mode=top_bottom"]
    assert container_args("cross_eyed", ".mkv") == ["-metadata:s:v:0", "stereo_mode=right_left"]
    assert encoder_args("full_sbs", "libx264") == []
    assert encoder_args("full_sbs", "libx264", "sei") == ["-x264-params", "frame-packing=3"]
    assert encoder_args("full_tb", "libx264", "sei") == ["-x264-params", "frame-packing=4"]
    assert container_args("full_sbs", ".mkv", "sei") == []  # never both: ffmpeg cannot decode that


def test_layouts_without_a_truthful_signal_get_none():
    assert encoder_args("cross_eyed", "libx264", "sei") == []  # x264 can only say "left first"
    assert encoder_args("full_sbs", "libx265", "sei") == []  # x265 has no frame-packing SEI
    for anaglyph in ("anaglyph_dubois", "anaglyph_color"):
        assert container_args(anaglyph, ".mkv") == [] and encoder_args(anaglyph, "libx264", "sei") == []
    assert container_args("full_sbs", ".mp4") == []  # MP4 gets it on the remux from Matroska
