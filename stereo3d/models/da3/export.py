"""A DA3 variant (a row of ``variants.VARIANTS``) → a fixed-shape (width x height), depth-only ONNX graph (dynamic
batch), validated against PyTorch.

Names and the two input contracts come from the DA3 seed (examples/da3_to_onnx.py); the model and its export
patches from ``stereo3d.models.da3.model``. The shape is a square side (the seed's exports) or an aspect tier
(``stereo3d.models.da3.tiers``); the positional embedding for it is folded into the graph as a constant.
A variant with a sky head (Mono-Large) has a second output, ``sky`` (the head's score; DA3 counts >= 0.3 as sky).
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from stereo3d.errors import BadConfig
from stereo3d.io.atomic import atomic_output
from stereo3d.models import names
from stereo3d.models.da3.checkpoint import load_da3_weights
from stereo3d.models.da3.model import (
    CONTRACTS,
    DEFAULT_SIZE,
    IMAGENET_MEAN,
    IMAGENET_STD,
    PATCH_SIZE,
    build_da3,
    check_choice,
    check_shape,
    depth_module,
    export_patches,
    folded_positions,
    normalise_image,
)
from stereo3d.models.da3.variants import VARIANTS
from stereo3d.models.validation import check_error, error_figures, set_metadata, sha256_file, write_validation

log = logging.getLogger(__name__)

EXPORTERS = ("dynamo", "legacy")
INPUT_NAME = "image"
OUTPUT_NAME = "depth"
SKY_NAME = "sky"
OUTPUT_SEMANTICS = "raw DA3 depth, distance-like, smaller = nearer"
SKY_SEMANTICS = "sky score of the sky head (ReLU); sky where >= 0.3, as DA3 counts it"
LAYOUTS = {
    "float": "float32 [batch,3,H,W] RGB CHW, ImageNet-normalised",
    "uint8": "uint8 [batch,H,W,3] RGB HWC, 0..255 (normalisation inside the graph)",
}
# Upper bound for torch.export's batch symbol: unbounded, an internal size guard (batch <= N/S^2) cannot be
# expressed and the export fails. ONNX Runtime does not enforce it; it only bounds what the export assumes.
MAX_BATCH = 64


def da3_onnx_name(variant: str, size=DEFAULT_SIZE, contract: str = "float") -> str:
    """Seed names (`da3_small.onnx`, `da3_small_280.onnx`), `da3_small_518x294.onnx` for a (width, height) that is
    not square, plus `_u8` for the folded uint8 contract.

    The format lives in stereo3d.models.names (torch-free, used by the Snakefile); this adds the checks.
    """
    check_choice("variant", variant, VARIANTS)
    check_choice("contract", contract, CONTRACTS)
    return names.da3_onnx_name(variant, check_shape(size), contract)


def parse_da3_onnx_name(name: str | Path) -> tuple[str, tuple[int, int], str]:
    """Inverse of :func:`da3_onnx_name`: ``(variant, (width, height), contract)``; accepts a path, a name or a
    stem."""
    base = Path(name).name
    try:
        variant, size, contract = names.parse_da3_onnx_name(base)
    except ValueError as exc:
        parts = "|".join(row.onnx_part for row in VARIANTS.values())
        raise BadConfig(None, f"{base!r} is not a DA3 model name (da3_<{parts}>[_<side>|_<W>x<H>][_u8].onnx)") from exc
    canonical = da3_onnx_name(variant, size, contract)
    if base.removesuffix(".onnx") != canonical.removesuffix(".onnx"):
        # e.g. da3_small_518.onnx would be a second file for the model named da3_small.onnx
        raise BadConfig(None, f"{base!r} is not the canonical name of that model: use {canonical!r}")
    return variant, size, contract


def export_da3(
    weights: str | Path,
    out_path: str | Path,
    variant: str,
    size=DEFAULT_SIZE,
    contract: str = "float",
    opset: int = 18,
    device: str = "cpu",
    validate: bool = True,
    fail_rel_mean_err: float | None = None,
    exporter: str = "dynamo",
) -> dict[str, Any]:
    """Export DA3 ``variant`` at ``size`` (a square side, or (width, height)) to ``out_path`` (atomically) and
    write its validation JSON.

    Returns the report written beside the model. With ``validate``, ONNX Runtime (CPU) is compared
    with PyTorch at batch 1 and 2 before the file is renamed into place; a relative mean error above
    ``fail_rel_mean_err`` raises ExportMismatch and leaves no model behind.
    """
    import onnx
    import torch

    check_choice("variant", variant, VARIANTS)
    check_choice("contract", contract, CONTRACTS)
    check_choice("exporter", exporter, EXPORTERS)
    width, height = check_shape(size)
    if device not in ("cpu", "cuda") and not device.startswith("cuda:"):
        raise BadConfig(None, f"device {device!r} must be cpu or cuda[:N]")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise BadConfig(None, f"device {device!r} requested but this torch build sees no CUDA device")
    weights, out_path = Path(weights), Path(out_path)

    net = build_da3(variant)
    facts = load_da3_weights(net, weights)  # before dropping cam_enc/cam_dec: the file holds their keys
    net.cam_enc = net.cam_dec = None  # depth only; the aux branch is pruned by the exporter as dead code
    model = depth_module(net, contract).to(device)
    outputs = [OUTPUT_NAME, SKY_NAME] if VARIANTS[variant].sky else [OUTPUT_NAME]  # build_da3 checked the net
    weights_sha256 = sha256_file(weights)
    if facts["smoke"]:
        log.warning("%s: SMOKE weights (seeded random): the exported depth is meaningless", weights)

    started = time.perf_counter()
    with folded_positions(net, width, height):
        proto = _export_graph(model, (width, height), contract, opset, exporter, device, outputs)
    export_seconds = time.perf_counter() - started
    set_metadata(proto, _metadata(variant, (width, height), contract, weights_sha256, facts["smoke"], outputs))

    report: dict[str, Any] = {
        "model": "da3",
        "variant": variant,
        "size": max(width, height),
        "width": width,
        "height": height,
        "contract": contract,
        "opset": opset,
        "exporter": exporter,
        "device": device,
        "torch": torch.__version__,
        "onnx": onnx.__version__,
        "weights": str(weights),
        "weights_sha256": weights_sha256,
        "smoke": facts["smoke"],
        "export_seconds": round(export_seconds, 2),
        "nodes": len(proto.graph.node),
        "input": {"name": INPUT_NAME, "layout": LAYOUTS[contract]},
        "output": {"name": OUTPUT_NAME, "semantics": OUTPUT_SEMANTICS},
        "outputs": outputs,
        "positional_embedding": _positions_folded(proto, width, height),
        "validated": validate,
    }
    with atomic_output(out_path) as tmp:
        onnx.save_model(proto, str(tmp))
        del proto
        report["file_bytes"] = tmp.stat().st_size
        if validate:
            onnx.checker.check_model(str(tmp), full_check=True)
            report["onnx_checker"] = "full_check passed"
            report.update(_validate(model, tmp, (width, height), contract, device, outputs))
            # Raising here removes the temporary model and keeps any earlier model/report pair intact.
            check_error(out_path, report, fail_rel_mean_err)
    write_validation(out_path, report)
    log.info(
        "%s: %s %dx%d %s, %.1f MiB, exported in %.1f s%s",
        out_path,
        variant,
        width,
        height,
        contract,
        report["file_bytes"] / 2**20,
        export_seconds,
        f", rel_mean_err {report['rel_mean_err']:.2g}" if validate else "",
    )
    return report


def _export_graph(model, shape: tuple[int, int], contract: str, opset: int, exporter: str, device: str,
                  outputs: list[str]):  # fmt: skip
    """An ``onnx.ModelProto`` with a dynamic batch axis and static [batch,H,W] outputs."""
    import onnx
    import torch

    # Batch 2: with a batch-1 example torch.export silently specialises the batch dim to 1.
    example = torch.from_numpy(_example_images(contract, shape, batch=2)).to(device)
    batch = torch.export.Dim("batch", min=1, max=MAX_BATCH)
    with export_patches(), torch.no_grad(), _quiet_exporter():
        if exporter == "dynamo":
            program = torch.onnx.export(
                model,
                (example,),
                dynamo=True,
                opset_version=opset,
                input_names=[INPUT_NAME],
                output_names=outputs,
                dynamic_shapes={"image": {0: batch}},
                optimize=True,
                verbose=False,
            )
            proto = program.model_proto
        else:
            buffer = io.BytesIO()
            torch.onnx.export(
                model,
                (example,),
                buffer,
                dynamo=False,
                opset_version=opset,
                input_names=[INPUT_NAME],
                output_names=outputs,
                dynamic_axes={INPUT_NAME: {0: "batch"}, **{name: {0: "batch"} for name in outputs}},
                do_constant_folding=True,
            )
            # The legacy exporter leaves the output H/W symbolic; data propagation resolves them.
            proto = onnx.shape_inference.infer_shapes(onnx.load_from_string(buffer.getvalue()), data_prop=True)
    # Dynamo puts debug metadata on every node: stack traces with absolute paths and a per-process
    # counter (`<eval_with_key>.N`). Kept, reruns and other checkouts would differ in bytes.
    _strip_debug_info(proto)
    return proto


def _strip_debug_info(proto) -> None:
    """Drop per-node/value debug metadata and doc strings; the model-level metadata is set afterwards."""
    graphs = [proto.graph]
    functions = list(proto.functions)
    while graphs or functions:
        owner = graphs.pop() if graphs else functions.pop()
        for node in owner.node:
            del node.metadata_props[:]
            node.doc_string = ""
            for attr in node.attribute:
                graphs.extend([attr.g] if attr.HasField("g") else [])
                graphs.extend(attr.graphs)
        if hasattr(owner, "initializer"):  # a GraphProto, not a FunctionProto
            for item in (*owner.initializer, *owner.value_info, *owner.input, *owner.output):
                del item.metadata_props[:]
                item.doc_string = ""
        del owner.metadata_props[:]
        owner.doc_string = ""


def _validate(model, onnx_path: Path, shape: tuple[int, int], contract: str, device: str,
              outputs: list[str]) -> dict[str, Any]:  # fmt: skip
    """ORT (CPU) vs eager PyTorch (upstream code, unpatched) at batch 1 and 2 on a seeded image; every output
    compared (the worst one is the export's figure)."""
    import onnxruntime as ort
    import torch

    from stereo3d.runtime.sessions import SessionOptions, open_session

    images = _example_images(contract, shape, batch=2)
    session = open_session(onnx_path, SessionOptions(providers=("cpu",)))
    per_batch, per_output = {}, {}
    for batch in (1, 2):
        x = images[:batch]
        with torch.no_grad():
            expected = model(torch.from_numpy(x).to(device))
        expected = expected if isinstance(expected, tuple) else (expected,)
        references = [tensor.float().cpu().numpy() for tensor in expected]
        got = session.run(outputs, {INPUT_NAME: x})
        figures = {name: error_figures(ref, out) for name, ref, out in zip(outputs, references, got)}
        per_output[str(batch)] = figures
        per_batch[str(batch)] = {"output_shape": list(got[0].shape), **figures[OUTPUT_NAME]}
    keys = ("max_abs_err", "mean_abs_err", "rel_mean_err")
    worst = {key: max(f[key] for by_name in per_output.values() for f in by_name.values()) for key in keys}
    report = {
        **worst,
        "output_shape": per_batch["2"]["output_shape"],
        "batches": per_batch,
        "providers": session.get_providers(),
        "onnxruntime": ort.__version__,
        "reference_depth_range": [float(references[0].min()), float(references[0].max())],
    }
    if len(outputs) > 1:
        report["outputs_compared"] = {
            name: {key: max(by_name[name][key] for by_name in per_output.values()) for key in keys} for name in outputs
        }
    return report


def _positions_folded(proto, width: int, height: int) -> dict[str, Any]:
    """Proof that the positional embedding is a constant of the graph at the export's token grid: an initializer
    [1, 1 + rows x cols, C] is there, and the 37x37 table it was interpolated from is not (unless the grid is
    37x37 itself). Raises if not: interpolating on every call would cost each frame a bicubic resize."""
    grid = (height // PATCH_SIZE) * (width // PATCH_SIZE)
    native = (DEFAULT_SIZE // PATCH_SIZE) ** 2
    # dynamo keeps constants as initializers, the legacy exporter as Constant nodes
    constants = [*proto.graph.initializer]
    constants += [a.t for n in proto.graph.node if n.op_type == "Constant" for a in n.attribute if a.HasField("t")]
    tables = {t.dims[1] - 1 for t in constants if len(t.dims) == 3 and t.dims[0] == 1 and t.dims[1] > 1}
    if grid not in tables or (grid != native and native in tables):
        raise RuntimeError(f"positional embedding not folded for {width}x{height}: tables of {sorted(tables)} patches")
    return {"folded": True, "patches": [height // PATCH_SIZE, width // PATCH_SIZE]}


def _example_images(contract: str, shape: tuple[int, int], batch: int) -> np.ndarray:
    """A seeded random RGB image batch in the contract's input form."""
    width, height = shape
    rgb = np.random.default_rng(0).integers(0, 256, (batch, height, width, 3), dtype=np.uint8)
    return rgb if contract == "uint8" else normalise_image(rgb)


def _metadata(variant: str, shape: tuple[int, int], contract: str, weights_sha256: str, smoke: bool,
              outputs: list[str]) -> dict[str, str]:  # fmt: skip
    width, height = shape
    meta = {
        "stereo3d.model": "da3",
        "stereo3d.variant": variant,
        "stereo3d.size": str(max(width, height)),
        "stereo3d.width": str(width),
        "stereo3d.height": str(height),
        "stereo3d.contract": contract,
        "stereo3d.input_name": INPUT_NAME,
        "stereo3d.input_dtype": "float32" if contract == "float" else "uint8",
        "stereo3d.input_layout": "NCHW" if contract == "float" else "NHWC",
        "stereo3d.input": LAYOUTS[contract],
        "stereo3d.norm_mean": json.dumps(list(IMAGENET_MEAN)),
        "stereo3d.norm_std": json.dumps(list(IMAGENET_STD)),
        "stereo3d.normalisation": "in graph" if contract == "uint8" else "by caller",
        "stereo3d.output_name": OUTPUT_NAME,
        "stereo3d.output_layout": "float32 [batch,H,W]",
        "stereo3d.output_semantics": OUTPUT_SEMANTICS,
        "stereo3d.outputs": ",".join(outputs),
        "stereo3d.weights_sha256": weights_sha256,
        "stereo3d.smoke": "true" if smoke else "false",
    }
    if SKY_NAME in outputs:
        meta["stereo3d.sky_semantics"] = SKY_SEMANTICS
    return meta


@contextlib.contextmanager
def _quiet_exporter() -> Iterator[None]:
    """Exporter chatter that says nothing actionable: the legacy exporter's deprecation and tracer
    warnings, onnx_ir/onnxscript INFO lines (hundreds per export) and "torchvision is not installed"."""
    import warnings

    import torch

    quieter = {
        "onnx_ir": logging.WARNING,
        "onnxscript": logging.WARNING,
        "torch.onnx": logging.WARNING,
        "torch.onnx._internal.exporter._registration": logging.ERROR,
    }
    saved = {name: logging.getLogger(name).level for name in quieter}
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=DeprecationWarning)
        warnings.filterwarnings("ignore", category=FutureWarning, message=".*LeafSpec.*")
        warnings.filterwarnings("ignore", category=torch.jit.TracerWarning)
        for name, level in quieter.items():
            logging.getLogger(name).setLevel(level)
        try:
            yield
        finally:
            for name, level in saved.items():
                logging.getLogger(name).setLevel(level)
