# Configuration, library discovery and the small named functions the rules use.
import json
import sys
from pathlib import Path

from snakemake.exceptions import WorkflowError

from stereo3d.config import load_schema, validate_config
from stereo3d.errors import StereoError
from stereo3d.export.names import DA3_STEM, da3_onnx_name, da3_weights_folder
from stereo3d.keys import LAYOUT_TAGS, keyed
from stereo3d.library import ID_PATTERN, discover, video_id
from stereo3d.samples import DEMO_CLIPS
from stereo3d.sheet import per_video_settings

SCHEMAS = Path(workflow.basedir) / "workflow/schemas"
CONFIG_SCHEMA = load_schema(SCHEMAS / "config.schema.yaml")


def _validated_config():
    checked, warnings = validate_config(config, CONFIG_SCHEMA)
    for line in warnings:
        print(f"warning: {line}", file=sys.stderr)
    return checked


try:
    _checked = _validated_config()
except StereoError as exc:
    raise WorkflowError(str(exc)) from None
config.clear()
config.update(_checked)

MODELS = config["paths"]["models"]
WEIGHTS = config["paths"]["weights"]
WORK = config["paths"]["work"]
RESULTS = config["paths"]["results"]
LOGS = config["paths"]["logs"]
BENCH = config["paths"]["benchmarks"]
DEMO = config["demo"]


def _library():
    """id → source path. The demo library is known by name before it is generated."""
    folder = Path(config["library"]["folder"])
    if DEMO:
        return {video_id(name): folder / name for name in DEMO_CLIPS}
    return discover(
        folder, config["library"]["extensions"], config["library"]["recursive"]
    )


def _per_video():
    """(id → that video's da3/stabilise/near/render/encode sections, id → path to convert)."""
    return per_video_settings(
        config,
        CONFIG_SCHEMA,
        load_schema(SCHEMAS / "sheet.schema.yaml"),
        config["library"]["sheet"],
        _library(),
        config["library"]["folder"],
    )


try:
    VIDEO_SETTINGS, VIDEOS = _per_video()
except StereoError as exc:
    raise WorkflowError(str(exc)) from None


wildcard_constraints:
    video=ID_PATTERN,
    stem=DA3_STEM,
    dkey=r"da3_(small|base)_[0-9]+_(float|u8)_(letterbox|resize)",
    nkey=r"[a-z0-9]+-[0-9a-f]{8}",
    tier=r"[0-9]+x[0-9]+",
    seg=r"[0-9]{8}-[0-9]{8}",
    rkey=r"[a-z0-9_]+-[0-9a-f]{8}",
    tag="|".join(LAYOUT_TAGS.values()),


# --- per-video settings: config.yaml with the video's sheet row laid over it ---------------
def da3_settings(video):
    return VIDEO_SETTINGS[video]["da3"]


NEAR_KEYS = {
    "frame": (),
    "ema": ("ema_alpha", "cut_threshold"),
    "nvds": ("nvds_tier",),
}


def near_settings(video):
    """Everything that changes the near maps' bytes (and nothing that doesn't, so a setting of
    another method changes no path)."""
    stabilise = VIDEO_SETTINGS[video]["stabilise"]
    method = stabilise["method"]
    settings = {**VIDEO_SETTINGS[video]["near"], "method": method}
    settings.update({key: stabilise[key] for key in NEAR_KEYS[method]})
    if method == "nvds":
        settings["nvds_architecture"] = config["export"]["nvds_architecture"]
    return settings


def render_settings(video):
    """Everything that changes the encoded stereo video's bytes."""
    return {**VIDEO_SETTINGS[video]["render"], **VIDEO_SETTINGS[video]["encode"]}


def depth_key(video):
    s = da3_settings(video)
    contract = "u8" if s["contract"] == "uint8" else "float"
    return f"da3_{s['variant']}_{s['size']}_{contract}_{s['fit']}"


def near_key(video):
    return keyed(near_settings(video)["method"], near_settings(video))


def render_key(video):
    return keyed(render_settings(video)["layout"], render_settings(video))


def _checked_settings(video, key, current_key, settings, what):
    if key != current_key:
        raise WorkflowError(
            f"{video}: {what} key {key} is not the configured one ({current_key}); "
            "request final outputs, not old intermediates"
        )
    return settings


# --- paths ------------------------------------------------------------------------------------
def get_source(wildcards):
    return str(VIDEOS[wildcards.video])


def segments(video):
    """The video's frame ranges as (start, count), known once its probe exists (a checkpoint)."""
    with open(checkpoints.probe.get(video=video).output.json) as fh:
        frames = json.load(fh)["video"]["frame_count"]
    size = config["segments"]["frames"] or frames
    return [(start, min(size, frames - start)) for start in range(0, frames, size)]


def segment_name(start, count):
    return f"{start:08d}-{start + count:08d}"


def depth_dir(video):
    return f"{WORK}/{video}/depth/{depth_key(video)}"


def near_dir(video):
    return f"{WORK}/{video}/near/{depth_key(video)}/{near_key(video)}"


def render_dir(video):
    return f"{WORK}/{video}/render/{depth_key(video)}/{near_key(video)}/{render_key(video)}"


def final_path(video):
    tag = LAYOUT_TAGS[render_settings(video)["layout"]]
    return f"{RESULTS}/{video}/{video}{tag}.mp4"


def get_final_outputs():
    return [final_path(video) for video in sorted(VIDEOS)]


def get_render_segments(wildcards):
    return [
        f"{render_dir(wildcards.video)}/{segment_name(*s)}.mkv"
        for s in segments(wildcards.video)
    ]


def get_segment_starts(wildcards):
    return [start for start, _ in segments(wildcards.video)]


def get_plan_depths(wildcards):
    """Every depth segment of the video, in order (the EMA plan spans the whole video)."""
    folder = f"{WORK}/{wildcards.video}/depth/{wildcards.dkey}"
    return [f"{folder}/{segment_name(*s)}.maps" for s in segments(wildcards.video)]


def get_near_plan(wildcards):
    if near_settings(wildcards.video)["method"] != "ema":
        return []
    return f"{WORK}/{wildcards.video}/near/{wildcards.dkey}/{wildcards.nkey}/plan.npz"


def get_previous_depth(wildcards):
    """NVDS only: the depth segment before this one (its last raw frames open the window)."""
    start = int(wildcards.seg.split("-")[0])
    if near_settings(wildcards.video)["method"] != "nvds" or start == 0:
        return []
    previous = next(s for s in segments(wildcards.video) if s[0] + s[1] == start)
    return f"{WORK}/{wildcards.video}/depth/{wildcards.dkey}/{segment_name(*previous)}.maps"


# --- input and param functions of the rules ---------------------------------------------------
def get_near_params(wildcards):
    settings = near_settings(wildcards.video)
    return _checked_settings(
        wildcards.video, wildcards.nkey, near_key(wildcards.video), settings, "near-map"
    )


def get_render_params(wildcards):
    settings = render_settings(wildcards.video)
    return _checked_settings(
        wildcards.video, wildcards.rkey, render_key(wildcards.video), settings, "render"
    )


def get_da3_export_weights(wildcards):
    return da3_weights(parse_da3_stem(wildcards.stem)[0])


def parse_da3_stem(stem):
    from stereo3d.export.names import parse_da3_onnx_name

    return parse_da3_onnx_name(stem)


def get_da3_variant(wildcards):
    return parse_da3_stem(wildcards.stem)[0]


def get_da3_size(wildcards):
    return parse_da3_stem(wildcards.stem)[1]


def get_da3_contract(wildcards):
    return parse_da3_stem(wildcards.stem)[2]


def get_tier_width(wildcards):
    return int(wildcards.tier.split("x")[0])


def get_tier_height(wildcards):
    return int(wildcards.tier.split("x")[1])


def get_demo_outputs(wildcards):
    if not DEMO:
        raise WorkflowError(
            "the demo target needs the demo configuration: --configfile demo/config.yaml"
        )
    return get_final_outputs()


# --- quality control for the report (rules in report.smk) ----------------------------------------
def get_qc_depth(wildcards):
    """The video's raw depth stores, one per segment, in frame order."""
    folder = depth_dir(wildcards.video)
    return [f"{folder}/{segment_name(*s)}.maps" for s in segments(wildcards.video)]


def get_qc_near(wildcards):
    """The video's near-map stores, one per segment, in frame order."""
    folder = near_dir(wildcards.video)
    return [f"{folder}/{segment_name(*s)}.maps" for s in segments(wildcards.video)]


def get_qc_near_settings(wildcards):
    return near_settings(wildcards.video)


def get_qc_render_settings(wildcards):
    return render_settings(wildcards.video)


def get_qc_validations(wildcards):
    """Validation reports of every export the library's videos use."""
    models = {
        da3_model(s["variant"], s["size"], s["contract"])
        for s in map(da3_settings, VIDEOS)
    }
    for video in filter(uses_nvds, VIDEOS):
        models.update(
            nvds_models(
                near_settings(video)["nvds_tier"], config["stabilise"]["nvds_graphs"]
            )
        )
    return [f"{model}.validation.json" for model in sorted(models)]


def get_qc_stats(wildcards):
    return [f"{WORK}/{video}/qc/stats.json" for video in sorted(VIDEOS)]


def get_report_outputs():
    """What `snakemake --report` shows (built by `all` unless report.qc is false)."""
    if not config["report"]["qc"] or not VIDEOS:
        return []
    figures = ("contact_sheet.png", "flicker.png", "parallax.png")
    per_video = [f"{WORK}/{v}/qc/{name}" for v in sorted(VIDEOS) for name in figures]
    library = [
        f"{WORK}/qc/exports.html",
        f"{WORK}/qc/videos.html",
        f"{WORK}/qc/benchmarks.html",
    ]
    return per_video + library


# --- models -----------------------------------------------------------------------------------
def da3_weights(variant):
    return f"{WEIGHTS}/DA3/{da3_weights_folder(variant)}/model.safetensors"


def da3_model(variant, size, contract):
    return f"{MODELS}/DA3/{da3_onnx_name(variant, int(size), contract)}"


def get_da3_model(wildcards):
    contract = "uint8" if wildcards.contract == "u8" else "float"
    return da3_model(wildcards.variant, wildcards.size, contract)


def nvds_weights():
    return f"{WEIGHTS}/NVDS/NVDS_Stabilizer.pth"


def nvds_models(tier, graphs):
    if graphs == "split":
        return [
            f"{MODELS}/NVDS/NVDS_Backbone_{tier}.onnx",
            f"{MODELS}/NVDS/NVDS_Head_{tier}.onnx",
        ]
    return [f"{MODELS}/NVDS/NVDS_Stabilizer_{tier}.onnx"]


def uses_nvds(video):
    return near_settings(video)["method"] == "nvds"


def get_near_models(wildcards):
    if not uses_nvds(wildcards.video):
        return []
    return nvds_models(
        near_settings(wildcards.video)["nvds_tier"], config["stabilise"]["nvds_graphs"]
    )


def get_export_outputs():
    wanted = {
        (s["variant"], s["size"], s["contract"]) for s in map(da3_settings, VIDEOS)
    }
    wanted |= {
        (e["variant"], e["size"], e["contract"]) for e in config["export"]["da3_extra"]
    }
    if not VIDEOS and not wanted:
        wanted.add(
            (config["da3"]["variant"], config["da3"]["size"], config["da3"]["contract"])
        )
    return [da3_model(*w) for w in sorted(wanted)]


def _check_weights():
    """The user's weights must be there and whole: say so before any job runs (a header check,
    cheap; the export still loads every tensor strictly)."""
    from stereo3d.export.da3 import check_weights_header

    variants = {s["variant"] for s in map(da3_settings, VIDEOS)}
    variants |= {e["variant"] for e in config["export"]["da3_extra"]}
    for variant in sorted(variants):
        path = Path(da3_weights(variant))
        if DEMO and not path.is_file():
            continue  # the demo makes smoke weights
        if not path.is_file():
            raise WorkflowError(
                f"bad config: {path}: DA3 {variant} weights not found; place model.safetensors there "
                "(see README: Converting your library) or run the demo with --configfile=demo/config.yaml"
            )
        try:
            check_weights_header(path, variant)
        except StereoError as exc:
            raise WorkflowError(str(exc)) from None
    if not DEMO and any(map(uses_nvds, VIDEOS)) and not Path(nvds_weights()).is_file():
        raise WorkflowError(
            f"bad config: {nvds_weights()}: NVDS weights not found (stabilise.method is nvds); place "
            "NVDS_Stabilizer.pth there or choose stabilise.method: ema"
        )


_check_weights()
