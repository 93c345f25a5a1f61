"""NVDS stabilisation head (``Stabilizer``, spec 2.2-2.4): MLP fusion of the four backbone feature maps,
focal cross-attention of the target frame to its three reference frames, then conv refinement up to full
resolution with the RGB edge features.

Each module has the faithful forward pass (the published computation) and, where the ONNX graph needs it,
a static one (spec section 8) that computes the same function with sizes from the ``Tier`` and fewer
layout operators; the two agree to within float32 rounding (see ``stereo3d.models.nvds.attention``).
Attribute names are upstream's (checkpoint keys ``Stabilizer.*``).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from stereo3d.models.nvds.attention import (
    TierTables,
    WindowAttention3d,
    key_table_index,
    rolled_key_count,
    unfold_mask,
)
from stereo3d.models.nvds.config import (
    FOCAL_KERNEL_CLIPS,
    FOCAL_L_CLIPS,
    FOCAL_WINDOW,
    WINDOW,
    WINDOW_FRAMES,
    NvdsConfig,
    Tier,
)


class StabilizationNetwork(nn.Module):
    """``static``: the form the model computes in (``NVDS.attention``), fixed when it is built."""

    def __init__(self, config: NvdsConfig, static: bool):
        super().__init__()
        e, d = config.embed_dim, config.decoder_channels
        self.static = static
        self.conv_seg = nn.Conv2d(d[1], 1, 1)  # upstream base-class leftover: unused, but in the checkpoint
        self.dropout = nn.Dropout2d(0.1)
        for i in (4, 3, 2, 1):  # registration order = checkpoint order
            setattr(self, f"linear_c{i}", MLP(config.mit_dims[i - 1], e))
        self.linear_fuse = nn.Sequential(nn.Conv2d(4 * e, e, 1, bias=False), nn.ReLU())
        self.decoder_focal = FocalLayer(config, static)
        self.ffm2 = FFM(e, d[0], d[1], up=2)
        self.ffm1 = FFM(d[1], d[1], d[2], up=2)
        self.ffm0 = FFM(d[2], d[2], d[3], up=1)
        self.AO = AO(d[3], 1)

    def forward(self, feats, edge_feat, edge_feat1, tier: Tier):
        static = self.static
        c1 = feats[0]
        n = c1.shape[0]
        size = tier.stage(1)
        fused = []
        for i in (4, 3, 2, 1):
            c = feats[i - 1]
            h, w = tier.stage(i)
            proj = getattr(self, f"linear_c{i}").proj
            if static:
                # Weight on the left keeps the map channels-first: the same dot products without the two
                # transposes around a token-major Linear. Not the same float operations (the bias is added after
                # the product, where the Linear fuses it into addmm), so equal to within float rounding. The
                # faithful form leaves channels-last views and torch picks its conv kernels by memory format, so
                # match it: the convolutions below then run the faithful form's kernels (another kernel may round
                # differently), and the layout change is no operator at all in the ONNX graph.
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
        self.conv_branch = nn.Sequential(
            nn.ReLU(), nn.Conv2d(mid, mid, 3, 1, 1), nn.ReLU(), nn.Conv2d(mid, mid, 3, 1, 1)
        )

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
        self.adapt_conv = nn.Sequential(
            nn.Conv2d(cin, cin // 2, 3, 1, 1),
            nn.ReLU(),
            nn.Upsample(scale_factor=1, mode="bilinear", align_corners=True),
            nn.Conv2d(cin // 2, cout, 1),
        )

    def forward(self, x, static: bool):
        if not static:
            return self.adapt_conv(x)
        conv0, relu, _, conv3 = self.adapt_conv
        return conv3(relu(conv0(x)))


class FocalLayer(nn.Module):
    """``BasicLayer3d3``: the blocks refine the target (last) frame; the reference frames pass through unchanged,
    so only the refined target ``[B, h, w, C]`` is returned."""

    def __init__(self, config: NvdsConfig, static: bool):
        super().__init__()
        self.static = static
        dim, heads, ratio = config.focal_dim, config.focal_heads, config.focal_mlp_ratio
        self.blocks = nn.ModuleList([FocalBlock(dim, heads, ratio) for _ in range(config.focal_depth)])

    def prepare(self, tier: Tier) -> None:
        # One [nW, 1, N] mask for all blocks: 181 zero columns then the four unfold masks.
        nwh, nww = tier.windows
        groups = [(nwh, nww, FOCAL_WINDOW, 1)] + [
            (nwh * lvl, nww * lvl, k, lvl) for lvl, k in zip(FOCAL_L_CLIPS, FOCAL_KERNEL_CLIPS)
        ]
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
        if self.static:
            # The references are the same in every block: split them off once instead of re-stacking all 4
            # frames after each block. The per-tier index buffers are this layer's, handed to its blocks.
            *refs, target = x.unbind(1)
            cells = {k: getattr(self, f"cell_index_{k}") for k, lvl in enumerate(FOCAL_L_CLIPS) if WINDOW // lvl > 1}
            tables = TierTables(self.key_index, self.mask_full, cells)
            for blk in self.blocks:
                target = blk.forward_static(target, refs, tier, tables)
            return target
        for blk in self.blocks:
            x = blk(x, tier)
        return x[:, -1]


class FocalBlock(nn.Module):
    """``CffmTransformerBlock3d3``: focal cross-attention of the target frame to the 3 reference frames."""

    def __init__(self, dim: int, heads: int, mlp_ratio: int):
        super().__init__()
        self.pool_layers = nn.ModuleList([nn.Linear(WINDOW * WINDOW, 1)])
        self.pool_layers_clips = nn.ModuleList([nn.Linear((WINDOW // lvl) ** 2, 1) for lvl in FOCAL_L_CLIPS])
        self.norm1 = nn.LayerNorm(dim)
        self.attn = WindowAttention3d(dim, heads)
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
                ref = F.interpolate(
                    ref.permute(0, 3, 1, 2), size=(ph * cell, pw * cell), mode="bilinear", align_corners=False
                ).permute(0, 2, 3, 1)
            clips.append(self.pool_layers_clips[k](_window_cells(ref, ph, pw, cell)).flatten(-2))
        out = self.attn(target, pooled, clips, tier)  # [B, nW, 49, C]
        out = out.reshape(b, nwh, nww, WINDOW, WINDOW, c).permute(0, 1, 3, 2, 4, 5).reshape(b, hp, wp, c)
        out = x[:, -1] + out[:, :h, :w]
        out = out + self.mlp(self.norm2(out))
        return torch.cat([x[:, :-1], out.unsqueeze(1)], dim=1)

    def forward_static(self, target, refs, tier: Tier, tables: TierTables):
        """Static form: the target ``[B, h, w, C]`` and the 3 reference maps -> the refined target (``tables``: the
        layer's per-tier indices and masks).

        The function of ``forward`` (equal to it to within float rounding) with few layout operators: the
        references are never re-stacked, the target is window-partitioned once (for its pooling and the
        queries), the pooling Linears take their weight on the left so cells stay channels-last, and every key
        source goes into one token table from which the attention gathers its keys
        (``WindowAttention3d.forward_static``).
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
                ref = F.interpolate(
                    ref.permute(0, 3, 1, 2), size=(ph * cell, pw * cell), mode="bilinear", align_corners=False
                ).permute(0, 2, 3, 1)
            layer = self.pool_layers_clips[k]
            if cell == 1:  # clips 0 and 1: no cells to gather, the Linear(1, 1) acts per element
                tokens.append(_scale_shift(ref, layer).reshape(b, ph * pw, c))
                continue
            # Clip 2: a Gather of whole rows of C. As a transpose ONNX Runtime would merge it with the one back
            # from the resize's channels-first layout into a 6-D transpose with 3-float runs, 4x slower.
            pooled = ref.reshape(b, -1, c).index_select(1, tables.cells[k]).reshape(b, ph * pw, cell * cell, c)
            tokens.append(_pool_cells(pooled, layer))
        out = self.attn.forward_static(windows, tokens, tier, h, w, tables)  # [B, h, w, C]
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
    cells need not be moved to the last axis (the same dot products, the bias added after them rather than fused:
    equal to the Linear to within float rounding)."""
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
