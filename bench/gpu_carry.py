"""What a GPU lease machine lacks, packed into parts that each travel with one call of the lease (64 MiB a call).

    python -m bench.gpu_carry [--python 312] [--arch 90]      (here, with the registry reachable; minutes, once)
    python -m bench.gpu_carry --missing N      (the modules the lease lacks before part N+1: for a rehearsal here)

The lease machine (an NVIDIA H200 image: python3 3.12 with torch + CUDA 13, CuPy, numba-cuda, opencv, onnx, a
CPU-only onnxruntime; no registry) gets what the workflow needs beyond that as wheels, downloaded here for its
Python (``--python``, default 312 = cp312) with ``pip download --no-deps``. Each part is one ``part<N>.tar.xz``
under ``bench/.cache/carry/<N>/`` (git-ignored) with a ``manifest.json``; ``bench/gpu_check.sh --stage N``
installs every part it finds (``pip install --no-index --no-deps --target bench/.cache/site-cp312``) and puts that
folder first on PYTHONPATH, so the carried onnxruntime-gpu shadows the image's CPU onnxruntime. The wheels
inside the archive are re-zipped uncompressed, so that xz compresses the bytes themselves (the wheels' own
deflate would leave xz nothing to do).

Parts (sizes for cp312, 2026-12: ``python -m bench.gpu_carry`` prints them):

1. ``onnxruntime-gpu`` 1.31.1 (CUDA 13 build), trimmed: its CUDA provider keeps only the ``--arch`` kernels (sm_90
   for an H100/H200; the others are zeroed in place, so the library keeps its layout and the zeros compress to
   nothing), and the C-API library ``libonnxruntime.so`` is left out (Python loads the pybind module, which holds
   the whole runtime). The TensorRT provider library stays: it needs TensorRT 10's ``libnvinfer`` (over 1 GiB,
   not on the image, too large to carry), so TensorRT is reported as unavailable there. Plus the pure-Python
   packages the exports need (DA3's model code, omegaconf, addict). 58.3 MiB.
2. Media and storage: PyAV, imageio-ffmpeg 0.6.0 (its FFmpeg 7.0.2: the package asks for 0.8's FFmpeg 9, twice
   the size; 7.0.2 converts and joins exactly but writes no MP4 stereo box, which no figure needs), zarr with
   numcodecs, donfig, google-crc32c, jsonschema with its deps, and filelock (the image has one, of a version
   not known here; the map store's lock needs 3.30). 48 MiB.
3. Snakemake 9 and the packages of its that the image lacks (pulp, sqlmodel, pydantic, gitpython, ...). 17.6 MiB.

A part larger than a call's share (64 MiB less the working tree) is cut into pieces ``<N>.1``, ``<N>.2``, ...
(``part<N>.tar.xz.001``, ``.002``, ... with the whole archive's sha256 in each manifest), each carried by its own
call on the same warm machine: gpu_check.sh keeps the pieces in bench/.cache/spool and installs the part once all
of them are there (``cat part<N>.tar.xz.* > part<N>.tar.xz``, checked against the sha256). With the sizes above no
part needs cutting (``--max-mib 8`` cuts them, to try the path: ``STEREO3D_CARRY=<folder with one piece>
bench/gpu_check.sh --list`` installs from another folder).
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import io
import json
import os
import shutil
import struct
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CACHE = Path(os.environ.get("STEREO3D_BENCH_CACHE") or ROOT / "bench" / ".cache")
LIMIT = 64 * 2**20  # what travels with one call: the working tree and every carried path together
MARGIN = 2**20  # files written in the tree between packing and the call
ORT = "onnxruntime-gpu==1.31.1"

# What each part carries, as name==version (the versions of this repository's .venv, where one holds them).
# The image's own packages (numpy, torch, onnx, onnxscript, opencv, matplotlib, pyyaml, jinja2, requests, psutil,
# attrs, tqdm, einops, safetensors, numba, numba-cuda, packaging, typing-extensions, wrapt, tabulate, ...:
# /work/.library/device/KINDS.md lists them) are not carried.
PARTS: dict[str, list[str]] = {
    "1": [ORT, "depth-anything-3", "omegaconf", "addict"],
    "2": """av imageio-ffmpeg==0.6.0 zarr numcodecs donfig google-crc32c jsonschema jsonschema-specifications
            referencing rpds-py filelock""".split(),
    "3": """snakemake snakemake-interface-common snakemake-interface-executor-plugins snakemake-interface-logger-plugins
            snakemake-interface-report-plugins snakemake-interface-scheduler-plugins
            snakemake-interface-storage-plugins conda-inject configargparse connection-pool docutils dpath gitpython
            gitdb smmap humanfriendly immutables nbformat fastjsonschema jupyter-core traitlets platformdirs pulp
            smart-open sqlmodel sqlalchemy greenlet pydantic pydantic-core annotated-types typing-inspection tenacity
            throttler yte argparse-dataclass""".split(),
}
# The lease image's own Python packages (/work/.library/device/KINDS.md, read 2026-11-17): what is there before any
# part arrives. A rehearsal here hides every other installed package (``missing``).
IMAGE = set(
    """absl-py accelerate aiofiles aiohappyeyeballs aiohttp aiosignal annotated-doc anyio attrs botorch build
    certifi charset-normalizer chex click cloudpickle cmake colorama contourpy coverage cuda-bindings
    cuda-core cuda-pathfinder cuda-toolkit cupy-cuda13x cycler cython diffrax e3nn einops equinox etils
    execnet filelock flatbuffers flax fonttools formulaic frozenlist fsspec gpytorch grpcio h11 h5py hf-xet
    httpcore httpx huggingface-hub humanize hypothesis idna imageio iniconfig interface-meta jax
    jax-cuda13-pjrt jax-cuda13-plugin jaxlib jaxtyping jinja2 joblib kiwisolver lazy-loader lightning
    lightning-utilities linear-operator lineax llvmlite lxml markdown markdown-it-py markupsafe matplotlib
    mdurl meson ml-dtypes mpi4py mpmath msgpack multidict multipledispatch mypy-extensions nanobind narwhals
    networkx ninja numba numba-cuda numpy numpyro nvidia-cublas nvidia-cuda-cupti nvidia-cuda-nvrtc
    nvidia-cuda-runtime nvidia-cudnn-cu13 nvidia-cufft nvidia-cufile nvidia-curand nvidia-cusolver
    nvidia-cusparse nvidia-cusparselt-cu13 nvidia-ml-py nvidia-nccl-cu13 nvidia-nvjitlink
    nvidia-nvshmem-cu13 nvidia-nvtx onnx onnx-ir onnxruntime onnxscript opencv-python-headless opt-einsum
    opt-einsum-fx optax optimistix orbax-checkpoint packaging pandas pathspec patsy peft pillow pip pluggy
    portalocker prometheus-client propcache protobuf psutil py-cpuinfo pyarrow pybind11 pygments pyparsing
    pyproject-hooks pyre-extensions pytest pytest-benchmark pytest-cov pytest-mock pytest-timeout
    pytest-xdist python-dateutil pytorch-lightning pyyaml regex requests rich sacrebleu safetensors
    scikit-build-core scikit-image scikit-learn scipy seaborn sentence-transformers sentencepiece setuptools
    shellingham simplejson six sortedcontainers statsmodels sympy tabulate tensorboard
    tensorboard-data-server tensorstore threadpoolctl tifffile tiktoken timm tokenizers toolz torch
    torch-geometric torchaudio torchdiffeq torchmetrics torchvision tqdm transformers treescope triton typer
    typing-extensions typing-inspect urllib3 uvloop wadler-lindig werkzeug wheel wrapt xarray xxhash yarl
    zipp""".split()
)
PLATFORMS = ["manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_24_x86_64", "manylinux_2_17_x86_64",
             "manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64", "manylinux_2_5_x86_64",
             "linux_x86_64"]  # fmt: skip
FATBIN_MAGIC = 0xBA55ED50


def missing(stage: int) -> list[str]:
    """Top-level modules installed here that the lease lacks once parts 1..``stage`` are installed (0: the bare
    image): neither on its image nor carried. ``tests/missing/sitecustomize.py`` hides them for a rehearsal of a
    stage here (``bench/gpu_check.sh --rehearse N``)."""
    from importlib.metadata import packages_distributions

    def canonical(name: str) -> str:
        return name.lower().replace("_", "-").replace(".", "-")

    there = {canonical(n) for n in IMAGE}
    for part in range(1, stage + 1):
        there |= {canonical(spec.partition("==")[0]) for spec in PARTS.get(str(part), [])}
    there.add("onnxruntime-gpu")  # its module: the image's CPU build before part 1, the carried GPU build after
    hidden = set()
    for module, dists in packages_distributions().items():
        if module.isidentifier() and not any(canonical(d) in there for d in dists):
            hidden.add(module)
    return sorted(hidden - {"stereo3d", "bench", "tests"})


def say(message: str) -> None:
    print(f"gpu_carry: {message}", file=sys.stderr, flush=True)


def pinned(spec: str) -> str:
    """``name==version``: the version given, else the one installed here, else the newest (pip's choice)."""
    if "==" in spec:
        return spec
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"{spec}=={version(spec)}"
    except PackageNotFoundError:
        return spec


def download(specs: list[str], python: str, folder: Path) -> list[Path]:
    """The wheels of ``specs`` for CPython ``python`` on manylinux x86-64 (no dependencies), cached in ``folder``. A
    package that publishes no wheel (a pure-Python sdist, such as connection-pool) gets one built here."""
    folder.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
           "--python-version", python, "--implementation", "cp", "--dest", str(folder)]  # fmt: skip
    for platform in PLATFORMS:
        cmd += ["--platform", platform]
    wheels = []
    for spec in map(pinned, specs):
        if _wheel(folder, spec) is None and subprocess.run([*cmd, spec], check=False).returncode != 0:
            say(f"{spec}: no wheel published; building one from its sdist")
            build = [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", str(folder), spec]
            subprocess.run(build, check=True)
            if not _wheel(folder, spec).name.endswith("-none-any.whl"):
                raise SystemExit(f"{spec}: the wheel built here is not pure Python; it would not install there")
        if _wheel(folder, spec) is None:
            raise SystemExit(f"no wheel for {spec} in {folder}")
        wheels.append(_wheel(folder, spec))
    return wheels


def _wheel(folder: Path, spec: str) -> Path | None:
    name, _, version = spec.partition("==")
    name = name.replace("-", "_").replace(".", "_").lower()
    found = sorted(p for p in folder.glob("*.whl") if p.name.lower().startswith(name + "-"))
    found = [p for p in found if not version or p.name.split("-")[1] == version]
    return found[-1] if found else None


def keep_arch(library: bytes, arch: int) -> tuple[bytes, int]:
    """``library`` (an ELF shared object) with the payload of every CUDA fatbinary machine-code entry (SASS) for
    another architecture than ``arch`` zeroed, in place: offsets and sizes stay, a GPU of ``arch`` cannot run
    another architecture's SASS so the runtime never reads those entries, and the zeros compress to nothing.
    PTX entries (which the driver could compile for ``arch``) stay. Returns the new bytes and how many were
    zeroed."""
    data = bytearray(library)
    if data[:4] != b"\x7fELF" or data[4] != 2:
        return library, 0
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize) for i in range(shnum)]
    names = sections[shstrndx][4]

    def name(offset: int) -> bytes:
        start = names + offset
        return bytes(data[start : data.index(b"\0", start)])

    zeroed = 0
    for sec_name, _, _, _, offset, size in sections:
        if name(sec_name) != b".nv_fatbin":
            continue
        pos, end = offset, offset + size
        while pos + 16 <= end:
            magic, _, header, body = struct.unpack_from("<IHHQ", data, pos)
            if magic != FATBIN_MAGIC:
                pos += 8  # containers are 8-byte aligned, with padding between them
                continue
            entry, stop = pos + header, pos + header + body
            while entry < stop:
                kind, _, entry_header, padded = struct.unpack_from("<HHIQ", data, entry)
                (sm,) = struct.unpack_from("<I", data, entry + 28)
                if kind == 2 and sm != arch:  # 2: an ELF of SASS; 1: PTX
                    start = entry + entry_header
                    data[start : start + padded] = bytes(padded)
                    zeroed += padded
                entry += entry_header + padded
            pos = stop
    return bytes(data), zeroed


def _record_line(name: str, payload: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(payload).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(payload)}"


def restore(wheel: Path, out: Path, arch: int | None = None, drop: tuple[str, ...] = ()) -> dict:
    """``wheel`` written to ``out`` uncompressed (ZIP_STORED); with ``arch``, its CUDA libraries keep only that
    architecture's kernels (``keep_arch``); members whose name ends with one of ``drop`` are left out. RECORD is
    rewritten to match. Returns what was changed."""
    changed = {"dropped": [], "zeroed_mib": 0.0}
    with zipfile.ZipFile(wheel) as source, zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as target:
        members = source.infolist()
        record = next(m.filename for m in members if m.filename.endswith(".dist-info/RECORD"))
        lines = []
        for member in members:
            if member.filename == record:
                continue
            if any(member.filename.endswith(d) for d in drop):
                changed["dropped"].append(member.filename)
                continue
            payload = source.read(member)
            if arch is not None and member.filename.endswith(".so"):
                payload, zeroed = keep_arch(payload, arch)
                changed["zeroed_mib"] += round(zeroed / 2**20, 1)
            info = zipfile.ZipInfo(member.filename, member.date_time)
            info.external_attr = member.external_attr
            target.writestr(info, payload)
            if not member.is_dir():
                lines.append(_record_line(member.filename, payload))
        info = zipfile.ZipInfo(record, next(m.date_time for m in members if m.filename == record))
        target.writestr(info, "\n".join([*lines, f"{record},,"]) + "\n")
    return changed


def tree_bytes() -> int:
    """Bytes of what travels with every call anyway: tracked and untracked-not-ignored files."""
    done = subprocess.run(["git", "ls-files", "-z", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True,
                          check=True)  # fmt: skip
    return sum((ROOT / p).stat().st_size for p in done.stdout.decode().split("\0") if p and (ROOT / p).is_file())


def pack(part: str, wheels: list[Path], out: Path, budget: int, threads: int, python: str) -> list[dict]:
    """``wheels`` as one xz-compressed tar in ``out/<part>/`` (or in pieces ``out/<part>.<k>/`` when larger than
    ``budget``), each folder with its manifest. Returns the manifests."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        for wheel in wheels:
            tar.add(wheel, arcname=wheel.name)
    say(f"part {part}: xz of {raw.tell() / 2**20:.0f} MiB ({len(wheels)} wheels)")
    archive = subprocess.run(["xz", "-9", f"-T{threads}", "-c"], input=raw.getvalue(), capture_output=True,
                             check=True).stdout  # fmt: skip
    digest = hashlib.sha256(archive).hexdigest()
    pieces = [archive[i : i + budget] for i in range(0, len(archive), budget)]
    manifests = []
    for k, piece in enumerate(pieces, 1):
        folder = out / (part if len(pieces) == 1 else f"{part}.{k}")
        folder.mkdir(parents=True)
        file = f"part{part}.tar.xz" if len(pieces) == 1 else f"part{part}.tar.xz.{k:03d}"
        (folder / file).write_bytes(piece)
        manifest = {"part": part, "python": python, "piece": k, "pieces": len(pieces), "file": file, "sha256": digest,
                    "bytes": len(piece), "archive_bytes": len(archive), "wheels": [w.name for w in wheels]}  # fmt: skip
        (folder / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
        manifests.append(manifest)
    return manifests


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--missing", type=int, metavar="N", help="print the modules the lease lacks before part N+1")
    parser.add_argument("--python", default="312", help="the lease's CPython version tag without 'cp' (default 312)")
    parser.add_argument("--arch", type=int, default=90, help="SM architecture of the CUDA kernels kept (90: H200)")
    parser.add_argument("--out", type=Path, default=CACHE / "carry")
    parser.add_argument("--parts", default=",".join(PARTS), help="which parts to make (default all)")
    parser.add_argument("--max-mib", type=float, help="cut parts larger than this (default: a call's share)")
    args = parser.parse_args()
    if args.missing is not None:
        print(",".join(missing(args.missing)))
        return
    python = args.python.removeprefix("cp")
    source = CACHE / "carry-src" / f"cp{python}"
    build = CACHE / "carry-build" / f"cp{python}"
    shutil.rmtree(build, ignore_errors=True)
    build.mkdir(parents=True)
    budget = int(args.max_mib * 2**20) if args.max_mib else LIMIT - tree_bytes() - MARGIN
    say(f"largest piece: {budget / 2**20:.1f} MiB" + ("" if args.max_mib else " (64 MiB less the working tree, 1 MiB)"))
    parts = args.parts.split(",")
    for folder in args.out.glob("*"):  # the parts made again (another part's folders stay)
        if folder.is_dir() and folder.name.split(".")[0] in parts:
            shutil.rmtree(folder)
    args.out.mkdir(parents=True, exist_ok=True)
    threads = max(1, min(4, (os.cpu_count() or 2) // 2))  # xz beside other work
    for part in parts:
        wheels = []
        for wheel in download(PARTS[part], python, source):
            if wheel.name.startswith("onnxruntime_gpu-"):
                changed = restore(wheel, build / wheel.name, args.arch, drop=(".so.1.31.1",))
                say(f"{wheel.name}: kept sm_{args.arch} kernels only ({changed['zeroed_mib']:.0f} MiB zeroed), "
                    f"left out {', '.join(Path(d).name for d in changed['dropped']) or 'nothing'}")  # fmt: skip
            else:
                restore(wheel, build / wheel.name)
            wheels.append(build / wheel.name)
        for manifest in pack(part, wheels, args.out, budget, threads, python):
            say(f"part {part} piece {manifest['piece']}/{manifest['pieces']}: {manifest['bytes'] / 2**20:.1f} MiB, "
                f"{len(manifest['wheels'])} wheels")  # fmt: skip
    summary = [json.loads(m.read_text()) for m in sorted(args.out.glob("*/manifest.json"))]
    total = sum(m["bytes"] for m in summary)
    (args.out / "SIZES.txt").write_text(
        "".join(f"{m['part']}.{m['piece']}/{m['pieces']}\t{m['bytes']}\t{' '.join(m['wheels'])}\n" for m in summary)
        + f"total\t{total}\n"
    )
    shutil.rmtree(build, ignore_errors=True)
    folders = [args.out / (m["part"] if m["pieces"] == 1 else f"{m['part']}.{m['piece']}") for m in summary]
    folders = sorted(str(f.relative_to(ROOT) if f.is_relative_to(ROOT) else f) for f in folders)
    print(f"total {total / 2**20:.1f} MiB in {len(summary)} folders, one per call: {' '.join(folders)}")


if __name__ == "__main__":
    main()
