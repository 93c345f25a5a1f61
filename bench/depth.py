"""P1, P2: the depth stage against bare ONNX Runtime and against the seed's per-frame reference loop.

    python -m bench.depth [--frames N] [--size S] [--batch B] [--repeats R]

* P1 = depth stage frames/s ÷ bare ``InferenceSession.run`` frames/s: same model (the 16:9 tier's export, uint8
  contract, as ``da3.fit: aspect`` picks it for the clip), same frames, same batch. The bare loop gets its batches
  ready-made in memory (decoded, placed, stacked), so it is the ceiling; the stage decodes, letterboxes the
  remainder, runs, crops and stores compressed.
* P2 = depth stage frames/s ÷ the seed's reference loop: decode at the source size, per frame
  ``cv2.resize`` (INTER_CUBIC) into the letterbox of the **square** export, ImageNet-normalise in numpy, batch 1
  on the float-contract export of the same weights and side on a session with ONNX Runtime's default options,
  crop, and the same compressed store. The clip is 1080p (a library's usual size). Beside it, the stage on the
  square export (``da3.fit: letterbox``, the default before aspect tiers) against the same loop: the figure
  before, measured in the same run.

Every contender opens its own session, and each is timed from its first frame to its stored last one
(session creation excluded, as a long segment amortises it; it is reported apart). The contenders take
turns, ``repeats`` rounds, and the best round of each counts (other processes only ever add time).
The stage's depth store also feeds P7.
"""

from __future__ import annotations

import argparse
import json
import time

import cv2
import numpy as np

from bench import common


def run(
    frames: int = 16,
    size: int = common.DA3_SIZE,
    batch: int = 4,
    repeats: int = 2,
    width: int = 1920,
    height: int = 1080,
    provider: str = "cpu",
) -> dict:
    import onnxruntime as ort

    from stereo3d.io.decode import FrameReader
    from stereo3d.io.mapstore import MapWriter
    from stereo3d.models.da3.runtime import IMAGENET_MEAN, IMAGENET_STD, place, placement_for, to_model_input
    from stereo3d.runtime.sessions import SessionOptions, open_session
    from stereo3d.stages.depth import estimate_depth

    tier = common.da3_tier(size)
    common.ensure_models(da3=[("uint8", tier), ("uint8", size), ("float", size)])
    u8_model, float_model = common.da3_model_path("uint8", tier), common.da3_model_path("float", size)
    square_model = common.da3_model_path("uint8", size)
    video = common.clip(f"depth_{width}x{height}_{frames}", width=width, height=height, frames=frames,
                        fps="24", pattern="testsrc2")  # fmt: skip
    probe = common.probe(video)
    placement = placement_for(width, height, tier, "letterbox")  # the stage's (and the bare loop's)
    square = placement_for(width, height, (size, size), "letterbox")  # the seed's
    # On a GPU every contender gets the same provider (and the CPU behind it, as the workflow configures it).
    options = SessionOptions(providers=(provider, "cpu") if provider != "cpu" else ("cpu",))
    ort_providers = [p for p in ({"cuda": "CUDAExecutionProvider", "tensorrt": "TensorrtExecutionProvider"}
                                 .get(provider), "CPUExecutionProvider") if p]  # fmt: skip
    work = common.scratch("depth")

    with FrameReader(video, probe, size=(placement.width, placement.height)) as reader:
        decoded = list(reader)
    feeds = [to_model_input(place(np.stack(decoded[i : i + batch]), placement), "uint8")
             for i in range(0, len(decoded), batch)]  # fmt: skip
    opens: dict[str, list[float]] = {"bare": [], "reference": []}

    def bare() -> float:
        session, seconds = common.timed(lambda: open_session(u8_model, options))
        opens["bare"].append(seconds)
        start = time.perf_counter()
        for feed in feeds:
            session.run(["depth"], {"image": feed})
        return time.perf_counter() - start

    stage_runs: list[dict] = []

    def stage() -> float:
        out = work / f"stage-{len(stage_runs)}.maps"
        result, wall = common.timed(lambda: estimate_depth(video, probe, u8_model, out, common.depth_settings(
            "uint8", tier), batch=batch, options=options))  # fmt: skip
        result["wall_s_with_session_open"] = round(wall, 2)
        result["store"] = str(out)
        stage_runs.append(result)
        return result["frames"] / result["fps"]

    def stage_square() -> float:
        out = work / "stage-square.maps"
        result = estimate_depth(video, probe, square_model, out, common.depth_settings("uint8", size), batch=batch,
                                options=options)  # fmt: skip
        return result["frames"] / result["fps"]

    def reference() -> float:
        # The seed's session: ONNX Runtime's defaults, as its quick-inference example creates it.
        session, seconds = common.timed(lambda: ort.InferenceSession(str(float_model), providers=ort_providers))
        opens["reference"].append(seconds)
        out = work / "reference.maps"
        start = time.perf_counter()
        with FrameReader(video, probe) as reader, MapWriter(out, "inverse") as store:
            for frame in reader:
                fitted = cv2.resize(frame, (square.width, square.height), interpolation=cv2.INTER_CUBIC)
                canvas = place(fitted[None], square)[0]
                x = (canvas.astype(np.float32) / 255.0 - IMAGENET_MEAN) / IMAGENET_STD
                x = np.transpose(x, (2, 0, 1))[None, ...]
                depth = session.run(["depth"], {"image": x})[0]
                store.append(square.crop(depth)[0])
        return time.perf_counter() - start

    common.say(
        f"P1/P2: depth stage ({tier[0]}x{tier[1]}) vs bare ORT vs seed loop ({size}x{size}), {frames} frames "
        f"{width}x{height}, batch {batch}, {repeats} rounds"
    )
    contenders = {"bare": bare, "stage": stage, "stage_square": stage_square, "reference": reference}
    times = common.interleaved(contenders, repeats)
    fps = {name: frames / min(values) for name, values in times.items()}
    best_stage = stage_runs[int(np.argmin(times["stage"]))]
    rounds = {name: [round(frames / t, 3) for t in values] for name, values in times.items()}
    stage_measured = {"fps": round(fps["stage"], 3), "fps_rounds": rounds["stage"], "frames": frames,
                      "batch": batch, "model": u8_model.name, "contract": "uint8",
                      "wall_s_with_session_open": best_stage["wall_s_with_session_open"]}  # fmt: skip
    setup = (f"{width}x{height} clip, {frames} frames, DA3 small smoke, stage at the 16:9 tier {tier[0]}x{tier[1]}, "
             f"seed loop at {size}x{size}, {provider}")  # fmt: skip
    p1 = common.figure(
        fps["stage"] / fps["bare"],
        ">= 0.9",
        baseline={
            "what": "bare InferenceSession.run over ready-made batches (same session options)",
            "fps": round(fps["bare"], 3),
            "fps_rounds": rounds["bare"],
            "batch": batch,
            "model": u8_model.name,
            "session_open_s": [round(s, 2) for s in opens["bare"]],
        },
        measured=stage_measured,
        setup=setup,
    )
    p2 = common.figure(
        fps["stage"] / fps["reference"],
        ">= 1.5",
        baseline={
            "what": "seed loop: decode full size, cv2.resize INTER_CUBIC, numpy normalise, "
            "batch 1, float contract, default session options, same store",
            "fps": round(fps["reference"], 3),
            "fps_rounds": rounds["reference"],
            "batch": 1,
            "model": float_model.name,
            "session_open_s": [round(s, 2) for s in opens["reference"]],
        },
        measured=stage_measured,
        setup=setup,
    )
    # The figure before aspect tiers, in the same run: the stage on the square export (da3.fit: letterbox).
    p2["stage_on_the_square_export"] = {"ratio": round(fps["stage_square"] / fps["reference"], 3),
                                        "fps": round(fps["stage_square"], 3), "fps_rounds": rounds["stage_square"],
                                        "model": square_model.name}  # fmt: skip
    return {"P1": p1, "P2": p2, "_smoke_store": best_stage["store"]}  # the store: P7 measures it too


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=16)
    parser.add_argument("--size", type=int, default=common.DA3_SIZE)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--provider", default="cpu", choices=["cpu", "cuda", "tensorrt"])
    args = parser.parse_args()
    results = run(args.frames, args.size, args.batch, args.repeats, provider=args.provider)
    print(json.dumps({k: v for k, v in results.items() if not k.startswith("_")}, indent=2))


if __name__ == "__main__":
    main()
