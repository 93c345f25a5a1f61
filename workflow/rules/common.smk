# Configuration, library discovery and the small named functions the rules use. The thinking lives in
# stereo3d.workflow (config, sheet, library, keys, paths, targets); this file wires it to Snakemake.
import json
import sys
from pathlib import Path

from snakemake.exceptions import WorkflowError

from stereo3d.demo.samples import DEMO_CLIPS, DEMO_FOLDER
from stereo3d.errors import StereoError
from stereo3d.models.names import DA3_STEM
from stereo3d.stages.probe import probe_failed
from stereo3d.stereo.layouts import LAYOUT_TAGS
from stereo3d.workflow import keys
from stereo3d.workflow.config import load_schema, validate_config
from stereo3d.workflow.library import ID_PATTERN, discover, video_id
from stereo3d.workflow.paths import fill, frame_ranges, segment_name
from stereo3d.workflow.preview import grid_still, preview_clips as place_clips
from stereo3d.workflow.sheet import per_video_settings
from stereo3d.workflow.targets import Targets
from stereo3d.workflow.videos import VideoShape

SCHEMAS = Path(workflow.basedir) / "workflow/schemas"
CONFIG_SCHEMA = load_schema(SCHEMAS / "config.schema.yaml")


def at_parse_time(step):
    """A bad config, sheet, library or weights file stops the run before any job, in one line."""
    try:
        return step()
    except StereoError as exc:
        raise WorkflowError(str(exc)) from None


def _validated_config():
    checked, warnings = validate_config(config, CONFIG_SCHEMA)
    for line in warnings:
        print(f"warning: {line}", file=sys.stderr)
    config.clear()
    config.update(checked)


# --- known once a video's probe (a checkpoint) has run ------------------------------------------
_PROBED = {}


def probed(video):
    """The video's probe result (read once per run)."""
    path = checkpoints.probe.get(video=video).output.json
    if path not in _PROBED:
        with open(path) as fh:
            _PROBED[path] = json.load(fh)
    return _PROBED[path]


def video_shape(video):
    """The video's display size and the picture inside its bars, from its probe (some keys depend on them)."""
    return VideoShape.of(probed(video))


def probe_on_disk(video):
    """The video's probe summary if its probe has run (no probe job is scheduled for it), else None."""
    path = Path(fill(P.probe, video=video))
    return json.loads(path.read_text()) if path.is_file() else None


def _targets():
    folder = Path(config["library"]["folder"])
    if config[
        "demo"
    ]:  # the demo library is known by name before it is generated, in its own folder
        if folder != Path(DEMO_FOLDER):
            print(
                f"warning: the demo makes its clips in {DEMO_FOLDER}; library.folder {folder} is left alone",
                file=sys.stderr,
            )
        folder = Path(DEMO_FOLDER)
        library = {video_id(name): folder / name for name in DEMO_CLIPS}
    else:
        lib = config["library"]
        library = discover(folder, lib["extensions"], lib["recursive"])
    sheet_schema = load_schema(SCHEMAS / "sheet.schema.yaml")
    sheet = config["library"]["sheet"]
    settings, videos = per_video_settings(
        config, CONFIG_SCHEMA, sheet_schema, sheet, library, folder
    )
    return Targets(config, settings, videos, shape_of=video_shape)


at_parse_time(_validated_config)
T = at_parse_time(_targets)
at_parse_time(T.check_weights)
if not config["demo"]:
    T.library.link_sources()
P = T.paths
DEMO = T.demo


wildcard_constraints:
    video=ID_PATTERN,
    stem=DA3_STEM,
    dkey=keys.DEPTH_KEY.pattern,
    nkey=keys.NEAR_KEY,
    tier=r"[0-9]+x[0-9]+",
    seg=r"[0-9]{8}-[0-9]{8}",
    rkey=keys.RENDER_KEY,
    ckey=keys.CONVERGENCE_KEY,
    tag="|".join(LAYOUT_TAGS.values()),
    ext="mp4|mkv",
    rank=r"[0-9]+",
    language=r"[a-z]{2,3}",


def converting():
    """The videos whose probe found them convertible: a failed one is a row of the report, not a blocker."""
    return [v for v in sorted(T.videos) if probe_failed(probed(v)) is None]


def failures():
    """Video → one-line reason, for every video that cannot be converted (this run's and remembered ones)."""
    return T.library.failures(probed)


def shape_on_disk(video):
    """The video's shape from a probe already on disk (no probe job is scheduled), else None."""
    summary = probe_on_disk(video)
    if summary is None or probe_failed(summary) is not None:
        return None
    return VideoShape.of(summary)


def summarise_failures():
    """One warning line per video that cannot be converted (run end: every probe that ran is on disk)."""
    found = T.library.failures(probe_on_disk)
    if found:
        print(
            f"warning: {len(found)} of {len(T.library.all_videos)} videos not converted:",
            file=sys.stderr,
        )
        for video, reason in found.items():
            print(f"  {video}: {reason}", file=sys.stderr)


def segments(video):
    """The video's frame ranges as (start, count)."""
    return frame_ranges(
        probed(video)["video"]["frame_count"], config["segments"]["frames"]
    )


def segment_paths(template, video, **keys):
    """``template`` filled in for each segment of the video, in frame order."""
    names = [segment_name(start, count) for start, count in segments(video)]
    return [fill(template, video=video, seg=name, **keys) for name in names]


def preview_clips(video):
    """The video's preview clips (stereo3d.workflow.preview), placed on its segment grid where it allows."""
    summary, chosen = probed(video)["video"], config["preview"]
    return place_clips(
        summary["frame_count"],
        summary["fps"],
        chosen["clips"],
        chosen["seconds"],
        config["segments"]["frames"],
    )


def preview_clip(wildcards):
    """The preview clip a job's ``{seg}`` names."""
    for clip in preview_clips(wildcards.video):
        if clip.name == wildcards.seg:
            return clip
    raise WorkflowError(
        f"{wildcards.video}: {wildcards.seg} is not a preview clip of the current preview settings"
    )
