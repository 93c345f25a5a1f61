"""NVDS checkpoints: safe loading with one-line errors, and the mark that tells seeded "smoke" weights apart.

The released ``NVDS_Stabilizer.pth`` is (inferred, spec section 6) a flat state_dict saved from
``nn.DataParallel``: 1235 entries, every key prefixed ``module.``, the 24 int64 index buffers included.

Smoke marking: a smoke checkpoint carries its mark inside the unused ``Stabilizer.conv_seg`` weight
(an upstream leftover that the forward pass never reads). The first input channels hold the bytes of
``SMOKE_TAG`` and the rest are zero. The mark travels with the file (a sidecar could be lost in a copy),
adds no key (strict loading, ours or upstream's, still works) and changes no output.
"""

from __future__ import annotations

import logging
import pickle
from collections import OrderedDict
from collections.abc import Mapping
from pathlib import Path

import torch

from stereo3d.errors import BadWeights
from stereo3d.models.nvds.model import NVDS, NvdsConfig, index_buffers

log = logging.getLogger(__name__)

PREFIX = "module."  # DataParallel's prefix in the released checkpoint
SMOKE_TAG = b"s3d-smoke-nvds"  # 14 bytes: fits the tiny config's 16-channel conv_seg too
SMOKE_KEY = "Stabilizer.conv_seg.weight"
NVDS_MARKERS = ("backbone.patch_embed1.", "Stabilizer.")


def load_nvds(path: str | Path, config: NvdsConfig | None = None, attention: str = "faithful") -> NVDS:
    """An ``NVDS`` in eval mode with the checkpoint at ``path`` loaded strictly (BadWeights on any problem)."""
    state = read_state_dict(path)
    model = NVDS(config or NvdsConfig(), attention=attention)
    load_into(model, state, path)
    return model.eval()


def read_state_dict(path: str | Path) -> OrderedDict[str, torch.Tensor]:
    """The checkpoint's tensors, unwrapped from ``state_dict``/``model`` and stripped of ``module.``.

    Never executes pickled code: ``weights_only=True``.
    """
    path = Path(path)
    if not path.is_file():
        raise BadWeights(
            path, "NVDS checkpoint not found (place NVDS_Stabilizer.pth there, or run the demo's smoke weights rule)"
        )
    try:
        obj = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        if "weights only" in str(exc).lower() or "weights_only" in str(exc).lower():
            detail = next((ln.strip() for ln in str(exc).splitlines() if "Unsupported global" in ln), "")
            detail = detail.split(". Please")[0]
            raise BadWeights(
                path, "the file needs code to unpickle; refused (weights_only=True)" + (f": {detail}" if detail else "")
            ) from exc
        raise BadWeights(path, f"not a PyTorch checkpoint ({_first_line(exc)})") from exc
    except Exception as exc:  # torch raises RuntimeError, EOFError, KeyError... for damaged files: one line
        cause = f"{type(exc).__name__}: {_first_line(exc)}"
        raise BadWeights(path, f"unreadable or truncated checkpoint ({cause})") from exc
    if isinstance(obj, Mapping):
        for wrapper in ("state_dict", "model"):
            if isinstance(obj.get(wrapper), Mapping):
                obj = obj[wrapper]
                break
    if not isinstance(obj, Mapping):
        raise BadWeights(path, f"expected a state dict, found a {type(obj).__name__}")
    state = OrderedDict()
    for key, value in obj.items():
        if not isinstance(value, torch.Tensor):
            raise BadWeights(path, f"entry {key!r} is a {type(value).__name__}, not a tensor")
        state[key[len(PREFIX) :] if key.startswith(PREFIX) else key] = value
    if not any(key.startswith(NVDS_MARKERS) for key in state):
        sample = ", ".join(list(state)[:3]) or "none"
        raise BadWeights(
            path, f"not an NVDS checkpoint: no backbone.patch_embed1/Stabilizer keys (first keys: {sample})"
        )
    return state


def load_into(model: torch.nn.Module, state: Mapping[str, torch.Tensor], path: str | Path) -> None:
    """Check keys, shapes and index buffers against ``model``, then load strictly."""
    expected = model.state_dict()
    missing = [k for k in expected if k not in state]
    unexpected = [k for k in state if k not in expected]
    if missing or unexpected:
        parts = []
        if missing:
            parts.append(f"{len(missing)} missing ({_some(missing)})")
        if unexpected:
            parts.append(f"{len(unexpected)} unexpected ({_some(unexpected)})")
        raise BadWeights(path, "keys do not match this NVDS configuration: " + "; ".join(parts))
    misshaped = [k for k, v in expected.items() if tuple(state[k].shape) != tuple(v.shape)]
    if misshaped:
        k = misshaped[0]
        raise BadWeights(
            path,
            f"{len(misshaped)} tensor(s) mis-shaped, e.g. {k}: file {list(state[k].shape)}, "
            f"model {list(expected[k].shape)}",
        )
    check_index_buffers(state, path)
    model.load_state_dict(state, strict=True)


def check_index_buffers(state: Mapping[str, torch.Tensor], path: str | Path) -> None:
    """The 24 int64 buffers are deterministic: a mismatch means a corrupt or foreign file."""
    reference = index_buffers()
    for key, value in state.items():
        name = key.rsplit(".", 1)[-1]
        if ".attn." in key and name in reference and not torch.equal(value.to(torch.int64), reference[name]):
            raise BadWeights(path, f"index buffer {key} differs from the recomputed one (corrupt or foreign file)")


def is_smoke(state_or_path) -> bool:
    """True if the checkpoint (a path or a stripped state dict) carries the smoke mark."""
    state = read_state_dict(state_or_path) if isinstance(state_or_path, (str, Path)) else state_or_path
    weight = state.get(SMOKE_KEY)
    if weight is None or weight.numel() < len(SMOKE_TAG):
        return False
    flat = weight.reshape(-1).to(torch.float64)
    tag = torch.tensor(list(SMOKE_TAG), dtype=torch.float64)
    return bool(torch.equal(flat[: len(SMOKE_TAG)], tag) and not flat[len(SMOKE_TAG) :].any())


def _some(keys: list[str], n: int = 3) -> str:
    return ", ".join(keys[:n]) + (", ..." if len(keys) > n else "")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    line = text.splitlines()[0] if text else type(exc).__name__
    return line if len(line) <= 160 else line[:157] + "..."
