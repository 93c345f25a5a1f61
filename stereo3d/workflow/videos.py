"""One video's settings: its config sections (config.yaml with its sheet row laid over them), and from them each
stage's settings object and cache key, built in one place. Pure: where a key depends on what the video's probe
says (its shape under ``da3.fit: aspect``, the picture inside baked-in bars), that ``VideoShape`` is an argument.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from stereo3d.io.subtitles import TEXT, burnable, choose_track
from stereo3d.stabilisers import NearSettings, Stabiliser
from stereo3d.stages.depth import DepthSettings
from stereo3d.stages.probe import picture_of
from stereo3d.stages.render import RenderSettings
from stereo3d.stereo.bars import Area
from stereo3d.stereo.layouts import LAYOUT_TAGS, get_layout
from stereo3d.stereo.sidecar import ARRANGEMENTS
from stereo3d.stereo.warp import StereoSettings
from stereo3d.workflow import keys


@dataclass(frozen=True)
class VideoShape:
    """What a video's probe says that its keys may depend on: its display size, and the picture area inside it
    (baked-in bars; the whole frame where there are none, or the probe is older than the bars' search)."""

    display: tuple[int, int]
    picture: Area
    # Its subtitle tracks: (stream index, codec, language, marked default) each (subtitles.burn picks among them).
    subtitles: tuple[tuple[int, str, str | None, bool], ...] = ()

    @classmethod
    def of(cls, summary: dict) -> VideoShape:
        """From a probe summary (``probe.json``)."""
        video = summary["video"]
        tracks = tuple((t["index"], t["codec"], t.get("language"), bool(t.get("default")))
                       for t in summary.get("subtitles", []))  # fmt: skip
        return cls((video["display_width"], video["display_height"]), picture_of(summary), tracks)

    def subtitle_tracks(self) -> list[dict]:
        """The subtitle tracks as a probe lists them."""
        return [{"index": index, "codec": codec, "language": language, "default": default}
                for index, codec, language, default in self.subtitles]  # fmt: skip


class VideoSettings:
    """``sections``: the video's config sections; ``config``: the whole config (runtime, export: the same for every
    video)."""

    def __init__(self, sections: dict, config: dict):
        self.sections, self.config = sections, config
        # Every section a stage's settings may read: the video's own over the config's (runtime, export).
        self.all_sections = {**config, **sections}

    @property
    def needs_shape(self) -> bool:
        """Whether the video's keys depend on its probe: on its shape (``fit: aspect``), on the picture area inside
        its frame (unless ``render.bars: ignore``), or on its subtitle tracks (``subtitles.burn``)."""
        return self.sections["da3"]["fit"] == "aspect" or self.uses_bars or self.burns_subtitles or self.writes_sidecars

    @property
    def burns_subtitles(self) -> bool:
        return str(self.sections["subtitles"]["burn"]).lower() != "none"

    @property
    def writes_sidecars(self) -> bool:
        """Whether text tracks are written beside the result (``subtitles.sidecar``, a layout they can follow)."""
        layout = get_layout(self.sections["render"]["layout"])
        return bool(self.sections["subtitles"]["sidecar"]) and layout.stereo_mode in ARRANGEMENTS

    def sidecar_tracks(self, shape: VideoShape | None) -> list[tuple[int, str, int]]:
        """(rank among the subtitle tracks, language, stream index) of each text track written beside the result."""
        if not self.writes_sidecars:
            return []
        if shape is None:
            raise ValueError("the video's subtitle tracks are needed (subtitles.sidecar), and no probe")
        return [(rank, _language(track["language"]), track["index"])
                for rank, track in enumerate(shape.subtitle_tracks()) if track["codec"] in TEXT]  # fmt: skip

    @property
    def uses_bars(self) -> bool:
        """Whether depth and render work on the picture inside baked-in bars (``render.bars``: keep or crop)."""
        return self.sections["render"]["bars"] != "ignore"

    def picture(self, shape: VideoShape | None) -> Area | None:
        """The picture area the video's depth covers, None for the whole frame: no bars found, or ``render.bars:
        ignore``."""
        if not self.uses_bars:
            return None
        if shape is None:
            raise ValueError("the picture area inside the video's bars is needed (render.bars), and no probe")
        return None if shape.picture.is_full(*shape.display) else shape.picture

    # --- depth --------------------------------------------------------------------------------------------------
    def depth(self, shape: VideoShape | None) -> DepthSettings:
        """The depth stage's settings: the export the video's shape (or picture) takes, and the rest of its key."""
        return DepthSettings.from_sections(self.all_sections, self._display(shape), self.picture(shape))

    def depth_key(self, shape: VideoShape | None) -> str:
        return keys.depth_key(self.depth(shape))

    def da3_shape(self, shape: VideoShape | None) -> tuple[int, int]:
        """(width, height) of the DA3 export the video's depth runs through."""
        return self.depth(shape).size

    def _display(self, shape: VideoShape | None) -> tuple[int, int] | None:
        if self.sections["da3"]["fit"] != "aspect":
            return None
        if shape is None:
            raise ValueError("the video's display size is needed (da3.fit: aspect), and no probe")
        return shape.display

    # --- near maps ----------------------------------------------------------------------------------------------
    @property
    def stabiliser(self) -> Stabiliser:
        return self.near().stabiliser

    def near(self) -> NearSettings:
        """The near stage's settings (its rules' params, its key)."""
        return NearSettings.from_sections(self.all_sections)

    def near_key(self) -> str:
        return keys.near_key(self.near())

    def near_models(self) -> list[str]:
        """The model files (relative to the models folder) the video's stabiliser opens (none for most)."""
        near = self.near()
        return list(near.stabiliser.models(near)) if near.stabiliser.models else []

    # --- render -------------------------------------------------------------------------------------------------
    def render(self, shape: VideoShape | None) -> RenderSettings:
        """The render stage's settings (its rules' params, its key): ``render.bars`` among them where the video's
        picture lies inside bars."""
        return RenderSettings.from_sections(self.sections, bars=self.has_bars(shape),
                                            subtitle_stream=self.subtitle_stream(shape))  # fmt: skip

    def render_key(self, shape: VideoShape | None) -> str:
        return keys.render_key(self.render(shape))

    def subtitle_stream(self, shape: VideoShape | None) -> int | None:
        """The subtitle stream ``subtitles.burn`` draws into the views (None: none asked, or the video has no such
        track the package can draw: it is then rendered as without the setting)."""
        if not self.burns_subtitles:
            return None
        if shape is None:
            raise ValueError("the video's subtitle tracks are needed (subtitles.burn), and no probe")
        track = choose_track(self.sections["subtitles"]["burn"], shape.subtitle_tracks())
        return track["index"] if track is not None and burnable(track) else None

    def has_bars(self, shape: VideoShape | None) -> bool:
        """Whether the video's render works on a picture inside bars (``render.bars`` is then one of its keys)."""
        return self.picture(shape) is not None

    def stereo(self) -> StereoSettings:
        """The renderer's geometry alone (what the QC figures and the preview grid draw with; the layout, the
        encoder and the bars do not change it)."""
        return StereoSettings.from_config(self.sections["render"])

    # --- result -------------------------------------------------------------------------------------------------
    def result_name(self) -> tuple[str, str]:
        """The finished file's layout tag and extension (``_LRF_Full_SBS``, ``mp4``)."""
        return LAYOUT_TAGS[self.sections["render"]["layout"]], self.sections["encode"]["container"]


def _language(tag: str | None) -> str:
    """A track's language as a file name part: its ISO 639 code (eng), und where it has none of that form."""
    tag = (tag or "").lower()
    return tag if re.fullmatch(r"[a-z]{2,3}", tag) else "und"
