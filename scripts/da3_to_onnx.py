"""Export a DA3 variant to fixed-shape, depth-only ONNX (thin adapter over stereo3d.models.da3.export).

Command line (the seed's options, names keep both contracts apart; --aspect makes an aspect tier's export):
    python scripts/da3_to_onnx.py --variant both --validate --fold-preprocess --size 518
    python scripts/da3_to_onnx.py --variant small --fold-preprocess --size 518 --aspect 16:9   # 518x294
Snakemake (`script:`): input.weights; output.onnx, output.validation; params model (variant, width, height,
contract), opset, exporter; config export.fail_rel_mean_err; log[0].
"""

import argparse
import logging
import sys
from pathlib import Path

# Run from a checkout without installing the package.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from stereo3d.models.da3.variants import VARIANTS  # noqa: E402  (torch-free: the parser's choices)

SEED_BOTH = ("small", "base")  # the seed's --variant both


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    if args.vendor:
        _use_vendor(args.vendor)
    from stereo3d.errors import StereoError
    from stereo3d.models.da3.export import da3_onnx_name, export_da3
    from stereo3d.models.da3.tiers import parse_aspect, tier_shape

    contract = "uint8" if args.fold_preprocess else "float"
    variants = SEED_BOTH if args.variant == "both" else (args.variant,)
    try:
        shape = tier_shape(parse_aspect(args.aspect), args.size) if args.aspect else (args.size, args.size)
    except ValueError as exc:
        raise SystemExit(f"--aspect/--size: {exc}") from None
    try:
        for variant in variants:
            export_da3(
                weights=Path(args.src_root) / VARIANTS[variant].folder / "model.safetensors",  # the seed's layout
                out_path=Path(args.out_dir) / da3_onnx_name(variant, shape, contract),
                variant=variant,
                size=shape,
                contract=contract,
                opset=args.opset,
                device=args.device,
                validate=args.validate,
                fail_rel_mean_err=args.fail_rel_mean_err,
                exporter=args.exporter,
            )
    except StereoError as exc:
        logging.getLogger("da3_to_onnx").error("%s", exc)
        return 1
    return 0


def run_snakemake(smk) -> None:
    """Snakemake `script:` entry: one export, logged to log[0]; a bad input fails in one line."""
    from stereo3d.workflow.scripting import run_guarded, setup_logging

    setup_logging(smk.log[0])
    logging.captureWarnings(True)
    run_guarded(lambda: _export_for_rule(smk))


def _export_for_rule(smk) -> None:
    from stereo3d.models.da3.export import export_da3
    from stereo3d.models.validation import validation_path

    params = smk.params
    out = Path(smk.output.onnx)
    # The package writes the report beside the model under a fixed name; the rule must declare that one.
    if "validation" in smk.output.keys() and Path(smk.output.validation) != validation_path(out):
        raise ValueError(f"output.validation must be {validation_path(out)}, got {smk.output.validation}")
    export_da3(
        weights=smk.input.weights,
        out_path=out,
        variant=params.model["variant"],
        size=(int(params.model["width"]), int(params.model["height"])),
        contract=params.model["contract"],
        opset=int(params.opset),
        # The workflow offers neither: it traces on the CPU and always validates (the report is a declared output).
        device="cpu",
        validate=True,
        # A check, not a setting of the bytes: read from config so that changing it reruns nothing.
        fail_rel_mean_err=smk.config["export"]["fail_rel_mean_err"],
        exporter=params.exporter,
    )


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--variant", choices=[*VARIANTS, "both"], default="small",
                   help=f"both = {' and '.join(SEED_BOTH)}")  # fmt: skip
    folders = ", ".join(f"{row.folder}/" for row in VARIANTS.values())
    p.add_argument("--src-root", default="weights/DA3",
                   help=f"folder holding the variants' folders ({folders}) with their model.safetensors")  # fmt: skip
    p.add_argument("--vendor", help="DA3 source root containing depth_anything_3/ (default: installed package)")
    p.add_argument("--out-dir", default="models/DA3")
    p.add_argument("--size", type=int, default=518, help="input side (the longest with --aspect), a multiple of 14")
    p.add_argument("--aspect", help="an aspect tier WIDTH:HEIGHT (e.g. 16:9 gives 518x294 at --size 518); "
                   "default: square")  # fmt: skip
    p.add_argument("--opset", type=int, default=18)
    p.add_argument("--device", default="cpu", help="cpu or cuda[:N], used for tracing")
    p.add_argument(
        "--validate",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="compare ONNX Runtime (CPU) with PyTorch at batch 1 and 2",
    )
    p.add_argument(
        "--fold-preprocess",
        action="store_true",
        help="uint8 NHWC RGB input, ImageNet normalisation inside the graph (file name gets _u8)",
    )
    p.add_argument(
        "--fail-rel-mean-err",
        type=float,
        default=None,
        help="fail when ONNX vs PyTorch relative mean error exceeds this (default: warn above 1e-2)",
    )
    p.add_argument("--exporter", choices=["dynamo", "legacy"], default="dynamo")
    return p


def _use_vendor(root: str) -> None:
    """A vendored DA3 tree takes precedence over the installed package."""
    if not (Path(root) / "depth_anything_3").is_dir():
        raise SystemExit(f"--vendor {root}: no depth_anything_3/ folder there")
    sys.path.insert(0, str(Path(root).resolve()))


if "snakemake" in globals():
    run_snakemake(snakemake)
elif __name__ == "__main__":
    sys.exit(main())
