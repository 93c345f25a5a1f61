#!/usr/bin/env bash
# GPU figures (frames/s) on a machine with an NVIDIA GPU: DA3 small at 518 on TensorRT fp16 and on CUDA, NVDS
# split at 512x288 (CUDA), NVENC encode (where the GPU has NVENC), the renderer on the GPU against the CPU's,
# the stages on a 1080p clip, P1/P2 on CUDA, and P9: four 1080p clips through `snakemake --profile
# profiles/gpu` against the encoder alone (bench/gpu_library.py). Writes bench/gpu_results.json (or --out FILE);
# --only a,b runs some checks. Installs nothing: it uses the repository's .venv, or the
# interpreter named by $STEREO3D_PYTHON (a machine whose own Python already holds the packages).
#   bench/gpu_check.sh [--out FILE] [--frames N] [--only render_gpu,P9]
#   bench/gpu_check.sh --cpu-smoke      every path on the CPU at tiny sizes (checks the script; no figures)
# First run: exports the smoke models (a few minutes on the CPU) and TensorRT builds its engines (minutes);
# both are cached under bench/.cache ($STEREO3D_BENCH_CACHE to move it).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${STEREO3D_PYTHON:-.venv/bin/python}
if ! command -v "$PY" >/dev/null 2>&1; then
    echo "gpu_check: no $PY here; create .venv as README.md says, or set STEREO3D_PYTHON" >&2
    exit 2
fi
if [[ " $* " != *" --cpu-smoke "* ]]; then
    if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
        echo "gpu_check: no NVIDIA GPU visible (nvidia-smi); use --cpu-smoke to check the script on a CPU" >&2
        exit 2
    fi
    nvidia-smi -L >&2
    "$PY" - <<'EOF' >&2
import onnxruntime as ort
print("onnxruntime", ort.__version__, "providers:", ", ".join(ort.get_available_providers()))
if "CUDAExecutionProvider" not in ort.get_available_providers():
    print("gpu_check: this onnxruntime has no CUDA provider (onnxruntime-gpu needed); figures will say CPU")
EOF
fi
exec "$PY" -m bench.gpu_check "$@"
