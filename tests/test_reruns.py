"""Exact reruns: every setting of the config schema, changed alone on a converted library, schedules exactly
the stages that read it, and speed-only settings schedule nothing. The table below is checked against the
schema, so a new key cannot be added without saying what it reruns."""

from __future__ import annotations

import shutil
from dataclasses import fields
from pathlib import Path

import harness
import numpy as np
import pytest
from harness import NVDS_TIER, exported_workdir, planned_jobs, planned_jobs_each, snakemake, write_config

from stereo3d.demo.samples import make_clip
from stereo3d.stereo.warp import StereoSettings
from stereo3d.workflow.config import load_schema

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = load_schema(ROOT / "workflow/schemas/config.schema.yaml")

# What a change reruns, from the first stage it touches (one video, QC report on).
QC = {"qc_video", "qc_library"}
ENCODE = {"render", "join", "qc_library"}  # the result changes; the QC figures do not
RENDER = ENCODE | {"qc_video"}
PLAN = {"convergence_plan"}  # render.convergence auto (the default): the screen plane, planned from the near maps
NEAR = RENDER | PLAN | {"near_maps", "near_plan"}
DEPTH = NEAR | {"depth"}
EXPORT = DEPTH | {"export_da3", "qc_exports"}
NOTHING: set[str] = set()
NOT_A_STAGE_SETTING = None  # where things are or which videos: not a setting of any stage's bytes

# key: (new value, rules scheduled). The library's video is stabilised by the EMA.
EMA_LIBRARY = {
    "library.folder": NOT_A_STAGE_SETTING,
    "library.extensions": NOT_A_STAGE_SETTING,
    "library.recursive": NOT_A_STAGE_SETTING,
    "library.sheet": NOT_A_STAGE_SETTING,  # its rows: tests/test_segments.py, tests/test_sheet.py
    "library.sheet_only": NOT_A_STAGE_SETTING,
    "paths.weights": NOT_A_STAGE_SETTING,
    "paths.models": NOT_A_STAGE_SETTING,
    "paths.work": NOT_A_STAGE_SETTING,
    "paths.results": NOT_A_STAGE_SETTING,
    "paths.logs": NOT_A_STAGE_SETTING,
    "paths.benchmarks": NOT_A_STAGE_SETTING,
    "demo": NOT_A_STAGE_SETTING,
    "segments.frames": (0, DEPTH),  # new frame ranges
    "segments.keep_encoded": (True, NOTHING),  # what is kept from now on, not what is made
    "da3.variant": ("base", EXPORT),
    "da3.size": (112, EXPORT),
    "da3.contract": ("float", EXPORT),
    # the square export is the session's 1:1 tier: no new export, but the table of exports in use changes
    "da3.fit": ("resize", DEPTH | {"qc_exports"}),
    "da3.aspect_tiers": (["2:1", "1:1"], EXPORT),  # the 16:9 clip now takes 2:1 (140x70), a new export
    "da3.batch": (3, NOTHING),  # speed only
    "export.da3_opset": (17, EXPORT),
    "export.da3_exporter": ("dynamo", EXPORT),  # the tests' exports are the legacy exporter's (tests/harness.py)
    "export.fail_rel_mean_err": (1.0e-2, NOTHING),  # a check, not a setting of the bytes
    "export.da3_extra": ([{"variant": "small", "size": 280, "contract": "uint8"}], NOTHING),  # `exports` only
    "export.nvds_opset": (18, NOTHING),  # NVDS is not used by this library
    "export.nvds_fail_max_abs_err": (1.0e-2, NOTHING),
    "export.nvds_tiers": (["256x128"], NOTHING),
    "export.nvds_modes": (["split"], NOTHING),
    "export.nvds_architecture": ("tiny", NOTHING),
    "near.low_pct": (5.0, NEAR),
    "near.high_pct": (95.0, NEAR),
    "stabilise.method": ("frame", NEAR - {"near_plan"}),  # frame needs no plan
    "stabilise.ema_alpha": (0.3, NEAR),
    "stabilise.cut_threshold": (0.5, NEAR),
    "stabilise.nvds_tier": ("256x128", NOTHING),  # a setting of another method
    "stabilise.nvds_graphs": ("monolith", NOTHING),
    "render.layout": ("half_sbs", ENCODE),
    "render.divergence_pct": (3.0, RENDER | PLAN),  # the plan keeps the front limit at this divergence
    "render.convergence": (0.5, RENDER),  # a number needs no plan
    "render.front_limit_pct": (2.0, RENDER | PLAN),
    "render.edge_dilate_px": (3, RENDER),
    "render.ipd_offset_pct": (1.0, RENDER),
    "render.border_taper_pct": (5.0, RENDER),
    "render.original_eye": ("left", RENDER),
    "render.floating_window": ("off", RENDER),  # the QC figures show the violations left after it
    "render.bars": ("crop", NOTHING),  # the clip has no bars (tests/test_bars_workflow.py: a clip with bars)
    "render.vr180_fov_deg": (100, NOTHING),  # an option of another layout
    "render.vr180_eye_px": (512, NOTHING),
    "encode.codec": ("libx265", ENCODE),
    "encode.crf": (23, ENCODE),
    "encode.preset": ("fast", ENCODE),
    "encode.pix_fmt": ("yuv444p", ENCODE),
    "encode.deep_codec": ("same", ENCODE),
    "encode.stereo_signal": ("sei", ENCODE),
    # The final mux; the render before it too, as the encoded video is not kept once muxed (temp).
    "encode.container": ("mkv", ENCODE),
    "encode.piece_frames": (16, ENCODE),
    # The clip's one subtitle track: drawn into the views, its cues planned in depth first; kept soft or not, a mux.
    "subtitles.burn": ("auto", ENCODE | {"subtitle_plan"}),  # (the QC figures are of the depth, not the cues)
    "subtitles.margin_pct": (1.0, NOTHING),  # a setting of burnt subtitles alone
    "subtitles.keep": (False, ENCODE),  # the final mux, and the render before it (not kept once muxed)
    "subtitles.sidecar": (True, {"subtitle_sidecar"}),  # the clip's text track beside the result: a new file
    "runtime.providers": (["cuda", "cpu"], NOTHING),  # speed only, like every runtime key but precision
    "runtime.precision": ("fast", DEPTH),  # other numbers: the depth key says _fast
    "runtime.threads": (2, NOTHING),
    "runtime.gpu_mem_limit_mb": (1024, NOTHING),
    "runtime.gpus": ([0, 1], NOTHING),
    "runtime.gpu_jobs_per_device": (2, NOTHING),
    "runtime.gpu_lock_dir": ("/tmp/elsewhere", NOTHING),
    "runtime.trt_cache_dir": ("/tmp/engines", NOTHING),
    "runtime.render_device": ("cpu", NOTHING),
    "report.qc": (False, NOTHING),
    "report.comfort_limit_pct": (5.0, QC),
    "report.contact_sheet_rows": (2, QC),
    "report.preview_width_px": (160, QC),
    # The preview is not part of the default run (tests/test_preview.py: what its own settings rerun).
    "preview.clips": (2, NOTHING),
    "preview.seconds": (1.0, NOTHING),
    "preview.grid.divergence_pct": ([], NOTHING),
    "preview.grid.convergence": ([1.0], NOTHING),
}


def another_value(dotted: str):
    """A valid value of ``dotted`` other than its schema default: the next of an enum, a step up a number's range."""
    node = SCHEMA
    for part in dotted.split("."):
        node = node["properties"][part]
    default = node["default"]
    if "enum" in node:
        return next(value for value in node["enum"] if value != default)
    if node.get("type") == "boolean":
        return not default
    step = 1 if node.get("type") == "integer" else (node.get("maximum", default + 1) - node.get("minimum", 0)) / 10
    return default + step if default + step <= node.get("maximum", default + step) else default - step


# A field of the renderer's settings (a render key) reruns the render and the QC figures drawn with it: one that has
# no row of its own above gets this one, so a new render setting needs no row here.
for _field in fields(StereoSettings):
    if f"render.{_field.name}" not in EMA_LIBRARY:
        EMA_LIBRARY[f"render.{_field.name}"] = (another_value(f"render.{_field.name}"), RENDER)

# The same library stabilised by NVDS (tiny architecture): its own settings rerun it, the EMA's do not.
NVDS_NEAR = RENDER | PLAN | {"near_maps", "qc_exports"}
NVDS_LIBRARY = {
    "stabilise.nvds_tier": ("64x64", NVDS_NEAR | {"export_nvds_split"}),
    "stabilise.nvds_graphs": ("monolith", NVDS_NEAR | {"export_nvds_monolith"}),
    "stabilise.ema_alpha": (0.3, NOTHING),
    "stabilise.cut_threshold": (0.5, NOTHING),
    "export.nvds_opset": (18, NVDS_NEAR | {"export_nvds_split"}),
    "export.nvds_fail_max_abs_err": (1.0e-2, NOTHING),
    "stabilise.method": ("ema", NEAR | {"qc_exports"}),  # the NVDS models leave the validation table
}
BASE = {"segments": {"frames": 16}, "export": {"nvds_architecture": "tiny"}}


def schema_keys(node: dict = SCHEMA, prefix: str = "") -> set[str]:
    keys = set()
    for name, sub in node["properties"].items():
        if sub.get("type") == "object" and "properties" in sub:
            keys |= schema_keys(sub, f"{prefix}{name}.")
        else:
            keys.add(f"{prefix}{name}")
    return keys


def overrides(dotted: str | None = None, value=None, *, more: dict | None = None, **base) -> dict:
    """The config overrides of the base library with ``dotted`` (``section.key`` or a section) set to ``value``, and
    each key of ``more`` to its value."""
    result = {section: dict(values) for section, values in {**BASE, **base}.items()}
    for key, other in (more or {}).items():
        result = overrides(key, other, **result)
    if dotted is not None:
        if "." in dotted:
            section, *inner, name = dotted.split(".")
            node = result.setdefault(section, {})
            for part in inner:  # a key of a nested section (preview.grid.convergence)
                node = node.setdefault(part, {})
            node[name] = value
        else:
            result[dotted] = value
    return result


def scheduled_each(workdir: Path, table: dict, **base) -> dict[str, set[str]]:
    """The rules a dry run would run (without the target rule) with each key of ``table`` changed alone, each its own
    dry run (harness.planned_jobs_each); except the keys expected to rerun nothing, which share one dry run with all
    of them changed together: a key among them that reran anything would show in it (and fail all of their tests,
    naming what it reran)."""
    quiet = {key: value for key, (value, expected) in table.items() if expected == NOTHING}
    changed = {key: overrides(key, value, **base) for key, (value, _) in table.items() if key not in quiet}
    changed[TOGETHER] = overrides(more=quiet, **base)
    plans = {key: set(jobs) for key, jobs in planned_jobs_each(workdir, changed).items()}
    return {key: plans[TOGETHER if key in quiet else key] for key in table}


TOGETHER = "(every key that reruns nothing)"


def library_workdir(tmp_path_factory, name: str, nvds: bool = False) -> Path:
    """A work folder with the session's DA3 export, and Snakemake's records of how it was made (the export ran
    in the session's cache folder), so that a change of an export setting is seen as one."""
    workdir = exported_workdir(tmp_path_factory, name, nvds=nvds)
    records = harness._cache["cache"] / ".snakemake" / "metadata"
    shutil.copytree(records, workdir / ".snakemake" / "metadata", dirs_exist_ok=True)
    return workdir


def test_the_table_covers_every_schema_key():
    assert set(EMA_LIBRARY) == schema_keys()
    assert set(NVDS_LIBRARY) <= schema_keys()


@pytest.fixture(scope="module")
def ema_library(tmp_path_factory):
    from safetensors.numpy import save_file

    from stereo3d.models.da3.checkpoint import HUB_PREFIX, WIDTH_KEY

    workdir = library_workdir(tmp_path_factory, "reruns-ema")
    make_clip(workdir / "videos/clip.mp4", width=64, height=36, frames=20, fps="10", audio=True, subtitles=True)
    # A dry run reads only the header of the Base weights: one tensor of Base's ViT width is enough.
    (workdir / "weights/DA3/Base").mkdir(parents=True)
    base = {HUB_PREFIX + WIDTH_KEY: np.zeros((768, 3, 14, 14), np.float16)}
    save_file(base, str(workdir / "weights/DA3/Base/model.safetensors"))
    write_config(workdir, **overrides())
    snakemake(workdir)
    assert planned_jobs(workdir) == {}
    return workdir


@pytest.fixture(scope="module")
def ema_plans(ema_library):
    return scheduled_each(ema_library, {k: v for k, v in EMA_LIBRARY.items() if v is not NOT_A_STAGE_SETTING})


@pytest.mark.parametrize("key", sorted(k for k, v in EMA_LIBRARY.items() if v is not NOT_A_STAGE_SETTING))
def test_a_setting_reruns_exactly_the_stages_that_read_it(ema_plans, key):
    assert ema_plans[key] == EMA_LIBRARY[key][1]


NVDS_STABILISE = {"method": "nvds", "nvds_tier": NVDS_TIER}


@pytest.fixture(scope="module")
def nvds_plans(tmp_path_factory):
    workdir = library_workdir(tmp_path_factory, "reruns-nvds", nvds=True)
    make_clip(workdir / "videos/clip.mp4", width=64, height=36, frames=20, fps="10")
    write_config(workdir, **overrides(stabilise=NVDS_STABILISE))
    snakemake(workdir)
    assert planned_jobs(workdir) == {}
    return scheduled_each(workdir, NVDS_LIBRARY, stabilise=NVDS_STABILISE)


@pytest.mark.parametrize("key", sorted(NVDS_LIBRARY))
def test_nvds_settings_rerun_an_nvds_library_and_ema_settings_do_not(nvds_plans, key):
    assert nvds_plans[key] == NVDS_LIBRARY[key][1]
