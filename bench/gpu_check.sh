#!/usr/bin/env bash
# GPU figures (frames/s) on a machine with an NVIDIA GPU, in stages that each fit one call of a 15-minute lease
# (bench/README.md, "GPU figures", has the commands and durations; `--list` prints the checks of each stage):
#   bench/gpu_check.sh --stage 1    exports, DA3 on CUDA (exact/fast, batch 1/8), PyTorch fp16, NVDS, render_gpu
#   bench/gpu_check.sh --stage 2    NVENC/x264, the pipeline on a 1080p clip, P1/P2, DA3 on TensorRT fp16
#   bench/gpu_check.sh --stage 3    P9: four 1080p clips of 48 frames through snakemake --profile profiles/gpu
#   bench/gpu_check.sh [--only a,b] [--out FILE] [--frames N]     (no --stage: every stage, one after another)
#   bench/gpu_check.sh --cpu-smoke  every path on the CPU at tiny sizes (checks the script; no figures)
#   bench/gpu_check.sh --rehearse N stage N's --cpu-smoke run with the modules hidden that the lease lacks at stage N
#                                   (neither on its image nor in parts 1..N: python -m bench.gpu_carry --missing N)
# 1. Installs the parts that bench/gpu_carry.py packed and the call carried (bench/.cache/carry/<N>/), once per
#    machine, into bench/.cache/site-cp312 (pip --target: the image's python3 keeps its torch and CUDA libraries; the
#    folder goes first on PYTHONPATH, so the carried onnxruntime-gpu shadows a CPU onnxruntime). A part cut into
#    pieces is spooled in bench/.cache/spool until its last piece arrives, then joined, checked and installed.
# 2. Puts the CUDA libraries of the Python's nvidia-* packages on LD_LIBRARY_PATH (onnxruntime-gpu's CUDA provider
#    needs cuBLAS, cuDNN, cuRAND, cuFFT 13 from there), checks the GPU (nvidia-smi) and what imports.
# 3. Runs python -m bench.gpu_check with the arguments given. Results: $OUT/gpu_results.json where $OUT is set
#    (written after every check), else bench/gpu_results.json; with $OUT, this whole output also goes to
#    $OUT/gpu_check.log.
# Python: $STEREO3D_PYTHON, else the repository's .venv, else python3 (a GPU image's own, with torch + CUDA).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
TEE=""
if [[ -n "${OUT:-}" ]]; then
    mkdir -p "$OUT"
    exec > >(tee -a "$OUT/gpu_check.log") 2>&1
    TEE=$!
fi
export PYTHONUNBUFFERED=1
if [[ -n "${STEREO3D_PYTHON:-}" ]]; then
    PY=$STEREO3D_PYTHON
elif [[ -x .venv/bin/python ]]; then
    PY=.venv/bin/python
else
    PY=python3
fi
if ! command -v "$PY" >/dev/null 2>&1; then
    echo "gpu_check: no $PY here; create .venv as README.md says, or set STEREO3D_PYTHON" >&2
    exit 2
fi
if [[ "${1:-}" == "--rehearse" ]]; then
    stage=${2:?--rehearse needs a stage: 1, 2 or 3}
    shift 2
    # tests/missing/sitecustomize.py hides these from this Python and every process it starts (exports, Snakemake).
    STEREO3D_MISSING=$("$PY" -m bench.gpu_carry --missing "$stage")
    export STEREO3D_MISSING
    export PYTHONPATH="$ROOT/tests/missing${PYTHONPATH:+:$PYTHONPATH}"
    echo "gpu_check: rehearsing stage $stage without: $STEREO3D_MISSING" >&2
    set -- --cpu-smoke --stage "$stage" "$@"
fi
TAG=$("$PY" -c 'import sys; print(f"{sys.version_info[0]}{sys.version_info[1]}")')
SITE=$ROOT/bench/.cache/site-cp$TAG
SPOOL=$ROOT/bench/.cache/spool

install_part() { # archive part sha: unpack the wheels and pip-install them into $SITE
    local tmp
    tmp=$(mktemp -d)
    echo "gpu_check: installing part $2 ($(du -h "$1" | cut -f1)) into $SITE" >&2
    "$PY" -c 'import sys, tarfile
kw = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
tarfile.open(sys.argv[1], "r:xz").extractall(sys.argv[2], **kw)' "$1" "$tmp"
    "$PY" -m pip install -q --no-index --no-deps --no-compile --disable-pip-version-check --upgrade \
        --target "$SITE" "$tmp"/*.whl
    rm -rf "$tmp"
    touch "$SITE/.part-$2-$3"
}

shopt -s nullglob
for manifest in "${STEREO3D_CARRY:-bench/.cache/carry}"/*/manifest.json; do
    dir=$(dirname "$manifest")
    read -r part piece pieces file sha python < <("$PY" -c 'import json, sys; m = json.load(open(sys.argv[1]))
print(m["part"], m["piece"], m["pieces"], m["file"], m["sha256"], m["python"])' "$manifest")
    if [[ "$python" != "$TAG" ]]; then
        echo "gpu_check: $dir is for Python $python, this one is $TAG: not installed (bench/gpu_carry.py --python $TAG)" >&2
        continue
    fi
    mkdir -p "$SITE"
    if [[ -f "$SITE/.part-$part-$sha" ]]; then
        echo "gpu_check: part $part already installed on this machine" >&2
        continue
    fi
    if ((pieces == 1)); then
        install_part "$dir/$file" "$part" "$sha"
        continue
    fi
    mkdir -p "$SPOOL"
    cp "$dir/$file" "$SPOOL/$file"
    have=("$SPOOL"/part"$part".tar.xz.[0-9][0-9][0-9])
    if ((${#have[@]} < pieces)); then
        echo "gpu_check: part $part: piece $piece of $pieces kept in $SPOOL; carry the others in the next calls" >&2
        continue
    fi
    cat "${have[@]}" >"$SPOOL/part$part.tar.xz"
    if [[ "$(sha256sum "$SPOOL/part$part.tar.xz" | cut -d' ' -f1)" != "$sha" ]]; then
        echo "gpu_check: part $part: the joined pieces do not match the sha256 of the manifest; not installed" >&2
        continue
    fi
    install_part "$SPOOL/part$part.tar.xz" "$part" "$sha"
    rm -f "$SPOOL"/part"$part".tar.xz*
done
# The repository itself too: a Python without this package installed (the lease's) runs the workflow's scripts.
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
if [[ -d "$SITE" ]]; then
    export PYTHONPATH="$SITE:$PYTHONPATH"
    export PATH="$SITE/bin:$PATH"
fi

if [[ " $* " != *" --cpu-smoke "* && " $* " != *" --list "* ]]; then
    if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
        echo "gpu_check: no NVIDIA GPU visible (nvidia-smi); use --cpu-smoke to check the script on a CPU" >&2
        exit 2
    fi
    nvidia-smi -L >&2
    NVLIBS=$("$PY" - <<'EOF'
import glob, os, site
bases = [*site.getsitepackages(), site.getusersitepackages()]
dirs = [d for b in bases for d in sorted(glob.glob(os.path.join(b, "nvidia", "**", "lib"), recursive=True))
        if glob.glob(os.path.join(d, "lib*.so*"))]
print(":".join(dict.fromkeys(dirs)))
EOF
)
    if [[ -n "$NVLIBS" ]]; then
        export LD_LIBRARY_PATH="$NVLIBS${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    fi
    "$PY" - <<'EOF' >&2 || true
import importlib
for name in ("onnxruntime", "torch", "numba.cuda", "av", "zarr", "imageio_ffmpeg", "jsonschema", "snakemake",
             "depth_anything_3", "omegaconf"):
    try:
        module = importlib.import_module(name)
        print(f"gpu_check: {name} {getattr(module, '__version__', '')} ({module.__file__})")
    except Exception as exc:  # what is missing shows here once, then in the checks that need it
        print(f"gpu_check: {name} MISSING: {type(exc).__name__}: {exc}")
import onnxruntime as ort
print("gpu_check: onnxruntime providers:", ", ".join(ort.get_available_providers()))
if "CUDAExecutionProvider" not in ort.get_available_providers():
    print("gpu_check: this onnxruntime has no CUDA provider (the carried onnxruntime-gpu: part 1); figures will say CPU")
EOF
fi
rc=0
"$PY" -m bench.gpu_check "$@" || rc=$?
if [[ -n "$TEE" ]]; then
    exec >&- 2>&-
    wait "$TEE" 2>/dev/null || true
fi
exit $rc
