"""DA3 Small/Base: build from the packaged config, load hub weights, export a depth-only ONNX graph.

Facts (key layout, the two export patches, the shared aux LayerNorm) come from specs/da3.md; the
names and the two input contracts from the DA3 seed (examples/da3_to_onnx.py).
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import logging
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from stereo3d.atomic import atomic_output
from stereo3d.errors import BadConfig, BadWeights
from stereo3d.export import names
from stereo3d.export.report import check_error, error_figures, set_metadata, sha256_file, write_validation

log = logging.getLogger(__name__)

VARIANTS = {"small": "da3-small", "base": "da3-base"}  # variant -> MODEL_REGISTRY key
CONTRACTS = names.DA3_CONTRACTS  # ("float", "uint8"): ImageNet-normalised float32 NCHW | uint8 RGB NHWC
EXPORTERS = ("dynamo", "legacy")
DEFAULT_SIZE = names.DA3_DEFAULT_SIZE  # DA3's native 37x37 patch grid: the only size without a name suffix
PATCH_SIZE = 14  # DINOv2 patch side; PatchEmbed asserts sides are multiples of it
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
INPUT_NAME = "image"
OUTPUT_NAME = "depth"
OUTPUT_SEMANTICS = "raw DA3 depth, distance-like, smaller = nearer"
LAYOUTS = {
    "float": "float32 [batch,3,S,S] RGB CHW, ImageNet-normalised",
    "uint8": "uint8 [batch,S,S,3] RGB HWC, 0..255 (normalisation inside the graph)",
}

HUB_PREFIX = "model."  # PyTorchModelHubMixin saves the DepthAnything3 wrapper, whose child is `.model`
# DualDPT reuses one LayerNorm in all four aux heads; safetensors keeps only the .0.2 name (spec section 7).
ALIAS_KEYS = {
    f"head.scratch.output_conv2_aux.{level}.2.{kind}": f"head.scratch.output_conv2_aux.0.2.{kind}"
    for level in (1, 2, 3)
    for kind in ("weight", "bias")
}
WIDTH_KEY = "backbone.pretrained.patch_embed.proj.weight"
WIDTH_NAMES = {384: "Small", 768: "Base", 1024: "Large", 1536: "Giant"}  # DINOv2 ViT-S/B/L/G widths
DEPTH_CONV = "head.scratch.output_conv2.2"  # last conv before the exp activation
SMOKE_KEY, SMOKE_VALUE = "stereo3d", "smoke"
# Random init gives a near-constant depth (~1.1); x40 on the final conv gives a wide range (spec section 6).
SMOKE_DEPTH_GAIN = 40.0
# ...and a fixed depth-channel bias: Base's random bias x40 puts its smoke depth near 1e-4, Small's near 300;
# with this one both land in a few..hundreds range (exp activation), where runtime epsilons do not bite.
SMOKE_DEPTH_BIAS = 3.0
MAX_LISTED = 3  # offending keys named in a one-line error
# Upper bound for torch.export's batch symbol: unbounded, an internal size guard (batch <= N/S^2) cannot be
# expressed and the export fails. ONNX Runtime does not enforce it; it only bounds what the export assumes.
MAX_BATCH = 64


def da3_onnx_name(variant: str, size: int = DEFAULT_SIZE, contract: str = "float") -> str:
    """Seed names (`da3_small.onnx`, `da3_small_280.onnx`), plus `_u8` for the folded uint8 contract.

    The format lives in stereo3d.export.names (torch-free, used by the Snakefile); this adds the checks.
    """
    _check_choice("variant", variant, VARIANTS)
    _check_choice("contract", contract, CONTRACTS)
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


def check_size(size: int) -> int:
    """A positive multiple of the patch size, else BadConfig."""
    if isinstance(size, bool) or not isinstance(size, int) or size <= 0 or size % PATCH_SIZE:
        raise BadConfig(None, f"DA3 input side {size!r} must be a positive multiple of {PATCH_SIZE} "
                              "(e.g. 140, 280, 518)")
    return size


def build_da3(variant: str):
    """A randomly initialised ``DepthAnything3Net`` (camera modules included) from the packaged config.

    Only the config registry is used: ``depth_anything_3.api`` imports the hub client, cv2, trimesh...
    """
    _check_choice("variant", variant, VARIANTS)
    os.environ.setdefault("DA3_LOG_LEVEL", "WARN")  # the package logger prints [INFO] lines to stdout
    with _quiet_import():
        from depth_anything_3.cfg import create_object, load_config
        from depth_anything_3.registry import MODEL_REGISTRY

        return create_object(load_config(MODEL_REGISTRY[VARIANTS[variant]]))


def load_da3_weights(net, path: str | Path) -> dict[str, Any]:
    """Load a hub ``model.safetensors`` into ``net`` (as built by :func:`build_da3`), strictly.

    Returns facts about the file (tensor count, dtypes cast, smoke flag). Raises BadWeights in one line
    for a missing/corrupt file, another model, the other variant, missing/unexpected keys or shapes.
    """
    import torch

    path = Path(path)
    tensors, metadata = _read_safetensors(path)
    state = {k.removeprefix(HUB_PREFIX): v for k, v in tensors.items()}
    expected = net.state_dict()
    _check_same_model(path, state, expected)
    for alias, source in ALIAS_KEYS.items():
        if alias not in state and source in state:
            state[alias] = state[source]
    missing = sorted(set(expected) - set(state))
    unexpected = sorted(set(state) - set(expected))
    if missing or unexpected:
        raise BadWeights(path, _key_mismatch(missing, unexpected, len(tensors)))
    wrong = [f"{k} file {list(v.shape)} vs model {list(expected[k].shape)}"
             for k, v in state.items() if v.shape != expected[k].shape]
    if wrong:
        raise BadWeights(path, f"{len(wrong)} tensors have the wrong shape: {_listed(wrong)}")
    not_float = sorted(k for k, v in state.items() if expected[k].is_floating_point() and not v.is_floating_point())
    if not_float:
        raise BadWeights(path, f"{len(not_float)} tensors are not floating point: {_listed(not_float)}")
    cast = sorted({str(v.dtype).removeprefix("torch.") for v in state.values() if v.dtype != torch.float32})
    if cast:
        log.info("%s: casting %s tensors to float32", path, ", ".join(cast))
        state = {k: v.float() for k, v in state.items()}
    net.load_state_dict(state, strict=True)
    return {"tensors": len(tensors), "cast_from": cast, "smoke": metadata.get(SMOKE_KEY) == SMOKE_VALUE}


def check_weights_header(path: str | Path, variant: str) -> dict[str, Any]:
    """Cheap checks of a hub ``model.safetensors`` without torch or reading the tensors: present, a whole
    safetensors file (header parses, every tensor's bytes are there), a DA3 checkpoint of ``variant``.

    Meant for the moment the workflow is parsed, so that a bad file stops the run before any job; the export
    still loads it strictly (names and shapes of every tensor). Returns the header's metadata.
    """
    _check_choice("variant", variant, VARIANTS)
    path = Path(path)
    if not path.is_file():
        raise BadWeights(path, "weights file not found (place the hub model.safetensors there)")
    size = path.stat().st_size
    try:
        with open(path, "rb") as fh:
            length = int.from_bytes(fh.read(8), "little")
            if not 2 <= length <= min(size - 8, 100 * 2**20):
                raise ValueError(f"header length {length} does not fit a {size}-byte file")
            header = json.loads(fh.read(length))
        if not isinstance(header, dict):
            raise ValueError("header is not a JSON object")
        metadata = header.pop("__metadata__", None) or {}
        end = max((int(t["data_offsets"][1]) for t in header.values()), default=0)
    except (ValueError, KeyError, TypeError, IndexError, OSError) as exc:
        raise BadWeights(path, f"not a readable safetensors file (truncated or corrupt?): {exc}") from exc
    if 8 + length + end > size:
        raise BadWeights(path, f"truncated: the header promises {8 + length + end} bytes, the file has {size}")
    width_entry = header.get(HUB_PREFIX + WIDTH_KEY)
    if width_entry is None:
        raise BadWeights(path, f"not a DA3 checkpoint: no {HUB_PREFIX}{WIDTH_KEY} among its {len(header)} "
                               f"tensors (first: {_listed(sorted(header))})")
    got = int(width_entry["shape"][0])
    want = {"small": 384, "base": 768}[variant]
    if got != want:
        raise BadWeights(path, f"these are DA3 {WIDTH_NAMES.get(got, f'unknown ViT width {got}')} weights (ViT "
                               f"width {got}) but the model is DA3 {WIDTH_NAMES[want]} (width {want}): wrong "
                               "variant folder?")
    return metadata


@contextlib.contextmanager
def export_patches() -> Iterator[None]:
    """Make the DINOv2 RoPE path exportable; restore the upstream methods afterwards (spec section 5).

    1. PositionGetter: an uncached meshgrid grid. `cartesian_prod` has no ONNX symbolic, and the cache
       would keep tracer values or FakeTensors that poison later eager calls.
    2. RoPE: the cos/sin table length from the static token count instead of `int(positions.max())`,
       a data-dependent value torch.export cannot specialise. Rows do not depend on the table length.
    """
    from depth_anything_3.model.dinov2.layers import rope

    saved = rope.PositionGetter.__call__, rope.RotaryPositionEmbedding2D.forward
    rope.PositionGetter.__call__ = _meshgrid_positions
    rope.RotaryPositionEmbedding2D.forward = _rope_forward_static
    try:
        yield
    finally:
        rope.PositionGetter.__call__, rope.RotaryPositionEmbedding2D.forward = saved


def depth_module(net, contract: str = "float"):
    """The depth-only wrapper for one contract (``net``'s camera modules should be None)."""
    _check_choice("contract", contract, CONTRACTS)
    return _wrappers()[contract](net).eval()


def normalise_image(rgb_u8: np.ndarray) -> np.ndarray:
    """uint8 [B,S,S,3] RGB -> float32 [B,3,S,S] ImageNet-normalised: the float contract's input."""
    x = rgb_u8.astype(np.float32) / np.float32(255.0)
    x = (x - np.asarray(IMAGENET_MEAN, np.float32)) / np.asarray(IMAGENET_STD, np.float32)
    return np.ascontiguousarray(x.transpose(0, 3, 1, 2))


def export_da3(weights: str | Path, out_path: str | Path, variant: str, size: int = DEFAULT_SIZE,
               contract: str = "float", opset: int = 18, device: str = "cpu", validate: bool = True,
               fail_rel_mean_err: float | None = None, exporter: str = "dynamo") -> dict[str, Any]:
    """Export DA3 ``variant`` at side ``size`` to ``out_path`` (atomically) and write its validation JSON.

    Returns the report written beside the model. With ``validate``, ONNX Runtime (CPU) is compared
    with PyTorch at batch 1 and 2 before the file is renamed into place; a relative mean error above
    ``fail_rel_mean_err`` raises ExportMismatch and leaves no model behind.
    """
    import onnx
    import torch

    _check_choice("variant", variant, VARIANTS)
    _check_choice("contract", contract, CONTRACTS)
    _check_choice("exporter", exporter, EXPORTERS)
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
        "model": "da3", "variant": variant, "size": size, "contract": contract, "opset": opset,
        "exporter": exporter, "device": device, "torch": torch.__version__, "onnx": onnx.__version__,
        "weights": str(weights), "weights_sha256": weights_sha256, "smoke": facts["smoke"],
        "export_seconds": round(export_seconds, 2), "nodes": len(proto.graph.node),
        "input": {"name": INPUT_NAME, "layout": LAYOUTS[contract]},
        "output": {"name": OUTPUT_NAME, "semantics": OUTPUT_SEMANTICS}, "validated": validate,
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
    log.info("%s: %s %d %s, %.1f MiB, exported in %.1f s%s", out_path, variant, size, contract,
             report["file_bytes"] / 2**20, export_seconds,
             f", rel_mean_err {report['rel_mean_err']:.2g}" if validate else "")
    return report


def write_smoke_weights(path: str | Path, variant: str, seed: int = 0) -> Path:
    """Seeded random weights in the real hub layout, marked as smoke, written atomically.

    Layout as the hub mixin writes it: ``model.`` + DepthAnything3Net keys, shared tensors saved once
    (437 tensors). The final depth conv is scaled so the smoke depth map shows visible variation.
    """
    import torch
    from safetensors.torch import save_model

    path = Path(path)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        net = build_da3(variant)
    conv = net.get_submodule(DEPTH_CONV)
    with torch.no_grad():
        conv.weight.mul_(SMOKE_DEPTH_GAIN)
        conv.bias.mul_(SMOKE_DEPTH_GAIN)
        conv.bias[0] = SMOKE_DEPTH_BIAS  # channel 0 is depth, channel 1 confidence (pruned from the graph)
    hub = torch.nn.Module()
    hub.model = net  # the DepthAnything3 hub wrapper's only child
    metadata = {SMOKE_KEY: SMOKE_VALUE, "variant": variant, "seed": str(seed), "format": "pt"}
    with atomic_output(path) as tmp:
        save_model(hub, str(tmp), metadata=metadata)
        _sort_safetensors_header(tmp)
    return path


def is_smoke_weights(path: str | Path) -> bool:
    """True for files written by :func:`write_smoke_weights` (their safetensors metadata says so)."""
    return _read_safetensors(Path(path), header_only=True)[1].get(SMOKE_KEY) == SMOKE_VALUE


# --------------------------------------------------------------------------------------------------
# Wrappers


@functools.cache
def _wrappers() -> dict[str, type]:
    """The wrapper classes, defined on first use so that the name helpers import without torch
    (the Snakefile parses model names in an environment that may lack it)."""
    import torch

    class FloatDepth(torch.nn.Module):
        """`image` float32 [B,3,S,S] ImageNet-normalised -> `depth` [B,S,S]; one view per frame."""

        def __init__(self, net):
            super().__init__()
            self.net = net

        def forward(self, image):
            # One view: ref_view_strategy only acts from 3 views on; "middle" is the seed's choice.
            out = self.net(image[:, None], extrinsics=None, intrinsics=None, export_feat_layers=[],
                           infer_gs=False, use_ray_pose=False, ref_view_strategy="middle")
            return out["depth"][:, 0]

    class Uint8Depth(FloatDepth):
        """`image` uint8 [B,S,S,3] RGB 0..255 -> `depth` [B,S,S]; normalisation folded into the graph."""

        def __init__(self, net):
            super().__init__(net)
            # The same float32 operations, in the same order, as normalise_image: both contracts then
            # feed the network identical tensors (a fused scale/shift would differ in the last bits).
            self.register_buffer("mean", torch.tensor(IMAGENET_MEAN, dtype=torch.float32).view(1, 3, 1, 1),
                                 persistent=False)
            self.register_buffer("std", torch.tensor(IMAGENET_STD, dtype=torch.float32).view(1, 3, 1, 1),
                                 persistent=False)

        def forward(self, image):
            x = image.permute(0, 3, 1, 2).float() / 255.0
            return super().forward((x - self.mean) / self.std)

    return {"float": FloatDepth, "uint8": Uint8Depth}


# --------------------------------------------------------------------------------------------------
# Export and validation


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
                model, (example,), dynamo=True, opset_version=opset, input_names=[INPUT_NAME],
                output_names=[OUTPUT_NAME], dynamic_shapes={"image": {0: batch}},
                optimize=True, verbose=False)
            proto = program.model_proto
        else:
            buffer = io.BytesIO()
            torch.onnx.export(
                model, (example,), buffer, dynamo=False, opset_version=opset, input_names=[INPUT_NAME],
                output_names=[OUTPUT_NAME], dynamic_axes={INPUT_NAME: {0: "batch"}, OUTPUT_NAME: {0: "batch"}},
                do_constant_folding=True)
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

    from stereo3d.runtime import SessionOptions, open_session

    images = _example_images(contract, size, batch=2)
    session = open_session(onnx_path, SessionOptions(providers=("cpu",)))
    per_batch = {}
    for batch in (1, 2):
        x = images[:batch]
        with torch.no_grad():
            reference = model(torch.from_numpy(x).to(device)).float().cpu().numpy()
        got = session.run([OUTPUT_NAME], {INPUT_NAME: x})[0]
        per_batch[str(batch)] = {"output_shape": list(got.shape), **error_figures(reference, got)}
    worst = {key: max(figures[key] for figures in per_batch.values())
             for key in ("max_abs_err", "mean_abs_err", "rel_mean_err")}
    return {**worst, "output_shape": per_batch["2"]["output_shape"], "batches": per_batch,
            "providers": session.get_providers(), "onnxruntime": ort.__version__,
            "reference_depth_range": [float(reference.min()), float(reference.max())]}


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


# --------------------------------------------------------------------------------------------------
# Export patches (installed only inside export_patches)


def _meshgrid_positions(self, batch_size, height, width, device):
    """PositionGetter.__call__ without cache: the (y, x) grid, identical to cartesian_prod's."""
    import torch

    y, x = torch.meshgrid(torch.arange(height, device=device), torch.arange(width, device=device), indexing="ij")
    positions = torch.stack((y.reshape(-1), x.reshape(-1)), dim=-1)
    return positions.view(1, height * width, 2).expand(batch_size, -1, -1).clone()


def _rope_forward_static(self, tokens, positions):
    """RotaryPositionEmbedding2D.forward with the table sized by the token count, uncached."""
    import torch

    feature_dim = tokens.size(-1) // 2
    # Token count >= largest position + 1 (positions index a grid of those tokens, +1 for special tokens).
    seq_len = positions.shape[-2]
    exponents = torch.arange(0, feature_dim, 2, device=tokens.device).float() / feature_dim
    inv_freq = 1.0 / (self.base_frequency**exponents)
    angles = torch.einsum("i,j->ij", torch.arange(seq_len, device=tokens.device, dtype=inv_freq.dtype), inv_freq)
    angles = torch.cat((angles, angles), dim=-1).to(tokens.dtype)
    cos_comp, sin_comp = angles.cos(), angles.sin()
    vertical, horizontal = tokens.chunk(2, dim=-1)
    vertical = self._apply_1d_rope(vertical, positions[..., 0], cos_comp, sin_comp)
    horizontal = self._apply_1d_rope(horizontal, positions[..., 1], cos_comp, sin_comp)
    return torch.cat((vertical, horizontal), dim=-1)


# --------------------------------------------------------------------------------------------------
# Weight-file helpers


def _read_safetensors(path: Path, header_only: bool = False) -> tuple[dict, dict[str, str]]:
    """All tensors (unless ``header_only``) and the metadata, or BadWeights in one line."""
    from safetensors import safe_open

    if not path.is_file():
        raise BadWeights(path, "weights file not found (place the hub model.safetensors there)")
    try:
        with safe_open(str(path), framework="pt") as fh:
            metadata = dict(fh.metadata() or {})
            tensors = {} if header_only else {k: fh.get_tensor(k) for k in fh.keys()}
    except Exception as exc:  # SafetensorError, OSError: both mean an unusable file
        cause = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise BadWeights(path, f"not a readable safetensors file (truncated or corrupt?): {cause}") from exc
    return tensors, metadata


def _sort_safetensors_header(path: Path) -> None:
    """Rewrite the JSON header with sorted keys, in place and at the same length.

    safetensors serialises the metadata from a hash map whose order changes from process to process;
    sorted, the same seed gives a byte-identical file (and so the same weights sha256 in every export).
    """
    with open(path, "r+b") as fh:
        length = int.from_bytes(fh.read(8), "little")
        header = json.loads(fh.read(length))
        text = json.dumps(header, sort_keys=True, separators=(",", ":")).encode()
        if len(text) > length:  # only reordering happened, so this would be a bug, not bad input
            raise RuntimeError(f"{path}: sorted safetensors header grew from {length} to {len(text)} bytes")
        fh.seek(8)
        fh.write(text.ljust(length, b" "))  # the format pads headers with spaces


def _check_same_model(path: Path, state: dict, expected: dict) -> None:
    """Another model's file, or the other DA3 variant, named as such before any key listing."""
    if WIDTH_KEY not in state:
        sample = _listed(sorted(state))
        raise BadWeights(path, f"not a DA3 checkpoint: no {HUB_PREFIX}{WIDTH_KEY} among its {len(state)} "
                               f"tensors (first: {sample})")
    got, want = state[WIDTH_KEY].shape[0], expected[WIDTH_KEY].shape[0]
    if got != want:
        got_name = WIDTH_NAMES.get(got, f"unknown ViT width {got}")
        raise BadWeights(path, f"these are DA3 {got_name} weights (ViT width {got}) but the model is DA3 "
                               f"{WIDTH_NAMES.get(want, want)} (width {want}): wrong variant folder?")


def _key_mismatch(missing: list[str], unexpected: list[str], n_file: int) -> str:
    parts = []
    if missing:
        parts.append(f"{len(missing)} missing keys ({_listed(missing)})")
    if unexpected:
        parts.append(f"{len(unexpected)} unexpected keys ({_listed(unexpected)})")
    return f"does not match the DA3 layout: {'; '.join(parts)}; file holds {n_file} tensors"


def _listed(items: list[str]) -> str:
    shown = ", ".join(items[:MAX_LISTED])
    return shown + (f", ... (+{len(items) - MAX_LISTED})" if len(items) > MAX_LISTED else "")


def _check_choice(what: str, value: str, valid) -> None:
    if value not in valid:
        raise BadConfig(None, f"{what} {value!r} is not one of {', '.join(valid)}")


@contextlib.contextmanager
def _quiet_import() -> Iterator[None]:
    """Harmless import-time warnings of the DA3 package: an OmegaConf resolver registered the deprecated
    way, and `torch.jit.script` decorators (deprecated in torch 2.13)."""
    import warnings

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=UserWarning, module="omegaconf")
        warnings.filterwarnings("ignore", message=".*register_new_resolver.*")
        warnings.filterwarnings("ignore", message=".*torch.jit.script.*", category=DeprecationWarning)
        yield


@contextlib.contextmanager
def _quiet_exporter() -> Iterator[None]:
    """Exporter chatter that says nothing actionable: the legacy exporter's deprecation and tracer
    warnings, onnx_ir/onnxscript INFO lines (hundreds per export) and "torchvision is not installed"."""
    import warnings

    import torch

    quieter = {"onnx_ir": logging.WARNING, "onnxscript": logging.WARNING, "torch.onnx": logging.WARNING,
               "torch.onnx._internal.exporter._registration": logging.ERROR}
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
