"""The configuration's defaults, as the config schema (``workflow/schemas/config.schema.yaml``) writes them: the
one place a default lives. The settings dataclasses take their fields' defaults from here, so that a
``StereoSettings()`` in a script or a benchmark is what a conversion whose config says nothing gets.

Read from the repository's schema file (the workflow runs from its repository, the package installed editable).
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import yaml

SCHEMA = Path(__file__).resolve().parents[1] / "workflow" / "schemas" / "config.schema.yaml"


@functools.cache
def schema() -> dict:
    if not SCHEMA.is_file():
        raise FileNotFoundError(f"{SCHEMA}: the config schema is not there (run from the repository, installed "
                                "with pip install -e .)")  # fmt: skip
    return yaml.safe_load(SCHEMA.read_text(encoding="utf-8"))


def default(dotted: str) -> Any:
    """The schema's default of ``section.key`` (``render.divergence_pct``); KeyError names a key without one."""
    node = schema()
    for part in dotted.split("."):
        node = node.get("properties", {}).get(part)
        if node is None:
            raise KeyError(f"{dotted}: not a key of the config schema")
    if "default" not in node:
        raise KeyError(f"{dotted}: the config schema gives it no default")
    return node["default"]
