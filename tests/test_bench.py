"""The bench's harness (``python -m bench``): one failing figure costs the run none of the others' figures.

A real run of the harness in smoke mode, in a cache of the test's own, over two figures: P7 (the depth store's
size, measured for real) and P4, whose measuring function is made to raise. (CI runs every figure in smoke mode:
.ci/run's bench step.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# P4's function replaced by one that fails as a figure can (an error deep inside what it measures); then the harness.
RUN = """
import sys
import bench.render_encode
def broken(**arguments):
    raise RuntimeError("convergence auto has no single zero plane")
bench.render_encode.figure = broken
from bench.__main__ import main
sys.argv = ["bench", "--only", "P4,P7", "--out", sys.argv[1]]
sys.exit(main())
"""


def test_a_failing_figure_is_recorded_with_its_cause_and_the_others_are_written(tmp_path):
    out = tmp_path / "results.json"
    earlier = {"ratio": 1.8, "goal": ">= 3", "met": False, "date": "2026-12-04"}
    out.write_text(json.dumps({"P4": earlier}))  # an earlier run's
    env = {**os.environ, "STEREO3D_BENCH_SMOKE": "1", "STEREO3D_BENCH_CACHE": str(tmp_path / "cache")}
    done = subprocess.run([sys.executable, "-c", RUN, str(out)], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr  # a failed figure fails the run (CI turns red)...
    results = json.loads(out.read_text())
    assert results["P7"]["ratio"] > 0 and "error" not in results["P7"]  # ...after the others are measured and written
    assert results["P4"]["error"] == "RuntimeError: convergence auto has no single zero plane"
    assert results["P4"]["met"] is False and results["P4"]["last_good"] == earlier
    assert results["_run"]["smoke"] is True and results["_run"]["figures"] == ["P4", "P7"]
    assert "P4" in done.stdout and "FAILED" in done.stdout and "1 figure(s) failed: P4" in done.stdout


def test_the_render_profile_times_every_step_and_puts_the_renderer_back():
    # bench.render_profile replaces the renderer's steps by timed wrappers for its walk: each must have been reached
    # (a renamed step would read 0 ms rather than fail), and the renderer must be itself again after.
    from bench import render_profile
    from stereo3d.stereo import fill, warp

    before = (warp.Renderer._warp_rows, fill.HoleFill.gather, fill._grey)
    profile = render_profile.run(frames=6, width=160, height=90, near_side=70, threads=2)
    assert (warp.Renderer._warp_rows, fill.HoleFill.gather, fill._grey) == before
    steps = profile["steps_ms_per_frame"]
    assert len(steps) == sum(1 for *_, depth in render_profile.STEPS if depth == 0)
    for value in steps.values():
        assert (value["ms"] if isinstance(value, dict) else value) > 0
    assert steps["warp bands: splat, remap, RGBA -> RGB"]["within"]["splat"] > 0
    assert profile["cpu_ms_per_frame"] > 0
