"""Configuration: defaults, strings from --config, typos, and values a schema cannot judge."""

from pathlib import Path

import pytest
import yaml

from stereo3d.errors import BadConfig
from stereo3d.workflow.config import load_schema, validate_config

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = load_schema(ROOT / "workflow/schemas/config.schema.yaml")


def shipped():
    return yaml.safe_load((ROOT / "config.yaml").read_text())


def test_shipped_config_is_valid_and_warning_free():
    config, warnings = validate_config(shipped(), SCHEMA)
    assert warnings == []
    assert config["da3"]["size"] % 14 == 0


def test_every_schema_key_is_documented_in_config_yaml():
    config = shipped()
    for section, spec in SCHEMA["properties"].items():
        assert section in config, section
        for key in spec.get("properties", {}):
            assert key in config[section], f"{section}.{key}"


def test_every_schema_leaf_has_a_description():
    def leaves(node, prefix=""):
        for key, spec in node["properties"].items():
            if spec.get("type") == "object" and "properties" in spec:
                yield from leaves(spec, f"{prefix}{key}.")
            else:
                yield f"{prefix}{key}", spec

    undescribed = [dotted for dotted, spec in leaves(SCHEMA) if not str(spec.get("description", "")).strip()]
    assert undescribed == []


def test_defaults_fill_an_empty_config():
    config, _ = validate_config({}, SCHEMA)
    assert config["da3"]["variant"] == "small" and config["render"]["layout"] == "full_sbs"


def test_strings_from_the_command_line_are_parsed():
    config, _ = validate_config({"da3": {"size": "280", "batch": "2"}, "demo": "true"}, SCHEMA)
    assert config["da3"]["size"] == 280 and config["demo"] is True


def test_side_not_a_multiple_of_14_is_refused_with_a_suggestion():
    with pytest.raises(BadConfig, match=r"da3.size: 500 is not a multiple of 14 .*; try 504"):
        validate_config({"da3": {"size": 500}}, SCHEMA)


def test_unknown_variant_is_refused_naming_the_key():
    with pytest.raises(BadConfig, match=r"da3.variant: 'large' is not one of"):
        validate_config({"da3": {"variant": "large"}}, SCHEMA)


def test_wrong_type_is_refused():
    with pytest.raises(BadConfig, match=r"render.divergence_pct"):
        validate_config({"render": {"divergence_pct": "strong"}}, SCHEMA)


def test_unknown_keys_are_warned_with_a_suggestion():
    _, warnings = validate_config({"render": {"divergense_pct": 3}}, SCHEMA)
    assert warnings == ["unknown config key render.divergense_pct is ignored (did you mean render.divergence_pct?)"]


def test_segments_are_whole_pieces_so_the_result_does_not_depend_on_them():
    with pytest.raises(BadConfig, match=r"segments.frames: 1000 is not a multiple of encode.piece_frames \(64\).*1024"):
        validate_config({"segments": {"frames": 1000}}, SCHEMA)
    config, _ = validate_config({"segments": {"frames": 1000}, "encode": {"piece_frames": 40}}, SCHEMA)
    assert config["segments"]["frames"] == 1000
    config, _ = validate_config({}, SCHEMA)
    assert config["segments"]["frames"] == 0 and config["encode"]["piece_frames"] == 64  # one job per video


def test_aspect_tiers_written_without_quotes_get_a_hint():
    config = yaml.safe_load("da3: {aspect_tiers: [16:9, 4:3]}")  # YAML 1.1: base-60 numbers 969 and 243
    with pytest.raises(BadConfig, match=r"da3.aspect_tiers.0: 969 is not an aspect ratio; write it in quotes"):
        validate_config(config, SCHEMA)


@pytest.mark.parametrize("tiers", [["0:9"], ["16:0"]])
def test_an_aspect_tier_of_zero_is_refused(tiers):
    with pytest.raises(BadConfig, match="is not an aspect ratio WIDTH:HEIGHT"):
        validate_config({"da3": {"aspect_tiers": tiers}}, SCHEMA)


def test_an_empty_tier_list_is_refused():
    with pytest.raises(BadConfig, match="aspect_tiers"):
        validate_config({"da3": {"aspect_tiers": []}}, SCHEMA)
