"""What every export shares: error figures, the validation JSON beside the ONNX file, ONNX metadata."""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from stereo3d.io.atomic import atomic_output

log = logging.getLogger(__name__)

# The seeds warn above this relative mean error; a failing threshold comes from config.
WARN_REL_MEAN_ERR = 1e-2


def error_figures(reference: np.ndarray, candidate: np.ndarray) -> dict[str, float]:
    """Max/mean absolute and relative mean error of ``candidate`` against ``reference``."""
    ref = np.asarray(reference, dtype=np.float64)
    got = np.asarray(candidate, dtype=np.float64)
    if ref.shape != got.shape:
        raise ValueError(f"shape mismatch: reference {ref.shape} vs candidate {got.shape}")
    diff = np.abs(ref - got)
    scale = float(np.mean(np.abs(ref)))
    return {
        "max_abs_err": float(diff.max(initial=0.0)),
        "mean_abs_err": float(diff.mean()) if diff.size else 0.0,
        "rel_mean_err": float(diff.mean() / scale) if scale > 0 else float(diff.mean()),
    }


def validation_path(onnx_path: str | Path) -> Path:
    """``<onnx file name>.validation.json`` beside the model."""
    onnx_path = Path(onnx_path)
    return onnx_path.with_name(onnx_path.name + ".validation.json")


def write_validation(onnx_path: str | Path, report: Mapping[str, Any]) -> Path:
    """Write the validation report beside the ONNX file (atomically, keys sorted)."""
    out = validation_path(onnx_path)
    with atomic_output(out) as tmp:
        tmp.write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
    return out


def check_error(
    onnx_path: str | Path, figures: Mapping[str, float], fail_rel_mean_err: float | None, what: str = "ONNX vs PyTorch"
) -> None:
    """Warn above the seed's 1e-2; raise above the configured limit (None: never)."""
    from stereo3d.errors import ExportMismatch

    rel = figures["rel_mean_err"]
    if rel > WARN_REL_MEAN_ERR:
        log.warning("%s: %s relative mean error %.3g is above %.0e", onnx_path, what, rel, WARN_REL_MEAN_ERR)
    if fail_rel_mean_err is not None and rel > fail_rel_mean_err:
        raise ExportMismatch(onnx_path, f"{what} relative mean error {rel:.3g} exceeds the limit {fail_rel_mean_err:g}")


def sha256_file(path: str | Path, chunk: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def set_metadata(model, facts: Mapping[str, Any]) -> None:
    """Store contract facts in an ``onnx.ModelProto``'s metadata_props (values as strings, sorted)."""
    del model.metadata_props[:]
    for key in sorted(facts):
        entry = model.metadata_props.add()
        entry.key = key
        entry.value = str(facts[key])


def read_metadata(onnx_path: str | Path) -> dict[str, str]:
    """Contract facts of an exported model, read without loading its weights into a session."""
    import onnx

    model = onnx.load(str(onnx_path), load_external_data=False)
    return {p.key: p.value for p in model.metadata_props}
