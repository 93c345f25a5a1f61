"""The conda environments (envs/*.yaml, for --sdm conda) agree with pyproject.toml, and the profiles parse."""

import tomllib
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
# The platform the environments are written for: the conda envs run the stages on Linux x86_64 (GPU nodes).
LINUX = {"sys_platform": "linux", "platform_machine": "x86_64", "platform_system": "Linux"}


def _project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _declared(requirements: list[str]) -> dict[str, Requirement]:
    """Requirements that apply on Linux x86_64, by canonical name."""
    out = {}
    for text in requirements:
        req = Requirement(text)
        if req.marker is None or req.marker.evaluate(LINUX):
            out[canonicalize_name(req.name)] = req
    return out


def _env_pip(name: str) -> tuple[dict[str, Requirement], list[str]]:
    """pip requirements of envs/<name>.yaml by canonical name, and its other pip lines (``-e ..``)."""
    env = yaml.safe_load((ROOT / "envs" / f"{name}.yaml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d)
    reqs = {canonicalize_name(Requirement(t).name): Requirement(t) for t in pip if not t.startswith("-")}
    return reqs, [t for t in pip if t.startswith("-")]


def _agrees(env: Requirement, declared: Requirement) -> bool:
    """Same extras, and the same bounds, or a pin (==X) that the declared bounds admit."""
    if env.extras != declared.extras:
        return False
    if str(env.specifier) == str(declared.specifier):
        return True
    pins = [s.version for s in env.specifier if s.operator == "=="]
    return len(pins) == 1 and declared.specifier.contains(pins[0], prereleases=True)


@pytest.mark.parametrize(("env", "groups"), [("runtime", ["dependencies"]), ("export", ["export"])])
def test_env_holds_every_declared_requirement_with_its_bounds(env, groups):
    project = _project()
    wanted = {}
    for group in groups:
        wanted.update(_declared(project[group] if group == "dependencies" else project["optional-dependencies"][group]))
    have, _ = _env_pip(env)
    missing = sorted(set(wanted) - set(have))
    assert not missing, f"envs/{env}.yaml lacks {missing} (declared in pyproject.toml)"
    differ = {n: (str(have[n]), str(wanted[n])) for n in wanted if not _agrees(have[n], wanted[n])}
    assert not differ, f"envs/{env}.yaml disagrees with pyproject.toml (env, pyproject): {differ}"


@pytest.mark.parametrize("env", ["runtime", "export"])
def test_env_declares_nothing_pyproject_does_not_and_installs_the_package(env):
    project = _project()
    known = _declared(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        known.update(_declared(extra))
    have, other = _env_pip(env)
    assert not sorted(set(have) - set(known)), f"envs/{env}.yaml has packages pyproject.toml does not declare"
    for name in set(have) & set(known):
        assert _agrees(have[name], known[name]), f"envs/{env}.yaml: {have[name]} vs pyproject {known[name]}"
    assert "-e .." in other  # the package itself, with its core dependencies


def test_every_rule_names_an_existing_env():
    for smk in (ROOT / "workflow" / "rules").glob("*.smk"):
        for line in smk.read_text().splitlines():
            if line.strip().startswith('"../../envs/'):
                assert (smk.parent / line.strip().strip('"')).resolve().is_file(), f"{smk.name}: {line.strip()}"


@pytest.mark.parametrize("profile", ["default", "gpu", "slurm"])
def test_profile_parses_and_comments_every_key(profile):
    path = ROOT / "profiles" / profile / "config.yaml"
    settings = yaml.safe_load(path.read_text())
    assert isinstance(settings, dict) and settings
    lines = path.read_text().splitlines()
    for i, line in enumerate(lines):
        if line and not line.startswith((" ", "#")):  # a top-level key: a comment line right above it
            above = next((p for p in reversed(lines[:i]) if p.strip()), "")
            assert above.lstrip().startswith("#"), f"{profile}: key {line.split(':')[0]} has no comment"


def test_the_licence_file_is_the_mit_licence_that_pyproject_and_the_readme_name():
    licence = (ROOT / "LICENSE").read_text()
    assert licence.startswith("MIT License\n") and "Permission is hereby granted, free of charge" in licence
    assert _project()["license"] == "MIT" and _project()["license-files"] == ["LICENSE"]
    assert "The code is MIT (`LICENSE`)" in (ROOT / "README.md").read_text()


def test_contributing_points_at_files_that_exist():
    import re

    text = (ROOT / "CONTRIBUTING.md").read_text()
    paths = {p for p in re.findall(r"`([\w./-]+/[\w.-]+)`", text) if not p.startswith(("/", "."))}
    paths = {p.split(" ")[0] for p in paths if "<" not in p and "*" not in p}
    assert {"stereo3d/stereo/warp.py", "stereo3d/io/codecs.py", "tests/conftest.py"} <= paths
    missing = sorted(p for p in paths if not (ROOT / p).exists())
    assert missing == []
