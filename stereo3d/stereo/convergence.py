"""Automatic convergence: the screen plane on what the viewer looks at, shot by shot.

With ``render.convergence: auto`` the zero-parallax plane is planned over the whole video from its near maps,
before any frame is rendered, so that every segment of it renders with the same plane:

1. **The subject of each frame** (``subject_near``): films put their subject near the centre of the frame,
   standing out in front of what is behind it, near the camera, and often moving. Each pixel is weighted by a
   centre prior (a Gaussian of ``CENTRE_SIGMA`` of the frame's size around the centre), by how far it stands in
   front of its surroundings (its near value above their mean), by its nearness and, where the near map changed
   from the previous frame, by motion; the subject is the median near value of the pixels weighing at least
   ``SUBJECT_LEVEL`` of the peak weight. Nothing is downloaded: no saliency network, just the depth.
2. **Eased within a shot, reset at cuts** (``plan``): the subject's near value is smoothed over time by a Gaussian
   of ``EASE_S`` seconds that never reaches across a cut (each shot is smoothed on its own, its ends
   renormalised), so the plane glides inside a shot and takes the new shot's value on its first frame.
3. **Bounded in front of the screen**: no content may come further in front of the screen than
   ``front_limit_pct`` of the frame width. The default, 1 %, is the limit of the BSkyB *Technical Guidelines for
   Plano Stereoscopic (3D) Programme Content* (2010: in front of the screen at most 1 % of the screen width, behind
   it 2 %, a depth budget of 3 %), the broadcast standard later adopted for the BBC's and the 2012 Olympics' 3D.
   The nearest content of a frame (its ``FRONT_PERCENTILE``-th percentile of near) sets a floor on the plane, and
   the floor is spread over time by a cone of slope ``MAX_STEP`` per frame, so that it never jumps; the plane is
   the larger of the eased subject and that floor. Behind the screen the parallax never exceeds
   ``divergence_pct`` (the plane stays within the near maps' 0 .. 1).

The plan is per frame: ``zero_plane`` (the near value at the screen, ``1 - convergence``).
"""

from __future__ import annotations

import cv2
import numpy as np

from stereo3d.stereo.cuts import CutDetector

FRONT_LIMIT_PCT = 1.0  # BSkyB 3D guidelines: content in front of the screen at most 1 % of the screen width
CENTRE_SIGMA = 0.3  # the centre prior's spread, as a share of the frame's width and height
NEARNESS_POWER = 1.0
FIGURE_WINDOW = 0.15  # a figure is nearer than the mean of the surroundings this share of the frame wide
FIGURE_FLOOR = 0.01  # the weight of what stands out from nothing (a flat frame: nearness and centre alone)
SHOT_CUT = 0.1  # picture change (mean grey level, 0..1) that may be a cut (CutDetector: also 3x the recent motion)
MOTION_SCALE = 0.05  # a change of near this large from the previous frame counts as full motion
MOTION_GAIN = 2.0  # full motion multiplies a pixel's weight by 1 + this
# The subject: the pixels weighing at least SUBJECT_LEVEL of the peak weight (the weight that PEAK_SHARE of the
# pixels reach: a few stray pixels do not set it).
PEAK_SHARE = 0.002
SUBJECT_LEVEL = 0.5
EASE_S = 0.5  # sigma of the Gaussian that eases the subject's depth within a shot
FRONT_PERCENTILE = 99.0  # the near value that stands for a frame's nearest content (1 % may come closer)
REDUCED_WIDTH = 160  # near maps are judged at this width (or less): the subject is not a matter of pixels
MAX_STEP = 0.01  # the most the front floor moves per frame (near units: 0.02 % of the width at 2 % divergence)


def subject_near(near: np.ndarray, previous: np.ndarray | None = None) -> float:
    """The near value of what a viewer looks at in one near map (see the module doc)."""
    near = np.nan_to_num(np.asarray(near, dtype=np.float32), nan=0.0)
    height, width = near.shape
    ys = (np.arange(height, dtype=np.float32) + 0.5) / height - 0.5
    xs = (np.arange(width, dtype=np.float32) + 0.5) / width - 0.5
    centre = np.exp(-(ys[:, None] ** 2 + xs[None, :] ** 2) / np.float32(2 * CENTRE_SIGMA**2))
    # A figure stands in front of what is around it; a floor or a wall receding in depth does not (a box blur of a
    # ramp is the ramp).
    size = max(3, int(FIGURE_WINDOW * max(height, width)) | 1)
    figure = np.maximum(near - _local_mean(near, size), 0.0)
    weight = centre * (figure + FIGURE_FLOOR) * np.clip(near, 0.0, 1.0) ** NEARNESS_POWER
    if previous is not None and previous.shape == near.shape:
        change = np.abs(near - np.nan_to_num(np.asarray(previous, np.float32), nan=0.0))
        weight *= 1.0 + MOTION_GAIN * np.clip(change / MOTION_SCALE, 0.0, 1.0)
    if not np.any(weight > 0):
        return float(np.median(near))
    peak = np.quantile(weight, 1.0 - PEAK_SHARE)
    chosen = near[weight >= SUBJECT_LEVEL * peak] if peak > 0 else near
    return float(np.median(chosen))


def _local_mean(values: np.ndarray, size: int) -> np.ndarray:
    """The mean of a ``size`` x ``size`` window around each pixel, the map continued past its edges by odd
    reflection (2 * edge - mirror image): a ramp stays a ramp there, so a floor reaching the frame's bottom does not
    stand out from its own reflection."""
    half = size // 2
    pad_y, pad_x = min(half, values.shape[0] - 1), min(half, values.shape[1] - 1)
    padded = np.pad(values, ((pad_y, pad_y), (pad_x, pad_x)), mode="reflect", reflect_type="odd")
    blurred = cv2.blur(padded, (2 * pad_x + 1, 2 * pad_y + 1), borderType=cv2.BORDER_REPLICATE)
    return blurred[pad_y : pad_y + values.shape[0], pad_x : pad_x + values.shape[1]]


def front_near(near: np.ndarray) -> float:
    """The near value of a frame's nearest content (``FRONT_PERCENTILE``)."""
    values = np.asarray(near, dtype=np.float32)
    values = values[np.isfinite(values)]
    return float(np.percentile(values, FRONT_PERCENTILE)) if values.size else 0.0


def frame_plane(near: np.ndarray, divergence_pct: float, front_limit_pct: float = FRONT_LIMIT_PCT) -> float:
    """The zero plane of one frame alone (no shot to ease over): on its subject, above its front floor."""
    near = np.asarray(near, np.float32)
    if near.shape[1] > REDUCED_WIDTH:
        height = max(1, round(near.shape[0] * REDUCED_WIDTH / near.shape[1]))
        near = cv2.resize(np.nan_to_num(near, nan=0.0), (REDUCED_WIDTH, height), interpolation=cv2.INTER_AREA)
    floor = front_near(near) - (front_limit_pct / divergence_pct if divergence_pct > 0 else np.inf)
    return float(np.clip(max(subject_near(near), floor), 0.0, 1.0))


def shots_of(changes: np.ndarray, threshold: float = SHOT_CUT) -> np.ndarray:
    """Each frame's shot number from the picture changes between consecutive frames (``CutDetector``)."""
    detector = CutDetector(threshold)
    shot, out = 0, np.zeros(len(changes), np.int64)
    for index, change in enumerate(changes):
        shot += int(detector.step(change) and index > 0)
        out[index] = shot
    return out


def plan(subjects: np.ndarray, fronts: np.ndarray, shots: np.ndarray, fps: float, divergence_pct: float,
         front_limit_pct: float = FRONT_LIMIT_PCT) -> np.ndarray:  # fmt: skip
    """Each frame's zero plane (near value at the screen) from its subject's and its nearest content's near values
    and its shot number (see the module doc)."""
    subjects = np.asarray(subjects, np.float64)
    fronts = np.asarray(fronts, np.float64)
    sigma = max(EASE_S * fps, 1e-3)
    radius = int(np.ceil(3 * sigma))
    offsets = np.arange(-radius, radius + 1)
    kernel = np.exp(-0.5 * (offsets / sigma) ** 2)
    # The near value above which content is further in front of the screen than the limit allows, per zero plane:
    # divergence * (near - plane) <= limit.
    allowance = front_limit_pct / divergence_pct if divergence_pct > 0 else np.inf
    out = np.empty(len(subjects))
    for shot in np.unique(shots):
        frames = np.nonzero(shots == shot)[0]
        values = subjects[frames]
        # The Gaussian over the shot's own frames only (renormalised where it reaches past the shot's ends).
        window = slice(radius, radius + len(values))
        eased = np.convolve(values, kernel)[window] / np.convolve(np.ones(len(values)), kernel)[window]
        floor = fronts[frames] - allowance
        # The floor as a cone envelope: never below the floor, and moving at most MAX_STEP per frame.
        spread = floor.copy()
        for index in range(1, len(spread)):
            spread[index] = max(spread[index], spread[index - 1] - MAX_STEP)
        for index in range(len(spread) - 2, -1, -1):
            spread[index] = max(spread[index], spread[index + 1] - MAX_STEP)
        out[frames] = np.maximum(eased, spread)
    return np.clip(out, 0.0, 1.0)
