"""The renderer against analytic truth: a textured scene of fronto-parallel planes at known distances, seen by a
parallel camera pair with shifted sensors (the geometry the parallax formula models). Outside the pixels the
source view cannot know (disocclusions, and scene beyond the frame edge), both views must match the truth to a
PSNR of at least 35 dB."""

from __future__ import annotations

import numpy as np
import pytest

from stereo3d.stereo.warp import Renderer, StereoSettings

WIDTH, HEIGHT = 480, 270
Z_NEAR, Z_FAR = 2.0, 10.0
SETTINGS = StereoSettings(divergence_pct=4.0, convergence=0.5, edge_dilate_px=0)  # exact edges need no growing

# Layers far to near: distance, extent [x0, x1) x [y0, y1) in source pixels (None = everywhere), texture seed.
LAYERS = [
    (10.0, None, 0),  # the back wall
    (5.0, (40, 200, 60, 230), 1),  # a box crossing nothing
    (3.2, (170, 330, 30, 150), 2),  # overlapping the first box and in front of it
    (2.0, (300, 420, 120, 250), 3),  # the nearest one, in front of the second
    (2.6, (-40, 60, 160, 260), 4),  # cut by the left frame edge
]


def near_of(z: float) -> float:
    """Normalised inverse depth (larger = nearer), as the near maps carry it."""
    return (1 / z - 1 / Z_FAR) / (1 / Z_NEAR - 1 / Z_FAR)


def parallax_of(z: float) -> float:
    """Screen parallax in pixels of a plane at distance ``z`` under SETTINGS: f*b*(1/z - 1/z0)."""
    divergence_px = SETTINGS.divergence_pct / 100 * WIDTH
    return (near_of(z) - SETTINGS.zero_plane()) * divergence_px


def texture(seed: int, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """A smooth, band-limited RGB texture defined at any (sub-pixel) position of the source view."""
    rng = np.random.default_rng(seed)
    out = np.empty((*x.shape, 3), np.float64)
    for channel in range(3):
        value = np.full(x.shape, 128.0)
        for _ in range(3):
            wavelength = rng.uniform(9, 24)
            angle = rng.uniform(0, np.pi)
            phase = rng.uniform(0, 2 * np.pi)
            value += 28 * np.sin(2 * np.pi * (x * np.cos(angle) + y * np.sin(angle)) / wavelength + phase)
        out[..., channel] = value
    return out


def covers(extent, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Whether a layer covers continuous source position x (pixel footprints [x - 1/2, x + 1/2))."""
    if extent is None:
        return np.ones(np.broadcast_shapes(x.shape, y.shape), bool)
    x0, x1, y0, y1 = extent
    return (x >= x0 - 0.5) & (x < x1 - 0.5) & (y >= y0) & (y < y1)


def front_layer(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Index of the nearest layer covering each source position (the order of LAYERS is far to near by design,
    except that the last one must be checked by distance, so sort)."""
    order = sorted(range(len(LAYERS)), key=lambda k: -LAYERS[k][0])
    front = np.zeros(np.broadcast_shapes(x.shape, y.shape), int)
    for k in order:
        front = np.where(covers(LAYERS[k][1], x, y), k, front)
    return front


def source_view() -> tuple[np.ndarray, np.ndarray]:
    y, x = np.mgrid[0:HEIGHT, 0:WIDTH].astype(np.float64)
    front = front_layer(x, y)
    frame = np.zeros((HEIGHT, WIDTH, 3))
    near = np.zeros((HEIGHT, WIDTH), np.float32)
    for k, (z, _, seed) in enumerate(LAYERS):
        mask = front == k
        frame[mask] = texture(seed, x, y)[mask]
        near[mask] = near_of(z)
    return np.clip(np.rint(frame), 0, 255).astype(np.uint8), near


def eye_truth(sign: float) -> tuple[np.ndarray, np.ndarray]:
    """The view of one eye (sign +1: left, -1: right) and the mask of pixels the source view also sees."""
    y, u = np.mgrid[0:HEIGHT, 0:WIDTH].astype(np.float64)
    order = sorted(range(len(LAYERS)), key=lambda k: -LAYERS[k][0])
    shown = np.full((HEIGHT, WIDTH), -1)
    at = np.zeros((HEIGHT, WIDTH))
    for k in order:  # painter's algorithm: nearer layers paint over farther ones
        z, extent, _ = LAYERS[k]
        x = u - sign * parallax_of(z) / 2
        hit = covers(extent, x, y)
        shown = np.where(hit, k, shown)
        at = np.where(hit, x, at)
    view = np.zeros((HEIGHT, WIDTH, 3))
    for k, (_, _, seed) in enumerate(LAYERS):
        mask = shown == k
        view[mask] = texture(seed, at, y)[mask]
    # Known to the source view: the point lies inside the frame and is the front-most surface there.
    inside = (at >= -0.5) & (at < WIDTH - 0.5)
    known = inside & (front_layer(np.clip(np.rint(at), 0, WIDTH - 1), y) == shown)
    return np.clip(np.rint(view), 0, 255).astype(np.uint8), known


def psnr(a: np.ndarray, b: np.ndarray, mask: np.ndarray) -> float:
    err = (a.astype(np.float64) - b.astype(np.float64))[mask]
    return float(10 * np.log10(255.0**2 / np.mean(err**2)))


@pytest.fixture(scope="module")
def rendered():
    frame, near = source_view()
    return Renderer().render_stereo(frame, near, SETTINGS)


@pytest.mark.parametrize("eye,sign", [("left", 1.0), ("right", -1.0)])
def test_view_matches_the_analytic_truth_outside_disocclusions(rendered, eye, sign):
    view = rendered[0] if eye == "left" else rendered[1]
    truth, known = eye_truth(sign)
    assert known.mean() > 0.85  # the scene really has disocclusions, but most pixels are comparable
    score = psnr(view, truth, known)
    print(f"{eye} eye: PSNR {score:.2f} dB over {known.mean():.1%} of the pixels")
    assert score >= 35.0


@pytest.mark.parametrize("z", [Z_NEAR, 2.7, 5.0, Z_FAR])
def test_a_plane_lands_where_the_camera_pair_sees_it(z):
    # A white bar at distance z before a black wall, in rows of its own: in each eye its centre must sit where a
    # parallel camera pair with shifted sensors puts it, half the pair's disparity either side of the source view.
    # The pair is worked out from the scene alone: the near map's range spans SETTINGS' divergence, so baseline x
    # focal length is divergence_px / (1/Z_NEAR - 1/Z_FAR); the screen is at the distance whose near value is the
    # zero-parallax plane. The disparity is then baseline x focal x (1/z - 1/z_screen).
    baseline_focal_px = SETTINGS.divergence_pct / 100 * WIDTH / (1 / Z_NEAR - 1 / Z_FAR)
    z_screen = 1 / (SETTINGS.zero_plane() * (1 / Z_NEAR - 1 / Z_FAR) + 1 / Z_FAR)
    disparity = baseline_focal_px * (1 / z - 1 / z_screen)
    frame = np.zeros((40, WIDTH, 3), np.uint8)
    near = np.full((40, WIDTH), near_of(Z_FAR), np.float32)
    frame[10:30, 200:260] = 255
    near[10:30, 200:260] = near_of(z)
    left, right = Renderer().render_stereo(frame, near, SETTINGS)
    for view, sign in ((left, 1), (right, -1)):
        weight = view[20, :, 0].astype(np.float64)
        centre = (weight * np.arange(WIDTH)).sum() / weight.sum()
        # The bar's occluding edge is resampled exactly; its other edge is a disocclusion, filled from the black
        # background, which may miss up to half a pixel of the bar: the centre of 60 px moves by 1/4 px at most.
        assert centre == pytest.approx(229.5 + sign * disparity / 2, abs=0.25 + 1 / 32), (z, sign, disparity)
    assert abs(baseline_focal_px * (1 / Z_NEAR - 1 / z_screen)) > 5  # the nearest plane really moves
