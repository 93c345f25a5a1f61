"""DA3 hub checkpoints (``model.safetensors``): a cheap header check for parse time, and strict loading with
one-line errors for a missing or corrupt file, another model, the other variant, or missing/unexpected/mis-shaped
keys. Key layout and the shared aux LayerNorm: specs/da3.md. Mono-Large's file has the same layout (``model.`` +
the net's keys) with a DPT head: no aux branch, so no alias keys, and a sky head."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from stereo3d.errors import BadWeights
from stereo3d.models.da3.model import check_choice
from stereo3d.models.da3.variants import VARIANTS

log = logging.getLogger(__name__)

HUB_PREFIX = "model."  # PyTorchModelHubMixin saves the DepthAnything3 wrapper, whose child is `.model`
# DualDPT reuses one LayerNorm in all four aux heads; safetensors keeps only the .0.2 name (spec section 7).
ALIAS_KEYS = {
    f"head.scratch.output_conv2_aux.{level}.2.{kind}": f"head.scratch.output_conv2_aux.0.2.{kind}"
    for level in (1, 2, 3)
    for kind in ("weight", "bias")
}
WIDTH_KEY = "backbone.pretrained.patch_embed.proj.weight"
# DINOv2 ViT-S/B/L/G widths by their size names: an error names the weights it was given, of any DA3 model,
# and the model they were meant for (the variant's width is its row's vit_width).
WIDTH_NAMES = {384: "Small", 768: "Base", 1024: "Large", 1536: "Giant"}
SMOKE_KEY, SMOKE_VALUE = "stereo3d", "smoke"
MAX_LISTED = 3  # offending keys named in a one-line error


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
    wrong = [
        f"{k} file {list(v.shape)} vs model {list(expected[k].shape)}"
        for k, v in state.items()
        if v.shape != expected[k].shape
    ]
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
    check_choice("variant", variant, VARIANTS)
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
        raise BadWeights(
            path,
            f"not a DA3 checkpoint: no {HUB_PREFIX}{WIDTH_KEY} among its {len(header)} "
            f"tensors (first: {_listed(sorted(header))})",
        )
    got = int(width_entry["shape"][0])
    want = VARIANTS[variant].vit_width
    if got != want:
        raise BadWeights(
            path,
            f"these are DA3 {WIDTH_NAMES.get(got, f'unknown ViT width {got}')} weights (ViT "
            f"width {got}) but the model is DA3 {WIDTH_NAMES.get(want, want)} (width {want}): wrong "
            "variant folder?",
        )
    return metadata


def is_smoke_weights(path: str | Path) -> bool:
    """True for files written by :func:`write_smoke_weights` (their safetensors metadata says so)."""
    return _read_safetensors(Path(path), header_only=True)[1].get(SMOKE_KEY) == SMOKE_VALUE


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


def sort_safetensors_header(path: Path) -> None:
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
        raise BadWeights(
            path, f"not a DA3 checkpoint: no {HUB_PREFIX}{WIDTH_KEY} among its {len(state)} tensors (first: {sample})"
        )
    got, want = state[WIDTH_KEY].shape[0], expected[WIDTH_KEY].shape[0]
    if got != want:
        got_name = WIDTH_NAMES.get(got, f"unknown ViT width {got}")
        raise BadWeights(
            path,
            f"these are DA3 {got_name} weights (ViT width {got}) but the model is DA3 "
            f"{WIDTH_NAMES.get(want, want)} (width {want}): wrong variant folder?",
        )


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
