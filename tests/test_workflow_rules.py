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


def script_text(rule) -> str:
    return (ROOT / "workflow/rules" / rule.script).resolve().read_text()


def test_the_rules_that_open_model_sessions_are_exactly_the_gpu_rules(rules):
    scripted = {name: rule for name, rule in rules.items() if rule.script}
    # A script takes its device (a scheduler's CUDA_VISIBLE_DEVICES, else a locked slot of runtime.gpus) through
    # stereo3d.workflow.scripting.session_options, which every ONNX Runtime stage calls, itself or through the
    # depth and near-map jobs' arguments (depth_job, near_job).
    calls = ("session_options(", "depth_job(", "near_job(")
    leasing = {name for name, rule in scripted.items() if any(call in script_text(rule) for call in calls)}
    gpu = {name for name, rule in rules.items() if "gpu" in rule.resources}
    assert leasing == gpu == {"depth", "near_maps", "preview_depth", "preview_near_maps"}
    for name in gpu:
        assert rules[name].resources["gpu"] == 1


def test_every_scripted_rule_has_a_log_and_a_benchmark(rules):
    for name, rule in rules.items():
        if rule.script:
            assert rule.log, f"rule {name} has no log"
            assert rule.benchmark is not None, f"rule {name} has no benchmark"
