"""Export NVDS to fixed-tier ONNX (split backbone + head, or the monolith), with validation JSON.

Command line (the seed's options):
    python scripts/export_nvds_onnx.py --split --width 512 --height 288 --checkpoint weights/NVDS/NVDS_Stabilizer.pth

From Snakemake (``script:``): input.checkpoint; output: the ONNX file(s); params: tier (width, height),
mode ("split"/"monolith"), opset, dynamic_batch (optional); config export.nvds_fail_max_abs_err; log[0].
"""

import argparse
import logging
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    from stereo3d.errors import StereoError

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", action="store_true", help="export backbone + head instead of the monolith")
    parser.add_argument("--width", type=int, default=512, help="tier width, a multiple of 32")
    parser.add_argument("--height", type=int, default=288, help="tier height, a multiple of 32")
    parser.add_argument("--source-root", type=Path, help="upstream NVDS tree (full_model.py) used as the reference")
    parser.add_argument("--checkpoint", type=Path, default=Path("weights/NVDS/NVDS_Stabilizer.pth"))
    parser.add_argument("--output", type=Path, help="output path of the monolithic export")
    parser.add_argument("--out-dir", type=Path, default=Path("models/NVDS"))
    parser.add_argument("--opset", type=int, default=17)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--dynamic-batch", action="store_true", help="dynamic batch axis (monolith only)")
    parser.add_argument("--skip-ort-check", action="store_true", help="skip the ONNX Runtime comparison")
    parser.add_argument("--fail-max-abs-err", type=float, help="fail above this ONNX vs PyTorch max abs error")
    parser.add_argument("--tiny", action="store_true", help="the tiny test configuration of the architecture")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    if args.split and (args.output or args.dynamic_batch):
        parser.error("--output and --dynamic-batch apply to the monolithic export only")
    try:
        paths = run(
            args.checkpoint,
            args.out_dir,
            args.width,
            args.height,
            "split" if args.split else "monolith",
            opset=args.opset,
            device=args.device,
            dynamic_batch=args.dynamic_batch,
            ort_check=not args.skip_ort_check,
            fail_max_abs_err=args.fail_max_abs_err,
            tiny=args.tiny,
            monolith_path=args.output,
            source_root=args.source_root,
        )
    except StereoError as exc:
        logging.getLogger("export_nvds_onnx").error("%s", exc)
        return 1
    for path in paths:
        print(path)
    return 0


def run(checkpoint, out_dir, width, height, mode, tiny=False, **kwargs) -> list[Path]:
    """One call into the package (torch is imported only here, after the arguments are checked)."""
    from stereo3d.models.nvds.export import check_tier, export_nvds
    from stereo3d.models.nvds.model import NvdsConfig

    check_tier(width, height)
    config = NvdsConfig.tiny() if tiny else NvdsConfig()
    return export_nvds(checkpoint, out_dir, width, height, modes=(mode,), config=config, **kwargs)


def _snakemake_main(smk) -> None:
    from stereo3d.workflow.scripting import run_guarded, setup_logging

    setup_logging(smk.log[0])
    run_guarded(lambda: _snakemake_export(smk))


def _snakemake_export(smk) -> None:
    params = smk.params
    mode = params.get("mode", "split")
    outputs = [Path(p) for p in smk.output if str(p).endswith(".onnx")]  # the validation JSONs sit beside them
    monolith = outputs[0] if mode == "monolith" and outputs else None
    width, height = (int(side) for side in params.tier)
    run(
        smk.input.checkpoint,
        outputs[0].parent,
        width,
        height,
        mode,
        tiny=bool(params.get("tiny", False)),
        opset=int(params.get("opset", 17)),
        device=params.get("device", "cpu"),
        dynamic_batch=bool(params.get("dynamic_batch", False)),
        # A check, not a setting of the bytes: read from config so that changing it reruns nothing.
        fail_max_abs_err=smk.config["export"]["nvds_fail_max_abs_err"],
        monolith_path=monolith,
    )


if "snakemake" in globals():
    _snakemake_main(snakemake)
elif __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing
    sys.exit(main())
