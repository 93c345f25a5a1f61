"""The workflow as Snakemake parses it: GPU stages are the rules that declare the GPU resource, and each of
them takes a device lease; every rule that runs a script logs and benchmarks it."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def rules(tmp_path_factory):
    from snakemake.api import SnakemakeApi
    from snakemake.settings.types import ConfigSettings, OutputSettings, ResourceSettings

    workdir = tmp_path_factory.mktemp("parsed")
    (workdir / "videos").mkdir()
    (workdir / "test.yaml").write_text(yaml.safe_dump({"library": {"folder": "videos"}}))
    with SnakemakeApi(OutputSettings()) as api:
        workflow = api.workflow(
            resource_settings=ResourceSettings(cores=1),
            config_settings=ConfigSettings(configfiles=[workdir / "test.yaml"]),
            snakefile=ROOT / "Snakefile",
            workdir=workdir,
        )
        return {rule.name: rule for rule in workflow._workflow.rules}


# The rules that run ONNX Runtime models; each of their jobs takes a device lease (tests/test_workflow.py and
# tests/test_preview.py find the lease's line in the logs of exactly these rules' jobs).
MODEL_RULES = {"depth", "near_maps", "preview_depth", "preview_near_maps"}


def test_the_gpu_rules_are_exactly_those_that_run_models(rules):
    gpu = {name for name, rule in rules.items() if "gpu" in rule.resources}
    assert gpu == MODEL_RULES
    for name in gpu:
        assert rules[name].resources["gpu"] == 1


def test_every_scripted_rule_has_a_log_and_a_benchmark(rules):
    for name, rule in rules.items():
        if rule.script:
            assert rule.log, f"rule {name} has no log"
            assert rule.benchmark is not None, f"rule {name} has no benchmark"


def test_the_stage_rules_show_their_settings_objects_and_the_depths_are_recorded_by_their_key_alone(rules):
    """The depth rules' params (DepthSettings) come from a function of the output, whose depth key names every
    field: Snakemake records no params so derived, so a depth made before the rules showed them does not count as
    changed (a recorded param new to an old output would rerun the costliest stage). The near-map rules' params
    (NearSettings) are recorded as they were before the object."""
    from snakemake.rules import Rule

    for name in ("depth", "preview_depth"):
        assert Rule._is_deriving_function(rules[name].params.depth), name
    for name in ("near_plan", "near_maps", "preview_near_maps"):
        assert rules[name].params.near.__name__ == "near_params", name
        assert not Rule._is_deriving_function(rules[name].params.near), name
