"""NVDS backbone: the SegFormer Mix Vision Transformer (MiT) with a 4-channel RGBD stem (spec 2.1).

Four stages, each an overlapping strided-conv patch embedding, ``mit_depths[i]`` transformer blocks with
spatially reduced attention and a depth-wise conv in the MLP, and a LayerNorm; it returns the four feature
maps c1..c4 (strides 4, 8, 16, 32). Frames are processed independently, which is what lets the split export
run the backbone once per frame and cache its features. Attribute names are upstream's (checkpoint keys
``backbone.*``).
"""

from __future__ import annotations

import torch
from torch import nn

from stereo3d.models.nvds.config import NvdsConfig


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
