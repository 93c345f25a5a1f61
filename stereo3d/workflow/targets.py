"""What the workflow builds for each video of the library, and where: the files of its stages under their cache
keys, the models it needs and its finished files. Plain Python, tested without Snakemake.

A video's settings and keys are ``VideoSettings``' (stereo3d.workflow.videos); the library's files, links and
failures ``Library``'s. What a checkpoint knows arrives one way: ``shape_of(video)``, the ``VideoShape`` its probe
says (common.smk reads the probe checkpoint; ``prune`` reads probes on disk), asked only where a key depends on it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from stereo3d.models.da3.tiers import tier_shapes
from stereo3d.models.names import da3_onnx_name, da3_weights_folder, nvds_onnx_names
from stereo3d.models.validation import validation_path
from stereo3d.stabilisers import NearSettings, Stabiliser
from stereo3d.stages.depth import DepthSettings
from stereo3d.stages.render import RenderSettings
from stereo3d.stereo.window import reach_frames
from stereo3d.workflow import keys
from stereo3d.workflow.keys import depth_key, near_key, render_key
from stereo3d.workflow.library import Library
from stereo3d.workflow.paths import Paths, fill, segment_name
from stereo3d.workflow.preflight import check_weights
from stereo3d.workflow.videos import VideoSettings, VideoShape

QC_FIGURES = ("contact_sheet.png", "flicker.png", "parallax.png", "convergence.png")
QC_TABLES = ("exports.html", "videos.html", "benchmarks.html")


class Targets:
    """``settings``: id → the video's config sections (config with its sheet row laid over); ``videos``: id →
    source path of the videos of the library; ``shape_of``: id → its ``VideoShape`` from its probe."""

    def __init__(self, config: dict, settings: dict[str, dict], videos: dict[str, Path],
                 shape_of: Callable[[str], VideoShape] | None = None):  # fmt: skip
        self.config = config
        self.paths = Paths(config["paths"])
        self.demo = bool(config["demo"])
        self.library = Library(videos, self.paths.work)
        self.settings = {video: VideoSettings(sections, config) for video, sections in settings.items()}
        self.shape_of = shape_of

    @property
    def videos(self) -> dict[str, Path]:
        """The videos to convert (without those that failed before)."""
        return self.library.videos

    def video(self, video: str) -> VideoSettings:
        return self.settings[video]

    def shape(self, video: str) -> VideoShape | None:
        """The video's shape from its probe where its keys depend on it, else None (no probe is waited for)."""
        if not self.settings[video].needs_shape:
            return None
        if self.shape_of is None:
            raise RuntimeError(f"{video}: its probe is needed for its keys and no probe reader is set")
        return self.shape_of(video)

    # --- per video, at its current settings ---------------------------------------------------------------------
    def depth_settings(self, video: str) -> DepthSettings:
        """The video's depth settings, built from its sections and (where its key depends on it) its probe."""
        return self.settings[video].depth(self.shape(video))

    def depth_key(self, video: str) -> str:
        return self.settings[video].depth_key(self.shape(video))

    def depth_params(self, wildcards) -> dict:
        """The depth rules' params: the video's ``DepthSettings``, for the job of the configured depth key."""
        settings = self.depth_settings(wildcards.video)
        return _current(wildcards, "dkey", depth_key(settings), settings.params())

    def near_settings(self, video: str) -> NearSettings:
        return self.settings[video].near()

    def near_key(self, video: str) -> str:
        return self.settings[video].near_key()

    def near_params(self, wildcards) -> dict:
        """The near-map rules' params: the video's ``NearSettings`` by their dotted config keys, for the job of the
        configured near key."""
        settings = self.near_settings(wildcards.video)
        return _current(wildcards, "nkey", near_key(settings), settings.params())

    def render_settings(self, video: str) -> RenderSettings:
        """The video's render settings, built from its sections (config.yaml with its sheet row over them): the
        render rules' params, its render key."""
        return self.settings[video].render(self.shape(video))

    def render_params(self, wildcards) -> dict:
        """The render rules' params: the video's ``RenderSettings`` by their dotted config keys, for the job of the
        configured render key (an old key's intermediates are never rebuilt under the current settings)."""
        settings = self.render_settings(wildcards.video)
        return _current(wildcards, "rkey", render_key(settings), settings.params())

    def render_key(self, video: str) -> str:
        return self.settings[video].render_key(self.shape(video))

    def stabiliser(self, video: str) -> Stabiliser:
        return self.settings[video].stabiliser

    def result(self, video: str) -> str:
        tag, ext = self.settings[video].result_name()
        return fill(self.paths.result, video=video, tag=tag, ext=ext)

    def da3_model(self, video: str) -> str:
        s = self.settings[video].sections["da3"]
        return self.da3_export(s["variant"], self.settings[video].da3_shape(self.shape(video)), s["contract"])

    def near_models(self, video: str) -> list[str]:
        return [self.paths.model(name) for name in self.settings[video].near_models()]

    def window_segments(self, video: str, seg: str, segments: list[tuple[int, int]], fps: float) -> list[str]:
        """The other segments (names) whose near maps lie within reach of segment ``seg`` of ``segments``: the
        floating window's (``render.floating_window: auto``: its widths are planned from the frames around it) and
        the fill's (``render.fill: temporal``: the frames around fill the holes), so a render waits for its
        neighbours alone, not for every near map of the video."""
        stereo = self.render_settings(video).stereo
        release, attack = reach_frames(fps) if stereo.floating_window == "auto" else (0, 0)
        if stereo.fill == "temporal":
            release, attack = max(release, stereo.fill_frames), max(attack, stereo.fill_frames)
        if not (release or attack):
            return []
        first, end = (int(frame) for frame in seg.split("-"))
        return [segment_name(start, count) for start, count in segments
                if start != first and start < end + attack and start + count > first - release]  # fmt: skip

    def convergence_plan(self, video: str, dkey: str, nkey: str) -> list[str]:
        """The video's convergence plan under these keys (``render.convergence: auto``; else none)."""
        stereo = self.render_settings(video).stereo
        if stereo.convergence != "auto":
            return []
        ckey = keys.convergence_key(stereo)
        return [fill(self.paths.convergence_plan, video=video, dkey=dkey, nkey=nkey, ckey=ckey)]

    def subtitle_plan(self, video: str, dkey: str, nkey: str, rkey: str) -> list[str]:
        """The video's subtitle plan under these keys (a track burnt in, ``subtitles.burn``; else none)."""
        if self.render_settings(video).subtitle_stream is None:
            return []
        return [fill(self.paths.subtitle_plan, video=video, dkey=dkey, nkey=nkey, rkey=rkey)]

    def prune_keys(self, shape_on_disk: Callable[[str], VideoShape | None]) -> dict[str, dict | None]:
        """Each video of the library with its current keys (what ``prune`` keeps), from the probes on disk
        (``shape_on_disk``: None where there is none, or it failed); a video whose keys need a probe it does not
        have gets None: prune then leaves its folders alone."""
        kept = {}
        for video, settings in self.settings.items():
            if video not in self.library.all_videos:
                continue
            shape = shape_on_disk(video)
            if settings.needs_shape and shape is None:
                kept[video] = None
                continue
            kept[video] = {
                "dkey": settings.depth_key(shape),
                "nkey": settings.near_key(),
                "rkey": settings.render_key(shape),
                "plan": settings.stabiliser.plan is not None,
            }
        return kept

    # --- models -------------------------------------------------------------------------------------------------
    def da3_export(self, variant: str, size, contract: str) -> str:
        """The export's path; ``size`` is a square side or (width, height)."""
        return fill(self.paths.da3_onnx, stem=da3_onnx_name(variant, size, contract).removesuffix(".onnx"))

    def da3_weights(self, variant: str) -> str:
        return fill(self.paths.da3_weights, folder=da3_weights_folder(variant))

    def check_weights(self) -> None:
        """The weights the configuration needs are there and whole (raises BadConfig/BadWeights in one line)."""
        variants = {self.settings[v].sections["da3"]["variant"] for v in self.videos}
        variants |= {e["variant"] for e in self.config["export"]["da3_extra"]}
        uses_nvds = any(self.near_models(video) for video in self.videos)
        check_weights(
            da3={variant: Path(self.da3_weights(variant)) for variant in variants},
            nvds=Path(self.paths.nvds_weights) if uses_nvds else None,
            demo=self.demo,
        )

    # --- targets ------------------------------------------------------------------------------------------------
    def results(self, videos=None) -> list[str]:
        """The finished files of ``videos`` (default: every video to convert)."""
        return [self.result(video) for video in sorted(self.videos if videos is None else videos)]

    def sidecars(self, videos=None) -> list[str]:
        """The subtitle files written beside the finished files of ``videos`` (``subtitles.sidecar``)."""
        paths = []
        for video in sorted(self.videos if videos is None else videos):
            tag, _ = self.settings[video].result_name()
            for rank, language, _ in self.settings[video].sidecar_tracks(self.shape(video)):
                paths.append(fill(self.paths.sidecar, video=video, tag=tag, rank=rank, language=language))
        return paths

    def sidecar_params(self, wildcards) -> dict:
        """The sidecar job's params: the stream of its rank, the render settings and the keys of the near maps
        it places the track over (the current ones)."""
        video = wildcards.video
        tracks = {rank: stream for rank, _, stream in self.settings[video].sidecar_tracks(self.shape(video))}
        return {"stream": tracks[int(wildcards.rank)], "render": self.render_settings(video).params(),
                "margin_pct": self.settings[video].sections["subtitles"]["margin_pct"],
                "dkey": self.depth_key(video)}  # fmt: skip

    def exports(self, videos=None) -> list[str]:
        """``snakemake exports``: every model the videos use and ``export.da3_extra`` (the configured DA3 model at
        each of its aspect tiers when the library is empty), plus the configured NVDS tiers x modes when NVDS
        weights are there (or the demo makes them)."""
        export = self.config["export"]
        # An extra export is square unless it names an aspect (then it is that tier at its size).
        extra = [{**e, "fit": "aspect", "aspect_tiers": [e["aspect"]]} if "aspect" in e else {**e, "fit": "letterbox"}
                 for e in export["da3_extra"]]  # fmt: skip
        if not self.videos and not extra:
            extra.append(self.config["da3"])
        models = self._models_in_use(videos)
        models |= {self.da3_export(e["variant"], shape, e["contract"]) for e in extra for shape in tier_shapes(e)}
        if self.demo or Path(self.paths.nvds_weights).is_file():
            names = {n for tier in export["nvds_tiers"] for g in export["nvds_modes"] for n in nvds_onnx_names(tier, g)}
            models |= {self.paths.model(f"NVDS/{name}") for name in names}
        return sorted(models)

    def qc_validations(self, videos=None) -> list[str]:
        """Validation reports of every export the videos (default: all to convert) use."""
        return [str(validation_path(model)) for model in sorted(self._models_in_use(videos))]

    def qc_stats(self, videos=None) -> list[str]:
        chosen = self.videos if videos is None else videos
        return [fill(self.paths.qc_video, video=video, name="stats.json") for video in sorted(chosen)]

    def video_reports(self, videos=None) -> list[str]:
        """The QC figures of ``videos`` (default: every video to convert), unless report.qc is false."""
        if not self.config["report"]["qc"]:
            return []
        chosen = sorted(self.videos if videos is None else videos)
        return [fill(self.paths.qc_video, video=v, name=n) for v in chosen for n in QC_FIGURES]

    def library_reports(self) -> list[str]:
        """The library's QC tables (they list failed videos too), unless report.qc is false or there is no video."""
        if not self.config["report"]["qc"] or not self.library.all_videos:
            return []
        return [fill(self.paths.qc_library, name=name) for name in QC_TABLES]

    def probes(self) -> list[str]:
        return [fill(self.paths.probe, video=video) for video in sorted(self.videos)]

    def _models_in_use(self, videos=None) -> set[str]:
        chosen = self.videos if videos is None else videos
        return {self.da3_model(v) for v in chosen} | {m for v in chosen for m in self.near_models(v)}


def _current(wildcards, name: str, key: str, params: dict) -> dict:
    """``params`` when the job's key wildcard ``name`` is the configured ``key``: an old key's intermediates are
    never rebuilt under the current settings."""
    requested = getattr(wildcards, name)
    if requested != key:
        raise ValueError(f"{wildcards.video}: {name} {requested} is not the configured one ({key}); "
                         "request final outputs, not old intermediates")  # fmt: skip
    return params
