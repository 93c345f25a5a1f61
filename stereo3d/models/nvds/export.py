"""NVDS checkpoint -> fixed-tier ONNX graphs (split backbone + head, and/or the monolith), each validated.

Exporter choice: ``torch.onnx.export(dynamo=True)`` on the static-attention model. With fixed input
shapes every size is a Python int at trace time, so the graph has no Shape/Range/ConstantOfShape chains
and, thanks to the static rewrite, no ScatterND (spec section 8). The TorchScript exporter leaves hundreds
of Shape ops even after onnxscript's optimizer. The dynamo exporter emits opset 18; for a requested opset
below that, the only two affected ops (Pad, Resize) are rewritten to their opset-13 forms, which mean the
same thing, and the checker and ONNX Runtime then validate the result. Each exact GELU is written in the
operand order that ONNX Runtime fuses into one kernel (``graph.gelu_in_fusable_order``).

Files (seed names): ``NVDS_Backbone_{w}x{h}.onnx``, ``NVDS_Head_{w}x{h}.onnx`` (split) and
``NVDS_Stabilizer_{w}x{h}.onnx`` (monolith), each with ``<name>.validation.json`` beside it. Exports are
byte-identical when rerun with the same inputs: node metadata (stack traces with absolute paths) is
dropped and nothing time- or path-dependent is stored in the file.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import logging
import sys
import time
import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from stereo3d.errors import BadConfig, ExportMismatch
from stereo3d.io.atomic import atomic_output
from stereo3d.models.names import NVDS_GRAPHS, nvds_onnx_name
from stereo3d.models.nvds.checkpoint import is_smoke, load_into, read_state_dict
from stereo3d.models.nvds.graph import FORBIDDEN_OPS, gelu_in_fusable_order, op_census, optimize, to_opset_17
from stereo3d.models.nvds.model import NVDS, WINDOW_FRAMES, NvdsBackbone, NvdsConfig, NvdsHead
from stereo3d.models.validation import check_error, error_figures, set_metadata, sha256_file, write_validation

log = logging.getLogger(__name__)

MODES = NVDS_GRAPHS
BACKBONE_INPUT = "frame_rgbd"
FEATURE_NAMES = ("feat0", "feat1", "feat2", "feat3")
HEAD_RGB_INPUT = "last_rgb"
MONOLITH_INPUT = "window_rgbd"
OUTPUT = "stabilized_depth"
OUTPUT_SEMANTICS = "stabilised near map, larger=nearer, do not invert or renormalise"
INPUT_CONTRACT = (
    "RGB /255 ImageNet mean/std + near in [0,1] (larger=nearer), CHW float32; window frames "
    "oldest to newest, target last; frames 0..2 repeat the current frame 4 times"
)
SPLIT_MAX_ABS_ERR = 1e-5  # split vs monolith: the backbone has no cross-frame op, so they must agree
DYNAMO_MIN_OPSET = 18


def export_nvds(
    checkpoint: str | Path,
    out_dir: str | Path,
    width: int,
    height: int,
    modes: Sequence[str] = MODES,
    opset: int = 17,
    device: str = "cpu",
    dynamic_batch: bool = False,
    ort_check: bool = True,
    fail_max_abs_err: float | None = None,
    config: NvdsConfig | None = None,
    monolith_path: str | Path | None = None,
    source_root: str | Path | None = None,
) -> list[Path]:
    """Export NVDS at one tier; returns the ONNX paths written (each has its validation JSON beside it).

    ``fail_max_abs_err``: raise ExportMismatch (and keep no file) when ONNX vs PyTorch, or split vs
    monolith, differ by more than this. ``source_root``: an upstream NVDS tree whose ``full_model.NVDS``
    serves as the PyTorch reference (the graph itself always comes from our static model).
    """
    check_tier(width, height)
    modes = tuple(dict.fromkeys(modes))
    if not modes or any(m not in MODES for m in modes):
        raise BadConfig(None, f"NVDS export modes must be among {MODES}, got {modes}")
    if dynamic_batch and "monolith" not in modes:
        raise BadConfig(None, "--dynamic-batch applies to the monolith only (the split graphs have fixed batches)")
    if opset < 17:
        raise BadConfig(None, f"NVDS needs opset 17 or newer (LayerNormalization), got {opset}")
    config = config or NvdsConfig()
    checkpoint, out_dir = Path(checkpoint), Path(out_dir)
    tier = f"{width}x{height}"
    state = read_state_dict(checkpoint)
    smoke = is_smoke(state)
    if smoke:
        log.warning("%s: SMOKE weights: the exported NVDS runs but its output is meaningless", checkpoint)
    facts = {
        "weights_sha256": sha256_file(checkpoint),
        "smoke": smoke,
        "tier": tier,
        "width": width,
        "height": height,
        "opset": opset,
        "device": device,
        "config": config.as_dict(),
    }

    model = NVDS(config, attention="static").prepare(height, width)
    load_into(model, state, checkpoint)
    model = model.eval().to(device)
    reference = _reference_model(config, state, checkpoint, source_root).to(device)
    window = torch.from_numpy(validation_window(width, height)).to(device)
    with torch.no_grad():
        ref_out = reference(window)
        frame_feats = [model.features(window[:, t]) for t in range(WINDOW_FRAMES)]
        stacked = tuple(torch.cat([f[s] for f in frame_feats]) for s in range(len(FEATURE_NAMES)))
        split_torch = model.head(stacked, window[:, -1, 0:3])
    facts["pytorch_split_vs_monolith"] = error_figures(_np(ref_out), _np(split_torch))

    names = onnx_names(width, height)
    paths = {
        "backbone": out_dir / names["backbone"],
        "head": out_dir / names["head"],
        "monolith": Path(monolith_path) if monolith_path else out_dir / names["monolith"],
    }
    graphs = {}
    if "split" in modes:
        graphs["backbone"] = _export_graph(
            NvdsBackbone(model), (window[:, -1].contiguous(),), [BACKBONE_INPUT], list(FEATURE_NAMES), opset, None
        )
        graphs["head"] = _export_graph(
            NvdsHead(model),
            stacked + (window[:, -1, 0:3].contiguous(),),
            [*FEATURE_NAMES, HEAD_RGB_INPUT],
            [OUTPUT],
            opset,
            None,
        )
    if "monolith" in modes:
        if dynamic_batch:
            # torch.export specialises size-1 dims, so the example batch must be 2 for the axis to stay symbolic
            dyn = {"window_rgbd": {0: torch.export.Dim("batch", min=1, max=64)}}
            example = torch.cat([window, window])
        else:
            dyn, example = None, window
        graphs["monolith"] = _export_graph(_Monolith(model), (example,), [MONOLITH_INPUT], [OUTPUT], opset, dyn)

    reports = {}
    with contextlib.ExitStack() as stack:
        tmp = {}
        for role, (proto, seconds) in graphs.items():
            census = op_census(proto)
            bad = sorted(op for op in census if op in FORBIDDEN_OPS)
            if bad and not (role == "monolith" and dynamic_batch):
                raise ExportMismatch(paths[role], f"graph contains dynamic ops {bad}; the static export is broken")
            set_metadata(proto, _metadata(role, facts, dynamic_batch and role == "monolith"))
            tmp[role] = stack.enter_context(atomic_output(paths[role]))
            _save(proto, tmp[role])
            reports[role] = {
                **facts,
                "mode": _MODE_NAMES[role],
                "file": paths[role].name,
                "file_bytes": tmp[role].stat().st_size,
                "export_seconds": round(seconds, 2),
                "op_census": dict(sorted(census.items())),
                "nodes": sum(census.values()),
                "dynamic_batch": bool(dynamic_batch and role == "monolith"),
                "reference": "upstream full_model.NVDS" if source_root else "stereo3d faithful NVDS",
            }
        if ort_check:
            _ort_validate(tmp, reports, window, ref_out, frame_feats, stacked, device)
        else:
            for report in reports.values():
                report["ort_check"] = "skipped"
        _enforce(reports, paths, fail_max_abs_err)
    for role, report in reports.items():
        write_validation(paths[role], report)
        log.info("%s: written (%.1f MB)", paths[role], report["file_bytes"] / 1e6)
    return [paths[role] for role in reports]


def check_tier(width: int, height: int) -> None:
    """The README's rule: both sides multiples of 32."""
    if width <= 0 or height <= 0 or width % 32 or height % 32:
        raise BadConfig(None, f"NVDS tier {width}x{height}: width and height must be positive multiples of 32")


def onnx_names(width: int, height: int) -> dict[str, str]:
    """The seed's file names per graph role."""
    tier = f"{width}x{height}"
    return {role: nvds_onnx_name(role, tier) for role in ("backbone", "head", "monolith")}


def validation_window(width: int, height: int, seed: int = 0) -> np.ndarray:
    """A seeded ``[1, 4, 4, H, W]`` window with realistic ranges: ImageNet-normalised RGB, near in [0, 1]."""
    rng = np.random.default_rng(seed)
    rgb = rng.uniform(0.0, 1.0, size=(1, WINDOW_FRAMES, 3, height, width))
    mean = np.array([0.485, 0.456, 0.406]).reshape(1, 1, 3, 1, 1)
    std = np.array([0.229, 0.224, 0.225]).reshape(1, 1, 3, 1, 1)
    near = rng.uniform(0.0, 1.0, size=(1, WINDOW_FRAMES, 1, height, width))
    return np.concatenate([(rgb - mean) / std, near], axis=2).astype(np.float32)


# ------------------------------------------------------------------------------------------------

_MODE_NAMES = {"backbone": "split-backbone", "head": "split-head", "monolith": "monolith"}


class _Monolith(torch.nn.Module):
    def __init__(self, model: NVDS):
        super().__init__()
        self.model = model

    def forward(self, window_rgbd):
        return self.model(window_rgbd)


def _export_graph(module, args, input_names, output_names, opset, dynamic_shapes):
    """A ModelProto of ``module`` at ``args``' shapes, at ``opset``; returns (proto, seconds)."""
    start = time.perf_counter()
    kwargs = {}
    if dynamic_shapes:
        kwargs["dynamic_shapes"] = dynamic_shapes
    with torch.no_grad(), _quiet_exporter():
        program = torch.onnx.export(
            module.eval(),
            args,
            dynamo=True,
            opset_version=max(opset, DYNAMO_MIN_OPSET),
            input_names=input_names,
            output_names=output_names,
            optimize=False,
            verbose=False,
            external_data=False,
            **kwargs,
        )
        proto = optimize(program.model)
    _strip_node_metadata(proto)
    gelu_in_fusable_order(proto)
    if opset < DYNAMO_MIN_OPSET:
        to_opset_17(proto)
    return proto, time.perf_counter() - start


@contextlib.contextmanager
def _quiet_exporter():
    # The exporter prints progress banners to stdout and warns about absent torchvision ops.
    noisy = [
        logging.getLogger(n)
        for n in ("torch.onnx", "torch.onnx._internal.exporter._registration", "onnxscript", "onnx_ir")
    ]
    levels = [lg.level for lg in noisy]
    for lg in noisy:
        lg.setLevel(logging.ERROR)
    try:
        # torch's own pytree code warns that its LeafSpec check is deprecated (torch internals, not ours: a
        # newcomer reads it as a fault of the export)
        with contextlib.redirect_stdout(sys.stderr), warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=r".*isinstance\(treespec, LeafSpec\)", category=FutureWarning)
            yield
    finally:
        for lg, level in zip(noisy, levels):
            lg.setLevel(level)


def _strip_node_metadata(proto) -> None:
    """Drop per-node stack traces and FX names: they hold absolute paths, which would break byte identity."""
    for node in proto.graph.node:
        del node.metadata_props[:]
        node.doc_string = ""
    proto.graph.doc_string = ""
    proto.doc_string = ""


def _save(proto, path: Path) -> None:
    import onnx

    size = proto.ByteSize()
    if size >= 2**31:
        raise ExportMismatch(path, f"graph is {size / 2**30:.2f} GiB, over the 2 GB protobuf limit")
    onnx.save_model(proto, str(path))


def _metadata(role: str, facts: dict, dynamic_batch: bool) -> dict:
    batch = "N" if dynamic_batch else "1"
    h, w = facts["height"], facts["width"]
    if role == "backbone":
        inputs, outputs = f"{BACKBONE_INPUT}[1,4,{h},{w}]", ",".join(FEATURE_NAMES)
    elif role == "head":
        inputs, outputs = ",".join(FEATURE_NAMES) + f"[4,C,h,w] {HEAD_RGB_INPUT}[1,3,{h},{w}]", f"{OUTPUT}[1,1,{h},{w}]"
    else:
        inputs, outputs = f"{MONOLITH_INPUT}[{batch},4,4,{h},{w}]", f"{OUTPUT}[{batch},1,{h},{w}]"
    return {
        "stereo3d.model": "nvds",
        "stereo3d.mode": _MODE_NAMES[role],
        "stereo3d.tier": facts["tier"],
        "stereo3d.tier_width": w,
        "stereo3d.tier_height": h,
        "stereo3d.inputs": inputs,
        "stereo3d.outputs": outputs,
        "stereo3d.input_contract": INPUT_CONTRACT,
        "stereo3d.output": "near",
        "stereo3d.output_semantics": OUTPUT_SEMANTICS,
        "stereo3d.weights_sha256": facts["weights_sha256"],
        "stereo3d.smoke": int(facts["smoke"]),
        "stereo3d.opset": facts["opset"],
        "stereo3d.dynamic_batch": int(dynamic_batch),
        "stereo3d.nvds_config": json.dumps(facts["config"], sort_keys=True, separators=(",", ":")),
    }


def _reference_model(config, state, checkpoint, source_root):
    """The PyTorch reference: our faithful model, or the upstream ``full_model.NVDS`` from ``source_root``."""
    if source_root is None:
        ref = NVDS(config, attention="faithful")
        load_into(ref, state, checkpoint)
        return ref.eval()
    root = Path(source_root)
    if not (root / "full_model.py").is_file():
        raise BadConfig(root, "no full_model.py in the NVDS source root")
    sys.path.insert(0, str(root))
    try:
        sys.modules.pop("full_model", None)
        upstream = importlib.import_module("full_model")
        ref = upstream.NVDS()
    except Exception as exc:  # any import or constructor failure of foreign code: one line for the user
        raise BadConfig(root, f"cannot build full_model.NVDS: {type(exc).__name__}: {exc}") from exc
    finally:
        sys.path.remove(str(root))
    load_into(ref, state, checkpoint)
    log.info("PyTorch reference: upstream NVDS from %s", root)
    return ref.eval()


def _ort_validate(tmp, reports, window, ref_out, frame_feats, stacked, device) -> None:
    """Run each graph in ONNX Runtime against the PyTorch figures; in split mode also the chained split."""
    from stereo3d.runtime.sessions import SessionOptions, open_session

    options = SessionOptions(providers=("cuda", "cpu") if device.startswith("cuda") else ("cpu",))
    window_np = _np(window)
    ref_np = _np(ref_out)
    outs = {}
    if "backbone" in tmp:
        bb = open_session(tmp["backbone"], options)
        head = open_session(tmp["head"], options)
        times, onnx_feats, worst = [], [], {}
        for t in range(WINDOW_FRAMES):
            start = time.perf_counter()
            got = bb.run(list(FEATURE_NAMES), {BACKBONE_INPUT: window_np[:, t]})
            times.append(time.perf_counter() - start)
            onnx_feats.append(got)
            for name, g, r in zip(FEATURE_NAMES, got, frame_feats[t]):
                fig = error_figures(_np(r), g)
                if name not in worst or fig["max_abs_err"] > worst[name]["max_abs_err"]:
                    worst[name] = fig
        reports["backbone"].update(
            onnx_vs_pytorch=max(worst.values(), key=lambda f: f["max_abs_err"]),
            per_output=worst,
            output_shapes={n: list(a.shape) for n, a in zip(FEATURE_NAMES, onnx_feats[-1])},
            providers=bb.get_providers(),
            ort_ms_per_run=round(1000 * float(np.median(times)), 2),
        )
        feeds = {name: np.concatenate([f[s] for f in onnx_feats]) for s, name in enumerate(FEATURE_NAMES)}
        feeds[HEAD_RGB_INPUT] = np.ascontiguousarray(window_np[:, -1, 0:3])
        start = time.perf_counter()
        split_out = head.run([OUTPUT], feeds)[0]
        head_ms = 1000 * (time.perf_counter() - start)
        torch_feeds = {name: _np(a) for name, a in zip(FEATURE_NAMES, stacked)}
        torch_feeds[HEAD_RGB_INPUT] = feeds[HEAD_RGB_INPUT]
        head_only = head.run([OUTPUT], torch_feeds)[0]
        reports["head"].update(
            onnx_vs_pytorch=error_figures(ref_np, head_only),
            split_onnx_vs_pytorch_monolith=error_figures(ref_np, split_out),
            output_shapes={OUTPUT: list(split_out.shape)},
            providers=head.get_providers(),
            ort_ms_per_run=round(head_ms, 2),
        )
        outs["split"] = split_out
    if "monolith" in tmp:
        mono = open_session(tmp["monolith"], options)
        start = time.perf_counter()
        mono_out = mono.run([OUTPUT], {MONOLITH_INPUT: window_np})[0]
        mono_ms = 1000 * (time.perf_counter() - start)
        reports["monolith"].update(
            onnx_vs_pytorch=error_figures(ref_np, mono_out),
            output_shapes={OUTPUT: list(mono_out.shape)},
            providers=mono.get_providers(),
            ort_ms_per_run=round(mono_ms, 2),
        )
        outs["monolith"] = mono_out
    if len(outs) == 2:
        figures = error_figures(outs["monolith"], outs["split"])
        for role in reports:
            reports[role]["split_vs_monolith_onnx"] = figures
    if "split" in outs:
        per_frame = reports["backbone"]["ort_ms_per_run"] + reports["head"]["ort_ms_per_run"]
        for role in ("backbone", "head"):
            reports[role]["split_ort_ms_per_frame"] = round(per_frame, 2)


def _enforce(reports, paths, fail_max_abs_err) -> None:
    for role, report in reports.items():
        for what in ("onnx_vs_pytorch", "split_onnx_vs_pytorch_monolith", "split_vs_monolith_onnx"):
            figures = report.get(what)
            if figures is None:
                continue
            check_error(paths[role], figures, None, what=what.replace("_", " "))
            if fail_max_abs_err is not None and figures["max_abs_err"] > fail_max_abs_err:
                raise ExportMismatch(
                    paths[role],
                    f"{what} max abs error {figures['max_abs_err']:.3g} exceeds the limit {fail_max_abs_err:g}",
                )
        split = report.get("split_vs_monolith_onnx")
        if split and split["max_abs_err"] > SPLIT_MAX_ABS_ERR:
            log.warning(
                "%s: split vs monolith max abs error %.3g is above %.0e",
                paths[role],
                split["max_abs_err"],
                SPLIT_MAX_ABS_ERR,
            )


def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().to("cpu", torch.float32).numpy()
