"""Q1-Q3: what the viewer sees, against ground truth (``stereo3d.qc.truth``).

    python -m bench.viewing [--size 960x540] [--frames 24] [--variants]
    python -m bench.viewing --photograph [PCT ...]

Two generated sequences, each ray-cast with exact depth and both eyes' exact views: ``street`` (a camera trucking
and dollying past boxes, a sphere, thin poles) and ``still camera`` (the same street from a tripod, the objects
moving faster). Every method renders both eyes of every frame from the source frame and the same near map, and is
scored on the same pixels (``stereo3d.qc.viewing``): those both eyes see, the disocclusions, and the fill's
flicker where the truth is still. The near map is given two ways: exact at frame size, and at a depth model's size
(the exact map area-averaged to 518/1920 of the frame's width, as DA3's output reaches a 1080p frame), which the
renderer enlarges; the figures are taken on the second, which is what users get.

Methods: the renderer at its defaults (``StereoSettings()``, holes filled from the frames around, as the render
stage runs it); a plain depth-ordered nearest-pixel warp (``viewing.nearest_warp``); and the renderer's own warp
with its holes inpainted by OpenCV's Telea instead (the same holes for both fills).

- **Q1** visible PSNR of the renderer minus the nearest-pixel warp's (goal >= 0 dB)
- **Q2** hole PSNR of the renderer minus Telea's on the same holes (goal >= +1.5 dB)
- **Q3** hole flicker of the renderer / Telea's (goal <= 0.5)

``--variants`` adds the settings the defaults were chosen among (edge dilation, depth enlargement, fill).

Issue 46's figures, on ``garden`` (``stereo3d.qc.truth.garden``: fine grain on every surface, a fence, branches
a few pixels wide, a camera's blur and each camera's own noise), a still picture at a time (no frames around to
fill from: the fill's background alone, as for a photograph):

- **Q5** hole PSNR of the renderer's single-frame fill (``fill: background``) minus Telea's (goal >= +1.5 dB)
- **Q6** visible PSNR of the renderer given the depth at a model's size minus the plain nearest warp given the
  exact depth at the frame's (goal >= -1.0 dB): what a depth model's coarse map costs against perfect depth

``--photograph`` scores the garden as issue 46 scored a real stereo photograph (``photograph_rows``), at the
renderer's default divergence and at 8 % (a stereo photograph's disparities span several times the default).
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace
from pathlib import Path

import cv2
import numpy as np

from bench import common
from stereo3d.qc import truth, viewing

RIG = truth.Rig()  # the renderer's default divergence and convergence
MODEL_WIDTH_RATIO = 518 / 1920  # DA3's output width against a 1080p frame's
TRUTH_VERSION = 2  # bump when the scenes change: the cached sequences are remade
PHOTOGRAPH_DIVERGENCE = 8.0  # % of the width: a stereo photograph's disparities span several times the default


def sequences(size: tuple[int, int] = (960, 540), frames: int = 24, scenes=(truth.street, truth.still_camera),
              rig: truth.Rig = RIG) -> dict[str, dict]:  # fmt: skip
    """The truth sequences of ``scenes`` (functions of the frame count) at ``size``, their eyes for ``rig``, made
    once into the bench cache (a few minutes at 960x540)."""
    out = {}
    other_rig = "" if rig == RIG else f"-div{rig.divergence_pct:g}-conv{rig.convergence:g}"
    for scene in (make(frames) for make in scenes):
        name = f"{scene.name.replace(' ', '-')}-{size[0]}x{size[1]}-{frames}{other_rig}-v{TRUTH_VERSION}.npz"
        path = common.CACHE / "truth" / name
        if not path.exists():
            common.say(f"ray-casting {scene.name}: {frames} frames at {size[0]}x{size[1]}")
            rendered = [truth.render_frame(scene, index, *size, rig) for index in range(frames)]
            arrays = {key: np.stack([getattr(frame, key) for frame in rendered])
                      for key in ("source", "near", "left", "right", "left_class", "right_class", "left_static",
                                  "right_static")}  # fmt: skip
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(".tmp.npz")
            np.savez_compressed(tmp, **arrays)
            tmp.replace(path)
        with np.load(path) as data:
            out[scene.name] = {key: data[key] for key in data.files}
    return out


def model_size(near: np.ndarray) -> np.ndarray:
    """The near map at a depth model's size (area average: a network's output is soft at edges)."""
    width = max(2, round(near.shape[1] * MODEL_WIDTH_RATIO))
    height = max(2, round(near.shape[0] * MODEL_WIDTH_RATIO))
    return cv2.resize(near, (width, height), interpolation=cv2.INTER_AREA)


def measured(near: np.ndarray) -> np.ndarray:
    """The near map as measured depth often is at edges (a stereo matcher's, a depth camera's): its foreground
    fattened by a pixel (a 3 x 3 dilation), carrying a pixel of the background beside it."""
    return cv2.dilate(near, np.ones((3, 3), np.uint8))


DEPTHS = {"exact": lambda near: near, "model": model_size, "measured": measured}


def renderer_views(sequence: dict, settings, depth: str, temporal: bool = True, holes_out: list | None = None):
    """Both eyes of every frame, rendered as the render stage does (frames walked with their neighbours), from the
    scene's ``depth`` (``DEPTHS``)."""
    from stereo3d.stereo.fill import windowed
    from stereo3d.stereo.warp import Renderer

    nears = [DEPTHS[depth](near) for near in sequence["near"]]
    frames = sequence["source"]
    items = ((index, frames[index], nears[index]) for index in range(len(frames)))
    reach = settings.fill_frames if temporal and settings.fill == "temporal" else 0
    with Renderer("cpu") as renderer:
        for _index, frame, near, neighbours in windowed(items, reach, 0, len(frames)):
            views = renderer.render_stereo(frame, near, settings, neighbours=neighbours if reach else None)
            if holes_out is not None:
                holes_out.append([renderer._view_maps(k, frame.shape[:2])[1] != 0 for k in range(2)])
            yield [view.copy() for view in views]


def telea_views(sequence: dict, settings, depth: str, holes_out: list | None = None):
    """The renderer's warp with OpenCV's Telea inpainting of its holes."""
    holes = [] if holes_out is None else holes_out
    for index, views in enumerate(renderer_views(sequence, replace(settings, fill="background"), depth, False, holes)):
        yield [viewing.telea(view, hole) for view, hole in zip(views, holes[index])]


def nearest_views(sequence: dict, depth: str, rig: truth.Rig = RIG):
    """The plain nearest-pixel warp (holes left black: only its visible pixels are compared)."""
    from stereo3d.stereo.warp import StereoSettings, parallax_px

    settings = StereoSettings(divergence_pct=rig.divergence_pct, convergence=rig.convergence)
    for frame, near in zip(sequence["source"], sequence["near"]):
        if depth == "model":
            near = cv2.resize(model_size(near), (frame.shape[1], frame.shape[0]), interpolation=cv2.INTER_LINEAR)
        parallax = parallax_px(near, frame.shape[1], settings)
        eyes = ((0.5, False), (-0.5, True))  # (share of the parallax, the right view's mirrored order)
        yield [viewing.nearest_warp(frame, sign * parallax, mirrored)[0] for sign, mirrored in eyes]


def score(sequences_: dict, views_of, painted: bool = False) -> dict:
    """Scores of a method over every sequence (pooled), with each sequence's own beside them. ``painted``: the
    method reports the pixels it fills (``views_of(sequence, holes)`` appends each frame's masks to ``holes``), and
    its flicker is split into the fill's own and the warp's."""
    pooled, each = viewing.Tally(), {}
    for name, sequence in sequences_.items():
        own = viewing.Tally()
        previous = None
        holes: list = []
        for index, views in enumerate(views_of(sequence, holes) if painted else views_of(sequence)):
            current = []
            for eye, view in enumerate(views):
                eye_name = ("left", "right")[eye]
                truth_view, classes = sequence[eye_name][index], sequence[f"{eye_name}_class"][index]
                for tally in (pooled, own):
                    tally.add(view, truth_view, classes)
                still = (classes == truth.HOLE) & sequence[f"{eye_name}_static"][index]
                current.append((view, truth_view, still, holes[index][eye] if painted else None))
            if previous is not None:
                for eye, ((was, was_truth, was_still, was_hole), (now, now_truth, now_still, now_hole)) in enumerate(
                    zip(previous, current)
                ):
                    both = None if now_hole is None else was_hole & now_hole
                    label = f"{name}, {('left', 'right')[eye]} eye, frame {index - 1} -> {index}"
                    for tally in (pooled, own):
                        tally.add_change(was, now, was_truth, now_truth, was_still & now_still, both, label)
            previous = current
        each[name] = own.scores()
    return {**pooled.scores(), "sequences": each}


def run(size: tuple[int, int] = (960, 540), frames: int = 24, variants: bool = False) -> dict:
    from stereo3d.stereo.warp import StereoSettings

    data = sequences(size, frames)
    defaults = StereoSettings()
    settings = replace(defaults, divergence_pct=RIG.divergence_pct, convergence=RIG.convergence)
    results: dict[str, dict] = {}
    started = time.perf_counter()
    for depth in ("model", "exact"):
        results[f"nearest/{depth}"] = score(data, lambda seq, d=depth: nearest_views(seq, d))
        results[f"telea/{depth}"] = score(data, lambda seq, out, d=depth: telea_views(seq, settings, d, out), True)
        results[f"renderer/{depth}"] = score(
            data, lambda seq, out, d=depth: renderer_views(seq, settings, d, holes_out=out), True
        )
        common.say(f"scored the {depth} depth ({time.perf_counter() - started:.0f} s)")
    if variants:
        for name, changed in _variants(settings):
            for depth in ("model", "exact"):
                results[f"{name}/{depth}"] = score(data, lambda seq, d=depth, s=changed: renderer_views(seq, s, d))
            common.say(f"variant {name} ({time.perf_counter() - started:.0f} s)")
    return results


def _variants(settings):
    for dilate in (0, 1, 2, 3):
        yield f"edge_dilate_px={dilate}", replace(settings, edge_dilate_px=dilate)
    yield "fill=background", replace(settings, fill="background")
    for frames in (2, 8):
        yield f"fill_frames={frames}", replace(settings, fill_frames=frames)
    yield "depth_upsample=bilinear", replace(settings, depth_upsample="bilinear")


def figures(size: tuple[int, int] = (960, 540), frames: int = 24) -> dict:
    """Q1-Q3 for the harness."""
    common.say(f"Q1-Q3: views against ground truth, {frames} frames of 2 scenes at {size[0]}x{size[1]}")
    results = run(size, frames)
    ours, nearest, telea = results["renderer/model"], results["nearest/model"], results["telea/model"]
    setup = (f"{frames} frames each of 'street' and 'still camera' at {size[0]}x{size[1]}, near maps at "
             f"{MODEL_WIDTH_RATIO:.3f} of the width, renderer defaults (divergence {RIG.divergence_pct} %, convergence "
             f"{RIG.convergence})")  # fmt: skip
    exact = {key: results[f"{key}/exact"] for key in ("renderer", "nearest", "telea")}
    return {
        "Q1": common.figure(
            ours["visible_psnr_db"] - nearest["visible_psnr_db"], ">= 0",
            baseline={"what": "nearest-pixel depth-ordered warp, visible pixels",
                      "psnr_db": nearest["visible_psnr_db"]},
            measured={"what": "renderer, visible pixels", "psnr_db": ours["visible_psnr_db"],
                      "ssim": ours["visible_ssim"]},
            setup=setup, exact_depth=exact, all=results,
        ),
        "Q2": common.figure(
            ours["hole_psnr_db"] - telea["hole_psnr_db"], ">= 1.5",
            baseline={"what": "the renderer's holes inpainted by OpenCV Telea", "psnr_db": telea["hole_psnr_db"]},
            measured={"what": "renderer's fill", "psnr_db": ours["hole_psnr_db"], "ssim": ours["hole_ssim"]},
            setup=setup,
        ),
        "Q3": common.figure(
            ours["hole_flicker"] / max(telea["hole_flicker"], 1e-9), "<= 0.5",
            baseline={"what": "Telea fill, mean |change| in still holes (grey levels)",
                      "flicker": telea["hole_flicker"]},
            measured={"what": "renderer's fill", "flicker": ours["hole_flicker"]},
            setup=setup,
            # Where the flicker comes from: pixels both fills paint in both frames (the fill's own) against those
            # the warp covers in one frame or both (the same for any fill of these holes).
            fill_own={"renderer": ours.get("fill_flicker"), "telea": telea.get("fill_flicker"),
                      "renderer_share_of_flicker": ours.get("fill_flicker_share")},
            # The warp's part over Telea's whole: the figure of a fill that never changed, the least any fill of
            # these holes can score (the goal needs the fill's own flicker below the difference).
            floor_with_this_warp=(round(ours["warp_flicker"] / max(telea["hole_flicker"], 1e-9), 3)
                                  if "warp_flicker" in ours else None),
            largest_changes={"renderer": ours.get("largest_changes"), "telea": telea.get("largest_changes")},
        ),
    }  # fmt: skip


def hard_figures(size: tuple[int, int] = (960, 540), frames: int = 8) -> dict:
    """Q5 and Q6 for the harness: the single-frame fill and the model-size depth on the garden."""
    from stereo3d.stereo.warp import StereoSettings

    common.say(f"Q5, Q6: single pictures of the garden against ground truth, {frames} frames at {size[0]}x{size[1]}")
    data = sequences(size, frames, (truth.garden,))
    settings = replace(StereoSettings(), divergence_pct=RIG.divergence_pct, convergence=RIG.convergence)
    alone = replace(settings, fill="background")
    ours = score(data, lambda seq, out: renderer_views(seq, alone, "model", False, out), True)
    telea = score(data, lambda seq, out: telea_views(seq, settings, "model", out), True)
    exact = score(data, lambda seq, out: renderer_views(seq, alone, "exact", False, out), True)
    nearest = score(data, lambda seq: nearest_views(seq, "exact"))
    setup = (f"{frames} frames of 'garden' at {size[0]}x{size[1]}, each a still picture (no frames around it), near "
             f"maps at {MODEL_WIDTH_RATIO:.3f} of the width, divergence {RIG.divergence_pct} %, convergence "
             f"{RIG.convergence}")  # fmt: skip
    return {
        "Q5": common.figure(
            ours["hole_psnr_db"] - telea["hole_psnr_db"], ">= 1.5",
            baseline={"what": "the renderer's holes inpainted by OpenCV Telea", "psnr_db": telea["hole_psnr_db"]},
            measured={"what": "the renderer's fill of a single picture (fill: background)",
                      "psnr_db": ours["hole_psnr_db"], "ssim": ours["hole_ssim"]},
            setup=setup, exact_depth={"renderer": exact["hole_psnr_db"]},
        ),
        "Q6": common.figure(
            ours["visible_psnr_db"] - nearest["visible_psnr_db"], ">= -1.0",
            baseline={"what": "the plain nearest-pixel warp given the exact depth at the frame's size",
                      "psnr_db": nearest["visible_psnr_db"]},
            measured={"what": "the renderer given the depth at a model's size", "psnr_db": ours["visible_psnr_db"]},
            setup=setup, renderer_at_exact_depth=exact["visible_psnr_db"],
            model_cost_db=round(ours["visible_psnr_db"] - exact["visible_psnr_db"], 3),
            # Issue 46's rows of a real stereo photograph, on the garden ray-cast for a photograph's parallax.
            at_a_photographs_parallax={"divergence_pct": PHOTOGRAPH_DIVERGENCE,
                                       **photograph_rows(PHOTOGRAPH_DIVERGENCE, size, frames)},
        ),
    }  # fmt: skip


def photograph_rows(divergence_pct: float, size: tuple[int, int] = (960, 540), frames: int = 8) -> dict:
    """The rows of issue 46's table of a real stereo photograph, on the garden ray-cast for ``divergence_pct``
    (a photograph's cameras give several times the renderer's default; the renderer is given the same), a still
    picture at a time (dB): ``visible_exact``, the renderer at exact depth − the plain nearest warp where both eyes
    see; ``holes_exact``, the renderer's fill of the background alone − Telea's on the same holes, at exact depth;
    ``holes_measured``, the same from the depth as measured depth often is (``measured``: the foreground a pixel
    too wide); ``visible_model``, the renderer at a model's size − the plain warp at exact depth (Q6); and
    ``model_cost``, the renderer at a model's size − itself at exact depth."""
    from stereo3d.stereo.warp import StereoSettings

    rig = truth.Rig(divergence_pct=divergence_pct, convergence=RIG.convergence)
    data = sequences(size, frames, (truth.garden,), rig)
    settings = replace(StereoSettings(), divergence_pct=rig.divergence_pct, convergence=rig.convergence)
    alone = replace(settings, fill="background")
    model = score(data, lambda seq, out: renderer_views(seq, alone, "model", False, out), True)
    exact = score(data, lambda seq, out: renderer_views(seq, alone, "exact", False, out), True)
    telea = score(data, lambda seq, out: telea_views(seq, settings, "exact", out), True)
    fat = score(data, lambda seq, out: renderer_views(seq, alone, "measured", False, out), True)
    fat_telea = score(data, lambda seq, out: telea_views(seq, settings, "measured", out), True)
    nearest = score(data, lambda seq: nearest_views(seq, "exact", rig))
    return {
        "visible_exact": round(exact["visible_psnr_db"] - nearest["visible_psnr_db"], 2),
        "holes_exact": round(exact["hole_psnr_db"] - telea["hole_psnr_db"], 2),
        "holes_measured": round(fat["hole_psnr_db"] - fat_telea["hole_psnr_db"], 2),
        "visible_model": round(model["visible_psnr_db"] - nearest["visible_psnr_db"], 2),
        "model_cost": round(model["visible_psnr_db"] - exact["visible_psnr_db"], 2),
        "psnr_db": {"renderer_exact": exact["visible_psnr_db"], "renderer_model": model["visible_psnr_db"],
                    "nearest_exact": nearest["visible_psnr_db"], "holes_renderer": exact["hole_psnr_db"],
                    "holes_telea": telea["hole_psnr_db"], "holes_renderer_measured": fat["hole_psnr_db"],
                    "holes_telea_measured": fat_telea["hole_psnr_db"]},
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="960x540")
    parser.add_argument("--frames", type=int, default=24)
    parser.add_argument(
        "--variants", action="store_true", help="also score the settings the defaults were chosen among"
    )
    parser.add_argument(
        "--photograph", type=float, nargs="*", metavar="PCT",
        help="instead: issue 46's rows of a real stereo photograph, on the garden at these divergences (%%)",
    )  # fmt: skip
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    size = tuple(int(v) for v in args.size.split("x"))
    if args.photograph is not None:
        wanted = args.photograph or (RIG.divergence_pct, PHOTOGRAPH_DIVERGENCE)
        results, line = {f"{pct:g} %": photograph_rows(pct, size) for pct in wanted}, _photograph_line
    else:
        results, line = run(size, args.frames, args.variants), _scores_line
    for name, scores in results.items():
        print(line(name, scores))
    if args.out:
        args.out.write_text(json.dumps(results, indent=1))


def _scores_line(name: str, scores: dict) -> str:
    return (f"{name:34s} visible {scores['visible_psnr_db']:6.2f} dB  holes {scores['hole_psnr_db']:6.2f} dB "
            f"(ssim {scores['hole_ssim']:.3f})  edges {scores['edge_psnr_db']:6.2f} dB  "
            f"flicker {scores['hole_flicker']:.3f}")  # fmt: skip


def _photograph_line(name: str, row: dict) -> str:
    return (f"garden at {name:6s} exact - nearest {row['visible_exact']:+.2f}  holes at exact depth - Telea "
            f"{row['holes_exact']:+.2f} (measured depth {row['holes_measured']:+.2f})  model - nearest "
            f"{row['visible_model']:+.2f}  model - exact {row['model_cost']:+.2f} dB")  # fmt: skip


if __name__ == "__main__":
    main()
