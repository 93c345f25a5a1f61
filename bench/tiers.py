"""P15: DA3 per aspect tier: what each tier's export costs to make, and how fast the model runs at its shape.

    python -m bench.tiers [--size S] [--frames N]
    python -m bench.tiers --contact-sheets bench/recorded   # the QC contact sheet, square vs aspect tier

For each default tier (``stereo3d.models.da3.tiers.DEFAULT_TIERS``) at longest side ``size`` (518, DA3's native),
the export of the bench's variant (uint8 contract, smoke weights) is made and validated as the workflow makes it:
export seconds (``torch.onnx.export`` alone, and the whole call with validation), file size, relative mean error
against PyTorch. Then bare ``InferenceSession.run`` (batch 4, ``frames`` frames) of each export, taking turns.

P15 = frames/s of the 16:9 tier's export ÷ frames/s of the square export, the same run: what a 16:9 film gains
in the model alone (goal >= 1.5; the token count falls from 37x37 to 37x21).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from bench import common


def run(size: int = 518, frames: int = 8, batch: int = 4, repeats: int = 2, aspects: tuple[str, ...] = ()) -> dict:
    """P15 over the ``aspects`` tiers (default: every default tier; the figure needs 16:9 and 1:1)."""
    from stereo3d.models.da3.export import export_da3
    from stereo3d.models.da3.tiers import DEFAULT_TIERS, parse_aspect, tier_shape
    from stereo3d.runtime.sessions import SessionOptions, open_session

    weights = common.ensure_da3_weights()
    work = common.scratch("tiers")
    tiers = {tier: tier_shape(parse_aspect(tier), size) for tier in aspects or DEFAULT_TIERS}
    exports = {}
    for tier, shape in tiers.items():
        path = work / f"{tier.replace(':', 'x')}.onnx"
        common.say(f"P15: exporting DA3 {common.DA3_VARIANT} at {shape[0]}x{shape[1]} ({tier}), validated")
        started = time.perf_counter()
        report = export_da3(weights, path, common.DA3_VARIANT, shape, "uint8", validate=True)
        wall = time.perf_counter() - started
        exports[tier] = {"path": path, "shape": list(shape), "export_s": report["export_seconds"],
                         "export_and_validate_s": round(wall, 1), "mib": round(report["file_bytes"] / 2**20, 1),
                         "rel_mean_err": report["rel_mean_err"]}  # fmt: skip
    rng = np.random.default_rng(0)
    sessions = {tier: open_session(e["path"], SessionOptions(providers=("cpu",))) for tier, e in exports.items()}

    def runner(tier: str):
        width, height = tiers[tier]
        feed = rng.integers(0, 256, (batch, height, width, 3), dtype=np.uint8)

        def go() -> float:
            start = time.perf_counter()
            for _ in range(frames // batch):
                sessions[tier].run(["depth"], {"image": feed})
            return time.perf_counter() - start

        return go

    common.say(f"P15: bare ORT at each tier's shape, {frames} frames at batch {batch}, {repeats} rounds")
    times = common.interleaved({tier: runner(tier) for tier in tiers}, repeats)
    for tier, values in times.items():
        exports[tier]["fps"] = round(frames / min(values), 3)
        exports[tier].pop("path")
    square, wide = exports["1:1"], exports["16:9"]
    return {
        "P15": common.figure(
            wide["fps"] / square["fps"],
            ">= 1.5",
            baseline={"what": f"bare ORT on the square export {size}x{size}", "fps": square["fps"]},
            measured={
                "what": f"bare ORT on the 16:9 tier's export {wide['shape'][0]}x{wide['shape'][1]}",
                "fps": wide["fps"],
            },  # fmt: skip
            tiers=exports,
            setup=f"DA3 {common.DA3_VARIANT} smoke, uint8, batch {batch}, CPU",
        )
    }


def contact_sheets(out_dir: Path, size: int = common.DA3_SIZE) -> list[Path]:
    """The report's contact sheet of one 16:9 clip (the demo's), converted by the workflow twice: through the
    square export (``da3.fit: letterbox``) and through its aspect tier (``da3.fit: aspect``)."""
    import shutil

    from bench import pipeline

    made = []
    for fit in ("letterbox", "aspect"):
        work = pipeline.workdir(f"sheet-{fit}", size, da3={"fit": fit}, encode={"preset": "ultrafast"})
        clip = common.clip("sheet_16x9", width=320, height=180, frames=48, fps="16", pattern="boxes")
        shutil.copy2(clip, work / "videos" / "clip.mp4")
        common.say(f"contact sheet: converting a 16:9 clip with da3.fit {fit} at {size}")
        pipeline._snakemake(work, "--cores", "2", no_slurm=True)
        out = out_dir / f"contact_sheet_16x9_{fit}_{size}.png"
        shutil.copy2(work / "work/clip/qc/contact_sheet.png", out)
        made.append(out)
    return made


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=518)
    parser.add_argument("--frames", type=int, default=8)
    parser.add_argument("--contact-sheets", type=Path, help="write the two contact sheets into this folder")
    args = parser.parse_args()
    if args.contact_sheets:
        print("\n".join(map(str, contact_sheets(args.contact_sheets))))
        return
    print(json.dumps(run(args.size, args.frames), indent=2))


if __name__ == "__main__":
    main()
