"""Q4: automatic convergence on generated shots with a known subject (``stereo3d.qc.truth.shots``).

    python -m bench.convergence [--plot [PATH]]

A close-up, a medium shot and a landscape, cut together (120 frames at 24 fps, 480x270), their exact near maps
planned as the ``convergence_plan`` job plans a video (``stereo3d.stereo.convergence``): the subject found in each
frame, eased within its shot, reset at the cuts (found from the picture changes, as the depth stage records them).

- **Q4** the largest parallax of the subject (its median near value) after easing, in % of the width
  (goal <= 0.1), with the fixed default before it (``convergence: 0.25``) for comparison;
- beside it: the largest change of the screen plane's parallax from one frame to the next inside a shot
  (no visible step: <= 0.02 % of the width, 0.4 px at 1920) and how many frames the change at a cut takes (1).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from bench import common
from stereo3d.qc import truth
from stereo3d.stereo import convergence, cuts

SIZE = (480, 270)
FPS = 24.0
DIVERGENCE_PCT = 2.0  # the renderer's default
STEP_GOAL_PCT = 0.02
FIXED = 0.25  # the earlier default convergence
PLOT = Path(__file__).parent / "recorded" / "convergence_shots.png"


def shot_library() -> dict:
    """The shots' near maps, subjects and picture changes, ray-cast once into the bench cache (~30 s)."""
    path = common.CACHE / "truth" / f"shots-{SIZE[0]}x{SIZE[1]}-v1.npz"
    if not path.exists():
        common.say("ray-casting the shots with a known subject")
        nears, subjects, thumbs = [], [], []
        for scene in truth.shots():
            for index in range(scene.frames):
                frame = truth.render_frame(scene, index, *SIZE, samples=1, eyes=False)
                nears.append(frame.near)
                subjects.append(truth.subject_near(frame))
                thumbs.append(cuts.thumbnail(frame.source))
        changes = [np.nan] + [cuts.picture_change(a, b) for a, b in zip(thumbs, thumbs[1:])]
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp.npz")
        np.savez_compressed(tmp, near=np.stack(nears), subject=np.array(subjects), change=np.array(changes))
        tmp.replace(path)
    with np.load(path) as data:
        return {key: data[key] for key in data.files}


def track() -> dict:
    """The shots planned as the ``convergence_plan`` job plans a video: each frame's shot, the subject found in it,
    its nearest content, the screen plane, and the true subject (near values)."""
    data = shot_library()
    nears = data["near"]
    shots = convergence.shots_of(data["change"])
    found = np.array([convergence.subject_near(near, nears[i - 1] if i and shots[i] == shots[i - 1] else None)
                      for i, near in enumerate(nears)])  # fmt: skip
    fronts = np.array([convergence.front_near(near) for near in nears])
    planes = convergence.plan(found, fronts, shots, FPS, DIVERGENCE_PCT)
    return {"shots": shots, "found": found, "fronts": fronts, "planes": planes, "subjects": data["subject"]}


def plot(out: Path) -> None:
    """The track as the report draws a video's (``qc.figures.convergence_figure``)."""
    from stereo3d.qc import figures
    from stereo3d.stereo.warp import StereoSettings

    t = track()
    times = np.arange(len(t["planes"])) / FPS
    image = figures.convergence_figure(times, t["planes"], t["found"], t["fronts"], t["shots"], DIVERGENCE_PCT,
                                       StereoSettings().front_limit_pct, "three generated shots", "auto")  # fmt: skip
    figures.write_png(out, image)


def run() -> dict:
    t = track()
    shots, found, fronts, planes, subjects = (t[key] for key in ("shots", "found", "fronts", "planes", "subjects"))
    subject_pct = (subjects - planes) * DIVERGENCE_PCT
    fixed_pct = (subjects - (1.0 - FIXED)) * DIVERGENCE_PCT
    inside = shots[1:] == shots[:-1]
    steps_pct = np.abs(np.diff(planes)) * DIVERGENCE_PCT
    true_cuts = np.nonzero(~inside)[0] + 1
    # Frames the plane takes to settle after a cut: until it changes by less than the in-shot step goal.
    settle = []
    for cut in true_cuts:
        frames = 1
        while (
            cut + frames < len(planes)
            and shots[cut + frames] == shots[cut]
            and steps_pct[cut + frames - 1] > STEP_GOAL_PCT
        ):
            frames += 1
        settle.append(frames)
    per_shot = {
        name: {"subject_near": round(float(np.median(subjects[shots == k])), 3),
               "found_near": round(float(np.median(found[shots == k])), 3),
               "max_subject_parallax_pct": round(float(np.abs(subject_pct[shots == k]).max()), 4),
               "fixed_0.25_subject_parallax_pct": round(float(np.abs(fixed_pct[shots == k]).max()), 3),
               "front_parallax_pct": round(float(((fronts - planes) * DIVERGENCE_PCT)[shots == k].max()), 3)}
        for k, name in enumerate(scene.name for scene in truth.shots())
    }  # fmt: skip
    return {
        "shots_found": int(shots.max() + 1),
        "max_subject_parallax_pct": round(float(np.abs(subject_pct).max()), 4),
        "fixed_max_subject_parallax_pct": round(float(np.abs(fixed_pct).max()), 3),
        "max_step_inside_shot_pct": round(float(steps_pct[inside].max()), 5),
        "frames_to_settle_at_cuts": settle,
        "shots": per_shot,
    }


def figure() -> dict:
    """Q4 for the harness."""
    common.say("Q4: automatic convergence on 3 generated shots with a known subject")
    result = run()
    return {
        "Q4": common.figure(
            result["max_subject_parallax_pct"], "<= 0.1",
            baseline={"what": "fixed convergence 0.25, the subject's largest parallax (% of width)",
                      "pct": result["fixed_max_subject_parallax_pct"]},
            measured={"what": "convergence auto, the subject's largest parallax (% of width)",
                      "pct": result["max_subject_parallax_pct"]},
            setup=f"3 shots cut together, {SIZE[0]}x{SIZE[1]}, divergence {DIVERGENCE_PCT} %, {FPS:g} fps",
            step_inside_shot_pct=result["max_step_inside_shot_pct"], step_goal_pct=STEP_GOAL_PCT,
            frames_to_settle_at_cuts=result["frames_to_settle_at_cuts"], shots=result["shots"],
        ),
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plot", type=Path, nargs="?", const=PLOT, help=f"also draw the track (default {PLOT})")
    args = parser.parse_args()
    print(json.dumps(run(), indent=1))
    if args.plot:
        plot(args.plot)
        print(args.plot)


if __name__ == "__main__":
    main()
