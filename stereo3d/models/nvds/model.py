"""NVDS (Neural Video Depth Stabilizer, Wang et al., ICCV 2023), written from the project's spec.

Module tree and attribute names mirror the official ``full_model.NVDS`` so that its checkpoint (after
``module.`` is stripped) loads with ``strict=True``; see ``/work/shared/specs/nvds.md`` sections 2-3.
The parts live beside this module: ``config`` (sizes and architecture constants), ``mit`` (the backbone),
``stabilization`` (the stabilisation head) and ``attention`` (its focal window attention and index tables).
This module holds the whole model and its export wrappers, and re-exports the names other code imports
from here.

Two formulations of the focal cross-attention compute the same function:

* ``attention="faithful"``: the published computation (``nn.Unfold``, biases and masks added through
  slice assignment, masks built at run time); works at any size.
* ``attention="static"`` (spec section 8): one full-width bias add and one full-width mask add, each
  window's keys gathered from one projected key table by a per-tier index instead of rolls and Unfold,
  the index and masks precomputed for one resolution tier as non-persistent buffers, and every size
  taken from the tier in Python. This is the form that exports to ONNX without ScatterND or
  shape-computing ops, and it is laid out for few data-movement operators in that graph (window
  partition once, head-major projections, no key-group concatenations). It is not the same sequence of
  float operations (biases added after the matrix products instead of inside ``nn.Linear``'s addmm,
  per-head products), so it equals the faithful form to within float32 rounding, not bitwise (tested to
  1e-5 on outputs of order 1). Call ``prepare(height, width)`` first.

Input and output: ``[B, 4, 4, H, W]`` windows (frames oldest to newest, target LAST; channels
ImageNet-normalised RGB + near in [0, 1]) give ``[B, 1, H, W]``: ReLU'd relative disparity of the
target frame, larger = nearer.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from stereo3d.models.nvds.attention import index_buffers
from stereo3d.models.nvds.config import WINDOW_FRAMES, NvdsConfig, Tier
from stereo3d.models.nvds.mit import MixVisionTransformer
from stereo3d.models.nvds.stabilization import StabilizationNetwork

ATTENTION_FORMS = ("faithful", "static")


class NVDS(nn.Module):
    """The whole stabiliser; children ``backbone``, ``Stabilizer``, ``edge_conv``, ``edge_conv1`` as upstream."""

    def __init__(self, config: NvdsConfig | None = None, attention: str = "faithful"):
        super().__init__()
        if attention not in ATTENTION_FORMS:
            raise ValueError(f"attention must be one of {ATTENTION_FORMS}, got {attention!r}")
        self.config = config = config or NvdsConfig()
        self.attention = attention
        self.tier: Tier | None = None
        d = config.decoder_channels
        self.backbone = MixVisionTransformer(config)
        self.Stabilizer = StabilizationNetwork(config, static=self.static)
        self.edge_conv = nn.Sequential(nn.Conv2d(3, d[2], 3, 1, 1), nn.ReLU())
        self.edge_conv1 = nn.Sequential(nn.Conv2d(d[2], d[1], 3, 2, 1), nn.ReLU())

    @property
    def static(self) -> bool:
        return self.attention == "static"

    def prepare(self, height: int, width: int) -> NVDS:
        """Fix the resolution tier: sizes and static masks are computed here, once (static form needs it)."""
        self.tier = Tier(height, width)
        self.Stabilizer.decoder_focal.prepare(self.tier)
        return self

    def tier_for(self, height: int, width: int) -> Tier:
        if self.static:
            if self.tier is None:
                raise RuntimeError("static NVDS: call prepare(height, width) before running it")
            if (self.tier.height, self.tier.width) != (height, width):
                raise ValueError(f"static NVDS prepared for {self.tier.width}x{self.tier.height}, got {width}x{height}")
            return self.tier
        return Tier(height, width)

    def forward(self, window_rgbd: torch.Tensor) -> torch.Tensor:
        """``[B, 4, 4, H, W]`` (target last) -> ``[B, 1, H, W]`` near (ReLU'd disparity)."""
        b, t, c, h, w = window_rgbd.shape
        feats = self.backbone(window_rgbd.reshape(b * t, c, h, w))
        return self.head(feats, window_rgbd[:, -1, 0:3])

    def features(self, frame_rgbd: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """Per-frame backbone features c1..c4; frames are independent, so these can be cached."""
        return self.backbone(frame_rgbd)

    def head(self, feats: tuple[torch.Tensor, ...], last_rgb: torch.Tensor) -> torch.Tensor:
        """Features of ``B*4`` frames (window-major, target last) + the targets' RGB -> ``[B, 1, H, W]``."""
        tier = self.tier_for(last_rgb.shape[-2], last_rgb.shape[-1])
        edge_feat = self.edge_conv(last_rgb)
        edge_feat1 = self.edge_conv1(edge_feat)
        return F.relu(self.Stabilizer(feats, edge_feat, edge_feat1, tier))


class NvdsBackbone(nn.Module):
    """Export form: one RGBD frame ``[1, 4, H, W]`` -> ``feat0..feat3`` (c1..c4)."""

    def __init__(self, model: NVDS):
        super().__init__()
        self.model = model

    def forward(self, frame_rgbd: torch.Tensor):
        return tuple(self.model.features(frame_rgbd))


class NvdsHead(nn.Module):
    """Export form: ``feat0..feat3`` (each ``[4, C, h, w]``, oldest to newest) + ``last_rgb`` -> near."""

    def __init__(self, model: NVDS):
        super().__init__()
        self.model = model

    def forward(self, feat0, feat1, feat2, feat3, last_rgb):
        return self.model.head((feat0, feat1, feat2, feat3), last_rgb)


def parameter_count(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


__all__ = [
    "NVDS",
    "NvdsConfig",
    "NvdsBackbone",
    "NvdsHead",
    "Tier",
    "index_buffers",
    "parameter_count",
    "WINDOW_FRAMES",
    "ATTENTION_FORMS",
]
