"""Window violations before and after the floating window, on a generated scene: a near disk sliding out
across the left frame edge (and a second one, later, across the right edge), rendered through the real
``Renderer`` and the render stage's ``stereo_frame``.

Per setting it prints the share of frames with a window violation and the worst edge parallax (the QC figure,
``stereo3d.stereo.window.edge_parallax``), then the same after the floating window: the window's edge is
measured on the masked views themselves (the column where the left view's left edge, or the right view's right
edge, is half dark, found from masked / unmasked pixels), and a frame still violates where the content's edge
parallax exceeds that measured window by more than the threshold. Flicker of the window: the largest and mean
frame-to-frame change of its width.

    python -m bench.floating_window
"""

from __future__ import annotations

import numpy as np

from stereo3d.stages.render import stereo_frame
from stereo3d.stereo.warp import Renderer, StereoSettings
from stereo3d.stereo.window import (
    VIOLATION_PCT,
    edge_alpha,
    edge_parallax,
    effective_edge,
    smooth_widths,
    violation_need,
)

WIDTH, HEIGHT, FPS, FRAMES = 640, 360, 24.0, 240


def scene(frames: int = FRAMES, width: int = WIDTH, height: int = HEIGHT) -> tuple[np.ndarray, np.ndarray]:
    """(RGB frames [n, H, W, 3] uint8, near maps [n, H/4, W/4] float32): a background behind the screen (near
    0.25..0.45; the zero plane is at 0.75) and a near disk (near 0.95): in the first half it slides from the
    centre out across the left edge; after a pause with nothing near an edge, a second one enters across the right
    edge and comes to rest inside the frame. Near maps at a quarter of the frame size, as DA3's are smaller than
    the frame."""
    rng = np.random.default_rng(7)
    texture = rng.integers(40, 216, (height, width, 3), dtype=np.uint8)
    small_h, small_w = height // 4, width // 4
    yy, xx = np.mgrid[0:small_h, 0:small_w].astype(np.float32)
    radius = small_h * 0.3
    near = np.empty((frames, small_h, small_w), np.float32)
    for t in range(frames):
        near[t] = 0.25 + 0.2 * yy / small_h
        u = t / frames
        if u < 0.5:  # centre -> fully out on the left
            cx = small_w * (0.5 - 1.6 * u)
        elif u >= 0.7:  # from fully out on the right to rest at 0.75 of the width
            cx = small_w * (1.0 + radius / small_w - (0.25 + radius / small_w) * min(1.0, (u - 0.7) / 0.2))
        else:
            continue
        disk = (xx - cx) ** 2 + (yy - small_h / 2) ** 2 < radius**2
        near[t][disk] = 0.95
    return np.repeat(texture[None], frames, axis=0), near


def measure(settings: StereoSettings, frames: np.ndarray, nears: np.ndarray, renderer: Renderer) -> dict:
    width = frames.shape[2]
    limit = VIOLATION_PCT / 100.0 * width
    edges = np.array([edge_parallax(near, width, settings) for near in nears])
    widths = smooth_widths(violation_need(edges, width), FPS)
    measured = np.zeros_like(widths)
    for t, (frame, near) in enumerate(zip(frames, nears, strict=True)):
        plain = stereo_frame(renderer, frame, near, settings, "full_sbs", {})
        masked = stereo_frame(renderer, frame, near, settings, "full_sbs", {}, window=tuple(widths[t]))
        left_ratio = _column_ratio(masked[:, :width], plain[:, :width])
        right_ratio = _column_ratio(masked[:, width:], plain[:, width:])[::-1]
        measured[t] = [effective_edge(left_ratio), effective_edge(right_ratio)]
        # The measured mask against the one the plan asked for: the alpha of the drawn ramp.
        for side in (0, 1):
            if widths[t, side] > 0:
                drawn = effective_edge(edge_alpha(width, widths[t, side]))
                assert abs(drawn - measured[t, side]) < 0.05, (t, side, drawn, measured[t, side])
    before = edges.max(axis=1) > limit
    after = (edges - measured).max(axis=1) > limit
    step = np.abs(np.diff(widths, axis=0))
    return {
        "violation_pct": 100.0 * before.mean(),
        "worst_pct": 100.0 * edges.max() / width,
        "after_pct": 100.0 * after.mean(),
        "after_worst_pct": 100.0 * max(0.0, (edges - measured).max()) / width,
        "window_frames_pct": 100.0 * (widths.max(axis=1) > 0).mean(),
        "window_max_px": float(widths.max()),
        "step_max_px": float(step.max()),
        "step_mean_px": float(step.mean()),
        "need_step_max_px": float(np.abs(np.diff(violation_need(edges, width), axis=0)).max()),
    }


def _column_ratio(masked: np.ndarray, plain: np.ndarray) -> np.ndarray:
    """Per column, masked / unmasked brightness (1 = untouched), from the masked edge inward."""
    m = masked.astype(np.float64).sum(axis=(0, 2))
    p = plain.astype(np.float64).sum(axis=(0, 2))
    return np.where(p > 0, m / np.maximum(p, 1e-9), 1.0)


def main() -> None:
    frames, nears = scene()
    cases = {
        "divergence 2 %": StereoSettings(),
        "divergence 4 %": StereoSettings(divergence_pct=4.0),
        "divergence 2 %, taper 2 %": StereoSettings(border_taper_pct=2.0),
        "divergence 4 %, left eye original": StereoSettings(divergence_pct=4.0, original_eye="left"),
    }
    print(f"{FRAMES} frames {WIDTH}x{HEIGHT} at {FPS:g} fps; violation = edge parallax > {VIOLATION_PCT:g} % of width")
    header = ("case", "viol %", "worst %w", "after %", "after worst %w", "window on %", "max px", "max step px",
              "mean step px", "need jump px")  # fmt: skip
    print(" | ".join(header))
    with Renderer("cpu", threads=1) as renderer:
        for name, settings in cases.items():
            r = measure(settings, frames, nears, renderer)
            print(f"{name} | {r['violation_pct']:.1f} | {r['worst_pct']:.2f} | {r['after_pct']:.1f} | "
                  f"{r['after_worst_pct']:.3f} | {r['window_frames_pct']:.1f} | {r['window_max_px']:.2f} | "
                  f"{r['step_max_px']:.3f} | {r['step_mean_px']:.3f} | {r['need_step_max_px']:.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
