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
