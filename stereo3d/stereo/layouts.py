"""Stereo layouts: how a left and a right view are packed into one frame, what that frame's size is, the filename
tag players key on, and the in-file stereo signalling each layout can carry.

Every layout is a ``Layout`` in ``LAYOUTS``: ``pack(left, right, **options)`` makes the frame and
``size(width, height, **options)`` says its size up front (the encoder needs it before the first frame).
Options are ``fov_deg`` and ``eye_px`` (VR180 only); other layouts ignore them.

In-file signalling, chosen by ``signal`` (``SIGNALS``), and what this ffmpeg writes and reads back:

- ``container`` (default): Matroska ``StereoMode`` (``stereo_mode`` metadata: left_right, top_bottom,
  right_left). Remuxed into MP4 it becomes stream side data, which ffmpeg writes as the Google ``st3d`` box
  (side by side / top-bottom; what YouTube and Quest players read) when ``-strict unofficial`` is given, plus
  Apple's ``vexu`` box, which is what ffmpeg itself reads back ("unspecified, packed"). Works for every codec.
- ``sei``: an H.264 frame-packing arrangement SEI (x264 ``frame-packing`` 3 = side by side, 4 = top-bottom) on
  key frames, for TVs and hardware players that read the bitstream. x264 always writes "frame 0 is the left
  view", so cross-eyed (right first) gets none rather than a wrong one; x265 and NVENC offer no such SEI (an
  unknown ``-x265-params`` key is only warned about), so other codecs get nothing.
- Not both: ffmpeg 7-9 refuse to decode a stream that carries the packing twice (container side data and the
  SEI both land on each frame: "File exists"), which would break every later ffmpeg step and many tools.
- ``none``: the filename tag only.

Anaglyph frames are meant to be watched as flat pictures through glasses: never signalled (a player that
honoured it would split them). VR180: ffmpeg cannot attach a spherical (equirectangular) projection from the
command line, so only the side-by-side packing is signalled; VR players go by the ``_180x180_LR`` tag.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import cv2
import numpy as np

from stereo3d.io.codecs import get_codec

# Eric Dubois' least-squares red-cyan anaglyph matrices (rows R, G, B of the output; columns R, G, B of the
# eye), as published on his site and used by ffmpeg's stereo3d filter (arcd). Applied to the coded RGB values.
DUBOIS_LEFT = np.array([[0.456, 0.500, 0.176], [-0.040, -0.038, -0.016], [-0.015, -0.021, -0.005]], dtype=np.float32)
DUBOIS_RIGHT = np.array([[-0.043, -0.088, -0.002], [0.378, 0.734, -0.018], [-0.072, -0.113, 1.226]], dtype=np.float32)
VR180_MAX_EYE_PX = 2880  # 5760x2880: the common VR180 delivery size; larger overwhelms headset decoders
VR180_FOV_DEG = 90.0
SIGNALS = ("container", "sei", "none")


@dataclass(frozen=True)
class Layout:
    name: str
    tag: str  # the player filename tag (before the extension)
    pack: Callable[..., np.ndarray]
    size: Callable[..., tuple[int, int]]
    frame_packing: int | None  # H.264 frame-packing SEI arrangement type (x264 --frame-packing), None = none
    stereo_mode: str | None  # Matroska StereoMode as ffmpeg names it (also becomes the MP4 st3d box)
    # Config keys of the render section this layout reads, and the pack/size keyword each becomes. Only the
    # chosen layout's keys reach the render stage, so another layout's setting never reruns it.
    options: Mapping[str, str] = field(default_factory=dict)
    # Layouts that keep both views whole: ``eyes(frame, width, height)`` gives the (left, right) regions of a
    # packed frame, so the renderer draws into them directly instead of packing a copy afterwards.
    eyes: Callable[[np.ndarray, int, int], tuple[np.ndarray, np.ndarray]] | None = None


def full_sbs(left: np.ndarray, right: np.ndarray, **_) -> np.ndarray:
    """Left | right, each eye at full resolution: ``[H, 2W]``."""
    return np.concatenate([left, right], axis=1)


def _side_by_side_eyes(frame: np.ndarray, width: int, height: int) -> tuple[np.ndarray, np.ndarray]:
    return frame[:height, :width], frame[:height, width : 2 * width]


def half_sbs(left: np.ndarray, right: np.ndarray, **_) -> np.ndarray:
    """Left | right, each eye squeezed to half width: ``[H, W]`` (players stretch it back)."""
    height, width = left.shape[:2]
    half = width // 2
    return np.concatenate([_resize(left, half, height), _resize(right, half, height)], axis=1)


def full_tb(left: np.ndarray, right: np.ndarray, **_) -> np.ndarray:
    """Left over right, each eye at full resolution: ``[2H, W]``."""
    return np.concatenate([left, right], axis=0)


def _top_bottom_eyes(frame: np.ndarray, width: int, height: int) -> tuple[np.ndarray, np.ndarray]:
    return frame[:height, :width], frame[height : 2 * height, :width]


def half_tb(left: np.ndarray, right: np.ndarray, **_) -> np.ndarray:
    """Left over right, each eye squeezed to half height: ``[H, W]``."""
    height, width = left.shape[:2]
    half = height // 2
    return np.concatenate([_resize(left, width, half), _resize(right, width, half)], axis=0)


def cross_eyed(left: np.ndarray, right: np.ndarray, **_) -> np.ndarray:
    """Right | left at full resolution, for free viewing with crossed eyes: ``[H, 2W]``."""
    return np.concatenate([right, left], axis=1)


def _cross_eyed_eyes(frame: np.ndarray, width: int, height: int) -> tuple[np.ndarray, np.ndarray]:
    right, left = _side_by_side_eyes(frame, width, height)
    return left, right


def anaglyph_dubois(left: np.ndarray, right: np.ndarray, **_) -> np.ndarray:
    """Red-cyan anaglyph by Dubois' matrices (least retinal rivalry, colours approximated): ``[H, W]``."""
    both = cv2.merge([*cv2.split(left), *cv2.split(right)])  # 6 channels: one transform does both matrices
    return cv2.transform(both, np.concatenate([DUBOIS_LEFT, DUBOIS_RIGHT], axis=1))


def anaglyph_color(left: np.ndarray, right: np.ndarray, **_) -> np.ndarray:
    """Plain colour red-cyan anaglyph: red from the left eye, green and blue from the right: ``[H, W]``."""
    out = right.copy()
    out[:, :, 0] = left[:, :, 0]
    return out


def vr180(left: np.ndarray, right: np.ndarray, fov_deg: float = VR180_FOV_DEG, eye_px: int = 0, **_) -> np.ndarray:
    """Each eye's rectilinear view placed on a half-equirectangular (180 x 180 degree) image, side by side:
    ``[E, 2E]``. The projection: output pixel (i, j) of an eye looks at longitude ``(i + 1/2) / E * 180 - 90``
    degrees and latitude ``90 - (j + 1/2) / E * 180``; the source frame is a pinhole view straight ahead whose
    horizontal field of view is ``fov_deg``; directions outside it are black."""
    height, width = left.shape[:2]
    side = vr180_eye_px(width, height, fov_deg, eye_px)
    map_x, map_y = _equirect_maps(width, height, side, float(fov_deg))
    out = np.zeros((side, 2 * side, 3), left.dtype)
    for n, eye in enumerate((left, right)):
        cv2.remap(eye, map_x, map_y, cv2.INTER_LINEAR, dst=out[:, n * side : (n + 1) * side],
                  borderMode=cv2.BORDER_CONSTANT, borderValue=0)  # fmt: skip
    return out


def vr180_eye_px(width: int, height: int, fov_deg: float = VR180_FOV_DEG, eye_px: int = 0) -> int:
    """Side of one eye's square in VR180: ``eye_px`` when given, else as many pixels per degree as the source has
    at its centre (pi * focal length), at most ``VR180_MAX_EYE_PX``; always even (4:2:0 chroma)."""
    if not 0 < fov_deg < 180:
        raise ValueError(f"VR180 field of view must lie strictly between 0 and 180 degrees, not {fov_deg}")
    if eye_px <= 0:
        focal = (width / 2) / math.tan(math.radians(fov_deg) / 2)
        eye_px = min(round(math.pi * focal), VR180_MAX_EYE_PX)
    return max(2, int(eye_px) // 2 * 2)


def _vr180_size(width: int, height: int, fov_deg: float = VR180_FOV_DEG, eye_px: int = 0, **_) -> tuple[int, int]:
    side = vr180_eye_px(width, height, fov_deg, eye_px)
    return 2 * side, side


LAYOUTS: dict[str, Layout] = {
    layout.name: layout
    for layout in (
        Layout(
            "full_sbs",
            "_LRF_Full_SBS",
            full_sbs,
            lambda w, h, **_: (2 * w, h),
            3,
            "left_right",
            eyes=_side_by_side_eyes,
        ),  # fmt: skip
        Layout("half_sbs", "_LR", half_sbs, lambda w, h, **_: (2 * (w // 2), h), 3, "left_right"),
        Layout(
            "full_tb", "_TBF_fulltb", full_tb, lambda w, h, **_: (w, 2 * h), 4, "top_bottom", eyes=_top_bottom_eyes
        ),  # fmt: skip
        Layout("half_tb", "_TB", half_tb, lambda w, h, **_: (w, 2 * (h // 2)), 4, "top_bottom"),
        Layout(
            "cross_eyed",
            "_RLF_cross",
            cross_eyed,
            lambda w, h, **_: (2 * w, h),
            None,
            "right_left",
            eyes=_cross_eyed_eyes,
        ),  # fmt: skip
        Layout("anaglyph_dubois", "_Anaglyph_dubois", anaglyph_dubois, lambda w, h, **_: (w, h), None, None),
        Layout("anaglyph_color", "_Anaglyph_color", anaglyph_color, lambda w, h, **_: (w, h), None, None),
        Layout(
            "vr180",
            "_180x180_LR",
            vr180,
            _vr180_size,
            3,
            "left_right",
            {"vr180_fov_deg": "fov_deg", "vr180_eye_px": "eye_px"},
        ),  # fmt: skip
    )
}
LAYOUT_TAGS = {name: layout.tag for name, layout in LAYOUTS.items()}
LAYOUT_OPTION_KEYS = frozenset(key for layout in LAYOUTS.values() for key in layout.options)


def layout_options(name: str, render: dict) -> dict:
    """The pack/size keywords of layout ``name`` from a config ``render`` section (empty for most layouts)."""
    return {keyword: render[key] for key, keyword in get_layout(name).options.items() if key in render}


def get_layout(name: str) -> Layout:
    try:
        return LAYOUTS[name]
    except KeyError:
        raise ValueError(f"unknown layout {name!r} (valid: {', '.join(LAYOUTS)})") from None


def pack(left: np.ndarray, right: np.ndarray, layout: str, **options) -> np.ndarray:
    """Pack two views into one frame of ``layout`` (options: ``fov_deg``, ``eye_px`` for VR180)."""
    return get_layout(layout).pack(left, right, **options)


def output_size(width: int, height: int, layout: str, **options) -> tuple[int, int]:
    """``(width, height)`` of ``layout``'s frames for views of ``width`` x ``height``."""
    return get_layout(layout).size(width, height, **options)


def encoder_args(layout: str, codec: str, signal: str = "container") -> list[str]:
    """Encoder options that signal the packing inside the bitstream (``signal="sei"``, for the encoders whose row
    in ``stereo3d.io.codecs`` can write the frame-packing SEI: libx264)."""
    arrangement = _check_signal(layout, signal).frame_packing
    writes = get_codec(codec).frame_packing
    if signal != "sei" or arrangement is None or writes is None:
        return []
    return writes(arrangement)


def container_args(layout: str, suffix: str, signal: str = "container") -> list[str]:
    """Muxer options that signal the packing in the container (``signal="container"``: Matroska StereoMode;
    see the module docstring for how it reaches an MP4)."""
    mode = _check_signal(layout, signal).stereo_mode
    if signal != "container" or mode is None or suffix.lower() not in (".mkv", ".webm"):
        return []
    return ["-metadata:s:v:0", f"stereo_mode={mode}"]


def _check_signal(layout: str, signal: str) -> Layout:
    if signal not in SIGNALS:
        raise ValueError(f"unknown stereo signalling {signal!r} (valid: {', '.join(SIGNALS)})")
    return get_layout(layout)


def _resize(image: np.ndarray, width: int, height: int) -> np.ndarray:
    return cv2.resize(image, (width, height), interpolation=cv2.INTER_AREA)


@functools.lru_cache(maxsize=4)
def _equirect_maps(width: int, height: int, side: int, fov_deg: float) -> tuple[np.ndarray, np.ndarray]:
    """Source pixel coordinates of every output pixel of one VR180 eye (computed once per size)."""
    angles = (np.arange(side, dtype=np.float64) + 0.5) / side * np.pi - np.pi / 2
    longitude = angles[None, :]
    latitude = -angles[:, None]  # row 0 looks up
    dx = np.cos(latitude) * np.sin(longitude)
    dy = np.sin(latitude) * np.ones_like(longitude)
    dz = np.cos(latitude) * np.cos(longitude)
    focal = (width / 2) / math.tan(math.radians(fov_deg) / 2)
    ahead = dz > 1e-9
    safe = np.where(ahead, dz, 1.0)
    map_x = np.where(ahead, (width - 1) / 2 + focal * dx / safe, -1e6).astype(np.float32)
    map_y = np.where(ahead, (height - 1) / 2 - focal * dy / safe, -1e6).astype(np.float32)
    map_x.setflags(write=False)
    map_y.setflags(write=False)
    return map_x, map_y
