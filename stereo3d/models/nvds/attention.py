"""NVDS focal window attention (``WindowAttention3d3``, spec 2.3, 3.5, 8) and its deterministic index tables.

Each 7x7 window of the target frame attends to 289 keys: its own 49 tokens, 132 cyclically rolled
neighbours, 25 from the window-pooled target, and 49 + 25 + 9 from the three pooled reference clips.

Two forms of the same function:

* ``forward`` (faithful): the published computation: rolls, ``nn.Unfold``, and biases and masks added
  through slice assignment, with the masks built at run time; any size.
* ``forward_static`` (spec section 8): each window's keys gathered by one per-tier index
  (``key_table_index``) from one projected key table, one full-width bias add and one full-width mask add,
  head-major q/k/v. It is not the same sequence of float operations: the q/k/v biases are added after the
  matrix products (``nn.Linear`` fuses them into addmm) and the products run per head, so a BLAS may round
  some values differently. The two agree to within float32 rounding, not bitwise (``tests/test_nvds_model.py``
  bounds the difference).

The index buffers (``relative_position_index*``, ``valid_ind_rolled``) are in the checkpoint; the functions
here recompute them, so a loaded checkpoint can be checked against them.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from stereo3d.models.nvds.config import (
    EXPAND,
    FOCAL_KERNEL_CLIPS,
    FOCAL_L_CLIPS,
    FOCAL_WINDOW,
    MASK_FILL,
    ROLL_SHIFTS,
    UNFOLDS,
    WINDOW,
    Tier,
)


class TierTables(NamedTuple):
    """The static form's per-tier tables, buffers of the focal layer (``FocalLayer.prepare``) that its blocks and
    their attention read: each window's key rows, the unfold masks, and each pooled clip's cell partition (clip ->
    a row permutation; only clips whose cells hold more than one row)."""

    key_index: torch.Tensor
    mask_full: torch.Tensor
    cells: dict[int, torch.Tensor]


class WindowAttention3d(nn.Module):
    """``WindowAttention3d3``: 7x7 target windows attend to 289 keys per window.

    Key order: own 49 | 132 cyclically rolled neighbours | 25 pooled-target | clip0 49 | clip1 25 | clip2 9.
    """

    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.dim, self.heads = dim, heads
        self.scale = (dim // heads) ** -0.5
        area = WINDOW * WINDOW
        # Parameters first, then buffers, in upstream's order (the checkpoint order).
        self.relative_position_bias_table = nn.Parameter(torch.zeros((2 * WINDOW - 1) ** 2, heads))
        self.relative_position_bias_table_to_neighbors = nn.Parameter(torch.zeros(1, heads, area, rolled_key_count()))
        self.relative_position_bias_table_to_windows_0 = nn.Parameter(
            torch.zeros(heads, (WINDOW + FOCAL_WINDOW - 1) ** 2)
        )
        for k, kern in enumerate(FOCAL_KERNEL_CLIPS):
            setattr(
                self,
                f"relative_position_bias_table_to_windows_clips_{k}",
                nn.Parameter(torch.zeros(heads, (WINDOW + kern - 1) ** 2)),
            )
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
        self.unfolds_clips = nn.ModuleList(
            [nn.Unfold(k, padding=k // 2, stride=lvl) for lvl, k in zip(FOCAL_L_CLIPS, FOCAL_KERNEL_CLIPS)]
        )

    def group_biases(self) -> list[torch.Tensor]:
        """Position biases per key group, each ``[heads, 49, keys]``, in key order."""
        area = WINDOW * WINDOW
        own = self.relative_position_bias_table.index_select(0, self.relative_position_index.reshape(-1))
        biases = [own.reshape(area, area, -1).permute(2, 0, 1), self.relative_position_bias_table_to_neighbors[0]]
        tables = [(self.relative_position_bias_table_to_windows_0, self.relative_position_index_0)] + [
            (
                getattr(self, f"relative_position_bias_table_to_windows_clips_{k}"),
                getattr(self, f"relative_position_index_clips_{k}"),
            )
            for k in range(len(FOCAL_KERNEL_CLIPS))
        ]
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
        q, k, v = qkv[..., :c], qkv[..., c : 2 * c], qkv[..., 2 * c :]
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
            for i, (clip, lvl, kern) in enumerate(zip(clips, FOCAL_L_CLIPS, FOCAL_KERNEL_CLIPS))
        ]
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

    def forward_static(self, windows, tokens, tier: Tier, h: int, w: int, tables: TierTables):
        """Static form (spec section 8), laid out for few data-movement operators in the exported graph.

        ``windows``: the normalised, padded target in window order ``[B, nW, 49, C]``; ``tokens``: the key
        sources as token lists ``[B, n_i, C]`` in the order of the table rows of ``key_table_index`` (padded
        target raster, pooled target, clips 0..2). Returns the projected attention output, un-partitioned
        and cropped: ``[B, h, w, C]``.

        * q, k and v come from the qkv weight split per head, ``[heads, C, hd]``: a broadcast matmul yields
          them head-major, with no Split and no head transpose. The Linear's dot products, but run per head
          with the bias added afterwards (``nn.Linear`` fuses it into one addmm), so a BLAS may round some
          values differently: equal to within float rounding, not bitwise.
        * Keys and values are projected once for all sources, a zero row is appended (the unfold's zero
          padding comes after the projection), and one Gather with a per-tier index assembles each window's
          289 keys: no rolls, no unfold slices, no concatenation of key groups.
        * The attention runs batched over heads x windows; its output is merged over heads and un-partitioned
          by one transpose, and cropped before ``proj`` (a per-token Linear, so the crop commutes).
        """
        b, nw, area, c = windows.shape
        heads, hd = self.heads, c // self.heads
        nwh, nww = tier.windows
        keys = tables.key_index.numel() // nw
        weight = self.qkv.weight.reshape(3, heads, hd, c).transpose(-2, -1)  # [q/k/v, heads, C, hd]
        bias = self.qkv.bias.reshape(3, heads, 1, hd)
        q = windows.reshape(b, 1, nw * area, c) @ weight[0] + bias[0]  # [B, heads, nW*49, hd]
        table = torch.cat(tokens, dim=1)[:, None]  # [B, 1, rows, C]
        k, v = (F.pad(table @ weight[i] + bias[i], (0, 0, 0, 1)).index_select(2, tables.key_index) for i in (1, 2))
        q = q.reshape(b, heads, nw, area, hd)
        k = k.reshape(b, heads, nw, keys, hd)
        v = v.reshape(b, heads, nw, keys, hd)
        attn = (q * self.scale) @ k.transpose(-2, -1)  # [B, heads, nW, 49, N]
        # Two full-width adds: each element sees the same float adds as the slice form (x + 0.0 is exact).
        attn = attn + torch.cat(self.group_biases(), dim=-1)[:, None]
        attn = attn + tables.mask_full
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
    for rows, cols in (
        (slice(None, -e), slice(None, -e)),
        (slice(None, -e), slice(e, None)),
        (slice(e, None), slice(None, -e)),
        (slice(e, None), slice(e, None)),
    ):
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
    out = {
        "relative_position_index": relative_position_index(WINDOW),
        "valid_ind_rolled": valid_rolled_indices(),
        "relative_position_index_0": relative_position_index(FOCAL_WINDOW),
    }
    for k, kern in enumerate(FOCAL_KERNEL_CLIPS):
        out[f"relative_position_index_clips_{k}"] = relative_position_index(kern)
    return out
