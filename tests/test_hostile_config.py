"""Hostile configuration: wrong types and out-of-range values stop the run before any job, in one line naming
the key; unknown keys are warned about with the closest known key, and the run goes on."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from harness import snakemake, write_config

from stereo3d.demo.samples import make_clip
from stereo3d.errors import BadConfig
from stereo3d.workflow.config import load_schema, validate_config

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = load_schema(ROOT / "workflow/schemas/config.schema.yaml")

BAD = [
    ({"da3": {"batch": "four"}}, "da3.batch: 'four' is not of type 'integer'"),
    ({"da3": {"size": 14.5}}, "da3.size: 14.5 is not of type 'integer'"),
    ({"render": {"divergence_pct": 50}}, "render.divergence_pct: 50 is greater than the maximum of 10"),
    ({"encode": {"crf": -1}}, "encode.crf: -1 is less than the minimum of 0"),
    ({"stabilise": {"method": "magic"}}, "stabilise.method: 'magic' is not one of"),
    ({"stabilise": {"nvds_tier": "500x300"}}, "stabilise.nvds_tier: 500x300 must be WIDTHxHEIGHT in multiples of 32"),
    ({"near": {"low_pct": 50, "high_pct": 50}}, "near.low_pct (50) must be below near.high_pct (50)"),
    ({"library": {"extensions": []}}, "library.extensions: [] should be non-empty"),
    ({"render": "full_sbs"}, "render: 'full_sbs' is not of type 'object'"),
    ({"runtime": {"providers": "cpu"}}, "runtime.providers: 'cpu' is not valid: auto (the best device"),
    ({"runtime": {"providers": ["cuda:tpu"]}}, "runtime.providers: ['cuda:tpu'] is not valid: auto"),
    ({"runtime": {"precision": "turbo"}}, "runtime.precision: 'turbo' is not one of ['exact', 'fast']"),
]


@pytest.mark.parametrize(("override", "message"), BAD, ids=[m.split(":")[0] for _, m in BAD])
def test_a_bad_value_is_one_line_naming_the_key(override, message):
    with pytest.raises(BadConfig) as caught:
        validate_config(override, SCHEMA)
    assert message in str(caught.value) and "\n" not in str(caught.value)


# A crash shows as Python's traceback, or as Snakemake's header for any exception but its own WorkflowError
# ("AttributeError in file ..., line 29:"). A refusal is a WorkflowError whose message is the one line.
_CRASH = re.compile(r"^(Traceback \(most recent call last\)|(?!WorkflowError\b)\w+(Error|Exception)\b.*:$)")


def assert_refused_in_one_line(run, line: str) -> None:
    """The run stopped (non-zero) with ``line`` as its message, printed once, and no traceback or crash."""
    output = (run.stdout + run.stderr).splitlines()
    assert run.returncode != 0, run.stderr
    assert output.count(line) == 1, run.stderr
    assert not [text for text in output if _CRASH.match(text.strip())], run.stderr
    assert "Traceback" not in run.stdout + run.stderr, run.stderr


@pytest.mark.parametrize(("override", "message"), [BAD[0], BAD[2], BAD[5]], ids=["type", "range", "semantics"])
def test_a_bad_value_stops_the_run_before_any_job(tmp_path, override, message):
    make_clip(tmp_path / "videos/a.mp4", width=64, height=36, frames=2, fps="8")
    write_config(tmp_path, **override)
    run = snakemake(tmp_path, check=False)
    lines = [line for line in run.stderr.splitlines() if message in line]
    assert len(lines) == 1 and lines[0].startswith("bad config: config.yaml: "), run.stderr
    assert_refused_in_one_line(run, lines[0])
    for produced in ("work", "models", "results"):
        assert not (tmp_path / produced).exists()


def test_unknown_keys_are_warned_with_a_suggestion_at_every_level():
    config = {"rendr": {"layout": "full_sbs"}, "render": {"divergence": 3}, "da3": {"varient": "base"}}
    _, warnings = validate_config(config, SCHEMA)
    assert "unknown config key rendr is ignored (did you mean render?)" in warnings
    assert "unknown config key render.divergence is ignored (did you mean render.divergence_pct?)" in warnings
    assert "unknown config key da3.varient is ignored (did you mean da3.variant?)" in warnings


def test_an_unknown_key_with_nothing_close_is_warned_without_a_guess():
    _, warnings = validate_config({"zzz_qqq": 1}, SCHEMA)
    assert warnings == ["unknown config key zzz_qqq is ignored"]


def test_unknown_keys_warn_but_the_run_goes_on(tmp_path):
    (tmp_path / "videos").mkdir()
    write_config(tmp_path, rendr={"layout": "half_sbs"})
    run = snakemake(tmp_path, "-n", check=False)
    assert run.returncode == 0, run.stderr
    assert "warning: unknown config key rendr is ignored (did you mean render?)" in run.stderr


def test_a_config_file_that_is_not_yaml_stops_the_run(tmp_path):
    (tmp_path / "videos").mkdir()
    (tmp_path / "test.yaml").write_text("da3: {size: 140\nrender: [\n", encoding="utf-8")
    run = snakemake(tmp_path, check=False)
    assert_refused_in_one_line(
        run,
        "Config file is not valid JSON or YAML. In case of YAML, make sure to not mix whitespace and tab indentation.",
    )
    assert not (tmp_path / "work").exists()


def test_a_config_that_is_a_list_is_refused(tmp_path):
    (tmp_path / "videos").mkdir()
    (tmp_path / "test.yaml").write_text(yaml.safe_dump([1, 2]), encoding="utf-8")
    run = snakemake(tmp_path, check=False)
    assert_refused_in_one_line(run, "Config file must be given as JSON or YAML with keys at top level.")
    assert not (tmp_path / "work").exists()
