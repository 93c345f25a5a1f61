"""Ground truth for what the viewer sees: scenes with exact depth, and the exact views of the two eyes.

Each scene is a few textured surfaces in world coordinates (planar rectangles at any orientation, and spheres),
each with its own velocity, seen by a moving camera. Every view is ray-cast, never warped: the source (centre)
camera's frame and depth, and the left and right eyes of a parallel camera pair with shifted sensors, which is
exactly the geometry the renderer's parallax formula models (``stereo3d.stereo.warp.Parallax``): a point at
distance ``z`` appears ``P(z) / 2`` right of its source position in the left eye and ``P(z) / 2`` left of it in the
right eye, with ``P(z) = divergence_px * (near(z) - zero_plane)`` and ``near`` the inverse depth normalised over
the scene's ``[z_near, z_far]``. So the renderer, given the true near map, should reproduce the eyes exactly
wherever the source camera sees what they see.

Pixels integrate the scene as a camera's do: each is the mean of ``samples`` x ``samples`` rays over its area
(textures have hard edges too: stripes, checks, thin poles). Each eye pixel is classed by where its rays land:
``VISIBLE`` (every ray hits a point the source camera sees), ``HOLE`` (no ray does: a disocclusion, what the
source never showed), ``OUTSIDE`` (some ray's point lies beyond the source frame's edge: nobody can know it), or
``EDGE`` (a mix of seen and hidden: the boundary of a hole). Scores take the classes apart
(``stereo3d.qc.viewing``).

The surfaces, cameras and textures are plain arrays, and the ray caster is compiled by numba: a 960x540 frame with
its two eyes takes about a second on one core.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
from numba import njit, prange

# Eye pixel classes.
VISIBLE, HOLE, EDGE, OUTSIDE = 0, 1, 2, 3

# Surface kinds (column 0 of a surface row).
_QUAD, _SPHERE = 0, 1
# A surface row: kind, origin xyz, axis U xyz, axis V xyz (quads: the rectangle O + a U + b V, a, b in [0, 1];
# spheres: centre, radius in U[0]), velocity xyz (world units per frame), texture row index.
_ROW = 14
# A texture row: base rgb, check size (world units; 0 = none), check amplitude, stripe period (0 = none), stripe
# amplitude, then _WAVES waves of (amplitude r, g, b, kx, ky, phase) over the surface's (s, t) coordinates, then the
# grain's finest cell (0 = none), its amplitude and its seed.
_WAVES = 10
_GRAIN = 7 + 6 * _WAVES
_GRAIN_OCTAVES = 4  # the grain's cells: its finest, and 2, 4 and 8 times as large, at equal amplitude
_TEX = _GRAIN + 3


@dataclass(frozen=True)
class Surface:
    """A quad ``origin + a * u + b * v`` (``a, b`` in [0, 1], ``u`` perpendicular to ``v``) or a sphere (``radius``
    > 0: centred on ``origin``), moving by ``velocity`` world units per frame, textured by ``texture``."""

    origin: tuple[float, float, float]
    u: tuple[float, float, float] = (0.0, 0.0, 0.0)
    v: tuple[float, float, float] = (0.0, 0.0, 0.0)
    radius: float = 0.0
    velocity: tuple[float, float, float] = (0.0, 0.0, 0.0)
    texture: int = 0  # seed of the surface's texture
    check: float = 0.0  # side of a checker pattern (world units; 0 = none)
    stripes: float = 0.0  # period of hard-edged stripes along the surface's first axis (0 = none)
    detail: float = 1.0  # scale of the texture's waves (world units per radian at 1)
    # Side of the finest cell of a grain (world units; 0 = none): value noise over four octaves, as fine as a pixel
    # where it is about a pixel on screen: the fine texture of photographs (foliage, gravel, bark), which the waves
    # alone lack, and which the warp's resampling and a fill's guess are measured on.
    grain: float = 0.0
    subject: bool = False  # what a viewer looks at (the shots' known subject, for convergence)


@dataclass(frozen=True)
class Scene:
    """Surfaces seen by a camera at ``camera`` (world units; y grows downward, z away from the camera) moving by
    ``camera_velocity`` per frame, over ``frames`` frames, depths within ``[z_near, z_far]``."""

    surfaces: tuple[Surface, ...]
    z_near: float
    z_far: float
    frames: int
    camera: tuple[float, float, float] = (0.0, 0.0, 0.0)
    camera_velocity: tuple[float, float, float] = (0.0, 0.0, 0.0)
    focal: float = 0.9  # focal length in frame widths (0.9: a 58-degree horizontal field of view)
    name: str = "scene"
    # The camera as a photograph's: its lens and demosaicing soften the picture (a Gaussian of this sigma, px; 0 =
    # none), and each camera (the source and either eye) adds its own sensor noise (this standard deviation, grey
    # levels). A real right eye is another camera's picture: no warp of the left one can guess its noise.
    blur_px: float = 0.0
    noise: float = 0.0


@dataclass(frozen=True)
class Rig:
    """The stereo geometry the truth is rendered for, in the renderer's terms: the parallax
    ``divergence_px * (near - zero_plane)`` between the eyes, each eye taking half of it."""

    divergence_pct: float = 2.0
    convergence: float = 0.25

    @property
    def zero_plane(self) -> float:
        return 1.0 - self.convergence


@dataclass
class TruthFrame:
    """One frame of a scene: the source view and its exact near map, both eyes and their pixel classes, and the
    subject's mask in the source view (where the scene names one)."""

    source: np.ndarray  # [H, W, 3] uint8
    near: np.ndarray  # [H, W] float32, normalised inverse depth at each pixel's centre (larger = nearer)
    left: np.ndarray
    right: np.ndarray
    left_class: np.ndarray  # [H, W] uint8: VISIBLE, HOLE, EDGE, OUTSIDE
    right_class: np.ndarray
    subject: np.ndarray = field(default=None)  # [H, W] bool
    # [H, W] bool: the eye's pixel sees only surfaces that do not move, through a camera that does not move (its
    # truth is the same in the next frame where that is so too)
    left_static: np.ndarray = field(default=None)
    right_static: np.ndarray = field(default=None)


def render_frame(scene: Scene, index: int, width: int, height: int, rig: Rig = Rig(), samples: int = 3,
                 eyes: bool = True) -> TruthFrame:  # fmt: skip
    """Frame ``index`` of ``scene`` at ``width`` x ``height``, ray-cast with ``samples`` x ``samples`` rays per pixel
    (the eyes only where ``eyes``)."""
    surfaces, textures = _arrays(scene)
    focal = scene.focal * width
    camera = np.array(scene.camera, np.float64) + index * np.array(scene.camera_velocity, np.float64)
    inv_near, inv_far = 1.0 / scene.z_near, 1.0 / scene.z_far
    divergence_px = rig.divergence_pct / 100.0 * width
    gain = divergence_px / (inv_near - inv_far)  # P(z) = gain / z + offset
    offset = -gain * inv_far - divergence_px * rig.zero_plane
    baseline = gain / focal
    source = np.empty((height, width, 3), np.float32)
    depth = np.empty((height, width), np.float64)
    subject = np.zeros((height, width), np.bool_)
    _cast_source(surfaces, textures, float(index), camera, focal, width, height, samples, source, depth, subject)
    near = ((1.0 / depth - inv_far) / (inv_near - inv_far)).astype(np.float32)
    frame = TruthFrame(_photograph(source, scene, index, 0), near, None, None, None, None, subject)
    if eyes:
        views = []
        for side in (-1.0, 1.0):  # left eye: camera at -b/2, sensor shifted by +offset/2
            eye = np.empty((height, width, 3), np.float32)
            classes = np.empty((height, width), np.uint8)
            static = np.empty((height, width), np.bool_)
            _cast_eye(surfaces, textures, float(index), camera, focal, width, height, samples, side * baseline / 2,
                      -side * offset / 2, eye, classes, static)  # fmt: skip
            static &= not any(scene.camera_velocity)
            views.append((_photograph(eye, scene, index, 1 if side < 0 else 2), classes, static))
        (frame.left, frame.left_class, frame.left_static), (frame.right, frame.right_class, frame.right_static) = views
    return frame


def parallax_px(near: np.ndarray, width: int, rig: Rig) -> np.ndarray:
    """The parallax between the eyes (px, + = in front of the screen) of a near map under ``rig``."""
    return (np.asarray(near, np.float32) - np.float32(rig.zero_plane)) * np.float32(rig.divergence_pct / 100 * width)


# --- scenes --------------------------------------------------------------------------------------------------


def street(frames: int = 24) -> Scene:
    """A street: a ground plane to a far wall, a wall receding on the left, boxes, a sphere and thin poles in
    front, some moving, while the camera trucks right and dollies in (so that each hole often shows background
    that nearby frames saw)."""
    return Scene(
        name="street",
        frames=frames,
        z_near=1.8,
        z_far=40.0,
        camera_velocity=(0.03, 0.0, 0.015),
        surfaces=(
            Surface((-60, -40, 40), (120, 0, 0), (0, 60, 0), texture=1, check=2.5, detail=0.35),  # far wall
            Surface((-60, 1.6, 1.0), (120, 0, 0), (0, 0, 39.0), texture=2, stripes=0.8, detail=0.08),  # ground
            Surface((-3.5, -4, 3), (0, 0, 30), (0, 5.6, 0), texture=3, check=0.6, detail=0.06),  # receding wall
            Surface(
                (-1.6, -0.9, 7), (1.4, 0, 0), (0, 2.5, 0), velocity=(0.02, 0, 0), texture=4, stripes=0.25, detail=0.03
            ),  # fmt: skip
            Surface(
                (0.9, -0.4, 10), (1.8, 0, 0), (0, 2.0, 0), velocity=(-0.03, 0, 0), texture=5, check=0.4, detail=0.05
            ),  # fmt: skip
            Surface((0.3, 0.55, 3.6), radius=0.5, velocity=(0.01, 0, -0.01), texture=6, detail=0.02),
            Surface((-0.45, -3, 3.0), (0.02, 0, 0), (0, 4.6, 0), texture=7),  # thin pole, ~4 px at 960
            Surface((1.35, -3, 4.5), (0.008, 0, 0), (0, 4.6, 0), texture=8),  # thinner pole, ~1.5 px
            Surface((0.75, -2, 2.2), (0.12, 0, 0), (0, 3.6, 0), texture=9, stripes=0.03),  # a post close by
        ),
    )


def still_camera(frames: int = 24) -> Scene:
    """The street seen from a camera on a tripod, the boxes and the sphere moving faster: the background behind
    each hole is still, and the moving objects uncover it, so a fill can be checked for flicker and for taking
    what the other frames show."""
    street_scene = street(frames)
    faster = []
    for surface in street_scene.surfaces:
        if any(surface.velocity):
            surface = replace(surface, velocity=tuple(3.0 * v for v in surface.velocity))
        faster.append(surface)
    return replace(street_scene, name="still camera", camera_velocity=(0.0, 0.0, 0.0), surfaces=tuple(faster))


def garden(frames: int = 24) -> Scene:
    """A garden as a photograph shows it, the harder case (issue 46): every surface grained down to the pixel
    (foliage, bark, gravel), a fence of slats and branches a few pixels wide or less before a hedge, a tree trunk,
    a boulder whose depth falls away to its outline, a wall receding; the camera trucks slowly. Its holes border
    fine texture and thin structures, as a photograph's do, where the street's border smooth waves."""
    slats = tuple(
        Surface((-1.15 + 0.2 * k, 0.2, 2.2), (0.05, 0, 0), (0, 1.4, 0), texture=60 + k, detail=0.02, grain=0.004)
        for k in range(5)
    )
    branches = tuple(
        Surface((x, -3.0, z), (w, 0, 0), (0, 4.6, 0), texture=70 + k, detail=0.02, grain=0.003)
        for k, (x, z, w) in enumerate(((-1.1, 2.6, 0.012), (-0.15, 3.1, 0.02), (1.55, 5.0, 0.008), (2.0, 2.3, 0.03)))
    )
    return Scene(
        name="garden",
        frames=frames,
        blur_px=0.6,
        noise=2.0,
        z_near=1.6,
        z_far=30.0,
        camera_velocity=(0.01, 0.0, 0.0),
        surfaces=(
            Surface((-40, -25, 30), (80, 0, 0), (0, 27, 0), texture=41, detail=0.5, grain=0.03),  # far hedge
            Surface((-40, 1.6, 1.0), (80, 0, 0), (0, 0, 29.0), texture=42, detail=0.1, grain=0.01),  # gravel
            Surface((-2.6, -0.6, 8), (2.4, 0, 0), (0, 2.2, 0), texture=43, detail=0.05, grain=0.01),  # a bush
            Surface((0.55, -3, 4.2), (0.35, 0, 0), (0, 4.6, 0), texture=44, detail=0.03, grain=0.005),  # trunk
            Surface((-0.55, 1.0, 3.4), radius=0.6, texture=45, detail=0.02, grain=0.004),  # boulder
            Surface((2.2, -4, 3.5), (0, 0, 20), (0, 5.6, 0), texture=46, detail=0.06, grain=0.008),  # wall
            Surface((-2.2, -0.75, 3.6), (1.6, 0, 0), (0, 0.02, 0), texture=47, grain=0.003),  # a level branch
            *slats,
            *branches,
        ),
    )


def shots() -> list[Scene]:
    """Shots with a known subject (``Surface.subject``), as films cut them: a close-up (a face-sized sphere before
    a near background), a medium shot (a person-sized box walking across a room, off centre), and a landscape
    (everything far, a rider in the middle distance). Each holds its subject at a steady distance; the camera
    drifts."""
    return [
        Scene(
            name="close-up",
            frames=36,
            z_near=0.6,
            z_far=12.0,
            camera_velocity=(0.002, 0.0, 0.0),
            surfaces=(
                Surface((-20, -15, 12), (40, 0, 0), (0, 30, 0), texture=11, check=1.2, detail=0.2),
                Surface((-6, 1.0, 0.5), (12, 0, 0), (0, 0, 11.5), texture=12, detail=0.1),
                Surface((0.05, -0.05, 1.2), radius=0.25, texture=13, detail=0.01, subject=True),
                Surface((-0.9, -0.6, 0.75), (0.2, 0, 0), (0, 1.6, 0), texture=14, stripes=0.02),  # out of focus
            ),
        ),
        Scene(
            name="medium",
            frames=48,
            z_near=1.0,
            z_far=15.0,
            camera_velocity=(0.01, 0.0, 0.0),
            surfaces=(
                Surface((-20, -10, 15), (40, 0, 0), (0, 20, 0), texture=21, check=1.0, detail=0.3),
                Surface((-10, 1.6, 1.0), (20, 0, 0), (0, 0, 14), texture=22, stripes=0.5, detail=0.1),
                Surface(
                    (-2.5, -1.0, 4.0),
                    (0.7, 0, 0),
                    (0, 2.6, 0),
                    velocity=(0.015, 0, 0),
                    texture=23,
                    detail=0.03,
                    subject=True,
                ),  # fmt: skip
                Surface((1.5, -1.5, 8), (1.5, 0, 0), (0, 3.1, 0), texture=24, check=0.3),
                Surface((-0.8, 0.9, 1.4), (0.5, 0, 0), (0, 0.7, 0), texture=25, detail=0.02),  # a table edge
            ),
        ),
        Scene(
            name="landscape",
            frames=36,
            z_near=20.0,
            z_far=400.0,
            camera_velocity=(0.05, 0.0, 0.0),
            surfaces=(
                Surface((-600, -300, 400), (1200, 0, 0), (0, 320, 0), texture=31, detail=4.0),
                Surface((-600, 8, 20), (1200, 0, 0), (0, 0, 380), texture=32, stripes=6.0, detail=1.0),
                Surface(
                    (-2, -1, 60), (3, 0, 0), (0, 9, 0), velocity=(0.04, 0, 0), texture=33, detail=0.2, subject=True
                ),  # fmt: skip
                Surface((-80, -25, 250), (50, 0, 0), (0, 33, 0), texture=34, check=6.0),
            ),
        ),
    ]


def subject_near(frame: TruthFrame) -> float:
    """The subject's median near value in a frame (NaN where it is out of view)."""
    if frame.subject is None or not frame.subject.any():
        return float("nan")
    return float(np.median(frame.near[frame.subject]))


# --- arrays and the compiled caster ---------------------------------------------------------------------------


def _arrays(scene: Scene) -> tuple[np.ndarray, np.ndarray]:
    surfaces = np.zeros((len(scene.surfaces), _ROW), np.float64)
    textures = np.zeros((len(scene.surfaces), _TEX), np.float64)
    for row, surface in enumerate(scene.surfaces):
        kind = _SPHERE if surface.radius > 0 else _QUAD
        u = (surface.radius, 0.0, 0.0) if kind == _SPHERE else surface.u
        surfaces[row] = (kind, *surface.origin, *u, *surface.v, *surface.velocity, 1.0 if surface.subject else 0.0)
        rng = np.random.default_rng(surface.texture)
        base = rng.uniform(50, 200, 3)
        waves = []
        for _ in range(_WAVES):
            amplitude = rng.uniform(6, 20) * rng.uniform(0.5, 1.0, 3)
            angle = rng.uniform(0, np.pi)
            # Wave numbers in radians per world unit, log-uniform over five octaves finer than the surface's detail,
            # amplitudes independent of the wave number: equal power per octave, as natural images have (a 1/f
            # amplitude spectrum), down to a few pixels on screen.
            k = np.exp(rng.uniform(np.log(0.5), np.log(16.0))) / surface.detail
            waves.extend([*amplitude, k * np.cos(angle), k * np.sin(angle), rng.uniform(0, 2 * np.pi)])
        textures[row] = (*base, surface.check, 35.0 if surface.check else 0.0, surface.stripes,
                         45.0 if surface.stripes else 0.0, *waves, surface.grain, 70.0 if surface.grain else 0.0,
                         surface.texture)  # fmt: skip
    if surfaces[:, 0].size and np.any(surfaces[:, 0] == _QUAD):
        quads = surfaces[surfaces[:, 0] == _QUAD]
        dots = np.abs(np.einsum("ij,ij->i", quads[:, 4:7], quads[:, 7:10]))
        if np.any(dots > 1e-9):
            raise ValueError("a quad's axes must be perpendicular")
    return surfaces, textures


def _photograph(image: np.ndarray, scene: Scene, index: int, camera: int) -> np.ndarray:
    """A ray-cast picture (float RGB) as ``scene``'s camera ``camera`` (0 the source, 1 the left eye, 2 the right)
    takes it at frame ``index``: softened by its lens, with its own noise, in 8 bits."""
    if scene.blur_px > 0:
        import cv2

        image = cv2.GaussianBlur(image, (0, 0), scene.blur_px, borderType=cv2.BORDER_REFLECT)
    if scene.noise > 0:
        image = image + np.random.default_rng((index, camera)).normal(0.0, scene.noise, image.shape).astype(np.float32)
    return _to_uint8(image)


def _to_uint8(image: np.ndarray) -> np.ndarray:
    return np.clip(np.rint(image), 0, 255).astype(np.uint8)


@njit(cache=True)
def _hit(surfaces, time, ox, oy, oz, dx, dy, dz):
    """The nearest surface a ray meets: (distance along the ray, surface row, s, t), row -1 if none. ``s, t`` are
    the surface's own coordinates (world units) of the point, which its texture is drawn on."""
    best, row, best_s, best_t = np.inf, -1, 0.0, 0.0
    for k in range(surfaces.shape[0]):
        cx = surfaces[k, 1] + time * surfaces[k, 10]
        cy = surfaces[k, 2] + time * surfaces[k, 11]
        cz = surfaces[k, 3] + time * surfaces[k, 12]
        if surfaces[k, 0] == 1:  # sphere
            radius = surfaces[k, 4]
            px, py, pz = ox - cx, oy - cy, oz - cz
            b = px * dx + py * dy + pz * dz
            a = dx * dx + dy * dy + dz * dz
            c = px * px + py * py + pz * pz - radius * radius
            disc = b * b - a * c
            if disc < 0:
                continue
            t = (-b - np.sqrt(disc)) / a
            if t <= 1e-9 or t >= best:
                continue
            hx, hy, hz = px + t * dx, py + t * dy, pz + t * dz
            best, row = t, k
            best_s = radius * np.arctan2(hx, -hz)  # longitude and latitude, in world units on the surface
            best_t = radius * np.arcsin(min(1.0, max(-1.0, hy / radius)))
        else:
            ux, uy, uz = surfaces[k, 4], surfaces[k, 5], surfaces[k, 6]
            vx, vy, vz = surfaces[k, 7], surfaces[k, 8], surfaces[k, 9]
            nx, ny, nz = uy * vz - uz * vy, uz * vx - ux * vz, ux * vy - uy * vx
            denom = nx * dx + ny * dy + nz * dz
            if denom == 0:
                continue
            t = (nx * (cx - ox) + ny * (cy - oy) + nz * (cz - oz)) / denom
            if t <= 1e-9 or t >= best:
                continue
            rx, ry, rz = ox + t * dx - cx, oy + t * dy - cy, oz + t * dz - cz
            uu = ux * ux + uy * uy + uz * uz
            vv = vx * vx + vy * vy + vz * vz
            a = (rx * ux + ry * uy + rz * uz) / uu
            b = (rx * vx + ry * vy + rz * vz) / vv
            if a < 0 or a >= 1 or b < 0 or b >= 1:
                continue
            best, row, best_s, best_t = t, k, a * np.sqrt(uu), b * np.sqrt(vv)
    return best, row, best_s, best_t


@njit(cache=True)
def _shade(textures, row, s, t, out, index):
    """Adds the texture of surface ``row`` at its coordinates ``(s, t)`` to ``out[index]`` (RGB)."""
    tex = textures[row]
    shade = 0.0
    if tex[3] > 0:  # checks
        shade += tex[4] if (np.floor(s / tex[3]) + np.floor(t / tex[3])) % 2 == 0 else -tex[4]
    if tex[5] > 0:  # hard-edged stripes along s
        shade += tex[6] if (s / tex[5]) % 1.0 < 0.5 else -tex[6]
    for channel in range(3):
        out[index, channel] += tex[channel] + shade
    for w in range(_WAVES):
        base = 7 + 6 * w
        wave = np.sin(tex[base + 3] * s + tex[base + 4] * t + tex[base + 5])
        for channel in range(3):
            out[index, channel] += tex[base + channel] * wave
    if tex[_GRAIN] > 0:
        grain = 0.0
        cell = tex[_GRAIN]
        for octave in range(_GRAIN_OCTAVES):
            grain += _value_noise(s / cell, t / cell, int(tex[_GRAIN + 2]) * 8 + octave)
            cell *= 2.0
        # Albedo: the grain scales the surface's colour, as shading and material do in a photograph.
        for channel in range(3):
            out[index, channel] += tex[_GRAIN + 1] / _GRAIN_OCTAVES * grain * tex[channel] / 128.0


@njit(cache=True, inline="always")
def _lattice(i, j, seed):
    """A pseudo-random value in [-1, 1] at integer lattice point (i, j) of grain ``seed`` (a hash: the same point
    of a surface has the same value seen from any camera)."""
    h = (np.uint64(i & 0xFFFFFFFF) * np.uint64(0x9E3779B1)) ^ (np.uint64(j & 0xFFFFFFFF) * np.uint64(0x85EBCA77))
    h ^= np.uint64(seed) * np.uint64(0xC2B2AE3D27D4EB4F)
    h ^= h >> np.uint64(29)
    h *= np.uint64(0xBF58476D1CE4E5B9)
    h ^= h >> np.uint64(32)
    return (h & np.uint64(0xFFFFFF)) / 8388607.5 - 1.0


@njit(cache=True, inline="always")
def _value_noise(x, y, seed):
    """Bilinear value noise at (x, y) (lattice units) of grain ``seed``: in [-1, 1]."""
    i, j = int(np.floor(x)), int(np.floor(y))
    fx, fy = x - i, y - j
    top = _lattice(i, j, seed) * (1.0 - fx) + _lattice(i + 1, j, seed) * fx
    bottom = _lattice(i, j + 1, seed) * (1.0 - fx) + _lattice(i + 1, j + 1, seed) * fx
    return top * (1.0 - fy) + bottom * fy


@njit(parallel=True, cache=True)
def _cast_source(surfaces, textures, time, camera, focal, width, height, samples, image, depth, subject):
    """The source camera's view (the mean of ``samples``**2 rays per pixel), the depth at each pixel's centre and
    the subject surface's pixels."""
    weight = 1.0 / (samples * samples)
    for y in prange(height):
        row_image = np.zeros((width, 3))
        for x in range(width):
            for sy in range(samples):
                for sx in range(samples):
                    u = x + (sx + 0.5) / samples - 0.5 * width
                    v = y + (sy + 0.5) / samples - 0.5 * height
                    t, k, s, q = _hit(surfaces, time, camera[0], camera[1], camera[2], u / focal, v / focal, 1.0)
                    if k >= 0:
                        _shade(textures, k, s, q, row_image, x)
            dist, k, _, _ = _hit(surfaces, time, camera[0], camera[1], camera[2], (x + 0.5 - 0.5 * width) / focal,
                                 (y + 0.5 - 0.5 * height) / focal, 1.0)  # fmt: skip
            depth[y, x] = dist if k >= 0 else np.inf
            subject[y, x] = k >= 0 and surfaces[k, 13] > 0
            for channel in range(3):
                image[y, x, channel] = row_image[x, channel] * weight


@njit(parallel=True, cache=True)
def _cast_eye(surfaces, textures, time, camera, focal, width, height, samples, offset_x, sensor_shift, image,
              classes, static):  # fmt: skip
    """An eye's view (camera moved by ``offset_x``, sensor shifted by ``sensor_shift`` px), each pixel's class
    (whether the source camera sees the points its rays meet), and whether it sees only surfaces that do not
    move."""
    weight = 1.0 / (samples * samples)
    ox, oy, oz = camera[0] + offset_x, camera[1], camera[2]
    for y in prange(height):
        row_image = np.zeros((width, 3))
        for x in range(width):
            seen, hidden, outside = 0, 0, 0
            still = True
            for sy in range(samples):
                for sx in range(samples):
                    u = x + (sx + 0.5) / samples - 0.5 * width - sensor_shift
                    v = y + (sy + 0.5) / samples - 0.5 * height
                    dx, dy = u / focal, v / focal
                    t, k, s, q = _hit(surfaces, time, ox, oy, oz, dx, dy, 1.0)
                    if k < 0:
                        outside += 1
                        continue
                    _shade(textures, k, s, q, row_image, x)
                    if surfaces[k, 10] != 0 or surfaces[k, 11] != 0 or surfaces[k, 12] != 0:
                        still = False
                    # Where the source camera sees this point, and whether it is the first thing it sees there.
                    px, py, pz = ox + t * dx - camera[0], oy + t * dy - camera[1], oz + t * 1.0 - camera[2]
                    su, sv = focal * px / pz + 0.5 * width, focal * py / pz + 0.5 * height
                    if su < 0 or su >= width or sv < 0 or sv >= height:
                        outside += 1
                        continue
                    back, _, _, _ = _hit(surfaces, time, camera[0], camera[1], camera[2], px / pz, py / pz, 1.0)
                    if back >= pz * (1.0 - 1e-7):  # (ray length per unit z is the same for both)
                        seen += 1
                    else:
                        hidden += 1
            static[y, x] = still
            if outside:
                classes[y, x] = 3
            elif hidden == 0:
                classes[y, x] = 0
            elif seen == 0:
                classes[y, x] = 1
            else:
                classes[y, x] = 2
            for channel in range(3):
                image[y, x, channel] = row_image[x, channel] * weight
