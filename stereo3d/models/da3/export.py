"""DA3 Small/Base → a fixed-size, depth-only ONNX graph (dynamic batch), validated against PyTorch.

Names and the two input contracts come from the DA3 seed (examples/da3_to_onnx.py); the model and its export
patches from ``stereo3d.models.da3.model``.
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
    VARIANTS,
    build_da3,
    check_choice,
    check_size,
    depth_module,
    export_patches,
    normalise_image,
)
from stereo3d.models.validation import check_error, error_figures, set_metadata, sha256_file, write_validation

log = logging.getLogger(__name__)

EXPORTERS = ("dynamo", "legacy")
INPUT_NAME = "image"
OUTPUT_NAME = "depth"
OUTPUT_SEMANTICS = "raw DA3 depth, distance-like, smaller = nearer"
LAYOUTS = {
    "float": "float32 [batch,3,S,S] RGB CHW, ImageNet-normalised",
    "uint8": "uint8 [batch,S,S,3] RGB HWC, 0..255 (normalisation inside the graph)",
}
# Upper bound for torch.export's batch symbol: unbounded, an internal size guard (batch <= N/S^2) cannot be
# expressed and the export fails. ONNX Runtime does not enforce it; it only bounds what the export assumes.
MAX_BATCH = 64


def da3_onnx_name(variant: str, size: int = DEFAULT_SIZE, contract: str = "float") -> str:
    """Seed names (`da3_small.onnx`, `da3_small_280.onnx`), plus `_u8` for the folded uint8 contract.

    The format lives in stereo3d.models.names (torch-free, used by the Snakefile); this adds the checks.
    """
    check_choice("variant", variant, VARIANTS)
    check_choice("contract", contract, CONTRACTS)
    return names.da3_onnx_name(variant, check_size(size), contract)


def parse_da3_onnx_name(name: str | Path) -> tuple[str, int, str]:
    """Inverse of :func:`da3_onnx_name`: ``(variant, size, contract)``; accepts a path, a name or a stem."""
    base = Path(name).name
    try:
        variant, size, contract = names.parse_da3_onnx_name(base)
    except ValueError as exc:
        raise BadConfig(None, f"{base!r} is not a DA3 model name (da3_<small|base>[_<size>][_u8].onnx)") from exc
    canonical = da3_onnx_name(variant, size, contract)
    if base.removesuffix(".onnx") != canonical.removesuffix(".onnx"):
        # e.g. da3_small_518.onnx would be a second file for the model named da3_small.onnx
        raise BadConfig(None, f"{base!r} is not the canonical name of that model: use {canonical!r}")
    return variant, size, contract


def export_da3(
    weights: str | Path,
    out_path: str | Path,
    variant: str,
    size: int = DEFAULT_SIZE,
    contract: str = "float",
    opset: int = 18,
    device: str = "cpu",
    validate: bool = True,
    fail_rel_mean_err: float | None = None,
    exporter: str = "dynamo",
) -> dict[str, Any]:
    """Export DA3 ``variant`` at side ``size`` to ``out_path`` (atomically) and write its validation JSON.

    Returns the report written beside the model. With ``validate``, ONNX Runtime (CPU) is compared
    with PyTorch at batch 1 and 2 before the file is renamed into place; a relative mean error above
    ``fail_rel_mean_err`` raises ExportMismatch and leaves no model behind.
    """
    import onnx
    import torch

    check_choice("variant", variant, VARIANTS)
    check_choice("contract", contract, CONTRACTS)
    check_choice("exporter", exporter, EXPORTERS)
    check_size(size)
    if device not in ("cpu", "cuda") and not device.startswith("cuda:"):
        raise BadConfig(None, f"device {device!r} must be cpu or cuda[:N]")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise BadConfig(None, f"device {device!r} requested but this torch build sees no CUDA device")
    weights, out_path = Path(weights), Path(out_path)

    net = build_da3(variant)
    facts = load_da3_weights(net, weights)  # before dropping cam_enc/cam_dec: the file holds their keys
    net.cam_enc = net.cam_dec = None  # depth only; the aux branch is pruned by the exporter as dead code
    model = depth_module(net, contract).to(device)
    weights_sha256 = sha256_file(weights)
    if facts["smoke"]:
        log.warning("%s: SMOKE weights (seeded random): the exported depth is meaningless", weights)

    started = time.perf_counter()
    proto = _export_graph(model, size, contract, opset, exporter, device)
    export_seconds = time.perf_counter() - started
    set_metadata(proto, _metadata(variant, size, contract, weights_sha256, facts["smoke"]))

    report: dict[str, Any] = {
        "model": "da3",
        "variant": variant,
        "size": size,
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
        "validated": validate,
    }
    with atomic_output(out_path) as tmp:
        onnx.save_model(proto, str(tmp))
        del proto
        report["file_bytes"] = tmp.stat().st_size
        if validate:
            onnx.checker.check_model(str(tmp), full_check=True)
            report["onnx_checker"] = "full_check passed"
            report.update(_validate(model, tmp, size, contract, device))
            # Raising here removes the temporary model and keeps any earlier model/report pair intact.
            check_error(out_path, report, fail_rel_mean_err)
    write_validation(out_path, report)
    log.info(
        "%s: %s %d %s, %.1f MiB, exported in %.1f s%s",
        out_path,
        variant,
        size,
        contract,
        report["file_bytes"] / 2**20,
        export_seconds,
        f", rel_mean_err {report['rel_mean_err']:.2g}" if validate else "",
    )
    return report


def _export_graph(model, size: int, contract: str, opset: int, exporter: str, device: str):
    """An ``onnx.ModelProto`` with a dynamic batch axis and static [batch,S,S] output."""
    import onnx
    import torch

    # Batch 2: with a batch-1 example torch.export silently specialises the batch dim to 1.
    example = torch.from_numpy(_example_images(contract, size, batch=2)).to(device)
    batch = torch.export.Dim("batch", min=1, max=MAX_BATCH)
    with export_patches(), torch.no_grad(), _quiet_exporter():
        if exporter == "dynamo":
            program = torch.onnx.export(
                model,
                (example,),
                dynamo=True,
                opset_version=opset,
                input_names=[INPUT_NAME],
                output_names=[OUTPUT_NAME],
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
                output_names=[OUTPUT_NAME],
                dynamic_axes={INPUT_NAME: {0: "batch"}, OUTPUT_NAME: {0: "batch"}},
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


def _validate(model, onnx_path: Path, size: int, contract: str, device: str) -> dict[str, Any]:
    """ORT (CPU) vs eager PyTorch (upstream code, unpatched) at batch 1 and 2 on a seeded image."""
    import onnxruntime as ort
    import torch

    from stereo3d.runtime.sessions import SessionOptions, open_session

    images = _example_images(contract, size, batch=2)
    session = open_session(onnx_path, SessionOptions(providers=("cpu",)))
    per_batch = {}
    for batch in (1, 2):
        x = images[:batch]
        with torch.no_grad():
            reference = model(torch.from_numpy(x).to(device)).float().cpu().numpy()
        got = session.run([OUTPUT_NAME], {INPUT_NAME: x})[0]
        per_batch[str(batch)] = {"output_shape": list(got.shape), **error_figures(reference, got)}
    worst = {
        key: max(figures[key] for figures in per_batch.values())
        for key in ("max_abs_err", "mean_abs_err", "rel_mean_err")
    }
    return {
        **worst,
        "output_shape": per_batch["2"]["output_shape"],
        "batches": per_batch,
        "providers": session.get_providers(),
        "onnxruntime": ort.__version__,
        "reference_depth_range": [float(reference.min()), float(reference.max())],
    }


def _example_images(contract: str, size: int, batch: int) -> np.ndarray:
    """A seeded random RGB image batch in the contract's input form."""
    rgb = np.random.default_rng(0).integers(0, 256, (batch, size, size, 3), dtype=np.uint8)
    return rgb if contract == "uint8" else normalise_image(rgb)


def _metadata(variant: str, size: int, contract: str, weights_sha256: str, smoke: bool) -> dict[str, str]:
    return {
        "stereo3d.model": "da3",
        "stereo3d.variant": variant,
        "stereo3d.size": str(size),
        "stereo3d.contract": contract,
        "stereo3d.input_name": INPUT_NAME,
        "stereo3d.input_dtype": "float32" if contract == "float" else "uint8",
        "stereo3d.input_layout": "NCHW" if contract == "float" else "NHWC",
        "stereo3d.input": LAYOUTS[contract],
        "stereo3d.norm_mean": json.dumps(list(IMAGENET_MEAN)),
        "stereo3d.norm_std": json.dumps(list(IMAGENET_STD)),
        "stereo3d.normalisation": "in graph" if contract == "uint8" else "by caller",
        "stereo3d.output_name": OUTPUT_NAME,
        "stereo3d.output_layout": "float32 [batch,S,S]",
        "stereo3d.output_semantics": OUTPUT_SEMANTICS,
        "stereo3d.weights_sha256": weights_sha256,
        "stereo3d.smoke": "true" if smoke else "false",
    }


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
