"""Stereo layouts: each packs the two views into the right size and order, with the right tag and signalling."""

import math

import numpy as np
import pytest

from stereo3d.stereo.layouts import (
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


# Eric Dubois' least-squares red-cyan anaglyph matrices as he published them (rows: output R, G, B; columns: the
# eye's R, G, B), and ffmpeg's stereo3d filter's table for them (``arcd``, in 1/65536): the same matrices.
DUBOIS_PUBLISHED_LEFT = np.array([[0.456, 0.500, 0.176], [-0.040, -0.038, -0.016], [-0.015, -0.021, -0.005]])
DUBOIS_PUBLISHED_RIGHT = np.array([[-0.043, -0.088, -0.002], [0.378, 0.734, -0.018], [-0.072, -0.113, 1.226]])
FFMPEG_ARCD = np.array(
    [
        [29891, 32800, 11559, -2849, -5763, -102],
        [-2627, -2479, -1033, 24804, 48080, -1209],
        [-997, -1350, -358, -4729, -7403, 80373],
    ]
)


def test_the_dubois_matrices_written_here_are_the_ones_ffmpeg_uses():
    published = np.concatenate([DUBOIS_PUBLISHED_LEFT, DUBOIS_PUBLISHED_RIGHT], axis=1)
    assert np.abs(FFMPEG_ARCD / 65536 - published).max() < 5e-4


def _dubois(left, right, top):
    mixed = left.astype(np.float64) @ DUBOIS_PUBLISHED_LEFT.T + right.astype(np.float64) @ DUBOIS_PUBLISHED_RIGHT.T
    return np.clip(np.rint(mixed), 0, top)


def _area_halve(view, axis):
    """INTER_AREA at exactly half size: each output pixel is the mean of the two it covers."""
    first, second = (view[:, 0::2], view[:, 1::2]) if axis == 1 else (view[0::2], view[1::2])
    return (first.astype(np.float64) + second) / 2


def _expected(layout, left, right, top):
    """Every layout's frame from the views, written out independently of stereo3d.stereo.layouts."""
    if layout == "full_sbs":
        return np.concatenate([left, right], axis=1)
    if layout == "cross_eyed":
        return np.concatenate([right, left], axis=1)
    if layout == "full_tb":
        return np.concatenate([left, right], axis=0)
    if layout == "half_sbs":
        return np.concatenate([_area_halve(left, 1), _area_halve(right, 1)], axis=1)
    if layout == "half_tb":
        return np.concatenate([_area_halve(left, 0), _area_halve(right, 0)], axis=0)
    if layout == "anaglyph_dubois":
        return _dubois(left, right, top)
    if layout == "anaglyph_color":
        return np.dstack([left[..., :1], right[..., 1:]])
    raise AssertionError(f"no expectation written for {layout}")


FLAT_LAYOUTS = [name for name in LAYOUTS if name != "vr180"]  # VR180 has its own test below


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16])
@pytest.mark.parametrize("layout", FLAT_LAYOUTS)
def test_every_layout_packs_the_views_into_the_size_it_announces(layout, dtype):
    left, right = views(dtype)
    out = pack(left, right, layout, fov_deg=90.0)
    assert (out.shape[1], out.shape[0]) == output_size(W, H, layout, fov_deg=90.0)
    assert out.dtype == dtype and out.shape[2] == 3  # 16-bit views stay 16-bit
    expected = _expected(layout, left, right, np.iinfo(dtype).max)
    assert out.shape == expected.shape
    # Exact, but for the rounding of an average or of the matrix product.
    assert np.abs(out.astype(np.float64) - expected).max() <= 1


def _vr180_expected(view, side, fov_deg):
    """One VR180 eye pixel by pixel, from the projection as the layout documents it: output pixel (i, j) looks
    at longitude (i + 1/2) / side * 180 - 90 degrees and latitude 90 - (j + 1/2) / side * 180; the frame is a
    pinhole view straight ahead with a horizontal field of view of ``fov_deg``. Returns the expected values
    (bilinear sampling of the view) where the direction lands inside the frame, and where it lands clearly
    outside (black)."""
    height, width = view.shape[:2]
    focal = (width / 2) / math.tan(math.radians(fov_deg) / 2)
    inside = np.zeros((side, side), bool)
    outside = np.zeros((side, side), bool)
    expected = np.zeros((side, side, 3))
    for j in range(side):
        lat = math.radians(90 - (j + 0.5) / side * 180)
        for i in range(side):
            lon = math.radians((i + 0.5) / side * 180 - 90)
            dx, dy, dz = math.cos(lat) * math.sin(lon), math.sin(lat), math.cos(lat) * math.cos(lon)
            if dz <= 0:
                outside[j, i] = True
                continue
            x, y = (width - 1) / 2 + focal * dx / dz, (height - 1) / 2 - focal * dy / dz
            if 0 <= x <= width - 1 and 0 <= y <= height - 1:
                x0, y0 = min(int(x), width - 2), min(int(y), height - 2)
                fx, fy = x - x0, y - y0
                patch = view[y0 : y0 + 2, x0 : x0 + 2].astype(np.float64)
                top = patch[0, 0] * (1 - fx) + patch[0, 1] * fx
                bottom = patch[1, 0] * (1 - fx) + patch[1, 1] * fx
                expected[j, i] = top * (1 - fy) + bottom * fy
                inside[j, i] = True
            elif not (-1 < x < width and -1 < y < height):
                outside[j, i] = True
    return expected, inside, outside


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16])
def test_vr180_projects_each_eye_onto_its_half_of_the_sphere(dtype):
    # Smooth views (each channel a different plane in x and y, the eyes different): bilinear sampling of a
    # plane is exact, so the expectation needs no model of OpenCV's interpolation beyond its 1/32 px weights.
    scale = 1 if dtype == np.uint8 else 257
    y, x = np.mgrid[0:H, 0:W].astype(np.float64)
    left = np.dstack([20 + 5 * x, 30 + 8 * y, 200 - 3 * x - 2 * y]) * scale
    right = np.dstack([240 - 4 * x, 10 + 6 * x, 15 + 9 * y]) * scale
    left, right = left.astype(dtype), right.astype(dtype)
    out = pack(left, right, "vr180", fov_deg=90.0)
    side = output_size(W, H, "vr180", fov_deg=90.0)[1]
    assert out.shape == (side, 2 * side, 3) and out.dtype == dtype
    slack = 1 + scale * 9 / 64  # rounding, and a weight up to 1/64 px off (OpenCV keeps 1/32) on the steepest plane
    for eye, view in ((out[:, :side], left), (out[:, side:], right)):
        expected, inside, outside = _vr180_expected(view, side, 90.0)
        assert inside.sum() > side * side / 10 and outside.sum() > side * side / 2  # a 90 x 62 degree view
        assert np.abs(eye[inside].astype(np.float64) - expected[inside]).max() <= slack
        assert eye[outside].max() == 0


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


@pytest.mark.parametrize(
    ("left", "right", "expected"),
    [
        # Worked by hand from the published matrices: sum of a row of the left matrix times the left pixel plus
        # the same row of the right matrix times the right pixel, rounded and clipped to 0..255.
        ((255, 0, 0), (0, 0, 0), (116, 0, 0)),  # 0.456 * 255 = 116.28; G and B rows negative: 0
        ((0, 0, 0), (0, 0, 255), (0, 0, 255)),  # 1.226 * 255 = 312.6, clipped; -0.002 and -0.018 * 255: 0
        ((0, 0, 0), (0, 255, 0), (0, 187, 0)),  # 0.734 * 255 = 187.17; B: -0.113 * 255: 0
        ((255, 255, 255), (0, 0, 0), (255, 0, 0)),  # R: 1.132 * 255
        ((0, 0, 0), (255, 255, 255), (0, 255, 255)),  # G: 1.094 * 255, B: 1.041 * 255
        ((100, 100, 100), (100, 100, 100), (100, 100, 100)),  # grey stays grey: 99.9, 100.0, 100.0
        ((200, 100, 50), (10, 20, 30), (148, 5, 28)),  # R 147.75, G 5.32, B 28.45
    ],
)
def test_dubois_anaglyph_of_single_colours_is_the_published_mix(left, right, expected):
    left_view = np.full((2, 2, 3), left, np.uint8)
    right_view = np.full((2, 2, 3), right, np.uint8)
    out = pack(left_view, right_view, "anaglyph_dubois")
    assert out.dtype == np.uint8 and (out == np.array(expected, np.uint8)).all(), out[0, 0]


def test_dubois_anaglyph_applies_the_published_matrices():
    left, right = views()
    expected = _dubois(left, right, 255)
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


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("original_eye", ["none", "right"])
def test_the_render_stages_frames_are_the_packed_views_with_edge_padding(layout, original_eye):
    # Full-size layouts have the views rendered straight into the packed frame: the same frame as packing them.
    from stereo3d.stages.render import stereo_frame
    from stereo3d.stereo.warp import Renderer, StereoSettings

    frame = views()[0]
    near = np.random.default_rng(5).random((6, 10)).astype(np.float32)
    settings = StereoSettings(8, 0.5, 1, original_eye=original_eye)
    options = {"eye_px": 32} if layout == "vr180" else {}
    renderer = Renderer()
    expected = pack(*renderer.render_stereo(frame, near, settings), layout, **options)
    expected = np.pad(expected, ((0, 1), (0, 1), (0, 0)), mode="edge")  # a column and a row, as for odd sides
    np.testing.assert_array_equal(stereo_frame(renderer, frame, near, settings, layout, options, (1, 1)), expected)
