"""Configuration: schema validation with defaults, typo warnings, and the checks a schema cannot say.

Everything here runs when the Snakefile is parsed, so a bad value stops the run before any job
with one line naming the key and the problem.
"""

from __future__ import annotations

import copy
import difflib
import logging
from pathlib import Path
from typing import Any

import yaml

from stereo3d.errors import BadConfig
from stereo3d.models.da3.tiers import parse_aspect

log = logging.getLogger(__name__)


def load_schema(path: str | Path) -> dict:
    return yaml.safe_load(Path(path).read_text())


def validate_config(config: dict, schema: dict, source: str | Path = "config.yaml") -> tuple[dict, list[str]]:
    """Return (validated config with defaults filled, warnings). Raises BadConfig on an invalid value."""
    import jsonschema

    config = coerce_strings(copy.deepcopy(config), schema)
    fill_defaults(config, schema)
    warnings = unknown_keys(config, schema)
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(config), key=lambda e: list(e.absolute_path))
    if errors:
        first = errors[0]
        where = ".".join(str(p) for p in first.absolute_path) or "(top level)"
        if "aspect" in where and isinstance(first.instance, int) and not isinstance(first.instance, bool):
            # YAML 1.1 reads an unquoted 16:9 as a base-60 number (16 x 60 + 9 = 969)
            raise BadConfig(source, f"{where}: {first.instance} is not an aspect ratio; write it in quotes "
                                    '(e.g. "16:9"): YAML reads an unquoted 16:9 as the number 969')  # fmt: skip
        if first.validator in ("oneOf", "anyOf") and first.schema.get("description"):
            # "is not valid under any of the given schemas" says nothing of what is: the key's own description does
            raise BadConfig(source, f"{where}: {first.instance!r} is not valid: {first.schema['description']}")
        raise BadConfig(source, f"{where}: {first.message}")
    check_semantics(config, source)
    return config, warnings


def coerce_strings(value: Any, schema: dict) -> Any:
    """Snakemake's ``--config key=value`` delivers strings: parse them as YAML where the schema wants
    a number, boolean, list or object, so ``--config da3='{size: 280}'`` and ``demo=true`` work."""
    wanted = schema.get("type")
    if isinstance(value, str) and wanted in ("integer", "number", "boolean", "array", "object"):
        try:
            value = yaml.safe_load(value)
        except yaml.YAMLError:
            return value  # left as is; validation names the key
    if isinstance(value, dict):
        props = schema.get("properties", {})
        return {k: coerce_strings(v, props.get(k, {})) for k, v in value.items()}
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [coerce_strings(v, schema["items"]) for v in value]
    return value


def fill_defaults(config: dict, schema: dict) -> None:
    for key, sub in schema.get("properties", {}).items():
        if key not in config and "default" in sub:
            config[key] = copy.deepcopy(sub["default"])
        if isinstance(config.get(key), dict) and sub.get("properties"):
            fill_defaults(config[key], sub)


def unknown_keys(config: dict, schema: dict, prefix: str = "") -> list[str]:
    """Warnings for keys the schema does not know, with the closest known key as a suggestion."""
    known = schema.get("properties", {})
    warnings = []
    for key, value in config.items():
        if key not in known:
            close = difflib.get_close_matches(str(key), list(known), n=1)
            hint = f" (did you mean {prefix}{close[0]}?)" if close else ""
            warnings.append(f"unknown config key {prefix}{key} is ignored{hint}")
        elif isinstance(value, dict) and known[key].get("properties"):
            warnings.extend(unknown_keys(value, known[key], f"{prefix}{key}."))
    return warnings


def check_semantics(config: dict, source: str | Path) -> None:
    """What JSON Schema cannot express."""
    sizes = [("da3.size", config["da3"]["size"])]
    sizes += [(f"export.da3_extra[{i}].size", e["size"]) for i, e in enumerate(config["export"]["da3_extra"])]
    for key, size in sizes:
        if size % 14:
            suggestion = max(14, round(size / 14) * 14)
            raise BadConfig(source, f"{key}: {size} is not a multiple of 14 (DA3's patch size); try {suggestion}")
    aspects = [(f"da3.aspect_tiers[{i}]", a) for i, a in enumerate(config["da3"]["aspect_tiers"])]
    aspects += [(f"export.da3_extra[{i}].aspect", e["aspect"]) for i, e in enumerate(config["export"]["da3_extra"])
                if "aspect" in e]  # fmt: skip
    for key, aspect in aspects:
        try:
            parse_aspect(aspect)
        except ValueError:
            raise BadConfig(source, f"{key}: {aspect!r} is not an aspect ratio WIDTH:HEIGHT (e.g. 16:9)") from None
    tiers = [("stabilise.nvds_tier", config["stabilise"]["nvds_tier"])]
    tiers += [(f"export.nvds_tiers[{i}]", t) for i, t in enumerate(config["export"]["nvds_tiers"])]
    for key, tier in tiers:
        width, height = (int(v) for v in tier.split("x"))
        if width % 32 or height % 32 or min(width, height) < 32:
            raise BadConfig(source, f"{key}: {tier} must be WIDTHxHEIGHT in multiples of 32 (NVDS), e.g. 512x288")
    frames, piece = config["segments"]["frames"], config["encode"]["piece_frames"]
    if frames % piece:
        # Pieces begin at multiples of piece_frames; segments that are not made of whole pieces would encode the
        # video in other pieces than a whole-video run, and the result's bytes would depend on the segmenting.
        better = max(piece, round(frames / piece) * piece)
        raise BadConfig(
            source,
            f"segments.frames: {frames} is not a multiple of encode.piece_frames ({piece}); use 0 (whole video) "
            f"or e.g. {better}",
        )
    near = config["near"]
    if near["low_pct"] >= near["high_pct"]:
        raise BadConfig(source, f"near.low_pct ({near['low_pct']}) must be below near.high_pct ({near['high_pct']})")
