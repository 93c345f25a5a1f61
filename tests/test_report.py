"""`snakemake --report` on a tiny generated library: every figure and table is in it; profiles dry-run."""

from __future__ import annotations

import importlib.util
import subprocess
from pathlib import Path

import cv2
import pytest
import yaml
from harness import exported_workdir, job_stats, planned_jobs, run_snakemake

from stereo3d.demo import samples

ROOT = Path(__file__).resolve().parents[1]
FIGURES = ("contact_sheet.png", "flicker.png", "parallax.png", "convergence.png")
TABLES = ("exports.html", "videos.html", "benchmarks.html")


def snakemake(workdir: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    """Snakemake on ``workdir`` with only the given options (no ``--cores``: the profiles' own)."""
    snakefile = str(ROOT / "Snakefile")
    return run_snakemake(["--snakefile", snakefile, "--directory", str(workdir),
                          f"--configfile={workdir / 'test.yaml'}", *args], check=check)  # fmt: skip


@pytest.fixture(scope="module")
def reported(tmp_path_factory):
    """One short clip converted (DA3 at 140, EMA) through the default profile, then the report."""
    workdir = exported_workdir(tmp_path_factory, "report", exports=("da3_small_140x84_u8.onnx",))
    (workdir / "videos").mkdir()
    samples.make_clip(workdir / "videos" / "moving.mp4", width=160, height=90, frames=12, fps="12")
    config = {"library": {"folder": "videos"}, "da3": {"size": 140, "batch": 2}, "encode": {"preset": "ultrafast"},
              "runtime": {"providers": ["cpu"]}, "report": {"contact_sheet_rows": 2}}  # fmt: skip
    (workdir / "test.yaml").write_text(yaml.safe_dump(config))
    snakemake(workdir, "--profile", str(ROOT / "profiles" / "default"), "--cores", "2")
    snakemake(workdir, "--report", "report.html")
    return workdir


def test_every_figure_and_table_is_built_and_in_the_report(reported):
    report = (reported / "report.html").read_text()
    for name in FIGURES:
        image = cv2.imread(str(reported / "work" / "moving" / "qc" / name))
        assert image is not None and image.size > 0
        assert name in report
    for name in TABLES:
        assert (reported / "work" / "qc" / name).is_file()
        assert name in report
    assert "moving" in (reported / "work" / "qc" / "videos.html").read_text()
    assert "depth" in (reported / "work" / "qc" / "benchmarks.html").read_text()


def test_changing_the_comfort_limit_reruns_only_the_report_figures(reported):
    assert planned_jobs(reported, "--config", "report={comfort_limit_pct: 1.5}") == {"qc_video": 1, "qc_library": 1}


@pytest.mark.parametrize("profile", ["default", "gpu", "slurm"])
def test_each_profile_dry_runs_the_library(reported, profile):
    """Each profile's options are ones this Snakemake takes (the SLURM one needs its executor plugin: the cluster
    extra), and with them a forced run plans the library: the probe checkpoint (the jobs after it are planned once
    it has run) and the library's tables."""
    if profile == "slurm" and importlib.util.find_spec("snakemake_executor_plugin_slurm") is None:
        pytest.skip("snakemake-executor-plugin-slurm is not installed (pip install -e '.[cluster]'; CI installs it)")
    dry = snakemake(reported, "--profile", str(ROOT / "profiles" / profile), "-n", "--forceall")
    assert job_stats(dry.stdout + dry.stderr) == {"probe": 1, "qc_exports": 1, "qc_library": 1}
