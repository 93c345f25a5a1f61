"""Every path the workflow reads or writes, as a template written once.

The rules declare these templates (Snakemake fills the ``{wildcards}``); the input functions fill the same
templates with :func:`fill`. Roots come from the config's ``paths`` section.
"""

from __future__ import annotations

from stereo3d.models.names import NVDS_WEIGHTS, nvds_onnx_name


class Paths:
    def __init__(self, roots: dict):
        self.models, self.weights = roots["models"], roots["weights"]
        self.work, self.results = roots["work"], roots["results"]
        self.logs, self.benchmarks = roots["logs"], roots["benchmarks"]
        work = self.work
        # Per video; {dkey}, {nkey}, {rkey} are the cache keys of stereo3d.workflow.keys, {seg} a frame range.
        self.probe = f"{work}/{{video}}/probe.json"
        self.probe_frames = f"{work}/{{video}}/frames.npz"  # every frame's time (stereo3d.stages.probe)
        self.depth = f"{work}/{{video}}/depth/{{dkey}}/{{seg}}.zarr"  # map stores: Zarr v3 folders
        self.near_plan = f"{work}/{{video}}/near/{{dkey}}/{{nkey}}/plan.npz"
        self.near_maps = f"{work}/{{video}}/near/{{dkey}}/{{nkey}}/{{seg}}.zarr"
        # render.convergence auto: each frame's screen plane ({ckey}: the render settings it is planned with)
        self.convergence_plan = f"{work}/{{video}}/near/{{dkey}}/{{nkey}}/convergence-{{ckey}}.npz"
        self.render = f"{work}/{{video}}/render/{{dkey}}/{{nkey}}/{{rkey}}/{{seg}}.mkv"
        # subtitles.burn: every cue of the burnt track, its picture, frames and parallax (stereo3d.stereo.subtitles)
        self.subtitle_plan = f"{work}/{{video}}/render/{{dkey}}/{{nkey}}/{{rkey}}/subtitles.npz"
        self.result = f"{self.results}/{{video}}/{{video}}{{tag}}.{{ext}}"
        # subtitles.sidecar: a text track beside the result ({rank}: among the subtitle tracks, from 0)
        self.sidecar = f"{self.results}/{{video}}/{{video}}{{tag}}.{{rank}}.{{language}}.ass"
        # The preview (target `preview`): per clip ({seg}: the clip's frame range), and the settings grid.
        preview = f"{work}/{{video}}/preview"
        self.preview_depth = f"{preview}/depth/{{dkey}}/{{seg}}.zarr"
        self.preview_lead = f"{preview}/depth/{{dkey}}/{{seg}}.lead.zarr"  # the frames before, for NVDS
        self.preview_near = f"{preview}/near/{{dkey}}/{{nkey}}/{{seg}}.zarr"
        self.preview_clip = f"{preview}/clips/{{dkey}}/{{nkey}}/{{rkey}}/{{seg}}.mp4"
        self.preview_page = f"{preview}/clips/{{dkey}}/{{nkey}}/{{rkey}}/clips.html"  # the clips, for the report
        self.preview_grid = f"{preview}/grid/{{dkey}}/{{nkey}}/grid.png"
        self.qc_video = f"{work}/{{video}}/qc/{{name}}"
        self.qc_library = f"{work}/qc/{{name}}"
        # Models and weights.
        self.da3_onnx = f"{self.models}/DA3/{{stem}}.onnx"
        self.da3_weights = f"{self.weights}/DA3/{{folder}}/model.safetensors"
        self.nvds_weights = f"{self.weights}/{NVDS_WEIGHTS}"

    def nvds_onnx(self, role: str) -> str:
        """Template of one NVDS graph (backbone, head or monolith) at ``{tier}``."""
        return f"{self.models}/NVDS/{nvds_onnx_name(role, '{tier}')}"

    def model(self, relative: str) -> str:
        """A model file named relative to the models folder (as stabilisers name theirs)."""
        return f"{self.models}/{relative}"

    def log(self, rule: str, job: str) -> str:
        return f"{self.logs}/{rule}/{job}.log"

    def benchmark(self, rule: str, job: str) -> str:
        return f"{self.benchmarks}/{rule}/{job}.tsv"


def fill(template: str, **wildcards) -> str:
    """A template with its wildcards filled in."""
    return template.format(**wildcards)


def frame_ranges(frame_count: int, segment_frames: int) -> list[tuple[int, int]]:
    """A video's segments as (start, count): ``segment_frames`` each (0 = the whole video)."""
    size = segment_frames or frame_count
    return [(start, min(size, frame_count - start)) for start in range(0, frame_count, size)]


def segment_name(start: int, count: int) -> str:
    """The ``{seg}`` of a frame range."""
    return f"{start:08d}-{start + count:08d}"
