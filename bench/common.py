"""What the benchmarks share: cached smoke models and clips, timing, peak RSS of a child run, the figure record.

Models are exported once, with the project's own exporters from seeded *smoke* weights (timing only: their
output is meaningless), into a cache folder laid out like the workflow's (``weights/``, ``models/``), so the
workflow itself can use it. The cache is ``bench/.cache`` (git-ignored), or ``$STEREO3D_BENCH_CACHE``.
Missing exports are built in parallel child processes (``python -m bench.common export ...``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# A smoke run (``python -m bench --smoke``, which sets this for its children too): every figure at a tiny size, to
# prove that each one runs (CI runs it); its figures mean nothing. It has a cache of its own.
SMOKE_ENV = "STEREO3D_BENCH_SMOKE"
SMOKE = os.environ.get(SMOKE_ENV, "") not in ("", "0")
CACHE = Path(os.environ.get("STEREO3D_BENCH_CACHE") or ROOT / "bench" / (".cache-smoke" if SMOKE else ".cache"))
# DA3 side of the depth figures: the demo's (DA3's native 518 is ~3.5x slower per frame on a CPU; pass
# --da3-size 518 to measure it). NVDS tier: the demo's (the real-use tiers take minutes per frame window here).
DA3_VARIANT = "small"
DA3_SIZE = 70 if SMOKE else 280
SMALL_DA3_SIZE = 56 if SMOKE else 140  # where many frames matter more than the side (P6's 10x clip, P8's conversion)
NVDS_TIER = (64, 32) if SMOKE else (256, 128)
_STARTED = time.perf_counter()


def say(message: str) -> None:
    """Progress line on stderr with the seconds since the bench started."""
    print(f"[{time.perf_counter() - _STARTED:6.1f} s] {message}", file=sys.stderr, flush=True)


# --- cached models ------------------------------------------------------------------------------------------
def da3_weights() -> Path:
    from stereo3d.models.names import da3_weights_name

    return CACHE / "weights" / da3_weights_name(DA3_VARIANT)


def nvds_weights() -> Path:
    from stereo3d.models.names import NVDS_WEIGHTS

    return CACHE / "weights" / NVDS_WEIGHTS


def da3_model_path(contract: str, size=DA3_SIZE) -> Path:
    """The cached export of the bench's variant; ``size`` a square side or (width, height)."""
    from stereo3d.models.names import da3_onnx_name

    return CACHE / "models" / "DA3" / da3_onnx_name(DA3_VARIANT, size, contract)


def da3_tier(size: int = DA3_SIZE, aspect: str = "16:9") -> tuple[int, int]:
    """(width, height) of the aspect tier's export with ``size`` as its longest side (what fit aspect picks)."""
    from stereo3d.models.da3.tiers import parse_aspect, tier_shape

    return tier_shape(parse_aspect(aspect), size)


def near_settings(method: str, **stabilise):
    """The ``NearSettings`` a video stabilised by ``method`` gets at the config's defaults (``stabilise``: keys of
    that section to override, e.g. ``nvds_tier="256x128"``; another method's are ignored, as in the workflow)."""
    from stereo3d.stabilisers import NearSettings
    from stereo3d.workflow.config import load_schema, validate_config

    schema = load_schema(ROOT / "workflow/schemas/config.schema.yaml")
    config, _ = validate_config({"stabilise": {"method": method, **stabilise}}, schema)
    return NearSettings.from_sections(config)


def depth_settings(contract: str, size=DA3_SIZE, precision: str = "exact"):
    """The ``DepthSettings`` of the bench's cached export (``size`` a square side or (width, height)) at the
    config's defaults (the frame letterboxed into it, no bars)."""
    from stereo3d.models.names import da3_shape
    from stereo3d.stages.depth import DepthSettings

    return DepthSettings(variant=DA3_VARIANT, size=da3_shape(size), contract=contract, precision=precision)


def nvds_dir() -> Path:
    return CACHE / "models" / "NVDS"


def nvds_paths(tier: tuple[int, int] = NVDS_TIER, modes: tuple[str, ...] = ("split", "monolith")) -> list[Path]:
    from stereo3d.models.names import nvds_onnx_names

    name = f"{tier[0]}x{tier[1]}"
    return [
        nvds_dir() / file
        for graphs in ("split", "monolith")
        if graphs in modes
        for file in nvds_onnx_names(name, graphs)
    ]


def _complete(path: Path) -> bool:
    """An export counts once its validation report sits beside it (both are written atomically, model first)."""
    return path.is_file() and path.with_name(path.name + ".validation.json").is_file()


def ensure_models(da3: list[tuple[str, object]] = (), nvds: list[tuple[tuple[int, int], tuple[str, ...]]] = ()) -> list:
    """Export what is missing of the DA3 ``(contract, size)`` (a square side or (width, height)) and NVDS
    ``(tier, modes)`` models, in parallel. Returns one record per export made (job, device, seconds)."""
    from stereo3d.models.names import da3_shape

    jobs = []
    for contract, size in da3:
        if not _complete(da3_model_path(contract, size)):
            width, height = da3_shape(size)
            jobs.append(["da3", contract, f"{width}x{height}"])
    for tier, modes in nvds:
        if not all(_complete(p) for p in nvds_paths(tier, modes)):
            jobs.append(["nvds", f"{tier[0]}x{tier[1]}", ",".join(modes)])
    if not jobs:
        return []
    # The weights first (cheap, shared by the exports), then the exports side by side: torch export is
    # partly single-threaded, so two or three at once finish sooner than one after another. The cores are
    # shared out among them (each torch would otherwise start a thread per core).
    if any(j[0] == "da3" for j in jobs):
        ensure_da3_weights()
    if any(j[0] == "nvds" for j in jobs) and not nvds_weights().is_file():
        _export_main(["weights", "nvds"])
    say(f"exporting smoke models into {CACHE} (once; cached): {', '.join(' '.join(j) for j in jobs)}")
    env = {**os.environ, "STEREO3D_BENCH_EXPORT_THREADS": str(max(1, (os.cpu_count() or 1) // len(jobs)))}
    procs = [(job, subprocess.Popen([sys.executable, "-m", "bench.common", "export", *job], cwd=ROOT, env=env,
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
             for job in jobs]  # fmt: skip
    failed, done = [], []
    for job, proc in procs:
        out, _ = proc.communicate()
        if proc.returncode != 0:
            print(out[-4000:], file=sys.stderr)  # the child's traceback: the one line below rarely says enough
            failed.append(f"{' '.join(job)}: {out.strip().splitlines()[-1] if out.strip() else proc.returncode}")
            continue
        try:
            done.append(json.loads(out.strip().splitlines()[-1]))
        except (IndexError, ValueError):
            done.append({"job": " ".join(job)})
    if failed:
        raise RuntimeError("smoke export failed: " + "; ".join(failed))
    say(f"exports done: {json.dumps(done)}")
    return done


def ensure_da3_weights() -> Path:
    """The cached smoke DA3 weights, written once."""
    if not da3_weights().is_file():
        _export_main(["weights", "da3"])
    return da3_weights()


EXPORT_DEVICE_ENV = "STEREO3D_BENCH_EXPORT_DEVICE"  # cpu | cuda | auto (the default: cuda where torch sees one)


def _export_device() -> str:
    wanted = os.environ.get(EXPORT_DEVICE_ENV, "auto")
    if wanted != "auto":
        return wanted
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def _export_main(args: list[str]) -> None:
    """``python -m bench.common export ...``: one export (run in a child so several go side by side). A model is
    exported with torch on the GPU where there is one (the NVDS export runs both PyTorch models on a window of
    frames; DA3's tracing gains little), on the CPU again if that fails; the last line printed says which."""
    import logging

    logging.basicConfig(level=logging.ERROR)
    kind = args[0]
    if kind == "weights":
        if args[1] == "da3":
            from stereo3d.demo.smoke import write_smoke_weights

            write_smoke_weights(da3_weights(), DA3_VARIANT)
        else:
            from stereo3d.demo.smoke import write_smoke_checkpoint

            write_smoke_checkpoint(nvds_weights())
        return
    if kind not in ("da3", "nvds"):
        raise SystemExit(f"unknown export {kind!r}")
    if os.environ.get("STEREO3D_BENCH_EXPORT_THREADS"):
        import torch

        torch.set_num_threads(int(os.environ["STEREO3D_BENCH_EXPORT_THREADS"]))
    device, note = _export_device(), None
    started = time.perf_counter()
    try:
        _export(kind, args[1:], device)
    except Exception as exc:
        if device == "cpu":
            raise
        note = f"on {device}: {type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
        print(f"export {' '.join(args)} failed {note}; again on the CPU", file=sys.stderr, flush=True)
        device = "cpu"
        _export(kind, args[1:], device)
    record = {"job": " ".join(args), "device": device, "seconds": round(time.perf_counter() - started, 1)}
    print(json.dumps({**record, **({"failed_first": note} if note else {})}), flush=True)


def _export(kind: str, args: list[str], device: str) -> None:
    if kind == "da3":
        from stereo3d.models.da3.export import export_da3

        contract, shape = args[0], tuple(int(v) for v in args[1].split("x"))
        export_da3(da3_weights(), da3_model_path(contract, shape), DA3_VARIANT, shape, contract, device=device,
                   validate=False)  # fmt: skip
    else:
        from stereo3d.models.nvds.export import export_nvds

        width, height = (int(v) for v in args[0].split("x"))
        export_nvds(nvds_weights(), nvds_dir(), width, height, modes=tuple(args[1].split(",")), device=device,
                    ort_check=False)  # fmt: skip


# --- clips ----------------------------------------------------------------------------------------------------
def clip(name: str, **spec) -> Path:
    """A generated clip (``stereo3d.demo.samples.make_clip`` arguments), cached under ``clips/``."""
    from stereo3d.demo.samples import make_clip

    path = CACHE / "clips" / f"{name}.mp4"
    stamp = path.with_suffix(".json")
    wanted = json.dumps(spec, sort_keys=True)
    if not (path.is_file() and stamp.is_file() and stamp.read_text() == wanted):
        path.parent.mkdir(parents=True, exist_ok=True)
        make_clip(path, **spec)
        stamp.write_text(wanted)
    return path


def probe(path: Path) -> dict:
    from stereo3d.io.probe import probe_video

    return probe_video(path)


def scratch(name: str) -> Path:
    """An emptied work folder under the cache (kept after the run for inspection)."""
    folder = CACHE / "scratch" / name
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    return folder


# --- timing ---------------------------------------------------------------------------------------------------
def timed(fn: Callable[[], object]) -> tuple[object, float]:
    start = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - start


def interleaved(runs: dict[str, Callable[[], float]], repeats: int) -> dict[str, list[float]]:
    """Call each function of ``runs`` in turn, ``repeats`` rounds (A B C A B C ...), so that a burst of load
    from other processes hits every contender alike; each function returns its own measured seconds."""
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(repeats):
        for name, fn in runs.items():
            times[name].append(fn())
    return times


# --- memory ---------------------------------------------------------------------------------------------------
def child_peak_rss(module_args: list[str], timeout: float = 600) -> dict:
    """Run ``python -m <module_args>`` in a fresh process; it prints one JSON line last (``own_peak_rss`` of
    itself, typically), which is returned."""
    done = subprocess.run([sys.executable, "-m", *module_args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout, check=False)  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(module_args)} failed: {done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


class TreeRss:
    """Samples the resident set of this process plus all its descendants (ffmpeg) every ``every_s`` seconds, in
    a thread, from /proc; ``peak_mib`` is the largest sum seen. (``ru_maxrss`` of children is no help here: a
    child counts the parent's pages it shared between fork and exec.)"""

    def __init__(self, every_s: float = 0.02):
        import threading

        self.every_s = every_s
        self.peak_kib = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, name="rss-sampler", daemon=True)

    def __enter__(self) -> TreeRss:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def peak_mib(self) -> float:
        return round(self.peak_kib / 1024, 1)

    def _sample(self) -> None:
        me = os.getpid()
        while True:
            # A child caught between fork and exec still shows this process's pages under its name: skipped.
            total = _status(me)["VmRSS"] + sum(info["VmRSS"] for info in map(_status, _tree(me)[1:])
                                                if info["Name"] != _status(me)["Name"])  # fmt: skip
            self.peak_kib = max(self.peak_kib, total)
            if self._stop.wait(self.every_s):
                return


def _tree(pid: int) -> list[int]:
    pids, todo = [], [pid]
    while todo:
        current = todo.pop()
        pids.append(current)
        try:
            for task in os.listdir(f"/proc/{current}/task"):
                with open(f"/proc/{current}/task/{task}/children") as fh:
                    todo.extend(int(c) for c in fh.read().split())
        except OSError:  # gone meanwhile
            continue
    return pids


def _status(pid: int) -> dict:
    """Name, VmRSS and VmHWM (KiB) of a process from /proc; zeros when it is gone."""
    info = {"Name": "", "VmRSS": 0, "VmHWM": 0}
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                key, _, value = line.partition(":")
                if key == "Name":
                    info["Name"] = value.strip()
                elif key in ("VmRSS", "VmHWM"):
                    info[key] = int(value.split()[0])
    except OSError:
        pass
    return info


def own_peak_rss() -> dict:
    """This process's peak RSS (MiB): VmHWM, which starts afresh at exec (``ru_maxrss`` does not: in a child
    started from a large parent it reports the parent's size)."""
    return {"peak_rss_mib": round(_status(os.getpid())["VmHWM"] / 1024, 1)}


# --- the figure record ----------------------------------------------------------------------------------------
def figure(ratio: float, goal: str, baseline: dict, measured: dict, **notes) -> dict:
    """One entry of results.json: the ratio, its goal (``>= x`` or ``<= x``), whether it is met, and the
    values behind it."""
    op, limit = goal.split()
    met = ratio >= float(limit) if op == ">=" else ratio <= float(limit)
    return {"ratio": round(float(ratio), 3), "goal": goal, "met": bool(met), "baseline": baseline,
            "measured": measured, **notes}  # fmt: skip


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "export":
        _export_main(sys.argv[2:])
    else:
        raise SystemExit("usage: python -m bench.common export (weights da3|nvds | da3 CONTRACT SIZE | nvds WxH MODES)")
