"""Checks made when the workflow is parsed, before any job: the weights the configuration needs are there and
whole (a header check, cheap; the exports still load every tensor strictly)."""

from __future__ import annotations

from pathlib import Path

from stereo3d.errors import BadConfig


def check_weights(da3: dict[str, Path], nvds: Path | None, demo: bool) -> None:
    """``da3``: variant → weights file of each DA3 variant in use; ``nvds``: the NVDS checkpoint if a video
    stabilises with NVDS. In the demo, missing files are made by the smoke-weights rules."""
    from stereo3d.models.da3.checkpoint import check_weights_header

    for variant, path in sorted(da3.items()):
        if demo and not path.is_file():
            continue
        if not path.is_file():
            raise BadConfig(
                path,
                f"DA3 {variant} weights not found; place model.safetensors there (see README: "
                "Converting your library) or run the demo with --configfile=demo/config.yaml",
            )
        check_weights_header(path, variant)
    if nvds is not None and not demo and not nvds.is_file():
        raise BadConfig(
            nvds,
            "NVDS weights not found (stabilise.method is nvds); place NVDS_Stabilizer.pth there "
            "or choose stabilise.method: ema",
        )
