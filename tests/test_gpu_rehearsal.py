"""The GPU check's first stage runs on a lease that has only the first carried part (onnxruntime-gpu and the
exports' packages): no PyAV, zarr, jsonschema or Snakemake yet. Its checks' code imports and its renderer check
runs here with those hidden (the whole stage, exports included, is ``bench/gpu_check.sh --rehearse 1``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from bench import gpu_carry

ROOT = Path(__file__).resolve().parents[1]


def test_stage_one_needs_nothing_the_later_parts_bring():
    missing = gpu_carry.missing(1)
    assert {"av", "zarr", "snakemake", "jsonschema", "imageio_ffmpeg"} <= set(missing)
    assert not {"onnxruntime", "torch", "numpy", "cv2", "numba", "depth_anything_3"} & set(missing)
    code = (
        "import json\n"
        "from bench import gpu_check\n"
        "import stereo3d.models.da3.runtime, stereo3d.models.nvds.runtime, stereo3d.runtime.sessions\n"
        "print(json.dumps(gpu_check.render_gpu(64, 36, 2)))\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "tests" / "missing"), str(ROOT)]),
           "STEREO3D_MISSING": ",".join(missing)}  # fmt: skip
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300,
                          cwd=ROOT)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["available"] or result["why"]  # the renderer's pixels, or why the GPU could not render them
    hidden = subprocess.run([sys.executable, "-c", "import av"], env=env, capture_output=True, text=True)
    assert hidden.returncode != 0 and "made missing" in hidden.stderr  # the rehearsal hides what it says
