"""Does every dependency install from wheels on every platform the README names? A CI step (it needs PyPI).

    .venv/bin/python .ci/wheels.py [--platforms win_amd64,...] [--json FILE]

For each platform, the package's dependencies (``pyproject.toml``: the default ones and the extras the README
offers there) are resolved by pip as for an install on that platform, wheels only (``--only-binary=:all:``,
CPython 3.11, ``--platform`` tags): ``pip install --dry-run --report``, which reads each wheel's metadata from the
index without downloading the wheel, and backtracks as a real install would. pip evaluates environment markers
(``sys_platform == 'win32'``) against the machine it runs on, whatever ``--platform`` says, so pip runs here with
its marker environment set to the target platform's (the report's ``environment`` shows it took). A requirement
with no wheel for the platform fails that platform, naming it.

One dependency publishes a source archive only (``SOURCE_ONLY``, pure Python: it builds anywhere pip runs); its
wheel is built here first and offered to pip from a folder.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import tomllib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
PYTHON = "3.11"
# Dependencies that publish a source archive only, each pure Python (no compiler: it builds anywhere pip runs).
SOURCE_ONLY = {"connection-pool": "Snakemake's; one pure-Python module"}
PIP_ENV = {**os.environ, "PIP_CONFIG_FILE": os.devnull}  # PyPI itself, not a local mirror or a cap of this machine


@dataclass(frozen=True)
class Platform:
    """One platform: pip's wheel tags for it, its marker environment, and the extras the README offers there."""

    name: str
    tags: tuple[str, ...]
    markers: dict
    extras: tuple[str, ...]


def _manylinux(arch: str) -> tuple[str, ...]:
    return tuple(f"manylinux_2_{minor}_{arch}" for minor in (34, 28, 27, 24, 17)) + (f"manylinux2014_{arch}",)


def _env(sys_platform: str, machine: str, system: str, os_name: str) -> dict:
    return {"sys_platform": sys_platform, "platform_machine": machine, "platform_system": system, "os_name": os_name,
            "python_version": PYTHON, "python_full_version": f"{PYTHON}.9", "implementation_name": "cpython",
            "platform_python_implementation": "CPython"}  # fmt: skip


# What the README's install table offers on each platform (the README's *Install* and *Accelerators* sections).
# Not checked: the ``tensorrt`` extra, whose libraries (tensorrt-cu13-libs) PyPI holds only as a source archive that
# fetches them from NVIDIA's own index when it is built; and Windows on Arm, where PyYAML, numba (llvmlite), numcodecs
# and google-crc32c publish no wheel for CPython 3.11 (2026-12-02), so the README does not offer it.
PLATFORMS = {
    p.name: p
    for p in (
        Platform("linux_x86_64", _manylinux("x86_64"), _env("linux", "x86_64", "Linux", "posix"),
                 ("export", "dev", "nvidia", "tensorrt-rtx", "openvino", "webgpu", "cluster")),
        Platform("linux_aarch64", _manylinux("aarch64"), _env("linux", "aarch64", "Linux", "posix"),
                 ("export", "dev", "cluster")),
        Platform("win_amd64", ("win_amd64",), _env("win32", "AMD64", "Windows", "nt"),
                 ("export", "dev", "nvidia", "tensorrt-rtx", "openvino", "webgpu")),
        Platform("macosx_arm64", tuple(f"macosx_{v}_0_arm64" for v in (15, 14, 13, 12, 11)),
                 _env("darwin", "arm64", "Darwin", "posix"), ("export", "dev", "mlx", "webgpu")),
    )
}  # fmt: skip


def project_requirements(extras: tuple[str, ...]) -> list[Requirement]:
    """The package's own requirements: its dependencies and those of ``extras`` (an extra naming the package
    itself, ``stereo3d[nvidia]``, is followed)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    name = canonicalize_name(project["name"])
    optional = project.get("optional-dependencies", {})
    found = [Requirement(r) for r in project["dependencies"]]
    todo = list(extras)
    seen: set[str] = set()
    while todo:
        extra = todo.pop()
        if extra in seen:
            continue
        seen.add(extra)
        for text in optional[extra]:
            requirement = Requirement(text)
            if canonicalize_name(requirement.name) == name:
                todo.extend(requirement.extras)
            else:
                found.append(requirement)
    return found


def check(platform: Platform, wheels: Path) -> dict:
    """pip's resolution of the platform's requirements (see the module doc): the versions it chose, or its error."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        cmd = [sys.executable, __file__, "--pip-as", platform.name, "install", "--dry-run", "--ignore-installed",
               "--quiet", "--only-binary=:all:", "--python-version", PYTHON, "--implementation", "cp", "--abi",
               "cp311", "--target", str(Path(tmp) / "target"), "--report", str(report), "--find-links", str(wheels),
               "--disable-pip-version-check"]  # fmt: skip
        for tag in platform.tags:
            cmd += ["--platform", tag]
        cmd += [str(r) for r in project_requirements(platform.extras)]
        done = subprocess.run(cmd, capture_output=True, text=True, env=PIP_ENV, check=False)
        if done.returncode != 0:
            lines = done.stderr.strip().splitlines()
            errors = [line for line in lines if line.startswith("ERROR")] or lines[-3:]
            return {"ok": False, "error": " ".join(errors)[:2000]}
        result = json.loads(report.read_text())
    environment = result["environment"]
    if environment["sys_platform"] != platform.markers["sys_platform"]:
        raise SystemExit(f"pip evaluated markers for {environment['sys_platform']}, not {platform.name}")
    versions = {item["metadata"]["name"]: item["metadata"]["version"] for item in result["install"]}
    return {
        "ok": True,
        "wheels": len(versions),
        "versions": dict(sorted(versions.items(), key=lambda item: item[0].lower())),
    }


def source_only_wheels(folder: Path) -> Path:
    """Wheels of the ``SOURCE_ONLY`` dependencies, built here from their source archives."""
    cmd = [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", str(folder), *SOURCE_ONLY]
    subprocess.run(cmd, check=True, env=PIP_ENV)
    for wheel in folder.glob("*.whl"):
        if not wheel.name.endswith("-none-any.whl"):
            raise SystemExit(f"{wheel.name} is not pure Python: it would not install on every platform")
    return folder


def pip_as(platform: Platform, args: list[str]) -> int:
    """pip itself, its marker environment the platform's."""
    import pip._vendor.packaging.markers as markers

    machine = markers.default_environment()
    markers.default_environment = lambda: {**machine, **platform.markers}
    from pip._internal.cli.main import main as pip_main

    return pip_main(args)


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--pip-as":
        sys.exit(pip_as(PLATFORMS[sys.argv[2]], sys.argv[3:]))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--platforms", default=",".join(PLATFORMS), help="comma-separated (default: all)")
    parser.add_argument("--json", type=Path, help="write every platform's resolution here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        wheels = source_only_wheels(Path(tmp))
        names = args.platforms.split(",")
        with ThreadPoolExecutor(len(names)) as pool:  # pip waits on the index most of the time
            results = dict(zip(names, pool.map(lambda name: check(PLATFORMS[name], wheels), names)))
        for name, result in results.items():
            extras = ",".join(PLATFORMS[name].extras)
            if result["ok"]:
                print(f"wheels: {name}: stereo3d[{extras}] installs from {result['wheels']} wheels")
            else:
                print(f"wheels: {name}: FAILED for stereo3d[{extras}]: {result['error']}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n")
    if not all(r["ok"] for r in results.values()):
        sys.exit(1)


if __name__ == "__main__":
    main()
