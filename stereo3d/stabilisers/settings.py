"""The near-map stage's settings (rules near_plan, near_maps, preview_near_maps): one object per video, built once
from its config sections (``NearSettings.from_sections``), shown by the rules as their params (``params()``, by the
keys' dotted config names), read back in the job (``from_params``), and hashed into the near key
(``stereo3d.workflow.keys.near_key``).

It lives beside the stabilisers' table, not in ``stereo3d.stages``: the stabilisers read it (their options, the
near range), and the floors point down (the stages import the stabilisers, never the other way).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from stereo3d.defaults import default
from stereo3d.stabilisers.registry import Stabiliser, get_stabiliser


@dataclass(frozen=True)
class NearSettings:
    """What makes a video's near maps: the percentiles of inverse depth that become 0 and 1 (``near.low_pct``,
    ``near.high_pct``), the stabiliser (``stabilise.method``) and the options its row declares
    (``Stabiliser.keys``: ``{dotted config key: value}``; one not given takes the schema's default). Another
    method's options are not part of it, so they never move this method's maps."""

    low_pct: float = default("near.low_pct")
    high_pct: float = default("near.high_pct")
    method: str = default("stabilise.method")
    options: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        declared = self.stabiliser.keys
        unknown = sorted(set(self.options) - set(declared))
        if unknown:
            raise ValueError(f"{', '.join(unknown)}: not an option of the {self.method} method "
                             f"(it declares {', '.join(declared) or 'none'})")  # fmt: skip
        # In the row's order, so that params() (and the rules' recorded params) keep one order.
        options = {key: self.options[key] if key in self.options else _default(key) for key in declared}
        object.__setattr__(self, "options", options)

    @property
    def stabiliser(self) -> Stabiliser:
        return get_stabiliser(self.method)

    def option(self, dotted: str) -> Any:
        """The value of one of the method's options (``stabilise.ema_alpha``)."""
        return self.options[dotted]

    @classmethod
    def from_sections(cls, sections: Mapping[str, Mapping[str, Any]]) -> NearSettings:
        """The settings of a video from its config sections (config.yaml with its sheet row over it; a method's
        option in a section no sheet overrides, as ``export.nvds_architecture``, comes from the config's)."""
        method = sections["stabilise"]["method"]
        near = sections["near"]
        options = {key: _setting(sections, key) for key in get_stabiliser(method).keys}
        return cls(low_pct=near["low_pct"], high_pct=near["high_pct"], method=method, options=options)

    def params(self) -> dict[str, Any]:
        """``{dotted config key: value}``: ``near.low_pct``, ``near.high_pct``, ``stabilise.method``, then the
        method's options in its row's order. The near key is this dict's hash; Snakemake records its ``repr``: the
        keys, their order and the values' types stay as they were (tests/test_stage_settings.py pins them)."""
        return {
            "near.low_pct": self.low_pct,
            "near.high_pct": self.high_pct,
            "stabilise.method": self.method,
            **self.options,
        }

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> NearSettings:
        """The inverse of ``params``."""
        fixed = ("near.low_pct", "near.high_pct", "stabilise.method")
        return cls(
            low_pct=params["near.low_pct"],
            high_pct=params["near.high_pct"],
            method=params["stabilise.method"],
            options={key: value for key, value in params.items() if key not in fixed},
        )


def _setting(sections: Mapping[str, Mapping[str, Any]], dotted: str) -> Any:
    section, name = dotted.split(".")
    return sections[section][name]


def _default(dotted: str) -> Any:
    try:
        return default(dotted)
    except KeyError:
        raise ValueError(f"{dotted}: no value given and no default in the config schema") from None
