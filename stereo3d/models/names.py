"""File names of the exports and of the weights they come from (the seeds' names), in one place.

Torch-free: the Snakefile, the runtime and bench/ spell every model file through these functions."""

from __future__ import annotations

import re

from stereo3d.models.da3.variants import VARIANTS as _DA3

DA3_DEFAULT_SIZE = 518
DA3_VARIANTS = tuple(_DA3)
DA3_CONTRACTS = ("float", "uint8")
_DA3_PARTS = "|".join(re.escape(row.onnx_part) for row in _DA3.values())  # small|base|mono_large
DA3_STEM = rf"da3_(?:{_DA3_PARTS})(?:_[0-9]+(?:x[0-9]+)?)?(?:_u8)?"  # wildcard constraint for the stem
_DA3_STEM_RE = re.compile(rf"da3_({_DA3_PARTS})(?:_([0-9]+)(?:x([0-9]+))?)?(_u8)?")
_DA3_OF_PART = {row.onnx_part: row.name for row in _DA3.values()}


def da3_shape(size) -> tuple[int, int]:
    """(width, height) of an export: ``size`` is a square side or a (width, height) pair."""
    if isinstance(size, (tuple, list)):
        width, height = (int(side) for side in size)
        return width, height
    return int(size), int(size)


def da3_onnx_name(variant: str, size=DA3_DEFAULT_SIZE, contract: str = "float") -> str:
    """``da3_small.onnx`` at 518x518, ``da3_small_280.onnx`` for another square side (the seed's names), and
    ``da3_small_518x294.onnx`` for an aspect tier (``size`` as (width, height)); the folded uint8 contract adds
    ``_u8`` so both contracts can sit side by side (the seed overwrote one with the other)."""
    if variant not in DA3_VARIANTS:
        raise ValueError(f"unknown DA3 variant {variant!r} (valid: {', '.join(DA3_VARIANTS)})")
    if contract not in DA3_CONTRACTS:
        raise ValueError(f"unknown input contract {contract!r} (valid: {', '.join(DA3_CONTRACTS)})")
    width, height = da3_shape(size)
    if width != height:
        size_part = f"_{width}x{height}"
    else:
        size_part = "" if width == DA3_DEFAULT_SIZE else f"_{width}"
    contract_part = "_u8" if contract == "uint8" else ""
    return f"da3_{_DA3[variant].onnx_part}{size_part}{contract_part}.onnx"


def parse_da3_onnx_name(name: str) -> tuple[str, tuple[int, int], str]:
    """Inverse of :func:`da3_onnx_name` (accepts the stem or the file name): ``(variant, (width, height),
    contract)``."""
    stem = name[:-5] if name.endswith(".onnx") else name
    match = _DA3_STEM_RE.fullmatch(stem)
    if not match:
        raise ValueError(f"not a DA3 export name: {name!r}")
    part, width, height, u8 = match.groups()
    width = int(width) if width else DA3_DEFAULT_SIZE
    return _DA3_OF_PART[part], (width, int(height) if height else width), "uint8" if u8 else "float"


def da3_weights_folder(variant: str) -> str:
    """The weights layout of the seed: DA3/<folder>/model.safetensors, the folder named by the variant's row."""
    return _DA3[variant].folder


def da3_variant_of_folder(folder: str) -> str:
    """Inverse of :func:`da3_weights_folder`."""
    (variant,) = [row.name for row in _DA3.values() if row.folder == folder]
    return variant


# --- NVDS (the seed's names) ------------------------------------------------------------------------------------
NVDS_GRAPHS = ("split", "monolith")  # split: backbone once per frame + head; monolith: one graph over the window
NVDS_ROLES = {"split": ("backbone", "head"), "monolith": ("monolith",)}
_NVDS_FILES = {
    "backbone": "NVDS_Backbone_{tier}.onnx",
    "head": "NVDS_Head_{tier}.onnx",
    "monolith": "NVDS_Stabilizer_{tier}.onnx",
}
NVDS_WEIGHTS = "NVDS/NVDS_Stabilizer.pth"  # under the weights folder, as the official release names it


def nvds_onnx_name(role: str, tier: str) -> str:
    """File name of one NVDS graph (``role``: backbone, head or monolith) at ``tier`` (``WIDTHxHEIGHT``, or a
    ``{tier}`` placeholder for a path template)."""
    return _NVDS_FILES[role].format(tier=tier)


def nvds_onnx_names(tier: str, graphs: str) -> list[str]:
    """The files a stabiliser of ``graphs`` (split | monolith) opens at ``tier``, in role order."""
    if graphs not in NVDS_ROLES:
        raise ValueError(f"unknown NVDS graphs {graphs!r} (valid: {', '.join(NVDS_GRAPHS)})")
    return [nvds_onnx_name(role, tier) for role in NVDS_ROLES[graphs]]


def da3_weights_name(variant: str) -> str:
    """Where a DA3 variant's hub weights sit under the weights folder."""
    return f"DA3/{da3_weights_folder(variant)}/model.safetensors"
