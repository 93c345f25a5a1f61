"""What the workflow builds for each video of the library, and where: its settings, their cache keys, the models
it needs and its finished files. Plain Python, tested without Snakemake. Almost everything is known when the
Snakefile is parsed; what a checkpoint knows is handed in by common.smk: the segments, each video's display
size (``display_of``) and the picture area inside it (``picture_of``: baked-in bars), from which ``da3.fit:
aspect`` picks the video's DA3 export and its depth key.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

from stereo3d.errors import BadVideo
from stereo3d.models.da3.tiers import export_shape, tier_shapes
from stereo3d.models.names import da3_onnx_name, da3_weights_folder, nvds_onnx_names
from stereo3d.models.validation import validation_path
from stereo3d.stabilisers import Stabiliser, get_stabiliser
from stereo3d.stages.probe import probe_failed
from stereo3d.stereo.bars import Area
from stereo3d.stereo.layouts import LAYOUT_TAGS
from stereo3d.stereo.warp import StereoSettings
from stereo3d.workflow import keys
from stereo3d.workflow.failures import current_failure, record_path
from stereo3d.workflow.paths import Paths, fill
from stereo3d.workflow.preflight import check_weights
from stereo3d.workflow.sources import Sources

QC_FIGURES = ("contact_sheet.png", "flicker.png", "parallax.png")
QC_TABLES = ("exports.html", "videos.html", "benchmarks.html")


class Targets:
    """``settings``: id → the video's per-video sections (config with its sheet row laid over); ``videos``: id →
    source path of the videos to convert (until ``link_sources`` leaves out those that failed before)."""

    def __init__(
        self,
        config: dict,
        settings: dict[str, dict],
        videos: dict[str, Path],
        display_of: Callable[[str], tuple[int, int]] | None = None,
        picture_of: Callable[[str], Area] | None = None,
    ):
        self.config, self.settings = config, settings
        self.paths = Paths(config["paths"])
        self.demo = bool(config["demo"])
        self.all_videos = dict(videos)
        self.videos = dict(videos)
        self.fingerprints: dict[str, str] = {}
        self.links: dict[str, str] = {}
        self.failed: dict[str, dict] = {}
        # video -> (display width, display height), from its probe: a checkpoint's output, which common.smk reads.
        self.display_of = display_of
        # video -> the picture area of its frame (stereo3d.stereo.bars), from its probe.
        self.picture_of = picture_of

    def link_sources(self) -> None:
        """Give each source its link and fingerprint under the work folder (stereo3d.workflow.sources), and leave
        out the videos whose current file failed before (stereo3d.workflow.failures), listing them in
        ``failed``. The demo's clips do not exist when it is parsed, and are read where they are made."""
        sources = Sources(self.paths.work)
        for video, path in self.all_videos.items():
            self.fingerprints[video] = sources.fingerprint(path)
            try:
                self.links[video] = str(sources.link(video, path))
            except BadVideo as exc:  # a path Snakemake cannot read, and no link to it allowed here
                self.failed[video] = {"reason": str(exc)}
                continue
            record = current_failure(record_path(self.paths.work, video), self.fingerprints[video])
            if record is not None:
                self.failed[video] = record
        sources.save()
        self.videos = {video: path for video, path in self.all_videos.items() if video not in self.failed}

    def failures(self, summary_of: Callable[[str], dict | None]) -> dict[str, str]:
        """Video -> one-line reason, for every video that cannot be converted: those remembered as failed, and
        those whose probe summary (``summary_of(video)``, None where there is none yet) says so."""
        found = {video: record["reason"] for video, record in self.failed.items()}
        for video in self.videos:
            summary = summary_of(video)
            reason = None if summary is None else probe_failed(summary)
            if reason is not None:
                found[video] = reason
        return dict(sorted(found.items()))

    # --- sources ------------------------------------------------------------------------------------------------
    def source(self, video: str) -> str:
        """What the rules read the video through: its link (no braces or other pattern characters), else the
        file itself (the demo's clips before they are generated, tests without links)."""
        return self.links.get(video) or str(self.videos[video])

    def fingerprint(self, video: str) -> str:
        """The source's content fingerprint ("" before the file exists: the demo's clips)."""
        return self.fingerprints.get(video, "")

    # --- per video ----------------------------------------------------------------------------------------------
    def near_settings(self, video: str) -> dict:
        return keys.near_settings(self.settings[video], self.config)

    def render_settings(self, video: str, display: tuple[int, int] | None = None, area: Area | None = None) -> dict:
        """``display`` and ``area`` from a probe on disk (prune), else from its reader."""
        return keys.render_settings(self.settings[video], bars=self.picture(video, display, area) is not None)

    def stereo_settings(self, video: str) -> dict:
        """The renderer's geometry settings alone (what the QC figures draw with; the layout and encoder don't
        change them)."""
        return dataclasses.asdict(StereoSettings.from_config(self.settings[video]["render"]))

    def stabiliser(self, video: str) -> Stabiliser:
        return get_stabiliser(self.settings[video]["stabilise"]["method"])

    def needs_display(self, video: str) -> bool:
        """Whether the video's depth key depends on its probe: on its shape (``fit: aspect``), or on the picture
        area inside its frame (unless ``render.bars: ignore``)."""
        return self.settings[video]["da3"]["fit"] == "aspect" or self.uses_bars(video)

    def uses_bars(self, video: str) -> bool:
        """Whether depth and render work on the picture inside baked-in bars (``render.bars``: keep or crop)."""
        return self.settings[video]["render"]["bars"] != "ignore"

    def display(self, video: str) -> tuple[int, int] | None:
        if self.settings[video]["da3"]["fit"] != "aspect":
            return None
        if self.display_of is None:
            raise RuntimeError(f"{video}: its display size is needed (fit aspect) and no probe reader is set")
        return self.display_of(video)

    def picture(self, video: str, display: tuple[int, int] | None = None, area: Area | None = None) -> Area | None:
        """The picture area the video's depth covers, None for the whole frame: no bars found, or ``render.bars:
        ignore``. ``display`` and ``area`` come from a probe on disk (prune), else from the probe's reader."""
        if not self.uses_bars(video):
            return None
        if area is None:
            if self.picture_of is None or self.display_of is None:
                raise RuntimeError(f"{video}: its picture area is needed (render.bars) and no probe reader is set")
            display, area = self.display_of(video), self.picture_of(video)
        return None if area.is_full(*display) else area

    def depth_key(self, video: str, display: tuple[int, int] | None = None, area: Area | None = None) -> str:
        """The video's depth key; ``display`` and ``area`` from a probe on disk (prune), else from its reader."""
        precision = self.config["runtime"]["precision"]
        da3 = self.settings[video]["da3"]
        shown = (display if display is not None else self.display(video)) if da3["fit"] == "aspect" else None
        return keys.depth_key(da3, shown, precision, self.picture(video, display, area))

    def near_key(self, video: str) -> str:
        return keys.near_key(self.near_settings(video))

    def render_key(self, video: str, display: tuple[int, int] | None = None, area: Area | None = None) -> str:
        return keys.render_key(self.render_settings(video, display, area))

    def result(self, video: str) -> str:
        tag = LAYOUT_TAGS[self.settings[video]["render"]["layout"]]
        return fill(self.paths.result, video=video, tag=tag, ext=self.settings[video]["encode"]["container"])

    def da3_model(self, video: str) -> str:
        s = self.settings[video]["da3"]
        picture = self.picture(video)
        shape = export_shape(s, picture.size if picture is not None else self.display(video))
        return self.da3_export(s["variant"], shape, s["contract"])

    def near_models(self, video: str) -> list[str]:
        """The model files the video's stabiliser opens (none for most)."""
        method = self.stabiliser(video)
        return [self.paths.model(m) for m in method.models(self.near_settings(video))] if method.models else []

    # --- models -------------------------------------------------------------------------------------------------
    def da3_export(self, variant: str, size, contract: str) -> str:
        """The export's path; ``size`` is a square side or (width, height)."""
        return fill(self.paths.da3_onnx, stem=da3_onnx_name(variant, size, contract).removesuffix(".onnx"))

    def da3_weights(self, variant: str) -> str:
        return fill(self.paths.da3_weights, folder=da3_weights_folder(variant))

    def check_weights(self) -> None:
        """The weights the configuration needs are there and whole (raises BadConfig/BadWeights in one line)."""
        variants = {self.settings[v]["da3"]["variant"] for v in self.videos}
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
        if not self.config["report"]["qc"] or not self.all_videos:
            return []
        return [fill(self.paths.qc_library, name=name) for name in QC_TABLES]

    def probes(self) -> list[str]:
        return [fill(self.paths.probe, video=video) for video in sorted(self.videos)]

    def _models_in_use(self, videos=None) -> set[str]:
        chosen = self.videos if videos is None else videos
        return {self.da3_model(v) for v in chosen} | {m for v in chosen for m in self.near_models(v)}
