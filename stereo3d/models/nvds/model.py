"""NVDS (Neural Video Depth Stabilizer, Wang et al., ICCV 2023), written from the project's spec.

Module tree and attribute names mirror the official ``full_model.NVDS`` so that its checkpoint (after
``module.`` is stripped) loads with ``strict=True``; see ``/work/shared/specs/nvds.md`` sections 2-3.

Two formulations of the focal cross-attention give the same numbers:

* ``attention="faithful"``: the straightforward form (``nn.Unfold``, biases and masks added through
  slice assignment, masks built at run time); works at any size.
* ``attention="static"`` (spec section 8): one full-width bias add and one full-width mask add, each
  window's keys gathered from one projected key table by a per-tier index instead of rolls and Unfold,
  the index and masks precomputed for one resolution tier as non-persistent buffers, and every size
  taken from the tier in Python. This is the form that exports to ONNX without ScatterND or
  shape-computing ops, and it is laid out for few data-movement operators in that graph (window
  partition once, head-major projections, no key-group concatenations). Bitwise equal to the faithful
  form (tested). Call ``prepare(height, width)`` first.

Input and output: ``[B, 4, 4, H, W]`` windows (frames oldest to newest, target LAST; channels
ImageNet-normalised RGB + near in [0, 1]) give ``[B, 1, H, W]``: ReLU'd relative disparity of the
target frame, larger = nearer.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import torch
import torch.nn.functional as F
from torch import nn

WINDOW_FRAMES = 4  # the window is [t-3, t-2, t-1, t], target last (spec section 5)

# Fixed by the architecture: they set bias-table and index-buffer shapes (spec section 11).
WINDOW = 7
EXPAND = 3
FOCAL_WINDOW = 5
FOCAL_LEVEL = 2
FOCAL_L_CLIPS = (7, 4, 2)
FOCAL_KERNEL_CLIPS = (7, 5, 3)
MASK_FILL = -100.0  # the official value for keys that read unfold padding
# Cyclic shifts of the expanded neighbour keys, in key order: top-left, top-right, bottom-left, bottom-right.
ROLL_SHIFTS = ((-EXPAND, -EXPAND), (-EXPAND, EXPAND), (EXPAND, -EXPAND), (EXPAND, EXPAND))
# (kernel, stride) of the unfolds, in key order: the pooled target, then clips 0..2 (padding kernel // 2 each).
UNFOLDS = ((FOCAL_WINDOW, 1),) + tuple(zip(FOCAL_KERNEL_CLIPS, FOCAL_L_CLIPS))

ATTENTION_FORMS = ("faithful", "static")


@dataclass(frozen=True)
class NvdsConfig:
    """Widths and depths of NVDS; the defaults are the released model (MiT-B5 backbone)."""

    in_chans: int = 4
    mit_dims: tuple[int, ...] = (64, 128, 320, 512)
    mit_depths: tuple[int, ...] = (3, 6, 40, 3)
    mit_heads: tuple[int, ...] = (1, 2, 5, 8)
    mit_sr: tuple[int, ...] = (8, 4, 2, 1)
    mit_mlp_ratio: int = 4
    embed_dim: int = 256  # MLP-fusion width; the focal stage runs at this width
    focal_dim: int = 256
    focal_heads: int = 8
    focal_depth: int = 4
    focal_mlp_ratio: int = 4
    # ffm2 mid, ffm2 out (= edge_conv1 out), ffm1 out (= edge_conv out), ffm0 out (AO in; AO mid = half)
    decoder_channels: tuple[int, ...] = (256, 128, 64, 32)

    @classmethod
    def tiny(cls) -> NvdsConfig:
        """The spec's tested CPU configuration (section 11): 219 state-dict entries, about 316k params."""
        return cls(mit_dims=(16, 32, 40, 64), mit_depths=(1, 1, 1, 1), mit_heads=(1, 2, 5, 8), mit_sr=(8, 4, 2, 1),
                   embed_dim=32, focal_dim=32, focal_heads=4, focal_depth=2, decoder_channels=(32, 16, 8, 4))

    def __post_init__(self):
        for dim, heads in zip(self.mit_dims, self.mit_heads):
            if dim % heads:
                raise ValueError(f"MiT dim {dim} is not divisible by its head count {heads}")
        if self.focal_dim != self.embed_dim:
            raise ValueError("focal_dim must equal embed_dim (the focal stage refines the fused map)")
        if self.focal_dim % self.focal_heads:
            raise ValueError(f"focal dim {self.focal_dim} is not divisible by {self.focal_heads} heads")
        if len(self.decoder_channels) != 4:
            raise ValueError("decoder_channels needs 4 widths")

    def as_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True)
class Tier:
    """Every size the model derives from one input resolution, computed in Python (no graph shape ops)."""

    height: int
    width: int

    def __post_init__(self):
        if self.height < 32 or self.width < 32 or self.height % 4 or self.width % 4:
            raise ValueError(f"NVDS needs H and W multiples of 4 from 32 up, got {self.width}x{self.height}")

    def stage(self, i: int) -> tuple[int, int]:
        """Map size after MiT stage i (1..4): the stride-4 stem, then stride-2 convs, each rounding up."""
        h, w = _ceil_div(self.height, 4), _ceil_div(self.width, 4)
        for _ in range(i - 1):
            h, w = _ceil_div(h, 2), _ceil_div(w, 2)
        return h, w

    @property
    def half(self) -> tuple[int, int]:
        return _ceil_div(self.height, 2), _ceil_div(self.width, 2)

    @property
    def padded(self) -> tuple[int, int]:
        """The 1/4-scale map padded right/bottom to a multiple of the window."""
        h, w = self.stage(1)
        return _ceil_div(h, WINDOW) * WINDOW, _ceil_div(w, WINDOW) * WINDOW

    @property
    def windows(self) -> tuple[int, int]:
        hp, wp = self.padded
        return hp // WINDOW, wp // WINDOW


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


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
        self.Stabilizer = StabilizationNetwork(config, self)
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


# ------------------------------------------------------------------------------------------------
# Backbone: SegFormer MiT with a 4-channel stem (spec 2.1)


class MixVisionTransformer(nn.Module):
    def __init__(self, config: NvdsConfig):
        super().__init__()
        dims = config.mit_dims
        stems = [(config.in_chans, 7, 4)] + [(dims[i - 1], 3, 2) for i in range(1, 4)]
        for i, (cin, k, s) in enumerate(stems, start=1):
            setattr(self, f"patch_embed{i}", OverlapPatchEmbed(cin, dims[i - 1], k, s))
        for i in range(1, 5):
            dim, heads, sr = dims[i - 1], config.mit_heads[i - 1], config.mit_sr[i - 1]
            blocks = [MitBlock(dim, heads, sr, config.mit_mlp_ratio) for _ in range(config.mit_depths[i - 1])]
            setattr(self, f"block{i}", nn.ModuleList(blocks))
            setattr(self, f"norm{i}", nn.LayerNorm(dim, eps=1e-6))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        outs = []
        n = x.shape[0]
        for i in range(1, 5):
            x, h, w = getattr(self, f"patch_embed{i}")(x)
            for blk in getattr(self, f"block{i}"):
                x = blk(x, h, w)
            x = getattr(self, f"norm{i}")(x)
            x = x.reshape(n, h, w, -1).permute(0, 3, 1, 2).contiguous()
            outs.append(x)
        return tuple(outs)


class OverlapPatchEmbed(nn.Module):
    def __init__(self, cin: int, dim: int, kernel: int, stride: int):
        super().__init__()
        self.proj = nn.Conv2d(cin, dim, kernel, stride, kernel // 2)
        self.norm = nn.LayerNorm(dim)  # default eps 1e-5, unlike the block norms

    def forward(self, x):
        x = self.proj(x)
        h, w = x.shape[-2:]
        return self.norm(x.flatten(2).transpose(1, 2)), h, w


class MitBlock(nn.Module):
    def __init__(self, dim: int, heads: int, sr: int, mlp_ratio: int):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=1e-6)
        self.attn = EfficientAttention(dim, heads, sr)
        self.norm2 = nn.LayerNorm(dim, eps=1e-6)
        self.mlp = MixFFN(dim, dim * mlp_ratio)

    def forward(self, x, h, w):
        x = x + self.attn(self.norm1(x), h, w)
        return x + self.mlp(self.norm2(x), h, w)


class EfficientAttention(nn.Module):
    """MiT attention; keys/values from a stride-sr conv of the token map when sr > 1."""

    def __init__(self, dim: int, heads: int, sr: int):
        super().__init__()
        self.heads = heads
        self.scale = (dim // heads) ** -0.5
        self.q = nn.Linear(dim, dim)
        self.kv = nn.Linear(dim, dim * 2)
        self.proj = nn.Linear(dim, dim)
        self.sr_ratio = sr
        if sr > 1:
            self.sr = nn.Conv2d(dim, dim, sr, sr)
            self.norm = nn.LayerNorm(dim)  # default eps 1e-5 (spec: mixed eps)

    def forward(self, x, h, w):
        n, tokens, c = x.shape
        hd = c // self.heads
        q = self.q(x).reshape(n, tokens, self.heads, hd).permute(0, 2, 1, 3)
        if self.sr_ratio > 1:
            kv_src = self.sr(x.permute(0, 2, 1).reshape(n, c, h, w)).reshape(n, c, -1).permute(0, 2, 1)
            kv_src = self.norm(kv_src)
        else:
            kv_src = x
        kv = self.kv(kv_src).reshape(n, -1, 2, self.heads, hd).permute(2, 0, 3, 1, 4)
        attn = (q @ kv[0].transpose(-2, -1)) * self.scale
        out = attn.softmax(dim=-1) @ kv[1]
        return self.proj(out.transpose(1, 2).reshape(n, tokens, c))


class MixFFN(nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.dwconv = DWConv(hidden)
        self.act = nn.GELU()  # exact erf form
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x, h, w):
        return self.fc2(self.act(self.dwconv(self.fc1(x), h, w)))


class DWConv(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dwconv = nn.Conv2d(dim, dim, 3, 1, 1, groups=dim)

    def forward(self, x, h, w):
        n, tokens, c = x.shape
        return self.dwconv(x.transpose(1, 2).reshape(n, c, h, w)).flatten(2).transpose(1, 2)


# ------------------------------------------------------------------------------------------------
# Stabilizer: MLP fusion, focal cross-attention, conv refinement (spec 2.2-2.4)


class StabilizationNetwork(nn.Module):
    def __init__(self, config: NvdsConfig, owner: NVDS):
        super().__init__()
        e, d = config.embed_dim, config.decoder_channels
        self._owner = [owner]  # a list, so the parent is not registered as a child module
        self.conv_seg = nn.Conv2d(d[1], 1, 1)  # upstream base-class leftover: unused, but in the checkpoint
        self.dropout = nn.Dropout2d(0.1)
        for i in (4, 3, 2, 1):  # registration order = checkpoint order
            setattr(self, f"linear_c{i}", MLP(config.mit_dims[i - 1], e))
        self.linear_fuse = nn.Sequential(nn.Conv2d(4 * e, e, 1, bias=False), nn.ReLU())
        self.decoder_focal = FocalLayer(config, owner)
        self.ffm2 = FFM(e, d[0], d[1], up=2)
        self.ffm1 = FFM(d[1], d[1], d[2], up=2)
        self.ffm0 = FFM(d[2], d[2], d[3], up=1)
        self.AO = AO(d[3], 1)

    def forward(self, feats, edge_feat, edge_feat1, tier: Tier):
        static = self._owner[0].static
        c1 = feats[0]
        n = c1.shape[0]
        size = tier.stage(1)
        fused = []
        for i in (4, 3, 2, 1):
            c = feats[i - 1]
            h, w = tier.stage(i)
            proj = getattr(self, f"linear_c{i}").proj
            if static:
                # Weight on the left keeps the map channels-first: the same dot products (in the same order, so
                # bitwise) without the two transposes around a token-major Linear. The faithful form leaves
                # channels-last views and torch picks its conv kernels by memory format, so match it: that
                # keeps the convolutions below bitwise equal, and it is no operator at all in the ONNX graph.
                x = (proj.weight @ c.flatten(2) + proj.bias[:, None]).reshape(n, -1, h, w)
                x = x.contiguous(memory_format=torch.channels_last)
            else:
                x = proj(c.flatten(2).transpose(1, 2)).permute(0, 2, 1).reshape(n, -1, h, w)
            if i != 1:
                x = F.interpolate(x, size=size, mode="bilinear", align_corners=False)
            fused.append(x)
        _c = self.linear_fuse(torch.cat(fused, dim=1))  # [B*4, E, h, w]
        b = n // WINDOW_FRAMES
        _c = _c.reshape(b, WINDOW_FRAMES, -1, size[0], size[1])
        refined = self.decoder_focal(_c.permute(0, 1, 3, 4, 2), tier).permute(0, 3, 1, 2)  # target only
        x = self.ffm2(_c[:, -1], refined, static, tier.half)
        x = self.ffm1(edge_feat1, x, static, (tier.height, tier.width))
        x = self.ffm0(edge_feat, x, static, None)
        return self.AO(x, static)


class MLP(nn.Module):
    def __init__(self, cin: int, cout: int):
        super().__init__()
        self.proj = nn.Linear(cin, cout)

    def forward(self, x):
        return self.proj(x)


class FTB(nn.Module):
    def __init__(self, cin: int, mid: int):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, mid, 3, 1, 1)
        self.conv_branch = nn.Sequential(nn.ReLU(), nn.Conv2d(mid, mid, 3, 1, 1), nn.ReLU(),
                                         nn.Conv2d(mid, mid, 3, 1, 1))

    def forward(self, x):
        # Upstream's first branch ReLU is in place, so it also rectifies the residual: reproduce it explicitly.
        y = F.relu(self.conv1(x))
        return F.relu(y + self.conv_branch(y))


class FFM(nn.Module):
    def __init__(self, cin: int, mid: int, cout: int, up: int):
        super().__init__()
        self.ftb1 = FTB(cin, mid)
        self.ftb2 = FTB(mid, cout)
        self.up = up
        self.upsample = nn.Upsample(scale_factor=up, mode="bilinear", align_corners=True)

    def forward(self, low, high, static: bool, out_size):
        x = self.ftb2(self.ftb1(low) + high)
        if not static:
            return self.upsample(x)
        if self.up == 1:
            return x  # a scale-1 align-corners resize copies: dropped from the static graph
        # align_corners=True ignores the scale factor, so an explicit size is the same resize
        return F.interpolate(x, size=out_size, mode="bilinear", align_corners=True)


class AO(nn.Module):
    def __init__(self, cin: int, cout: int):
        super().__init__()
        self.adapt_conv = nn.Sequential(nn.Conv2d(cin, cin // 2, 3, 1, 1), nn.ReLU(),
                                        nn.Upsample(scale_factor=1, mode="bilinear", align_corners=True),
                                        nn.Conv2d(cin // 2, cout, 1))

    def forward(self, x, static: bool):
        if not static:
            return self.adapt_conv(x)
        conv0, relu, _, conv3 = self.adapt_conv
        return conv3(relu(conv0(x)))


# ------------------------------------------------------------------------------------------------
# Focal cross-attention (spec 2.3, 3.5, 8)


class FocalLayer(nn.Module):
    """``BasicLayer3d3``: the blocks refine the target (last) frame; the reference frames pass through unchanged,
    so only the refined target ``[B, h, w, C]`` is returned."""

    def __init__(self, config: NvdsConfig, owner: NVDS):
        super().__init__()
        self._owner = [owner]
        self.blocks = nn.ModuleList(
            [FocalBlock(config.focal_dim, config.focal_heads, config.focal_mlp_ratio, owner)
             for _ in range(config.focal_depth)])

    def prepare(self, tier: Tier) -> None:
        # One [nW, 1, N] mask for all blocks: 181 zero columns then the four unfold masks.
        nwh, nww = tier.windows
        groups = [(nwh, nww, FOCAL_WINDOW, 1)] + [
            (nwh * lvl, nww * lvl, k, lvl) for lvl, k in zip(FOCAL_L_CLIPS, FOCAL_KERNEL_CLIPS)]
        masks = [torch.zeros(nwh * nww, WINDOW * WINDOW + rolled_key_count())]
        masks += [unfold_mask(h, w, k, s, k // 2) for h, w, k, s in groups]
        self.register_buffer("mask_full", torch.cat(masks, dim=1)[:, None, :], persistent=False)
        self.register_buffer("key_index", key_table_index(tier), persistent=False)
        for k, lvl in enumerate(FOCAL_L_CLIPS):
            cell = WINDOW // lvl
            if cell > 1:  # resized clips pooled over cells: the cell partition as a row permutation
                rows = torch.arange(nwh * lvl * cell * nww * lvl * cell, device="cpu")
                rows = _cells(rows.reshape(1, nwh * lvl * cell, nww * lvl * cell, 1), nwh * lvl, nww * lvl, cell)
                self.register_buffer(f"cell_index_{k}", rows.reshape(-1), persistent=False)

    def forward(self, x, tier: Tier):  # x: [B, 4, h, w, C] un-normalised
        if self._owner[0].static:
            # The references are the same in every block: split them off once instead of re-stacking all 4
            # frames after each block.
            *refs, target = x.unbind(1)
            for blk in self.blocks:
                target = blk.forward_static(target, refs, tier)
            return target
        for blk in self.blocks:
            x = blk(x, tier)
        return x[:, -1]


class FocalBlock(nn.Module):
    """``CffmTransformerBlock3d3``: focal cross-attention of the target frame to the 3 reference frames."""

    def __init__(self, dim: int, heads: int, mlp_ratio: int, owner: NVDS):
        super().__init__()
        self._owner = [owner]
        self.pool_layers = nn.ModuleList([nn.Linear(WINDOW * WINDOW, 1)])
        self.pool_layers_clips = nn.ModuleList([nn.Linear((WINDOW // lvl) ** 2, 1) for lvl in FOCAL_L_CLIPS])
        self.norm1 = nn.LayerNorm(dim)
        self.attn = WindowAttention3d(dim, heads, owner)
        self.drop_path = nn.Identity()
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = FocalMlp(dim, dim * mlp_ratio)

    def forward(self, x, tier: Tier):
        """Faithful form: ``[B, 4, h, w, C]`` in and out, references unchanged."""
        b, t, h, w, c = x.shape
        hp, wp = tier.padded
        nwh, nww = tier.windows
        y = self.norm1(x)
        if (hp, wp) != (h, w):  # padded after the norm and never masked (spec 3.5b)
            y = F.pad(y, (0, 0, 0, wp - w, 0, hp - h))
        target = y[:, -1]
        pooled = self.pool_layers[0](_window_cells(target, nwh, nww, WINDOW)).flatten(-2)  # [B, nWh, nWw, C]
        clips = []
        for k, lvl in enumerate(FOCAL_L_CLIPS):  # slot k feeds clip k: the oldest frame at the finest grain
            cell = WINDOW // lvl
            ph, pw = nwh * lvl, nww * lvl
            ref = y[:, k]
            if (ph * cell, pw * cell) != (hp, wp):
                ref = F.interpolate(ref.permute(0, 3, 1, 2), size=(ph * cell, pw * cell), mode="bilinear",
                                    align_corners=False).permute(0, 2, 3, 1)
            clips.append(self.pool_layers_clips[k](_window_cells(ref, ph, pw, cell)).flatten(-2))
        out = self.attn(target, pooled, clips, tier)  # [B, nW, 49, C]
        out = out.reshape(b, nwh, nww, WINDOW, WINDOW, c).permute(0, 1, 3, 2, 4, 5).reshape(b, hp, wp, c)
        out = x[:, -1] + out[:, :h, :w]
        out = out + self.mlp(self.norm2(out))
        return torch.cat([x[:, :-1], out.unsqueeze(1)], dim=1)

    def forward_static(self, target, refs, tier: Tier):
        """Static form: the target ``[B, h, w, C]`` and the 3 reference maps -> the refined target.

        The same numbers as ``forward`` with few layout operators: the references are never re-stacked, the
        target is window-partitioned once (for its pooling and the queries), the pooling Linears take their
        weight on the left so cells stay channels-last, and every key source goes into one token table from
        which the attention gathers its keys (``WindowAttention3d.forward_static``).
        """
        b, h, w, c = target.shape
        hp, wp = tier.padded
        nwh, nww = tier.windows
        pad = (0, 0, 0, wp - w, 0, hp - h)  # after the norm and never masked (spec 3.5b)
        y = F.pad(self.norm1(target), pad)
        windows = _cells(y, nwh, nww, WINDOW)  # [B, nW, 49, C]
        tokens = [y.reshape(b, hp * wp, c), _pool_cells(windows, self.pool_layers[0])]
        for k, lvl in enumerate(FOCAL_L_CLIPS):  # slot k feeds clip k: the oldest frame at the finest grain
            cell = WINDOW // lvl
            ph, pw = nwh * lvl, nww * lvl
            ref = F.pad(self.norm1(refs[k]), pad)
            if (ph * cell, pw * cell) != (hp, wp):
                ref = F.interpolate(ref.permute(0, 3, 1, 2), size=(ph * cell, pw * cell), mode="bilinear",
                                    align_corners=False).permute(0, 2, 3, 1)
            layer = self.pool_layers_clips[k]
            if cell == 1:  # clips 0 and 1: no cells to gather, the Linear(1, 1) acts per element
                tokens.append(_scale_shift(ref, layer).reshape(b, ph * pw, c))
                continue
            # Clip 2: a Gather of whole rows of C. As a transpose ONNX Runtime would merge it with the one back
            # from the resize's channels-first layout into a 6-D transpose with 3-float runs, 4x slower.
            index = getattr(self._owner[0].Stabilizer.decoder_focal, f"cell_index_{k}")
            cells = ref.reshape(b, -1, c).index_select(1, index).reshape(b, ph * pw, cell * cell, c)
            tokens.append(_pool_cells(cells, layer))
        out = self.attn.forward_static(windows, tokens, tier, h, w)  # [B, h, w, C]
        out = target + out
        return out + self.mlp(self.norm2(out))


def _window_cells(x, nh: int, nw: int, cell: int):
    """``[B, nh*cell, nw*cell, C]`` -> ``[B, nh, nw, C, cell*cell]`` (row-major cells) for the pooling Linear."""
    b, _, _, c = x.shape
    cells = x.reshape(b, nh, cell, nw, cell, c).permute(0, 1, 3, 2, 4, 5).reshape(b, nh, nw, cell * cell, c)
    return cells.transpose(3, 4)


def _cells(x, nh: int, nw: int, cell: int):
    """``[B, nh*cell, nw*cell, C]`` -> ``[B, nh*nw, cell*cell, C]``: one transpose that moves whole rows of C."""
    b, _, _, c = x.shape
    return x.reshape(b, nh, cell, nw, cell, c).permute(0, 1, 3, 2, 4, 5).reshape(b, nh * nw, cell * cell, c)


def _pool_cells(cells, layer: nn.Linear):
    """``[B, L, cells, C]`` -> ``[B, L, C]``: the pooling Linear with its ``[1, cells]`` weight on the left, so the
    cells need not be moved to the last axis (the same dot products in the same order: bitwise)."""
    return (layer.weight @ cells).squeeze(-2) + layer.bias


def _scale_shift(x, layer: nn.Linear):
    """A ``Linear(1, 1)`` pooling layer applied per element: one product and one sum, as the Linear does."""
    return x * layer.weight[0, 0] + layer.bias[0]


class FocalMlp(nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class WindowAttention3d(nn.Module):
    """``WindowAttention3d3``: 7x7 target windows attend to 289 keys per window.

    Key order: own 49 | 132 cyclically rolled neighbours | 25 pooled-target | clip0 49 | clip1 25 | clip2 9.
    """

    def __init__(self, dim: int, heads: int, owner: NVDS):
        super().__init__()
        self._owner = [owner]
        self.dim, self.heads = dim, heads
        self.scale = (dim // heads) ** -0.5
        area = WINDOW * WINDOW
        # Parameters first, then buffers, in upstream's order (the checkpoint order).
        self.relative_position_bias_table = nn.Parameter(torch.zeros((2 * WINDOW - 1) ** 2, heads))
        self.relative_position_bias_table_to_neighbors = nn.Parameter(torch.zeros(1, heads, area, rolled_key_count()))
        self.relative_position_bias_table_to_windows_0 = nn.Parameter(
            torch.zeros(heads, (WINDOW + FOCAL_WINDOW - 1) ** 2))
        for k, kern in enumerate(FOCAL_KERNEL_CLIPS):
            setattr(self, f"relative_position_bias_table_to_windows_clips_{k}",
                    nn.Parameter(torch.zeros(heads, (WINDOW + kern - 1) ** 2)))
        self.register_buffer("relative_position_index", relative_position_index(WINDOW))
        self.register_buffer("valid_ind_rolled", valid_rolled_indices())
        self.register_buffer("relative_position_index_0", relative_position_index(FOCAL_WINDOW))
        for k, kern in enumerate(FOCAL_KERNEL_CLIPS):
            self.register_buffer(f"relative_position_index_clips_{k}", relative_position_index(kern))
        self.qkv = nn.Linear(dim, dim * 3)
        self.proj = nn.Linear(dim, dim)
        self.softmax = nn.Softmax(dim=-1)
        # Stateless, kept for the faithful form: pooled target, then clips 0..2.
        self.unfolds = nn.ModuleList([nn.Unfold(FOCAL_WINDOW, padding=FOCAL_WINDOW // 2, stride=1)])
        self.unfolds_clips = nn.ModuleList([nn.Unfold(k, padding=k // 2, stride=lvl)
                                            for lvl, k in zip(FOCAL_L_CLIPS, FOCAL_KERNEL_CLIPS)])

    def group_biases(self) -> list[torch.Tensor]:
        """Position biases per key group, each ``[heads, 49, keys]``, in key order."""
        area = WINDOW * WINDOW
        own = self.relative_position_bias_table.index_select(0, self.relative_position_index.reshape(-1))
        biases = [own.reshape(area, area, -1).permute(2, 0, 1), self.relative_position_bias_table_to_neighbors[0]]
        tables = [(self.relative_position_bias_table_to_windows_0, self.relative_position_index_0)] + [
            (getattr(self, f"relative_position_bias_table_to_windows_clips_{k}"),
             getattr(self, f"relative_position_index_clips_{k}")) for k in range(len(FOCAL_KERNEL_CLIPS))]
        for table, index in tables:
            biases.append(table.index_select(1, index.reshape(-1)).reshape(self.heads, area, -1))
        return biases

    def forward(self, target, pooled, clips, tier: Tier):
        """Faithful form: rolls, ``nn.Unfold`` and run-time masks added through slice assignment."""
        b, hp, wp, c = target.shape
        nwh, nww = tier.windows
        nw = nwh * nww
        heads, hd = self.heads, c // self.heads

        qkv = self.qkv(target)
        q, k, v = qkv[..., :c], qkv[..., c:2 * c], qkv[..., 2 * c:]
        q_win, k_win, v_win = (_windows(t, nwh, nww, heads) for t in (q, k, v))  # [B, nW, heads, 49, hd]
        k_parts, v_parts = [k_win], [v_win]
        rolled_k, rolled_v = [], []
        for shift in ROLL_SHIFTS:
            # cyclic: keys that wrap around the border are not masked, as upstream
            rolled_k.append(_windows(torch.roll(k, shift, dims=(1, 2)), nwh, nww, heads))
            rolled_v.append(_windows(torch.roll(v, shift, dims=(1, 2)), nwh, nww, heads))
        k_parts.append(torch.cat(rolled_k, dim=3).index_select(3, self.valid_ind_rolled))
        v_parts.append(torch.cat(rolled_v, dim=3).index_select(3, self.valid_ind_rolled))

        sources = [(pooled, self.unfolds[0], (FOCAL_WINDOW, 1))] + [
            (clip, self.unfolds_clips[i], (kern, lvl))
            for i, (clip, lvl, kern) in enumerate(zip(clips, FOCAL_L_CLIPS, FOCAL_KERNEL_CLIPS))]
        masks = []
        for src, unfold, (kern, stride) in sources:
            kv = self.qkv(src)[..., c:]  # one projection for everything; padding comes after it (exact zeros)
            cols = unfold(kv.permute(0, 3, 1, 2)).reshape(b, 2 * c, kern * kern, nw).permute(0, 3, 2, 1)
            masks.append(unfold_mask(src.shape[1], src.shape[2], kern, stride, kern // 2).to(q.device, q.dtype))
            cols = cols.reshape(b, nw, kern * kern, 2, heads, hd).permute(3, 0, 1, 4, 2, 5)
            k_parts.append(cols[0])
            v_parts.append(cols[1])
        k_all = torch.cat(k_parts, dim=3)
        v_all = torch.cat(v_parts, dim=3)

        attn = (q_win * self.scale) @ k_all.transpose(-2, -1)  # [B, nW, heads, 49, N]
        offset = 0
        for i, bias in enumerate(self.group_biases()):
            end = offset + bias.shape[-1]
            attn[..., offset:end] = attn[..., offset:end] + bias
            if i >= 2:  # the pooled-target and clip groups carry an unfold mask after their bias
                attn[..., offset:end] = attn[..., offset:end] + masks[i - 2][:, None, None, :]
            offset = end
        out = self.softmax(attn) @ v_all  # [B, nW, heads, 49, hd]
        return self.proj(out.transpose(2, 3).reshape(b, nw, WINDOW * WINDOW, c))

    def forward_static(self, windows, tokens, tier: Tier, h: int, w: int):
        """Static form (spec section 8), laid out for few data-movement operators in the exported graph.

        ``windows``: the normalised, padded target in window order ``[B, nW, 49, C]``; ``tokens``: the key
        sources as token lists ``[B, n_i, C]`` in the order of the table rows of ``key_table_index`` (padded
        target raster, pooled target, clips 0..2). Returns the projected attention output, un-partitioned
        and cropped: ``[B, h, w, C]``.

        * q, k and v come from the qkv weight split per head, ``[heads, C, hd]``: a broadcast matmul yields
          them head-major, with no Split and no head transpose (the Linear's dot products, so bitwise).
        * Keys and values are projected once for all sources, a zero row is appended (the unfold's zero
          padding comes after the projection), and one Gather with a per-tier index assembles each window's
          289 keys: no rolls, no unfold slices, no concatenation of key groups.
        * The attention runs batched over heads x windows; its output is merged over heads and un-partitioned
          by one transpose, and cropped before ``proj`` (a per-token Linear, so the crop commutes).
        """
        focal = self._owner[0].Stabilizer.decoder_focal
        b, nw, area, c = windows.shape
        heads, hd = self.heads, c // self.heads
        nwh, nww = tier.windows
        keys = focal.key_index.numel() // nw
        weight = self.qkv.weight.reshape(3, heads, hd, c).transpose(-2, -1)  # [q/k/v, heads, C, hd]
        bias = self.qkv.bias.reshape(3, heads, 1, hd)
        q = windows.reshape(b, 1, nw * area, c) @ weight[0] + bias[0]  # [B, heads, nW*49, hd]
        table = torch.cat(tokens, dim=1)[:, None]  # [B, 1, rows, C]
        k, v = (F.pad(table @ weight[i] + bias[i], (0, 0, 0, 1)).index_select(2, focal.key_index) for i in (1, 2))
        q = q.reshape(b, heads, nw, area, hd)
        k = k.reshape(b, heads, nw, keys, hd)
        v = v.reshape(b, heads, nw, keys, hd)
        attn = (q * self.scale) @ k.transpose(-2, -1)  # [B, heads, nW, 49, N]
        # Two full-width adds: each element sees the same float adds as the slice form (x + 0.0 is exact).
        attn = attn + torch.cat(self.group_biases(), dim=-1)[:, None]
        attn = attn + focal.mask_full
        out = self.softmax(attn) @ v  # [B, heads, nW, 49, hd]
        out = out.reshape(b, heads, nwh, nww, WINDOW, WINDOW, hd).permute(0, 2, 4, 3, 5, 1, 6)
        return self.proj(out.reshape(b, nwh * WINDOW, nww * WINDOW, c)[:, :h, :w])


def _windows(t, nwh: int, nww: int, heads: int):
    """``[B, Hp, Wp, C]`` -> ``[B, nW, heads, 49, hd]``, windows row-major, heads contiguous in C."""
    b, _, _, c = t.shape
    t = t.reshape(b, nwh, WINDOW, nww, WINDOW, heads, c // heads)
    return t.permute(0, 1, 3, 5, 2, 4, 6).reshape(b, nwh * nww, heads, WINDOW * WINDOW, c // heads)


def key_table_index(tier: Tier) -> torch.Tensor:
    """Static form: the table rows of each window's 289 keys, window-major, flattened ``[nW * 289]``.

    Table rows (``WindowAttention3d.forward_static``): the padded target (raster), the pooled target
    (nWh x nWw), the grids of clips 0..2 (raster), then one zero row for every key that the unfold reads
    from its zero padding. The rows are found by pushing row numbers through the faithful form's own data
    movement (window partition, cyclic roll, valid-neighbour selection, Unfold), so the key order is the
    faithful one by construction.
    """
    hp, wp = tier.padded
    nwh, nww = tier.windows
    grids = [(hp, wp), (nwh, nww)] + [(nwh * lvl, nww * lvl) for lvl in FOCAL_L_CLIPS]
    starts = [0]
    for gh, gw in grids:
        starts.append(starts[-1] + gh * gw)

    def rows(i):  # 1-based row numbers of grid i, [1, 1, h, w]; float64 holds them exactly, and Unfold pads with 0
        gh, gw = grids[i]
        return (torch.arange(gh * gw, dtype=torch.float64, device="cpu") + starts[i] + 1).reshape(1, 1, gh, gw)

    target = rows(0).permute(0, 2, 3, 1)  # [1, Hp, Wp, 1]
    groups = [_windows(target, nwh, nww, 1)]  # [1, nW, 1, 49, 1]
    rolled = [_windows(torch.roll(target, shift, dims=(1, 2)), nwh, nww, 1) for shift in ROLL_SHIFTS]
    groups.append(torch.cat(rolled, dim=3).index_select(3, valid_rolled_indices()))
    for i, (kern, stride) in enumerate(UNFOLDS, start=1):
        cols = F.unfold(rows(i), kern, padding=kern // 2, stride=stride)  # [1, kk, nW]
        groups.append(cols.transpose(1, 2)[:, :, None, :, None])
    index = torch.cat(groups, dim=3).reshape(-1).to(torch.int64) - 1
    return torch.where(index < 0, starts[-1], index)


# ------------------------------------------------------------------------------------------------
# Deterministic index buffers and masks (in the checkpoint; recomputed for the self-test)


def relative_position_index(key_side: int, query_side: int = WINDOW) -> torch.Tensor:
    """Index of a ``query_side``-square window against a ``key_side``-square key grid (spec 2.3)."""
    # Explicit CPU: deterministic constants, also when the model is built under a meta-device context.
    q = torch.arange(query_side, device="cpu")
    k = torch.arange(key_side, device="cpu")
    qy, qx = torch.meshgrid(q, q, indexing="ij")
    ky, kx = torch.meshgrid(k, k, indexing="ij")
    dy = qy.reshape(-1, 1) - ky.reshape(1, -1) + key_side - 1
    dx = qx.reshape(-1, 1) - kx.reshape(1, -1) + key_side - 1
    return dy * (query_side + key_side - 1) + dx


def valid_rolled_indices() -> torch.Tensor:
    """Of the 4 rolled copies (tl, tr, bl, br) of a window, drop the block that overlaps the window itself."""
    e = EXPAND
    masks = []
    for rows, cols in ((slice(None, -e), slice(None, -e)), (slice(None, -e), slice(e, None)),
                       (slice(e, None), slice(None, -e)), (slice(e, None), slice(e, None))):
        m = torch.ones(WINDOW, WINDOW, device="cpu")
        m[rows, cols] = 0
        masks.append(m)
    return torch.stack(masks).flatten().nonzero().reshape(-1)


def rolled_key_count() -> int:
    return 4 * WINDOW * WINDOW - 4 * (WINDOW - EXPAND) ** 2


def unfold_mask(h: int, w: int, kern: int, stride: int, pad: int) -> torch.Tensor:
    """``[L, kern*kern]``: -100 where the unfold reads its own zero padding, else 0."""
    ones = torch.ones(1, 1, h, w, device="cpu")
    cols = F.unfold(ones, kern, padding=pad, stride=stride)[0].transpose(0, 1)  # [L, kk]
    return torch.zeros_like(cols).masked_fill(cols == 0, MASK_FILL)


def index_buffers() -> dict[str, torch.Tensor]:
    """The 6 index buffers of every focal attention, by their attribute name."""
    out = {"relative_position_index": relative_position_index(WINDOW), "valid_ind_rolled": valid_rolled_indices(),
           "relative_position_index_0": relative_position_index(FOCAL_WINDOW)}
    for k, kern in enumerate(FOCAL_KERNEL_CLIPS):
        out[f"relative_position_index_clips_{k}"] = relative_position_index(kern)
    return out


def parameter_count(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


__all__ = ["NVDS", "NvdsConfig", "NvdsBackbone", "NvdsHead", "Tier", "index_buffers", "parameter_count",
           "WINDOW_FRAMES", "ATTENTION_FORMS"]
